#!/bin/sh
# Runs libFuzzer harnesses one after the other (make fuzz builds them first).
# Usage: FUZZ_SECONDS=300 tests/fuzz/run.sh [config] [checkpoint] [corpus] [vocab] [plotlog]
#
# Each harness starts from the committed corpus tests/fuzz/corpus/<name>/ and the crashers
# of tests/fuzz/regress/<name>/ and writes new inputs to build-fuzz/work/<name>/ (not
# committed); crashes land in build-fuzz/crashes/<name>/. Then:
#   - a crash: minimize it (build-fuzz/fuzz_<name> -minimize_crash=1 -runs=20000 FILE), copy
#     the result to tests/fuzz/regress/<name>/, fix, and `make test` replays it forever;
#   - FUZZ_MERGE=1: merge the work corpus into tests/fuzz/corpus/<name>/ (-merge=1 keeps
#     only inputs that add coverage; keep the directory small, a few hundred files).
# Harnesses run single-threaded (OMP_NUM_THREADS=1); FUZZ_JOBS is not supported on
# purpose: the machines are shared.
set -eu
cd "$(dirname "$0")/../.."
secs=${FUZZ_SECONDS:-300}
[ $# -gt 0 ] || set -- config checkpoint corpus vocab plotlog
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
# huge allocations fail (NULL) instead of aborting, so the out-of-memory paths are tested
export ASAN_OPTIONS=${ASAN_OPTIONS:-allocator_may_return_null=1}
for h in "$@"; do
    bin=build-fuzz/fuzz_$h
    [ -x "$bin" ] || { echo "run.sh: $bin missing (make fuzz-build)"; exit 2; }
    mkdir -p build-fuzz/work/$h build-fuzz/crashes/$h tests/fuzz/corpus/$h
    dict=
    [ -f tests/fuzz/$h.dict ] && dict=-dict=tests/fuzz/$h.dict
    regress=
    [ -d tests/fuzz/regress/$h ] && regress=tests/fuzz/regress/$h
    echo "== fuzz $h for ${secs}s"
    # shellcheck disable=SC2086
    $bin -max_total_time="$secs" -timeout=20 -rss_limit_mb=2560 -print_final_stats=1 \
        -artifact_prefix=build-fuzz/crashes/$h/ $dict \
        build-fuzz/work/$h tests/fuzz/corpus/$h $regress
    if [ "${FUZZ_MERGE:-0}" = 1 ]; then
        rm -rf build-fuzz/merged-$h
        mkdir -p build-fuzz/merged-$h
        $bin -merge=1 $dict build-fuzz/merged-$h tests/fuzz/corpus/$h build-fuzz/work/$h
        rm -rf tests/fuzz/corpus/$h
        mv build-fuzz/merged-$h tests/fuzz/corpus/$h
        echo "== $h: $(ls tests/fuzz/corpus/$h | wc -l) inputs, $(du -sk tests/fuzz/corpus/$h | cut -f1) KiB in tests/fuzz/corpus/$h"
    fi
done
