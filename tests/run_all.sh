#!/bin/sh
# Runs the test programs in parallel: every unit test binary in BUILD/tests, then every
# end-to-end script in tests/e2e/ (schemes.sh once per positional scheme), JOBS at a time.
# Each program's output is printed whole when it ends (never interleaved), with its wall
# time; the summary lists the failures. The longest programs start first, by the times of
# the previous run (BUILD/test-times), so the jobs end close together.
#
# Usage: tests/run_all.sh BUILD_DIR [TIER]
#   TIER: all (default) or check (the unit tests and the fast end-to-end scripts of CHECK_E2E
#   below: the edit-compile-test loop).
#   TXL_BIN: the binary (default ./txl); TXL_SKIP="a.sh b.sh": leave those scripts out;
#   TXL_TEST_JOBS: how many at a time (default: the number of cores).
build=${1:-build}
tier=${2:-all}
jobs=${TXL_TEST_JOBS:-$(nproc 2>/dev/null || echo 2)}
# the check tier: scripts of a few seconds that cover the command line, config, checkpoints,
# bad input and the run directory (make check; the rest is in make test)
CHECK_E2E="anchors bad_config bad_corpus bad_flags bad_input cli_docs code_shape dry_run info
           interop legacy_checkpoint out_dir resume_place run_dir sample stdout summary vocab"
# Waiting threads sleep: with several programs at once on few cores, OpenMP's spinning
# threads would take the cores from the programs that have work (results do not change).
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}

out=$build/test-logs
rm -rf "$out"
mkdir -p "$out"
times=$build/test-times
t_all=$(date +%s)

# the list: one line per program, "name<TAB>command"
list=$out/list
: > "$list"
for t in "$build"/tests/test_*; do
    [ -x "$t" ] || continue
    case "$t" in *.d|*.o) continue ;; esac
    printf '%s\t%s\n' "$(basename "$t")" "$t" >> "$list"
done
skipped=
for s in tests/e2e/*.sh; do
    [ -f "$s" ] || continue
    b=$(basename "$s" .sh)
    case "$b" in lib) continue ;; esac   # sourced by the others
    case " ${TXL_SKIP:-} " in *" $b.sh "*) skipped="$skipped $b.sh"; continue ;; esac
    if [ "$tier" = check ]; then
        case " $(echo $CHECK_E2E) " in *" $b "*) ;; *) continue ;; esac
    fi
    if [ "$b" = schemes ]; then # one job per scheme of the registry
        for sc in $(${TXL_BIN:-./txl} __complete -- train --set model.pos_scheme= |
                    sed -n 's/^model\.pos_scheme=//p'); do
            printf '%s\t%s\n' "schemes.sh:$sc" "sh $s $sc" >> "$list"
        done
    else
        printf '%s\t%s\n' "$b.sh" "sh $s" >> "$list"
    fi
done
[ -n "$skipped" ] && echo "== skipped (TXL_SKIP):$skipped"

# longest first: the previous run's seconds (unknown programs count as long)
awk -F '\t' -v tf="$times" 'BEGIN {while ((getline l < tf) > 0) {split(l, a, " "); s[a[1]] = a[2]}}
    {print ((($1 in s) ? s[$1] : 1000)) "\t" $0}' "$list" | sort -t "$(printf '\t')" -k1,1nr |
    cut -f 2- > "$list.sorted"
n=$(wc -l < "$list.sorted")
echo "== $n test programs, $jobs at a time"

# one program: its output into a log, then printed whole (under a lock), its result kept
run_one() {
    name=$1; shift
    log=$out/$(echo "$name" | tr '/:' '__')
    t0=$(date +%s)
    sh -c "$*" > "$log.log" 2>&1
    rc=$?
    dt=$(( $(date +%s) - t0 ))
    echo "$name $dt" > "$log.time"
    echo $rc > "$log.rc"
    {
        flock 9
        echo "== $name"
        cat "$log.log"
        if [ $rc -eq 0 ]; then echo "== $name: ok, $dt s"; else echo "== $name: FAILED (exit $rc), $dt s"; fi
    } 9> "$out/.print-lock"
}
export out
tab=$(printf '\t')
while IFS="$tab" read -r name cmd; do
    printf '%s\0%s\0' "$name" "$cmd"
done < "$list.sorted" | xargs -0 -n 2 -P "$jobs" sh -c "$(sed -n '/^run_one() {/,/^}/p' "$0")"'
    run_one "$1" "$2"' run_one

fails=
for f in "$out"/*.rc; do
    [ "$(cat "$f")" -eq 0 ] || fails="$fails $(basename "$f" .rc)"
done
# the times of this run, for the order of the next
cat "$out"/*.time 2>/dev/null | sort > "$times.new" && mv "$times.new" "$times"
nf=$(echo $fails | wc -w)
echo "== $n test programs, $nf failed ($(( $(date +%s) - t_all )) s, $jobs at a time)"
[ "$nf" -eq 0 ] || { echo "== failed:$fails (logs in $out/)"; exit 1; }
