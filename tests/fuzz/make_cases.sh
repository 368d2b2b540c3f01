#!/bin/sh
# Writes hand-made inputs for the readers' checks into tests/fuzz/corpus/<harness>/case-*
# (make_seeds.sh runs it; it also runs alone). Needs ./txl, jq and gzip.
#   checkpoint: a key twice (a second __metadata__, a metadata key, a tensor name, a key in
#               a tensor entry), 1000 Adam moments too many, NaN / inf in a weight, an Adam
#               moment and the memory, bytes after the gzip stream, two gzip members, a
#               config nested 100,000 deep, a NUL in a tensor name, a layer's memory
#               missing, a negative Adam second moment, a tensor the model lacks; quantized
#               (txl quantize) q8 and bf16 checkpoints, and q8 scales truncated, of blocks
#               that do not divide the row, missing, of another dtype, NaN
#   config:     nesting 40,000 deep (flow, block, and in a --set), brackets in quoted text
#               and comments, a null data.doc_separator, a negative clamp_len
#   corpus:     bytes after the gzip data, two gzip members
set -eu
cd "$(dirname "$0")/../.."
TXL=${TXL_BIN:-./txl}
C=tests/fuzz/corpus
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
. tests/e2e/badlib.inc

# the tiny xl checkpoint of make_seeds.sh (1 layer, d_model 4): weights, moments, memory
i=0
while [ $i -lt 60 ]; do printf 'line %d: the quick brown fox jumps over the lazy dog\n' $i; i=$((i+1)); done > $TMP/text.txt
$TXL train -q -c tests/configs/micro.yaml --set data.train=$TMP/text.txt \
    --set model.n_layer=1 --set model.d_model=4 --set model.n_head=1 --set model.d_head=2 \
    --set model.d_inner=4 --set model.tgt_len=4 --set model.mem_len=3 \
    --set train.batch_size=2 --set train.max_steps=2 --set train.warmup_steps=0 \
    --set train.eval_interval=0 --set train.eval_tokens=64 --set train.ckpt_gzip=false \
    --set train.out_dir=$TMP/xl >/dev/null
P=$TMP/xl/last.safetensors
K=$C/checkpoint
st_data $P > $TMP/d
edit() { # edit OUT SED: the header through sed, the data as it is
    st_header $P | sed "$2" > $TMP/h
    st_build "$1" $TMP/h $TMP/d
}
edit $K/case-dup-metadata-after 's/} *$/,"__metadata__":{"a":"b"}}/'
edit $K/case-dup-metadata-before 's/^{/{"__metadata__":{"a":"b"},/'
edit $K/case-dup-metadata-key 's/"__metadata__":{/&"step":"1",/'
edit $K/case-dup-tensor 's/^{/{"out.bias":{"dtype":"F32","shape":[0],"data_offsets":[0,0]},/'
edit $K/case-dup-entry-key 's/"out.bias":{"dtype":"F32",/&"dtype":"F32",/'
st_edit $P $K/case-many-moments '. + ([range(1000)] | map({key: "optim.m.x.\(.)", value: {dtype: "F32", shape: [0], data_offsets: [0, 0]}}) | from_entries)'
put_f32 $P $K/case-nan-weight layers.0.attn.o.weight 3 '\000\000\300\177'
put_f32 $P $K/case-inf-moment optim.v.out.bias 7 '\000\000\200\177'
put_f32 $P $K/case-nan-memory state.mem.0 5 '\000\000\300\377'
st_edit $P $K/case-deep-config '.__metadata__.config = "model: " + ([range(100000)] | map("[") | join(""))'
st_edit $P $K/case-nul-name '.["out.bias\u0000zz"] = .["out.bias"] | del(.["out.bias"])'
st_edit $P $K/case-no-mem0 'del(.["state.mem.0"])'
put_f32 $P $K/case-negative-moment optim.v.out.bias 2 '\000\000\200\277'
st_edit $P $K/case-extra-tensor '.extra = {dtype: "F32", shape: [0], data_offsets: [0, 0]}'
# quantized: a model whose rows are whole q8 blocks (1 layer, d_model 32, d_inner 128), q8
# and bf16
$TXL train -q -c tests/configs/micro.yaml --set data.train=$TMP/text.txt \
    --set model.n_layer=1 --set model.d_model=32 --set model.n_head=1 --set model.d_head=32 \
    --set model.d_inner=128 --set model.tgt_len=4 --set model.mem_len=3 \
    --set train.batch_size=2 --set train.max_steps=2 --set train.warmup_steps=0 \
    --set train.eval_interval=0 --set train.eval_tokens=64 --set train.ckpt_gzip=false \
    --set train.out_dir=$TMP/q >/dev/null
$TXL quantize $TMP/q/last.safetensors --type q8 -o $K/case-q8 -q
$TXL quantize $TMP/q/last.safetensors --type bf16 -o $K/case-bf16 -q
Q=$K/case-q8
st_edit $Q $K/case-q8-scale-rows '.["layers.0.attn.qkv.weight_scale"] |= (.shape[0] -= 1 | .data_offsets[1] -= 2)'
st_edit $Q $K/case-q8-scale-blocks '.["layers.0.ff.3.weight_scale"] |= (.shape[1] = 3 | .data_offsets[1] -= 64)'
st_edit $Q $K/case-q8-scale-dtype '.["layers.0.attn.o.weight_scale"].dtype = "F16"'
st_drop $Q $K/case-q8-no-scale 'del(.["layers.0.ff.0.weight_scale"])'
cp $Q $K/case-q8-scale-nan
printf '\300\177' | dd of=$K/case-q8-scale-nan bs=1 conv=notrunc 2>/dev/null \
    seek=$(( 8 + $(st_hlen $Q) + $(st_header $Q | jq '.["layers.0.ff.0.weight_scale"].data_offsets[0]') ))
{ gzip -c $P; printf 'junk'; } > $K/case-gzip-garbage
{ head -c 1000 $P | gzip -1; tail -c +1001 $P | gzip -9; } > $K/case-gzip-members

# config: YAML, then NUL-separated --set texts
F=$C/config
{ printf 'model: '; head -c 40000 /dev/zero | tr '\0' '['; } > $F/case-deep-flow
{ printf 'model:\n'; i=0; while [ $i -lt 20000 ]; do printf -- '- '; i=$((i + 1)); done; printf 'x\n'; } > $F/case-deep-block
{ printf 'model: {n_layer: 2}\n\000model.n_layer='; head -c 30000 /dev/zero | tr '\0' '{'; } > $F/case-deep-set
printf 'data: {train: "[[[[[[[[[[[[[[[[[[[[[[", doc_separator: "{{{{{{{{{{{{{{{{{{{{{{{{"}  # [[[[[[[[[[[[[[[[[[[[\n' > $F/case-brackets-quoted
printf 'data: {train: a.txt, doc_separator: }\n\000data.doc_separator=\000data.doc_separator="~"' > $F/case-separator-null
printf 'data: {train: a.txt}\nmodel: {clamp_len: -5}\n' > $F/case-clamp-negative

# corpus: 4 parameter bytes (B 4, tgt_len 8, eval, split 0.9/0.05), then the file
{ printf '\003\007\000\010'; gzip -c $TMP/text.txt; printf 'junk'; } > $C/corpus/case-gzip-garbage
{ printf '\003\007\000\010'; head -c 1000 $TMP/text.txt | gzip -1; tail -c +1001 $TMP/text.txt | gzip -9; } > $C/corpus/case-gzip-members
echo "cases: $(ls $K/case-* | wc -l) checkpoint, $(ls $F/case-* | wc -l) config, $(ls $C/corpus/case-* | wc -l) corpus"
