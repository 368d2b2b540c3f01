#!/bin/sh
# The loaded scenario of `make bench` (`make bench-loaded` alone): S training with one
# competing CPU-bound process that this script starts and stops (an awk loop), as when
# another job shares a 2-core machine. Each round measures txl's default (train.threads 0)
# idle, then, with the competitor running, the default and the explicit settings a user
# would try: threads 1, and all threads with OMP_WAIT_POLICY passive and active. It prints
# the medians over ROUNDS rounds and the two figures of the goal: the loaded default over
# the best explicit setting, and over the idle default.
# Environment: ROUNDS (default 3), LOADED_STEPS (timed steps per run, default 20), THREADS
# (default: all cores), OUT (default runs/bench), TXL_BIN.
set -eu
cd "$(dirname "$0")/.."
OUT=${OUT:-runs/bench}
TXL=${TXL_BIN:-./txl}
DATA=tests/data/tinyshakespeare.txt.gz
THREADS=${THREADS:-$(nproc)}
ROUNDS=${ROUNDS:-3}
STEPS=${LOADED_STEPS:-20}
. bench/lib.sh
command -v jq >/dev/null || { echo "bench: needs jq" >&2; exit 2; }
W="$OUT/loaded.d"
rm -rf "$W"
mkdir -p "$W"
emit() { echo "$1" >> "$OUT/bench.jsonl"; }
median() { sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

CP=""
stop_competitor() { [ -z "$CP" ] || kill "$CP" 2>/dev/null || true; CP=""; }
trap stop_competitor EXIT
trap 'stop_competitor; exit 130' INT TERM

# one SETTING THREADS [POLICY]: S's training tokens/s with that setting, kept in $W/SETTING
one() {
    v=$(
        [ -z "${3:-}" ] || export OMP_WAIT_POLICY="$3"
        # shellcheck disable=SC2086
        TRAIN_THREADS=$2 txl_train "$W/run" $S_SHAPE "$STEPS"
    )
    printf '%.0f\n' "$v" >> "$W/$1"
    printf ' %s %.0f' "$1" "$v"
}

CPU=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
echo "loaded: S training, 1 competing CPU-bound process, $(nproc) cores, $CPU, $ROUNDS rounds"
r=1
while [ $r -le "$ROUNDS" ]; do
    printf 'round %d (tok/s):' $r
    one idle 0
    awk 'BEGIN { while (1) x++ }' &
    CP=$!
    one default 0
    one threads=1 1
    one passive "$THREADS" passive
    one active "$THREADS" active
    stop_competitor
    echo
    r=$((r + 1))
done

for s in idle default threads=1 passive active; do
    eval "m_$(echo $s | tr -c 'a-z0-9\n' _)=$(median < "$W/$s")"
done
best=threads=1 bv=$m_threads_1
for s in passive active; do
    eval "v=\$m_$s"
    if awk -v a="$v" -v b="$bv" 'BEGIN {exit !(a > b)}'; then best=$s bv=$v; fi
done
xb=$(awk -v a="$m_default" -v b="$bv" 'BEGIN {printf "%.2f", a / b}')
pi=$(awk -v a="$m_default" -v b="$m_idle" 'BEGIN {printf "%.0f", 100 * a / b}')
echo "loaded S medians: idle default $m_idle; loaded: default $m_default, threads=1 $m_threads_1," \
     "all threads passive $m_passive, active $m_active tok/s"
echo "== loaded S: the default reaches ${xb}x the best explicit setting ($best, $bv tok/s)" \
     "and $pi% of its idle speed ($m_idle tok/s)"
emit "{\"what\":\"loaded\",\"config\":\"S\",\"rounds\":$ROUNDS,\"idle\":$m_idle,\"default\":$m_default,\"threads_1\":$m_threads_1,\"passive\":$m_passive,\"active\":$m_active,\"best_explicit\":\"$best\",\"default_over_best\":$xb,\"default_pct_of_idle\":$pi}"
