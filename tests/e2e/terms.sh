#!/bin/sh
# Training's terms events (train.term_stats_interval, doc/design.md "The model":
# Diagnostics): a micro run logs one at every 2nd step with the fields of eval --term-stats
# --json, and the layers of the last one are exactly what eval prints for the checkpoint of
# that step; the pass leaves the training untouched (the same losses as without it); a
# resumed run goes on at the same steps; txl plot --terms draws them; another scheme with
# the key set is a config error (exit 2).
. tests/e2e/lib.sh
CFG=tests/configs/micro.yaml
OPTS="-q -c $CFG --set train.threads=1 --set train.max_steps=6"
$TXL train $OPTS --set train.term_stats_interval=2 --set train.out_dir=$TMP/run >/dev/null \
    2>$TMP/err || bad "training with term_stats_interval 2: $(cat $TMP/err)"
L=$TMP/run/log.jsonl
check "terms events at steps 2, 4, 6 and no other" \
    test "$(jq -c 'select(.event=="terms") | .step' $L | tr '\n' ' ')" = "2 4 6 "
check "each names its pass: the valid split, batch 8, tgt_len 32, mem_len 32, 4 segments" \
    jq -s -e 'map(select(.event=="terms")) | all(.split == "valid" and .batch == 8 and
              .tgt_len == 32 and .mem_len == 32 and .segments == 4 and .seconds >= 0)' $L
check "each has one layer object per layer (2), in order" \
    jq -s -e 'map(select(.event=="terms")) | all(.layers | length == 2 and
              (map(.layer) == [0, 1]) and all(.pos_scheme == "xl"))' $L
check "every layer: the four xl terms with a finite mean and a positive std, entries" \
    jq -s -e 'map(select(.event=="terms") | .layers[]) | all(.entries > 0 and
              ([.content, .content_position, .global_content_bias, .global_position_bias] |
               all((.mean | type == "number") and .std > 0)))' $L
check "the verdict is 'flagged' exactly when a term carries a flag" \
    jq -s -e 'map(select(.event=="terms") | .layers[]) | all(.verdict ==
              (if ([.[] | objects | has("flag")] | any) then "flagged" else "ok" end))' $L
check "the statistics change as the model trains (step 2 differs from step 6)" \
    jq -s -e 'map(select(.event=="terms")) | .[0].layers != .[2].layers' $L
$TXL eval $TMP/run/last.safetensors.gz --term-stats --json --threads 1 -q > $TMP/eval.jsonl
jq -c 'select(.event=="terms" and .step==6) | .layers[]' $L > $TMP/logged.jsonl
check "step 6's layers are, number for number, what eval --term-stats prints for last (step 6)" \
    sh -c "test -s $TMP/logged.jsonl && jq -c . $TMP/eval.jsonl | cmp -s - $TMP/logged.jsonl"

# the verdict's threshold for "weak": a term trained away (model.xl_terms without it) is
# flagged in every layer, the same term of intact models in none (at 1/10, u and v were
# weak in every layer of a plain xl model); micro, 40 steps each, and the trained fixtures
weakly() { jq -r --arg t $2 'select(has($t)) | .[$t].flag // "ok"' $1 | grep -c '^weak'; }
for t in abcd abd abc acd; do
    $TXL train -q -c $CFG --set train.threads=1 --set train.eval_interval=0 \
        --set model.xl_terms=$t --set train.out_dir=$TMP/ab_$t >/dev/null 2>&1
    $TXL eval $TMP/ab_$t/last.safetensors.gz --data tests/data/enwik8_slice60k.txt.gz \
        --term-stats --json --threads 1 -q > $TMP/ab_$t.jsonl
done
check "xl_terms abd (no u): global_content_bias weak in both layers" test "$(weakly $TMP/ab_abd.jsonl global_content_bias)" -eq 2
check "xl_terms abc (no v): global_position_bias weak in both layers" test "$(weakly $TMP/ab_abc.jsonl global_position_bias)" -eq 2
check "xl_terms acd (no q.r): content_position weak in both layers" test "$(weakly $TMP/ab_acd.jsonl content_position)" -eq 2
check "  ... and the terms they keep are not" sh -c "
    test \$(jq -r '[.content_position, .global_position_bias] | map(.flag // \"ok\")[]' $TMP/ab_abd.jsonl | grep -c weak) -eq 0"
check "intact (abcd), the same 40 steps: no term weak ($(jq -c '[.global_content_bias.std, .global_position_bias.std] | map(. * 1000 | round / 1000)' $TMP/ab_abcd.jsonl | tr '\n' ' '))" \
    test "$(jq -r '[.[] | objects | .flag // "ok"][]' $TMP/ab_abcd.jsonl | grep -c weak)" -eq 0
for f in tests/fixtures/eval/micro tests/fixtures/eval/nano_xl tests/fixtures/copy/copy_xl; do
    $TXL eval $f.safetensors.gz --data tests/data/enwik8_slice60k.txt.gz --term-stats --json \
        --threads 1 -q > $TMP/fx.jsonl
    check "intact $(basename $f): no term weak in any layer" \
        test "$(jq -r '[.[] | objects | .flag // "ok"][]' $TMP/fx.jsonl | grep -c weak)" -eq 0
done

# the pass is read-only: the same losses without it
$TXL train $OPTS --set train.out_dir=$TMP/plain >/dev/null 2>&1
check "without the key: no terms event" test "$(grep -c '"terms"' $TMP/plain/log.jsonl)" -eq 0
check "the training losses are those of the run without term statistics" \
    test "$(step_losses $L)" = "$(step_losses $TMP/plain/log.jsonl)"

# resume: the events go on at the multiples of the interval
$TXL train -q --resume $TMP/run --set train.max_steps=9 >/dev/null 2>$TMP/err ||
    bad "resume: $(cat $TMP/err)"
check "--resume to step 9: events at 2, 4, 6 and then 8" \
    test "$(jq -c 'select(.event=="terms") | .step' $L | tr '\n' ' ')" = "2 4 6 8 "

# another scheme: a config error, before anything is written
for s in rope mlp; do
    $TXL train $OPTS --set model.pos_scheme=$s --set train.term_stats_interval=2 \
        --set train.out_dir=$TMP/$s >/dev/null 2>$TMP/err; rc=$?
    check "pos_scheme $s with term_stats_interval 2: exit 2 (got $rc)" test $rc -eq 2
    check "  ... saying it is for xl only: $(head -c 150 $TMP/err)" \
        grep -q "train.term_stats_interval applies to pos_scheme xl only.*found pos_scheme $s" $TMP/err
    check "  ... and no run directory" test ! -e $TMP/$s
done
$TXL train $OPTS --set model.pos_scheme=rope --set train.term_stats_interval=0 \
    --set train.max_steps=2 --set train.warmup_steps=1 --set train.out_dir=$TMP/rope0 >/dev/null 2>&1
check "pos_scheme rope with term_stats_interval 0 trains" test -s $TMP/rope0/log.jsonl

# txl plot --terms
$TXL plot --terms $TMP/run -o $TMP/t.png --script > $TMP/t.gp
check "plot --terms --script: one data block per layer, 4 rows each (steps 2 4 6 8)" \
    test "$(sed -n '/^\$layer1 << EOD/,/^EOD/p' $TMP/t.gp | grep -c '^[0-9]')" -eq 4
check "  ... a row holds the step and the four stds of the log" \
    grep -q "^6 $(jq -r 'select(.event=="terms" and .step==6) | .layers[1] |
        [.content, .content_position, .global_content_bias, .global_position_bias] |
        map(.std) | join(" ")' $L)" $TMP/t.gp
check "  ... one panel per layer" test "$(grep -c "^set title 'layer" $TMP/t.gp)" -eq 2
code() { "$@" >/dev/null 2>$TMP/err; echo $?; }
check "plot --terms, a run without terms events: exit 2" \
    test "$(code $TXL plot --terms $TMP/plain -o $TMP/a.png)" -eq 2
check "  ... saying how to get them" grep -q "train.term_stats_interval" $TMP/err
check "plot --terms with two runs: exit 2" \
    test "$(code $TXL plot --terms $TMP/run $TMP/plain -o $TMP/a.png)" -eq 2
check "plot --terms --sweep: exit 2" test "$(code $TXL plot --terms --sweep $TMP/run -o $TMP/a.png)" -eq 2
if command -v gnuplot >/dev/null 2>&1; then
    $TXL plot --terms $TMP/run -o $TMP/terms.png 2>$TMP/plot.err
    check "plot --terms PNG: PNG magic bytes" \
        test "$(head -c 8 $TMP/terms.png | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a
    check "  ... gnuplot said nothing" test "$(grep -vc '^txl plot:' $TMP/plot.err)" -eq 0
    check "  ... the message counts 2 layers" grep -q "terms.png (2 layers" $TMP/plot.err
    $TXL plot --terms $TMP/run/log.jsonl -o $TMP/terms.svg -q
    check "plot --terms SVG: the terms in the key" grep -q '>global_position_bias<' $TMP/terms.svg
    check "  ... the title and the axes' labels" sh -c ". tests/e2e/lib.sh;
        svg_has $TMP/terms.svg 'run: spread of the score terms while training' && svg_has $TMP/terms.svg step &&
        svg_has $TMP/terms.svg 'std of the term (scaled by 1/sqrt(d_head))'"
    check "  ... the band's and the rings' entries" sh -c ". tests/e2e/lib.sh;
        svg_has $TMP/terms.svg '1/1000 to 10x content: healthy' && svg_has $TMP/terms.svg 'flagged by the verdict'"
    # the key sat inside layer 0's panel, over its band: now every entry is above the panels
    yk=$(svg_y $TMP/terms.svg 'flagged by the verdict') yp=$(svg_y $TMP/terms.svg 'layer 0')
    check "  ... the key above the panels (its lowest entry at y $yk, layer 0's title at $yp)" \
        awk -v a="$yk" -v b="$yp" 'BEGIN {exit !(a != "" && b != "" && a + 0 < b + 0)}'
else
    echo "  SKIP rendering: gnuplot is not installed (apt-get install gnuplot-nox)"
fi
finish
