#!/bin/sh
# bench/quant.sh (make bench, make bench-quant): what txl quantize costs in quality, on a
# trained S (4 layers, d 256, 4x64 heads, d_inner 1024, tgt_len = mem_len = 128):
# - bits per byte on held-out text (enwik8_first3MB's test split, all of it) of the
#   checkpoint, of its bf16 and of its q8 version (txl eval, fp32 products; each quantized
#   checkpoint's weights dequantized exactly), and their differences (issue 30's goals:
#   q8 costs at most 0.02 bits per byte, bf16 at most 0.005);
# - greedy samples (txl sample -t 0, 100 bytes: the byte model's tokens) of the bf16 and the
#   q8 checkpoint (each with its default, a bf16 cache) against the fp32 one's (fp32 cache),
#   from PROMPTS prompts (lines of 40 to 200 bytes of the test split): how many agree on all
#   100 tokens, and the mean length of the agreeing prefix;
# - what the decoding caches cost (txl sample --cache): the test split decoded one byte at a
#   time through the cached steps sampling takes, fed the text (bench/cache_quality.c, 16
#   streams, from an empty memory), with an fp32, a bf16 and a q8 cache, at the trained
#   mem_len and 4 times it: bits per byte and their differences.
# The checkpoint: Q_CKPT, else OUT/quant-S (trained here for MINUTES minutes of all cores
# when it does not exist yet: lr 2e-3, cosine by time, batch 16, no dropout; precision
# auto). Environment: Q_CKPT, MINUTES (default 5), PROMPTS (default 20), DATA (directory of
# enwik8_first3MB.txt.gz, default ../shared/data, then corpora/), OUT (default runs/bench;
# results appended to OUT/bench.jsonl), TXL_BIN, BUILD (where bench/cache_quality is; default
# build).
set -eu
cd "$(dirname "$0")/.."
OUT=${OUT:-runs/bench}
TXL=${TXL_BIN:-./txl}
BUILD=${BUILD:-build}
MINUTES=${MINUTES:-5}
PROMPTS=${PROMPTS:-20}
CORPUS=${DATA:-../shared/data}/enwik8_first3MB.txt.gz
[ -f "$CORPUS" ] || CORPUS=corpora/enwik8_first3MB.txt.gz
[ -f "$CORPUS" ] || { echo "bench-quant: no enwik8_first3MB.txt.gz in \$DATA, ../shared/data or corpora/ (make data)" >&2; exit 2; }
command -v jq >/dev/null || { echo "bench: needs jq" >&2; exit 2; }
mkdir -p "$OUT"
W="$OUT/quant.d"
rm -rf "$W"
mkdir -p "$W"
emit() { echo "$1" >> "$OUT/bench.jsonl"; }

CK=${Q_CKPT:-}
if [ -z "$CK" ]; then
    d="$OUT/quant-S"
    if [ ! -f "$d/best.safetensors.gz" ]; then
        echo "quant: training S on $(basename "$CORPUS") for $MINUTES minutes ($d)"
        $TXL train -q --force -c configs/tiny.yaml --set data.train="$CORPUS" \
            --set data.split=[0.9,0.05,0.05] --set model.n_layer=4 --set model.d_model=256 \
            --set model.n_head=4 --set model.d_head=64 --set model.d_inner=1024 \
            --set model.tgt_len=128 --set model.mem_len=128 --set model.dropout=0 \
            --set train.batch_size=16 --set train.lr=2.0e-3 --set train.schedule=cosine \
            --set train.schedule_by=time --set train.warmup_steps=200 --set train.lr_min=1.0e-4 \
            --set train.max_steps=1000000 --set train.max_minutes="$MINUTES" \
            --set train.eval_interval=0 --set train.eval_tokens=0 --set train.ckpt_interval=0 \
            --set train.precision=auto --set train.out_dir="$d" > "$d.json" 2> "$d.err" \
            || { cat "$d.err" >&2; exit 1; }
    fi
    CK="$d/best.safetensors.gz"
fi
$TXL quantize "$CK" --type bf16 -o "$W/bf16.safetensors" -q
$TXL quantize "$CK" --type q8 -o "$W/q8.safetensors" -q
CPU=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
echo "quant: $CK ($($TXL info "$CK" --json | jq -r '"step \(.step), \(.params) params"')), $CPU"

bpc() { $TXL eval "$1" --split test --json -q --threads 0 | jq .bpc; }
b32=$(bpc "$CK") b16=$(bpc "$W/bf16.safetensors") b8=$(bpc "$W/q8.safetensors")
for w in bf16 q8; do
    if [ "$w" = bf16 ]; then b=$b16 g=0.005; else b=$b8 g=0.02; fi
    mb=$($TXL info "$W/$w.safetensors" --json | jq .weight_bytes)
    awk -v w="$w" -v b="$b" -v f="$b32" -v g="$g" -v mb="$mb" 'BEGIN {
        d = b - f
        printf "quant: %s (%.1f MB of weights): test bpc %.4f against fp32 %.4f: %+.4f bits per byte; goal at most %g: %s\n", w, mb / 1048576, b, f, d, g, (d <= g ? "ok" : "short") }'
    emit "{\"what\":\"quant_bpc\",\"weights\":\"$w\",\"test_bpc\":$b,\"fp32_test_bpc\":$b32,\"weight_bytes\":$mb}"
done

# prompts: lines of 40 to 200 bytes from the test split (the file's last 5%), spread out
size=$(gzip -dc "$CORPUS" | wc -c)
gzip -dc "$CORPUS" | tail -c $((size / 20)) | awk 'length($0) >= 40 && length($0) <= 200' \
    > "$W/lines.txt"
n=$(wc -l < "$W/lines.txt")
awk -v n="$n" -v p="$PROMPTS" 'NR % int(n / p > 1 ? n / p : 1) == 0 && c < p {print; c++}' \
    "$W/lines.txt" > "$W/prompts.txt"
np=$(wc -l < "$W/prompts.txt")
greedy() { # NAME CKPT: the first 100 bytes of each prompt's greedy sample, W/NAME.i
    i=0
    while IFS= read -r line; do
        i=$((i + 1))
        $TXL sample "$2" --prompt="$line" -t 0 -n 100 -q --threads 1 > "$W/out"
        head -c 100 "$W/out" > "$W/$1.$i"
    done < "$W/prompts.txt"
}
greedy fp32 "$CK"
for w in bf16 q8; do
    greedy "$w" "$W/$w.safetensors"
    same=0 sum=0 i=0
    while [ $i -lt "$np" ]; do
        i=$((i + 1))
        if cmp -s "$W/fp32.$i" "$W/$w.$i"; then
            k=$(wc -c < "$W/fp32.$i")
        else # cmp: "... differ: byte K, line L" (K counts from 1)
            k=$(($(cmp "$W/fp32.$i" "$W/$w.$i" 2>/dev/null | sed -n 's/.*differ: byte \([0-9]*\).*/\1/p') - 1))
            [ $k -ge 0 ] || k=$(wc -c < "$W/$w.$i") # EOF on one side
        fi
        [ "$k" -ge 100 ] && same=$((same + 1))
        sum=$((sum + k))
    done
    mean=$(awk -v s=$sum -v p="$np" 'BEGIN {printf "%.1f", s / p}')
    echo "quant: greedy $w against fp32: $same of $np prompts agree on all 100 tokens; the agreeing prefix is $mean tokens on average"
    emit "{\"what\":\"quant_greedy\",\"weights\":\"$w\",\"prompts\":$np,\"agree_100\":$same,\"mean_prefix\":$mean}"
done

# the decoding caches: the test split (the file's last 5%) through each, byte by byte
CQ=$BUILD/bench/cache_quality
if [ -x "$CQ" ]; then
    mem=$($TXL info "$CK" --json | jq .config.model.mem_len)
    OPENBLAS_NUM_THREADS=1 "$CQ" "$CK" "$CORPUS" 0.95 $((size / 20 - 64)) 16 "$mem" $((4 * mem)) \
        > "$W/cache.jsonl" || exit 1
    while read -r j; do
        echo "$j" | jq -r '[.mem_len, .bytes, .streams, .fp32_bpc, .bf16_bpc, .q8_bpc] | @tsv' |
            awk '{printf "quant: decoding cache at mem_len %d (%d test bytes, %d streams): fp32 %.5f bpc, bf16 %+.5f bits per byte, q8 %+.5f\n", $1, $2, $3, $4, $5 - $4, $6 - $4}'
        emit "$(echo "$j" | jq -c '{what: "quant_cache"} + .')"
    done < "$W/cache.jsonl"
else
    echo "quant: $CQ not built (make $CQ): the caches' cost not measured"
fi
