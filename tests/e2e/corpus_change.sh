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

# an epoch of one segment (8 streams of 33 tokens): every step after the first starts an
# epoch, so the read that fails is an epoch's first. The state stays the last step's: it
# counted the epoch and emptied the memory before the read, so `last` had epoch = step and
# no memory (which a resume refuses: a checkpoint to resume holds the memory)
E1=$TMP/epoch
mkdir -p $E1
gunzip -c tests/data/tinyshakespeare.txt.gz | head -c 300 > $E1/c.txt
# shellcheck disable=SC2086
$TXL train $OPTS --set data.train=$E1/c.txt --set train.max_steps=1000000 \
    --set train.out_dir=$E1/run >/dev/null 2>$E1/err &
pid=$!
wait_trained $E1/run/log.jsonl 5 || bad "the one-segment run did not get going: $(head -c 300 $E1/err)"
truncate -s 100 $E1/c.txt
wait $pid
rc=$?
$TXL info $E1/run/last.safetensors.gz --json > $E1/info.json 2>&1
check "one-segment epochs, truncated: exit 2 (exit $rc), last written" test $rc -eq 2 -a -s $E1/info.json
check "...holding the last step's memory and epoch (epoch = step - 1): $(jq -c '{step, epoch, has_memory}' $E1/info.json)" \
    jq -e '.has_memory and .epoch == .step - 1' $E1/info.json
gunzip -c tests/data/tinyshakespeare.txt.gz | head -c 300 > $E1/c.txt
s=$(step_of $E1/run/last.safetensors.gz)
# shellcheck disable=SC2086
$TXL train $OPTS --set data.train=$E1/c.txt --set train.max_steps=$((s + 3)) \
    --set train.out_dir=$E1/run --resume $E1/run/last.safetensors.gz >/dev/null 2>$E1/resume.err
check "...and --resume continues from it (exit $?: $(head -c 200 $E1/resume.err))" \
    test "$(step_of $E1/run/last.safetensors.gz)" = $((s + 3))

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
