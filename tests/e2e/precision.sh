#!/bin/sh
# train.precision and --precision (doc/design.md, "Precision"): fp32 is the default and
# recorded; bf16 (where the CPU has AMX-BF16 or AVX512_BF16) trains to the fp32 losses
# within bf16's roundings, deterministically, resumes bit for bit, records "bf16" in the
# checkpoint, and a resume may change it; auto says which it took; a bf16 eval of an fp32
# checkpoint is within 0.5% of the fp32 eval. Without bf16 (DNNL_MAX_CPU_ISA=AVX2 caps it
# here the way an AVX2 CPU lacks it), bf16 exits 2 naming the missing feature and writes
# nothing, and auto takes fp32.
. tests/e2e/lib.sh
CFG=tests/configs/micro.yaml
OPTS="-q --set train.max_steps=30 --set train.eval_interval=0"
meta() { # ckpt key: a metadata value of the checkpoint's header
    /usr/bin/python3 - "$1" "$2" <<'PY'
import gzip, json, struct, sys
f = gzip.open(sys.argv[1]) if sys.argv[1].endswith(".gz") else open(sys.argv[1], "rb")
n = struct.unpack("<Q", f.read(8))[0]
print(json.loads(f.read(n))["__metadata__"].get(sys.argv[2], "(absent)"))
PY
}
last_loss() { jq -r 'select(.event=="train") | .step_loss' "$1" | tail -1; }

$TXL train -c $CFG $OPTS --set train.out_dir=$TMP/f >/dev/null 2>$TMP/f.err || bad "fp32 run: $(cat $TMP/f.err)"
check "fp32 is the default, in the start event" test "$(jq -r 'select(.event=="start") | .precision' $TMP/f/log.jsonl)" = fp32
check "...and in the checkpoint's metadata" test "$(meta $TMP/f/last.safetensors.gz precision)" = fp32

# no bf16 on this "CPU": bf16 exits 2 and names what is missing, before writing anything
DNNL_MAX_CPU_ISA=AVX2 $TXL train -c $CFG $OPTS --set train.precision=bf16 --set train.out_dir=$TMP/n >/dev/null 2>$TMP/n.err
rc=$?
check "bf16 without AMX-BF16 or AVX512_BF16: exit 2 (got $rc)" test $rc -eq 2
check "...naming the missing CPU feature" grep -q "train.precision: bf16 needs AMX-BF16 or AVX512_BF16" $TMP/n.err
check "...and writing nothing" test ! -e $TMP/n
DNNL_MAX_CPU_ISA=AVX2 $TXL eval $TMP/f/last.safetensors.gz --precision bf16 --max-tokens 2000 >/dev/null 2>$TMP/ne.err
rc=$?
check "eval --precision bf16 without it: exit 2 (got $rc)" test $rc -eq 2
check "...naming the missing CPU feature" grep -q "bf16 needs AMX-BF16 or AVX512_BF16" $TMP/ne.err
DNNL_MAX_CPU_ISA=AVX2 $TXL eval $TMP/f/last.safetensors.gz --precision auto --max-tokens 2000 >/dev/null 2>$TMP/na.err
check "eval --precision auto without it takes fp32 and says so" grep -q "precision auto: fp32" $TMP/na.err
$TXL eval $TMP/f/last.safetensors.gz --precision fast >/dev/null 2>&1
check "an unknown --precision exits 2" test $? -eq 2

kernel=$($TXL eval $TMP/f/last.safetensors.gz --precision auto --max-tokens 2000 --json 2>&1 >/dev/null | sed -n 's/.*precision auto: //p')
case "$kernel" in
bf16*)
    $TXL train -c $CFG $OPTS --set train.precision=bf16 --set train.out_dir=$TMP/b >/dev/null 2>$TMP/b.err || bad "bf16 run: $(cat $TMP/b.err)"
    check "bf16: the start event says bf16 and its kernel ($kernel)" test "$(jq -r 'select(.event=="start") | "\(.precision) (\(.precision_kernel))"' $TMP/b/log.jsonl)" = "$kernel"
    check "...the checkpoint records bf16" test "$(meta $TMP/b/last.safetensors.gz precision)" = bf16
    fl=$(last_loss $TMP/f/log.jsonl) bl=$(last_loss $TMP/b/log.jsonl)
    check "...step 30's loss within 1% of fp32's ($bl, $fl)" awk -v a="$bl" -v b="$fl" 'BEGIN { d = a - b; exit !(d < 0.01 * b && -d < 0.01 * b) }'
    check "...and not the fp32 path (the losses differ)" test "$bl" != "$fl"
    $TXL train -c $CFG $OPTS --set train.precision=bf16 --set train.out_dir=$TMP/b2 >/dev/null 2>&1
    step_losses $TMP/b/log.jsonl > $TMP/b.l
    step_losses $TMP/b2/log.jsonl > $TMP/b2.l
    check "bf16 is deterministic: a second run's 30 losses are identical" cmp -s $TMP/b.l $TMP/b2.l
    $TXL train -c $CFG $OPTS --set train.precision=bf16 --set train.out_dir=$TMP/r --steps 12 >/dev/null 2>&1
    $TXL train -q --resume $TMP/r/last.safetensors.gz >/dev/null 2>$TMP/r.err || bad "bf16 resume: $(cat $TMP/r.err)"
    step_losses $TMP/r/log.jsonl > $TMP/r.l
    check "bf16 resume == uninterrupted, bit for bit" cmp -s $TMP/b.l $TMP/r.l
    $TXL train -c $CFG $OPTS --set train.out_dir=$TMP/c --steps 12 >/dev/null 2>&1
    $TXL train -q --resume $TMP/c/last.safetensors.gz --set train.precision=bf16 >/dev/null 2>$TMP/c.err || bad "resume fp32 -> bf16: $(cat $TMP/c.err)"
    check "a resume may change the precision: fp32 to bf16, recorded" test "$(meta $TMP/c/last.safetensors.gz precision)" = bf16
    $TXL train -c $CFG $OPTS --set train.precision=auto --set train.out_dir=$TMP/a >/dev/null 2>&1
    check "auto takes bf16 here, recorded" test "$(meta $TMP/a/last.safetensors.gz precision)" = bf16
    e32=$($TXL eval $TMP/f/last.safetensors.gz --split valid --json -q | jq .bpc)
    e16=$($TXL eval $TMP/f/last.safetensors.gz --split valid --json -q --precision bf16 | jq .bpc)
    check "a bf16 eval of the fp32 checkpoint: within 0.5% ($e16 vs $e32)" awk -v a="$e16" -v b="$e32" 'BEGIN { d = a - b; exit !(d < 0.005 * b && -d < 0.005 * b) }'
    ;;
*) echo "  skip bf16 runs: this CPU has no bf16 ($kernel)" ;;
esac
finish
