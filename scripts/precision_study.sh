#!/bin/sh
# precision_study.sh: bf16 against fp32 learning the same config (issue 29): SEEDS seeds x
# {fp32, bf16}, STEPS steps each, the final valid bpc of every run and, per precision, the
# mean and the seeds' spread (max - min). Resumable: a finished run (summary.json) is kept,
# an interrupted one resumes from its last checkpoint. Results are appended to
# $OUT/results.tsv as each run ends. Run it with nohup; rerun it to continue.
# usage: [CFG=configs/tiny.yaml] [DATA=...] [SEEDS="1 2 3"] [STEPS=1500] [OUT=...] \
#        scripts/precision_study.sh
set -eu
cd "$(dirname "$0")/.."
TXL=${TXL_BIN:-./txl}
# the study's own copy of the binary: a rebuild of ./txl does not change it half-way
mkdir -p "${OUT:-runs/precision_study}"
[ -x "${OUT:-runs/precision_study}/txl" ] || cp "$TXL" "${OUT:-runs/precision_study}/txl"
TXL=${OUT:-runs/precision_study}/txl
CFG=${CFG:-configs/tiny.yaml}
DATA=${DATA:-/work/shared/data/enwik8_first3MB.txt.gz}
SEEDS=${SEEDS:-1 2 3}
STEPS=${STEPS:-1500}
OUT=${OUT:-runs/precision_study}
mkdir -p "$OUT"
[ -s "$OUT/results.tsv" ] || printf 'precision\tseed\tsteps\tvalid_bpc\tbest_valid_bpc\telapsed_s\ttok_per_s\n' > "$OUT/results.tsv"
for seed in $SEEDS; do
    for p in fp32 bf16; do
        d="$OUT/$p-$seed"
        [ -s "$d/summary.json" ] && [ "$(jq .step "$d/summary.json")" = "$STEPS" ] && continue
        if [ -e "$d/last.safetensors.gz" ]; then
            nice $TXL train -q --resume "$d/last.safetensors.gz" > "$d.out" 2> "$d.err"
        else
            nice $TXL train -q -c "$CFG" --set data.train="$DATA" --set train.seed="$seed" \
                --set train.max_steps="$STEPS" --set train.precision="$p" \
                --set train.eval_interval=250 --set train.ckpt_interval=250 \
                --set train.out_dir="$d" > "$d.out" 2> "$d.err"
        fi
        vb=$(jq -s '[.[] | select(.event == "eval")] | last | .bpc' "$d/log.jsonl")
        tps=$(jq -s '[.[] | select(.event == "train")] | (map(.tok_per_s) | add / length)' "$d/log.jsonl")
        printf '%s\t%s\t%s\t%s\t%s\t%s\t%.0f\n' "$p" "$seed" "$STEPS" "$vb" \
            "$(jq .best_valid_bpc "$d/summary.json")" "$(jq .elapsed_s "$d/summary.json")" \
            "$tps" >> "$OUT/results.tsv"
    done
done
# per precision: mean and spread of the final valid bpc
awk -F'\t' 'NR > 1 { n[$1]++; s[$1] += $4; if (!($1 in lo) || $4 < lo[$1]) lo[$1] = $4;
    if (!($1 in hi) || $4 > hi[$1]) hi[$1] = $4 }
    END { for (p in n) printf "%s: %d seeds, final valid bpc mean %.4f, spread %.4f (%.4f-%.4f)\n",
          p, n[p], s[p] / n[p], hi[p] - lo[p], lo[p], hi[p] }' "$OUT/results.tsv" | sort > "$OUT/summary.txt"
cat "$OUT/summary.txt"
