#!/bin/sh
# Anchor tokens (data.anchors) end to end: training inserts them, eval scores every byte and
# reports the anchors apart, sample generates them (hidden unless --show-anchors), and a
# checkpoint continues only with the anchors it was trained with. With the hierarchical
# scheme, which reads the text coordinates the anchors announce.
. tests/e2e/lib.sh
CFG=tests/configs/micro.yaml
A="--set model.pos_scheme=hier --set data.anchors=[bos,para,sent]"
$TXL train -c $CFG -q $A --set train.max_steps=40 --set train.out_dir=$TMP/run >/dev/null \
    2>$TMP/err || bad "training with anchors: $(cat $TMP/err)"
CK=$TMP/run/last.safetensors.gz

check "info: the checkpoint's config lists the anchors" \
    jq -e '.config.data.anchors == ["bos", "para", "sent"]' <<EOF
$($TXL info $CK --json 2>/dev/null)
EOF
check "info: vocabulary of 256 bytes + 3 anchors" \
    test "$($TXL info $CK --json 2>/dev/null | jq .vocab)" = 259
check "info (text) says so" sh -c "$TXL info $CK | grep -q -F 'vocabulary: 259 tokens (256 bytes + anchors [bos, para, sent])'"
# txl vocab info of the checkpoint: the anchors are special tokens after the 256 bytes (it
# said "specials: none")
$TXL vocab info $CK > $TMP/vinfo.txt 2>$TMP/err || bad "vocab info: $(cat $TMP/err)"
check "vocab info: the anchors listed as specials, ids 256, 257, 258: $(grep specials $TMP/vinfo.txt)" \
    grep -q -x -F "specials: bos=256 para=257 sent=258 (bos, para, sent: the model's anchors)" $TMP/vinfo.txt
check "  ... the size: 256 tokens + 3 anchors" grep -q -x -F "size: 256 tokens + 3 anchors (the model's 259)" $TMP/vinfo.txt
check "  ... --json: the specials and the anchor count" \
    test "$($TXL vocab info $CK --json | jq -c '[.specials, .anchors]')" = '[{"bos":256,"para":257,"sent":258},3]'
check "the training log's validations count bytes and anchors" jq -s -e \
    'map(select(.event == "eval")) | length > 0 and all(.bytes > 0 and .anchor_tokens > 0)' \
    $TMP/run/log.jsonl

# eval: every byte of the text is a target (the first token is the <bos> before the first
# byte), the anchors come on top and are reported apart; bpc is per byte
zcat tests/data/tinyshakespeare.txt.gz | head -c 6000 > $TMP/text.txt
$TXL eval $CK --data $TMP/text.txt --json -q > $TMP/e.json 2>$TMP/err || bad "eval: $(cat $TMP/err)"
check "eval: all 6000 bytes scored" jq -e '.bytes == 6000' $TMP/e.json
check "eval: tokens = bytes + anchors, anchors > 0" \
    jq -e '.tokens == .bytes + .anchor_tokens and .anchor_tokens > 0' $TMP/e.json
check "eval: bpc = loss x tokens / bytes / ln 2, the loss in nats per token" \
    jq -e '(.bpc - .loss * .tokens / .bytes / 0.6931471805599453 | fabs) < 1e-6' $TMP/e.json
check "eval: anchor_bits > 0 (the anchors cost bits, counted in the loss)" \
    jq -e '.anchor_bits > 0 and .anchor_bits < .bpc * .bytes' $TMP/e.json
$TXL eval $CK --data $TMP/text.txt --json -q --batch 3 --tgt-len 50 > $TMP/e3.json
check "eval: other batch and length: the same bytes and anchors scored" \
    test "$(jq -c '[.bytes, .anchor_tokens]' $TMP/e.json)" = "$(jq -c '[.bytes, .anchor_tokens]' $TMP/e3.json)"
$TXL eval $CK --data $TMP/text.txt --json -q --sweep 1,2 > $TMP/sw.json 2>$TMP/err ||
    bad "eval --sweep: $(cat $TMP/err)"
check "eval --sweep 1,2 with anchors: two results, the same bytes scored" \
    test "$(jq -s -c 'map(.bytes) | unique | [length, .[0]]' $TMP/sw.json)" = "[1,$(jq .bytes $TMP/e.json)]"

# sample: -n counts bytes; anchors are drawn like bytes but printed only with --show-anchors,
# from the same random stream
$TXL sample $CK -p "ROMEO:" -n 300 --seed 5 --json -q > $TMP/plain.json 2>$TMP/err || bad "sample: $(cat $TMP/err)"
check "sample -n 300: 300 bytes" test "$(jq .bytes $TMP/plain.json)" -eq 300
$TXL sample $CK -p "ROMEO:" -n 300 --seed 5 -q > $TMP/plain
check "  ... printed: those, and a newline unless the 300th is one" \
    test "$(wc -c < $TMP/plain)" -eq "$(head -c 300 $TMP/plain | tail -c 1 | grep -c '^$' | sed 's/1/300/; s/0/301/')"
$TXL sample $CK -p "ROMEO:" -n 300 --seed 5 -q --show-anchors --json | jq -j .text > $TMP/shown
check "--show-anchors: markers shown" grep -q -e '<|sent|>' -e '<|para|>' -e '<|bos|>' $TMP/shown
sed 's/<|bos|>//g; s/<|para|>//g; s/<|sent|>//g' $TMP/shown > $TMP/stripped
check "  ... and without the markers it is the same text" \
    sh -c "jq -j .text $TMP/plain.json | cmp - $TMP/stripped"
$TXL sample $CK -p "ROMEO:" -n 100 --seed 5 --num-samples 3 --json -q > $TMP/three
check "--num-samples 3: each sample has 100 bytes" \
    test "$(jq -s -c 'map(.bytes) | unique' $TMP/three)" = "[100]"

# fire with anchors (doc/design.md: they are tokens of its window, as for mlp): it trains,
# eval scores the same bytes and anchors, sample draws them
$TXL train -c $CFG -q --set model.pos_scheme=fire --set data.anchors=[bos,para,sent] \
    --set train.max_steps=10 --set train.out_dir=$TMP/fire >/dev/null 2>$TMP/err ||
    bad "fire with anchors: training failed: $(cat $TMP/err)"
$TXL eval $TMP/fire/last.safetensors.gz --data $TMP/text.txt --json -q > $TMP/fe.json \
    2>$TMP/err || bad "fire with anchors: eval: $(cat $TMP/err)"
check "fire with anchors: eval scores the bytes and anchors hier's did" \
    test "$(jq -c '[.bytes, .anchor_tokens]' $TMP/fe.json)" = "$(jq -c '[.bytes, .anchor_tokens]' $TMP/e.json)"
check "  ... sample -n 100: 100 bytes" test "$($TXL sample $TMP/fire/last.safetensors.gz -p "ROMEO:" \
    -n 100 --seed 5 --json -q 2>/dev/null | jq .bytes)" = 100

# a checkpoint goes on only with its anchors
before=$(sha256sum $CK)
$TXL train -q --resume $CK --set data.anchors=[para] >/dev/null 2>$TMP/r.err; rc=$?
check "--resume with other anchors: exit 2 (got $rc)" test $rc -eq 2
check "  ... the message names data.anchors and both sets" \
    grep -q "data.anchors differ.*checkpoint \[bos, para, sent\], now \[para\]" $TMP/r.err
check "  ... and the checkpoint is untouched" test "$before" = "$(sha256sum $CK)"
$TXL train -c $CFG -q --set model.pos_scheme=hier --init-from $CK --set train.max_steps=2 \
    --set train.out_dir=$TMP/init >/dev/null 2>$TMP/i.err; rc=$?
check "--init-from into a config without anchors: exit 2 (got $rc)" test $rc -eq 2
$TXL train -q --resume $CK --set data.doc_separator=xyz >/dev/null 2>$TMP/s.err; rc=$?
check "--resume with another document separator: exit 2 (got $rc)" test $rc -eq 2

# config errors name the key
$TXL train -c $CFG --set data.anchors=[bos,doc] --print-config >/dev/null 2>$TMP/c.err; rc=$?
check "data.anchors=[bos,doc]: exit 2 naming data.anchors[1] and the choices" \
    sh -c "test $rc -eq 2 && grep -q \"data.anchors\[1\]: expected one of bos, para, sent, found 'doc'\" $TMP/c.err"
$TXL train -c $CFG --set model.xl_terms=abx --print-config >/dev/null 2>$TMP/c.err; rc=$?
check "model.xl_terms=abx: exit 2 naming the key" sh -c "test $rc -eq 2 && grep -q model.xl_terms $TMP/c.err"
finish
