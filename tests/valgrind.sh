#!/bin/sh
# Memcheck over a tiny train / resume / eval / sample / info / export, and a few error paths:
# any invalid read or write, use of uninitialised memory, or definite / indirect leak fails.
# "Still reachable" and "possible" blocks (the OpenMP and OpenBLAS thread pools, libyaml's
# and zlib's static state) are not counted. Run by hand (not in CI: a few minutes):
#   tests/valgrind.sh            (uses build-portable/txl; TXL_BIN=path for another build)
# One thread everywhere, and no OpenBLAS re-exec (main.c's core check re-executes
# /proc/self/exe, which under valgrind would be valgrind itself).
set -u
cd "$(dirname "$0")/.."
# valgrind does not know AVX-512: the default build (-march=native) would stop on SIGILL, so
# memcheck runs a PORTABLE=1 build (build-portable/txl, made here when missing)
if [ -z "${TXL_BIN:-}" ]; then
    make -s PORTABLE=1 BIN=build-portable/txl build-portable/txl || exit 2
fi
TXL=${TXL_BIN:-build-portable/txl}
command -v valgrind >/dev/null || { echo "valgrind.sh: valgrind is not installed (apt-get install valgrind)"; exit 2; }
TMP=$(mktemp -d "${TMPDIR:-/tmp}/txl-vg.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 TXL_BLAS_DETECTED=valgrind
VG="valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite,indirect
    --show-leak-kinds=definite,indirect --track-origins=yes"
fails=0; n=0
run() { # run "description" EXPECTED_EXIT command...: under memcheck
    d=$1; want=$2; shift 2
    n=$((n + 1))
    # shellcheck disable=SC2086
    $VG --log-file=$TMP/vg.$n.log "$@" >$TMP/out.$n 2>$TMP/err.$n </dev/null
    rc=$?
    if [ $rc -eq "$want" ] && [ ! -s $TMP/vg.$n.log ]; then
        echo "  ok   $d (exit $rc, memcheck clean)"
    else
        echo "  FAIL $d: exit $rc (expected $want)"
        head -40 $TMP/vg.$n.log
        head -5 $TMP/err.$n
        fails=$((fails + 1))
    fi
}
TINY="-c tests/configs/micro.yaml --set model.n_layer=2 --set model.d_model=32
      --set model.n_head=2 --set model.d_head=16 --set model.d_inner=64 --set model.tgt_len=16
      --set model.mem_len=16 --set train.batch_size=4 --set train.max_steps=6
      --set train.warmup_steps=1 --set train.eval_interval=3 --set train.eval_tokens=1500
      --set train.ckpt_interval=2 --set train.threads=1 -q"
R=$TMP/run
# shellcheck disable=SC2086
run "train 3 steps (eval, best and last written)" 0 $TXL train $TINY --set train.out_dir=$R --steps 3
# shellcheck disable=SC2086
run "train --resume to step 6" 0 $TXL train $TINY --set train.out_dir=$R --resume $R/last.safetensors.gz
run "eval with a sweep" 0 $TXL eval $R/last.safetensors.gz --max-tokens 1500 --sweep 1,2 --threads 1 --json
run "eval --term-stats" 0 $TXL eval $R/last.safetensors.gz --max-tokens 1500 --term-stats 2 --threads 1
run "sample 30 bytes" 0 $TXL sample $R/last.safetensors.gz --prompt "ROMEO:" -n 30 --top-k 20 --top-p 0.9
run "info --json" 0 $TXL info $R/last.safetensors.gz --json
run "export (plain)" 0 $TXL export $R/best.safetensors.gz -o $TMP/w.safetensors
run "eval of the export" 0 $TXL eval $TMP/w.safetensors --data tests/configs/micro.yaml --threads 1
printf 'model: {n_layer: 2\n' > $TMP/bad.yaml
run "bad config (exit 2)" 2 $TXL train -c $TMP/bad.yaml
head -c 5000 $R/last.safetensors.gz > $TMP/trunc.safetensors.gz
run "truncated checkpoint (exit 2)" 2 $TXL eval $TMP/trunc.safetensors.gz
run "--resume with another model config (exit 2)" 2 $TXL train -c tests/configs/micro.yaml \
    --resume $R/last.safetensors.gz --set train.out_dir=$R -q
run "bad corpus (exit 2)" 2 $TXL eval $R/last.safetensors.gz --data $TMP/bad.yaml --batch 4096
{ cat $R/last.safetensors.gz; printf 'junk'; } > $TMP/junk.safetensors.gz
run "bytes after a checkpoint's gzip stream (exit 2)" 2 $TXL info $TMP/junk.safetensors.gz
gunzip -c tests/data/tinyshakespeare.txt.gz | head -c 3000 > $TMP/t.txt
{ head -c 1000 $TMP/t.txt | gzip; tail -c +1001 $TMP/t.txt | gzip; } > $TMP/two.txt.gz
run "eval of a corpus in two gzip members" 0 $TXL eval $R/last.safetensors.gz --data $TMP/two.txt.gz --threads 1
echo "valgrind.sh: $n runs, $fails failed"
[ $fails -eq 0 ]
