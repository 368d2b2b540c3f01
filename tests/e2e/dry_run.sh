#!/bin/sh
# txl train --dry-run checks what a run checks before it writes (config, --set, the data,
# out_dir not holding a run, a --resume or --init-from checkpoint), prints the plan on
# stderr and one JSON object on stdout, and exits 0 without creating or touching out_dir.
# Its numbers are those of the real run; a plan of ~100 GiB needs no memory to print.
. tests/e2e/lib.sh
. tests/e2e/badlib.inc
OPTS="-c tests/configs/micro.yaml --set train.warmup_steps=1 --set train.eval_tokens=2000
      --set train.threads=1"
# listing DIR: every file (hidden ones too) with its size, mtime and checksum
listing() { (cd "$1" && find . -type f -o -type l | LC_ALL=C sort | while read -r f; do
    printf '%s %s ' "$f" "$(stat -c '%s %Y' "$f")"; sha256sum < "$f"; done); }

echo "-- a new run"
N=$TMP/new/run
# shellcheck disable=SC2086
$TXL train $OPTS --set train.max_steps=6 --set train.out_dir=$N --dry-run > $TMP/dry.json 2>$TMP/dry.err
check "exit 0 ($(head -c 200 $TMP/dry.err))" test $? -eq 0
check "out_dir is not created (nor its parent)" test ! -e $TMP/new
check "stdout: one JSON object" jq -e -s 'length == 1' $TMP/dry.json
check "the plan on stderr" grep -q "^txl train: xl, 2 layers, d_model 64" $TMP/dry.err
check "the JSON: config, out_dir, tokens per step, splits, steps" jq -e --arg n "$N" '
    .config == "tests/configs/micro.yaml" and .out_dir == $n and .resume == null and
    .tokens_per_step == 256 and .train_tokens == 1003854 and .valid_tokens == 55770 and
    .train_bytes == 1003854 and .test_bytes == 55770 and .start_step == 0 and
    .max_steps == 6 and .steps == 6 and .threads == 1 and .ranks == 1 and .pos_scheme == "xl"' \
    $TMP/dry.json
check "steps_per_epoch: the segments of a pass, ceil((floor(T / B) - 1) / tgt_len)" \
    jq -e '.steps_per_epoch == 3922 and (.epochs - 6 / 3922 | fabs) < 1e-4' $TMP/dry.json
# shellcheck disable=SC2086
$TXL train $OPTS --set train.max_steps=6 --set train.out_dir=$N -q > /dev/null 2>$TMP/err
jq -c 'select(.event == "start")' $N/log.jsonl > $TMP/start
check "params and estimate_mib equal the real run's (start event)" \
    test "$(jq -c '[.params, .estimate_mib]' $TMP/dry.json)" = "$(jq -c '[.params, .estimate_mib]' $TMP/start)"
check "params as info reports them" \
    test "$(jq .params $TMP/dry.json)" = "$($TXL info $N --json 2>/dev/null | jq .params)"

echo "-- an out_dir holding a run: refused, untouched, unless --resume or --force"
listing $N > $TMP/before
# shellcheck disable=SC2086
expect2 "a new run into it" "train.out_dir $N already holds a run" \
    $TXL train $OPTS --set train.max_steps=6 --set train.out_dir=$N --dry-run
# shellcheck disable=SC2086
$TXL train $OPTS --set train.max_steps=6 --set train.out_dir=$N --dry-run --force -q > $TMP/f.json 2>$TMP/f.err
check "--force: exit 0, no plan on stderr with -q" test $? -eq 0 -a ! -s $TMP/f.err
# shellcheck disable=SC2086
$TXL train $OPTS --set train.max_steps=20 --set train.out_dir=$N --resume $N --dry-run > $TMP/r.json 2>$TMP/r.err
check "--resume RUN_DIR: exit 0 ($(tail -1 $TMP/r.err | head -c 200))" test $? -eq 0
check "  ... from step 6, 14 steps to go" jq -e --arg l "$N/last.safetensors.gz" \
    '.start_step == 6 and .steps == 14 and .resume == $l' $TMP/r.json
$TXL train --resume $N --set train.max_steps=20 --steps 3 --dry-run -q > $TMP/r2.json 2>$TMP/err
check "--resume alone (the checkpoint's config), --steps 3: 3 steps to go" \
    jq -e '.config == null and .start_step == 6 and .steps == 3' $TMP/r2.json
expect2 "--resume of a finished run" "the run is already at step 6 >= train.max_steps 6" \
    $TXL train --resume $N --dry-run
# shellcheck disable=SC2086
expect2 "--resume with another model" "the model config differs from the checkpoint's" \
    $TXL train $OPTS --set train.max_steps=20 --set model.d_inner=256 --set train.out_dir=$N --resume $N --dry-run
# shellcheck disable=SC2086
expect2 "--init-from with other shapes" "--init-from $N: parameter shapes differ" \
    $TXL train $OPTS --set model.d_inner=256 --set train.out_dir=$TMP/ft --init-from $N --dry-run
# shellcheck disable=SC2086
$TXL train $OPTS --set model.tgt_len=16 --set train.out_dir=$TMP/ft --init-from $N --dry-run -q > $TMP/i.json 2>$TMP/err
check "--init-from with the same shapes: exit 0 ($(head -c 200 $TMP/err))" jq -e '.init_from != null and .tokens_per_step == 128' $TMP/i.json
check "  ... and no out_dir" test ! -e $TMP/ft
listing $N > $TMP/after
check "the run directory is untouched: no file added, changed or re-timed" cmp -s $TMP/before $TMP/after

echo "-- bad input: exit 2, nothing created"
# shellcheck disable=SC2086
expect2 "a missing corpus" "$TMP/nothere.txt" \
    $TXL train $OPTS --set data.train=$TMP/nothere.txt --set train.out_dir=$TMP/bad --dry-run
# shellcheck disable=SC2086
expect2 "a model the scheme refuses (rope, odd d_head)" "d_head" \
    $TXL train $OPTS --set model.pos_scheme=rope --set model.d_head=31 --set train.out_dir=$TMP/bad --dry-run
check "  ... no out_dir" test ! -e $TMP/bad

echo "-- the ready configs plan as they stand (only the corpus pointed at the test one)"
# a word config's cutoffs need its vocabulary: <eos>, the corpus's own <unk> and 267,733
# other distinct words are WikiText-103's 267,735 tokens (the text is its own valid and
# test split)
{ seq 1 267733 | sed 's/^/w/' | paste -d ' ' - - - - -; echo '<unk>'; } > $TMP/words.txt
for c in configs/*.yaml; do
    data="--set data.train=tests/data/enwik8_slice60k.txt.gz"
    grep -q '^  tokenizer: word' "$c" && data="--set data.train=$TMP/words.txt
        --set data.valid=$TMP/words.txt --set data.test=$TMP/words.txt"
    # shellcheck disable=SC2086
    $TXL train -c "$c" $data \
        --set train.out_dir=$TMP/ready --dry-run -q > $TMP/ready.json 2>$TMP/ready.err
    check "$c: exit 0 ($(head -c 200 $TMP/ready.err))" test $? -eq 0
    check "  ... its scheme and file in the plan" \
        jq -e --arg s "$(sed -n 's/^  pos_scheme: //p' "$c")" --arg c "$c" \
        '.params > 0 and .pos_scheme == $s and .config == $c' $TMP/ready.json
    case $c in */wt103_base.yaml) check "  ... the parameter table's 151,107,538 (the paper's 151M)" \
        jq -e '.params == 151107538' $TMP/ready.json ;; esac
done
check "  ... no out_dir" test ! -e $TMP/ready
# the commands the configs' headers show name flags txl has (wt103_base's eval line said
# "txl has no such flag" of --same-length, which it has)
for c in configs/*.yaml; do
    grep -o -E '^# +txl (eval|train|sample|probe) .*' "$c" | sed 's/^# *//' > $TMP/hdr.cmds
    while read -r line; do
        cmd=$(echo "$line" | cut -d ' ' -f 2)
        for f in $(echo "$line" | grep -o -E -- ' --?[a-z][a-z-]*' ); do
            check "$c: '$f' of its header's 'txl $cmd' line is a flag of txl $cmd" \
                sh -c "$TXL __complete --options $cmd | tr ' ' '\n' | grep -q -x -e '$f'"
        done
    done < $TMP/hdr.cmds
done
check "configs/wt103_base.yaml: the paper's evaluation, --same-length included" \
    grep -q -e '^#   txl eval runs/wt103_base --split test --tgt-len 128 --mem-len 1600 --clamp-len 1000 --same-length$' configs/wt103_base.yaml
check_not "  ... and no 'no such flag'" grep -q 'no such flag' configs/wt103_base.yaml

echo "-- a plan far larger than memory"
# the paper's enwik8 model with batch 256: ~100 GiB of activations, planned in a few MiB
limit_vm 2000000 $TXL train -c configs/enwik8_base.yaml --set data.train=tests/data/tinyshakespeare.txt.gz \
    --set train.batch_size=256 --set train.out_dir=$TMP/big --dry-run -q > $TMP/big.json 2>$TMP/big.err
check "exit 0 under a 2 GB address-space limit ($(head -c 200 $TMP/big.err))" test $? -eq 0
check "  ... the estimate is over 50 GiB, 41M parameters" \
    jq -e '.estimate_mib > 51200 and .params == 41082112' $TMP/big.json
check "  ... no out_dir" test ! -e $TMP/big

echo "-- data.train=- reads standard input (as eval --data - does)"
# --set data.train=- was YAML's list item: "expected a path, found a list"
$TXL train -c tests/configs/micro.yaml --set data.train=- --set train.out_dir=$TMP/stdin \
    --dry-run -q < tests/data/tinyshakespeare.txt.gz > $TMP/stdin.json 2>$TMP/stdin.err
check "--set data.train=- with a gzip'd corpus on stdin: planned ($(head -c 120 $TMP/stdin.err))" \
    jq -e '.train_bytes == 1003854' $TMP/stdin.json
$TXL train -c tests/configs/micro.yaml --set data.train=- --set train.max_steps=3 \
    --set train.eval_interval=0 --set train.warmup_steps=1 --set train.out_dir=$TMP/stdin \
    -q < tests/data/tinyshakespeare.txt.gz > /dev/null 2>$TMP/stdin.err
check "  ... and trains from it" test "$(jq .step $TMP/stdin/summary.json)" = 3
check "  ... its config.yaml says \"-\"" grep -q '^  train: "-"$' $TMP/stdin/config.yaml
printf 'data:\n  train: [-]\n' > $TMP/list.yaml
$TXL train -c $TMP/list.yaml --dry-run >/dev/null 2>$TMP/list.err
check "a list where a path goes: exit 2, with the hint for stdin" sh -c "test $? -eq 2 &&
    grep -q 'list.yaml:2:10: data.train: expected a path, found a list (a bare - starts a YAML list: write \"-\" in quotes for standard input)' $TMP/list.err"
finish
