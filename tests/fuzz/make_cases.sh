#!/bin/sh
# Writes hand-made inputs for the readers' checks into tests/fuzz/corpus/<harness>/case-*
# (make_seeds.sh runs it; it also runs alone). Needs ./txl, jq and gzip.
#   checkpoint: a key twice (a second __metadata__, a metadata key, a tensor name, a key in
#               a tensor entry), 1000 Adam moments too many, NaN / inf in a weight, an Adam
#               moment and the memory, bytes after the gzip stream, two gzip members
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
{ gzip -c $P; printf 'junk'; } > $K/case-gzip-garbage
{ head -c 1000 $P | gzip -1; tail -c +1001 $P | gzip -9; } > $K/case-gzip-members

# corpus: 4 parameter bytes (B 4, tgt_len 8, eval, split 0.9/0.05), then the file
{ printf '\003\007\000\010'; gzip -c $TMP/text.txt; printf 'junk'; } > $C/corpus/case-gzip-garbage
{ printf '\003\007\000\010'; head -c 1000 $TMP/text.txt | gzip -1; tail -c +1001 $TMP/text.txt | gzip -9; } > $C/corpus/case-gzip-members
echo "cases: $(ls $K/case-* | wc -l) checkpoint, $(ls $C/corpus/case-* | wc -l) corpus"
