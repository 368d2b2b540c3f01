#!/bin/sh
# The length-extrapolation study, one command:
#   scripts/extrapolation.sh CORPUS [OUT_DIR]
# trains configs/tiny.yaml once per positional scheme (same data, steps and seed; only
# model.pos_scheme differs), evaluates each on the corpus's test split at 1x..16x the trained
# context in both sweep modes, and writes OUT_DIR/study.csv, study.md and study.svg/.png
# (bpc against evaluated context length, one line per scheme).
#
# Environment: STEPS (training steps per scheme, default 1800), SCHEMES (default
# "xl mlp rope alibi absolute none"), FACTORS (default 1,2,4,8), EVAL_BYTES (bytes of
# the test split to evaluate, default 100000), TXL (the binary, default ./txl).
set -eu
cd "$(dirname "$0")/.."
[ $# -ge 1 ] || { echo "usage: $0 CORPUS [OUT_DIR]" >&2; exit 2; }
CORPUS=$1
OUT=${2:-runs/study}
STEPS=${STEPS:-1800}
SCHEMES=${SCHEMES:-"xl mlp rope alibi absolute none"}
FACTORS=${FACTORS:-1,2,4,8}
EVAL_BYTES=${EVAL_BYTES:-100000}
TXL=${TXL:-./txl}
[ -f "$CORPUS" ] || { echo "$0: $CORPUS: no such file" >&2; exit 2; }
command -v jq >/dev/null || { echo "$0: needs jq (apt-get install jq)" >&2; exit 2; }
[ -x "$TXL" ] || make -s txl
mkdir -p "$OUT"
: > "$OUT/sweep.jsonl"
start=$(date +%s)
for s in $SCHEMES; do
    echo "== $s: training $STEPS steps ($(( $(date +%s) - start ))s elapsed)"
    $TXL train -c configs/tiny.yaml --force -q \
        --set model.pos_scheme=$s --set data.train="$CORPUS" --set data.split=[0.9,0.05,0.05] \
        --set train.max_steps=$STEPS --set train.warmup_steps=$(( STEPS / 10 )) \
        --set train.eval_interval=$STEPS --set train.ckpt_interval=0 \
        --set train.eval_tokens=$EVAL_BYTES --set train.out_dir="$OUT/$s" > "$OUT/$s.train.json"
    for mode in memory window; do
        echo "   $s: sweep $FACTORS ($mode)"
        $TXL eval "$OUT/$s/last.safetensors.gz" --split test --max-tokens $EVAL_BYTES \
            --sweep $FACTORS --sweep-mode $mode --json -q |
            jq -c --arg s $s '. + {scheme: $s, context: (.tgt_len + .mem_len)}' >> "$OUT/sweep.jsonl"
    done
done

# tables: bpc per scheme and factor, one block per sweep mode
{
    echo "scheme,sweep_mode,factor,tgt_len,mem_len,context,bpc,loss,tokens"
    jq -r '[.scheme, .sweep_mode, .factor, .tgt_len, .mem_len, .context, .bpc, .loss, .tokens] | @csv' "$OUT/sweep.jsonl"
} > "$OUT/study.csv"
{
    echo "Trained: configs/tiny.yaml (tgt_len 64, mem_len 64), $STEPS steps on $(basename "$CORPUS");"
    echo "evaluated on the first $EVAL_BYTES bytes of its test split. Test bpc (lower is better)."
    for mode in memory window; do
        echo
        if [ $mode = memory ]; then
            echo "**memory sweep** (tgt_len 64, mem_len 64 x factor: the context grows through the memory)"
        else
            echo "**window sweep** (mem_len 0, tgt_len 64 x factor: one long window, no memory)"
        fi
        echo
        printf "| scheme |"
        echo "$FACTORS" | tr ',' '\n' | while read -r f; do printf " %sx |" "$f"; done
        echo
        printf "|---|"
        echo "$FACTORS" | tr ',' '\n' | while read -r f; do printf -- "---:|"; done
        echo
        for s in $SCHEMES; do
            printf "| %s |" "$s"
            jq -r --arg s $s --arg m $mode 'select(.scheme == $s and .sweep_mode == $m) | .bpc' "$OUT/sweep.jsonl" |
                while read -r b; do printf " %.4f |" "$b"; done
            echo
        done
    done
} > "$OUT/study.md"

# plot: bpc against evaluated context (tgt_len + mem_len), one line per scheme and mode
if command -v gnuplot >/dev/null; then
    for s in $SCHEMES; do
        for mode in memory window; do
            jq -r --arg s $s --arg m $mode 'select(.scheme == $s and .sweep_mode == $m) | "\(.context) \(.bpc)"' \
                "$OUT/sweep.jsonl" > "$OUT/.plot.$s.$mode"
        done
    done
    plots=""
    i=1
    for s in $SCHEMES; do
        plots="$plots${plots:+, }'$OUT/.plot.$s.memory' using 1:2 with linespoints lc $i lw 2 pt 7 title '$s (memory)'"
        plots="$plots, '$OUT/.plot.$s.window' using 1:2 with linespoints lc $i lw 1 dt 2 pt 6 title '$s (window)'"
        i=$((i+1))
    done
    for term in "svg size 900,560 dynamic" "pngcairo size 900,560"; do
        ext=$(echo "$term" | cut -c1-3)
        gnuplot -e "set terminal $term; set output '$OUT/study.$ext';
            set title 'Length extrapolation: trained at tgt\_len 64 + mem\_len 64, evaluated at $FACTORS x';
            set xlabel 'evaluated context (tgt\\_len + mem\\_len, bytes)'; set ylabel 'test bpc';
            set logscale x 2; set key outside right; set grid; plot $plots" 2>/dev/null ||
            echo "gnuplot: could not write study.$ext" >&2
    done
    rm -f "$OUT"/.plot.*
else
    echo "(gnuplot not installed: no plot; apt-get install gnuplot-nox)" >&2
fi
echo "== done in $(( $(date +%s) - start ))s: $OUT/study.md, $OUT/study.csv, $OUT/study.svg"
cat "$OUT/study.md"
