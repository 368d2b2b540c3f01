#!/bin/sh
# The end of a run is on record: the result line of stdout is also out_dir/summary.json and
# the `end` event of log.jsonl, with the reason the run ended (max_steps, --steps,
# max_minutes, SIGINT/SIGTERM/SIGHUP); the `start` event holds the txl version and the
# command line (argv, JSON-escaped). summary.json is written atomically and never through a
# planted link; a run that starts removes the previous one, so a run that dies leaves none.
. tests/e2e/lib.sh
OPTS="-q -c tests/configs/micro.yaml --set train.warmup_steps=1 --set train.eval_tokens=2000
      --set train.threads=1"
VERSION=$($TXL --version | cut -d' ' -f2)

echo "-- a run to max_steps"
# quotes, a backslash and a tab in the out_dir: the paths in the JSON are escaped
R="$TMP/run \"q\" b\\s	t"
# shellcheck disable=SC2086
$TXL train $OPTS --set train.max_steps=4 --set "train.out_dir=$R" > $TMP/out 2>$TMP/err
check "exit 0 ($(head -c 200 $TMP/err))" test $? -eq 0
check "stdout: one JSON object" jq -e -s 'length == 1' $TMP/out
check "summary.json is the stdout line, byte for byte" cmp -s $TMP/out "$R/summary.json"
check "summary: the fields and reason max_steps" jq -e '.step == 4 and .tokens == 1024 and
    .train_loss > 0 and .grad_norm > 0 and .skipped_steps == 0 and .best_valid_loss > 0 and
    .best_valid_bpc > 0 and .peak_rss_mb > 0 and .elapsed_s >= 0 and .reason == "max_steps"' \
    "$R/summary.json"
check "summary: the checkpoint path, escaped and read back intact" \
    test "$(jq -r .checkpoint "$R/summary.json")" = "$R/last.safetensors.gz"
check "log.jsonl: every line parses" jq -e . "$R/log.jsonl"
check "log.jsonl: the last event is end, with the summary's fields" \
    test "$(tail -1 "$R/log.jsonl" | jq -c 'del(.event)')" = "$(jq -c . "$R/summary.json")" -a \
         "$(tail -1 "$R/log.jsonl" | jq -r .event)" = end
jq -c 'select(.event == "start")' "$R/log.jsonl" > $TMP/start
check "start event: version $VERSION" jq -e --arg v "$VERSION" '.version == $v' $TMP/start
# shellcheck disable=SC2086
set -- $TXL train $OPTS --set train.max_steps=4 --set "train.out_dir=$R"
for a in "$@"; do jq -n --arg a "$a" '$a'; done | jq -s -c . > $TMP/argv.want
check "start event: argv is the command line, every argument intact" \
    test "$(jq -c .argv $TMP/start)" = "$(cat $TMP/argv.want)"
check "start event: the other fields stay" jq -e '.step == 0 and .resume == false and
    .params > 0 and (.blas_core | length) > 0 and .train_tokens > 0 and .ranks == 1' $TMP/start

echo "-- --steps, then the time budget"
# shellcheck disable=SC2086
$TXL train $OPTS --set train.max_steps=100 --set "train.out_dir=$R" --resume "$R" --steps 2 \
    > $TMP/out2 2>$TMP/err
check "--resume --steps 2: exit 0" test $? -eq 0
check "summary.json is the new run's: step 6, reason --steps" \
    jq -e '.step == 6 and .reason == "--steps"' "$R/summary.json"
check "log.jsonl: two end events (the first run's stays)" \
    test "$(jq -r 'select(.event == "end") | "\(.step) \(.reason)"' "$R/log.jsonl" | tr '\n' ,)" = "4 max_steps,6 --steps,"
check "start event of the resume: resume true, its own argv" \
    jq -e -s '[.[] | select(.event == "start")] | length == 2 and .[1].resume and
              (.[1].argv | index("--steps")) != null' "$R/log.jsonl"
# shellcheck disable=SC2086
$TXL train $OPTS --set train.max_steps=1000000 --set train.max_minutes=0.002 \
    --set train.eval_interval=0 --set train.ckpt_interval=0 --set train.out_dir=$TMP/budget \
    > /dev/null 2>$TMP/err
check "max_minutes 0.002: exit 0 ($(head -c 200 $TMP/err))" test $? -eq 0
check "reason max_minutes" jq -e '.reason == "max_minutes" and .step < 1000000' $TMP/budget/summary.json

echo "-- a signal"
# shellcheck disable=SC2086
$TXL train $OPTS --set train.max_steps=1000000 --set train.eval_interval=0 \
    --set train.ckpt_interval=0 --set train.out_dir=$TMP/sig > $TMP/out3 2>$TMP/err &
pid=$!
wait_trained $TMP/sig/log.jsonl 3
kill -INT $pid
wait $pid
rc=$?
check "SIGINT: exit 130 (got $rc)" test $rc -eq 130
check "summary.json: reason SIGINT" jq -e '.reason == "SIGINT"' $TMP/sig/summary.json
check "no validation yet: best_valid_loss and best_valid_bpc are null (no Infinity in JSON)" \
    jq -e '.best_valid_loss == null and .best_valid_bpc == null' $TMP/out3
check "the end event says SIGINT" test "$(tail -1 $TMP/sig/log.jsonl | jq -r .reason)" = SIGINT

echo "-- a run that dies leaves no summary; planted links"
rm $TMP/sig/log.jsonl # so that wait_trained sees the new run's (last.safetensors.gz stays)
# shellcheck disable=SC2086
$TXL train $OPTS --set train.max_steps=1000000 --set train.eval_interval=0 \
    --set train.ckpt_interval=0 --set train.out_dir=$TMP/sig --force > /dev/null 2>&1 &
pid=$!
wait_trained $TMP/sig/log.jsonl 2
kill -KILL $pid
wait $pid 2>/dev/null
check "SIGKILL: the previous run's summary.json is gone" test ! -e $TMP/sig/summary.json
check "  ... and no temp file is left" test -z "$(ls $TMP/sig | grep tmp)"
V=$TMP/victims
mkdir -p $V
echo precious > $V/summary
echo precious > $V/tmp
ln -s $V/summary $TMP/sig/summary.json
ln -s $V/tmp $TMP/sig/summary.json.tmp
# shellcheck disable=SC2086
$TXL train $OPTS --set train.max_steps=3 --set train.out_dir=$TMP/sig --force > /dev/null 2>$TMP/err
check "--force over planted summary.json and summary.json.tmp links: exit 0 ($(head -c 200 $TMP/err))" \
    test $? -eq 0
check "  ... their targets are untouched" \
    test "$(cat $V/summary)" = precious -a "$(cat $V/tmp)" = precious
check "  ... summary.json is a file of its own, of this run" \
    sh -c "test ! -L $TMP/sig/summary.json && jq -e '.step == 3' $TMP/sig/summary.json"
check "  ... the temp link is gone" test ! -e $TMP/sig/summary.json.tmp -a ! -L $TMP/sig/summary.json.tmp
finish
