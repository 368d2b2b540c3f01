#!/bin/sh
# txl probe on word-level and BPE models: the probes work in the model's tokens
# (doc/design.md, "Probes": word and BPE models).
#
# - A word model of a few steps (any weights will do for the shapes): the needle's rows say
#   "unit":"token", its sentence is made of the vocabulary's words (the note names them; a
#   vocabulary without "secret" is an error naming it), its value is one token, no trial is
#   cut; recall's rows in tokens with their summary; shift evaluates the first --max-tokens
#   tokens, the same the evaluation of --max-tokens scores, and is invariant for every
#   relative scheme.
# - With anchors and hier's coordinates: the trials' token counts differ (pads of <eos>),
#   none is cut, and recall's control lines up with its trial token for token (the probe
#   checks it and fails otherwise: tests/test_probe_tokens.c shows the check catching a
#   control that does not).
# - A word-level copier (tgt_len 32, mem_len 0, 600 steps, a few seconds): recall gains at a
#   short distance in tokens, exactly nothing beyond its 32-token window.
# - BPE (txl's own merges): the needle's value in 1 to 7 tokens, trials padded to one
#   length, none cut; recall and shift in tokens.
. tests/e2e/lib.sh
V=tests/data/vocab
# WikiText-2's heads, and a line with the needle's words ("secret" and "word" are not in them)
# (first: the vocabulary is the train split's, the first 90%)
echo " The secret word of this line is here ." > $TMP/wiki.txt
cat $V/wt2_valid_head.txt $V/wt2_test_head.txt >> $TMP/wiki.txt
W="--set data.tokenizer=word --set data.train=$TMP/wiki.txt"
train() { # train OUT [--set ...]: a nano model of a few steps
    out=$1; shift
    $TXL train -c tests/configs/nano.yaml -q --set train.max_steps=3 --set train.warmup_steps=1 \
        --set train.out_dir=$TMP/$out "$@" >/dev/null 2>$TMP/err || bad "training $out: $(cat $TMP/err)"
}
train w $W
CK=$TMP/w/last.safetensors.gz

# --- needle
$TXL probe needle $CK --data $TMP/wiki.txt --trials 4 --lengths 2,4 --depths 0,50,100 --json \
    > $TMP/needle.jsonl 2>$TMP/needle.err || bad "needle: $(cat $TMP/needle.err)"
check "needle: a row per mode x length x depth (2 x 2 x 3), each in tokens, lengths of the 32-token context" \
    jq -s -e 'length == 12 and all(.unit == "token" and .length == 32 * .factor)' $TMP/needle.jsonl
check "needle: the value is one word, no trial cut, no pad (no anchors, one sentence length)" \
    jq -s -e 'length == 12 and all(.value_tokens == 1 and .cut_trials == 0 and .pad_max == 0)' $TMP/needle.jsonl
check "needle: accuracy, value bits and gain with intervals: $(jq -s -c '.[0] | {accuracy, value_bits, gain_bits}' $TMP/needle.jsonl)" \
    jq -s -e 'length == 12 and all(.accuracy >= 0 and .accuracy <= 1 and .value_bits > 0 and (.gain_bits_ci | length == 2))' $TMP/needle.jsonl
note=$(grep "needle: in the model's words" $TMP/needle.err)
check "needle: a note says the sentence is in the model's words: $note" test -n "$note"
w1=$(echo "$note" | sed -n 's/.*(from "\([A-Za-z]*\)" to "\([A-Za-z]*\)").*/\1/p')
w2=$(echo "$note" | sed -n 's/.*(from "\([A-Za-z]*\)" to "\([A-Za-z]*\)").*/\2/p')
check "  ... its keys and values are words of the corpus ('$w1' ... '$w2')" \
    sh -c "[ -n '$w1' ] && [ -n '$w2' ] && tr ' ' '\n' < $TMP/wiki.txt | grep -q -x '$w1' &&
        tr ' ' '\n' < $TMP/wiki.txt | grep -q -x '$w2'"
$TXL probe needle $CK --data $TMP/wiki.txt --trials 4 --lengths 4 --depths 50 --mode window --json -q > $TMP/n2.jsonl
check "needle: the same seed gives the same numbers" \
    test "$(jq -c '.value_bits' $TMP/n2.jsonl)" = "$(jq -s -c 'map(select(.mode == "window" and .factor == 4 and .depth == 50)) | .[0].value_bits' $TMP/needle.jsonl)"
check "needle: a 32-token context holds the word needle (15 tokens) at 1x" \
    $TXL probe needle $CK --data $TMP/wiki.txt --trials 1 --lengths 1 --depths 0 --mode window -q
train short $W --set model.tgt_len=4 --set model.mem_len=2
$TXL probe needle $TMP/short/last.safetensors.gz --data $TMP/wiki.txt --trials 1 \
    >/dev/null 2>$TMP/err; rc=$?
check "needle, default lengths on a 6-token context (8x = 48 tokens: all hold 15 but 1x and 2x): exit 0 with a note: $(grep skipping $TMP/err)" \
    sh -c "[ $rc -eq 0 ] && grep -q 'skipping the default lengths 1x, 2x: the model.s context (6 tokens) times that cannot hold the needle and the question (15 tokens)' $TMP/err"
# a vocabulary without the sentence's words
cat $V/wt2_valid_head.txt > $TMP/nosecret.txt
train nosecret --set data.tokenizer=word --set data.train=$TMP/nosecret.txt
$TXL probe needle $TMP/nosecret/last.safetensors.gz --data $TMP/nosecret.txt --trials 1 \
    >/dev/null 2>$TMP/err; rc=$?
check "needle: a word vocabulary without 'secret' and 'word': exit 2 naming them: $(cat $TMP/err)" \
    sh -c "[ $rc -eq 2 ] && grep -q \"has no 'secret', 'word'\" $TMP/err"

# --- recall
$TXL probe recall $CK --data $TMP/wiki.txt --trials 4 --distances 8,64 --string-len 6 --json -q \
    > $TMP/recall.jsonl 2>$TMP/err || bad "recall: $(cat $TMP/err)"
check "recall: two distances and a summary per mode, all in tokens" \
    jq -s -e 'length == 6 and all(.unit == "token") and (map(select(has("effective_context"))) | length == 2)' $TMP/recall.jsonl
check "recall: strings of 6 tokens, no trial cut, no pad" \
    jq -s -e 'map(select(.distance)) | all(.string_len == 6 and .cut_trials == 0 and .pad_max == 0)' $TMP/recall.jsonl
check "recall: the bits per token are named so (gain_bpt, first_bpt, ...), no bits-per-byte names" \
    jq -s -e 'map(select(.distance)) | all(has("gain_bpt") and has("gain_bpt_ci") and has("first_bpt")
        and has("second_bpt") and has("control_bpt") and (keys | map(select(endswith("_bpc") or endswith("_bpc_ci"))) | length == 0))' $TMP/recall.jsonl
# plot --probe: the recall panel in the rows' unit (it said bytes and bits per byte)
if command -v gnuplot >/dev/null 2>&1; then
    $TXL plot --probe $TMP/recall.jsonl -o $TMP/recall.svg -q 2>$TMP/err || bad "plot --probe: $(cat $TMP/err)"
    check "plot --probe, word recall: the axes in tokens and bits per token, the title too" sh -c ". tests/e2e/lib.sh
        svg_has $TMP/recall.svg 'distance between the occurrences (tokens)' &&
        svg_has $TMP/recall.svg 'gain (bits per token)' &&
        svg_has $TMP/recall.svg 'recall by distance: bits per token saved on the second occurrence' &&
        ! svg_text $TMP/recall.svg | grep -q 'byte'"
fi

# --- shift: the first --max-tokens tokens, those eval --max-tokens scores (shift prints 6
# digits); invariance
for s in $(schemes); do
    train sh_$s $W --set model.pos_scheme=$s
    $TXL probe shift $TMP/sh_$s/last.safetensors.gz --data $TMP/wiki.txt --max-tokens 3000 \
        --offsets 0,1,1000,100000 --json -q > $TMP/shift_$s.jsonl 2>$TMP/err ||
        bad "$s: probe shift: $(cat $TMP/err)"
done
for s in $(schemes | grep -v -x -e rope -e absolute); do
    check "shift $s, word model: the loss is the same at offsets 1, 1000, 100000, bit for bit" \
        jq -s -e 'length == 4 and all(.delta == 0 and .tokens == 2999)' $TMP/shift_$s.jsonl
done
check "shift, word model: the rows have an evaluation's metrics: ppl = exp(loss), bpc over the bytes" \
    jq -s -e 'all(.bytes > 2 * .tokens and ((.ppl - (.loss | exp)) | fabs) < 1e-4 * .ppl and
        ((.bpc - .loss * .tokens / .bytes / 0.6931471805599453) | fabs) < 1e-4 * .bpc)' $TMP/shift_xl.jsonl
check "shift absolute, word model: the loss changes with the offset" \
    jq -s -e '.[2].relative | fabs > 1e-4' $TMP/shift_absolute.jsonl
ev=$($TXL eval $TMP/sh_xl/last.safetensors.gz --data $TMP/wiki.txt --batch 1 --max-tokens 3000 --json -q | jq -c '[.loss, .tokens, .bytes, .bpc]')
sh0=$(jq -s -c '.[0] | [.loss, .tokens, .bytes, .bpc]' $TMP/shift_xl.jsonl)
check "shift at offset 0 scores the tokens eval --max-tokens 3000 scores: the same loss, bytes and bpc ($sh0, eval $ev)" \
    sh -c "jq -n -e --argjson a '$sh0' --argjson b '$ev' '(\$a[0] - \$b[0] | fabs) < 1e-5 * \$b[0] and \$a[1] == \$b[1] and \$a[2] == \$b[2] and (\$a[3] - \$b[3] | fabs) < 1e-5 * \$b[3]'"

# --- anchors and hier's coordinates: pads of <eos>, no cut, recall's control lined up
train anc $W --set data.anchors=[bos,para,sent] --set model.pos_scheme=hier
ACK=$TMP/anc/last.safetensors.gz
$TXL probe needle $ACK --data $TMP/wiki.txt --trials 8 --lengths 4 --depths 0,100 --json -q \
    > $TMP/aneedle.jsonl 2>$TMP/err || bad "anchors: needle: $(cat $TMP/err)"
check "anchors, needle: pads, no trial cut: $(jq -c '{mode, depth, cut_trials, pad_max}' $TMP/aneedle.jsonl | tr '\n' ' ')" \
    jq -s -e 'length == 4 and all(.cut_trials == 0) and any(.pad_max > 0)' $TMP/aneedle.jsonl
$TXL probe recall $ACK --data $TMP/wiki.txt --trials 8 --distances 16,100 --json -q \
    > $TMP/arecall.jsonl 2>$TMP/err
check "anchors, recall: the controls line up with their trials (else the probe fails), pads, no cut: $(jq -c 'select(.distance) | {mode, distance, cut_trials, pad_max}' $TMP/arecall.jsonl | tr '\n' ' ') $(cat $TMP/err)" \
    jq -s -e 'map(select(.distance)) | length == 4 and all(.cut_trials == 0) and any(.pad_max > 0)' $TMP/arecall.jsonl
$TXL probe shift $ACK --data $TMP/wiki.txt --max-tokens 2000 --json -q > $TMP/ashift.jsonl
check "anchors, shift with hier: invariant, 1999 tokens scored (anchors included)" \
    jq -s -e 'length == 4 and all(.delta == 0 and .tokens == 1999)' $TMP/ashift.jsonl

# --- a word-level copier: each character a word, random strings of 6..10 of them written 2
# or 3 times a line (tests/data/copy_corpus.awk)
AN=abcdefghijklmnopqrstuvwxyz0123456789
awk -v seed=7 -v alpha=$AN -v minl=6 -v maxl=10 -v minr=2 -v maxr=3 -v repeat=1 -v bytes=300000 \
    -f tests/data/copy_corpus.awk | sed 's/./& /g' > $TMP/wcopy.txt
awk -v seed=9 -v alpha=$AN -v minl=1000 -v maxl=1000 -v repeat=0 -v bytes=30000 \
    -f tests/data/copy_corpus.awk | sed 's/./& /g' > $TMP/wtext.txt
t0=$(date +%s)
$TXL train -q -c tests/configs/copy.yaml --set data.tokenizer=word --set data.train=$TMP/wcopy.txt \
    --set model.mem_len=0 --set train.max_steps=600 --set train.lr=6e-3 --set train.warmup_steps=50 \
    --set train.eval_interval=0 --set train.out_dir=$TMP/wq >/dev/null 2>$TMP/err ||
    bad "training the word copier: $(cat $TMP/err)"
echo "  (the word copier trained in $(( $(date +%s) - t0 )) s)"
$TXL probe recall $TMP/wq --data $TMP/wtext.txt --mode memory --string-len 6 --distances 2,32,64 \
    --trials 30 --json -q --threads 1 > $TMP/wq.jsonl 2>$TMP/err || bad "recall on the word copier: $(cat $TMP/err)"
row() { echo "map(select(.distance == $1))[0]"; }
check "word copier: recall gains at D=2 tokens (6-token strings): $(jq -c 'select(.distance==2) | [.gain_bpt, .gain_bpt_ci]' $TMP/wq.jsonl)" \
    jq -s -e "$(row 2) | .unit == \"token\" and .gain_bpt > 1.5 and .gain_bpt_ci[0] > 1" $TMP/wq.jsonl
for D in 32 64; do
    check "word copier, mem_len 0: no gain at all at D=$D tokens, beyond the 32-token window" \
        jq -s -e "$(row $D) | .gain_bpt == 0 and .gain_bpt_ci == [0, 0] and .second_bpt == .control_bpt" $TMP/wq.jsonl
done
check "word copier: the effective context is 2 tokens" \
    jq -s -e 'map(select(has("effective_context")))[0] | .effective_context == 2 and .unit == "token"' $TMP/wq.jsonl

# --- BPE (txl's own merges, 400 tokens): the needle's key and value encode to different
# numbers of tokens in different trials, so the trials are padded (with the space token)
train bpe --set data.tokenizer=bpe --set data.train=$TMP/wiki.txt --set data.vocab_size=400
BK=$TMP/bpe/last.safetensors.gz
$TXL probe needle $BK --data $TMP/wiki.txt --trials 8 --lengths 4 --depths 0,100 --json \
    > $TMP/bneedle.jsonl 2>$TMP/bneedle.err || bad "bpe: needle: $(cat $TMP/bneedle.err)"
check "bpe, needle: rows in tokens, the value in 1 to 7 tokens, sentences of different lengths padded, no trial cut: $(jq -c '{mode, depth, value_tokens, pad_max, cut_trials}' $TMP/bneedle.jsonl | tr '\n' ' ')" \
    jq -s -e 'length == 4 and all(.unit == "token" and .value_tokens >= 1 and .value_tokens <= 7 and .cut_trials == 0 and .pad_max > 0)' $TMP/bneedle.jsonl
check "  ... a note says the sentence is in the model's BPE tokens" grep -q "in the model's BPE tokens" $TMP/bneedle.err
$TXL probe recall $BK --data $TMP/wiki.txt --trials 8 --distances 16,100 --json -q \
    > $TMP/brecall.jsonl 2>$TMP/err
check "bpe, recall: rows in tokens, the controls lined up, no cut $(cat $TMP/err)" \
    jq -s -e 'length == 6 and all(.unit == "token") and (map(select(.distance)) | all(.cut_trials == 0))' $TMP/brecall.jsonl
$TXL probe shift $BK --data $TMP/wiki.txt --max-tokens 2000 --json -q > $TMP/bshift.jsonl
check "bpe, shift with xl: invariant, 1999 tokens scored" \
    jq -s -e 'length == 4 and all(.delta == 0 and .tokens == 1999)' $TMP/bshift.jsonl
finish
