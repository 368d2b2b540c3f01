#!/bin/sh
# make bench: txl's speed and memory on the S and M configs of the performance issue, side by
# side with the lean PyTorch reference (tests/ref/bench_ref.py) when /usr/bin/python3 has
# torch, all in one run (the machine is shared and noisy: compare ratios, not absolutes).
#
# Sampling runs with the memory full (bench/sample.sh: S at mem_len 128, 512 and 1024 with
# 1, 8 and 32 streams, M at its mem_len, each with fp32, bf16 and q8 weights (txl quantize)
# against the bound of reading its weights once per token, and issue 30's goals); then what
# quantizing costs in quality on a trained S (bench/quant.sh: bits per byte and greedy
# samples; it trains one for MINUTES, default 5, unless Q_CKPT names one; SKIP_QUANT=1
# leaves it out).
#
# The loaded scenario (bench/loaded.sh: S training with one competing CPU-bound process it
# starts) follows: the default threads against the best explicit setting, and against idle.
#
# Evaluation's memory at long contexts follows S: txl eval's peak RSS at mem_len 128 and at
# 8x (1024), fp32 and bf16 where the CPU has it (eval_memory below).
#
# Prints one line per measurement and, at the end, every result as JSON lines
# (also written to $OUT/bench.jsonl). Environment: THREADS (default: all cores),
# CONFIGS (default "S M"), S_STEPS, M_STEPS (timed training steps), PAIRS (default 3),
# OUT (default runs/bench), SKIP_TORCH=1, SKIP_LOADED=1, TXL_BIN (the binary, default ./txl).
#
# The ratios against PyTorch come from PAIRS back-to-back pairs per config (txl, then
# PyTorch at its best thread count, then txl again, ...): each pair shares the machine's
# state of the moment, and the headline is the median of the pair ratios, with the range.
#
# MFU = useful model FLOPs per second / the GEMM peak measured here, now, through the same
# gemm() with the same threads (bench/sgemm_peak.c). Useful FLOPs per token, forward, per
# layer: q 2*d*hd, k and v 2*2*d*hd*klen/Lq, r 2*d*hd*klen/(B*Lq) (shared by the batch),
# scores and position terms and weighted values 3 * 2*hd*(m + (Lq+1)/2) (visible keys only),
# output projection 2*hd*d, feed-forward 4*d*di; plus the tied softmax 2*d*V. Training
# counts 3x the forward (backward = 2x). Eval keeps the memory's keys and values (the
# kv_cache, doc/design.md): its k and v are the segment rows' only, 2*2*d*hd.
set -eu
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
OUT=${OUT:-runs/bench}
THREADS=${THREADS:-$(nproc)}
S_STEPS=${S_STEPS:-20}
M_STEPS=${M_STEPS:-6}
PAIRS=${PAIRS:-3}
CONFIGS=${CONFIGS:-S M}
PY=/usr/bin/python3
TXL=${TXL_BIN:-./txl}
mkdir -p "$OUT"
: > "$OUT/bench.jsonl"
DATA=tests/data/tinyshakespeare.txt.gz
command -v jq >/dev/null || { echo "bench: needs jq" >&2; exit 2; }

emit() { echo "$1" >> "$OUT/bench.jsonl"; }
. bench/lib.sh # txl_train

# the OpenBLAS core txl runs with (txl picks it when OpenBLAS falls back to a weaker one;
# `txl info --system`): the bench programs load OpenBLAS themselves
if [ -z "${OPENBLAS_CORETYPE:-}" ]; then
    ct=$($TXL info --system | sed -n 's/^OPENBLAS_CORETYPE: //p')
    [ -z "$ct" ] || export OPENBLAS_CORETYPE="$ct"
fi
peak_json=$($BUILD/bench/sgemm_peak "$THREADS")
PEAK=$(echo "$peak_json" | jq .peak_gflops)
CORE=$(echo "$peak_json" | jq -r .core)
emit "$(echo "$peak_json" | jq -c '{what: "sgemm_peak", threads, core, peak_gflops}')"
echo "sgemm peak ($THREADS threads, OpenBLAS core $CORE): $PEAK GFLOP/s"

# attention alone: the fused kernel against the OpenBLAS path (bench/attn_kernel.c)
$BUILD/bench/attn_kernel "$THREADS" 3

# flops_per_token N d H dh di Lq M B train(0/1)
flops() {
    awk -v N=$1 -v d=$2 -v H=$3 -v dh=$4 -v di=$5 -v Lq=$6 -v M=$7 -v B=$8 -v tr=$9 'BEGIN {
        hd = H * dh; klen = M + Lq; vis = M + (Lq + 1) / 2
        kv = tr ? 4*d*hd*klen/Lq : 4*d*hd
        layer = 2*d*hd + kv + 2*d*hd*klen/(B*Lq) + 6*hd*vis + 2*hd*d + 4*d*di
        f = N * layer + 2 * d * 256
        if (tr) f *= 3
        printf "%.0f", f }'
}

# tokens/s of `txl eval` on the run's checkpoint over 24 segments, 23 of them with the memory
# full as the FLOP count assumes (the train split: the corpus's valid split holds fewer than 6)
txl_eval_json() { # dir B Lq
    $TXL eval "$1/last.safetensors.gz" --split train --max-tokens $(($2 * $3 * 24)) --json -q \
        --threads $THREADS
}
txl_eval() { txl_eval_json "$@" | jq .tok_per_s; }

# "GEMMs x% of the time: MFU y% with nothing else": the share of the threads' time spent in
# OpenBLAS calls (its packing included), and the MFU if everything else took no time, the
# ceiling for work outside the GEMMs.  gemm_note MFU SHARE
gemm_note() {
    awk -v m="$1" -v g="$2" 'BEGIN {printf "GEMMs %.1f%% of the time: MFU %.1f%% with nothing else", 100 * g, (g > 0 ? m / g : 0)}'
}

run_cfg() { # name N d H dh di Lq M B steps
    name=$1 N=$2 d=$3 H=$4 dh=$5 di=$6 Lq=$7 M=$8 B=$9 steps=${10}
    dir="$OUT/$name"
    tps=$(txl_train "$dir" "$N" "$d" "$H" "$dh" "$di" "$Lq" "$M" "$B" "$steps")
    rss=$(jq .peak_rss_mb "$dir.train.json")
    est=$(jq -s 'map(select(.event == "start")) | first | .estimate_mib' "$dir/log.jsonl")
    ftr=$(flops $N $d $H $dh $di $Lq $M $B 1)
    mfu=$(awk -v f=$ftr -v t=$tps -v p=$PEAK 'BEGIN {printf "%.1f", 100 * f * t / (p * 1e9)}')
    ms=$(awk -v t=$tps -v n=$((B * Lq)) 'BEGIN {printf "%.0f", 1000 * n / t}')
    gs=$(jq -s '[.[] | select(.event == "train" and .step > 2)] | (map(.gemm_share) | add / length)' "$dir/log.jsonl")
    echo "txl $name train: $(printf %.0f $tps) tok/s, $ms ms/step, MFU $mfu% of $PEAK GFLOP/s, peak RSS $rss MB (estimate ${est} MiB)"
    echo "txl $name train: $(gemm_note "$mfu" "$gs")"
    emit "{\"what\":\"train\",\"impl\":\"txl\",\"config\":\"$name\",\"tok_per_s\":$tps,\"ms_per_step\":$ms,\"mfu_pct\":$mfu,\"gemm_share\":$gs,\"peak_rss_mb\":$rss,\"estimate_mib\":${est:-0},\"flops_per_token\":$ftr}"
    ej=$(txl_eval_json "$dir" "$B" "$Lq")
    etps=$(echo "$ej" | jq .tok_per_s) egs=$(echo "$ej" | jq .gemm_share)
    fev=$(flops $N $d $H $dh $di $Lq $M $B 0)
    emfu=$(awk -v f=$fev -v t=$etps -v p=$PEAK 'BEGIN {printf "%.1f", 100 * f * t / (p * 1e9)}')
    ratio=$(awk -v a=$etps -v b=$tps 'BEGIN {printf "%.2f", a / b}')
    echo "txl $name eval:  $(printf %.0f $etps) tok/s (${ratio}x training), MFU $emfu%; $(gemm_note "$emfu" "$egs")"
    emit "{\"what\":\"eval\",\"impl\":\"txl\",\"config\":\"$name\",\"tok_per_s\":$etps,\"vs_train\":$ratio,\"mfu_pct\":$emfu,\"gemm_share\":$egs}"
    eval "TXL_${name}_TRAIN=$tps TXL_${name}_EVAL=$etps TXL_${name}_RSS=$rss"
}

# Evaluation's memory at long contexts (issue 29: at 8x the memory, at most 1.5x the peak RSS
# of 1x): `txl eval` of the S checkpoint just trained, batch 16, 24 segments of the train
# split (the memory full after 8 of them at 8x), one thread, at mem_len 128 and 1024; the
# process's peak resident set by GNU time. fp32, and bf16 where the CPU has it (what
# --precision auto takes).  eval_memory DIR B Lq M
eval_memory() {
    [ -x /usr/bin/time ] || { echo "txl S eval memory: needs GNU time (apt-get install time)"; return 0; }
    ck="$1/last.safetensors.gz" B=$2 Lq=$3 M=$4
    precs=fp32
    $TXL eval "$ck" --split train --max-tokens 256 --precision auto 2>&1 >/dev/null |
        grep -q 'precision auto: bf16' && precs="fp32 bf16"
    for p in $precs; do
        for m in $M $((8 * M)); do
            /usr/bin/time -f %M -o "$1.evalmem.$m" $TXL eval "$ck" --split train \
                --max-tokens $((B * Lq * 24)) --json -q --threads 1 --precision $p --mem-len $m \
                > /dev/null
        done
        r1=$(awk '{printf "%.1f", $1 / 1024}' "$1.evalmem.$M")
        r8=$(awk '{printf "%.1f", $1 / 1024}' "$1.evalmem.$((8 * M))")
        x=$(awk -v a="$r8" -v b="$r1" 'BEGIN {printf "%.2f", a / b}')
        echo "txl S eval memory, $p, batch $B, 1 thread: peak RSS $r1 MiB at mem_len $M, $r8 MiB at $((8 * M)) (8x): ${x}x (goal: at most 1.5x)"
        emit "{\"what\":\"eval_memory\",\"config\":\"S\",\"precision\":\"$p\",\"batch\":$B,\"threads\":1,\"mem_len\":$M,\"peak_rss_mib\":$r1,\"mem_len_8x\":$((8 * M)),\"peak_rss_mib_8x\":$r8,\"ratio_8x\":$x}"
    done
}

S_ARGS="$S_SHAPE $S_STEPS"
M_ARGS="$M_SHAPE $M_STEPS"
for cfg in $CONFIGS; do
    case $cfg in
    S) args=$S_ARGS ;;
    M) args=$M_ARGS ;;
    *) echo "bench: unknown config '$cfg' in CONFIGS (S, M)" >&2; exit 2 ;;
    esac
    # shellcheck disable=SC2086
    run_cfg $cfg $args
    if [ $cfg = S ]; then # B Lq M of the shape
        # shellcheck disable=SC2086
        eval_memory "$OUT/S" $(echo $S_SHAPE | cut -d' ' -f8) $(echo $S_SHAPE | cut -d' ' -f6) \
            $(echo $S_SHAPE | cut -d' ' -f7)
    fi
done

# sampling with the memory full, on the checkpoints just trained (bench/sample.sh)
S_CKPT=$OUT/S/last.safetensors.gz M_CKPT=$OUT/M/last.safetensors.gz OUT=$OUT BUILD=$BUILD \
    CONFIGS=$CONFIGS TXL_BIN=$TXL bench/sample.sh

# what quantizing costs in quality (bench/quant.sh)
[ "${SKIP_QUANT:-0}" = 1 ] || OUT=$OUT TXL_BIN=$TXL bench/quant.sh

# bf16 against fp32 and against PyTorch under autocast bf16 (bench/precision.sh)
OUT=$OUT TXL_BIN=$TXL THREADS=$THREADS CONFIGS=$CONFIGS S_STEPS=$S_STEPS M_STEPS=$M_STEPS \
    PAIRS=$PAIRS bench/precision.sh

# one competing CPU-bound process: the default against the best explicit setting and idle
[ "${SKIP_LOADED:-0}" = 1 ] || OUT=$OUT TXL_BIN=$TXL THREADS=$THREADS bench/loaded.sh

median() { tr ' ' '\n' | grep . | sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

if [ "${SKIP_TORCH:-0}" != 1 ] && $PY -c 'import torch' 2>/dev/null; then
    for cfg in $CONFIGS; do
        steps=$([ $cfg = S ] && echo "$S_STEPS" || echo "$M_STEPS")
        args=$([ $cfg = S ] && echo "$S_ARGS" || echo "$M_ARGS")
        B=$(echo "$args" | cut -d' ' -f8) Lq=$(echo "$args" | cut -d' ' -f6)
        # PyTorch's best thread setting first (1 intra-op thread is often faster here)
        best="" bth=1
        for th in 1 $THREADS; do
            j=$($PY tests/ref/bench_ref.py --config $cfg --steps "$steps" --threads $th 2>/dev/null | tail -1)
            echo "pytorch-ref $cfg ($th threads): train $(echo "$j" | jq '.train_tokens_per_s | floor') tok/s, eval $(echo "$j" | jq '.eval_tokens_per_s | floor') tok/s, peak RSS $(echo "$j" | jq '.peak_rss_mb * 10 | round / 10') MB"
            emit "$(echo "$j" | jq -c '. + {what: "torch"}')"
            if [ -z "$best" ] || [ "$(echo "$j $best" | jq -s '.[0].train_tokens_per_s > .[1].train_tokens_per_s')" = true ]; then
                best=$j bth=$th
            fi
        done
        # back-to-back pairs: txl, then PyTorch (its best threads)
        rts="" res="" i=1
        while [ $i -le "$PAIRS" ]; do
            # shellcheck disable=SC2086
            tt=$(txl_train "$OUT/$cfg.pair" $args)
            te=$(txl_eval "$OUT/$cfg.pair" "$B" "$Lq")
            j=$($PY tests/ref/bench_ref.py --config $cfg --steps "$steps" --threads $bth 2>/dev/null | tail -1)
            pt=$(echo "$j" | jq .train_tokens_per_s) pe=$(echo "$j" | jq .eval_tokens_per_s)
            rt=$(awk -v a="$tt" -v b="$pt" 'BEGIN {printf "%.3f", a / b}')
            re=$(awk -v a="$te" -v b="$pe" 'BEGIN {printf "%.3f", a / b}')
            echo "pair $i $cfg: txl train $(printf %.0f "$tt") / pytorch $(printf %.0f "$pt") tok/s = ${rt}x; eval $(printf %.0f "$te") / $(printf %.0f "$pe") = ${re}x"
            emit "{\"what\":\"pair\",\"config\":\"$cfg\",\"pair\":$i,\"txl_train\":$tt,\"torch_train\":$pt,\"train_x\":$rt,\"txl_eval\":$te,\"torch_eval\":$pe,\"eval_x\":$re,\"torch_threads\":$bth}"
            rts="$rts $rt" res="$res $re" i=$((i + 1))
        done
        mt=$(echo "$rts" | median) me=$(echo "$res" | median)
        lo=$(echo "$rts" | tr ' ' '\n' | grep . | sort -g | head -1) hi=$(echo "$rts" | tr ' ' '\n' | grep . | sort -g | tail -1)
        eval "tr=\$TXL_${cfg}_RSS"
        rm=$(echo "$best" | jq --argjson t "$tr" '.peak_rss_mb / $t * 100 | floor / 100')
        echo "== $cfg: txl / pytorch-ref ($bth threads), median of $PAIRS pairs: train ${mt}x (range $lo-$hi), eval ${me}x; pytorch peak RSS / txl ${rm}x"
        emit "{\"what\":\"ratio\",\"config\":\"$cfg\",\"pairs\":$PAIRS,\"train_x\":$mt,\"train_x_min\":$lo,\"train_x_max\":$hi,\"eval_x\":$me,\"rss_torch_over_txl\":$rm}"
    done
else
    echo "(no torch at /usr/bin/python3: apt-get install python3-torch for the side-by-side ratios)"
fi
echo "== JSON ($OUT/bench.jsonl)"
cat "$OUT/bench.jsonl"
