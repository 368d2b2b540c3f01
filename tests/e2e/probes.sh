#!/bin/sh
# txl probe: translation invariance per scheme (relative schemes exactly invariant, rope to
# float round-off, absolute not), the needle and recall cells and their JSON, the plots,
# and bad input. The probes on models that copy (what they must find, and not find) are in
# probes_copy.sh.
. tests/e2e/lib.sh
D=tests/data/tinyshakespeare.txt.gz

# --- shift: invariance (a model after 3 steps: any weights will do)
for s in $(schemes); do
    $TXL train -c tests/configs/nano.yaml -q --set model.pos_scheme=$s --set train.max_steps=3 \
        --set train.warmup_steps=1 --set train.out_dir=$TMP/sh_$s >/dev/null 2>$TMP/err ||
        bad "$s: training: $(cat $TMP/err)"
    $TXL probe shift $TMP/sh_$s/last.safetensors.gz --max-tokens 3000 \
        --offsets 0,1,1000,100000 --json -q > $TMP/shift_$s.jsonl 2>$TMP/err ||
        bad "$s: probe shift: $(cat $TMP/err)"
done
# every scheme but rope (angles in float) and absolute (not relative) is exactly invariant
for s in $(schemes | grep -v -x -e rope -e absolute); do
    check "shift $s: the loss is the same at offsets 1, 1000, 100000, bit for bit" \
        jq -s -e 'length == 4 and all(.delta == 0)' $TMP/shift_$s.jsonl
done
check "shift rope: the loss moves by less than 1e-6 (relative) at every offset (fp32 angles are built in double)" \
    jq -s -e 'length == 4 and all(.relative | fabs < 1e-6)' $TMP/shift_rope.jsonl
check "shift absolute: the loss changes with the offset" \
    jq -s -e '.[2].relative | fabs > 1e-4' $TMP/shift_absolute.jsonl

# --- needle and recall: cells, fields, intervals
CK=$TMP/sh_xl/last.safetensors.gz
# nano's context is 32 bytes: the needle and its question need 75
$TXL probe needle $CK --data $D --trials 3 --lengths 4,8 --depths 0,50,100 --json -q \
    > $TMP/needle.jsonl 2>$TMP/err || bad "needle: $(cat $TMP/err)"
check "needle: one row per mode x length x depth (2 x 2 x 3)" \
    jq -s -e 'length == 12 and all(.probe == "needle" and .trials == 3)' $TMP/needle.jsonl
check "needle: accuracy, value bits, control bits and gain with 95% intervals" \
    jq -s -e 'all(.accuracy >= 0 and .accuracy <= 1 and (.accuracy_ci | length == 2) and
             .value_bits > 0 and .control_bits > 0 and (.gain_bits_ci | length == 2))' $TMP/needle.jsonl
check "needle: memory mode keeps the trained lengths, window mode is one window" \
    jq -s -e 'map(select(.mode == "memory")) | all(.tgt_len == 16 and .mem_len == 16)' $TMP/needle.jsonl
$TXL probe needle $CK --data $D --trials 3 --lengths 4 --depths 50 --mode window --json -q > $TMP/n2.jsonl
check "needle: the same seed gives the same numbers" \
    test "$(jq -c '.value_bits' $TMP/n2.jsonl)" = "$(jq -s -c 'map(select(.mode == "window" and .factor == 4 and .depth == 50)) | .[0].value_bits' $TMP/needle.jsonl)"
$TXL probe recall $CK --data $D --trials 4 --distances 8,64 --json -q > $TMP/recall.jsonl \
    2>$TMP/err || bad "recall: $(cat $TMP/err)"
check "recall: two distances and a summary per mode" \
    jq -s -e 'length == 6 and (map(select(has("effective_context"))) | length == 2)' $TMP/recall.jsonl

# --- anchors: the same bytes make different token counts; no trial's text may be cut.
# The text alternates 750-byte stretches of "x. x. x. " (a sentence, so a sent anchor, every
# 3 bytes) and "ab ab ab " (none): a trial whose 512 bytes between the occurrences fall in
# the first kind has ~170 tokens more than one in the second, more than the 64-byte lead,
# and cutting every stream to the shortest (as txl once did) took its first occurrence away.
awk 'BEGIN { for (i = 0; i < 40; i++) for (j = 0; j < 250; j++) printf "%s", (i % 2 ? "ab " : "x. ") }' \
    > $TMP/stops.txt
$TXL train -c tests/configs/nano.yaml -q --set data.anchors=[bos,para,sent] \
    --set train.max_steps=3 --set train.warmup_steps=1 --set train.out_dir=$TMP/anc >/dev/null \
    2>$TMP/err || bad "anchors: training: $(cat $TMP/err)"
ACK=$TMP/anc/last.safetensors.gz
$TXL probe recall $ACK --data $TMP/stops.txt --trials 8 --distances 512 --json -q \
    > $TMP/arecall.jsonl 2>$TMP/err || bad "anchors: recall: $(cat $TMP/err)"
ashow() { jq -c "select(.distance) | {mode, cut_trials, pad_max, first_bpc, control_bpc}" $TMP/arecall.jsonl | tr '\n' ' '; }
check "anchors, recall: the trials' token counts differ by more than the lead (pads > 64 tokens), yet no trial is cut: $(ashow)" \
    jq -s -e 'map(select(.distance)) | length == 2 and all(.cut_trials == 0 and .pad_max > 64)' $TMP/arecall.jsonl
# a model after 3 steps has learned little: a random string costs about the same bits at
# either occurrence; a first occurrence cut away would score 0 bits (its mean fell to 3 of 8)
check "anchors, recall: every first occurrence is scored in full (first_bpc within 10% of control_bpc)" \
    jq -s -e 'map(select(.distance)) | all(.first_bpc > 0.9 * .control_bpc)' $TMP/arecall.jsonl
$TXL probe needle $ACK --data $TMP/stops.txt --trials 8 --lengths 16 --depths 0,100 --json -q \
    > $TMP/aneedle.jsonl 2>$TMP/err || bad "anchors: needle: $(cat $TMP/err)"
check "anchors, needle: a needle at depth 0 stays in every trial's context (no trial cut, pads used): $(jq -c '{mode, depth, cut_trials, pad_max}' $TMP/aneedle.jsonl | tr '\n' ' ')" \
    jq -s -e 'length == 4 and all(.cut_trials == 0) and (map(select(.depth == 0)) | all(.pad_max > 0))' $TMP/aneedle.jsonl
check "no anchors: no pads and no cuts" \
    jq -s -e 'map(select(has("distance") or has("depth"))) | all(.cut_trials == 0 and .pad_max == 0)' $TMP/needle.jsonl $TMP/recall.jsonl

# --- the needle's default lengths on a short context: nano's 32 bytes cannot hold the needle
# and its question (75 bytes) at 1x and 2x: the default skips those
$TXL probe needle $CK --data $D --trials 1 --depths 100 --mode window --json \
    > $TMP/ndef.jsonl 2>$TMP/err || bad "needle, default lengths: $(cat $TMP/err)"
check "needle, default lengths on a 32-byte context: 4x and 8x, 1x and 2x skipped" \
    jq -s -e 'map(.factor) == [4, 8]' $TMP/ndef.jsonl
check "  ... and it says so on stderr" grep -q "skipping the default lengths 1x, 2x" $TMP/err

check "every needle and recall row names its checkpoint and step" \
    jq -s -e --arg c "$CK" 'all(.checkpoint == $c and .step == 3)' $TMP/needle.jsonl $TMP/recall.jsonl
if command -v gnuplot >/dev/null; then
    check "plot --probe: a needle heat map" $TXL plot --probe $TMP/needle.jsonl -o $TMP/n.png -q
    check "plot --probe: recall curves" $TXL plot --probe $TMP/recall.jsonl -o $TMP/r.svg -q
    check "  ... the images exist" test -s $TMP/n.png -a -s $TMP/r.svg
    # what a reader needs, read off the SVG: titles, axis labels, the color bar's label
    $TXL plot --probe $TMP/needle.jsonl -o $TMP/n.svg -q
    check "needle SVG: the default title (was lost under the panels)" \
        svg_has $TMP/n.svg "needle in a haystack: exact-match accuracy"
    check "  ... a panel per mode, named by checkpoint" \
        sh -c ". tests/e2e/lib.sh; svg_has $TMP/n.svg 'last, step 3, memory' && svg_has $TMP/n.svg 'last, step 3, window'"
    check "  ... both axis labels and the color bar's (was none)" \
        sh -c ". tests/e2e/lib.sh; svg_has $TMP/n.svg 'context length (x trained context)' &&
               svg_has $TMP/n.svg 'needle depth (%)' && svg_has $TMP/n.svg 'exact-match accuracy'"
    # --gain: the title given, labels with the digits the gains have, one color scale
    $TXL probe needle $TMP/sh_mlp/last.safetensors.gz --data $D --trials 3 --lengths 4,8 \
        --depths 0,50,100 --json -q > $TMP/needle2.jsonl
    $TXL plot --probe $TMP/needle.jsonl $TMP/needle2.jsonl --gain --title "two needles" \
        -o $TMP/g.svg 2>$TMP/plot.err
    check "--gain, two checkpoints: 4 panels, all 24 cells drawn" grep -q "g.svg (4 panels, 24 points)" $TMP/plot.err
    check "  ... --title shows (was lost)" svg_has $TMP/g.svg "two needles"
    check "  ... panels named by checkpoint, with their run directories (both are last, step 3)" \
        sh -c ". tests/e2e/lib.sh; svg_has $TMP/g.svg 'sh_xl/last, step 3, memory' && svg_has $TMP/g.svg 'sh_mlp/last, step 3, window'"
    check "  ... the color bar says what it shows" svg_has $TMP/g.svg "retrieval gain (bits)"
    $TXL plot --probe $TMP/needle.jsonl $TMP/needle2.jsonl --gain -o $TMP/g.svg --script > $TMP/g.gp
    check "  ... one color scale for every panel (one cbrange, spanning every gain)" \
        sh -c "test \$(grep -c '^set cbrange' $TMP/g.gp) -eq 1 &&
               jq -s -r 'map(.gain_bits) | \"\\(min) \\(max)\"' $TMP/needle.jsonl $TMP/needle2.jsonl |
               awk -v r=\"\$(sed -n 's/^set cbrange \\[\\(.*\\):\\(.*\\)\\]/\\1 \\2/p' $TMP/g.gp)\" \
                   '{split(r, b, \" \"); exit !(b[1] <= \$1 && b[1] <= 0 && b[2] + 0 == \$2 + 0)}'"
    # labels with the digits the gains have: %.1f wrote 0.0 for every gain under 0.05 bits
    # (a model after 3 steps saves at most hundredths); each panel's largest keeps 3
    # significant digits (at most 6 decimals)
    sig3() { awk -v v="$1" 'BEGIN {m = v < 0 ? -v : v; l = log(m) / log(10); f = int(l);
        if (f > l) f--; d = 2 - f; if (d < 0) d = 0; if (d > 6) d = 6; printf "%.*f", d, v}'; }
    big=$(jq -s -r 'map(select(.mode == "memory") | .gain_bits) | max_by(fabs)' $TMP/needle.jsonl)
    want=$(sig3 $big)
    $TXL plot --probe $TMP/needle.jsonl --gain -o $TMP/g0.svg -q
    check "  ... gains under 0.05 bits: the largest, $big, reads $want (not 0)" \
        sh -c ". tests/e2e/lib.sh; svg_has $TMP/g0.svg '$want' && awk 'BEGIN {exit !($want != 0)}'"
    # the copy model's needle saves tens of bits at depth 100 and hundredths elsewhere: its
    # largest cell is the darkest, and its label white; the light cells' labels dark
    CP=tests/fixtures/copy/copy_xl.safetensors.gz
    $TXL probe needle $CP --data $D --trials 4 --lengths 2,4 --depths 0,50,100 --json -q \
        > $TMP/needle3.jsonl
    big=$(jq -s -r 'map(.gain_bits) | max_by(fabs)' $TMP/needle3.jsonl)
    want=$(sig3 $big)
    $TXL plot --probe $TMP/needle3.jsonl --gain -o $TMP/g1.svg -q
    check "  ... the copy model's largest gain $big reads $want" svg_has $TMP/g1.svg "$want"
    check "  ... labels are light on dark cells and dark on light ones (was dark on both)" \
        sh -c ". tests/e2e/lib.sh; svg_text $TMP/g1.svg | grep -q -x -F 'rgb(255,255,255)	$want' &&
               test \$(svg_text $TMP/g1.svg | grep -c '^rgb(34,34,34)	-*[0-9]') -gt 0"
    # recall and needle files together: a panel each (the recall curves were left out)
    $TXL plot --probe $TMP/recall.jsonl $TMP/needle.jsonl -o $TMP/mixed.svg 2>$TMP/plot.err
    check "recall and needle files together: 3 panels, all 16 points drawn" \
        grep -q "mixed.svg (3 panels, 16 points)" $TMP/plot.err
    check "  ... the recall panel, its axis and its legend" \
        sh -c ". tests/e2e/lib.sh; svg_has $TMP/mixed.svg 'recall: gain by distance' &&
               svg_has $TMP/mixed.svg 'distance between the occurrences (bytes)' && svg_has $TMP/mixed.svg 'last, step 3, memory'"
fi

# --- bad input: exit 2
expect2() { # description command...
    d=$1; shift
    "$@" >/dev/null 2>$TMP/err; rc=$?
    if [ $rc -eq 2 ] && [ -s $TMP/err ]; then ok "$d: exit 2 ($(head -c 100 $TMP/err))"; else bad "$d: exit $rc"; fi
}
expect2 "unknown probe" $TXL probe echo $CK
expect2 "no checkpoint" $TXL probe needle
expect2 "depth over 100" $TXL probe needle $CK --depths 0,101
expect2 "a context (1 x 32 bytes) too short for the needle" $TXL probe needle $CK --lengths 1 --data $D --trials 1
$TXL train -c tests/configs/nano.yaml -q --set model.tgt_len=4 --set model.mem_len=4 \
    --set train.max_steps=2 --set train.warmup_steps=1 --set train.out_dir=$TMP/short >/dev/null \
    2>$TMP/err || bad "training a model with an 8-byte context: $(cat $TMP/err)"
expect2 "needle, default lengths on an 8-byte context (8x = 64 bytes, under 75)" \
    $TXL probe needle $TMP/short/last.safetensors.gz --data $D --trials 1
check "  ... says the model's context is too short, and what would do, not blaming a flag not given" \
    sh -c "grep -q \"the model's context (tgt_len + mem_len = 8 bytes) is too short for the needle probe.*75 bytes.*--lengths 10\" $TMP/err &&
        ! grep -q '^txl probe: --lengths' $TMP/err"
finish
