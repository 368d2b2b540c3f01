#!/bin/sh
# Builds tests/fixtures/eval/: checkpoints written by txl and the losses the independent
# reference (tests/ref/eval_ckpt.py, PyTorch, float64) computes for them on data and at
# lengths the models were not trained on: an enwik8 slice, up to 8x the trained tgt_len and
# mem_len. micro.safetensors.gz (xl, 2 layers, d 64) covers batch/length/clamp overrides;
# nano_<scheme>.safetensors.gz covers every positional scheme at 1x and 8x in both sweep
# modes (nano_fire and nano_t5 only in expected_bf16.jsonl so far; nano_fire has
# fire_threshold 16, so that queries past L occur). tests/e2e/reference_eval.sh compares
# `txl eval` to every line of expected.jsonl.
# nano_hier_anchors is the hierarchical scheme trained with anchor tokens (bos, para, sent)
# and a document separator: the reference inserts the anchors and computes the coordinates
# with its own tokenizer. The --same-length lines evaluate with Dai et al.'s mask (every
# query sees the last mem_len keys). expected_bf16.jsonl holds, for tests/e2e/reference_bf16.sh,
# the reference's losses with txl's bf16 roundings (eval_ckpt.py --bf16: bpc_bf16, a CPU
# with AVX512_BF16 alone; --bf16-attention too: bpc_bf16_amx, a CPU with AMX-BF16) beside its
# float64 one (bpc_fp64), on the first 2,000 bytes of the enwik8 slice: every scheme, the
# memory at 8x (the MLP biases' products over 144 distances in bf16, over 32 in fp32;
# fire's in blocks of 1,024 inputs, the last one short), the same-length mask, d_head 32,
# and one-stream segments of 4 (products under 2^15 multiply-adds in fp32, the memory's
# cached keys). Needs ./txl (or TXL_BIN) and
# /usr/bin/python3 with torch.
# Usage: tests/ref/gen_eval_fixture.sh [--keep | --bf16]   (--keep: reuse the checkpoints on
# disk and recompute only the expected results; --bf16: only expected_bf16.jsonl)
set -eu
KEEP=0 ONLY_BF16=0
[ "${1:-}" = "--keep" ] && KEEP=1
[ "${1:-}" = "--bf16" ] && KEEP=1 ONLY_BF16=1
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
# needs its place in the reference (tests/ref/txl_ref.py, eval_ckpt.py), not an edit here
SCHEMES=$($TXL __complete -- train --set model.pos_scheme= | sed -n 's/^model\.pos_scheme=//p')
for s in $SCHEMES; do
    case $s in
    fire) ckpt nano_fire tests/configs/nano.yaml --set model.pos_scheme=fire \
              --set model.fire_threshold=16 ;;
    *) ckpt nano_$s tests/configs/nano.yaml --set model.pos_scheme=$s ;;
    esac
done
ckpt nano_hier_anchors tests/configs/nano.yaml --set model.pos_scheme=hier \
    --set 'data.anchors=[bos, para, sent]' --set 'data.doc_separator=":\n"'

E8=tests/data/enwik8_slice60k.txt.gz
FP64=$(echo $SCHEMES | tr ' ' '\n' | grep -v -x -e fire -e t5) # fire, t5: bf16's alone so far
[ $ONLY_BF16 = 1 ] || {
: > $OUT/expected.jsonl
# checkpoint | data | flags (the same for txl eval and the reference)
{
    echo "micro|$E8|"
    echo "micro|$E8|--tgt-len 128 --mem-len 128 --batch 4"
    echo "micro|$E8|--tgt-len 32 --mem-len 256 --batch 2"
    echo "micro|$E8|--tgt-len 128 --mem-len 0 --batch 4"
    echo "micro|$E8|--clamp-len 16 --mem-len 96"
    echo "micro|tests/data/tinyshakespeare.txt.gz|--tgt-len 100 --mem-len 50 --batch 16"
    for s in $FP64 hier_anchors; do
        echo "nano_$s|$E8|--batch 4"
        echo "nano_$s|$E8|--batch 4 --mem-len 128"
        echo "nano_$s|$E8|--batch 4 --tgt-len 128 --mem-len 0"
    done
    # --same-length (Dai et al.'s evaluation mask): every query sees the last mem_len keys
    echo "micro|$E8|--same-length"
    echo "micro|$E8|--clamp-len 16 --mem-len 96 --same-length"
    echo "micro|tests/data/tinyshakespeare.txt.gz|--tgt-len 100 --mem-len 50 --batch 16 --same-length"
    for s in $FP64 hier_anchors; do
        echo "nano_$s|$E8|--batch 4 --tgt-len 32 --mem-len 8 --same-length"
    done
} | while IFS='|' read -r ck data flags; do
    $PY tests/ref/eval_ckpt.py $OUT/$ck.safetensors.gz --data $data $flags --dtype float64 |
        $PY -c "import json,sys; d=json.loads(sys.stdin.read()); d['ckpt']='$OUT/$ck.safetensors.gz'; d['txl_flags']='$flags'; print(json.dumps(d))" >> $OUT/expected.jsonl
    echo "  $ck $flags"
done
echo "wrote $(wc -l < $OUT/expected.jsonl) expected results to $OUT/expected.jsonl"
}

# bf16: checkpoint | flags, on bytes [0, 2000) of $E8
BF=$OUT/expected_bf16.jsonl
: > $BF
{
    for s in $SCHEMES; do
        echo "nano_$s|--batch 4 --mem-len 128"
        echo "nano_$s|--batch 4 --tgt-len 32 --mem-len 8 --same-length"
    done
    echo "nano_hier_anchors|--batch 4 --mem-len 128"
    # (not its same-length line: bf16 moves that one by 1.1e-6 only, too near the test's 1e-6)
    echo "nano_hier_anchors|--batch 4"
    echo "micro|"
    echo "nano_xl|--batch 1 --tgt-len 4 --mem-len 16"
    echo "nano_rope|--batch 1 --tgt-len 4 --mem-len 16"
} | while IFS='|' read -r ck flags; do
    ev() { $PY tests/ref/eval_ckpt.py $OUT/$ck.safetensors.gz --data $E8 --split-range 0:2000 $flags "$@"; }
    ev > $TMP/f64.json
    ev --bf16 > $TMP/bf.json
    ev --bf16 --bf16-attention > $TMP/amx.json
    $PY -c "
import json
f, b, a = (json.load(open('$TMP/%s.json' % n)) for n in ('f64', 'bf', 'amx'))
keep = ('tokens', 'bytes', 'anchor_tokens', 'tgt_len', 'mem_len', 'batch', 'data', 'split_range',
        'pos_scheme', 'same_length')
d = {k: f[k] for k in keep}
d.update(bpc_fp64=f['bpc'], bpc_bf16=b['bpc'], bpc_bf16_amx=a['bpc'],
         ckpt='$OUT/$ck.safetensors.gz', txl_flags='$flags')
print(json.dumps(d))" >> $BF
    echo "  bf16: $ck $flags"
done
echo "wrote $(wc -l < $BF) bf16 results to $BF"
