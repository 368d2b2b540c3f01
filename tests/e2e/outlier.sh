#!/bin/sh
# train.skip_outlier: a step whose gradient norm exceeds skip_outlier x the running mean of
# the applied steps' norms is skipped (no update of the weights or the Adam moments), logged
# as a "skip" event and counted in the result; the running mean travels in the checkpoint,
# so a resumed run skips the same steps and matches an uninterrupted one bit for bit.
# (1.1 is a tight threshold, chosen so that ordinary noise trips it a few times.)
. tests/e2e/lib.sh
CFG=tests/configs/micro.yaml
OPTS="-q --set train.max_steps=150 --set train.skip_outlier=1.1 --set train.eval_interval=50 --set train.ckpt_interval=0"
$TXL train -c $CFG $OPTS --set train.out_dir=$TMP/a > $TMP/a.json 2>$TMP/a.err || bad "train: $(cat $TMP/a.err)"
n=$(grep -c '"event":"skip"' $TMP/a/log.jsonl)
check "some steps were skipped ($n)" test "$n" -gt 0
check "result counts them" test "$(jq .skipped_steps $TMP/a.json)" -eq "$n"
check "each skipped norm > 1.1 x the running mean" \
    jq -s -e 'map(select(.event == "skip")) | all(.grad_norm > 1.1 * .mean_norm)' $TMP/a/log.jsonl
check "none before 50 steps were applied" \
    jq -s -e 'map(select(.event == "skip")) | all(.step > 50)' $TMP/a/log.jsonl
check "every step still logs a train event (150)" \
    test "$(grep -c '"event":"train"' $TMP/a/log.jsonl)" -eq 150
k=$(jq -s 'map(select(.event == "skip")) | first | .step' $TMP/a/log.jsonl)

# the run again, stopped just before the first skipped step k, then one step, then to the end
$TXL train -c $CFG $OPTS --set train.out_dir=$TMP/b --steps $((k - 1)) >/dev/null 2>&1
cp $TMP/b/last.safetensors.gz $TMP/before.safetensors.gz
$TXL train -q --resume $TMP/b/last.safetensors.gz --steps 1 >/dev/null 2>&1
check "resumed run reached step $k" test "$($TXL info $TMP/b/last.safetensors.gz --json | jq .step)" -eq "$k"
if command -v python3 >/dev/null 2>&1; then
    check "skipped step $k changed no weight and no Adam moment" python3 - $TMP/before.safetensors.gz $TMP/b/last.safetensors.gz <<'PY'
import sys
sys.path.insert(0, "tools")
import st_reader
a, _ = st_reader.load(sys.argv[1])
b, _ = st_reader.load(sys.argv[2])
names = [n for n in a if not n.startswith("state.")]
assert names and set(names) <= set(b), "tensor names differ"
diff = [n for n in names if a[n][2] != b[n][2]]
sys.exit(1 if diff else 0)
PY
    check "  ...while the memory moved on" python3 - $TMP/before.safetensors.gz $TMP/b/last.safetensors.gz <<'PY'
import sys
sys.path.insert(0, "tools")
import st_reader
a, _ = st_reader.load(sys.argv[1])
b, _ = st_reader.load(sys.argv[2])
sys.exit(0 if a["state.mem.0"][2] != b["state.mem.0"][2] else 1)
PY
else
    echo "  skip weight comparison: no python3"
fi
$TXL train -q --resume $TMP/b/last.safetensors.gz > $TMP/b.json 2>&1
step_losses $TMP/a/log.jsonl > $TMP/la
step_losses $TMP/b/log.jsonl > $TMP/lb
check "interrupted twice around a skip == uninterrupted: identical step losses" cmp $TMP/la $TMP/lb
check "  ...and the same skips" test "$(grep '"event":"skip"' $TMP/a/log.jsonl)" = "$(grep '"event":"skip"' $TMP/b/log.jsonl)"

code() { "$@" >/dev/null 2>$TMP/err; echo $?; }
check "skip_outlier 0.5: exit 2" test "$(code $TXL train -c $CFG --set train.skip_outlier=0.5 --set train.out_dir=$TMP/c)" -eq 2
check "  ... says what it must be" grep -q "train.skip_outlier must be 0 (off) or > 1" $TMP/err
finish
