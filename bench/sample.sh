#!/bin/sh
# bench/sample.sh (make bench, make bench-sample): `txl sample` with the memory full, on the
# S and M configs of make bench. A sample of mem_len*2+200 bytes from a 3-byte prompt: the
# rates count only the tokens drawn once the memory held mem_len rows (sample --stats
# full_tok_per_s per wall second, full_tok_per_cpu_s per CPU second), summed over the
# streams of --num-samples, decoded as txl groups them by default (--batch 0: the line says
# how many at a time); one thread.
#
# Cells: S at each mem_len of S_MEMS (one stream), S with N streams for each N of S_NS at
# each mem_len of S_NS_MEMS (the total over the streams, and its ratio to N = 1), M at its
# trained mem_len. The roof of one-token decoding is reading the weights once per token:
# mem_bw measures one thread's read bandwidth from a buffer the size of the weights (the
# same working set: cache-resident when it fits) and from 1 GiB (DRAM), and the bound is
# bandwidth / weight bytes, in tokens/s (per wall and per CPU second, like the rates).
#
# The machine may be shared: a process then waits for a core at random, and wall-clock
# rates swing by 2x from one minute to the next; CPU-second rates hold steady. REPS rounds
# (default 3) of every cell, medians. With TXL_BASE=/path/to/old/txl each cell runs the old
# and the new binary back to back (order swapped every round) and prints the median of the
# per-round ratios new/old (the old binary needs sample --stats's full_tok_per_cpu_s).
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
med() { median < "$W/$1"; }
range() { echo "$(sort -g "$W/$1" | head -1)-$(sort -g "$W/$1" | tail -1)"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.3f\n", a / b}'; }

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

# sample BIN CKPT MEM N: "wall cpu" tokens/s over the streams with the memory full
sample() {
    "$1" sample "$2" --prompt "The" -n $(($3 * 2 + 200)) --mem-len "$3" --num-samples "$4" \
        --seed 1 --stats --threads 1 -q 2> "$W/err" > /dev/null || { cat "$W/err" >&2; exit 1; }
    grep '^{' "$W/err" | tail -1 | jq -r '.batch // "?"' > "$W/last_batch"
    grep '^{' "$W/err" | tail -1 | jq -e -r '"\(.full_tok_per_s) \(.full_tok_per_cpu_s)"' \
        | grep -v null || {
        echo "bench: $1 reports no full_tok_per_s / full_tok_per_cpu_s (a txl older than" \
             "sample --stats's full-memory rates, or the memory never filled)" >&2; exit 1; }
}

# cell KEY CKPT MEM N: one round of a cell (base and new back to back when TXL_BASE is set)
cell() {
    b=""
    if [ -n "$BASE" ] && [ $((r % 2)) -eq 1 ]; then
        b=$(sample "$BASE" "$2" "$3" "$4"); n=$(sample "$TXL" "$2" "$3" "$4")
        cp "$W/last_batch" "$W/$1.batch"
    elif [ -n "$BASE" ]; then
        n=$(sample "$TXL" "$2" "$3" "$4"); cp "$W/last_batch" "$W/$1.batch"
        b=$(sample "$BASE" "$2" "$3" "$4")
    else
        n=$(sample "$TXL" "$2" "$3" "$4"); cp "$W/last_batch" "$W/$1.batch"
    fi
    echo "${n% *}" >> "$W/$1.new"
    echo "${n#* }" >> "$W/$1.newc"
    if [ -n "$b" ]; then
        echo "${b% *}" >> "$W/$1.base"
        echo "${b#* }" >> "$W/$1.basec"
        ratio "${n% *}" "${b% *}" >> "$W/$1.x"
        ratio "${n#* }" "${b#* }" >> "$W/$1.xc"
    fi
}

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
        if [ ! -f "$W/$cfg.wmb" ]; then
            p=$($TXL info "$ck" --json | jq .params)
            awk -v p="$p" 'BEGIN {printf "%.1f\n", p * 4 / 1048576}' > "$W/$cfg.wmb"
        fi
        # the roof of the config, measured next to its first cell of the round
        if [ ! -f "$W/$cfg.round" ] || [ "$(cat "$W/$cfg.round")" != $r ]; then
            echo $r > "$W/$cfg.round"
            j=$($BUILD/bench/mem_bw "$(cat "$W/$cfg.wmb")" 1024)
            echo "$j" | jq '.reads[0].gb_per_s' >> "$W/$cfg.bw"
            echo "$j" | jq '.reads[0].gb_per_cpu_s' >> "$W/$cfg.bwc"
            echo "$j" | jq '.reads[1].gb_per_s' >> "$W/$cfg.dram"
            echo "$j" | jq '.reads[1].gb_per_cpu_s' >> "$W/$cfg.dramc"
        fi
        cell "$cfg.$m.$n" "$ck" "$m" "$n"
    done
    r=$((r + 1))
done

bound() { awk -v b="$1" -v w="$2" 'BEGIN {printf "%.0f", b * 1e9 / (w * 1048576)}'; }
for cfg in $CONFIGS; do
    wmb=$(cat "$W/$cfg.wmb")
    bw=$(med "$cfg.bw") bwc=$(med "$cfg.bwc") dr=$(med "$cfg.dram") drc=$(med "$cfg.dramc")
    echo "$cfg roof: weights $wmb MB; read bandwidth (1 thread) $bw GB/s wall, $bwc GB/s CPU" \
         "-> $(bound "$bw" "$wmb") / $(bound "$bwc" "$wmb") tok/s; DRAM $dr / $drc GB/s" \
         "-> $(bound "$dr" "$wmb") / $(bound "$drc" "$wmb") tok/s"
    emit "{\"what\":\"sample_roof\",\"config\":\"$cfg\",\"weight_mb\":$wmb,\"read_gb_per_s\":$bw,\"read_gb_per_cpu_s\":$bwc,\"dram_gb_per_s\":$dr,\"dram_gb_per_cpu_s\":$drc,\"bound_tok_per_s\":$(bound "$bw" "$wmb"),\"bound_tok_per_cpu_s\":$(bound "$bwc" "$wmb"),\"reps\":$REPS}"
done
for c in $cells; do
    cfg=${c%%:*} rest=${c#*:}
    m=${rest%%:*} n=${rest#*:}
    k="$cfg.$m.$n"
    t=$(med "$k.new") tc=$(med "$k.newc")
    line="$cfg mem_len $m, $n stream$([ "$n" = 1 ] || echo s): $(printf %.0f "$t") tok/s wall, $(printf %.0f "$tc") CPU"
    j="{\"what\":\"sample\",\"config\":\"$cfg\",\"mem_len\":$m,\"samples\":$n,\"tok_per_s\":$t,\"tok_per_cpu_s\":$tc,\"reps\":$REPS"
    if [ "$n" != 1 ] && [ -f "$W/$cfg.$m.1.new" ]; then
        x1=$(ratio "$t" "$(med "$cfg.$m.1.new")") x1c=$(ratio "$tc" "$(med "$cfg.$m.1.newc")")
        bt=$(cat "$W/$k.batch")
        line="$line (${x1}x / ${x1c}x one stream; decoded $bt at a time)"
        j="$j,\"vs_one_stream\":$x1,\"vs_one_stream_cpu\":$x1c,\"batch\":\"$bt\""
    fi
    if [ "$n" = 1 ]; then
        wmb=$(cat "$W/$cfg.wmb")
        pct=$(awk -v t="$t" -v b="$(bound "$(med "$cfg.bw")" "$wmb")" 'BEGIN {printf "%.0f", 100 * t / b}')
        pctc=$(awk -v t="$tc" -v b="$(bound "$(med "$cfg.bwc")" "$wmb")" 'BEGIN {printf "%.0f", 100 * t / b}')
        line="$line; $pct% / $pctc% of the weight-read roof"
        j="$j,\"pct_of_bound\":$pct,\"pct_of_bound_cpu\":$pctc"
    fi
    if [ -f "$W/$k.base" ]; then
        bt=$(med "$k.base") btc=$(med "$k.basec") x=$(med "$k.x") xc=$(med "$k.xc")
        line="$line; old $(printf %.0f "$bt") / $(printf %.0f "$btc"): new/old ${x}x wall ($(range "$k.x")), ${xc}x CPU ($(range "$k.xc"))"
        j="$j,\"base_tok_per_s\":$bt,\"base_tok_per_cpu_s\":$btc,\"vs_base\":$x,\"vs_base_cpu\":$xc"
    fi
    echo "$line"
    emit "$j,\"core\":\"$CORE\"}"
done
