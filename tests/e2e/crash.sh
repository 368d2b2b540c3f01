#!/bin/sh
# A crash never loses a run (doc/design.md, "Checkpoints": checkpoint writes are atomic):
#  1. kill -9 at random moments, several times, with a checkpoint written after every step
#     (so many kills land inside a write; two are aimed at one): `last` always loads, and
#     --resume continues (and removes the temp files of the killed writes); the finished run
#     has exactly the weights of an uninterrupted one;
#  2. a full disk (a small tmpfs) during a checkpoint write: exit 1 naming the file and the
#     error, the previous checkpoint byte for byte intact, no temp file left behind;
#  3. a read-only out_dir: exit 2 before training starts;
#  4. log.jsonl on a disk of its own that fills (the checkpoints still fit): the run stops
#     at the next step with exit 1 naming the file, reason log_error, last at that step
#     (it went on to its end with exit 0, its log cut and missing every later event).
# 2, 3 and 4 need `mount` (root in a VM or a privileged container); without it they are
# skipped with a message.
. tests/e2e/lib.sh
. tests/e2e/badlib.inc
MNT=
cleanup() {
    for m in $MNT; do umount "$m" 2>/dev/null; done
    rm -rf "$TMP"
}
trap cleanup EXIT
CFG=tests/configs/micro.yaml
N=60
OPTS="-q -c $CFG --set train.max_steps=$N --set train.warmup_steps=10 --set train.eval_interval=0
      --set train.eval_tokens=2000 --set train.log_interval=1 --set train.ckpt_interval=1
      --set train.threads=1"
RUN=$TMP/run
LAST=$RUN/last.safetensors.gz
step_of() { $TXL info "$1" --json 2>/dev/null | jq -r .step; }
rand() { od -An -N2 -tu2 /dev/urandom | awk -v lo="$1" -v hi="$2" '{print lo + $1 % (hi - lo + 1)}'; }
logged() { n=$(grep -c '"event":"train"' $RUN/log.jsonl 2>/dev/null); echo "${n:-0}"; }

echo "-- kill -9 at random moments (a checkpoint after every step)"
# shellcheck disable=SC2086
$TXL train $OPTS --set train.out_dir=$RUN >/dev/null 2>$TMP/train.err &
pid=$!
i=0
while [ ! -e $LAST ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i + 1)); done
prev=0
kills=0; midwrite=0
k=1
while [ $k -le 6 ]; do
    if [ $k -gt 1 ]; then
        # shellcheck disable=SC2086
        $TXL train $OPTS --set train.out_dir=$RUN --resume $LAST >/dev/null 2>$TMP/train.err &
        pid=$!
    fi
    if [ $k -eq 3 ] || [ $k -eq 5 ]; then
        # aim: wait for the next temp file of a checkpoint write, then kill
        sleep 0.3
        i=0
        while ! ls $RUN/last.safetensors.gz.tmp.* >/dev/null 2>&1 && [ $i -lt 2000 ]; do i=$((i + 1)); done
        how="while a checkpoint was being written"
    else
        # a random moment: 1 to 4 more logged steps, then 0 to 300 ms
        want=$(($(logged) + $(rand 1 4)))
        i=0
        while [ "$(logged)" -lt $want ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i + 1)); done
        sleep "0.$(printf %03d "$(rand 0 300)")"
        how="at a random moment"
    fi
    kill -9 $pid 2>/dev/null
    wait $pid 2>/dev/null
    rc=$?
    kills=$((kills + 1))
    [ -n "$(ls $RUN/last.safetensors.gz.tmp.* 2>/dev/null)" ] && [ $k -eq 3 -o $k -eq 5 ] && midwrite=$((midwrite + 1))
    s=$(step_of $LAST)
    check "kill -9 #$k $how (exit $rc): last loads, at step $s" test -n "$s" -a "$s" != null
    check "...and no step was lost (step $s >= $prev)" test "${s:-0}" -ge "$prev"
    check "...eval reads it" $TXL eval $LAST --max-tokens 3000 -q
    prev=${s:-0}
    k=$((k + 1))
done
check "at least one kill landed inside a checkpoint write ($midwrite; their temp files stay until the next run)" test $midwrite -ge 1
check "the killed runs made progress (step $prev)" test "$prev" -gt 1
check "no damaged file was renamed into place (every checkpoint in the run loads)" sh -c \
    "for f in $RUN/*.safetensors.gz; do $TXL info \$f >/dev/null || exit 1; done"
# shellcheck disable=SC2086
$TXL train $OPTS --set train.out_dir=$RUN --resume $LAST --set train.ckpt_interval=0 >/dev/null 2>$TMP/final.err
rc=$?
check "--resume after $kills kills finishes the run (exit $rc)" test $rc -eq 0
check "...at step $N" test "$(step_of $LAST)" = $N
check "...and the temp files of the killed runs are gone" test -z "$(ls -a $RUN | grep '\.tmp')"
# shellcheck disable=SC2086
$TXL train $OPTS --set train.out_dir=$TMP/ref --set train.ckpt_interval=0 >/dev/null 2>&1 || bad "reference run"
$TXL export $LAST -o $TMP/a.safetensors 2>/dev/null
$TXL export $TMP/ref/last.safetensors.gz -o $TMP/b.safetensors 2>/dev/null
st_data $TMP/a.safetensors > $TMP/a.data
st_data $TMP/b.safetensors > $TMP/b.data
check "the killed-and-resumed run has exactly the weights of an uninterrupted one" cmp -s $TMP/a.data $TMP/b.data

echo "-- a full disk during a checkpoint write"
mkdir -p $TMP/full
if mount -t tmpfs -o size=3m tmpfs $TMP/full 2>/dev/null; then
    MNT="$MNT $TMP/full"
    F=$TMP/full/run
    # shellcheck disable=SC2086
    $TXL train $OPTS --set train.out_dir=$F --steps 2 >/dev/null 2>$TMP/full.err
    check "a run fits on the 3 MiB disk (exit $?)" test -s $F/last.safetensors.gz
    before=$(sha256sum < $F/last.safetensors.gz)
    s0=$(step_of $F/last.safetensors.gz)
    dd if=/dev/zero of=$TMP/full/fill bs=4096 2>/dev/null   # fills the disk (and fails)
    truncate -s -48K $TMP/full/fill                          # room for config and log, not for a checkpoint
    # shellcheck disable=SC2086
    $TXL train $OPTS --set train.out_dir=$F --resume $F/last.safetensors.gz --steps 2 >/dev/null 2>$TMP/full.err
    rc=$?
    check "the checkpoint write fails with exit 1 (got $rc)" test $rc -eq 1
    check "...and says which file and why: $(head -c 200 $TMP/full.err)" \
        grep -q "last.safetensors.gz: write failed: No space left on device (the previous file, if any, is untouched)" $TMP/full.err
    check "...the previous checkpoint is byte for byte intact" test "$before" = "$(sha256sum < $F/last.safetensors.gz)"
    check "...and loads, at step $s0" test "$(step_of $F/last.safetensors.gz)" = "$s0"
    check "...no temp file is left on the full disk" test -z "$(ls $F | grep '\.tmp')"
    rm -f $TMP/full/fill
    # shellcheck disable=SC2086
    $TXL train $OPTS --set train.out_dir=$F --resume $F/last.safetensors.gz --steps 2 >/dev/null 2>$TMP/full.err
    check "with room again, --resume continues (exit $?)" test "$(step_of $F/last.safetensors.gz)" = $((s0 + 2))
else
    echo "  skip full disk: cannot mount a tmpfs here (not root, or a container without CAP_SYS_ADMIN)"
fi

echo "-- log.jsonl cannot be written (its own disk is full), the checkpoints can"
mkdir -p $TMP/logfs
if mount -t tmpfs -o size=8k tmpfs $TMP/logfs 2>/dev/null; then
    MNT="$MNT $TMP/logfs"
    L=$TMP/lrun
    # shellcheck disable=SC2086
    $TXL train $OPTS --set train.out_dir=$L --steps 2 >/dev/null 2>$TMP/l.err
    cp $L/log.jsonl $TMP/logfs/log.jsonl
    if mount --bind $TMP/logfs/log.jsonl $L/log.jsonl 2>/dev/null; then
        MNT="$L/log.jsonl $MNT"
        # shellcheck disable=SC2086
        $TXL train $OPTS --set train.out_dir=$L --resume $L --steps 40 >/dev/null 2>$TMP/l.err
        rc=$?
        umount $L/log.jsonl
        check "the run whose log fills its disk stops, exit 1 (got $rc)" test $rc -eq 1
        check "...and says which file and why: $(head -c 200 $TMP/l.err)" \
            grep -q "$L/log.jsonl: cannot append the events from step [0-9]* on: No space left on device; the run stopped" $TMP/l.err
        s=$(step_of $L/last.safetensors.gz)
        check "...before its 40 steps, last written where it stopped (step $s)" test "$s" -lt 42
        check "...summary.json says log_error at that step" \
            jq -e --argjson s "$s" '.reason == "log_error" and .step == $s' $L/summary.json
    else
        echo "  skip full log disk: cannot bind-mount a file here"
    fi
else
    echo "  skip full log disk: cannot mount a tmpfs here"
fi

echo "-- a read-only out_dir"
mkdir -p $TMP/ro
if mount -t tmpfs -o size=1m,ro tmpfs $TMP/ro 2>/dev/null; then
    MNT="$MNT $TMP/ro"
    expect2 "new run under a read-only directory" "train.out_dir $TMP/ro/run: cannot create: Read-only file system" \
        $TXL train $OPTS --set train.out_dir=$TMP/ro/run
    expect2 "new run in a read-only directory" "train.out_dir $TMP/ro: not writable: Read-only file system" \
        $TXL train $OPTS --set train.out_dir=$TMP/ro
    mkdir -p $TMP/robind
    if mount --bind $RUN $TMP/robind 2>/dev/null && MNT="$TMP/robind $MNT" &&
       mount -o remount,ro,bind $TMP/robind 2>/dev/null; then
        guard_init $RUN
        expect2 "--resume into a run directory that became read-only" "train.out_dir $TMP/robind: not writable: Read-only file system" \
            $TXL train $OPTS --set train.out_dir=$TMP/robind --set train.max_steps=$((N + 10)) --resume $TMP/robind/last.safetensors.gz
    else
        echo "  skip read-only bind mount: not permitted here"
    fi
    check "...none of them started training (no log.jsonl under the read-only mount)" test ! -e $TMP/ro/run/log.jsonl
else
    echo "  skip read-only out_dir: cannot mount a tmpfs here (as root, chmod does not stop writes)"
fi
finish
