#!/bin/sh
# make bench-quality: quality per minute, the figure users feel. Trains config S on
# enwik8_first3MB (split 0.9/0.05/0.05: 2.7M train, 150K valid) for a fixed wall-clock budget
# with txl and with the lean PyTorch reference (tests/ref/bench_ref.py --data), the same
# batching and hyperparameters
# (lr 5e-4 constant, clip 0.25, no dropout, batch 16, tgt_len = mem_len = 128), each on all
# cores (the reference: with REF_THREADS intra-op threads, by default the faster of 1 and
# all, timed first as make bench does), one after the other. txl validates every
# EVAL_INTERVAL steps inside the budget's clock (as a user's run does), both once after it;
# reported: steps done and the final valid bpc over the whole valid split. Then the ready
# config, configs/enwik8_10min.yaml (the best bpc we found for the budget), alone.
# Environment: MINUTES (the budget, default 10; QUICK=1: 2), DATA (directory of
# enwik8_first3MB.txt.gz, default ../shared/data), OUT (default runs/bench), TXL_BIN,
# REF_THREADS, SKIP_TXL=1, SKIP_TORCH=1, SKIP_READY=1.
set -eu
cd "$(dirname "$0")/.."
OUT=${OUT:-runs/bench}
TXL=${TXL_BIN:-./txl}
PY=/usr/bin/python3
MINUTES=${MINUTES:-$([ "${QUICK:-0}" = 1 ] && echo 2 || echo 10)}
CORPUS=${DATA:-../shared/data}/enwik8_first3MB.txt.gz
EVAL_INTERVAL=${EVAL_INTERVAL:-500}
[ -f "$CORPUS" ] || { echo "bench-quality: no $CORPUS (set DATA to the directory holding it)" >&2; exit 2; }
command -v jq >/dev/null || { echo "bench: needs jq" >&2; exit 2; }
mkdir -p "$OUT"
# the OpenBLAS core txl runs with (txl picks it when OpenBLAS falls back to a weaker one;
# `txl info --system`), for PyTorch's OpenBLAS too
if [ -z "${OPENBLAS_CORETYPE:-}" ]; then
    ct=$($TXL info --system | sed -n 's/^OPENBLAS_CORETYPE: //p')
    [ -z "$ct" ] || export OPENBLAS_CORETYPE="$ct"
fi
emit() { echo "$1" >> "$OUT/bench.jsonl"; }

# S with the hyperparameters of the comparison, as --set flags both programs read
SETS="--set data.train=$CORPUS --set data.split=[0.9,0.05,0.05]
 --set model.n_layer=4 --set model.d_model=256 --set model.n_head=4 --set model.d_head=64
 --set model.d_inner=1024 --set model.tgt_len=128 --set model.mem_len=128
 --set model.dropout=0 --set model.dropatt=0 --set train.batch_size=16
 --set train.lr=5.0e-4 --set train.schedule=constant --set train.warmup_steps=0
 --set train.clip=0.25 --set train.seed=1 --set train.max_steps=1000000
 --set train.max_minutes=$MINUTES --set train.eval_interval=$EVAL_INTERVAL
 --set train.eval_tokens=0 --set train.log_interval=50 --set train.ckpt_interval=0"

CPU=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
echo "quality: config S on $(basename "$CORPUS"), $MINUTES minutes each, $(nproc) cores, $CPU"

# last_eval LOG: "steps bpc" of the last validation in a log.jsonl
last_eval() { jq -s -r '[.[] | select(.event == "eval")] | last | "\(.step) \(.bpc)"' "$1"; }

report() { # report NAME LOG SECONDS
    se=$(last_eval "$2")
    echo "$1: $(echo "$se" | cut -d' ' -f1) steps in $3 s, valid bpc $(printf %.3f "$(echo "$se" | cut -d' ' -f2)")"
    emit "{\"what\":\"quality\",\"impl\":\"$1\",\"minutes\":$MINUTES,\"steps\":$(echo "$se" | cut -d' ' -f1),\"valid_bpc\":$(echo "$se" | cut -d' ' -f2),\"seconds\":$3}"
}

train_report() { # train_report NAME DIR TRAIN-ARGS...: txl train into OUT/DIR, timed, reported
    name=$1 d="$OUT/$2"
    shift 2
    t0=$(date +%s)
    $TXL train -q --force "$@" --set train.out_dir="$d" > "$d.json" 2> "$d.err" \
        || { cat "$d.err" >&2; exit 1; }
    report "$name" "$d/log.jsonl" $(( $(date +%s) - t0 ))
}

if [ "${SKIP_TXL:-0}" != 1 ]; then
    # shellcheck disable=SC2086
    train_report "txl S" quality-txl -c configs/tiny.yaml $SETS
fi

if [ "${SKIP_TORCH:-0}" != 1 ] && $PY -c 'import torch' 2>/dev/null; then
    # the reference's faster thread count, as make bench picks it (5 timed steps each)
    rth=${REF_THREADS:-}
    if [ -z "$rth" ]; then
        rth=1 best=0
        for th in 1 $(nproc); do
            v=$($PY tests/ref/bench_ref.py --config S --steps 5 --threads $th 2>/dev/null | tail -1 | jq .train_tokens_per_s)
            if awk -v a="$v" -v b="$best" 'BEGIN {exit !(a > b)}'; then rth=$th best=$v; fi
        done
    fi
    t0=$(date +%s)
    j=$($PY tests/ref/bench_ref.py --config S --data "$CORPUS" --minutes "$MINUTES" --lr 5e-4 \
        --threads "$rth" 2> "$OUT/quality-torch.err" | tail -1) || { cat "$OUT/quality-torch.err" >&2; exit 1; }
    sec=$(( $(date +%s) - t0 ))
    echo "pytorch-ref S ($rth threads): $(echo "$j" | jq .steps) steps in $sec s, valid bpc $(printf %.3f "$(echo "$j" | jq .valid_bpc)")"
    emit "$(echo "$j" | jq -c --argjson m "$MINUTES" --argjson s $sec '{what: "quality", impl: "pytorch-ref S", minutes: $m, steps, valid_bpc, seconds: $s}')"
else
    echo "(no torch at /usr/bin/python3: apt-get install python3-torch for the reference)"
fi

# the ready config (configs/enwik8_10min.yaml), tuned for 10 minutes; for another budget its
# schedule is scaled to end in it (max_steps and warmup_steps x MINUTES / 10)
if [ "${SKIP_READY:-0}" != 1 ]; then
    scaled() { awk -v s="$(sed -n "s/^  $1: //p" configs/enwik8_10min.yaml)" -v m="$MINUTES" \
        'BEGIN {printf "%d", s * m / 10}'; }
    rsteps=$(scaled max_steps)
    train_report "txl enwik8_10min ($rsteps steps)" quality-ready -c configs/enwik8_10min.yaml \
        --set data.train="$CORPUS" --set train.max_steps=$rsteps \
        --set train.warmup_steps="$(scaled warmup_steps)" --set train.max_minutes=$MINUTES \
        --set train.ckpt_interval=0
fi
