#!/bin/sh
# make bench-schemes: what each positional scheme and the anchors cost in training speed,
# against mlp, on the S config of make bench (4 layers, d_model 256, tgt_len = mem_len = 128,
# batch 16) and tinyshakespeare. ROUNDS rounds (default 3), each training every cell for
# STEPS timed steps back to back, so a round's cells share the machine's state; the ratio of
# a cell is the median over rounds of (its tok/s / mlp's tok/s in the same round).
# Tokens count anchor tokens; bytes (tokens x bytes / tokens of the valid split) are what a
# user feels. On a busy machine the wall clock of one cell depends on
# what else ran meanwhile, so the ratios use CPU time (user + system of the whole process,
# /usr/bin/time; with THREADS=1, the default here, CPU time is the step time of an idle
# machine, plus about 1% for start-up): tokens per CPU-second. Environment: CELLS, ROUNDS,
# STEPS, THREADS, OUT, TXL_BIN. Cells: a scheme, or scheme+a (anchors bos, para, sent).
set -eu
cd "$(dirname "$0")/.."
OUT=${OUT:-runs/bench-schemes}
THREADS=${THREADS:-1}
STEPS=${STEPS:-20}
ROUNDS=${ROUNDS:-3}
CELLS=${CELLS:-"mlp hier mlp+a hier+a xl alibi rope"}
TXL=${TXL_BIN:-./txl}
DATA=tests/data/tinyshakespeare.txt.gz
command -v jq >/dev/null || { echo "bench-schemes: needs jq" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "bench-schemes: needs GNU time (apt-get install time)" >&2; exit 2; }
mkdir -p "$OUT"
: > "$OUT/schemes.jsonl"
median() { tr ' ' '\n' | grep . | sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

train() { # train CELL: tokens per CPU-second of the whole run
    c=$1 an=""
    case $c in *+a) an="--set data.anchors=[bos,para,sent]"; c=${c%+a} ;; esac
    d="$OUT/$1"
    # shellcheck disable=SC2086
    /usr/bin/time -f "%U %S" -o "$d.time" $TXL train -q --force -c configs/tiny.yaml --set data.train=$DATA $an \
        --set model.pos_scheme=$c --set model.n_layer=4 --set model.d_model=256 \
        --set model.n_head=4 --set model.d_head=64 --set model.d_inner=1024 \
        --set model.tgt_len=128 --set model.mem_len=128 --set model.dropout=0.1 \
        --set train.batch_size=16 --set train.max_steps=$((STEPS + 2)) \
        --set train.warmup_steps=0 --set train.eval_interval=0 --set train.ckpt_interval=0 \
        --set train.log_interval=1 --set train.threads=$THREADS --set train.out_dir="$d" \
        > "$d.json" 2> "$d.err" || { cat "$d.err" >&2; exit 1; }
    awk -v n="$(jq .tokens "$d.json")" '{printf "%.1f", n / ($1 + $2)}' "$d.time"
}

bytes_per_token() { # CELL: bytes / tokens of the valid split as eval counts them
    $TXL eval "$OUT/$1/last.safetensors.gz" --split valid --max-tokens 20000 --json -q --threads 1 |
        jq '.bytes / .tokens'
}

echo "positional schemes on S ($THREADS threads, $STEPS steps, $ROUNDS rounds, tokens per CPU-second; $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), OpenBLAS core $($TXL info --system --json | jq -r .blas_core))"
r=1
while [ $r -le "$ROUNDS" ]; do
    line="round $r:"
    for c in $CELLS; do
        t=$(train $c)
        eval "T_$(echo $c | tr '+' '_')_$r=$t"
        line="$line $c $(printf %.0f "$t")"
    done
    echo "$line tokens/CPU-s"
    r=$((r + 1))
done
for c in $CELLS; do
    v=$(echo $c | tr '+' '_') ratios="" tps=""
    r=1
    while [ $r -le "$ROUNDS" ]; do
        eval "t=\$T_${v}_$r m=\$T_mlp_$r"
        ratios="$ratios $(awk -v a="$t" -v b="$m" 'BEGIN {printf "%.4f", a / b}')"
        tps="$tps $t"
        r=$((r + 1))
    done
    bpt=$(bytes_per_token $c)
    mt=$(echo "$tps" | median) mr=$(echo "$ratios" | median)
    lo=$(echo "$ratios" | tr ' ' '\n' | grep . | sort -g | head -1)
    hi=$(echo "$ratios" | tr ' ' '\n' | grep . | sort -g | tail -1)
    bps=$(awk -v t="$mt" -v b="$bpt" 'BEGIN {printf "%.0f", t * b}')
    printf '%-8s %7.0f tok/CPU-s %7s bytes/CPU-s  %.3fx mlp (range %s-%s)  %.4f bytes/token\n' \
        "$c" "$mt" "$bps" "$mr" "$lo" "$hi" "$bpt"
    echo "{\"cell\":\"$c\",\"tok_per_cpu_s\":$mt,\"bytes_per_cpu_s\":$bps,\"vs_mlp\":$mr,\"vs_mlp_min\":$lo,\"vs_mlp_max\":$hi,\"bytes_per_token\":$bpt,\"threads\":$THREADS,\"rounds\":$ROUNDS}" >> "$OUT/schemes.jsonl"
done
echo "== JSON ($OUT/schemes.jsonl)"
cat "$OUT/schemes.jsonl"
