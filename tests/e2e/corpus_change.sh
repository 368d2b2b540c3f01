#!/bin/sh
# A corpus that changes under a training run (crash.sh style): a plain corpus is read in
# place, so truncating it while txl trains must end the run with exit 2 and a message
# naming the file (never SIGBUS, as when it was memory-mapped), after writing `last` at the
# last completed step; with the corpus whole again, --resume continues from there.
. tests/e2e/lib.sh
CFG=tests/configs/micro.yaml
RUN=$TMP/run
CORPUS=$TMP/corpus.txt
gunzip -c tests/data/tinyshakespeare.txt.gz > $CORPUS
OPTS="-q -c $CFG --set data.train=$CORPUS --set train.warmup_steps=5 --set train.eval_interval=0
      --set train.ckpt_interval=0 --set train.log_interval=1 --set train.threads=1"
step_of() { $TXL info "$1" --json 2>/dev/null | jq -r .step; }

# shellcheck disable=SC2086
$TXL train $OPTS --set train.max_steps=1000000 --set train.out_dir=$RUN >/dev/null 2>$TMP/train.err &
pid=$!
wait_trained $RUN/log.jsonl 5 || bad "the run did not get going: $(head -c 300 $TMP/train.err)"
truncate -s 1000 $CORPUS
wait $pid
rc=$?
n=$(grep -c '"event":"train"' $RUN/log.jsonl)
check "truncating the corpus mid-run: exit 2, not a crash (exit $rc)" test $rc -eq 2
check "...naming the file and what happened: $(head -c 300 $TMP/train.err)" \
    grep -qF "txl train: $CORPUS: the corpus was truncated while txl was reading it: byte" $TMP/train.err
s=$(step_of $RUN/last.safetensors.gz)
check "...after writing last, at the last completed step ($s of $n logged)" test "$s" = "$n"
check "...which the message names" grep -qF "$RUN/last.safetensors.gz still holds step $s" $TMP/train.err
gunzip -c tests/data/tinyshakespeare.txt.gz > $CORPUS
# shellcheck disable=SC2086
$TXL train $OPTS --set train.max_steps=$((s + 3)) --set train.out_dir=$RUN \
    --resume $RUN/last.safetensors.gz >/dev/null 2>$TMP/resume.err
check "with the corpus whole again, --resume continues (exit $?: $(head -c 200 $TMP/resume.err))" \
    test "$(step_of $RUN/last.safetensors.gz)" = $((s + 3))

# a corpus that shrank between runs: refused before any step (the split no longer matches
# the checkpoint's), and last stays as it was
before=$(sha256sum < $RUN/last.safetensors.gz)
truncate -s 1000 $CORPUS
# shellcheck disable=SC2086
$TXL train $OPTS --set train.max_steps=$((s + 10)) --set train.out_dir=$RUN \
    --resume $RUN/last.safetensors.gz >/dev/null 2>$TMP/resume.err
rc=$?
check "--resume on a corpus now too short: exit 2 (exit $rc: $(head -c 200 $TMP/resume.err))" test $rc -eq 2
check "...and last is untouched" test "$before" = "$(sha256sum < $RUN/last.safetensors.gz)"
finish
