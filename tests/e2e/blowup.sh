#!/bin/sh
# A training blow-up never leaves a checkpoint with non-finite weights or Adam moments, and
# the message says truly which step `last` holds (or that none was written):
#  1. a good run resumed with lr 1e308 (no clipping, a checkpoint after every step): the first
#     update makes the weights infinite; `last` keeps the resumed step; the same without a
#     checkpoint at that step (the loss turns NaN a step later): the message names step 5,
#     not the step the loop had reached; and when that last is a plain file while the run
#     writes gzip'd ones, the message names the plain file;
#  2. a fresh run whose first update overflows float (lr 1e39): no `last` at all;
#  3. a fresh run with lr 1e30: the weights stay finite (about 1e30) after step 1, so `last`
#     holds step 1 and the loss turns NaN at step 2.
# Each: exit 1, every float of `last` finite, the message naming the step `last` holds.
#  4. a model too large for the address space (ulimit -v): exit 1, the message counts the
#     parameters it could not allocate (it once said 0: the count was read after clearing).
. tests/e2e/lib.sh
OPTS="-q -c tests/configs/micro.yaml --set train.eval_interval=0 --set train.warmup_steps=1
      --set train.max_steps=20 --set train.threads=1"
BLOW="--set train.clip=0 --set train.ckpt_interval=1"
step_of() { $TXL info "$1" --json 2>/dev/null | jq -r .step; }
# nonfinite CKPT: how many floats of the checkpoint (every tensor) are inf or NaN
nonfinite() {
    python3 -c 'import math, sys; sys.path.insert(0, "tools"); import st_reader
t, _ = st_reader.load(sys.argv[1])
print(sum(1 for k in t for x in st_reader.to_list(t[k]) if not math.isfinite(x)))' "$1"
}

echo "-- a good run resumed with lr 1e308"
# shellcheck disable=SC2086
$TXL train $OPTS --set train.out_dir=$TMP/a --steps 5 >/dev/null 2>&1 || bad "the good run"
cp -r $TMP/a $TMP/a2
# shellcheck disable=SC2086
$TXL train $OPTS $BLOW --set train.out_dir=$TMP/a --resume $TMP/a/last.safetensors.gz \
    --set train.lr=1e308 >/dev/null 2>$TMP/a.err
rc=$?
s=$(step_of $TMP/a/last.safetensors.gz)
check "exit 1 (got $rc): $(head -c 300 $TMP/a.err)" test $rc -eq 1
check "last still holds the resumed step 5 (step $s)" test "$s" = 5
check "...and every float in it is finite" test "$(nonfinite $TMP/a/last.safetensors.gz)" = 0
check "the message says last holds step 5" grep -q "a/last.safetensors.gz still holds step 5" $TMP/a.err
check "...and names the step and the tensor that overflowed" grep -q "step 6: .* of tensor '" $TMP/a.err

# shellcheck disable=SC2086
$TXL train $OPTS --set train.clip=0 --set train.out_dir=$TMP/a2 --resume $TMP/a2/last.safetensors.gz \
    --set train.lr=1e308 >/dev/null 2>$TMP/a2.err
rc=$?
check "no checkpoint due at the blow-up: exit 1 (got $rc): $(head -c 300 $TMP/a2.err)" test $rc -eq 1
check "...the message says last holds step 5" grep -q "a2/last.safetensors.gz still holds step 5" $TMP/a2.err

# the run resumed from a plain last (ckpt_gzip false) and writes gzip'd ones: the message names
# the file that holds step 5, not a .gz this run never wrote
# shellcheck disable=SC2086
$TXL train $OPTS --set train.out_dir=$TMP/p --set train.ckpt_gzip=false --steps 5 >/dev/null 2>&1 || bad "the plain run"
# shellcheck disable=SC2086
$TXL train $OPTS --set train.clip=0 --set train.out_dir=$TMP/p --resume $TMP/p/last.safetensors \
    --set train.lr=1e308 >/dev/null 2>$TMP/p.err
rc=$?
check "resumed from a plain last, writing .gz: exit 1 (got $rc)" test $rc -eq 1
check "...the message says the plain last holds step 5: $(head -c 300 $TMP/p.err)" \
    grep -q "p/last.safetensors still holds step 5" $TMP/p.err

echo "-- a fresh run whose first update overflows (lr 1e39)"
# shellcheck disable=SC2086
$TXL train $OPTS $BLOW --set train.out_dir=$TMP/b --set train.lr=1e39 >/dev/null 2>$TMP/b.err
rc=$?
check "exit 1 (got $rc): $(head -c 300 $TMP/b.err)" test $rc -eq 1
check "no last was written" test ! -e $TMP/b/last.safetensors.gz
check "...and the message says so" grep -q "no checkpoint was written" $TMP/b.err

echo "-- a fresh run with lr 1e30"
# shellcheck disable=SC2086
$TXL train $OPTS $BLOW --set train.out_dir=$TMP/c --set train.lr=1e30 >/dev/null 2>$TMP/c.err
rc=$?
s=$(step_of $TMP/c/last.safetensors.gz)
check "exit 1 (got $rc): $(head -c 300 $TMP/c.err)" test $rc -eq 1
check "every float in last (step $s) is finite" test "$(nonfinite $TMP/c/last.safetensors.gz)" = 0
check "the message names the step last holds ($s)" grep -q "c/last.safetensors.gz still holds step $s\." $TMP/c.err

case $TXL in
*asan*) ok "skip the out-of-memory run under ASan (it reserves address space)" ;;
*)
    (ulimit -v 600000
     exec $TXL train -c tests/configs/micro.yaml --set model.d_model=4096 --set model.n_head=64 \
        --set model.d_head=64 --set model.n_layer=12 --set model.d_inner=16384 \
        --set train.out_dir=$TMP/oom) > /dev/null 2> $TMP/oom.err
    rc=$?
    check "out of memory: exit 1 (got $rc)" test $rc -eq 1
    check "out of memory: the message counts the parameters: $(cat $TMP/oom.err)" \
        grep -q "out of memory allocating [1-9][0-9]* parameters" $TMP/oom.err
    ;;
esac
finish
