#!/bin/sh
# The run directory belongs to one run at a time, and txl writes nothing through a link:
#  1. a second `txl train` into an out_dir a run is using (a new run with --force, or a
#     --resume) exits 2 naming the holder's pid, and writes nothing there;
#  2. temp files a killed run left (config.yaml.tmp, summary.json.tmp, checkpoint temps, the write probe) are
#     removed when the next run takes the directory; other files stay;
#  3. a log.jsonl already there is a run (exit 2 without --resume or --force); a planted
#     symlink (log.jsonl, config.yaml, config.yaml.tmp, .txl.lock) never has its target
#     written or truncated.
. tests/e2e/lib.sh
. tests/e2e/badlib.inc
OPTS="-q -c tests/configs/micro.yaml --set train.eval_interval=0 --set train.warmup_steps=1
      --set train.threads=1"
step_of() { $TXL info "$1" --json 2>/dev/null | jq -r .step; }

echo "-- two runs, one out_dir"
R=$TMP/run
# shellcheck disable=SC2086
$TXL train $OPTS --set train.max_steps=100000 --set train.ckpt_interval=5 --set train.out_dir=$R >/dev/null 2>$TMP/a.err &
pid=$!
wait_trained $R/log.jsonl 6
# shellcheck disable=SC2086
expect2 "a second new run (--force) into it" "train.out_dir $R is in use by another txl train (pid $pid" \
    $TXL train $OPTS --set train.max_steps=50 --set train.out_dir=$R --force
# shellcheck disable=SC2086
expect2 "a --resume into it" "train.out_dir $R is in use by another txl train (pid $pid" \
    $TXL train $OPTS --set train.max_steps=100000 --set train.out_dir=$R --resume $R/last.safetensors.gz --steps 3
kill -TERM $pid
wait $pid
rc=$?
check "the first run ends normally on SIGTERM (exit $rc)" test $rc -eq 143
check "...its log.jsonl is whole JSON lines (no interleaving)" jq -e . $R/log.jsonl
check "...its config.yaml is its own (max_steps 100000)" grep -q "^  max_steps: 100000$" $R/config.yaml
check "...its log.jsonl holds one run: steps 1, 2, 3, ... without a second start" \
    test "$(jq -r 'select(.event=="start") | .step' $R/log.jsonl | tr '\n' ' ')" = "0 " -a \
         "$(jq -r 'select(.event=="train") | .step' $R/log.jsonl | awk '$1 != NR {print "bad"}')" = ""
s=$(step_of $R/last.safetensors.gz)
# shellcheck disable=SC2086
$TXL train $OPTS --set train.max_steps=$((s + 2)) --set train.out_dir=$R --resume $R/last.safetensors.gz >/dev/null 2>$TMP/b.err
check "once it is gone, --resume takes the directory (exit $?: $(head -c 200 $TMP/b.err))" \
    test "$(step_of $R/last.safetensors.gz)" = $((s + 2))

echo "-- stale temp files of a killed run"
for f in config.yaml.tmp summary.json.tmp last.safetensors.gz.tmp.AbC123 best.safetensors.gz.tmp.x0Y9zZ \
         last.safetensors.tmp.q1W2e3 .txl-write-test.Zz9Yy8; do
    echo litter > $R/$f
done
echo keep > $R/notes.txt
echo keep > $R/last.safetensors.gz.tmp.not-a-temp
# shellcheck disable=SC2086
$TXL train $OPTS --set train.max_steps=$((s + 3)) --set train.out_dir=$R --resume $R/last.safetensors.gz >/dev/null 2>$TMP/c.err
check "--resume into it works (exit $?: $(head -c 200 $TMP/c.err))" test "$(step_of $R/last.safetensors.gz)" = $((s + 3))
check "...and removed the 6 temp files" test -z "$(cd $R && ls -a | grep -e '\.tmp' -e write-test | grep -v not-a-temp)"
check "...but not other files" test -f $R/notes.txt -a -f $R/last.safetensors.gz.tmp.not-a-temp

echo "-- log.jsonl already there"
mkdir -p $TMP/logonly
echo '{"event":"start","step":0}' > $TMP/logonly/log.jsonl
guard_init $TMP/logonly
# shellcheck disable=SC2086
expect2 "a new run into a directory holding only a log.jsonl" "train.out_dir $TMP/logonly already holds a run;;log.jsonl;;--force" \
    $TXL train $OPTS --set train.max_steps=3 --set train.out_dir=$TMP/logonly
GUARD_DIRS=
# shellcheck disable=SC2086
$TXL train $OPTS --set train.max_steps=3 --set train.out_dir=$TMP/logonly --force >/dev/null 2>&1
check "--force starts over: the log holds the new run only" \
    test "$(jq -c 'select(.event=="start") | .step' $TMP/logonly/log.jsonl | wc -l)" -eq 1 -a \
         "$(jq -c 'select(.event=="train")' $TMP/logonly/log.jsonl | wc -l)" -eq 3

echo "-- planted symlinks"
V=$TMP/victims
mkdir -p $V $TMP/sym
for f in log config tmp lock; do echo "precious $f" > $V/$f; done
ln -s $V/log $TMP/sym/log.jsonl
ln -s $V/config $TMP/sym/config.yaml
ln -s $V/tmp $TMP/sym/config.yaml.tmp
guard_init $V
# shellcheck disable=SC2086
expect2 "a new run into a directory with a log.jsonl link" "already holds a run" \
    $TXL train $OPTS --set train.max_steps=3 --set train.out_dir=$TMP/sym
# shellcheck disable=SC2086
$TXL train $OPTS --set train.max_steps=3 --set train.out_dir=$TMP/sym --force >/dev/null 2>$TMP/sym.err
check "--force trains there (exit $?: $(head -c 200 $TMP/sym.err))" test "$(step_of $TMP/sym/last.safetensors.gz)" = 3
guard_sum > $TMP/guard.end
check "...and no link target was written or truncated" cmp -s $TMP/guard.sum $TMP/guard.end
check "...log.jsonl and config.yaml are files of their own now" test ! -L $TMP/sym/log.jsonl -a ! -L $TMP/sym/config.yaml
ln -sf $V/log $TMP/sym/log.jsonl
# shellcheck disable=SC2086
expect2 "--resume with a log.jsonl link" "log.jsonl: a symbolic link" \
    $TXL train $OPTS --set train.max_steps=100 --set train.out_dir=$TMP/sym --resume $TMP/sym/last.safetensors.gz --steps 1
rm -f $TMP/sym/log.jsonl $TMP/sym/.txl.lock
ln -s $V/lock $TMP/sym/.txl.lock
# shellcheck disable=SC2086
expect2 "a .txl.lock link" ".txl.lock: a symbolic link" \
    $TXL train $OPTS --set train.max_steps=100 --set train.out_dir=$TMP/sym --resume $TMP/sym/last.safetensors.gz --steps 1
finish
