#!/bin/sh
# Whatever moment SIGINT, SIGTERM or SIGHUP arrives, the run finishes the step it is in,
# `last` holds the latest completed step, and the message says which step that is:
#  1. SIGINT during a validation pass, with no periodic checkpoints (ckpt_interval 0);
#  2. SIGTERM during a validation pass between periodic checkpoints (ckpt_interval 3);
#  3. SIGHUP (a closed terminal) while training: like SIGTERM, exit 129.
# The validation pass is made long (300k tokens on one thread, over a second) and the signal
# is sent once log.jsonl shows the train line of the step being validated.
. tests/e2e/lib.sh
OPTS="-q -c tests/configs/micro.yaml --set train.max_steps=1000 --set train.eval_interval=5
      --set train.eval_tokens=300000 --set data.split=[0.5,0.5,0] --set train.threads=1"
step_of() { $TXL info "$1" --json 2>/dev/null | jq -r .step; }
# in_eval DIR: waits until DIR/log.jsonl has the train line of step 5 (the eval starts then)
in_eval() { wait_trained "$1/log.jsonl" 5; }

# run_sig NAME SIGNAL CKPT_INTERVAL: trains into TMP/NAME and signals it during the step-5
# validation; sets rc and s (the step last holds)
run_sig() {
    # shellcheck disable=SC2086
    $TXL train $OPTS --set train.ckpt_interval=$3 --set train.out_dir=$TMP/$1 >/dev/null 2>$TMP/$1.err &
    pid=$!
    in_eval $TMP/$1
    kill -$2 $pid
    wait $pid
    rc=$?
    s=$(step_of $TMP/$1/last.safetensors.gz)
    evals=$(jq -c 'select(.event=="eval") | .step' $TMP/$1/log.jsonl | tr '\n' ' ')
    trained=$(jq -c 'select(.event=="train") | .step' $TMP/$1/log.jsonl | tail -1)
}

echo "-- SIGINT during validation, ckpt_interval 0"
run_sig int INT 0
check "exit 130 (got $rc)" test $rc -eq 130
check "the signal came during the step-5 validation (evals at: $evals; last train line: $trained)" \
    test "$evals" = "5 " -a "$trained" = 5
check "last exists and holds step 5 (got '$s')" test "$s" = 5
check "the message says last holds step 5: $(tail -1 $TMP/int.err)" \
    grep -q "interrupted: checkpoint written at step 5 " $TMP/int.err

echo "-- SIGTERM during validation, a checkpoint every 3 steps"
run_sig term TERM 3
check "exit 143 (got $rc)" test $rc -eq 143
check "the signal came during the step-5 validation (evals at: $evals; last train line: $trained)" \
    test "$evals" = "5 " -a "$trained" = 5
check "last holds step 5, not the periodic step 3 (got '$s')" test "$s" = 5
check "the message says step 5: $(tail -1 $TMP/term.err)" \
    grep -q "terminated: checkpoint written at step 5 " $TMP/term.err

echo "-- SIGHUP while training"
# shellcheck disable=SC2086
$TXL train $OPTS --set train.eval_interval=0 --set train.ckpt_interval=0 --set train.out_dir=$TMP/hup >/dev/null 2>$TMP/hup.err &
pid=$!
wait_trained $TMP/hup/log.jsonl 3
kill -HUP $pid
wait $pid
rc=$?
s=$(step_of $TMP/hup/last.safetensors.gz)
trained=$(jq -c 'select(.event=="train") | .step' $TMP/hup/log.jsonl | tail -1)
check "exit 129 (got $rc)" test $rc -eq 129
check "last holds the last step trained ($s, log: $trained)" test -n "$s" -a "$s" = "$trained"
check "the message names it: $(tail -1 $TMP/hup.err)" grep -q "hung up: checkpoint written at step $s " $TMP/hup.err
finish
