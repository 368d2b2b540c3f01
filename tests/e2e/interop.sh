#!/bin/sh
# Interop: a trained checkpoint exported to plain safetensors (txl export) and imported back
# with its config (txl import) evaluates to the same loss; malformed weights (a missing
# tensor, a wrong shape, an extra tensor, a wrong dtype) and a config of another model exit 2
# naming the tensors, and write nothing; the file any safetensors reader sees is standard
# (header checked with jq); tools/st_reader.py lists the tensors when python3 is available.
# -o onto an input (any spelling, a link, a run directory's checkpoints), the config, a FIFO,
# a device, a directory, "" or a missing directory exits 2 and changes nothing.
. tests/e2e/lib.sh

$TXL train -c tests/configs/micro.yaml --set train.out_dir=$TMP/run --set train.max_steps=20 \
    --set train.eval_interval=0 --set train.threads=1 -q > /dev/null 2>$TMP/train.err
check "micro trains (20 steps)" test -s $TMP/run/last.safetensors.gz
CKPT=$TMP/run/last.safetensors.gz
EVAL="--data tests/data/enwik8_slice60k.txt.gz --max-tokens 6000 --json -q --threads 1"

$TXL export $CKPT -o $TMP/w.safetensors 2>/dev/null
check "export: plain safetensors" test -s $TMP/w.safetensors
$TXL import $TMP/w.safetensors -c $TMP/run/config.yaml -o $TMP/imp.safetensors.gz 2>$TMP/imp.err
check "import: exit 0" test $? -eq 0
check "import: names the files on stderr" grep -q "w.safetensors -> .*imp.safetensors.gz" $TMP/imp.err
l1=$($TXL eval $CKPT $EVAL | jq .loss)
l2=$($TXL eval $TMP/imp.safetensors.gz $EVAL | jq .loss)
check "eval of the imported checkpoint equals the original ($l1 vs $l2)" test -n "$l1" -a "$l1" = "$l2"
$TXL info $TMP/imp.safetensors.gz --json > $TMP/info.json
check "imported: step 0, the config stored, not resumable" \
    jq -e '.step == 0 and .config.model.d_model == 64 and .resumable == false' $TMP/info.json
$TXL import $TMP/w.safetensors -c $TMP/run/config.yaml -o $TMP/imp.safetensors -q 2>$TMP/q.err
check "import -o plain .safetensors, -q is silent" test -s $TMP/imp.safetensors -a ! -s $TMP/q.err
gzip -c $TMP/w.safetensors > $TMP/w.safetensors.gz
check "import reads gzip'd weights" $TXL import $TMP/w.safetensors.gz -c $TMP/run/config.yaml -o $TMP/imp2.safetensors.gz -q

# st_edit IN OUT JQ_FILTER [BYTES]: rewrites the JSON header of a plain safetensors file
# with jq, appending BYTES zero bytes to the data section.
st_edit() {
    n=$(od -An -tu8 -N8 "$1" | tr -d ' ')
    tail -c +9 "$1" | head -c "$n" | jq -c "$3" | tr -d '\n' > $TMP/h.json
    while [ $(( $(wc -c < $TMP/h.json) % 8 )) -ne 0 ]; do printf ' ' >> $TMP/h.json; done
    len=$(wc -c < $TMP/h.json)
    i=0; : > "$2"
    while [ $i -lt 8 ]; do
        printf "\\$(printf %03o $(( (len >> (8 * i)) & 255 )))" >> "$2"
        i=$((i + 1))
    done
    cat $TMP/h.json >> "$2"
    tail -c +$((9 + n)) "$1" >> "$2"
    [ -z "${4:-}" ] || head -c "$4" /dev/zero >> "$2"
}
code() { "$@" >/dev/null 2>$TMP/err; echo $?; }
imp() { code $TXL import "$1" -c $TMP/run/config.yaml -o $TMP/bad.safetensors.gz; }

st_edit $TMP/w.safetensors $TMP/same.safetensors '.'
check "st_edit round trip imports" test "$(imp $TMP/same.safetensors)" -eq 0
rm -f $TMP/bad.safetensors.gz

st_edit $TMP/w.safetensors $TMP/missing.safetensors 'del(."out.bias")'
check "missing tensor: exit 2" test "$(imp $TMP/missing.safetensors)" -eq 2
check "  ... named" grep -q "missing tensor: out.bias" $TMP/err

st_edit $TMP/w.safetensors $TMP/shape.safetensors '."layers.1.ff.0.bias".shape = [2, 64]'
check "wrong shape: exit 2" test "$(imp $TMP/shape.safetensors)" -eq 2
check "  ... named, with both shapes" grep -q "layers.1.ff.0.bias (shape \[2, 64\], expected \[128\])" $TMP/err

end=$(od -An -tu8 -N8 $TMP/w.safetensors | tr -d ' ')
end=$(tail -c +9 $TMP/w.safetensors | head -c $end | jq '[.[] | .data_offsets? // empty | .[1]] | max')
st_edit $TMP/w.safetensors $TMP/extra.safetensors \
    ". + {\"lm_head.weight\": {dtype: \"F32\", shape: [2, 2], data_offsets: [$end, $((end + 16))]}}" 16
check "extra tensor: exit 2" test "$(imp $TMP/extra.safetensors)" -eq 2
check "  ... named" grep -q "unexpected tensor: lm_head.weight" $TMP/err

st_edit $TMP/w.safetensors $TMP/dtype.safetensors '."out.bias".dtype = "I32"'
check "wrong dtype: exit 2" test "$(imp $TMP/dtype.safetensors)" -eq 2
check "  ... named" grep -q "out.bias (dtype I32, expected F32)" $TMP/err

st_edit $TMP/w.safetensors $TMP/many.safetensors 'del(."out.bias") | del(."r_w_bias") | ."word_emb.weight".shape = [64, 256]'
check "several problems: all listed at once" test "$(imp $TMP/many.safetensors)" -eq 2 -a \
    "$(grep -c 'out.bias, r_w_bias; wrong tensor: word_emb.weight' $TMP/err)" -eq 1
check "nothing written on failure" test ! -e $TMP/bad.safetensors.gz

check "another model's config (rope): exit 2" test "$(code $TXL import $TMP/w.safetensors -c $TMP/run/config.yaml --set model.pos_scheme=rope -o $TMP/bad.st)" -eq 2
check "  ... names the xl tensors rope lacks" grep -q "unexpected tensors: r_w_bias, r_r_bias, layers.0.attn.r.weight" $TMP/err
check "a checkpoint with training state: exit 2, points to txl export" \
    test "$(code $TXL import $CKPT -c $TMP/run/config.yaml -o $TMP/bad.st)" -eq 2
check "  ... says so" grep -q "txl export" $TMP/err
check "no -c: exit 2" test "$(code $TXL import $TMP/w.safetensors -o $TMP/bad.st)" -eq 2
check "missing weights file: exit 2" test "$(code $TXL import $TMP/nope.safetensors -c $TMP/run/config.yaml -o $TMP/bad.st)" -eq 2
check "truncated weights file: exit 2" test "$(head -c 3000 $TMP/w.safetensors > $TMP/trunc.st; code $TXL import $TMP/trunc.st -c $TMP/run/config.yaml -o $TMP/bad.st)" -eq 2

# -o onto what the temp file + rename would wreck: the input (through any spelling or link),
# the config, a FIFO, a device; a directory, "" or a missing directory: exit 2, nothing changed
sum() { sha256sum "$1" | cut -d' ' -f1; }
cp $TMP/run/config.yaml $TMP/c.yaml
ckpt_sum=$(sum $CKPT) best_sum=$(sum $TMP/run/best.safetensors.gz) w_sum=$(sum $TMP/w.safetensors)
c_sum=$(sum $TMP/c.yaml)
refused() { # refused "description" "message" command...: exit 2 and the message on stderr
    d=$1; n=$2; shift 2
    check "$d: exit 2" test "$(code "$@")" -eq 2
    check "  ... says why ($n)" grep -qF -- "$n" $TMP/err
}
refused "export onto its input" "(the same file), an input" $TXL export $CKPT -o $CKPT
refused "export onto its input, spelt otherwise" "(the same file)" \
    $TXL export $TMP/run/./last.safetensors.gz -o $TMP/run/../run/last.safetensors.gz
ln -s $CKPT $TMP/link.safetensors.gz
refused "export of a symbolic link onto its target" "(the same file)" \
    $TXL export $TMP/link.safetensors.gz -o $CKPT
ln $CKPT $TMP/hard.safetensors.gz
refused "export of a hard link onto the other name" "(the same file)" \
    $TXL export $TMP/hard.safetensors.gz -o $CKPT
refused "export of a run directory onto the checkpoint it reads (best)" "(the same file)" \
    $TXL export $TMP/run -o $TMP/run/best.safetensors.gz
refused "export of a run directory onto its other checkpoint (last)" "(the same file)" \
    $TXL export $TMP/run/ -o $CKPT
# the other format of a run's checkpoint: a second last (or best) that readers of the run
# directory would choose by step, a tie taking the .gz (weights only: --resume DIR then fails)
mkdir $TMP/prun   # a run of train.ckpt_gzip false: plain checkpoints
gunzip -c $CKPT > $TMP/prun/last.safetensors
gunzip -c $TMP/run/best.safetensors.gz > $TMP/prun/best.safetensors
cp $TMP/run/config.yaml $TMP/run/log.jsonl $TMP/prun/
refused "export of a plain run directory (its best) as last.safetensors.gz" \
    "$TMP/prun/last.safetensors is there, the run's checkpoint in the other format" \
    $TXL export $TMP/prun -o $TMP/prun/last.safetensors.gz
check "  ... --resume of that directory still finds its last" \
    $TXL train -q --resume $TMP/prun --set train.max_steps=30 --dry-run
refused "export of a run directory as the other format of its last" \
    "$TMP/run/last.safetensors.gz is there, the run's checkpoint in the other format" \
    $TXL export $TMP/run -o $TMP/run/last.safetensors
refused "import as the other format of a run's best" \
    "$TMP/run/best.safetensors.gz is there, the run's checkpoint in the other format" \
    $TXL import $TMP/w.safetensors -c $TMP/c.yaml -o $TMP/run/best.safetensors
check "  ... none was written" test ! -e $TMP/prun/last.safetensors.gz -a ! -e \
    $TMP/run/last.safetensors -a ! -e $TMP/run/best.safetensors
check "  ... the checkpoints are untouched" \
    test "$(sum $CKPT) $(sum $TMP/run/best.safetensors.gz)" = "$ckpt_sum $best_sum"
$TXL info $CKPT --json > $TMP/info_last.json
check "  ... and last still resumable" jq -e '.resumable == true' $TMP/info_last.json
refused "import onto its config" "(the same file), an input" \
    $TXL import $TMP/w.safetensors -c $TMP/c.yaml -o $TMP/c.yaml
refused "import onto its weights" "(the same file), an input" \
    $TXL import $TMP/w.safetensors -c $TMP/c.yaml -o $TMP/./w.safetensors
check "  ... the config and the weights are untouched" \
    test "$(sum $TMP/c.yaml) $(sum $TMP/w.safetensors)" = "$c_sum $w_sum"
mkfifo $TMP/fifo.safetensors
refused "export onto a FIFO" "is a FIFO" $TXL export $CKPT -o $TMP/fifo.safetensors
check "  ... the FIFO is still one" test -p $TMP/fifo.safetensors
ln -s /dev/null $TMP/null.safetensors
refused "import onto a symbolic link to /dev/null" "is a device through a symbolic link" \
    $TXL import $TMP/w.safetensors -c $TMP/c.yaml -o $TMP/null.safetensors
check "  ... the link is still one, to a device" test -L $TMP/null.safetensors -a -c /dev/null
ln -s $TMP/nothing.safetensors $TMP/dangling.safetensors
refused "export onto a symbolic link to nothing" "symbolic link to a missing file" \
    $TXL export $CKPT -o $TMP/dangling.safetensors
refused "export onto a directory (was exit 1, rename failed)" "is a directory" \
    $TXL export $CKPT -o $TMP
refused "import onto a directory" "is a directory" \
    $TXL import $TMP/w.safetensors -c $TMP/c.yaml -o $TMP/run/
refused "export -o ''" "-o: an empty file name" $TXL export $CKPT -o ''
refused "export into a missing directory" "no directory '$TMP/nodir'" \
    $TXL export $CKPT -o $TMP/nodir/w.safetensors
check "  ... no temp file left" test -z "$(ls $TMP | grep 'tmp\.')"

# the header any safetensors reader sees
n=$(od -An -tu8 -N8 $TMP/w.safetensors | tr -d ' ')
tail -c +9 $TMP/w.safetensors | head -c $n > $TMP/hdr.json
check "exported header: standard safetensors JSON (F32, [out, in] shapes, config metadata)" \
    jq -e '."layers.0.attn.qkv.weight".shape == [192, 64] and ."word_emb.weight".dtype == "F32" and (."__metadata__".config | test("\nmodel:\n  n_layer: 2\n"))' $TMP/hdr.json
check "...the config metadata is the run's config.yaml, byte for byte" \
    test "$(jq -j '."__metadata__".config' $TMP/hdr.json)" = "$(cat $TMP/run/config.yaml)"

if command -v python3 >/dev/null 2>&1; then
    python3 tools/st_reader.py $CKPT > $TMP/st.txt 2>$TMP/st.err
    check "st_reader.py lists a gzip'd checkpoint" grep -q '^layers.1.ff.ln.bias  *F32  *\[64\]' $TMP/st.txt
    check "  ... with the Adam moments and memory" grep -q '^state.mem.0 ' $TMP/st.txt
    check "  ... and the metadata" grep -q '^# step: 20$' $TMP/st.txt
    check "st_reader.py --json on plain weights: tensor count" \
        test "$(python3 tools/st_reader.py $TMP/w.safetensors --json | jq '.tensors | length')" -eq 26
    check "st_reader.py --config reads the config (YAML)" \
        test "$(python3 tools/st_reader.py $TMP/imp.safetensors.gz --config | jq .model.d_model)" -eq 64
    check "st_reader.py --config: numbers as numbers (eps 1e-08), paths as strings" \
        test "$(python3 tools/st_reader.py $TMP/imp.safetensors.gz --config | jq -c '[.train.eps, .train.lr, .data.split, .data.train]')" = \
             '[1e-08,0.002,[0.9,0.05,0.05],"tests/data/tinyshakespeare.txt.gz"]'
    check "st_reader.py --config reads the JSON config of older checkpoints" \
        test "$(python3 tools/st_reader.py tests/fixtures/legacy/nano_json_last.safetensors.gz --config | jq -r .train.seed)" = 18446744073709551615
    check "st_reader.py on a bad file: exit 2" test "$(code python3 tools/st_reader.py $TMP/trunc.st)" -eq 2
    :
fi
# a quantized checkpoint exported and imported: still q8, the same loss
$TXL quantize $CKPT --type q8 -o $TMP/q8run.safetensors -q
$TXL export $TMP/q8run.safetensors -o $TMP/q8w.safetensors -q
check "import of exported q8 weights" $TXL import $TMP/q8w.safetensors -c $TMP/run/config.yaml -o $TMP/q8imp.safetensors -q
check "  ... a q8 checkpoint still" test "$($TXL info $TMP/q8imp.safetensors --json | jq -r .weights)" = q8
check "  ... with the quantized checkpoint's loss" test \
    "$($TXL eval $TMP/q8imp.safetensors --data $TMP/w.safetensors --max-tokens 2000 --json -q | jq .loss)" = \
    "$($TXL eval $TMP/q8run.safetensors --data $TMP/w.safetensors --max-tokens 2000 --json -q | jq .loss)"
if command -v python3 >/dev/null 2>&1; then
    # a quantized checkpoint through a reader that is not txl's: every I8 matrix with its
    # BF16 NAME_scale [out, in/32], q in [-127, 127], each weight of the original within
    # half a step of its block's q s, and the largest of each block at q = +-127; BF16
    # matrices within bf16's rounding (2^-8 relative)
    $TXL quantize $TMP/w.safetensors --type q8 -o $TMP/q8.safetensors -q
    check "st_reader.py reads a q8 checkpoint: I8 matrices, BF16 scales, the original within half a step" \
        python3 -c '
import sys
sys.path.insert(0, "tools")
import st_reader
q, _ = st_reader.load(sys.argv[1])
w, _ = st_reader.load(sys.argv[2])
n8 = 0
for name, (dt, shape, raw) in q.items():
    if name.endswith("_scale"):
        continue
    orig = st_reader.to_list(w[name])
    if dt == "I8":
        n8 += 1
        s = st_reader.to_list(q[name + "_scale"])
        assert q[name + "_scale"][0] == "BF16" and q[name + "_scale"][1] == [shape[0], shape[1] // 32]
        v = st_reader.to_list(q[name])
        for i, (x, o) in enumerate(zip(v, orig)):
            sc = s[i // 32]
            assert -127 <= x <= 127 and abs(x * sc - o) <= 0.5 * sc * (1 + 1e-6), (name, i)
        for b in range(len(s)):
            assert s[b] == 0 or max(abs(x) for x in v[32 * b:32 * b + 32]) == 127, (name, b)
    elif dt == "BF16":
        for x, o in zip(st_reader.to_list(q[name]), orig):
            assert abs(x - o) <= abs(o) * 2 ** -8, name
    else:
        assert dt == "F32" and st_reader.to_list(q[name]) == orig, name
assert n8 == 8, n8
' $TMP/q8.safetensors $TMP/w.safetensors
else
    echo "  SKIP tools/st_reader.py: no python3"
fi
finish
