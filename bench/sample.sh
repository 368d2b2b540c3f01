#!/bin/sh
# bench/sample.sh (make bench, make bench-sample): `txl sample` with the memory full, on the
# S and M configs of make bench. A sample of mem_len*2+200 bytes from a 3-byte prompt: the
# rate counts only the tokens drawn once the memory held mem_len rows (sample --stats,
# full_tok_per_s), summed over the streams of --num-samples; one thread.
#
# Cells: S at each mem_len of S_MEMS (one stream), S with N streams for each N of S_NS at
# each mem_len of S_NS_MEMS (the total over the streams, and its ratio to N = 1), M at its
# trained mem_len. The roof of one-token decoding is reading the weights once per token:
# mem_bw measures one thread's read bandwidth from a buffer the size of the weights (the
# same working set: cache-resident when it fits) and from 1 GiB (DRAM), and the bound is
# bandwidth / weight bytes, in tokens/s.
#
# The machine is shared and noisy: REPS rounds (default 3) of every cell, medians. With
# TXL_BASE=/path/to/old/txl each cell runs the old and the new binary back to back (order
# swapped every round) and prints the median of the per-round ratios new/old.
# Environment: S_CKPT, M_CKPT (checkpoints; default: 2-step runs trained here), CONFIGS
# (default "S M"), S_MEMS, S_NS, S_NS_MEMS, REPS, OUT (default runs/bench; results are
# appended to OUT/bench.jsonl), TXL_BIN, TXL_BASE, BUILD.
set -eu
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
OUT=${OUT:-runs/bench}
TXL=${TXL_BIN:-./txl}
BASE=${TXL_BASE:-}
REPS=${REPS:-3}
CONFIGS=${CONFIGS:-S M}
S_MEMS=${S_MEMS:-128 256 512 1024}
S_NS=${S_NS:-1 8 32}
S_NS_MEMS=${S_NS_MEMS:-128 512}
DATA=tests/data/tinyshakespeare.txt.gz
command -v jq >/dev/null || { echo "bench: needs jq" >&2; exit 2; }
mkdir -p "$OUT"
W="$OUT/sample.d"
rm -rf "$W"
mkdir -p "$W"
emit() { echo "$1" >> "$OUT/bench.jsonl"; }
median() { tr ' ' '\n' | grep . | sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

ckpt() { # name N d H di Lq: a 2-step run (sampling speed does not depend on the weights)
    d="$OUT/sample-$1"
    $TXL train -q --force -c configs/tiny.yaml --set data.train=$DATA --set model.n_layer=$2 \
        --set model.d_model=$3 --set model.n_head=$4 --set model.d_head=64 \
        --set model.d_inner=$5 --set model.tgt_len=$6 --set model.mem_len=$6 \
        --set train.batch_size=2 --set train.max_steps=2 --set train.warmup_steps=0 \
        --set train.eval_interval=0 --set train.ckpt_interval=0 --set train.out_dir="$d" \
        > "$d.json" 2> "$d.err" || { cat "$d.err" >&2; exit 1; }
    echo "$d/last.safetensors.gz"
}

# sample BIN CKPT MEM N: tokens/s over the streams with the memory full
sample() {
    "$1" sample "$2" --prompt "The" -n $(($3 * 2 + 200)) --mem-len "$3" --num-samples "$4" \
        --seed 1 --stats --threads 1 -q 2> "$W/err" > /dev/null || { cat "$W/err" >&2; exit 1; }
    grep '^{' "$W/err" | tail -1 | jq -e .full_tok_per_s || {
        echo "bench: $1 reports no full_tok_per_s (a txl older than sample --stats's" \
             "full-memory rate, or the memory never filled)" >&2; exit 1; }
}

# cell NAME CKPT MEM N: one round of a cell (base and new back to back when TXL_BASE is set)
cell() {
    if [ -n "$BASE" ] && [ $((r % 2)) -eq 1 ]; then
        b=$(sample "$BASE" "$2" "$3" "$4"); n=$(sample "$TXL" "$2" "$3" "$4")
    elif [ -n "$BASE" ]; then
        n=$(sample "$TXL" "$2" "$3" "$4"); b=$(sample "$BASE" "$2" "$3" "$4")
    else
        n=$(sample "$TXL" "$2" "$3" "$4") b=""
    fi
    echo "$n" >> "$W/$1.new"
    if [ -n "$b" ]; then
        echo "$b" >> "$W/$1.base"
        awk -v a="$n" -v b="$b" 'BEGIN {printf "%.4f\n", a / b}' >> "$W/$1.x"
    fi
}

bw() { # MB: one thread's read bandwidth, GB/s
    $BUILD/bench/mem_bw "$1" | jq '.reads[0].gb_per_s'
}

med() { median < "$W/$1"; }

S_CKPT=${S_CKPT:-}
M_CKPT=${M_CKPT:-}
cells=""
for cfg in $CONFIGS; do
    case $cfg in
    S)
        [ -n "$S_CKPT" ] || S_CKPT=$(ckpt S 4 256 4 1024 128)
        for m in $S_MEMS; do cells="$cells S:$m:1"; done
        for m in $S_NS_MEMS; do
            for n in $S_NS; do
                case " $cells " in *" S:$m:$n "*) ;; *) cells="$cells S:$m:$n" ;; esac
            done
        done ;;
    M)
        [ -n "$M_CKPT" ] || M_CKPT=$(ckpt M 8 512 8 2048 256)
        cells="$cells M:$($TXL info "$M_CKPT" --json | jq .config.model.mem_len):1" ;;
    *) echo "bench: unknown config '$cfg' in CONFIGS (S, M)" >&2; exit 2 ;;
    esac
done
CORE=$($TXL info --system | sed -n 's/^OpenBLAS core: \([^ ]*\).*/\1/p')
CPU=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
echo "sample, memory full, 1 thread, $CPU, OpenBLAS core $CORE, $REPS rounds${BASE:+, against $BASE}"

r=1
while [ $r -le "$REPS" ]; do
    for c in $cells; do
        cfg=${c%%:*} rest=${c#*:}
        m=${rest%%:*} n=${rest#*:}
        eval "ck=\$${cfg}_CKPT"
        # the roof of the config, measured next to its one-stream cells
        if [ "$n" = 1 ] && [ ! -f "$W/$cfg.wmb" ]; then
            p=$($TXL info "$ck" --json | jq .params)
            awk -v p="$p" 'BEGIN {printf "%.1f\n", p * 4 / 1048576}' > "$W/$cfg.wmb"
            echo "$p" > "$W/$cfg.params"
        fi
        if [ "$n" = 1 ] && [ "$m" = "$(echo $S_MEMS | cut -d' ' -f1)" ] || [ "$cfg" = M ]; then
            bw "$(cat "$W/$cfg.wmb")" >> "$W/$cfg.bw"
            bw 1024 >> "$W/$cfg.dram"
        fi
        cell "$cfg.$m.$n" "$ck" "$m" "$n"
    done
    r=$((r + 1))
done

for c in $cells; do
    cfg=${c%%:*} rest=${c#*:}
    m=${rest%%:*} n=${rest#*:}
    k="$cfg.$m.$n"
    t=$(med "$k.new")
    line="$cfg sample mem_len $m, $n stream$([ "$n" = 1 ] || echo s): $(printf %.0f "$t") tok/s"
    j="{\"what\":\"sample\",\"config\":\"$cfg\",\"mem_len\":$m,\"samples\":$n,\"tok_per_s\":$t,\"reps\":$REPS"
    if [ "$n" != 1 ] && [ -f "$W/$cfg.$m.1.new" ]; then
        x1=$(awk -v a="$t" -v b="$(med "$cfg.$m.1.new")" 'BEGIN {printf "%.2f", a / b}')
        line="$line (${x1}x one stream)"
        j="$j,\"vs_one_stream\":$x1"
    fi
    if [ -f "$W/$k.base" ]; then
        bt=$(med "$k.base") x=$(med "$k.x")
        lo=$(sort -g "$W/$k.x" | head -1) hi=$(sort -g "$W/$k.x" | tail -1)
        line="$line; old $(printf %.0f "$bt") tok/s; new/old ${x}x (range $lo-$hi)"
        j="$j,\"base_tok_per_s\":$bt,\"vs_base\":$x,\"vs_base_min\":$lo,\"vs_base_max\":$hi"
    fi
    if [ -f "$W/$cfg.bw" ] && [ "$n" = 1 ]; then
        wmb=$(cat "$W/$cfg.wmb") bwm=$(med "$cfg.bw") dram=$(med "$cfg.dram")
        bound=$(awk -v b="$bwm" -v w="$wmb" 'BEGIN {printf "%.0f", b * 1e9 / (w * 1048576)}')
        dbound=$(awk -v b="$dram" -v w="$wmb" 'BEGIN {printf "%.0f", b * 1e9 / (w * 1048576)}')
        pct=$(awk -v t="$t" -v b="$bound" 'BEGIN {printf "%.0f", 100 * t / b}')
        line="$line; $pct% of the weight-read bound $bound tok/s ($wmb MB at $bwm GB/s; DRAM $dram GB/s: $dbound tok/s)"
        j="$j,\"weight_mb\":$wmb,\"read_gb_per_s\":$bwm,\"dram_gb_per_s\":$dram,\"bound_tok_per_s\":$bound,\"dram_bound_tok_per_s\":$dbound,\"pct_of_bound\":$pct"
    fi
    echo "$line"
    emit "$j,\"core\":\"$CORE\"}"
done
