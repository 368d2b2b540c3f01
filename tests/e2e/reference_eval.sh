#!/bin/sh
# txl eval against the independent reference: tests/fixtures/eval/ holds checkpoints txl
# wrote (every positional scheme) and the losses tests/ref/eval_ckpt.py (PyTorch, float64)
# computed for them on a corpus the models were not trained on (an enwik8 slice), at lengths
# and memories up to 8x the trained ones. Each must match to 1e-5 relative, with the same
# number of scored tokens (and of anchor tokens and bytes among them). The reference's loss
# is nats per byte of text (its bits over the bytes, anchors' bits included): txl's bpc must
# equal its bpc, and txl's loss, nats per token, the reference's nats over the tokens
# (loss x bytes / tokens; the same number without anchors). Regenerate with
# tests/ref/gen_eval_fixture.sh (make fixtures).
. tests/e2e/lib.sh
while read -r line; do
    CK=$(echo "$line" | jq -r .ckpt)
    data=$(echo "$line" | jq -r .data)
    flags=$(echo "$line" | jq -r .txl_flags)
    ref=$(echo "$line" | jq '.loss * .bytes / .tokens')
    rbpc=$(echo "$line" | jq .bpc)
    rtok=$(echo "$line" | jq '"\(.tokens) \(.anchor_tokens) \(.bytes)"')
    out=$($TXL eval $CK --data $data $flags --json -q 2>$TMP/err) || { bad "txl eval $flags: $(cat $TMP/err)"; continue; }
    got=$(echo "$out" | jq .loss)
    gbpc=$(echo "$out" | jq .bpc)
    gtok=$(echo "$out" | jq '"\(.tokens) \(.anchor_tokens) \(.bytes)"')
    rel=$(awk -v a="$got" -v b="$ref" 'BEGIN {d = (a - b) / b; if (d < 0) d = -d; printf "%.2e", d}')
    relb=$(awk -v a="$gbpc" -v b="$rbpc" 'BEGIN {d = (a - b) / b; if (d < 0) d = -d; printf "%.2e", d}')
    check "$(basename $CK .safetensors.gz) $(jq -r .pos_scheme <<EOF2
$line
EOF2
) on $(basename $data) ${flags:-(trained lengths)}: txl $got vs reference $ref nats/token (rel $rel), bpc rel $relb, tokens $gtok" \
        awk -v r="$rel" -v rb="$relb" -v a="$gtok" -v b="$rtok" 'BEGIN {exit !(r < 1e-5 && rb < 1e-5 && a == b)}'
done < tests/fixtures/eval/expected.jsonl
finish
