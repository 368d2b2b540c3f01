#!/bin/sh
# Builds tests/fixtures/eval/: checkpoints written by txl and the losses the independent
# reference (tests/ref/eval_ckpt.py, PyTorch, float64) computes for them on data and at
# lengths the models were not trained on: an enwik8 slice, up to 8x the trained tgt_len and
# mem_len. micro.safetensors.gz (xl, 2 layers, d 64) covers batch/length/clamp overrides;
# nano_<scheme>.safetensors.gz covers every positional scheme at 1x and 8x in both sweep
# modes (nano_fire has fire_threshold 16, so that queries past L occur).
# tests/e2e/reference_eval.sh compares `txl eval` to every line of expected.jsonl.
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
# Usage: tests/ref/gen_eval_fixture.sh [--keep | --bf16] [--redo NAME,...|all]
#   no option: trains every checkpoint again and computes every line of both files.
#   --keep: reuses the checkpoints on disk (trains only missing ones), keeps every line the
#     files already hold byte for byte, and computes only the lines they lack (a new
#     checkpoint's or flags'); lines no longer listed below are dropped.
#   --bf16: as --keep, expected_bf16.jsonl only.
#   --redo NAME,...: with --keep or --bf16, computes the lines of those checkpoints again
#     (all: every line).
# A line's numbers are written to 10 significant digits (the tests compare to 1e-5 and
# 1e-6): a computation again, whose float64 sums torch may order differently (its BLAS
# kernel depends on the CPU), changes them in the 15th digit and so writes the same line.
set -eu
KEEP=0 ONLY_BF16=0 REDO=
while [ $# -gt 0 ]; do
    case $1 in
    --keep) KEEP=1 ;;
    --bf16) KEEP=1 ONLY_BF16=1 ;;
    --redo) REDO=${2:?--redo needs NAME,... or all}; shift ;;
    *) echo "gen_eval_fixture.sh: unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done
[ -z "$REDO" ] || [ $KEEP = 1 ] || { echo "gen_eval_fixture.sh: --redo needs --keep or --bf16" >&2; exit 2; }
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
# kept FILE NAME DATA FLAGS: prints FILE's line for checkpoint NAME on DATA with FLAGS, if
# it has one and it is to be kept (--keep, and NAME not in --redo)
kept() {
    [ $KEEP = 1 ] && [ -f "$1" ] || return 1
    case ",$REDO," in *,all,* | *,"$2",*) return 1 ;; esac
    grep -F "\"ckpt\": \"$OUT/$2.safetensors.gz\", \"txl_flags\": \"$4\"}" "$1" |
        grep -F "\"data\": \"$3\"" | head -n 1 | grep .
}
# the fixtures' JSON: keys in the given order, floats to 10 significant digits
ROUND='
import json
def line(d, keys):
    return json.dumps({k: float("%.10g" % d[k]) if isinstance(d[k], float) else d[k] for k in keys})'
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
[ $ONLY_BF16 = 1 ] || {
FX=$OUT/expected.jsonl
: > $TMP/expected.jsonl
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
    kept $FX $ck $data "$flags" >> $TMP/expected.jsonl && continue
    $PY tests/ref/eval_ckpt.py $OUT/$ck.safetensors.gz --data $data $flags --dtype float64 |
        $PY -c "$ROUND
d = json.loads(input())
d.update(ckpt='$OUT/$ck.safetensors.gz', txl_flags='$flags')
print(line(d, ('loss', 'bpc', 'ppl', 'tokens', 'bytes', 'anchor_tokens', 'anchor_bits', 'tgt_len',
               'mem_len', 'clamp_len', 'batch', 'data', 'split_range', 'dtype', 'n_segments',
               'pos_scheme', 'same_length', 'ckpt', 'txl_flags')))" >> $TMP/expected.jsonl
    echo "  $ck $flags"
done
mv $TMP/expected.jsonl $FX
echo "wrote $(wc -l < $FX) expected results to $FX"
}

# bf16: checkpoint | flags, on bytes [0, 2000) of $E8
BF=$OUT/expected_bf16.jsonl
: > $TMP/expected_bf16.jsonl
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
    kept $BF $ck $E8 "$flags" >> $TMP/expected_bf16.jsonl && continue
    ev() { $PY tests/ref/eval_ckpt.py $OUT/$ck.safetensors.gz --data $E8 --split-range 0:2000 $flags "$@"; }
    ev > $TMP/f64.json
    ev --bf16 > $TMP/bf.json
    ev --bf16 --bf16-attention > $TMP/amx.json
    $PY -c "$ROUND
f, b, a = (json.load(open('$TMP/%s.json' % n)) for n in ('f64', 'bf', 'amx'))
f.update(bpc_fp64=f['bpc'], bpc_bf16=b['bpc'], bpc_bf16_amx=a['bpc'],
         ckpt='$OUT/$ck.safetensors.gz', txl_flags='$flags')
print(line(f, ('tokens', 'bytes', 'anchor_tokens', 'tgt_len', 'mem_len', 'batch', 'data',
               'split_range', 'pos_scheme', 'same_length', 'bpc_fp64', 'bpc_bf16', 'bpc_bf16_amx',
               'ckpt', 'txl_flags')))" >> $TMP/expected_bf16.jsonl
    echo "  bf16: $ck $flags"
done
mv $TMP/expected_bf16.jsonl $BF
echo "wrote $(wc -l < $BF) bf16 results to $BF"
