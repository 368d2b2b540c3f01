#!/bin/sh
# Damaged checkpoints, one case per failure class (doc/design.md, "Checkpoints"), gzip'd and plain,
# through eval, info, sample, export and train --resume (and quantized ones: txl quantize's
# scales truncated, blocks that do not divide the row, a q8 checkpoint to train): exit 2, a message naming the file and the
# place (tensor, byte offset), never a crash; the run directory next to them (and an
# export target that already exists) stays byte for byte the same. The bad files are made
# here from a real checkpoint with head, od, dd, printf, gzip and jq (tests/e2e/badlib.inc).
. tests/e2e/lib.sh
. tests/e2e/badlib.inc
CFG=tests/configs/micro.yaml
RUN=$TMP/run
setup_run $RUN
GZ=$RUN/last.safetensors.gz                       # weights, Adam moments, memory; gzip'd
gunzip -c $GZ > $TMP/last.safetensors             # the same, plain
P=$TMP/last.safetensors
$TXL export $GZ -o $TMP/w.safetensors 2>/dev/null || bad "export"   # weights only, plain
guard_init $RUN
check "the good checkpoints load" $TXL info $TMP/last.safetensors
check "...and the weights-only export" $TXL info $TMP/w.safetensors
B=$TMP/bad   # every bad file lives here, under a name saying what is wrong with it
mkdir -p $B

# expect2 on every reader: eval, info, sample, export over an existing file, train --resume
# into the guarded run directory (with -c: a config that differs from the checkpoint's is
# refused first, naming the keys; RESUME_NEEDLES says so when set)
readers() { # readers "description" "needles" FILE
    expect2 "eval: $1" "$3;;$2" $TXL eval "$3" --data $TMP/last.safetensors
    expect2 "info: $1" "$3;;$2" $TXL info "$3"
    expect2 "sample: $1" "$3;;$2" $TXL sample "$3" -n 5
    expect2 "export: $1" "$3;;$2" $TXL export "$3" -o $RUN/best.safetensors.gz
    expect2 "train --resume: $1" "$3;;${RESUME_NEEDLES:-$2}" \
        $TXL train -q -c $CFG --resume "$3" --set train.out_dir=$RUN
}
# the plain file and its gzip'd twin
both() { # both "description" "needles" PLAIN_FILE
    readers "$1 (plain)" "$2" "$3"
    RESUME_NEEDLES=
    gzip -c "$3" > "$3.gz"
    expect2 "info: $1 (gzip'd)" "$3.gz;;$2" $TXL info "$3.gz"
    expect2 "eval: $1 (gzip'd)" "$3.gz;;$2" $TXL eval "$3.gz" --data $TMP/last.safetensors
}

echo "-- not a checkpoint"
printf 'not a checkpoint at all, just some text' > $B/text.safetensors
both "wrong magic (text)" "header length" $B/text.safetensors
head -c 3 /dev/zero > $B/empty3.safetensors
both "3 bytes" "need an 8-byte header length" $B/empty3.safetensors
: > $B/empty.safetensors
readers "empty file" "0 bytes is too short" $B/empty.safetensors
mkdir -p $B/dir.safetensors
expect2 "a directory without a checkpoint" "$B/dir.safetensors;;a directory without a checkpoint" $TXL info $B/dir.safetensors
expect2 "missing file" "$B/nothere.safetensors.gz;;No such file" $TXL eval $B/nothere.safetensors.gz
{ printf '\037\213'; tail -c +3 $GZ; } > $B/gzmagic.safetensors.gz
cp $GZ $B/badmagic.safetensors.gz
printf 'X' | dd of=$B/badmagic.safetensors.gz bs=1 seek=1 conv=notrunc 2>/dev/null
expect2 "gzip magic damaged (then read as a plain file)" "$B/badmagic.safetensors.gz;;not a safetensors file" $TXL info $B/badmagic.safetensors.gz

echo "-- not a regular file, more than the header says, more than memory holds"
mkfifo $B/fifo.safetensors
expect2 "a FIFO nobody writes (refused at once, not a hang)" "$B/fifo.safetensors;;is a FIFO (named pipe), not a regular file" \
    timeout 20 $TXL info $B/fifo.safetensors
expect2 "/dev/zero (refused before reading a byte)" "/dev/zero;;is a device or socket, not a regular file" \
    limit_vm 1000000 timeout 20 $TXL info /dev/zero
{ cat $GZ; printf 'garbage'; } > $B/gzjunk.safetensors.gz
expect2 "bytes after the gzip stream" "$B/gzjunk.safetensors.gz;;trailing garbage after the gzip data: the bytes from offset $(wc -c < $GZ) of the file are not another gzip member" \
    $TXL eval $B/gzjunk.safetensors.gz
{ cat $GZ; head -c 512 /dev/zero; } > $B/gzzeros.safetensors.gz
expect2 "zeros after the gzip stream (tape padding)" "$B/gzzeros.safetensors.gz;;trailing garbage after the gzip data" $TXL info $B/gzzeros.safetensors.gz
{ head -c 5000 $P | gzip -1; tail -c +5001 $P | gzip -9; } > $B/members.safetensors.gz
check "two gzip members (cat a.gz b.gz) are one stream: it loads" $TXL info $B/members.safetensors.gz
l1=$($TXL eval $B/members.safetensors.gz --data $TMP/last.safetensors --max-tokens 3000 --json -q | jq .loss)
l2=$($TXL eval $P --data $TMP/last.safetensors --max-tokens 3000 --json -q | jq .loss)
check "...and evaluates to the plain file's loss ($l1 = $l2)" test -n "$l1" -a "$l1" = "$l2"
# a gzip bomb: the checkpoint, then 2 GiB of zeros in 32 more members (2 MiB on disk); the
# reader stops one byte after the data the header describes
head -c 67108864 /dev/zero | gzip -1 > $TMP/zeros64m.gz
{ gzip -1 -c $P; i=0; while [ $i -lt 32 ]; do cat $TMP/zeros64m.gz; i=$((i + 1)); done; } > $B/bomb.safetensors.gz
expect2 "a gzip bomb after the data (2 GiB of zeros; under a 1 GB memory limit)" "$B/bomb.safetensors.gz;;goes on after the tensor data the header describes;;(trailing garbage?)" \
    limit_vm 1000000 timeout 60 $TXL info $B/bomb.safetensors.gz
{ u64le 100000001; tail -c +9 $P; } | gzip -1 > $B/hlen_limit.safetensors.gz
expect2 "header length over the limit (gzip'd: not read)" "$B/hlen_limit.safetensors.gz;;header length 100000001 exceeds txl's limit of 100000000 bytes" \
    $TXL info $B/hlen_limit.safetensors.gz
st_edit $P $TMP/claim.safetensors '.["out.bias"].data_offsets |= [.[0] + 1125899906842624, .[1] + 1125899906842624]'
gzip -1 -c $TMP/claim.safetensors > $B/claim.safetensors.gz
end=$((1125899906842624 + $(st_header $P | jq '.["out.bias"].data_offsets[1]')))
expect2 "gzip'd, a header that claims 1 PiB of data (refused before reading it)" "$B/claim.safetensors.gz;;the header's tensors hold $end bytes, more than half this machine's memory" \
    limit_vm 1000000 timeout 60 $TXL info $B/claim.safetensors.gz
# a tensor the model does not have, of 1.5 GiB, whose bytes are there (24 gzip members of 64
# MiB of zeros: 1.5 MB on disk): the header is held to the model of its config before any
# data is read, so it costs nothing (it was read whole, then refused as "unexpected tensor")
dl=$(st_header $P | jq '[.[] | .data_offsets? // empty | .[1]] | max')
st_edit $P $TMP/extra.safetensors ".extra = {\"dtype\": \"F32\", \"shape\": [402653184], \"data_offsets\": [$dl, $((dl + 1610612736))]}"
{ gzip -1 -c $TMP/extra.safetensors; i=0; while [ $i -lt 24 ]; do cat $TMP/zeros64m.gz; i=$((i + 1)); done; } > $B/extra.safetensors.gz
for c in info eval; do
    expect2 "$c: gzip'd, a 1.5 GiB tensor the model lacks (refused from the header; 1 GB memory limit)" "$B/extra.safetensors.gz;;unexpected tensor 'extra'" \
        limit_vm 1000000 timeout 60 $TXL $c $B/extra.safetensors.gz
done
expect2 "train --resume: the same (1 GB memory limit)" "$B/extra.safetensors.gz;;unexpected tensor 'extra'" \
    limit_vm 1000000 timeout 60 $TXL train -q --resume $B/extra.safetensors.gz --set train.out_dir=$RUN
rm -f $B/extra.safetensors.gz

echo "-- truncated gzip'd file, at every structural boundary"
s=$(wc -c < $GZ)
for n in 5 9 12 40 200 $((s / 2)) $((s - 8)) $((s - 5)) $((s - 1)); do
    head -c $n $GZ > $B/trunc$n.safetensors.gz
    expect2 "gzip'd, truncated at byte $n of $s" "$B/trunc$n.safetensors.gz;;corrupt or truncated gzip data;;decompressed bytes" \
        $TXL info $B/trunc$n.safetensors.gz
done
head -c 200 $GZ > $B/t200.safetensors.gz
expect2 "gzip'd, truncated inside the JSON header: says so" "$B/t200.safetensors.gz;;inside the JSON header" $TXL eval $B/t200.safetensors.gz
head -c $((s / 2)) $GZ > $B/thalf.safetensors.gz
expect2 "gzip'd, truncated inside the data: says so" "$B/thalf.safetensors.gz;;tensor data" $TXL eval $B/thalf.safetensors.gz

echo "-- truncated content (plain, and complete gzip streams of truncated content)"
H=$(st_hlen $P)
cut_at() { # cut_at N "needles"
    head -c $1 $P > $B/cut$1.safetensors
    expect2 "plain, cut at byte $1" "$B/cut$1.safetensors;;$2" $TXL info $B/cut$1.safetensors
    head -c $1 $P | gzip -1 > $B/cut$1.safetensors.gz
    expect2 "gzip of content cut at byte $1" "$B/cut$1.safetensors.gz;;$2" $TXL info $B/cut$1.safetensors.gz
}
cut_at 4 "4 bytes is too short;;need an 8-byte header length"
cut_at 7 "7 bytes is too short;;need an 8-byte header length"
cut_at 8 "header length $H exceeds the file's remaining 0 bytes"
cut_at 20 "header length $H exceeds the file's remaining 12 bytes"
cut_at $((8 + H - 1)) "header length $H exceeds"
cut_at $((8 + H + 1000)) "past the end of the data (1000 bytes; file truncated?)"
cut_at $(($(wc -c < $P) - 1)) "past the end of the data"
head -c $((8 + H + 1000)) $P > $B/cutdata.safetensors
expect2 "plain, cut inside the data: names the first tensor past the end" "$B/cutdata.safetensors;;tensor 'word_emb.weight': data_offsets" $TXL eval $B/cutdata.safetensors

echo "-- header"
{ printf '\377\377\377\377\377\377\377\377'; tail -c +9 $P; } > $B/hlen_huge.safetensors
both "header length 2^64-1" "header length 18446744073709551615 exceeds" $B/hlen_huge.safetensors
{ u64le 1; tail -c +9 $P; } > $B/hlen_one.safetensors
expect2 "header length 1" "$B/hlen_one.safetensors;;header length 1 is too small" $TXL info $B/hlen_one.safetensors
{ u64le $((H + 16)); tail -c +9 $P; } > $B/hlen_off.safetensors
expect2 "header length off by 16 (data read as JSON)" "$B/hlen_off.safetensors;;unexpected bytes after the JSON header" $TXL info $B/hlen_off.safetensors
st_header $P | sed 's/"dtype":"F32"/"dtype" "F32"/' > $TMP/h; st_data $P > $TMP/d
st_build $B/json.safetensors $TMP/h $TMP/d
both "malformed JSON" "malformed JSON header near byte" $B/json.safetensors
st_header $P | sed 's/^{/[/' > $TMP/h; st_build $B/notobj.safetensors $TMP/h $TMP/d
both "header is not a JSON object" "header does not start with '{'" $B/notobj.safetensors
st_edit $P $B/trailing.safetensors '.' && printf 'garbage' >> $B/trailing.safetensors
both "trailing bytes after the data" "trailing garbage" $B/trailing.safetensors
st_header $P | sed 's/"layers.0.attn.ln.bias":/"layers.0.attn.ln.weight":/' > $TMP/h
st_build $B/dup.safetensors $TMP/h $TMP/d
both "duplicate tensor name" "tensor 'layers.0.attn.ln.weight' appears twice" $B/dup.safetensors
# duplicate keys anywhere in the header (jq merges them, so these are text edits): a second
# __metadata__ after the first (it once reallocated the metadata arrays for its own count
# while the count went on from the first: a heap overflow), or before it, a metadata key,
# a key inside a tensor entry
st_header $P | sed 's/} *$/,"__metadata__":{"a":"b"}}/' > $TMP/h; st_build $B/dupmeta.safetensors $TMP/h $TMP/d
both "a second, smaller __metadata__ after the first" "key '__metadata__' appears twice in the header" $B/dupmeta.safetensors
st_header $P | sed 's/^{/{"__metadata__":{"a":"b"},/' > $TMP/h; st_build $B/dupmeta2.safetensors $TMP/h $TMP/d
both "a second __metadata__ before the first" "key '__metadata__' appears twice in the header" $B/dupmeta2.safetensors
st_header $P | sed 's/"__metadata__":{/&"step":"1",/' > $TMP/h; st_build $B/dupstep.safetensors $TMP/h $TMP/d
both "a metadata key twice" "__metadata__ key 'step' appears twice" $B/dupstep.safetensors
st_header $P | sed 's/^{/{"out.bias":{"dtype":"F32","shape":[0],"data_offsets":[0,0]},/' > $TMP/h
st_build $B/dupfirst.safetensors $TMP/h $TMP/d
both "a tensor name twice, the first before __metadata__" "tensor 'out.bias' appears twice in the header" $B/dupfirst.safetensors
st_header $P | sed 's/"out.bias":{"dtype":"F32",/&"dtype":"F32",/' > $TMP/h; st_build $B/dupdtype.safetensors $TMP/h $TMP/d
both "a key twice inside a tensor entry" "tensor 'out.bias': key 'dtype' appears twice" $B/dupdtype.safetensors
st_edit $P $B/entrykey.safetensors '.["out.bias"].dtypes = "F32"'
both "an unknown key inside a tensor entry" "tensor 'out.bias': unexpected key 'dtypes'" $B/entrykey.safetensors
st_edit $P $B/meta_num.safetensors '.__metadata__.step = 5'
both "non-string metadata" "__metadata__.step must be a string" $B/meta_num.safetensors
# a NUL inside a header string: the JSON reader keeps C strings, so "out.bias\u0000zz" was
# read as out.bias, and a config starting with \u0000 as an empty one ("data.train is
# required"); a raw 0 byte inside a string did the same
st_edit $P $B/nulname.safetensors '.["out.bias\u0000zz"] = .["out.bias"] | del(.["out.bias"])'
both "a tensor name holding \\u0000" 'header key "out.bias\u0000zz" holds a NUL character' $B/nulname.safetensors
st_edit $P $B/nulmeta.safetensors '.__metadata__.config |= "\u0000" + .'
both "metadata holding \\u0000" 'the value of header key "config" holds a NUL character' $B/nulmeta.safetensors
st_header $P | sed 's/"out\.bias":/"out.bias\x00zz":/' > $TMP/h; st_build $B/nulraw.safetensors $TMP/h $TMP/d
both "a tensor name holding a raw 0 byte" 'header key "out.bias?zz" holds a NUL character' $B/nulraw.safetensors

echo "-- tensor entries"
st_edit $P $B/past.safetensors '.["layers.1.ff.3.bias"].data_offsets |= [.[0] + 100000000, .[1] + 100000000]'
both "offsets past the end" "tensor 'layers.1.ff.3.bias': data_offsets [" $B/past.safetensors
st_edit $P $B/overlap.safetensors '.["layers.0.attn.ln.bias"].data_offsets = .["layers.0.attn.ln.weight"].data_offsets'
both "overlapping tensors" "'layers.0.attn.ln.weight' and 'layers.0.attn.ln.bias' overlap" $B/overlap.safetensors
st_edit $P $B/backwards.safetensors '.["out.bias"].data_offsets |= [.[1], .[0]]'
both "begin > end" "tensor 'out.bias': data_offsets must be [begin, end]" $B/backwards.safetensors
st_edit $P $B/size.safetensors '.["out.bias"].shape = [255]'
both "shape vs byte size" "tensor 'out.bias': 1024 bytes of data for 255 elements" $B/size.safetensors
st_edit $P $B/negshape.safetensors '.["out.bias"].shape = [-256]'
both "negative shape" "tensor 'out.bias': shape[0] is not a non-negative integer" $B/negshape.safetensors
st_edit $P $B/dtype.safetensors '.["word_emb.weight"].dtype = "F33"'
both "unknown dtype" "tensor 'word_emb.weight': unknown dtype 'F33'" $B/dtype.safetensors
st_edit $P $B/i32.safetensors '.["layers.0.ff.0.weight"].dtype = "I32"'
both "wrong dtype (I32)" "tensor 'layers.0.ff.0.weight' has dtype I32, expected F32" $B/i32.safetensors
st_edit $P $B/noentry.safetensors '.["out.bias"] = {"dtype": "F32"}'
both "tensor entry without shape and offsets" "tensor 'out.bias': expected" $B/noentry.safetensors

echo "-- tensors vs the model"
st_edit $P $B/missing.safetensors 'del(.["layers.1.ff.0.bias"])'
both "missing tensor" "missing tensor 'layers.1.ff.0.bias'" $B/missing.safetensors
st_edit $P $B/extra.safetensors '.["layers.7.attn.qkv.weight"] = {"dtype": "F32", "shape": [0], "data_offsets": [0, 0]}'
both "unexpected tensor" "unexpected tensor 'layers.7.attn.qkv.weight'" $B/extra.safetensors
empty_t='{"dtype": "F32", "shape": [0], "data_offsets": [0, 0]}'
st_edit $P $B/moment.safetensors ".[\"optim.m.bogus\"] = $empty_t"
RESUME_NEEDLES="unexpected tensor 'optim.m.bogus' (not an Adam moment of a parameter" \
both "an Adam moment too many" "the header lists 27 optim.m.*, 26 optim.v.* and 2 state.* tensors, but a pos_scheme xl model with the config in the checkpoint (model.n_layer 2) has 26 parameters" $B/moment.safetensors
st_edit $P $B/state.safetensors ".[\"state.mem.2\"] = $empty_t"
RESUME_NEEDLES="unexpected tensor 'state.mem.2' (the memory of a 2-layer model is state.mem.0 to state.mem.1)" \
both "a memory tensor too many" "26 optim.v.* and 3 state.* tensors" $B/state.safetensors
st_edit $P $B/optimx.safetensors ".[\"optim.x\"] = $empty_t"
both "an optim.* tensor that is no moment" "unexpected tensor 'optim.x'" $B/optimx.safetensors
# 300,000 entries (20 MB of header): comparing each name with all earlier ones took
# minutes; sorted, the reader takes well under a second, and the count check refuses them
st_header $P | jq -j -c ". + ([range(300000)] | map({key: \"optim.m.x.\(.)\", value: $empty_t}) | from_entries)" > $TMP/h
st_build $B/many.safetensors $TMP/h $TMP/d
t0=$(date +%s)
expect2 "300,000 tensors (within 60 s)" "$B/many.safetensors;;the header lists 300026 optim.m.*" timeout 60 $TXL info $B/many.safetensors
echo "  (300,000 tensors: $(($(date +%s) - t0)) s)"
rm -f $B/many.safetensors
st_edit $P $B/shape.safetensors '.["layers.0.ff.0.weight"].shape |= [.[1], .[0]]'
both "wrong shape" "tensor 'layers.0.ff.0.weight' has shape [64, 128], but the config in the checkpoint implies [128, 64]" $B/shape.safetensors
cfg() { # cfg OUT KEY VALUE [KEY VALUE ...]: sets keys in the config (YAML) in the metadata
    _out=$1; shift; _f=.
    while [ $# -ge 2 ]; do _f="$_f | sub(\"\\n  $1: [^\\n]*\\n\"; \"\\n  $1: $2\\n\")"; shift 2; done
    st_edit $P "$_out" ".__metadata__.config |= ($_f)"
}
cfg $B/cfg_d.safetensors d_model 32
RESUME_NEEDLES="the model config differs from the checkpoint's (checkpoint vs now): model.d_model: 32 vs 64" \
both "config disagrees: d_model" "tensor 'word_emb.weight' has 2 dimensions [256, 64], but the config in the checkpoint (model.d_model 32) implies [256, 32]" $B/cfg_d.safetensors
cfg $B/cfg_n.safetensors n_layer 3
RESUME_NEEDLES="model.n_layer: 3 vs 2" \
both "config disagrees: n_layer" "missing tensor 'layers.2.attn.qkv.weight', which the config in the checkpoint (model.n_layer 3) requires" $B/cfg_n.safetensors
cfg $B/cfg_many.safetensors n_layer 1000
RESUME_NEEDLES="model.n_layer: 1000 vs 2" \
both "config disagrees: n_layer 1000" "missing tensor 'layers.999.attn.qkv.weight'" $B/cfg_many.safetensors
cfg $B/cfg_big.safetensors d_inner 10000000
RESUME_NEEDLES="model.d_inner: 10000000 vs 128" \
both "config disagrees: a model far larger than the file" "d_inner 10000000) needs ;;bytes of weights, but the file's tensors hold" $B/cfg_big.safetensors
cfg $B/cfg_huge_model.safetensors n_layer 1000000 d_inner 1000000
RESUME_NEEDLES="model.n_layer: 1000000 vs 2, model.d_inner: 1000000 vs 128" \
both "config with an absurd model size" "the model is too large" $B/cfg_huge_model.safetensors
cfg $B/cfg_di.safetensors d_inner 100
RESUME_NEEDLES="model.d_inner: 100 vs 128" \
both "config disagrees: d_inner" "tensor 'layers.0.ff.0.weight' has shape [128, 64], but the config in the checkpoint implies [100, 64]" $B/cfg_di.safetensors
cfg $B/cfg_pos.safetensors pos_scheme rope
RESUME_NEEDLES="model.pos_scheme: rope vs xl" \
both "config disagrees: pos_scheme" "unexpected tensor 'r_w_bias' (not a parameter of a pos_scheme rope model" $B/cfg_pos.safetensors
cfg $B/cfg_odd.safetensors d_model 63
both "config out of range" "metadata 'config' at 4:12: model.d_model must be even, found 63" $B/cfg_odd.safetensors
st_edit $P $B/cfg_key.safetensors '.__metadata__.config |= sub("\nmodel:\n"; "\nmodel:\n  d_modle: 64\n")'
both "config with an unknown key" "metadata 'config' at 3:3: unknown key 'model.d_modle' (did you mean 'model.d_model'?)" $B/cfg_key.safetensors
st_edit $P $B/cfg_json_odd.safetensors '.__metadata__.config = "{\"model\":{\"d_model\":63}}"'
both "config in the JSON form of older txl, out of range" "metadata 'config' at 1:21: model.d_model must be even, found 63" $B/cfg_json_odd.safetensors
st_edit $P $B/cfg_yaml_syntax.safetensors '.__metadata__.config |= sub("\nmodel:\n"; "\nmodel: [\n")'
both "config YAML malformed" "metadata 'config' at;;YAML syntax error" $B/cfg_yaml_syntax.safetensors
cfg $B/cfg_huge.safetensors batch_size 1000000 tgt_len 1000000
RESUME_NEEDLES="model.tgt_len: 1000000 vs 32" \
both "config with an absurd plan" "a training step is too large" $B/cfg_huge.safetensors
# a config nested 100,000 deep (info took 117 s, inside libyaml) and one of more than 1 MiB
# (a config file's limit): refused at once (timeout 10: a regression fails, not hangs)
st_edit $P $B/cfg_deep.safetensors '.__metadata__.config = "model: " + ([range(100000)] | map("[") | join(""))'
for c in info eval; do
    expect2 "$c: config nested 100,000 deep (at once)" "$B/cfg_deep.safetensors;;metadata 'config' at 1:23: nested deeper than 16 levels" \
        timeout 10 $TXL $c $B/cfg_deep.safetensors
done
expect2 "train --resume: config nested 100,000 deep (at once)" "$B/cfg_deep.safetensors;;metadata 'config' at 1:23: nested deeper than 16 levels" \
    timeout 10 $TXL train -q --resume $B/cfg_deep.safetensors --set train.out_dir=$RUN
st_edit $P $B/cfg_json_deep.safetensors '.__metadata__.config = "{\"model\": " + ([range(100000)] | map("[") | join(""))'
expect2 "info: a JSON config nested 100,000 deep (at once)" "$B/cfg_json_deep.safetensors;;nested deeper than 16 levels" \
    timeout 10 $TXL info $B/cfg_json_deep.safetensors
st_edit $P $B/cfg_big.safetensors '.__metadata__.config |= ([range(1048576)] | map(" ") | join("")) + .'
both "config metadata over 1 MiB" "metadata 'config': $((1048576 + $(st_header $P | jq -j '.__metadata__.config' | wc -c))) bytes, more than a config may hold (1048576)" $B/cfg_big.safetensors
st_edit $P $B/cfg_syntax.safetensors '.__metadata__.config = "{\"model\": {"'
both "config JSON malformed" "metadata 'config' at 2:1: YAML syntax error" $B/cfg_syntax.safetensors
st_edit $P $B/cfg_none.safetensors 'del(.__metadata__.config)'
both "no config" "no 'config' in the metadata" $B/cfg_none.safetensors

echo "-- resume state"
st_edit $P $B/mem.safetensors '.["state.mem.0"].shape |= [.[0] / 2, .[1] * 2, .[2]]'
expect2 "train --resume: memory tensor of the wrong shape" "$B/mem.safetensors;;memory tensor 'state.mem.0'" \
    $TXL train -q -c $CFG --resume $B/mem.safetensors --set train.out_dir=$RUN
st_edit $P $B/optim.safetensors 'del(.["optim.v.out.bias"])'
expect2 "train --resume: a missing Adam moment" "$B/optim.safetensors;;missing tensor 'optim.v.out.bias'" \
    $TXL train -q -c $CFG --resume $B/optim.safetensors --set train.out_dir=$RUN
expect2 "train --resume from weights only" "$TMP/w.safetensors;;missing tensor 'optim.m.word_emb.weight'" \
    $TXL train -q -c $CFG --resume $TMP/w.safetensors --set train.out_dir=$RUN
# the training state in the metadata is parsed strictly: garbage, a sign, an exponent, an
# overflow or a missing key is an error naming the file and the key, never a default (step
# "1e23" was signed overflow, "-5" trained at negative steps)
state() { # state "description" KEY VALUE "needles" (VALUE null deletes the key)
    if [ "$3" = null ]; then st_edit $P $B/state.safetensors "del(.__metadata__.$2)"
    else st_edit $P $B/state.safetensors ".__metadata__.$2 = \"$3\""; fi
    expect2 "train --resume: $1" "$B/state.safetensors;;metadata ;;'$2';;$4" \
        $TXL train -q --resume $B/state.safetensors --set train.out_dir=$RUN --set train.max_steps=10
}
state "step 1e23" step 1e23 "must be an integer in [0, 2^53], found '1e23'"
state "step -5" step -5 "found '-5'"
state "step abc" step abc "found 'abc'"
state "step 2^63 (overflow)" step 9223372036854775808 "found '9223372036854775808'"
state "step 2^53 + 1" step 9007199254740993 "found '9007199254740993'"
state "step empty" step "" "found ''"
state "step missing" step null "is missing"
state "tokens +5" tokens +5 "found '+5'"
state "epoch 1.5" epoch 1.5 "found '1.5'"
state "data_pos 0x10" data_pos 0x10 "found '0x10'"
state "log_steps with a space" log_steps " 3" "found ' 3'"
state "grad_norm_count -1" grad_norm_count -1 "found '-1'"
state "skipped_steps 1e3" skipped_steps 1e3 "found '1e3'"
state "train_split_tokens abc" train_split_tokens abc "found 'abc'"
state "params -1" params -1 "found '-1'"
state "seed x" seed x "must be an integer in [0, 2^64), found 'x'"
state "seed 2^64 (overflow)" seed 18446744073709551616 "found '18446744073709551616'"
state "seed -1" seed -1 "found '-1'"
state "best_valid_loss abc" best_valid_loss abc "must be a number >= 0 or inf, found 'abc'"
state "best_valid_loss nan" best_valid_loss nan "found 'nan'"
state "best_valid_loss -1" best_valid_loss -1 "found '-1'"
state "best_valid_loss 1e999 (overflow)" best_valid_loss 1e999 "found '1e999'"
state "log_loss_sum inf" log_loss_sum inf "must be a finite number >= 0, found 'inf'"
state "elapsed_s -3" elapsed_s -3 "found '-3'"
state "elapsed_s 0x1p3" elapsed_s 0x1p3 "found '0x1p3'"
state "grad_norm_mean nan" grad_norm_mean nan "found 'nan'"
state "params that are not the model's" params 5 "is 5, but the model of its config has"
state "data_pos past the end of the streams" data_pos 9000000 "9000000 is past the end of the streams"
# the counters agree: each step is applied or skipped, an epoch takes a step, each step feeds
# the 8 streams one segment of 1 to 32 tokens (the run: 5 steps, 1280 tokens)
state "step 7, but 5 applied and 0 skipped" step 7 "metadata 'grad_norm_count' 5 + 'skipped_steps' 0 is not 'step' 7"
state "skipped_steps 1 (6 steps counted)" skipped_steps 1 "'grad_norm_count' 5 + 'skipped_steps' 1 is not 'step' 5"
state "epoch past step" epoch 6 "'epoch' 6 is more than 'step' 5"
state "log_steps past step" log_steps 6 "'log_steps' 6 is more than 'step' 5"
state "tokens past step x streams x tgt_len" tokens 1281 "'tokens' 1281 does not fit 'step' 5;;(so 40 to 1280 tokens)"
state "tokens under step x streams" tokens 39 "'tokens' 39 does not fit 'step' 5"
# every reader applies these checks (info printed "step: -5" and "step: 1e400")
for v in -5 1e400; do
    st_edit $P $B/step.safetensors ".__metadata__.step = \"$v\""
    both "step '$v'" "metadata 'step' must be an integer in [0, 2^53], found '$v'" $B/step.safetensors
done
st_edit $P $B/valid.safetensors '.__metadata__.valid_loss = "abc"'
expect2 "info: valid_loss 'abc'" "$B/valid.safetensors;;metadata 'valid_loss' must be a number >= 0, inf or nan, found 'abc'" $TXL info $B/valid.safetensors
st_edit $P $B/format.safetensors '.__metadata__.format = "txl/2"'
both "format txl/2" "metadata 'format' is 'txl/2', expected 'txl/1'" $B/format.safetensors
st_edit $P $B/noformat.safetensors 'del(.__metadata__.format)'
check "format absent: accepted (it is informative; the config says the rest)" $TXL info $B/noformat.safetensors
# a resumable checkpoint's state is complete: the memory of every layer (the model has
# mem_len 32, and a checkpoint with state is written after a step, which leaves rows)
st_edit $P $B/nomem0.safetensors 'del(.["state.mem.0"])'
expect2 "train --resume: state.mem.1 without state.mem.0 (it resumed with an empty memory)" "$B/nomem0.safetensors;;memory tensor 'state.mem.0' missing or not [8, 32, 64] F32" \
    $TXL train -q -c $CFG --resume $B/nomem0.safetensors --set train.out_dir=$RUN
st_drop $P $B/nomem.safetensors 'del(.["state.mem.0"], .["state.mem.1"])'
expect2 "train --resume: no memory at all with mem_len 32" "$B/nomem.safetensors;;missing tensor 'state.mem.0': a checkpoint to resume from holds the memory of every layer (state.mem.0 to state.mem.1) when model.mem_len > 0 (32)" \
    $TXL train -q -c $CFG --resume $B/nomem.safetensors --set train.out_dir=$RUN
check "eval of it is fine (it does not read the memory)" $TXL eval $B/nomem.safetensors --data $TMP/last.safetensors --max-tokens 3000
st_edit $P $B/mem64.safetensors '.["state.mem.0"].dtype = "F64" | .["state.mem.0"].shape |= [.[0], .[1], .[2] / 2]'
RESUME_NEEDLES="memory tensor 'state.mem.0' missing or not [8, 32, 64] F32" \
both "a memory tensor of another dtype (read by no reader, refused from the header by all)" "tensor 'state.mem.0' is not the layer input of this config's memory (F32 [8, <= 32, 64]" $B/mem64.safetensors
check "eval still works on a file with only a damaged memory tensor" $TXL eval $B/mem.safetensors --data $TMP/last.safetensors --max-tokens 3000

echo "-- non-finite values (each would make every loss nan)"
NAN='\000\000\300\177' INF='\000\000\200\177' NINF='\000\000\200\377'
put_f32 $P $B/nan.safetensors layers.0.attn.o.weight 1234 "$NAN"    # [64, 64]: row 19, column 18
both "a NaN weight" "tensor 'layers.0.attn.o.weight' holds a non-finite value (nan) at index [19, 18] (element 1234 of 4096)" $B/nan.safetensors
put_f32 $P $B/nan_ff.safetensors layers.1.ff.0.weight 8191 "$NAN"
expect2 "a NaN that the forward pass hides (ReLU maps it to 0) is refused too" \
    "$B/nan_ff.safetensors;;tensor 'layers.1.ff.0.weight' holds a non-finite value (nan) at index [127, 63]" $TXL info $B/nan_ff.safetensors
put_f32 $P $B/inf.safetensors word_emb.weight 0 "$INF"
both "an infinite weight" "tensor 'word_emb.weight' holds a non-finite value (inf) at index [0, 0]" $B/inf.safetensors
put_f32 $P $B/ninf.safetensors out.bias 255 "$NINF"
both "a -inf bias, the last element" "tensor 'out.bias' holds a non-finite value (-inf) at index [255] (element 255 of 256)" $B/ninf.safetensors
expect2 "eval --json of a NaN weight: no \"loss\":nan, exit 2" "$B/nan.safetensors;;non-finite" $TXL eval $B/nan.safetensors --json --data $TMP/last.safetensors
check "...and nothing on stdout" test ! -s $TMP/out
put_f32 $P $B/nan_v.safetensors optim.v.out.bias 3 "$NAN"
expect2 "train --resume: a NaN Adam moment" "$B/nan_v.safetensors;;tensor 'optim.v.out.bias' holds a non-finite value (nan) at index [3]" \
    $TXL train -q -c $CFG --resume $B/nan_v.safetensors --set train.out_dir=$RUN
put_f32 $P $B/neg_v.safetensors optim.v.out.bias 3 '\000\000\200\277'   # -1.0
expect2 "train --resume: a negative Adam second moment (NaN two steps later)" "$B/neg_v.safetensors;;tensor 'optim.v.out.bias' holds a negative value (-1) at index [3] (element 3 of 256): an Adam second moment is a running mean of squared gradients" \
    $TXL train -q -c $CFG --resume $B/neg_v.safetensors --set train.out_dir=$RUN
put_f32 $P $B/inf_mem.safetensors state.mem.1 100 "$INF"
expect2 "train --resume: an infinite memory value" "$B/inf_mem.safetensors;;tensor 'state.mem.1' holds a non-finite value (inf) at index [0, 1, 36]" \
    $TXL train -q -c $CFG --resume $B/inf_mem.safetensors --set train.out_dir=$RUN
check "eval reads weights whose Adam moments are damaged (it does not load them)" $TXL eval $B/nan_v.safetensors --data $TMP/last.safetensors --max-tokens 3000

echo "-- bit flips in the compressed payload (the gzip CRC-32 and length must catch them)"
s=$(wc -c < $GZ)
nflip=0; nok=0
for off in 30 1000 5000 20000 100000 300000 500000 700000 900000 $((s - 100)) $((s - 8)) $((s - 6)) $((s - 3)); do
    for mask in 1 16 128; do
        nflip=$((nflip + 1))
        flip_byte $GZ $B/flip.safetensors.gz $off $mask
        $TXL info $B/flip.safetensors.gz >$TMP/out 2>$TMP/err </dev/null
        rc=$?
        if [ $rc -eq 2 ] && grep -qF "$B/flip.safetensors.gz" $TMP/err && ! grep -q Sanitizer $TMP/err; then
            nok=$((nok + 1))
        else
            bad "bit flip at byte $off (mask $mask) of $s: exit $rc: $(head -c 300 $TMP/err)"
        fi
    done
done
check "all $nflip bit flips rejected with exit 2 ($nok)" test $nok -eq $nflip
flip_byte $GZ $B/crc.safetensors.gz $((s - 7)) 4
expect2 "bit flip in the CRC-32 trailer" "$B/crc.safetensors.gz;;incorrect data check" $TXL eval $B/crc.safetensors.gz
flip_byte $GZ $B/isize.safetensors.gz $((s - 2)) 1
expect2 "bit flip in the length trailer" "$B/isize.safetensors.gz;;incorrect length check" $TXL eval $B/isize.safetensors.gz

echo "-- memory coordinates that do not continue the text (hier)"
# state.coords pass the loader's checks (>= 0, non-decreasing along the rows) but do not fit
# the text at the data cursor: all 0 (what 2 MPI ranks wrote before the coordinates were
# gathered) or all 2^31-1. The coordinate differences would exceed the window and overrun
# the bias tables; the forward brings such rows to the rule of the text (a token starts at
# most one unit per level) and the run goes on.
H=$TMP/hier
$TXL train -q -c $CFG --set model.pos_scheme=hier --set data.anchors=[bos,para,sent] \
    --set train.max_steps=10 --set train.eval_interval=0 --set train.out_dir=$H --steps 5 \
    >/dev/null 2>$TMP/hier.err || bad "hier setup run: $(cat $TMP/hier.err)"
gunzip -c $H/last.safetensors.gz > $TMP/hier.safetensors
co_at=$(( 8 + $(st_hlen $TMP/hier.safetensors) + $(st_header $TMP/hier.safetensors | jq '.["state.coords"].data_offsets[0]') ))
co_n=$(st_header $TMP/hier.safetensors | jq '.["state.coords"].data_offsets | .[1] - .[0]')
for v in zero max; do
    cp $TMP/hier.safetensors $B/coords_$v.safetensors
    i=0
    while [ $i -lt $((co_n / 4)) ]; do
        if [ $v = zero ]; then printf '\0\0\0\0'; else printf '\377\377\377\177'; fi
        i=$((i + 1))
    done | dd of=$B/coords_$v.safetensors bs=1 seek=$co_at conv=notrunc 2>/dev/null
    $TXL train -q --resume $B/coords_$v.safetensors --set train.out_dir=$TMP/hier_$v \
        >/dev/null 2>$TMP/hier_$v.err
    rc=$?
    check "state.coords all $v: the resume runs to the end (exit $rc), no crash" test $rc -eq 0
    check "...and logs its 5 steps" test "$(jq -s '[.[] | select(.event=="train")] | length' \
        $TMP/hier_$v/log.jsonl)" -eq 5
done
# a state tensor too many in a hier checkpoint (its state.coords is one of its 3): the
# count of the parameter table (model_counts) holds hier's tensors too, so the guard fires
st_edit $TMP/hier.safetensors $B/hier_state.safetensors ".[\"state.mem.9\"] = $empty_t"
expect2 "info: hier, a state tensor too many (counted with its coordinates)" \
    "$B/hier_state.safetensors;;and 4 state.* tensors, but a pos_scheme hier model with the config in the checkpoint (model.n_layer 2) has;;and 3 state tensors" \
    $TXL info $B/hier_state.safetensors
# the coordinates go with the memory: both or neither (hier reads them)
st_drop $TMP/hier.safetensors $B/nocoords.safetensors 'del(.["state.coords"])'
expect2 "train --resume: hier memory without its state.coords" "$B/nocoords.safetensors;;tensor 'state.coords' missing or not [8, 32, 3] I32" \
    $TXL train -q --resume $B/nocoords.safetensors --set train.out_dir=$TMP/hier_nc
st_edit $TMP/hier.safetensors $B/coords_short.safetensors '.["state.coords"].shape = [8, 16, 6]'
expect2 "train --resume: hier state.coords of fewer rows than the memory" "$B/coords_short.safetensors;;tensor 'state.coords' missing or not [8, 32, 3] I32" \
    $TXL train -q --resume $B/coords_short.safetensors --set train.out_dir=$TMP/hier_nc

echo "-- quantized checkpoints (txl quantize: BF16, I8 with BF16 scales in NAME_scale)"
Q=$TMP/q8.safetensors
$TXL quantize $GZ --type q8 -o $Q -q || bad "quantize q8"
check "a q8 checkpoint loads" $TXL info $Q
check "...and evaluates" $TXL eval $Q --data $TMP/last.safetensors --max-tokens 2000 -q
# every reader refuses; a resume refuses any quantized checkpoint first, naming its first
# quantized tensor (word_emb.weight, bf16 in q8)
RQ="quantized (tensor 'word_emb.weight' is BF16), use the original to train"
# a truncated scale tensor: fewer rows than its matrix (its shape and data both shorter)
st_edit $Q $B/scale_rows.safetensors \
    '.["layers.0.attn.qkv.weight_scale"] |= (.shape[0] -= 1 | .data_offsets[1] -= 4)'
RESUME_NEEDLES=$RQ readers "q8 scales of a row too few" \
    "tensor 'layers.0.attn.qkv.weight_scale' has shape [191, 2], but the q8 tensor 'layers.0.attn.qkv.weight' [192, 64] needs [192, 2]" \
    $B/scale_rows.safetensors
# ...and its data shorter than its shape
st_edit $Q $B/scale_short.safetensors '.["layers.0.attn.qkv.weight_scale"].data_offsets[1] -= 2'
expect2 "q8 scale tensor with its last bytes cut" \
    "$B/scale_short.safetensors;;tensor 'layers.0.attn.qkv.weight_scale': 766 bytes of data for 384 elements of BF16" \
    $TXL info $B/scale_short.safetensors
# a block size that does not divide the row (3 scales for rows of 128), and one that is not 32
st_edit $Q $B/scale_blocks.safetensors \
    '.["layers.0.ff.3.weight_scale"] |= (.shape[1] = 3 | .data_offsets[1] -= 128)'
RESUME_NEEDLES=$RQ readers "q8 blocks that do not divide the row" \
    "tensor 'layers.0.ff.3.weight_scale' has shape [64, 3]: 3 scales a row make blocks that do not divide the row of 128 weights of 'layers.0.ff.3.weight'" \
    $B/scale_blocks.safetensors
st_edit $Q $B/scale_64.safetensors \
    '.["layers.0.ff.3.weight_scale"] |= (.shape[1] = 2 | .data_offsets[1] -= 256)'
expect2 "q8 blocks of 64" "$B/scale_64.safetensors;;blocks of 64 weights, but txl's q8 blocks are 32" \
    $TXL sample $B/scale_64.safetensors -n 5
st_drop $Q $B/scale_none.safetensors 'del(.["layers.1.attn.o.weight_scale"])'
expect2 "q8 tensor without its scales" \
    "$B/scale_none.safetensors;;missing tensor 'layers.1.attn.o.weight_scale': the scales of the q8 tensor 'layers.1.attn.o.weight'" \
    $TXL eval $B/scale_none.safetensors --data $TMP/last.safetensors
st_edit $Q $B/scale_f16.safetensors '.["layers.1.attn.o.weight_scale"].dtype = "F16"'
expect2 "q8 scales in F16" "$B/scale_f16.safetensors;;tensor 'layers.1.attn.o.weight_scale' has dtype F16: txl's q8 scales are BF16" \
    $TXL info $B/scale_f16.safetensors
at=$(( 8 + $(st_hlen $Q) + $(st_header $Q | jq '.["layers.1.ff.0.weight_scale"].data_offsets[0]') + 6 ))
cp $Q $B/scale_nan.safetensors
printf '\300\177' | dd of=$B/scale_nan.safetensors bs=1 seek=$at conv=notrunc 2>/dev/null
expect2 "a NaN q8 scale" "$B/scale_nan.safetensors;;tensor 'layers.1.ff.0.weight_scale' holds a non-finite value (nan) at element 3" \
    $TXL eval $B/scale_nan.safetensors --data $TMP/last.safetensors
# a scale tensor beside an F32 matrix is a stranger
st_edit $TMP/w.safetensors $B/scale_f32.safetensors ".[\"layers.0.attn.o.weight_scale\"] = $empty_t"
expect2 "a _scale tensor of an F32 matrix" \
    "$B/scale_f32.safetensors;;unexpected tensor 'layers.0.attn.o.weight_scale'" $TXL info $B/scale_f32.safetensors
# training refuses a quantized checkpoint; --init-from reads it dequantized
expect2 "train --resume: a q8 checkpoint" "$Q;;$RQ;;--init-from" \
    $TXL train -q -c $CFG --resume $Q --set train.out_dir=$RUN
check "train --init-from a q8 checkpoint trains from its weights" \
    $TXL train -q -c $CFG --init-from $Q --set train.max_steps=2 --set train.warmup_steps=0 \
    --set train.eval_interval=0 --set train.out_dir=$TMP/from_q8
check "...whose checkpoint is fp32 again" test "$($TXL info $TMP/from_q8 --json | jq -r .weights)" = fp32
# txl quantize's own input: export's rules for -o, a missing or wrong --type
expect2 "quantize -o onto its input" "-o $GZ;;the same file" $TXL quantize $GZ --type q8 -o $GZ
expect2 "quantize -o onto the run's other checkpoint" "-o $RUN/last.safetensors.gz;;an input" \
    $TXL quantize $RUN --type bf16 -o $RUN/last.safetensors.gz
expect2 "quantize -o a directory" "-o $B;;is a directory" $TXL quantize $GZ --type q8 -o $B
expect2 "quantize -o a FIFO" "-o $B/fifo.safetensors;;FIFO" $TXL quantize $GZ --type q8 -o $B/fifo.safetensors
expect2 "quantize without --type" "missing --type bf16|q8" $TXL quantize $GZ -o $B/q.safetensors
expect2 "quantize --type q4" "--type;;q4" $TXL quantize $GZ --type q4 -o $B/q.safetensors
check "...nothing written by them" test ! -e $B/q.safetensors

guard_sum > $TMP/guard.end
check "the run directory is untouched after all of the above" cmp -s $TMP/guard.sum $TMP/guard.end
check "...and its checkpoint still loads" $TXL info $GZ
finish
