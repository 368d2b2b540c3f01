#!/bin/sh
# Results that do not reach stdout are a failure: every command that prints a result (eval
# and probe --json (shift, recall, needle), sample with one, several and interactive samples, info plain, --json and
# --system, train's --print-config, --dry-run and the result line of a run), with stdout on
# /dev/full (ENOSPC) and closed (>&-, EBADF), exits 1 with "txl CMD: writing the results to
# stdout: <why>". Sample stops at the first failed write; a training run still writes its
# checkpoints and summary.json (also when a pipe's reader is gone and SIGPIPE ends it at
# the result line), and a signal's exit code (130) stands. A command that prints
# nothing (export) is not bothered by a closed stdout, and a closed stdout never lends its
# number to a file txl opens (the run's log.jsonl stays clean).
. tests/e2e/lib.sh
TRAIN="-q -c tests/configs/micro.yaml --set train.warmup_steps=1 --set train.eval_tokens=2000
       --set train.threads=1"
# shellcheck disable=SC2086
$TXL train $TRAIN --set train.max_steps=5 --set train.out_dir=$TMP/run >/dev/null 2>$TMP/err ||
    bad "training: $(cat $TMP/err)"
CK=$TMP/run/last.safetensors.gz

# full LABEL CMD ARGS...: runs txl CMD ARGS with stdout on /dev/full, then with stdout
# closed; each must exit 1 and say why on stderr
full() {
    label=$1 name=$2
    shift
    "$TXL" "$@" >/dev/full 2>$TMP/full.err </dev/null
    rc=$?
    check "$label > /dev/full: exit 1 (got $rc)" test $rc -eq 1
    check "  ... says so: $(head -1 $TMP/full.err | cut -c1-100)" \
        grep -q "^txl $name: writing the results to stdout: No space left on device" $TMP/full.err
    check "  ... and only that (no empty 'txl $name: ' line before it)" test "$(grep -c . $TMP/full.err)" -eq 1
    "$TXL" "$@" >&- 2>$TMP/closed.err </dev/null
    rc=$?
    check "$label >&-: exit 1 (got $rc)" test $rc -eq 1
    check "  ... says so: $(head -1 $TMP/closed.err | cut -c1-100)" \
        grep -q "^txl $name: writing the results to stdout: Bad file descriptor" $TMP/closed.err
    check "  ... and only that" test "$(grep -c . $TMP/closed.err)" -eq 1
}
EV="--data tests/data/enwik8_slice60k.txt.gz --max-tokens 2000 -q --threads 1"
# shellcheck disable=SC2086
full "eval --json" eval $CK $EV --json
# shellcheck disable=SC2086
full "eval --sweep 1,2 (a table)" eval $CK $EV --sweep 1,2
# shellcheck disable=SC2086
full "eval --term-stats" eval $CK $EV --term-stats 2
# shellcheck disable=SC2086
full "probe shift --json" probe shift $CK $EV --json
# shellcheck disable=SC2086
full "probe recall --json" probe recall $CK $EV --json --trials 2 --distances 16,32 --string-len 8
# shellcheck disable=SC2086
full "probe needle --json" probe needle $CK $EV --json --trials 2 --lengths 2 --depths 0,100
# shellcheck disable=SC2086
full "probe needle (a table)" probe needle $CK $EV --trials 2 --lengths 2 --depths 50
full "sample (one sample)" sample $CK -p "ROMEO:" -n 40 -q
full "sample --num-samples 3" sample $CK -p "ROMEO:" -n 40 --num-samples 3 -q
full "info" info $CK
full "info --json" info $CK --json
full "info --system" info --system
# shellcheck disable=SC2086
full "train --print-config" train $TRAIN --print-config
# shellcheck disable=SC2086
full "train --dry-run" train $TRAIN --set train.out_dir=$TMP/dry --dry-run
check "  ... --dry-run created nothing" test ! -e $TMP/dry

# sample -i: the answers go nowhere
printf 'ROMEO:\nJULIET:\n' | $TXL sample $CK -i -n 20 -q >/dev/full 2>$TMP/err
rc=$?
check "sample -i > /dev/full: exit 1 (got $rc)" test $rc -eq 1
check "  ... says so" grep -q "^txl sample: writing the results to stdout: No space left" $TMP/err
printf 'ROMEO:\nJULIET:\n' | $TXL sample $CK -i -n 20 -q >&- 2>$TMP/err
rc=$?
check "sample -i >&-: exit 1 (got $rc)" test $rc -eq 1
check "  ... says so" grep -q "^txl sample: writing the results to stdout: Bad file descriptor" $TMP/err

# sample stops at the first failed write: far fewer than the 20000 tokens asked for
$TXL sample $CK -p "ROMEO:" -n 20000 --stats -q >/dev/full 2>$TMP/err
rc=$?
toks=$(grep '^{' $TMP/err | jq .tokens)
check "sample -n 20000 > /dev/full: exit 1, stops early ($toks tokens)" \
    test $rc -eq 1 -a "${toks:-99999}" -lt 100

# a training run: the checkpoints and summary.json are written, the exit code says stdout failed
# shellcheck disable=SC2086
$TXL train $TRAIN --set train.max_steps=3 --set train.out_dir=$TMP/full >/dev/full 2>$TMP/err
rc=$?
check "train > /dev/full: exit 1 (got $rc)" test $rc -eq 1
check "  ... says so" grep -q "^txl train: writing the results to stdout: No space left" $TMP/err
check "  ... summary.json and last written" \
    jq -e '.step == 3' $TMP/full/summary.json
check "  ... last loads" $TXL info $TMP/full/last.safetensors.gz
# shellcheck disable=SC2086
$TXL train $TRAIN --set train.max_steps=3 --set train.out_dir=$TMP/closed >&- 2>$TMP/err
rc=$?
check "train >&-: exit 1 (got $rc)" test $rc -eq 1
check "  ... says so" grep -q "^txl train: writing the results to stdout: Bad file descriptor" $TMP/err
check "  ... summary.json written, log.jsonl holds only events" \
    sh -c "jq -e '.step == 3' $TMP/closed/summary.json && jq -e -s 'all(has(\"event\"))' $TMP/closed/log.jsonl"

# stdout a pipe whose reader is gone (`| true`): SIGPIPE ends txl at the result line, as it
# ends any program (exit 141), but after the run's own record: summary.json and the end
# event were written after stdout, and lost with it
# shellcheck disable=SC2086
{ $TXL train $TRAIN --set train.max_steps=3 --set train.out_dir=$TMP/pipe 2>$TMP/err; echo $? > $TMP/pipe.rc; } | true
rc=$(cat $TMP/pipe.rc)
check "train | true: killed by SIGPIPE at the result line (exit $rc)" test "$rc" -eq 141
check "  ... summary.json written" jq -e '.step == 3' $TMP/pipe/summary.json
check "  ... and the end event" sh -c "tail -1 $TMP/pipe/log.jsonl | jq -e '.event == \"end\" and .step == 3'"

# a signal's exit code stands: SIGINT with stdout on /dev/full exits 130, not 1
# shellcheck disable=SC2086
$TXL train $TRAIN --set train.max_steps=100000 --set train.eval_interval=0 \
    --set train.out_dir=$TMP/sig >/dev/full 2>$TMP/sig.err &
pid=$!
wait_trained $TMP/sig/log.jsonl 2 || bad "the run to interrupt did not start"
kill -INT $pid
wait $pid
rc=$?
check "train > /dev/full, SIGINT: exit 130 (got $rc)" test $rc -eq 130
check "  ... says stdout failed too" grep -q "writing the results to stdout" $TMP/sig.err

# nothing printed, nothing lost: export with stdout closed exits 0
$TXL export $CK -o $TMP/w.safetensors -q >&- 2>$TMP/err
rc=$?
check "export >&- (prints nothing on stdout): exit 0 (got $rc)" test $rc -eq 0 -a -s $TMP/w.safetensors
finish
