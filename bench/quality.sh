#!/bin/sh
# make bench-quality: quality per minute, the figure users feel. Trains config S on
# enwik8_first3MB (split 0.9/0.05/0.05: 2.7M train, 150K valid) for a fixed wall-clock budget
# with txl and with the PyTorch reference (tests/ref/train_ref.py), same hyperparameters
# (lr 5e-4 constant, clip 0.25, no dropout, batch 16, tgt_len = mem_len = 128), each on all
# cores (the reference: REF_THREADS intra-op threads, default 1, its fastest setting on 2
# cores, as make bench finds), one after the other. Each run validates every EVAL_INTERVAL steps and once at the end (inside
# the budget's clock, as a user's run does); reported: steps done and the final valid bpc
# over the whole valid split.
# Environment: MINUTES (the budget, default 10; QUICK=1: 2), DATA (directory of
# enwik8_first3MB.txt.gz, default ../shared/data), OUT (default runs/bench), TXL_BIN,
# REF_THREADS, SKIP_TORCH=1.
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
    echo "$1: $(echo "$se" | cut -d' ' -f1) steps in $3 s, valid bpc $(echo "$se" | cut -d' ' -f2)"
    emit "{\"what\":\"quality\",\"impl\":\"$1\",\"minutes\":$MINUTES,\"steps\":$(echo "$se" | cut -d' ' -f1),\"valid_bpc\":$(echo "$se" | cut -d' ' -f2),\"seconds\":$3}"
}

t0=$(date +%s)
# shellcheck disable=SC2086
$TXL train -q --force -c configs/tiny.yaml $SETS --set train.out_dir="$OUT/quality-txl" \
    > "$OUT/quality-txl.json" 2> "$OUT/quality-txl.err" || { cat "$OUT/quality-txl.err" >&2; exit 1; }
report "txl S" "$OUT/quality-txl/log.jsonl" $(( $(date +%s) - t0 ))

if [ "${SKIP_TORCH:-0}" != 1 ] && $PY -c 'import torch' 2>/dev/null; then
    t0=$(date +%s)
    # shellcheck disable=SC2086
    $PY tests/ref/train_ref.py configs/tiny.yaml $SETS --threads "${REF_THREADS:-1}" \
        --out "$OUT/quality-torch.jsonl" 2> "$OUT/quality-torch.err" || { cat "$OUT/quality-torch.err" >&2; exit 1; }
    report "pytorch-ref S" "$OUT/quality-torch.jsonl" $(( $(date +%s) - t0 ))
else
    echo "(no torch at /usr/bin/python3: apt-get install python3-torch for the reference)"
fi
