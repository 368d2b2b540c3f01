#!/bin/sh
# Runs every unit test binary in BUILD/tests, then every end-to-end script in tests/e2e/.
# Usage: tests/run_all.sh BUILD_DIR   (TXL_BIN selects the binary, default ./txl;
# TXL_SKIP="a.sh b.sh" leaves those end-to-end scripts out)
build=${1:-build}
fail=0; n=0
for t in "$build"/tests/test_*; do
    [ -x "$t" ] || continue
    case "$t" in *.d|*.o) continue ;; esac
    n=$((n+1))
    echo "== $t"
    if ! "$t"; then echo "FAILED: $t"; fail=$((fail+1)); fi
done
for s in tests/e2e/*.sh; do
    [ -f "$s" ] || continue
    case " ${TXL_SKIP:-} " in *" $(basename "$s") "*) echo "== $s: skipped (TXL_SKIP)"; continue ;; esac
    n=$((n+1))
    echo "== $s"
    if ! sh "$s"; then echo "FAILED: $s"; fail=$((fail+1)); fi
done
echo "== $n test programs, $fail failed"
[ "$fail" -eq 0 ]
