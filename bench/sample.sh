#!/bin/sh
# bench/sample.sh (make bench, make bench-sample): `txl sample` with the memory full, on the
# S and M configs of make bench, with the weights stored in fp32, bf16 and q8 (txl quantize)
# and each checkpoint's default cache (fp32 for fp32 weights, bf16 for quantized ones). A
# sample of mem_len*2+200 bytes from a 3-byte prompt: the rates count only the tokens drawn
# once the memory held mem_len rows (sample --stats full_tok_per_s per wall second,
# full_tok_per_cpu_s per CPU second), summed over the streams of --num-samples, decoded as
# txl groups them by default (--batch 0: the line says how many at a time); one thread.
# Several streams run with --precision auto: their products on the CPU's bf16 matrix units
# where it has them (AMX, AVX512_BF16; the line says which precision), else fp32.
#
# Cells: S for each weight type of WEIGHTS, each mem_len of S_MEMS and each stream count of
# S_NS (the total over the streams, and its ratio to one stream of the same weights and of
# fp32 weights); the same with a q8 cache (--cache q8) for each mem_len of Q8C_MEMS and
# stream count of Q8C_NS; M at its trained mem_len, one stream, each weight type. The roof of
# one-token decoding is reading the weights once per token: mem_bw measures one thread's
# read bandwidth from a buffer the size of each type's weights (the same working set:
# cache-resident when it fits) and from 1 GiB (DRAM), and the bound is bandwidth / weight
# bytes (the stored bytes of every tensor, txl info's weight_bytes), in tokens/s (per wall
# and per CPU second, like the rates). At the end, the issue's goals (issue 30) against
# what was measured.
#
# The machine may be shared: a process then waits for a core at random, and wall-clock
# rates swing by 2x from one minute to the next; CPU-second rates hold steady. REPS rounds
# (default 3) of every cell, medians. With TXL_BASE=/path/to/old/txl each cell whose
# checkpoint the old binary reads (fp32 ones at least) runs the old and the new binary back
# to back (order swapped every round) and prints the median of the per-round ratios new/old
# (the old binary needs sample --stats's full_tok_per_cpu_s).
# Environment: S_CKPT, M_CKPT (fp32 checkpoints; default: 2-step runs trained here; their
# bf16 and q8 versions are quantized from them), CONFIGS (default "S M"), WEIGHTS (default
# "fp32 bf16 q8"), S_MEMS (default "128 512 1024"), S_NS (default "1 8 32"), REPS, OUT
# (default runs/bench; results are appended to OUT/bench.jsonl), Q8C_MEMS (default "128
# 512 1024"), Q8C_NS (default 32), TXL_BIN, TXL_BASE, BUILD.
set -eu
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
OUT=${OUT:-runs/bench}
TXL=${TXL_BIN:-./txl}
BASE=${TXL_BASE:-}
REPS=${REPS:-3}
CONFIGS=${CONFIGS:-S M}
WEIGHTS=${WEIGHTS:-fp32 bf16 q8}
S_MEMS=${S_MEMS:-128 512 1024}
S_NS=${S_NS:-1 8 32}
Q8C_MEMS=${Q8C_MEMS:-128 512 1024}
Q8C_NS=${Q8C_NS:-32}
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

# sample BIN CKPT MEM N [CACHE]: "wall cpu" tokens/s over the streams with the memory full
sample() {
    p=""
    [ "$4" = 1 ] || p="--precision auto"
    [ -z "${5:-}" ] || p="$p --cache $5"
    # shellcheck disable=SC2086
    "$1" sample "$2" --prompt "The" -n $(($3 * 2 + 200)) --mem-len "$3" --num-samples "$4" \
        --seed 1 --stats --threads 1 -q $p 2> "$W/err" > /dev/null || { cat "$W/err" >&2; exit 1; }
    grep '^{' "$W/err" | tail -1 | jq -r '"\(.batch // "?") \(.cache // "fp32")"' > "$W/last_batch"
    grep '^{' "$W/err" | tail -1 | jq -r '.precision // "fp32"' > "$W/last_prec"
    grep '^{' "$W/err" | tail -1 | jq -e -r '"\(.full_tok_per_s) \(.full_tok_per_cpu_s)"' \
        | grep -v null || {
        echo "bench: $1 reports no full_tok_per_s / full_tok_per_cpu_s (a txl older than" \
             "sample --stats's full-memory rates, or the memory never filled)" >&2; exit 1; }
}

# base_reads CKPT: whether the TXL_BASE binary reads CKPT (a txl older than quantized
# checkpoints reads only fp32 ones); asked once per checkpoint
base_reads() {
    f="$W/base_reads.$(echo "$1" | cksum | cut -d' ' -f1)"
    [ -f "$f" ] || { "$BASE" info "$1" > /dev/null 2>&1 && echo 1 > "$f" || echo 0 > "$f"; }
    [ "$(cat "$f")" = 1 ]
}

# cell KEY CKPT MEM N WEIGHTS [CACHE]: one round of a cell (base and new back to back when
# TXL_BASE is set and reads the checkpoint; not for a q8 cache, which an older txl lacks)
cell() {
    b=""
    c=${6:-}
    if [ -n "$BASE" ] && [ -z "$c" ] && base_reads "$2" && [ $((r % 2)) -eq 1 ]; then
        b=$(sample "$BASE" "$2" "$3" "$4"); n=$(sample "$TXL" "$2" "$3" "$4")
        cp "$W/last_batch" "$W/$1.batch"
    elif [ -n "$BASE" ] && [ -z "$c" ] && base_reads "$2"; then
        n=$(sample "$TXL" "$2" "$3" "$4"); cp "$W/last_batch" "$W/$1.batch"
        b=$(sample "$BASE" "$2" "$3" "$4")
    else
        n=$(sample "$TXL" "$2" "$3" "$4" "$c"); cp "$W/last_batch" "$W/$1.batch"
    fi
    cp "$W/last_prec" "$W/$1.prec"
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
        for w in $WEIGHTS; do
            for m in $S_MEMS; do
                for n in $S_NS; do cells="$cells S:$w:$m:$n:"; done
            done
        done
        for w in $WEIGHTS; do
            for m in $Q8C_MEMS; do
                for n in $Q8C_NS; do cells="$cells S:$w:$m:$n:q8"; done
            done
        done ;;
    M)
        [ -n "$M_CKPT" ] || M_CKPT=$(ckpt M 8 512 8 2048 256)
        mm=$($TXL info "$M_CKPT" --json | jq .config.model.mem_len)
        for w in $WEIGHTS; do cells="$cells M:$w:$mm:1:"; done ;;
    *) echo "bench: unknown config '$cfg' in CONFIGS (S, M)" >&2; exit 2 ;;
    esac
done
# the quantized checkpoints, from the fp32 ones
for cfg in $CONFIGS; do
    eval "ck=\$${cfg}_CKPT"
    for w in $WEIGHTS; do
        case $w in
        fp32) eval "${cfg}_fp32=\$ck" ;;
        bf16 | q8)
            $TXL quantize "$ck" --type "$w" -o "$W/$cfg-$w.safetensors" -q
            eval "${cfg}_$w=\$W/\$cfg-\$w.safetensors" ;;
        *) echo "bench: unknown weight type '$w' in WEIGHTS (fp32, bf16, q8)" >&2; exit 2 ;;
        esac
    done
done
CORE=$($TXL info --system | sed -n 's/^OpenBLAS core: \([^ ]*\).*/\1/p')
CPU=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
FLAGS=$(grep -m1 '^flags' /proc/cpuinfo)
has() { case " ${FLAGS#*:} " in *" $1 "*) echo yes ;; *) echo no ;; esac; }
echo "sample, memory full, 1 thread, $CPU (AVX-512 $(has avx512f), AMX-BF16 $(has amx_bf16)," \
     "AVX512_BF16 $(has avx512_bf16), VNNI $(has avx512_vnni)), OpenBLAS core $CORE," \
     "$REPS rounds${BASE:+, against $BASE}"

r=1
while [ $r -le "$REPS" ]; do
    for c in $cells; do
        IFS=: read -r cfg w m n cc <<EOF
$c
EOF
        eval "ck=\$${cfg}_$w"
        if [ ! -f "$W/$cfg.$w.wmb" ]; then
            $TXL info "$ck" --json | jq .weight_bytes > "$W/$cfg.$w.bytes"
            awk -v b="$(cat "$W/$cfg.$w.bytes")" 'BEGIN {printf "%.2f\n", b / 1048576}' > "$W/$cfg.$w.wmb"
        fi
        # the roof of the weights, measured next to their first cell of the round
        if [ ! -f "$W/$cfg.$w.round" ] || [ "$(cat "$W/$cfg.$w.round")" != $r ]; then
            echo $r > "$W/$cfg.$w.round"
            j=$($BUILD/bench/mem_bw "$(cat "$W/$cfg.$w.wmb")" 1024)
            echo "$j" | jq '.reads[0].gb_per_s' >> "$W/$cfg.$w.bw"
            echo "$j" | jq '.reads[0].gb_per_cpu_s' >> "$W/$cfg.$w.bwc"
            echo "$j" | jq '.reads[1].gb_per_s' >> "$W/$cfg.$w.dram"
            echo "$j" | jq '.reads[1].gb_per_cpu_s' >> "$W/$cfg.$w.dramc"
        fi
        cell "$cfg.$w.$m.$n${cc:+.${cc}c}" "$ck" "$m" "$n" "$w" "$cc"
    done
    r=$((r + 1))
done

bound() { awk -v b="$1" -v w="$2" 'BEGIN {printf "%.0f", b * 1e9 / (w * 1048576)}'; }
for cfg in $CONFIGS; do
    for w in $WEIGHTS; do
        k="$cfg.$w"
        wmb=$(cat "$W/$k.wmb")
        bw=$(med "$k.bw") bwc=$(med "$k.bwc") dr=$(med "$k.dram") drc=$(med "$k.dramc")
        echo "$cfg $w roof: weights $wmb MB; read bandwidth (1 thread) $bw GB/s wall, $bwc GB/s" \
             "CPU -> $(bound "$bw" "$wmb") / $(bound "$bwc" "$wmb") tok/s; DRAM $dr / $drc GB/s" \
             "-> $(bound "$dr" "$wmb") / $(bound "$drc" "$wmb") tok/s"
        emit "{\"what\":\"sample_roof\",\"config\":\"$cfg\",\"weights\":\"$w\",\"weight_mb\":$wmb,\"weight_bytes\":$(cat "$W/$k.bytes"),\"read_gb_per_s\":$bw,\"read_gb_per_cpu_s\":$bwc,\"dram_gb_per_s\":$dr,\"dram_gb_per_cpu_s\":$drc,\"bound_tok_per_s\":$(bound "$bw" "$wmb"),\"bound_tok_per_cpu_s\":$(bound "$bwc" "$wmb"),\"reps\":$REPS}"
    done
done
for c in $cells; do
    IFS=: read -r cfg w m n cc <<EOF
$c
EOF
    k="$cfg.$w.$m.$n${cc:+.${cc}c}"
    t=$(med "$k.new") tc=$(med "$k.newc")
    bt=$(cut -d' ' -f1 "$W/$k.batch") cache=$(cut -d' ' -f2 "$W/$k.batch") prec=$(cat "$W/$k.prec")
    line="$cfg $w mem_len $m, $n stream$([ "$n" = 1 ] || echo s): $(printf %.0f "$t") tok/s wall, $(printf %.0f "$tc") CPU"
    j="{\"what\":\"sample\",\"config\":\"$cfg\",\"weights\":\"$w\",\"cache\":\"$cache\",\"mem_len\":$m,\"samples\":$n,\"tok_per_s\":$t,\"tok_per_cpu_s\":$tc,\"reps\":$REPS"
    if [ "$n" != 1 ] && [ -f "$W/$cfg.$w.$m.1.new" ]; then
        x1=$(ratio "$t" "$(med "$cfg.$w.$m.1.new")") x1c=$(ratio "$tc" "$(med "$cfg.$w.$m.1.newc")")
        line="$line (${x1}x / ${x1c}x one $w stream"
        j="$j,\"vs_one_stream\":$x1,\"vs_one_stream_cpu\":$x1c"
        if [ "$w" != fp32 ] && [ -f "$W/$cfg.fp32.$m.1.new" ]; then
            xf=$(ratio "$t" "$(med "$cfg.fp32.$m.1.new")") xfc=$(ratio "$tc" "$(med "$cfg.fp32.$m.1.newc")")
            line="$line, ${xf}x / ${xfc}x one fp32 stream"
            j="$j,\"vs_one_fp32_stream\":$xf,\"vs_one_fp32_stream_cpu\":$xfc"
        fi
        line="$line; decoded $bt at a time, precision ${prec:-fp32}, $cache cache)"
        j="$j,\"batch\":\"$bt\",\"precision\":\"${prec:-fp32}\""
    fi
    if [ "$n" = 1 ]; then
        wmb=$(cat "$W/$cfg.$w.wmb")
        pct=$(awk -v t="$t" -v b="$(bound "$(med "$cfg.$w.bw")" "$wmb")" 'BEGIN {printf "%.0f", 100 * t / b}')
        pctc=$(awk -v t="$tc" -v b="$(bound "$(med "$cfg.$w.bwc")" "$wmb")" 'BEGIN {printf "%.0f", 100 * t / b}')
        line="$line; $pct% / $pctc% of its weight-read roof; $cache cache"
        j="$j,\"pct_of_bound\":$pct,\"pct_of_bound_cpu\":$pctc"
        if [ "$w" != fp32 ] && [ -f "$W/$cfg.fp32.$m.1.new" ]; then
            xf=$(ratio "$t" "$(med "$cfg.fp32.$m.1.new")") xfc=$(ratio "$tc" "$(med "$cfg.fp32.$m.1.newc")")
            line="$line; ${xf}x / ${xfc}x fp32"
            j="$j,\"vs_fp32\":$xf,\"vs_fp32_cpu\":$xfc"
        fi
    fi
    if [ -f "$W/$k.base" ]; then
        bt=$(med "$k.base") btc=$(med "$k.basec") x=$(med "$k.x") xc=$(med "$k.xc")
        line="$line; old $(printf %.0f "$bt") / $(printf %.0f "$btc"): new/old ${x}x wall ($(range "$k.x")), ${xc}x CPU ($(range "$k.xc"))"
        j="$j,\"base_tok_per_s\":$bt,\"base_tok_per_cpu_s\":$btc,\"vs_base\":$x,\"vs_base_cpu\":$xc"
    fi
    echo "$line"
    emit "$j,\"core\":\"$CORE\"}"
done

# The goals of issue 30 (one thread, memory full), per CPU second (wall in parentheses):
# each cell that was measured, "ok" or "short"
goal() { # label value wall goal
    awk -v l="$1" -v v="$2" -v w="$3" -v g="$4" 'BEGIN {
        printf "goal: %s: %.4g (wall %.4g), goal %g: %s\n", l, v, w, g, (v >= g ? "ok" : "short") }'
}
have() { [ -f "$W/$1.newc" ]; }
echo "goals (issue 30), per CPU second:"
have S.q8.128.1 && goal "S q8 mem_len 128, tok/s" "$(med S.q8.128.1.newc)" "$(med S.q8.128.1.new)" 3000
have S.q8.1024.1 && goal "S q8 mem_len 1024 (bf16 cache), tok/s" "$(med S.q8.1024.1.newc)" "$(med S.q8.1024.1.new)" 2000
for m in $S_MEMS; do
    have "S.bf16.$m.1" && have "S.fp32.$m.1" &&
        goal "S bf16 over fp32 weights, mem_len $m" \
            "$(ratio "$(med "S.bf16.$m.1.newc")" "$(med "S.fp32.$m.1.newc")")" \
            "$(ratio "$(med "S.bf16.$m.1.new")" "$(med "S.fp32.$m.1.new")")" 1.8
done
for wm in 128:10 512:6; do
    m=${wm%:*} g=${wm#*:}
    for w in $WEIGHTS; do
        bases=$w
        [ "$w" = fp32 ] || bases="$w fp32"
        for c in "" .q8c; do # the default cache, then the q8 cache's cells
            for base in $bases; do # over one stream of the same weights, then of fp32's
                k="S.$w.$m.32$c" b="S.$base.$m.1"
                have "$k" && have "$b" &&
                    goal "S $w 32 streams${c:+, q8 cache,} over one $base stream, mem_len $m" \
                        "$(ratio "$(med "$k.newc")" "$(med "$b.newc")")" \
                        "$(ratio "$(med "$k.new")" "$(med "$b.new")")" "$g"
            done
        done
    done
done
for c in $cells; do
    case $c in
    M:q8:*)
        IFS=: read -r cfg w m n cc <<EOF
$c
EOF
        wmb=$(cat "$W/M.q8.wmb")
        goal "M q8 share of its weight-read roof, %" \
            "$(awk -v t="$(med "M.q8.$m.1.newc")" -v b="$(bound "$(med M.q8.bwc)" "$wmb")" 'BEGIN {print 100 * t / b}')" \
            "$(awk -v t="$(med "M.q8.$m.1.new")" -v b="$(bound "$(med M.q8.bw)" "$wmb")" 'BEGIN {print 100 * t / b}')" 80 ;;
    esac
done
