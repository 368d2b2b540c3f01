#!/bin/sh
# Writes hand-made inputs for the readers' checks into tests/fuzz/corpus/<harness>/case-*
# (make_seeds.sh runs it; it also runs alone). Needs ./txl, jq and gzip.
#   checkpoint: a key twice (a second __metadata__, a metadata key, a tensor name, a key in
#               a tensor entry), 1000 Adam moments too many, NaN / inf in a weight, an Adam
#               moment and the memory, bytes after the gzip stream, two gzip members, a
#               config nested 100,000 deep, a NUL in a tensor name, a layer's memory
#               missing, a negative Adam second moment, a tensor the model lacks; metadata
#               every reader refuses: a NUL in a value (a config starting with \u0000, a raw
#               0 byte), step -5 and 1e400, format txl/2, a config over 1 MiB; a hier
#               checkpoint without its state.coords; quantized (txl quantize) q8 and bf16
#               checkpoints, and q8 scales truncated, of blocks that do not divide the row,
#               missing, of another dtype, NaN
#   config:     nesting 40,000 deep (flow, block, and in a --set), brackets in quoted text
#               and comments, a null data.doc_separator, a negative clamp_len
#   corpus:     bytes after the gzip data, two gzip members
#   plotlog:    logs as `txl plot` reads them: a byte and a word run's (bpc null in train
#               events), a cut last line, a cut line with a start event glued to it, a
#               damaged line mid-log, a resume back to an earlier step, steps 0, 1e300, -3
#               and 2.5, token counts whose interpolation overflows, a loss of 1e300
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
st_edit $P $K/case-nul-meta '.__metadata__.config |= "\u0000" + .'
edit $K/case-nul-raw 's/"config":"# txl/"config":"# t\x00xl/'
st_edit $P $K/case-step-negative '.__metadata__.step = "-5"'
st_edit $P $K/case-step-1e400 '.__metadata__.step = "1e400"'
st_edit $P $K/case-format-txl2 '.__metadata__.format = "txl/2"'
st_edit $P $K/case-config-1mib '.__metadata__.config += "\n#" + ("x" * 1100000)'
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

# the same with the hier scheme, whose state holds the coordinates of the memory's rows
$TXL train -q -c tests/configs/micro.yaml --set data.train=$TMP/text.txt \
    --set model.n_layer=1 --set model.d_model=4 --set model.n_head=1 --set model.d_head=2 \
    --set model.d_inner=4 --set model.tgt_len=4 --set model.mem_len=3 --set model.pos_scheme=hier \
    --set model.mlp_num_freqs=2 --set model.mlp_hidden=2 \
    --set train.batch_size=2 --set train.max_steps=2 --set train.warmup_steps=0 \
    --set train.eval_interval=0 --set train.eval_tokens=64 --set train.ckpt_gzip=false \
    --set train.out_dir=$TMP/hier >/dev/null
st_drop $TMP/hier/last.safetensors $K/case-hier-no-coords 'del(.["state.coords"])'

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
# plotlog: the xl run's log (2 train events, the end), with validations added, and damaged
L=$C/plotlog
mkdir -p $L
ev() { printf '{"event":"eval","split":"valid","step":%s,"loss":%s,"bpc":%s,"ppl":3.1,"tokens":63,"bytes":63}\n' "$@"; }
{ cat $TMP/xl/log.jsonl; ev 2 1.6 2.3; } > $L/case-byte-run
jq -c 'if .event == "train" then .bpc = null | .ppl = (.loss | exp) else . end' $L/case-byte-run > $L/case-word-run
{ head -n 2 $L/case-byte-run; tail -n 1 $L/case-byte-run | head -c 40; } > $L/case-cut-last
{ head -n 2 $L/case-byte-run; head -n 2 $L/case-byte-run | tail -n 1 | head -c 50
  grep '"event":"start"' $L/case-byte-run | sed 's/"resume":false/"resume":true/; s/"step":0/"step":1/'
  tail -n +3 $L/case-byte-run; } > $L/case-glued-start
{ head -n 2 $L/case-byte-run; echo '{"event":"train",'; tail -n +3 $L/case-byte-run; } > $L/case-damaged-middle
{ cat $L/case-byte-run; grep '"event":"start"' $L/case-byte-run | sed 's/"resume":false/"resume":true/; s/"step":0/"step":1/'
  ev 1 1.7 2.4; } > $L/case-resume-back
tr0() { printf '{"event":"train","step":%s,"tokens":%s,"loss":%s,"bpc":%s}\n' "$@"; }
for v in 1e300 -3 2.5; do { tr0 1 256 5.5 8; tr0 "$v" 512 5 7; ev 1 5.4 7.9; } > $L/case-step-$v; done
{ tr0 0 256 5.5 8; tr0 100 25600 3 4; ev 0 5.6 8.1; ev 100 3.1 4.2; } > $L/case-step-0
{ tr0 1 1e308 5 null; tr0 2 1.7e308 4 null; ev 9000000000000000 3 2; } > $L/case-tokens-overflow
{ tr0 1 256 1e300 null; tr0 2 512 0 null; ev 2 1e300 null; } > $L/case-loss-1e300
echo "cases: $(ls $K/case-* | wc -l) checkpoint, $(ls $F/case-* | wc -l) config, $(ls $C/corpus/case-* | wc -l) corpus, $(ls $L/case-* | wc -l) plotlog"
