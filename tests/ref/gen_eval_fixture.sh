#!/bin/sh
# Builds tests/fixtures/eval/: checkpoints written by txl and the losses the independent
# reference (tests/ref/eval_ckpt.py, PyTorch, float64) computes for them on data and at
# lengths the models were not trained on: an enwik8 slice, up to 8x the trained tgt_len and
# mem_len. micro.safetensors.gz (xl, 2 layers, d 64) covers batch/length/clamp overrides;
# nano_<scheme>.safetensors.gz covers every positional scheme at 1x and 8x in both sweep
# modes. tests/e2e/reference_eval.sh compares `txl eval` to every line of expected.jsonl.
# nano_hier_anchors is the hierarchical scheme trained with anchor tokens (bos, para, sent)
# and a document separator: the reference inserts the anchors and computes the coordinates
# with its own tokenizer. The --same-length lines evaluate with Dai et al.'s mask (every
# query sees the last mem_len keys). Needs ./txl (or TXL_BIN) and /usr/bin/python3 with torch.
# Usage: tests/ref/gen_eval_fixture.sh [--keep]   (--keep: reuse the checkpoints on disk and
# recompute only the expected results)
set -eu
KEEP=0
[ "${1:-}" = "--keep" ] && KEEP=1
OUT=tests/fixtures/eval
PY=${PYTHON:-/usr/bin/python3}
mkdir -p $OUT
TMP=$(mktemp -d)
trap 'rm -rf $TMP' EXIT
TXL=${TXL_BIN:-./txl}
# ckpt NAME CONFIG FLAGS...: trains and exports $OUT/NAME.safetensors.gz (kept with --keep)
ckpt() {
    name=$1 cfg=$2
    shift 2
    [ $KEEP = 1 ] && [ -f $OUT/$name.safetensors.gz ] && return 0
    $TXL train -c $cfg -q --set train.out_dir=$TMP/$name "$@" >/dev/null
    $TXL export $TMP/$name/last.safetensors.gz -o $OUT/$name.safetensors.gz 2>/dev/null
}
ckpt micro tests/configs/micro.yaml --set train.max_steps=200 --set train.eval_interval=0
# every scheme of txl's registry (the completion's values of model.pos_scheme): a new one
# needs its place in the reference (tests/ref/txl_ref.py), not an edit here
SCHEMES=$($TXL __complete -- train --set model.pos_scheme= | sed -n 's/^model\.pos_scheme=//p')
for s in $SCHEMES; do
    ckpt nano_$s tests/configs/nano.yaml --set model.pos_scheme=$s
done
ckpt nano_hier_anchors tests/configs/nano.yaml --set model.pos_scheme=hier \
    --set 'data.anchors=[bos, para, sent]' --set 'data.doc_separator=":\n"'

E8=tests/data/enwik8_slice60k.txt.gz
: > $OUT/expected.jsonl
# checkpoint | data | flags (the same for txl eval and the reference)
{
    echo "micro|$E8|"
    echo "micro|$E8|--tgt-len 128 --mem-len 128 --batch 4"
    echo "micro|$E8|--tgt-len 32 --mem-len 256 --batch 2"
    echo "micro|$E8|--tgt-len 128 --mem-len 0 --batch 4"
    echo "micro|$E8|--clamp-len 16 --mem-len 96"
    echo "micro|tests/data/tinyshakespeare.txt.gz|--tgt-len 100 --mem-len 50 --batch 16"
    for s in $SCHEMES hier_anchors; do
        echo "nano_$s|$E8|--batch 4"
        echo "nano_$s|$E8|--batch 4 --mem-len 128"
        echo "nano_$s|$E8|--batch 4 --tgt-len 128 --mem-len 0"
    done
    # --same-length (Dai et al.'s evaluation mask): every query sees the last mem_len keys
    echo "micro|$E8|--same-length"
    echo "micro|$E8|--clamp-len 16 --mem-len 96 --same-length"
    echo "micro|tests/data/tinyshakespeare.txt.gz|--tgt-len 100 --mem-len 50 --batch 16 --same-length"
    for s in $SCHEMES hier_anchors; do
        echo "nano_$s|$E8|--batch 4 --tgt-len 32 --mem-len 8 --same-length"
    done
} | while IFS='|' read -r ck data flags; do
    $PY tests/ref/eval_ckpt.py $OUT/$ck.safetensors.gz --data $data $flags --dtype float64 |
        $PY -c "import json,sys; d=json.loads(sys.stdin.read()); d['ckpt']='$OUT/$ck.safetensors.gz'; d['txl_flags']='$flags'; print(json.dumps(d))" >> $OUT/expected.jsonl
    echo "  $ck $flags"
done
echo "wrote $(wc -l < $OUT/expected.jsonl) expected results to $OUT/expected.jsonl"
