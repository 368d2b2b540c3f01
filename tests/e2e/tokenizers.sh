#!/bin/sh
# Word-level and BPE models through every command (doc/design.md, "Vocabularies"): train
# builds the vocabulary from the train split and says so; the vocabulary travels in the
# checkpoint (eval, sample, info, export and import need no other file); a resume equals the
# uninterrupted run bit for bit; the metrics count tokens and the bytes of text they cover;
# changing the tokenizer or the vocabulary on --resume or --init-from is exit 2; damaged
# vocabulary state in a checkpoint is refused naming the tensor or the key.
. tests/e2e/lib.sh
. tests/e2e/badlib.inc

# 300 KB of Shakespeare with its punctuation split off as WikiText's is ("city ." not
# "city."): words split on whitespace, a line end each line
zcat tests/data/tinyshakespeare.txt.gz | head -c 300000 | sed 's/\([.,;:!?]\)/ \1/g' > $TMP/wt.txt
W="-c tests/configs/micro.yaml --set data.tokenizer=word --set data.train=$TMP/wt.txt
   --set data.vocab_size=2000 --set train.eval_tokens=3000 --set train.warmup_steps=2"

# ---- word: train, the vocabulary built and said so -------------------------------------
$TXL train $W --set train.max_steps=12 --set train.out_dir=$TMP/w > $TMP/w.out 2>$TMP/w.err
check "word: train exits 0" test $? -eq 0
check "word: train says it built the vocabulary from the train split" \
    grep -q "built a word vocabulary of 2002 tokens from the train split" $TMP/w.err
check "word: the banner counts word tokens" grep -q "word tokens of" $TMP/w.err
check "word: training lines show ppl (a step's bpc counts no bytes)" \
    jq -s -e 'map(select(.event == "train")) | length > 0 and
              all(.bpc == null and .ppl > 1 and ((.ppl - (.loss | exp)) | fabs) < 1e-3 * .ppl)' \
    $TMP/w/log.jsonl
check "word: validations report loss per token, ppl and bpc over the bytes" jq -s -e \
    'map(select(.event == "eval")) | length > 0 and all(.tokens > 0 and .bytes > 2 * .tokens
     and (.bpc - .loss * .tokens / .bytes / 0.6931471805599453 | fabs) < 1e-5)' $TMP/w/log.jsonl
check "word: the checkpoint holds its vocabulary" sh -c \
    "python3 tools/st_reader.py $TMP/w/last.safetensors.gz | grep -q '^vocab  *U8'"

# ---- plot: the loss per token and its perplexity (train events have no bpc) -----------------
# (exit 2 before: "'eval' events but no 'train' events", the train events' bpc being null)
plot_tokens() { # plot_tokens NAME RUN: the learning curves of a word or BPE run, read off the SVG
    if ! command -v gnuplot >/dev/null 2>&1; then echo "  SKIP plot: no gnuplot"; return; fi
    $TXL plot $2 -o $TMP/$1.svg 2>$TMP/err
    check "$1: txl plot exits 0 (was 2)" test $? -eq 0
    check "$1: ... its points: every train event and validation" \
        grep -q "run, $(jq -s 'map(select(.event == "train" or .event == "eval")) | length' $2/log.jsonl) points)" $TMP/err
    check "$1: ... the title, the loss and perplexity axes, the token axis, the legend" sh -c ". tests/e2e/lib.sh
        svg_has $TMP/$1.svg '$(basename $2): loss per token while training' &&
        svg_has $TMP/$1.svg 'loss (nats per token)' && svg_has $TMP/$1.svg 'perplexity (exp of the loss)' &&
        svg_has $TMP/$1.svg \"training tokens (thousands; tokens of the run's vocabulary)\" &&
        svg_has $TMP/$1.svg '$(basename $2) train' && svg_has $TMP/$1.svg '$(basename $2) valid'"
    $TXL plot $2 -o $TMP/$1.svg --script > $TMP/$1.gp 2>/dev/null
    check "$1: ... the last train point is the last step's loss" \
        grep -q " $(jq -r 'select(.event == "train") | .loss' $2/log.jsonl | tail -1 | awk '{printf "%.6f", $1}')\$" $TMP/$1.gp
    check "$1: ... the right-hand axis reads the perplexity of the losses" \
        sh -c "grep -q '^set link y2 via exp(y) inverse log(y)' $TMP/$1.gp && grep -q '^set y2tics' $TMP/$1.gp"
}
plot_tokens word $TMP/w

# ---- eval: every token after the first scored once, any batch ------------------------------
printf 'The game began in the city .\nIt was a good year for the game .\n\n' > $TMP/small.txt
$TXL eval $TMP/w --data $TMP/small.txt --json -q > $TMP/e1.json 2>$TMP/err ||
    bad "eval: $(cat $TMP/err)"
check "eval: tokens = words + line ends - 1 (16 + 3 - 1)" jq -e '.tokens == 18' $TMP/e1.json
check "eval: bytes = the normalised text's after the first word (29 + 34 + 1 - 3)" \
    jq -e '.bytes == 61' $TMP/e1.json
$TXL eval $TMP/w --data $TMP/small.txt --json -q --batch 3 --tgt-len 4 > $TMP/e3.json
check "eval: another batch and length score the same tokens and bytes" \
    test "$(jq -c '[.tokens, .bytes]' $TMP/e1.json)" = "$(jq -c '[.tokens, .bytes]' $TMP/e3.json)"
check "eval: ppl = exp(loss)" jq -e '((.ppl - (.loss | exp)) | fabs) < 1e-3 * .ppl' $TMP/e1.json
# sweeps and the paper's mask in tokens: mem_len x 1, 2 of the trained 32 tokens, the same
# tokens scored in every row; a sweep's factor 1 is the plain evaluation, and with
# --same-length the same-length one, which scores otherwise
tail -c 30000 $TMP/wt.txt > $TMP/wv.txt
EW="--data $TMP/wv.txt --max-tokens 2000 --json -q"
# shellcheck disable=SC2086
$TXL eval $TMP/w $EW --sweep 1,2 > $TMP/sw.jsonl 2>$TMP/err || bad "eval --sweep, word: $(cat $TMP/err)"
# shellcheck disable=SC2086
$TXL eval $TMP/w $EW --sweep 1,2 --same-length > $TMP/swsl.jsonl 2>$TMP/err ||
    bad "eval --sweep --same-length, word: $(cat $TMP/err)"
# shellcheck disable=SC2086
$TXL eval $TMP/w $EW > $TMP/pl.json
# shellcheck disable=SC2086
$TXL eval $TMP/w $EW --same-length > $TMP/sl.json
check "eval --sweep 1,2, word: mem_len 32 and 64 tokens, 1999 tokens scored in each: $(jq -c '[.factor, .mem_len, .tokens, .loss]' $TMP/sw.jsonl | tr '\n' ' ')" \
    jq -s -e 'map([.factor, .mem_len, .tokens, .same_length]) == [[1, 32, 1999, false], [2, 64, 1999, false]]' $TMP/sw.jsonl
check "  ... --same-length too: $(jq -c '[.factor, .mem_len, .loss]' $TMP/swsl.jsonl | tr '\n' ' ')" \
    jq -s -e 'map([.factor, .mem_len, .tokens, .same_length]) == [[1, 32, 1999, true], [2, 64, 1999, true]]' $TMP/swsl.jsonl
check "  ... factor 1 is the plain evaluation, bit for bit" \
    test "$(jq -s -c '.[0] | [.loss, .bpc, .bytes]' $TMP/sw.jsonl)" = "$(jq -c '[.loss, .bpc, .bytes]' $TMP/pl.json)"
check "  ... and with --same-length the same-length evaluation" \
    test "$(jq -s -c '.[0] | [.loss, .bpc, .bytes]' $TMP/swsl.jsonl)" = "$(jq -c '[.loss, .bpc, .bytes]' $TMP/sl.json)"
check "eval --same-length, word: its own mask, another loss ($(jq .loss $TMP/sl.json) vs $(jq .loss $TMP/pl.json))" \
    jq -n -e --slurpfile a $TMP/sl.json --slurpfile b $TMP/pl.json \
        '$a[0].same_length and ($a[0].loss != $b[0].loss) and $a[0].tokens == $b[0].tokens'

# ---- sample: words, spaces between them ----------------------------------------------------
$TXL sample $TMP/w --prompt "The game" -n 80 --seed 3 > $TMP/s.txt 2>$TMP/err
check "sample: exit 0" test $? -eq 0
check "sample: words separated by single spaces, no byte soup" \
    sh -c "head -c 60 $TMP/s.txt | grep -q -E '^ [^ ]+( [^ ]+)+'"
$TXL sample $TMP/w --prompt "The game" -n 80 --seed 3 > $TMP/s2.txt 2>/dev/null
check "sample: the same seed, the same text" cmp -s $TMP/s.txt $TMP/s2.txt
# -n counts the vocabulary's tokens (it counted bytes: a word model's sample stopped
# mid-word after 80 bytes)
$TXL sample $TMP/w --prompt "The game" -n 12 --seed 3 --json -q > $TMP/s12.json
check "sample -n 12, word: 12 tokens, whole words: $(jq -c '[.tokens, .bytes, .finish]' $TMP/s12.json)" \
    jq -e '.tokens == 12 and .finish == "length" and .bytes > 12 and
           (.text | [scan("[^ \n]+|\n")] | length) == 12' $TMP/s12.json
$TXL sample $TMP/w --prompt "The game" -n 12 --seed 3 -q > $TMP/s12.txt
check "  ... the streamed text is the same 12 tokens (a newline added at the end)" \
    test "$(jq -r .text $TMP/s12.json)" = "$(cat $TMP/s12.txt)"
# top-k and top-p over the word vocabulary: a seed gives its text, top-k 1 is greedy
for o in "--top-k 5" "--top-p 0.5" "--top-k 50 --top-p 0.9"; do
    # shellcheck disable=SC2086
    $TXL sample $TMP/w --prompt "The game" -n 30 --seed 4 $o --json -q > $TMP/k1.json 2>$TMP/err
    # shellcheck disable=SC2086
    $TXL sample $TMP/w --prompt "The game" -n 30 --seed 4 $o --json -q > $TMP/k2.json 2>>$TMP/err
    check "sample $o, word: 30 words, the same seed the same text" \
        sh -c "jq -e '.tokens == 30' $TMP/k1.json && test \"\$(jq .text $TMP/k1.json)\" = \"\$(jq .text $TMP/k2.json)\""
done
$TXL sample $TMP/w --prompt "The game" -n 30 --top-k 1 --seed 5 --json -q | jq .text > $TMP/g1.txt
$TXL sample $TMP/w --prompt "The game" -n 30 -t 0 --seed 6 --json -q | jq .text > $TMP/g0.txt
check "sample --top-k 1, word: the greedy text (-t 0), whatever the seed" cmp -s $TMP/g1.txt $TMP/g0.txt
$TXL sample $TMP/w --prompt "The game" -n 30 --top-p 1e-9 --seed 7 --json -q | jq .text > $TMP/p0.txt
check "sample --top-p 1e-9, word: the greedy text too" cmp -s $TMP/p0.txt $TMP/g0.txt
$TXL sample $TMP/w --prompt "The game" -n 200 --top-k 3 --seed 8 --json -q | jq -r .text | tr ' ' '\n' | sort -u > $TMP/k3.words
$TXL sample $TMP/w --prompt "The game" -n 200 --seed 8 --json -q | jq -r .text | tr ' ' '\n' | sort -u > $TMP/all.words
check "sample --top-k 3, word: fewer distinct words than sampling from all ($(wc -l < $TMP/k3.words) vs $(wc -l < $TMP/all.words))" \
    test "$(wc -l < $TMP/k3.words)" -lt "$(wc -l < $TMP/all.words)"

# ---- info ------------------------------------------------------------------------------------
$TXL info $TMP/w/last.safetensors.gz > $TMP/info.txt 2>&1
check "info: names the word vocabulary" grep -q "^vocabulary: 2002 tokens (word vocabulary)" \
    $TMP/info.txt

# ---- resume: the same steps as an uninterrupted run ---------------------------------------
$TXL train $W --set train.max_steps=12 --set train.out_dir=$TMP/r --steps 6 -q >/dev/null 2>&1
$TXL train --resume $TMP/r -q >/dev/null 2>$TMP/err || bad "resume: $(cat $TMP/err)"
step_losses $TMP/w/log.jsonl > $TMP/a.l
step_losses $TMP/r/log.jsonl > $TMP/b.l
check "resume: every step's loss equals the uninterrupted run's" cmp -s $TMP/a.l $TMP/b.l

# ---- the tokenizer or the vocabulary may not change ---------------------------------------
$TXL train --resume $TMP/r --set data.tokenizer=byte --set data.vocab_size=0 \
    --set train.max_steps=20 > /dev/null 2>$TMP/err
check "resume with another tokenizer: exit 2" test $? -eq 2
check "...the message names the tokenizers" grep -q "data.tokenizer differs from the checkpoint's" $TMP/err
$TXL train $W --set data.vocab_size=1000 --set train.max_steps=20 --set train.out_dir=$TMP/i \
    --init-from $TMP/w/last.safetensors.gz > /dev/null 2>$TMP/err
check "--init-from with a vocabulary built otherwise: exit 2" test $? -eq 2
check "...naming data.vocab_size" grep -q "data.vocab_size 1000 and min_freq 0 ask for another vocabulary" $TMP/err
$TXL train -c tests/configs/micro.yaml --set train.max_steps=20 --set train.out_dir=$TMP/i2 \
    --init-from $TMP/w/last.safetensors.gz > /dev/null 2>$TMP/err
check "--init-from a word checkpoint into a byte config: exit 2" test $? -eq 2
check "...naming the tokenizers" grep -q "data.tokenizer differs" $TMP/err
$TXL train $W --set data.vocab_size=0 --set data.vocab=$TMP/w/last.safetensors.gz \
    --set train.max_steps=14 --set train.out_dir=$TMP/i3 --init-from $TMP/w -q >/dev/null 2>$TMP/err
check "--init-from with data.vocab = the checkpoint's vocabulary: exit 0" test $? -eq 0

# ---- export and import: the vocabulary travels with the weights ----------------------------
$TXL export $TMP/w/last.safetensors.gz -o $TMP/x.safetensors -q 2>$TMP/err || bad "export: $(cat $TMP/err)"
sed -n '/^config:/,$p' $TMP/info.txt | tail -n +2 > $TMP/cfg.yaml
$TXL import $TMP/x.safetensors -c $TMP/cfg.yaml -o $TMP/y.safetensors.gz -q 2>$TMP/err ||
    bad "import: $(cat $TMP/err)"
$TXL eval $TMP/w/last.safetensors.gz --data $TMP/small.txt --json -q > $TMP/ea.json
$TXL eval $TMP/y.safetensors.gz --data $TMP/small.txt --json -q > $TMP/eb.json 2>$TMP/err
check "export, import: the same loss" \
    test "$(jq .loss $TMP/ea.json)" = "$(jq .loss $TMP/eb.json)"

# ---- damaged vocabulary state ---------------------------------------------------------------
gzip -dc $TMP/w/last.safetensors.gz > $TMP/p.safetensors
st_drop $TMP/p.safetensors $TMP/novocab.safetensors 'del(.vocab)'
$TXL eval $TMP/novocab.safetensors --data $TMP/small.txt > /dev/null 2>$TMP/err
check "a word checkpoint without its vocab tensor: exit 2" test $? -eq 2
check "...naming the tensor" grep -q "missing tensor 'vocab'" $TMP/err
st_edit $TMP/p.safetensors $TMP/vs.safetensors '.__metadata__.vocab_size = "1999"'
$TXL eval $TMP/vs.safetensors --data $TMP/small.txt > /dev/null 2>$TMP/err
check "a vocab_size that disagrees with the embedding: exit 2" test $? -eq 2
check "...naming word_emb.weight" grep -q "word_emb.weight" $TMP/err
st_edit $TMP/p.safetensors $TMP/novs.safetensors 'del(.__metadata__.vocab_size)'
$TXL info $TMP/novs.safetensors > /dev/null 2>$TMP/err
check "a word checkpoint without metadata vocab_size: exit 2" test $? -eq 2
check "...naming the key" grep -q "no metadata 'vocab_size'" $TMP/err

# ---- hier with words: coordinates from the decoded text, anchors after the vocabulary ------
$TXL train $W --set train.max_steps=6 --set train.out_dir=$TMP/h --set model.pos_scheme=hier \
    --set data.anchors=[bos,para,sent] -q > /dev/null 2>$TMP/err || bad "hier: $(cat $TMP/err)"
$TXL eval $TMP/h --data $TMP/small.txt --json -q > $TMP/h.json 2>$TMP/err ||
    bad "hier eval: $(cat $TMP/err)"
check "hier + anchors, word: a sent anchor scored beside the words (with bos first, the first word is scored too)" \
    jq -e '.anchor_tokens == 1 and .tokens == 20 and .bytes == 64' $TMP/h.json
check "hier + anchors, word: vocab info lists the anchors as specials after the 2002 words" \
    sh -c "$TXL vocab info $TMP/h | grep -q -x -F \"specials: eos=0 unk=1 bos=2002 para=2003 sent=2004 (bos, para, sent: the model's anchors)\""
# ---- bpe: built from the train split, bits per byte over the exact bytes -------------------
zcat tests/data/tinyshakespeare.txt.gz | head -c 300000 > $TMP/sh.txt
P="-c tests/configs/micro.yaml --set data.tokenizer=bpe --set data.train=$TMP/sh.txt
   --set data.vocab_size=600 --set train.eval_tokens=3000 --set train.warmup_steps=2"
$TXL train $P --set train.max_steps=12 --set train.out_dir=$TMP/b > /dev/null 2>$TMP/b.err
check "bpe: train exits 0" test $? -eq 0
check "bpe: train says it built the vocabulary from the train split" \
    grep -q "built a bpe vocabulary of 600 tokens from the train split" $TMP/b.err
# export and import: the vocabulary travels with the weights, the same loss
$TXL export $TMP/b/last.safetensors.gz -o $TMP/bx.safetensors -q 2>$TMP/err || bad "bpe export: $(cat $TMP/err)"
$TXL info $TMP/b/last.safetensors.gz | sed -n '/^config:/,$p' | tail -n +2 > $TMP/bcfg.yaml
$TXL import $TMP/bx.safetensors -c $TMP/bcfg.yaml -o $TMP/by.safetensors.gz -q 2>$TMP/err ||
    bad "bpe import: $(cat $TMP/err)"
head -c 20000 $TMP/sh.txt > $TMP/bv.txt
$TXL eval $TMP/b/last.safetensors.gz --data $TMP/bv.txt --json -q > $TMP/bea.json
$TXL eval $TMP/by.safetensors.gz --data $TMP/bv.txt --json -q > $TMP/beb.json 2>$TMP/err
check "bpe: export, import: the same loss, tokens and bytes ($(jq -c '[.loss, .tokens, .bytes]' $TMP/beb.json))" \
    sh -c "jq -e '.tokens > 0' $TMP/beb.json && test \"\$(jq -c '[.loss, .tokens, .bytes]' $TMP/bea.json)\" = \"\$(jq -c '[.loss, .tokens, .bytes]' $TMP/beb.json)\""
check "  ... the imported checkpoint holds the BPE vocabulary" \
    sh -c "$TXL vocab info $TMP/by.safetensors.gz | grep -q -x 'kind: bpe'"
plot_tokens bpe $TMP/b
printf 'ROMEO:\nBut soft. What light through yonder window breaks?\n' > $TMP/r.txt
$TXL eval $TMP/b --data $TMP/r.txt --json -q > $TMP/be.json 2>$TMP/err || bad "bpe eval: $(cat $TMP/err)"
check "bpe: the bytes scored are the text's after the first token (fewer tokens than bytes)" \
    jq -e --argjson n "$(wc -c < $TMP/r.txt)" '.bytes < $n and .bytes > $n - 8 and .tokens < .bytes' \
    $TMP/be.json
$TXL sample $TMP/b --prompt "ROMEO:" -n 100 --seed 2 --echo > $TMP/bs.txt 2>/dev/null
check "bpe: sample echoes the prompt and continues it" sh -c "head -c 6 $TMP/bs.txt | grep -q '^ROMEO:'"
$TXL sample $TMP/b --prompt "ROMEO:" -n 40 --seed 2 --json -q > $TMP/b40.json
check "bpe: sample -n 40 draws 40 pieces, more bytes than that: $(jq -c '[.tokens, .bytes]' $TMP/b40.json)" \
    jq -e '.tokens == 40 and .bytes > 40 and .finish == "length"' $TMP/b40.json
$TXL sample $TMP/b --prompt "ROMEO:" -n 40 --top-k 1 --seed 3 --json -q | jq .text > $TMP/bg1.txt
$TXL sample $TMP/b --prompt "ROMEO:" -n 40 -t 0 --json -q | jq .text > $TMP/bg0.txt
check "bpe: sample --top-k 1 is the greedy text" cmp -s $TMP/bg1.txt $TMP/bg0.txt
$TXL sample $TMP/b --prompt "ROMEO:" -n 40 --top-k 20 --top-p 0.8 --seed 3 --json -q > $TMP/bk1.json
$TXL sample $TMP/b --prompt "ROMEO:" -n 40 --top-k 20 --top-p 0.8 --seed 3 --json -q > $TMP/bk2.json
check "bpe: sample --top-k 20 --top-p 0.8: 40 pieces, the same seed the same text, not the greedy one" \
    sh -c "jq -e '.tokens == 40' $TMP/bk1.json && test \"\$(jq .text $TMP/bk1.json)\" = \"\$(jq .text $TMP/bk2.json)\" &&
           test \"\$(jq .text $TMP/bk1.json)\" != \"\$(cat $TMP/bg0.txt)\""
$TXL train $P --set train.max_steps=12 --set train.out_dir=$TMP/br --steps 5 -q >/dev/null 2>&1
$TXL train --resume $TMP/br -q >/dev/null 2>$TMP/err || bad "bpe resume: $(cat $TMP/err)"
step_losses $TMP/b/log.jsonl > $TMP/a.l
step_losses $TMP/br/log.jsonl > $TMP/b.l
check "bpe resume: every step's loss equals the uninterrupted run's" cmp -s $TMP/a.l $TMP/b.l
$TXL train $P --set train.max_steps=6 --set train.out_dir=$TMP/bh --set model.pos_scheme=hier \
    --set data.anchors=[bos,para,sent] -q > /dev/null 2>$TMP/err || bad "bpe hier: $(cat $TMP/err)"
$TXL eval $TMP/bh --data $TMP/r.txt --json -q > $TMP/bh.json 2>$TMP/err || bad "bpe hier eval: $(cat $TMP/err)"
check "bpe + anchors: every byte scored (bos first), the sentence anchors apart" \
    jq -e --argjson n "$(wc -c < $TMP/r.txt)" '.bytes == $n and .anchor_tokens >= 1' $TMP/bh.json
# ---- token files: data.train reads a text's ids (txl vocab encode --binary) -----------------
$TXL vocab build --tokenizer bpe --size 600 $TMP/sh.txt -o $TMP/b600.vocab -q
$TXL vocab encode $TMP/b600.vocab $TMP/sh.txt --binary -o $TMP/sh.tok -q
head -c 20000 $TMP/sh.txt > $TMP/v.txt
for src in sh.txt sh.tok; do
    $TXL train -c tests/configs/micro.yaml --set data.tokenizer=bpe --set data.vocab=$TMP/b600.vocab \
        --set data.train=$TMP/$src --set data.valid=$TMP/v.txt --set train.max_steps=6 \
        --set train.warmup_steps=1 --set train.eval_tokens=2000 --set train.out_dir=$TMP/t_$src \
        -q >/dev/null 2>$TMP/err || bad "train on $src: $(cat $TMP/err)"
    step_losses $TMP/t_$src/log.jsonl > $TMP/$src.l
done
check "a token file trains exactly as its text: the same step losses" \
    sh -c "test -s $TMP/sh.tok.l && cmp -s $TMP/sh.txt.l $TMP/sh.tok.l"
$TXL eval $TMP/t_sh.tok --data $TMP/sh.tok --max-tokens 3000 --json -q > $TMP/te.json 2>$TMP/err
check "eval --data a token file" jq -e '.tokens == 2999 and .bytes > 2999' $TMP/te.json
$TXL train $P --set data.train=$TMP/sh.tok --set train.out_dir=$TMP/t1 --dry-run >/dev/null 2>$TMP/err
check "a token file without data.vocab: exit 2" test $? -eq 2
check "...saying its ids need data.vocab" grep -q "is a token file: its ids need their vocabulary" $TMP/err
$TXL train $W --set data.vocab_size=0 --set data.vocab=$TMP/w/last.safetensors.gz \
    --set data.train=$TMP/sh.tok --set train.out_dir=$TMP/t2 --dry-run >/dev/null 2>$TMP/err
check "a token file of another vocabulary: exit 2" test $? -eq 2
check "...naming the file" grep -q "sh.tok: a token file of another vocabulary" $TMP/err
$TXL eval $TMP/w --data $TMP/sh.tok >/dev/null 2>$TMP/err
check "eval of a word model on a BPE token file: exit 2" test $? -eq 2
gzip -c $TMP/sh.tok > $TMP/sh.tok.gz
$TXL train $P --set data.vocab_size=0 --set data.vocab=$TMP/b600.vocab --set data.train=$TMP/sh.tok.gz \
    --set train.out_dir=$TMP/t3 --dry-run >/dev/null 2>$TMP/err
check "a gzip'd token file: exit 2, saying to gunzip it" grep -q "gunzip it first" $TMP/err
$TXL eval $TMP/b --data $TMP/sh.tok > /dev/null 2>$TMP/err
check "eval of a BPE model whose vocabulary is not the token file's: named" \
    grep -q "a token file of another vocabulary" $TMP/err
finish
