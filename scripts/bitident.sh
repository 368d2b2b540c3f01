#!/bin/sh
# bitident.sh: is a txl binary bit-identical to another? A fixed small training run per
# scheme (a fixed seed, one thread, dropout on, a validation and a checkpoint halfway), and
# of each: the loss of every step (log.jsonl), the sha256 of every tensor's data in the last
# and best checkpoints (the data, not the file: the metadata holds times), the log's events
# but for their times, speeds and the version, and a greedy and a seeded sample of the
# last. A refactor must leave all of it the same.
#
#   scripts/bitident.sh TXL                  the record of one binary, on stdout
#   scripts/bitident.sh TXL_OLD TXL_NEW      both records and their differences (exit 1 if any)
#
# SCHEMES (default: xl mlp rope hier; each on bytes), VARIANTS (default: bpe word threads
# skips: xl on a vocabulary built from the train split, bpe with anchors; xl on 2 threads,
# so 2 replicas, with 2 micro-batches and terms events; xl for 150 steps skipping outliers)
# and STEPS (default: 40) pick the runs; EXTRA adds --set options to every run (e.g.
# EXTRA="model.pre_lnorm=true"). The tensors are read by tools/st_reader.py (python3,
# standard library only). About a second a run.
set -eu
cd "$(dirname "$0")/.."
[ $# -ge 1 ] && [ $# -le 2 ] || { sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
SCHEMES=${SCHEMES:-xl mlp rope hier}
VARIANTS=${VARIANTS-bpe word threads skips}
STEPS=${STEPS:-40}
EXTRA=${EXTRA:-}
CORPUS=$(pwd)/tests/data/tinyshakespeare.txt.gz
TOOLS=$(pwd)/tools
TMP=$(mktemp -d "${TMPDIR:-/tmp}/bitident.XXXXXX")
trap 'rm -rf "$TMP"' EXIT

# tensors CKPT: "NAME DTYPE SHAPE SHA256" per tensor, in file order
tensors() {
    python3 -c '
import hashlib, sys
sys.path.insert(0, sys.argv[1])
import st_reader
tensors, _ = st_reader.load(sys.argv[2])
for name, (dtype, shape, raw) in tensors.items():
    print(name, dtype, "x".join(map(str, shape)) or "-", hashlib.sha256(raw).hexdigest())
' "$TOOLS" "$1"
}

# run_one TXL LABEL "KEY=VALUE ...": one run's record lines, each starting with LABEL
run_one() {
    bin=$1 s=$2
    dir=$TMP/run-$$-$s
    sets="model.n_layer=2 model.d_model=64 model.n_head=2 model.d_head=32 model.d_inner=128
          model.tgt_len=32 model.mem_len=32 model.dropout=0.1 data.train=$CORPUS
          train.batch_size=4 train.max_steps=$STEPS train.warmup_steps=5 train.log_interval=1
          train.eval_interval=$((STEPS / 2)) train.eval_tokens=4096
          train.ckpt_interval=$((STEPS / 2)) train.threads=1 train.seed=7 train.out_dir=$dir
          $3 $EXTRA"
    args=""
    for kv in $sets; do args="$args --set $kv"; done
    # shellcheck disable=SC2086
    if ! OMP_NUM_THREADS=1 "$bin" train -c configs/tiny.yaml $args -q \
            >"$TMP/out" 2>"$TMP/err"; then
        echo "$s train failed: $(head -c 300 "$TMP/err" | tr '\n' ' ')"
        return
    fi
    jq -r --arg s "$s" 'select(.event == "train") |
        "\($s) loss \(.step) \(.step_loss // .loss)"' "$dir/log.jsonl"
    jq -r --arg s "$s" 'select(.event == "eval" or .event == "valid") |
        "\($s) valid \(.step) \(.valid_loss // .loss)"' "$dir/log.jsonl"
    # the log's events whole, but for what the clock and the machine's load decide
    jq -c --arg s "$s" 'del(.elapsed_s, .tok_per_s, .comm_s, .comm_exposed_s,
        .gemm_share, .cpu_s, .peak_rss_mb, .eta_s, .seconds, .version)
        | if .argv then .argv[0] = "txl" else . end
        | walk(if type == "string" then split($dir) | join("RUN") else . end)
        | "\($s) log \(tojson)"' --arg dir "$dir" -r "$dir/log.jsonl"
    for c in last best; do
        tensors "$dir/$c.safetensors.gz" | sed "s/^/$s $c /"
    done
    for how in "greedy --temperature 0" "seeded --seed 11 --temperature 0.9"; do
        # shellcheck disable=SC2086
        OMP_NUM_THREADS=1 "$bin" sample "$dir/last.safetensors.gz" --prompt "ROMEO:" \
            -n 200 ${how#* } --threads 1 -q >"$TMP/sample" 2>"$TMP/err" ||
            echo "$s ${how%% *} failed: $(head -c 300 "$TMP/err" | tr '\n' ' ')"
        # the first 200 bytes, and the output's length apart (txl 0.1 ended a sample
        # without a newline)
        echo "$s ${how%% *} $(head -c 200 "$TMP/sample" | sha256sum | cut -c1-64)" \
            "$(wc -c <"$TMP/sample") bytes: $(head -c 50 "$TMP/sample" | LC_ALL=C tr -c '[:print:]' '.')"
    done
    rm -rf "$dir"
}

# record TXL: the record of one binary: each scheme on bytes, then xl on each vocabulary
record() {
    bin=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
    for s in $SCHEMES; do
        run_one "$bin" "$s" "model.pos_scheme=$s"
    done
    for v in $VARIANTS; do
        case $v in
        bpe) run_one "$bin" "xl+bpe" "data.tokenizer=bpe data.vocab_size=300 data.anchors=[bos,para]" ;;
        word) run_one "$bin" "xl+word" "data.tokenizer=word" ;;
        threads) run_one "$bin" "xl+threads" "train.threads=2 train.grad_accum=2
                      train.term_stats_interval=10" ;;
        skips) run_one "$bin" "xl+skips" "train.max_steps=150 train.skip_outlier=1.1" ;;
        *) echo "bitident: unknown variant $v" >&2; exit 2 ;;
        esac
    done
}

if [ $# -eq 1 ]; then
    record "$1"
    exit 0
fi
record "$1" >"$TMP/a"
record "$2" >"$TMP/b"
if cmp -s "$TMP/a" "$TMP/b"; then
    echo "bitident: identical ($(grep -c ' loss ' "$TMP/a") step losses, $(grep -c -e ' last ' -e ' best ' "$TMP/a") tensors, $(grep -c -e ' greedy ' -e ' seeded ' "$TMP/a") samples; schemes: $SCHEMES; variants: $VARIANTS)"
    exit 0
fi
echo "bitident: $1 and $2 differ (< $1, > $2):"
diff "$TMP/a" "$TMP/b"
exit 1
