#!/bin/sh
# Every positional scheme trains (300 steps of configs/tiny.yaml with only pos_scheme changed,
# at batch 8, lower the loss at least 0.5 nats below the unigram entropy: a model stuck at
# unigram statistics, as post-LN absolute gets with a too-short warmup, stays within 0.05),
# and sweeps to 16x the trained length in both modes with finite numbers, the factor-1 row
# equal to a plain eval; the term statistics of xl and mlp. Arguments: the schemes to test
# (default: every scheme of txl's registry; make test runs one per scheme, in parallel).
. tests/e2e/lib.sh
DATA=tests/data/tinyshakespeare.txt.gz
H=3.3091  # unigram entropy of the train split, nats/byte (computed in train_eval_sample.sh)
for s in ${*:-$(schemes)}; do
    $TXL train -c configs/tiny.yaml -q --set model.pos_scheme=$s --set data.train=$DATA \
        --set data.split=[0.9,0.05,0.05] --set train.out_dir=$TMP/$s --set train.max_steps=300 \
        --set train.eval_interval=0 --set train.log_interval=50 --set train.batch_size=8 \
        >/dev/null 2>$TMP/$s.err || bad "$s: training failed: $(cat $TMP/$s.err)"
    final=$(jq -r 'select(.event=="train") | .loss' $TMP/$s/log.jsonl | tail -1)
    check "$s trains: loss $final < unigram entropy $H - 0.5" \
        awk -v l="$final" -v h="$H" 'BEGIN {exit !(l < h - 0.5)}'
    CK=$TMP/$s/last.safetensors.gz
    for mode in memory window; do
        $TXL eval $CK --split test --max-tokens 10000 --sweep 1,2,4,8,16 --sweep-mode $mode --json -q \
            > $TMP/$s.$mode.json 2>$TMP/err || bad "$s $mode sweep: $(cat $TMP/err)"
        check "$s $mode sweep to 16x: 5 rows, all losses finite and positive" \
            jq -s -e 'length == 5 and all(.loss | (isnan | not) and . > 0 and . < 10)' $TMP/$s.$mode.json
    done
    plain=$($TXL eval $CK --split test --max-tokens 10000 --json -q | jq .loss)
    check "$s: sweep factor 1 == plain eval ($plain)" \
        test "$(head -1 $TMP/$s.memory.json | jq .loss)" = "$plain"
    check "$s: window 16x uses tgt_len 1024, no memory" \
        jq -s -e '.[4].tgt_len == 1024 and .[4].mem_len == 0' $TMP/$s.window.json
    case $s in
    xl) $TXL eval $CK --split test --max-tokens 10000 --term-stats 2 --json > $TMP/ts.json 2>/dev/null
        check "term-stats (xl): 4 layers, all four terms nonzero" \
            jq -s -e 'length == 4 and all(.content.std > 0 and .content_position.std > 0 and .global_content_bias.std > 0 and .global_position_bias.std > 0)' $TMP/ts.json ;;
    mlp) $TXL eval $CK --split test --max-tokens 10000 --term-stats 2 --json > $TMP/tsm.json 2>/dev/null
        check "term-stats (mlp): content and distance bias" \
            jq -s -e 'length == 4 and all(.content.std > 0 and (.distance_bias | has("mean")))' $TMP/tsm.json ;;
    esac
done
finish
