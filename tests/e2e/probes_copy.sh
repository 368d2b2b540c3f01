#!/bin/sh
# The probes on models that copy (doc/design.md, "Probes").
#
# - A model trained here (1500 steps, 20-30 s on one core) on repeated random strings
#   (tests/data/copy_corpus.awk: strings of 8..16 characters of [a-z0-9] written 2 or 3
#   times) with tgt_len 32 and mem_len 0: the recall probe shows it copying at a short
#   distance, and gaining exactly nothing beyond its 32-byte window (the second occurrence's
#   bits are the same, bit for bit, with and without the first).
# - A model that copies at any distance in its context (an induction head) takes about 9000
#   steps to form, minutes on one core, too long for a test: tests/ref/train_copy_model.sh
#   trained tests/fixtures/copy/copy_xl.safetensors.gz (tests/configs/copy.yaml: tgt_len 32,
#   mem_len 32; repeated strings of 8..40 characters of [a-z0-9 .]), which this test probes.
#   With its memory it copies across segments (the occurrences 48 bytes apart, beyond
#   tgt_len); evaluated with mem_len 0 it gains exactly nothing there. The needle probe
#   retrieves the planted number far above chance (6 digits: log2(10^6) = 19.93 bits) when
#   the needle is within reach, and its control, the same context with another number
#   planted, gives the true value less than chance.
# Exact-match scoring (probe_exact) is checked on a hand-made model in tests/test_streams.c.
. tests/e2e/lib.sh
corpus() { # corpus ALPHABET MINLEN MAXLEN REPEAT BYTES: tests/data/copy_corpus.awk, seed 7
    awk -v seed=7 -v "alpha=$1" -v minl=$2 -v maxl=$3 -v minr=2 -v maxr=3 -v repeat=$4 \
        -v bytes=$5 -f tests/data/copy_corpus.awk
}
AN=abcdefghijklmnopqrstuvwxyz0123456789
corpus $AN 8 16 1 600000 > $TMP/copy.txt
corpus $AN 1000 1000 0 50000 > $TMP/text.txt          # random text, nothing repeated
corpus "$AN ." 1000 1000 0 50000 > $TMP/text_sp.txt   # ... with spaces and stops
check "the corpus generator writes the same bytes every time" \
    sh -c "corpus() { awk -v seed=7 -v alpha=$AN -v minl=8 -v maxl=16 -v minr=2 -v maxr=3 \
        -v repeat=1 -v bytes=600000 -f tests/data/copy_corpus.awk; }; corpus | cmp -s - $TMP/copy.txt"
check "  ... lines of a string written 2 or 3 times" \
    sh -c "head -100 $TMP/copy.txt | awk '{ for (i = 2; i <= NF; i++) if (\$i != \$1) exit 1
        if (NF < 2 || NF > 3 || length(\$1) < 8 || length(\$1) > 16) exit 1 }'"

# --- a quick copier without memory: tgt_len 32, mem_len 0
t0=$(date +%s)
$TXL train -q -c tests/configs/copy.yaml --set data.train=$TMP/copy.txt \
    --set model.mem_len=0 --set train.max_steps=1500 --set train.lr=6e-3 \
    --set train.warmup_steps=100 --set train.eval_interval=0 --set train.out_dir=$TMP/quick \
    >/dev/null 2>$TMP/err ||
    bad "training the quick copier: $(cat $TMP/err)"
echo "  (the quick copier trained in $(( $(date +%s) - t0 )) s)"
$TXL probe recall $TMP/quick --data $TMP/text.txt --mode memory --string-len 12 \
    --distances 4,32,64 --trials 30 --json -q --threads 1 > $TMP/quick.jsonl 2>$TMP/err ||
    bad "recall on the quick copier: $(cat $TMP/err)"
R="jq -s -e" # over the rows of a probe's output
row() { echo "map(select(.distance == $1))[0]"; }
check "quick copier: recall gains at D=4 (12-byte string): $(jq -c "select(.distance==4) | [.gain_bpc, .gain_bpc_ci]" $TMP/quick.jsonl)" \
    $R "$(row 4) | .gain_bpc > 1.5 and .gain_bpc_ci[0] > 1 and .second_bpc < .control_bpc" $TMP/quick.jsonl
for D in 32 64; do
    check "quick copier, mem_len 0: no gain at all at D=$D, beyond the 32-byte window" \
        $R "$(row $D) | .gain_bpc == 0 and .gain_bpc_ci == [0, 0] and .second_bpc == .control_bpc" \
        $TMP/quick.jsonl
done
sum_q() { jq -c 'select(has("effective_context")) | {effective_context, shortest_distance, gain_at_shortest, note}' $1; }
check "quick copier: the effective context is 4 bytes (no gain at 32): $(sum_q $TMP/quick.jsonl)" \
    $R 'map(select(has("effective_context")))[0] | .effective_context == 4 and .shortest_distance == 4' \
    $TMP/quick.jsonl
# the effective context is measured against the shortest distance, however they are listed
$TXL probe recall $TMP/quick --data $TMP/text.txt --mode memory --string-len 12 \
    --distances 64,4,32,4 --trials 30 --json -q --threads 1 > $TMP/quick_order.jsonl 2>$TMP/err ||
    bad "recall on the quick copier, distances 64,4,32,4: $(cat $TMP/err)"
check "quick copier, --distances 64,4,32,4: the rows of 4,32,64 in that order, the same numbers and effective context: $(sum_q $TMP/quick_order.jsonl)" \
    sh -c "jq -c 'del(.tok_per_s)' $TMP/quick.jsonl > $TMP/a && jq -c 'del(.tok_per_s)' $TMP/quick_order.jsonl > $TMP/b && cmp -s $TMP/a $TMP/b"
# no gain at the shortest distance: half of it says nothing, so no effective context
$TXL probe recall $TMP/quick --data $TMP/text.txt --mode memory --string-len 12 \
    --distances 64,32 --trials 30 --json -q --threads 1 > $TMP/quick_far.jsonl 2>$TMP/err ||
    bad "recall on the quick copier, distances 64,32: $(cat $TMP/err)"
check "quick copier, --distances 64,32 (no gain at either): the effective context is null with a note, not 0: $(sum_q $TMP/quick_far.jsonl)" \
    $R 'map(select(has("effective_context")))[0] | .effective_context == null and .shortest_distance == 32
        and .gain_at_shortest == 0 and (.note | test("not significantly above 0"))' $TMP/quick_far.jsonl
$TXL probe recall $TMP/quick --data $TMP/text.txt --mode memory --string-len 12 \
    --distances 64,32 --trials 30 -q --threads 1 > $TMP/quick_far.txt 2>$TMP/err
check "  ... and the table says so: $(tail -1 $TMP/quick_far.txt)" \
    grep -q "^memory: effective context unknown: the gain at the shortest distance (32) is not significantly above 0" \
    $TMP/quick_far.txt

# --- the committed copier (an induction head), tgt_len 32 and mem_len 32
CK=tests/fixtures/copy/copy_xl.safetensors.gz
$TXL probe recall $CK --data $TMP/text_sp.txt --mode memory --string-len 16 \
    --distances 16,32,64 --trials 30 --json -q --threads 1 > $TMP/fx.jsonl 2>$TMP/err ||
    bad "recall on the copy model: $(cat $TMP/err)"
$TXL probe recall $CK --data $TMP/text_sp.txt --mode memory --string-len 16 --mem-len 0 \
    --distances 32 --trials 30 --json -q --threads 1 > $TMP/fx0.jsonl 2>$TMP/err ||
    bad "recall on the copy model, mem_len 0: $(cat $TMP/err)"
show() { jq -c "select(.distance==$1) | [.gain_bpc, .gain_bpc_ci]" $2; }
check "copy model: a large gain at D=16 (32 bytes apart, in one window): $(show 16 $TMP/fx.jsonl)" \
    $R "$(row 16) | .gain_bpc > 3 and .gain_bpc_ci[0] > 2" $TMP/fx.jsonl
check "copy model: a gain at D=32 (48 bytes apart: through the memory): $(show 32 $TMP/fx.jsonl)" \
    $R "$(row 32) | .gain_bpc > 1.5 and .gain_bpc_ci[0] > 1" $TMP/fx.jsonl
check "copy model with mem_len 0: no gain at all at D=32: $(show 32 $TMP/fx0.jsonl)" \
    $R "$(row 32) | .gain_bpc == 0 and .gain_bpc_ci == [0, 0] and .mem_len == 0" $TMP/fx0.jsonl
check "copy model: hardly a gain at D=64 (80 bytes apart, beyond tgt_len + mem_len): $(show 64 $TMP/fx.jsonl)" \
    $R "$(row 64) | (.gain_bpc | fabs) < 0.25" $TMP/fx.jsonl

# needle: 128-byte contexts (2 x tgt_len + mem_len); at depth 100 the number is 41 bytes
# before the question (within reach), at depth 0 more than 100 (beyond it)
$TXL probe needle $CK --data $TMP/text_sp.txt --mode memory --lengths 2 --depths 0,100 \
    --trials 20 --json -q --threads 1 > $TMP/needle.jsonl 2>$TMP/err ||
    bad "needle on the copy model: $(cat $TMP/err)"
dep() { echo "map(select(.depth == $1))[0]"; }
nshow() { jq -c "select(.depth==$1) | {accuracy, value_bits, control_bits, gain_bits_ci}" $TMP/needle.jsonl; }
CHANCE=19.93 # bits of 6 digits drawn uniformly
check "needle at depth 100: the value costs far fewer bits than chance: $(nshow 100)" \
    $R "$(dep 100) | .value_bits < $CHANCE - 4 and .gain_bits_ci[0] > 10" $TMP/needle.jsonl
check "  ... and its control (another number planted) no fewer than chance" \
    $R "$(dep 100) | .control_bits > $CHANCE" $TMP/needle.jsonl
check "needle at depth 0, beyond the memory: no retrieval gain: $(nshow 0)" \
    $R "$(dep 0) | (.gain_bits | fabs) < 1 and .accuracy == 0" $TMP/needle.jsonl
finish
