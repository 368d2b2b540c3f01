#!/bin/sh
# The adaptive softmax and input (model.cutoffs, div_val, d_embed, tie_projs; doc/design.md,
# "The model") through every command: a word model trains, resumes bit for bit, evaluates
# (every token after the first scored), samples (the same seed, the same text), probes
# (the greedy answers from the whole distribution), exports and imports (the same loss), and
# txl info finds its Adam moments; its checkpoint holds official's tensor names, a model
# without cutoffs today's; a cutoff not below V is refused naming V (a word vocabulary's,
# known once it is built: nothing is written), and so are the keys' other faults.
. tests/e2e/lib.sh

zcat tests/data/tinyshakespeare.txt.gz | head -c 300000 | sed 's/\([.,;:!?]\)/ \1/g' > $TMP/wt.txt
W="-c tests/configs/micro.yaml --set data.tokenizer=word --set data.train=$TMP/wt.txt
   --set data.vocab_size=2000 --set train.eval_tokens=3000 --set train.warmup_steps=2
   --set model.cutoffs=[200,800] --set model.div_val=2 --set model.d_embed=48
   --set model.tie_projs=true"
printf 'The king is come to the city .\nIt was a good day for the king .\n\n' > $TMP/small.txt

# ---- train: official's names, the parameter count of the table -------------------------
$TXL train $W --set train.max_steps=12 --set train.out_dir=$TMP/a --dry-run > $TMP/dry.json 2>$TMP/err
check "dry run exits 0" test $? -eq 0
$TXL train $W --set train.max_steps=12 --set train.out_dir=$TMP/a > $TMP/a.json 2>$TMP/err
check "word model with cutoffs: train exits 0" test $? -eq 0
python3 tools/st_reader.py $TMP/a/last.safetensors.gz > $TMP/tensors.txt 2>&1
for t in word_emb.emb_layers.0.weight word_emb.emb_layers.2.weight word_emb.emb_projs.1 \
         crit.cluster_weight crit.cluster_bias crit.out_layers.1.bias crit.out_projs.0; do
    check "the checkpoint holds $t" grep -q "^$t " $TMP/tensors.txt
done
check "the tails' output projections are tied (no crit.out_projs.1)" \
    sh -c "! grep -q '^crit.out_projs.1 ' $TMP/tensors.txt"
check "no word_emb.weight, no out.bias" sh -c "! grep -q -E '^(word_emb.weight|out.bias) ' $TMP/tensors.txt"
check "word_emb.emb_layers.1.weight is cluster 1's [600, 24]" \
    grep -q -E '^word_emb.emb_layers.1.weight +F32 +\[600, 24\]' $TMP/tensors.txt
$TXL info $TMP/a/last.safetensors.gz --json > $TMP/info.json 2>$TMP/err
check "info: resumable (its Adam moments found), the dry run's parameter count" \
    jq -e --argjson p "$(jq .params $TMP/dry.json)" '.resumable and .params == $p' $TMP/info.json

# ---- resume == the uninterrupted run ------------------------------------------------------
$TXL train $W --set train.max_steps=12 --set train.out_dir=$TMP/r --steps 6 -q >/dev/null 2>&1
$TXL train --resume $TMP/r -q >/dev/null 2>$TMP/err || bad "resume: $(cat $TMP/err)"
step_losses $TMP/a/log.jsonl > $TMP/a.l
step_losses $TMP/r/log.jsonl > $TMP/b.l
check "resume: every step's loss equals the uninterrupted run's (12 steps)" \
    sh -c "cmp -s $TMP/a.l $TMP/b.l && test \$(wc -l < $TMP/a.l) -eq 12"

# ---- eval, sample, probe -----------------------------------------------------------------
$TXL eval $TMP/a --data $TMP/small.txt --json -q > $TMP/e1.json 2>$TMP/err
check "eval: exit 0, every token after the first scored (17 words + 3 line ends - 1)" \
    jq -e '.tokens == 19 and .loss > 0' $TMP/e1.json
$TXL eval $TMP/a --data $TMP/small.txt --json -q --batch 2 --tgt-len 5 > $TMP/e2.json
check "eval: another batch and length score the same tokens and bytes" \
    test "$(jq -c '[.tokens, .bytes]' $TMP/e1.json)" = "$(jq -c '[.tokens, .bytes]' $TMP/e2.json)"
$TXL sample $TMP/a --prompt "The king" -n 60 --seed 5 > $TMP/s1.txt 2>$TMP/err
check "sample: exit 0, words" sh -c "test $? -eq 0 && grep -q -E '^ [^ ]+( [^ ]+)+' $TMP/s1.txt"
$TXL sample $TMP/a --prompt "The king" -n 60 --seed 5 > $TMP/s2.txt 2>/dev/null
check "sample: the same seed, the same text" cmp -s $TMP/s1.txt $TMP/s2.txt
$TXL sample $TMP/a --prompt "The king" -n 60 --temperature 0 --num-samples 3 > $TMP/g.txt 2>$TMP/err
check "greedy samples of 3 streams side by side: exit 0" test $? -eq 0
$TXL probe recall $TMP/a --data $TMP/wt.txt --trials 2 --distances 8 --json -q > $TMP/p.json 2>$TMP/err
check "probe recall: exit 0" test $? -eq 0
$TXL probe needle $TMP/a --data $TMP/wt.txt --trials 2 --json -q > $TMP/n.json 2>$TMP/err
check "probe needle (greedy answers from the whole distribution): exit 0, accuracies" \
    jq -s -e 'map(select(.accuracy != null)) | length > 0' $TMP/n.json

# ---- export and import: the same loss --------------------------------------------------------
$TXL export $TMP/a/last.safetensors.gz -o $TMP/x.safetensors -q 2>$TMP/err || bad "export: $(cat $TMP/err)"
$TXL info $TMP/a/last.safetensors.gz | sed -n '/^config:/,$p' | tail -n +2 > $TMP/cfg.yaml
$TXL import $TMP/x.safetensors -c $TMP/cfg.yaml -o $TMP/y.safetensors.gz -q 2>$TMP/err ||
    bad "import: $(cat $TMP/err)"
$TXL eval $TMP/y.safetensors.gz --data $TMP/small.txt --json -q > $TMP/e3.json 2>$TMP/err
check "export, import: the same loss" test "$(jq .loss $TMP/e1.json)" = "$(jq .loss $TMP/e3.json)"

# ---- without cutoffs: today's tensors ------------------------------------------------------
$TXL train -c tests/configs/micro.yaml --set train.max_steps=2 --set train.warmup_steps=0 \
    --set train.out_dir=$TMP/f -q \
    > /dev/null 2>&1
python3 tools/st_reader.py $TMP/f/last.safetensors.gz > $TMP/ftensors.txt 2>&1
check "no cutoffs: word_emb.weight [256, 64] and out.bias [256], no adaptive tensor" \
    sh -c "grep -q -E '^word_emb.weight +F32 +\[256, 64\]' $TMP/ftensors.txt &&
           grep -q -E '^out.bias +F32 +\[256\]' $TMP/ftensors.txt &&
           ! grep -q -E '^(crit|word_emb.emb)' $TMP/ftensors.txt"

# ---- refused ------------------------------------------------------------------------------------
$TXL train $W --set model.cutoffs=[200,3000] --set train.out_dir=$TMP/bad1 > /dev/null 2>$TMP/err
check "a cutoff not below the word vocabulary's V: exit 2" test $? -eq 2
check "...naming V = 2002" grep -q "model.cutoffs: 3000 is not below the vocabulary's size V = 2002" $TMP/err
check "...and nothing written" test ! -e $TMP/bad1
$TXL train -c tests/configs/micro.yaml --set model.cutoffs=[100,256] --set train.out_dir=$TMP/bad2 \
    > /dev/null 2>$TMP/err
check "bytes: a cutoff of 256: exit 2 naming the config and V = 256" sh -c \
    "test $? -eq 2 && grep -q 'tests/configs/micro.yaml: model.cutoffs: 256 is not below the vocabulary.s size V = 256' $TMP/err"
for bad in "model.cutoffs=[30,20]" "model.cutoffs=[0]" "model.cutoffs=30" "model.div_val=0" \
           "model.d_embed=-1" "model.cutoffs=[1,2,3,4,5,6,7,8,9]"; do
    $TXL train -c tests/configs/micro.yaml --set "$bad" --set train.out_dir=$TMP/bad3 \
        > /dev/null 2>$TMP/err
    check "--set $bad: exit 2 naming the key" sh -c \
        "test $? -eq 2 && grep -q -E 'model\.(cutoffs|div_val|d_embed)' $TMP/err && test ! -e $TMP/bad3"
done
$TXL train -c tests/configs/micro.yaml --set model.div_val=2 --set train.out_dir=$TMP/bad4 \
    > /dev/null 2>$TMP/err
check "div_val 2 without cutoffs: exit 2" grep -q "model.div_val 2 needs model.cutoffs" $TMP/err
finish
