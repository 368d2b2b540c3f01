#!/bin/sh
# End to end on tinyshakespeare: configs/tiny.yaml (batch 8) trains for a few hundred steps and the loss
# falls well below the corpus's unigram entropy; eval --json parses and is deterministic;
# a seeded sample is reproducible; info works. (Exactness against the reference lives in
# tests/e2e/reference_eval.sh and test_fixtures.)
. tests/e2e/lib.sh
DATA=tests/data/tinyshakespeare.txt.gz

# unigram entropy of the training split in nats/byte (the first 90% of the file)
H=$(zcat $DATA | head -c 1003854 | od -An -v -tu1 | tr -s ' ' '\n' | awk 'NF {c[$1]++; n++}
    END {for (k in c) {p = c[k] / n; h -= p * log(p)}; printf "%.4f", h}')
echo "  unigram entropy of the train split: $H nats/byte"

$TXL train -c configs/tiny.yaml --set data.train=$DATA --set data.split=[0.9,0.05,0.05] \
    --set train.out_dir=$TMP/run --set train.max_steps=300 --set train.warmup_steps=50 \
    --set train.eval_interval=150 --set train.log_interval=50 --set train.batch_size=8 -q \
    > $TMP/train.out 2>$TMP/train.err
rc=$?
check "tiny trains (exit $rc)" test $rc -eq 0
check "train prints a JSON result on stdout" jq -e .step $TMP/train.out
final=$(jq -r 'select(.event=="train") | .loss' $TMP/run/log.jsonl | tail -1)
echo "  final train loss $final nats (log.jsonl)"
check "loss $final well below the unigram entropy $H (by > 0.8 nats)" \
    awk -v l="$final" -v h="$H" 'BEGIN {exit !(l < h - 0.8)}'
check "log.jsonl: every line parses" jq -e . $TMP/run/log.jsonl
check "log.jsonl: train events carry the documented keys" \
    jq -s -e 'map(select(.event=="train")) | length > 0 and all(has("step") and has("tokens") and has("loss") and has("bpc") and has("lr") and has("grad_norm") and has("tok_per_s") and has("elapsed_s") and has("gemm_share"))' $TMP/run/log.jsonl
check "log.jsonl: gemm_share, the GEMMs' part of the threads' time, in (0, 1]" \
    jq -s -e 'map(select(.event=="train")) | all(.gemm_share > 0 and .gemm_share <= 1.001)' $TMP/run/log.jsonl
check "log.jsonl: eval events" jq -s -e 'map(select(.event=="eval")) | length == 2 and all(.split == "valid" and .tokens > 0 and has("loss") and has("bpc"))' $TMP/run/log.jsonl
check "config.yaml written and loadable" $TXL train -c $TMP/run/config.yaml --print-config
check "best and last checkpoints" test -s $TMP/run/best.safetensors.gz -a -s $TMP/run/last.safetensors.gz

$TXL eval $TMP/run/best.safetensors.gz --split test --json > $TMP/e1.json 2>/dev/null
check "eval --json parses with the documented keys" jq -e 'has("loss") and has("bpc") and has("ppl") and has("tokens") and has("tgt_len") and has("mem_len") and has("clamp_len") and has("batch") and has("data")' $TMP/e1.json
check "eval: gemm_share in (0, 1]" jq -e '.gemm_share > 0 and .gemm_share <= 1.001' $TMP/e1.json
check "eval: bpc = loss / ln 2" jq -e '(.bpc - .loss / 0.6931471805599453) | fabs < 1e-6' $TMP/e1.json
check "eval: every token after the first is scored once (T - 1)" jq -e '.tokens == 55770 - 1 and .bytes == .tokens and .anchor_tokens == 0' $TMP/e1.json
$TXL eval $TMP/run/best.safetensors.gz --split test --json > $TMP/e2.json 2>/dev/null
check "eval is deterministic" test "$(jq -c '[.loss, .tokens]' $TMP/e1.json)" = "$(jq -c '[.loss, .tokens]' $TMP/e2.json)"
$TXL eval $TMP/run/best.safetensors.gz --split test --json --sweep 1,2,4 > $TMP/sw.json 2>/dev/null
check "sweep: 3 rows" test "$(wc -l < $TMP/sw.json)" -eq 3
check "sweep factor 1 equals plain eval" test "$(jq -c '.loss' $TMP/e1.json)" = "$(head -1 $TMP/sw.json | jq -c .loss)"
check "sweep: finite losses" jq -s -e 'all(.loss | isnan | not)' $TMP/sw.json

$TXL sample $TMP/run/best.safetensors.gz --prompt "ROMEO:" -n 200 --seed 3 > $TMP/s1.txt
$TXL sample $TMP/run/best.safetensors.gz --prompt "ROMEO:" -n 200 --seed 3 > $TMP/s2.txt
$TXL sample $TMP/run/best.safetensors.gz --prompt "ROMEO:" -n 200 --seed 4 > $TMP/s3.txt
check "sample: 200 bytes, and a newline unless the 200th is one" \
    test "$(wc -c < $TMP/s1.txt)" -eq "$(head -c 200 $TMP/s1.txt | tail -c 1 | grep -c '^$' | sed 's/1/200/; s/0/201/')"
check "sample: same seed, same text" cmp -s $TMP/s1.txt $TMP/s2.txt
check_not "sample: another seed, other text" cmp -s $TMP/s1.txt $TMP/s3.txt
printf "ROMEO:" | $TXL sample $TMP/run/best.safetensors.gz -n 50 -t 0 > $TMP/g1.txt
$TXL sample $TMP/run/best.safetensors.gz --prompt "ROMEO:" -n 50 --temperature 0 > $TMP/g2.txt
check "sample: prompt from stdin == --prompt (greedy)" cmp -s $TMP/g1.txt $TMP/g2.txt
check "info --json" jq -e '.step == 300 and .params > 0 and .config.model.pos_scheme == "xl"' <<EOF2
$($TXL info $TMP/run/last.safetensors.gz --json)
EOF2
# --data - reads the corpus from standard input (gzip'd or not), like a file
$TXL eval $TMP/run/best.safetensors.gz --data tests/data/enwik8_slice60k.txt.gz --json -q > $TMP/f.json
$TXL eval $TMP/run/best.safetensors.gz --data - --json -q < tests/data/enwik8_slice60k.txt.gz > $TMP/s1.json
zcat tests/data/enwik8_slice60k.txt.gz | $TXL eval $TMP/run/best.safetensors.gz --data - --json -q > $TMP/s2.json
check "eval --data - (gzip'd and plain on stdin) == eval --data FILE" \
    test "$(jq -c '[.loss, .tokens]' $TMP/f.json)" = "$(jq -c '[.loss, .tokens]' $TMP/s1.json)" -a \
         "$(jq -c '[.loss, .tokens]' $TMP/f.json)" = "$(jq -c '[.loss, .tokens]' $TMP/s2.json)"
check "  ... and names the data <stdin>" jq -e '.data == "<stdin>"' $TMP/s2.json
finish
