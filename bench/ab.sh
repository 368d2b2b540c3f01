#!/bin/sh
# ab.sh: two txl binaries (or two settings of one) side by side on S and M, alternating:
# each round trains (S_STEPS / M_STEPS timed steps) and evaluates (24 segments) with A, then
# with B, then B before A in the next round; prints each round and the medians of the B/A
# ratios with their ranges. The machine is shared: only the ratios mean anything.
# usage: A="txl-binary [--set k=v ...]" B="..." [ROUNDS=3] [CONFIGS="S M"] bench/ab.sh
# (A and B are word-split: a binary, then extra `txl train` arguments; EVAL_A / EVAL_B add
# `txl eval` arguments.) CPU=1: tokens per CPU second of the process (the train events' and
# eval's cpu_s) instead of per wall second: with THREADS=1, what a busy machine's time
# slices leave out (with more threads, libgomp's spinning counts as CPU time).
set -eu
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-3}
CONFIGS=${CONFIGS:-S M}
S_STEPS=${S_STEPS:-12}
M_STEPS=${M_STEPS:-4}
THREADS=${THREADS:-$(nproc)}
OUT=${OUT:-runs/ab}
DATA=tests/data/tinyshakespeare.txt.gz
mkdir -p "$OUT"
. bench/lib.sh

median() { tr ' ' '\n' | grep . | sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
range() { tr ' ' '\n' | grep . | sort -g | awk 'NR == 1 {lo = $1} {hi = $1} END {print lo "-" hi}'; }

one() { # side cfg -> "train_tok_s eval_tok_s"
    side=$1 cfg=$2
    eval "spec=\$$side"
    eval "ev=\${EVAL_$side:-}"
    # shellcheck disable=SC2086
    set -- $spec
    TXL=$1
    shift
    extra="$*"
    shape=$([ "$cfg" = S ] && echo "$S_SHAPE $S_STEPS" || echo "$M_SHAPE $M_STEPS")
    dir="$OUT/$cfg.$side"
    # shellcheck disable=SC2086
    tt=$(EXTRA_TRAIN="$extra" txl_train "$dir" $shape)
    if [ "${CPU:-0}" = 1 ]; then
        tt=$(jq -s '[.[] | select(.event == "train" and .step >= 2)] | ((.[-1].tokens - .[0].tokens) / (.[-1].cpu_s - .[0].cpu_s))' "$dir/log.jsonl")
    fi
    B=$(echo "$shape" | cut -d' ' -f8) Lq=$(echo "$shape" | cut -d' ' -f6)
    # shellcheck disable=SC2086
    te=$($TXL eval "$dir/last.safetensors.gz" --split train --max-tokens $((B * Lq * 24)) \
        --json -q --threads "$THREADS" $ev | jq "if ${CPU:-0} == 1 then .tok_per_s * .seconds / .cpu_s else .tok_per_s end")
    echo "$tt $te"
}

for cfg in $CONFIGS; do
    rt="" re=""
    r=1
    while [ "$r" -le "$ROUNDS" ]; do
        if [ $((r % 2)) = 1 ]; then a=$(one A "$cfg"); b=$(one B "$cfg")
        else b=$(one B "$cfg"); a=$(one A "$cfg"); fi
        x=$(echo "$a $b" | awk '{printf "%.3f %.3f", $3 / $1, $4 / $2}')
        echo "$cfg round $r: train A $(echo "$a" | cut -d' ' -f1 | xargs printf %.0f) B $(echo "$b" | cut -d' ' -f1 | xargs printf %.0f) tok/s (B/A $(echo "$x" | cut -d' ' -f1)); eval A $(echo "$a" | cut -d' ' -f2 | xargs printf %.0f) B $(echo "$b" | cut -d' ' -f2 | xargs printf %.0f) (B/A $(echo "$x" | cut -d' ' -f2))"
        rt="$rt $(echo "$x" | cut -d' ' -f1)" re="$re $(echo "$x" | cut -d' ' -f2)"
        r=$((r + 1))
    done
    echo "== $cfg: B/A median of $ROUNDS rounds: train $(echo "$rt" | median) ($(echo "$rt" | range)), eval $(echo "$re" | median) ($(echo "$re" | range))"
done
