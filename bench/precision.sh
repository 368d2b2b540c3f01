#!/bin/sh
# precision.sh (part of make bench; make bench-precision alone): txl in bf16 against txl in
# fp32 and against the lean PyTorch reference under torch.autocast("cpu", bf16), S and M,
# train and eval, in PAIRS rounds of back-to-back runs (fp32, bf16, PyTorch autocast; eval
# of each run's own checkpoint, bf16 with --precision bf16): per round the ratios, then their
# medians and ranges. Needs a CPU with bf16 (AMX-BF16 or AVX512_BF16); says so otherwise.
# Environment as bench.sh: TXL_BIN, THREADS, CONFIGS, S_STEPS, M_STEPS, PAIRS, OUT,
# SKIP_TORCH.
set -eu
cd "$(dirname "$0")/.."
OUT=${OUT:-runs/bench}
THREADS=${THREADS:-$(nproc)}
S_STEPS=${S_STEPS:-20}
M_STEPS=${M_STEPS:-6}
PAIRS=${PAIRS:-3}
CONFIGS=${CONFIGS:-S M}
PY=/usr/bin/python3
TXL=${TXL_BIN:-./txl}
DATA=tests/data/tinyshakespeare.txt.gz
mkdir -p "$OUT"
touch "$OUT/bench.jsonl"
emit() { echo "$1" >> "$OUT/bench.jsonl"; }
. bench/lib.sh
median() { tr ' ' '\n' | grep . | sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
range() { tr ' ' '\n' | grep . | sort -g | awk 'NR == 1 {lo = $1} {hi = $1} END {print lo "-" hi}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.3f", a / b}'; }

# which precision auto takes here, said by txl itself on a throwaway checkpoint
probe_dir="$OUT/precision.probe"
txl_train "$probe_dir" 1 32 1 32 64 16 16 2 1 > /dev/null
took=$($TXL eval "$probe_dir/last.safetensors.gz" --split train --max-tokens 256 --precision auto 2>&1 >/dev/null | sed -n 's/.*precision auto: //p')
cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
echo "precision: auto takes $took here ($cpu)"
case "$took" in bf16*) ;; *) echo "precision: no bf16 on this CPU: the bf16 rows need AMX-BF16 or AVX512_BF16"; exit 0 ;; esac
torch=0
[ "${SKIP_TORCH:-0}" != 1 ] && $PY -c 'import torch' 2>/dev/null && torch=1

txl_eval_p() { # dir B Lq precision -> tok/s
    $TXL eval "$1/last.safetensors.gz" --split train --max-tokens $(($2 * $3 * 24)) --json -q \
        --threads "$THREADS" --precision "$4" | jq .tok_per_s
}

for cfg in $CONFIGS; do
    case $cfg in
    S) shape="$S_SHAPE $S_STEPS" steps=$S_STEPS ;;
    M) shape="$M_SHAPE $M_STEPS" steps=$M_STEPS ;;
    *) echo "precision: unknown config '$cfg'" >&2; exit 2 ;;
    esac
    B=$(echo "$shape" | cut -d' ' -f8) Lq=$(echo "$shape" | cut -d' ' -f6)
    xt="" xe="" pt="" pe="" i=1
    while [ $i -le "$PAIRS" ]; do
        # shellcheck disable=SC2086
        f_tr=$(txl_train "$OUT/$cfg.fp32" $shape)
        f_ev=$(txl_eval_p "$OUT/$cfg.fp32" "$B" "$Lq" fp32)
        # shellcheck disable=SC2086
        b_tr=$(EXTRA_TRAIN="--set train.precision=bf16" txl_train "$OUT/$cfg.bf16" $shape)
        b_ev=$(txl_eval_p "$OUT/$cfg.bf16" "$B" "$Lq" bf16)
        line="round $i $cfg: txl train bf16 $(printf %.0f "$b_tr") / fp32 $(printf %.0f "$f_tr") tok/s = $(ratio "$b_tr" "$f_tr")x; eval $(printf %.0f "$b_ev") / $(printf %.0f "$f_ev") = $(ratio "$b_ev" "$f_ev")x"
        xt="$xt $(ratio "$b_tr" "$f_tr")" xe="$xe $(ratio "$b_ev" "$f_ev")"
        j="{}"
        if [ $torch = 1 ]; then
            j=$($PY tests/ref/bench_ref.py --config "$cfg" --steps "$steps" --threads "$THREADS" --autocast bf16 2>/dev/null | tail -1)
            t_tr=$(echo "$j" | jq .train_tokens_per_s) t_ev=$(echo "$j" | jq .eval_tokens_per_s)
            line="$line; vs pytorch autocast bf16 ($THREADS threads, as txl) train $(printf %.0f "$t_tr") = $(ratio "$b_tr" "$t_tr")x, eval $(printf %.0f "$t_ev") = $(ratio "$b_ev" "$t_ev")x"
            pt="$pt $(ratio "$b_tr" "$t_tr")" pe="$pe $(ratio "$b_ev" "$t_ev")"
        fi
        echo "$line"
        emit "{\"what\":\"precision_pair\",\"config\":\"$cfg\",\"pair\":$i,\"kernel\":\"$took\",\"fp32_train\":$f_tr,\"bf16_train\":$b_tr,\"fp32_eval\":$f_ev,\"bf16_eval\":$b_ev,\"torch_autocast\":$j}"
        i=$((i + 1))
    done
    msg="== $cfg bf16 ($took): median of $PAIRS rounds: train $(echo "$xt" | median)x fp32 (range $(echo "$xt" | range)), eval $(echo "$xe" | median)x ($(echo "$xe" | range))"
    [ $torch = 1 ] && msg="$msg; txl bf16 / pytorch autocast bf16: train $(echo "$pt" | median)x ($(echo "$pt" | range)), eval $(echo "$pe" | median)x ($(echo "$pe" | range))"
    echo "$msg"
    emit "{\"what\":\"precision_ratio\",\"config\":\"$cfg\",\"kernel\":\"$took\",\"pairs\":$PAIRS,\"bf16_over_fp32_train\":$(echo "$xt" | median),\"bf16_over_fp32_eval\":$(echo "$xe" | median)$([ $torch = 1 ] && echo ",\"bf16_over_torch_autocast_train\":$(echo "$pt" | median),\"bf16_over_torch_autocast_eval\":$(echo "$pe" | median)")}"
done
