#!/bin/sh
# make bench-adaptive: the adaptive softmax against the full softmax of the same vocabulary,
# side by side in one process (bench/adaptive.c: both models built, each round trains both
# for STEPS steps back to back on the same Zipf-drawn tokens; tokens/s the median over
# ROUNDS, the ratio taken within each round), and the memory either plans at V, 2V, 4V.
# Environment: V (267735, WikiText-103's words), N_LAYER (4; 16 is configs/wt103_base.yaml's,
# the real model), B (8 streams of tgt_len 150),
# ROUNDS (3), STEPS (2), THREADS (1; 0: all cores), OUT (runs/bench-adaptive), BUILD (build).
# The ratio is of tokens per CPU-second (the machine is shared: with 1 thread, a step's CPU
# time is what it takes on an idle machine); wall tokens/s are printed too.
# With WT103=DIR (wiki.train.tokens, wiki.valid.tokens of WikiText-103) it also trains
# configs/wt103_base.yaml's shape with the word tokenizer through txl train, adaptive and
# with cutoffs [] (the full softmax), STEPS + 2 steps each, and compares their tokens/s.
set -eu
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
OUT=${OUT:-runs/bench-adaptive}
TXL=${TXL_BIN:-./txl}
mkdir -p "$OUT"
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')
flags=$(grep -o -w -E 'avx2|avx512f|avx512_bf16|amx_bf16' /proc/cpuinfo | sort -u | tr '\n' ' ')
echo "bench-adaptive: $cpu, $(nproc) cores ($flags); V ${V:-267735}, ${N_LAYER:-4} layers of d 410, batch ${B:-8} x 150"
echo "  $(date -u '+%Y-%m-%d %H:%M UTC'), load average $(cut -d' ' -f1-3 /proc/loadavg) at the start (the rounds' CPU time counts this process alone)"
nice "$BUILD/bench/adaptive" "${V:-267735}" "${N_LAYER:-4}" "${B:-8}" "${ROUNDS:-3}" \
    "${STEPS:-2}" "${THREADS:-1}" | tee "$OUT/adaptive.jsonl"
echo "  load average $(cut -d' ' -f1-3 /proc/loadavg) at the end"
jq -r 'select(.summary) | "adaptive \(.adaptive_tok_per_cpu_s) tok/CPU-s, full softmax \(.full_tok_per_cpu_s) tok/CPU-s: \(.ratio)x (median of the rounds'"'"' ratios; wall: \(.adaptive_tok_per_s) and \(.full_tok_per_s) tok/s); peak RSS \(.peak_rss_mib) MiB (both models)"' "$OUT/adaptive.jsonl"
jq -r 'select(.plan) | "  plan \(.plan) V \(.V): activations \(.activation_mib) MiB, parameters \(.params) (with gradient and Adam: \(.param_grad_adam_mib) MiB)"' "$OUT/adaptive.jsonl"
if [ -n "${WT103:-}" ]; then
    for mode in adaptive full; do
        set -- --set model.n_layer="${N_LAYER:-4}" --set train.batch_size="${B:-8}" \
            --set train.max_steps=$((${STEPS:-2} + 2)) --set train.warmup_steps=0 \
            --set train.eval_interval=0 --set train.ckpt_interval=0 --set train.log_interval=1 \
            --set data.train="$WT103/wiki.train.tokens" --set data.valid="$WT103/wiki.valid.tokens" \
            --set train.out_dir="$OUT/wt103_$mode"
        [ $mode = full ] && set -- "$@" --set "model.cutoffs=[]"
        nice $TXL train -q --force -c configs/wt103_base.yaml "$@" > "$OUT/wt103_$mode.json"
        jq -s --arg m $mode '[.[] | select(.event == "train" and .step > 2)] |
            "WikiText-103 \($m): \(map(.tok_per_s) | add / length) tok/s"' -r "$OUT/wt103_$mode/log.jsonl"
    done
fi
