#!/bin/sh
# Checkpoints written by earlier txl versions still load. tests/fixtures/legacy/ holds the
# `last` checkpoint (Adam moments and memory, gzip'd) of a 5-step nano run by txl 6d30971,
# whose metadata "config" is JSON (see tests/fixtures/README.md): train.seed 2^64-1 stored as
# a JSON string, an out_dir with quotes, a backslash, a tab and a non-ASCII letter (JSON
# escapes), empty data.valid/test, shortest-form floats. Today's txl must read it: info, an
# eval that gives the reference's loss, and a --resume that continues the run with exactly
# that txl's step losses. That txl wrote any model.clamp_len, a negative one meaning off
# ("<= 0: off"): such a checkpoint still reads (as 0), with the same numbers.
. tests/e2e/lib.sh
. tests/e2e/badlib.inc
CK=tests/fixtures/legacy/nano_json_last.safetensors.gz
OUT_DIR=$(printf '/tmp/txl-fixture/nano "q" back\\slash\ttab \303\251')

$TXL info $CK --json > $TMP/info.json 2>$TMP/info.err
check "info reads the JSON-config checkpoint (exit $?: $(head -c 200 $TMP/info.err))" test -s $TMP/info.json
check "...step 5, resumable, with memory" jq -e '.step == 5 and .resumable and .has_memory' $TMP/info.json
check "...train.seed 2^64-1 (a decimal string in JSON)" \
    jq -e '.config.train.seed == "18446744073709551615"' $TMP/info.json
check "...the escaped out_dir, byte for byte" \
    test "$(jq -r .config.train.out_dir $TMP/info.json)" = "$OUT_DIR"
check "...floats and empty paths" jq -e '.config.model.dropout == 0.1 and .config.train.lr == 0.003
    and .config.train.eps == 1e-08 and .config.data.valid == "" and .config.data.test == ""
    and .config.data.split == [0.9, 0.05, 0.05] and .config.model.pos_scheme == "xl"' $TMP/info.json
check "info as text" $TXL info $CK

# the loss of the independent reference for this eval (every token after the first scored):
# tests/ref/eval_ckpt.py CK --data tests/data/tinyshakespeare.txt.gz \
#     --split-range 1059624:1063624   (the first 4000 bytes of the test split) -> 5.471715988885722
# (txl 6d30971 scored B*(floor(T/B)-1) tokens of them and printed 5.47166575)
got=$($TXL eval $CK --split test --max-tokens 4000 --json -q 2>$TMP/eval.err | jq -r .loss)
check "eval gives the reference's loss 5.47171599 (got $got: $(head -c 200 $TMP/eval.err))" \
    awk -v g="$got" 'BEGIN {d = (g - 5.471715988885722) / 5.471715988885722; exit !(d < 1e-6 && d > -1e-6)}'

# --resume continues exactly as txl 6d30971 did: steps 6, 7, 8
$TXL train -q --resume $CK --set train.out_dir=$TMP/r --steps 3 >/dev/null 2>$TMP/r.err
rc=$?
check "--resume from it trains (exit $rc: $(head -c 200 $TMP/r.err))" test $rc -eq 0
step_losses $TMP/r/log.jsonl > $TMP/r.losses
printf '6 5.47687279\n7 5.43875254\n8 5.44388564\n' > $TMP/want.losses
check "...with the recorded step losses of steps 6-8: $(tr '\n' ' ' < $TMP/r.losses)" \
    cmp -s $TMP/want.losses $TMP/r.losses

# model.clamp_len -1 in the config metadata (off, as that txl documented): every reader
gunzip -c $CK > $TMP/ck.st
st_edit $TMP/ck.st $TMP/neg.st '.__metadata__.config |= sub("\"clamp_len\":0"; "\"clamp_len\":-1")'
st_header $TMP/neg.st | jq -r .__metadata__.config > $TMP/neg.cfg
check "(the edited checkpoint holds clamp_len -1)" grep -q '"clamp_len":-1' $TMP/neg.cfg
$TXL info $TMP/neg.st --json > $TMP/neg.json 2>$TMP/neg.err
check "info reads clamp_len -1 as 0, off (exit $?: $(head -c 200 $TMP/neg.err))" \
    test "$(jq .config.model.clamp_len $TMP/neg.json)" = 0
got2=$($TXL eval $TMP/neg.st --split test --max-tokens 4000 --json -q 2>$TMP/neg.err | jq -r .loss)
check "...eval gives the same loss as with clamp_len 0 ($got2 vs $got: $(head -c 200 $TMP/neg.err))" \
    test "$got2" = "$got"
$TXL train -q --resume $TMP/neg.st --set train.out_dir=$TMP/rn --steps 3 >/dev/null 2>$TMP/rn.err
check "...--resume continues with the same step losses (exit $?: $(head -c 200 $TMP/rn.err))" \
    sh -c "jq -r 'select(.event==\"train\") | \"\(.step) \(.step_loss)\"' $TMP/rn/log.jsonl | cmp -s $TMP/want.losses -"
finish
