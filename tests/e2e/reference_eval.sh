#!/bin/sh
# txl eval against the independent reference: tests/fixtures/eval/ holds checkpoints txl
# wrote (every positional scheme) and the losses tests/ref/eval_ckpt.py (PyTorch, float64)
# computed for them on a corpus the models were not trained on (an enwik8 slice), at lengths
# and memories up to 8x the trained ones. Each must match to 1e-5 relative, with the same
# number of scored tokens (and of anchor tokens and bytes among them). The reference's loss
# is nats per byte of text (its bits over the bytes, anchors' bits included): txl's bpc must
# equal its bpc, and txl's loss, nats per token, the reference's nats over the tokens
# (loss x bytes / tokens; the same number without anchors). Regenerate with
# tests/ref/gen_eval_fixture.sh (make fixtures). The --same-length lines (Dai et al.'s
# evaluation mask: every query sees the last mem_len keys) must also differ from txl's loss
# without the flag by more than the 1e-5 of the comparison (so a flag that did nothing
# would fail it), and a memory sweep with --same-length must give, at the factor of a
# line's mem_len, that line's bpc.
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
    case " $flags " in *" --same-length "*)
        plain=$($TXL eval $CK --data $data $(echo " $flags " | sed 's/ --same-length / /') --json -q | jq .loss)
        check "  ... and differs from the plain mask ($plain)" \
            awk -v a="$got" -v b="$plain" 'BEGIN {d = (a - b) / b; if (d < 0) d = -d; exit !(d > 1e-5)}' ;;
    esac
done < tests/fixtures/eval/expected.jsonl
# a memory sweep with --same-length: factor 3 of micro's mem_len 32 is the 96 of a line
want=$(jq 'select(.txl_flags == "--clamp-len 16 --mem-len 96 --same-length") | .bpc' tests/fixtures/eval/expected.jsonl)
$TXL eval tests/fixtures/eval/micro.safetensors.gz --data tests/data/enwik8_slice60k.txt.gz \
    --clamp-len 16 --sweep 1,3 --same-length --json -q > $TMP/sweep.jsonl
got=$(jq 'select(.factor == 3) | .bpc' $TMP/sweep.jsonl)
check "sweep 1,3 --same-length: factor 3 ($got) is the reference's mem_len 96 ($want)" \
    awk -v a="$got" -v b="$want" 'BEGIN {d = (a - b) / b; if (d < 0) d = -d; exit !(d < 1e-5)}'
check "  ... every row says same_length: true" \
    test "$(jq -s 'map(.same_length) == [true, true]' $TMP/sweep.jsonl)" = true
# with mem_len 0 no two queries see the same number of keys: exit 2, nothing printed
$TXL eval tests/fixtures/eval/micro.safetensors.gz --data tests/data/enwik8_slice60k.txt.gz \
    --sweep 1,2 --sweep-mode window --same-length --json > $TMP/out 2>$TMP/err
check "--same-length with the window sweep: exit 2" test $? -eq 2
check "  ... says it needs a memory, prints nothing" \
    sh -c "grep -q 'same length needs a memory' $TMP/err && test ! -s $TMP/out"
finish
