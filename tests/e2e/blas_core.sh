#!/bin/sh
# The OpenBLAS core: whichever kernels run, results stay equal (to float32 round-off: the
# kernels sum in different orders), and txl's own choice of core (the re-exec with
# OPENBLAS_CORETYPE when OpenBLAS falls back to a generic core) happens and is reported.
# TXL_TEST_BLAS_DETECTED makes txl believe OpenBLAS detected that core, so the re-exec runs
# here even on CPUs OpenBLAS recognises.
. tests/e2e/lib.sh
CK=tests/fixtures/eval/nano_xl.safetensors.gz
DATA=tests/data/enwik8_slice60k.txt.gz
ev() { "$@" $TXL eval $CK --data $DATA --max-tokens 20000 --json -q --threads 2 | jq .loss; }
base=$(ev env)
check "eval on the default core: a loss ($base)" test -n "$base"
has() { grep -qw "$1" /proc/cpuinfo; }
has_avx512() { has avx512f && has avx512bw && has avx512dq && has avx512vl; }
cores="Prescott"
has avx2 && cores="$cores Haswell"
has_avx512 && cores="$cores SkylakeX"
for c in $cores; do
    got=$(OPENBLAS_CORETYPE=$c $TXL info --system --json | jq -r .blas_core)
    check "OPENBLAS_CORETYPE=$c is respected (runs $got)" test "$got" = "$c"
    l=$(ev env OPENBLAS_CORETYPE=$c)
    check "eval on $c: loss $l == $base (rel 1e-6)" \
        awk -v a="$l" -v b="$base" 'BEGIN {d = (a - b) / b; if (d < 0) d = -d; exit !(a != "" && d < 1e-6)}'
done

if has avx2; then
    want=Haswell
    has_avx512 && want=SkylakeX
    got=$(TXL_TEST_BLAS_DETECTED=Prescott $TXL info --system --json)
    check "a generic core detected on an $want-capable CPU: txl re-executes on $want" \
        test "$(echo "$got" | jq -r .openblas_coretype_env)" = $want
    check "  ... and says so: $(echo "$got" | jq -r .blas_core)" \
        test "$(echo "$got" | jq -r .blas_core)" = "$want (chosen by txl; OpenBLAS detected Prescott)"
    TXL_TEST_BLAS_DETECTED=Prescott $TXL train -c tests/configs/micro.yaml --steps 2 \
        --set train.out_dir=$TMP/run -q >/dev/null 2>&1
    check "  ... in the training log too" \
        test "$(head -1 $TMP/run/log.jsonl | jq -r .blas_core)" = "$want (chosen by txl; OpenBLAS detected Prescott)"
    l=$(ev env TXL_TEST_BLAS_DETECTED=Prescott)
    check "  ... with the same loss ($l)" \
        awk -v a="$l" -v b="$base" 'BEGIN {d = (a - b) / b; if (d < 0) d = -d; exit !(a != "" && d < 1e-6)}'
    got=$(TXL_TEST_BLAS_DETECTED=Prescott OPENBLAS_CORETYPE=Haswell $TXL info --system --json | jq -r .blas_core)
    check "a user's own OPENBLAS_CORETYPE wins over txl's choice ($got)" test "$got" = Haswell
else
    echo "  skip re-exec checks: the CPU has no AVX2"
fi
finish
