#!/bin/sh
# txl info for people and for scripts: the text shows counts as integers, the losses in nats
# per token and in bits (bpc = loss / ln 2) rounded to 4 places, the training time as
# "1.5 s" / "8 min 45 s" / "2 h 03 min", and says when there is no validation loss; --json
# keeps the numbers and adds best_valid_bpc and valid_bpc (null when the loss is).
. tests/e2e/lib.sh
. tests/e2e/badlib.inc

R=$TMP/run
$TXL train -q -c tests/configs/micro.yaml --set train.max_steps=20 --set train.warmup_steps=2 \
    --set train.eval_tokens=4000 --set train.ckpt_gzip=false --set train.out_dir=$R \
    >/dev/null 2>$TMP/train.err || bad "train: $(cat $TMP/train.err)"
CK=$R/last.safetensors
$TXL info $CK > $TMP/info.txt 2>$TMP/info.err
check "info: exit 0" test $? -eq 0
$TXL info $CK --json > $TMP/info.json
check "info --json parses" jq -e . $TMP/info.json

best=$(jq .best_valid_loss $TMP/info.json)
want=$(awk -v l="$best" 'BEGIN {printf "best valid: loss %.4f nats/token, ppl %.2f, %.4f bpc", l, exp(l), l / log(2)}')
check "text: '$want'" grep -q -x -F "$want" $TMP/info.txt
last=$(jq .valid_loss $TMP/info.json)
want=$(awk -v l="$last" 'BEGIN {printf "last valid: loss %.4f nats/token, ppl %.2f, %.4f bpc", l, exp(l), l / log(2)}')
check "text: '$want'" grep -q -x -F "$want" $TMP/info.txt
check "text: step and tokens as integers" \
    sh -c "grep -q -x 'step: 20' $TMP/info.txt && grep -q -x 'tokens: 5120' $TMP/info.txt"
check "text: 'trained: N.N s' (under a minute)" grep -q -x -E 'trained: [0-9]+\.[0-9] s' $TMP/info.txt
check_not "text: no raw doubles (like 1.5465690650007673)" grep -q -E '[0-9]\.[0-9]{7}' $TMP/info.txt
check_not "text: no raw metadata keys (elapsed_s, best_valid_loss)" \
    grep -q -E '^(elapsed_s|best_valid_loss|valid_loss):' $TMP/info.txt
check "json: the numbers stay (step, tokens, elapsed_s, losses)" \
    jq -e '.step == 20 and .tokens == 5120 and .elapsed_s > 0 and .best_valid_loss > 0 and .valid_loss > 0' $TMP/info.json
check "json: best_valid_bpc = best_valid_loss / ln 2" \
    jq -e '(.best_valid_bpc - .best_valid_loss / 0.6931471805599453) | fabs < 1e-12' $TMP/info.json
check "json: valid_bpc = valid_loss / ln 2" \
    jq -e '(.valid_bpc - .valid_loss / 0.6931471805599453) | fabs < 1e-12' $TMP/info.json

# other metadata values, edited into a copy
st_edit $CK $TMP/e.safetensors '.__metadata__.elapsed_s = "525.25"'
check "525.25 s: 'trained: 8 min 45 s'" sh -c "$TXL info $TMP/e.safetensors | grep -q -x 'trained: 8 min 45 s'"
st_edit $CK $TMP/e.safetensors '.__metadata__.elapsed_s = "7384"'
check "7384 s: 'trained: 2 h 03 min'" sh -c "$TXL info $TMP/e.safetensors | grep -q -x 'trained: 2 h 03 min'"
st_edit $CK $TMP/e.safetensors '.__metadata__.valid_loss = "nan" | .__metadata__.best_valid_loss = "inf"'
$TXL info $TMP/e.safetensors > $TMP/e.txt
check "no validation at this step: 'last valid: none at this step'" \
    grep -q -x 'last valid: none at this step' $TMP/e.txt
check "no validation yet: 'best valid: none yet'" grep -q -x 'best valid: none yet' $TMP/e.txt
check "json: null losses, null bpc" jq -e '.valid_loss == null and .valid_bpc == null and
    .best_valid_loss == null and .best_valid_bpc == null' <<EOF
$($TXL info $TMP/e.safetensors --json)
EOF
st_edit $CK $TMP/e.safetensors 'del(.__metadata__.valid_loss)'
check "json: no valid_loss, no valid_bpc (an older checkpoint)" jq -e 'has("valid_bpc") | not' <<EOF
$($TXL info $TMP/e.safetensors --json)
EOF
finish
