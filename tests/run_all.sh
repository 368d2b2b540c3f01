#!/bin/sh
# Runs every unit test binary in BUILD/tests, then every end-to-end script in tests/e2e/,
# printing each program's wall time.
# Usage: tests/run_all.sh BUILD_DIR   (TXL_BIN selects the binary, default ./txl;
# TXL_SKIP="a.sh b.sh" leaves those end-to-end scripts out)
build=${1:-build}
fail=0; n=0; t_all=$(date +%s)
run() {
    n=$((n+1))
    echo "== $*"
    t0=$(date +%s)
    if ! "$@"; then echo "FAILED: $*"; fail=$((fail+1)); fi
    echo "== $*: $(( $(date +%s) - t0 )) s"
}
for t in "$build"/tests/test_*; do
    [ -x "$t" ] || continue
    case "$t" in *.d|*.o) continue ;; esac
    run "$t"
done
for s in tests/e2e/*.sh; do
    [ -f "$s" ] || continue
    case "$s" in */lib.sh) continue ;; esac   # sourced by the others
    case " ${TXL_SKIP:-} " in *" $(basename "$s") "*) echo "== $s: skipped (TXL_SKIP)"; continue ;; esac
    run sh "$s"
done
echo "== $n test programs, $fail failed ($(( $(date +%s) - t_all )) s)"
[ "$fail" -eq 0 ]
