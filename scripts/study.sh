#!/bin/sh
# The positional-encoding study, with error bars: one command.
#   scripts/study.sh full [OUT]    the study of doc/study/README.md (hours on 2 cores)
#   scripts/study.sh quick [OUT]   the same pipeline on a toy scale (a minute): a plumbing test
#   scripts/study.sh report [OUT]  only rebuild the tables, plots and results.jsonl from OUT
# For every corpus x cell x seed it trains one model (same data, steps and seeds everywhere;
# only the studied keys differ), then evaluates it on the corpus's test split: bpc at 1x..8x
# the trained context in both sweep modes, the needle grid, the recall curve at three memory
# lengths, and the translation-invariance probe. Every result is a file in
# OUT/CORPUS/CELL/sSEED/; a step whose file exists is not run again, so an interrupted study
# resumes where it stopped (a half-trained model resumes from its last checkpoint).
# scripts/study_report.py then writes OUT/results.jsonl and the tables, plots and
# per-claim comparisons into OUT/report/ (full: also doc/study/ when DOC=1).
#
# Cells: a scheme, "+a" with the anchors [bos, para, sent], "@N" with model.mlp_max_dist N.
# Environment: CELLS, SEEDS, STEPS, THREADS (per run, default 1), CORPORA (names below),
# DATA (where the corpora are, default ../shared/data), TXL (default ./txl), KEEP_CKPT=1
# (full: keep each model's checkpoints; by default they are removed once its results are in).
# Several workers can share one OUT (each run is claimed with a lock directory).
set -eu
cd "$(dirname "$0")/.."
MODE=${1:-}
case "$MODE" in
full | quick | report) ;;
*) echo "usage: $0 full|quick|report [OUT]" >&2; exit 2 ;;
esac
TXL=${TXL:-./txl}
[ -x "$TXL" ] || make -s txl
command -v jq >/dev/null || { echo "$0: needs jq (apt-get install jq)" >&2; exit 2; }
PY=/usr/bin/python3
[ -x $PY ] || PY=python3
THREADS=${THREADS:-1}

if [ "$MODE" = quick ]; then
    OUT=${2:-runs/study-quick}
    CELLS=${CELLS:-"mlp hier+a absolute"}
    SEEDS=${SEEDS:-"1 2"}
    STEPS=${STEPS:-12}
    CORPORA=${CORPORA:-"shakespeare"}
    CONFIG=tests/configs/nano.yaml
    TRIALS=2 LENGTHS=4,8 DEPTHS=0,100 DISTANCES=16,64 MEMS="16 32" OFFSETS=0,1000
    EVAL_TOKENS=2000 SHIFT_TOKENS=500
else
    OUT=${2:-doc/study/runs} # the result files are committed; checkpoints are not
    CELLS=${CELLS:-"xl mlp hier rope alibi absolute none mlp+a hier+a rope+a absolute+a mlp@128 mlp@512"}
    SEEDS=${SEEDS:-"1 2 3"}
    STEPS=${STEPS:-1500}
    CORPORA=${CORPORA:-"enwik8 wikitext2"}
    CONFIG=configs/tiny.yaml
    TRIALS=10 LENGTHS=1,2,4,8 DEPTHS=0,25,50,75,100 DISTANCES="" MEMS="64 128 256"
    OFFSETS=0,1,1000,100000 EVAL_TOKENS=50000 SHIFT_TOKENS=20000
fi
DATA=${DATA:-../shared/data}

# corpus NAME: the --set flags that give its train/valid/test splits
corpus() {
    case $1 in
    shakespeare) echo "--set data.train=tests/data/tinyshakespeare.txt.gz --set data.split=[0.9,0.05,0.05]" ;;
    enwik8) echo "--set data.train=$DATA/enwik8_first3MB.txt.gz --set data.split=[0.9,0.05,0.05]" ;;
    wikitext2) # prose with paragraphs: train on 95% of the valid file, test on the test file
        echo "--set data.train=$DATA/wikitext2_tok_valid.txt.gz --set data.split=[0.95,0.05,0]" \
             "--set data.test=$DATA/wikitext2_tok_test.txt.gz" ;;
    *) echo "$0: unknown corpus '$1'" >&2; exit 2 ;;
    esac
}

# cell NAME: the --set flags of the cell (scheme, anchors, mlp_max_dist)
cell() {
    c=$1 flags=""
    case $c in *+a) flags="--set data.anchors=[bos,para,sent]"; c=${c%+a} ;; esac
    case $c in *@*) flags="$flags --set model.mlp_max_dist=${c#*@}"; c=${c%@*} ;; esac
    echo "--set model.pos_scheme=$c $flags"
}

# step FILE CMD...: runs CMD with stdout into FILE unless FILE exists (atomically: a killed
# step leaves no file and runs again)
step() {
    f=$1; shift
    [ -s "$f" ] && return 0
    "$@" > "$f.part" && mv "$f.part" "$f"
}

# claim DIR: this worker takes the run (several workers may share OUT: `scripts/study.sh full &`
# twice); a lock whose worker is gone is taken over
claim() {
    if mkdir "$1/.lock" 2>/dev/null; then echo $$ > "$1/.lock/pid"; return 0; fi
    p=$(cat "$1/.lock/pid" 2>/dev/null || echo "")
    if [ -n "$p" ] && ! kill -0 "$p" 2>/dev/null; then echo $$ > "$1/.lock/pid"; return 0; fi
    return 1
}

run_one() { # run_one CORPUS CELL SEED
    d=$OUT/$1/$2/s$3
    mkdir -p $d
    claim $d || { echo "   (another worker has it)" >&2; return 0; }
    trap 'rm -rf "$d/.lock"' EXIT
    if [ ! -s $d/train.json ]; then
        if [ -f $d/run/last.safetensors.gz ]; then how="--resume $d/run"; else how="--force"; fi
        t0=$(date +%s)
        # shellcheck disable=SC2046
        $TXL train -c $CONFIG $how -q $(corpus $1) $(cell $2) \
            --set train.seed=$3 --set train.max_steps=$STEPS \
            --set train.warmup_steps=$((STEPS / 10 > 0 ? STEPS / 10 : 1)) \
            --set train.eval_interval=$STEPS --set train.ckpt_interval=$((STEPS / 4 > 0 ? STEPS / 4 : 1)) \
            --set train.eval_tokens=$EVAL_TOKENS --set train.threads=$THREADS \
            --set train.out_dir=$d/run > $d/train.json.part 2> $d/train.err || return 1
        # the seconds of this invocation (a resumed run: of its last part only)
        jq -c --argjson s $(( $(date +%s) - t0 )) '. + {train_seconds: $s}' $d/train.json.part \
            > $d/train.json && rm $d/train.json.part
    fi
    ck=$d/run/last.safetensors.gz
    q="-q --json --threads $THREADS --split test"
    for mode in memory window; do
        step $d/sweep-$mode.jsonl $TXL eval $ck $q --max-tokens $EVAL_TOKENS --sweep 1,2,4,8 --sweep-mode $mode
    done
    step $d/needle.jsonl $TXL probe needle $ck $q --trials $TRIALS --lengths $LENGTHS --depths $DEPTHS --seed $3
    for m in $MEMS; do
        dist=""; [ -n "$DISTANCES" ] && dist="--distances $DISTANCES"
        # shellcheck disable=SC2086
        step $d/recall-m$m.jsonl $TXL probe recall $ck $q --trials $TRIALS --mode memory --mem-len $m $dist --seed $3
    done
    step $d/shift.jsonl $TXL probe shift $ck $q --offsets $OFFSETS --max-tokens $SHIFT_TOKENS
    [ -z "${KEEP_CKPT:-}" ] && [ "$MODE" = full ] && rm -f $d/run/*.safetensors.gz # results are in
    rm -rf "$d/.lock"
    trap - EXIT
}

if [ "$MODE" != report ]; then
    mkdir -p $OUT
    # a study resumes only with the settings it started with (cells and seeds may grow)
    stamp="mode=$MODE steps=$STEPS config=$CONFIG trials=$TRIALS lengths=$LENGTHS eval_tokens=$EVAL_TOKENS"
    if [ -f $OUT/settings ] && [ "$(cat $OUT/settings)" != "$stamp" ]; then
        echo "$0: $OUT holds a study with other settings ($(cat $OUT/settings)); not mixing them with ($stamp)" >&2
        exit 2
    fi
    echo "$stamp" > $OUT/settings
    start=$(date +%s)
    n=0 total=0
    for c in $CORPORA; do for cl in $CELLS; do for s in $SEEDS; do total=$((total + 1)); done; done; done
    for s in $SEEDS; do # seed-major: after one pass every cell has a result
        for c in $CORPORA; do
            for cl in $CELLS; do
                n=$((n + 1))
                echo "[$n/$total] $c $cl seed $s ($(( $(date +%s) - start )) s)" >&2
                run_one $c $cl $s || { echo "$0: $c $cl seed $s failed: see $OUT/$c/$cl/s$s/train.err" >&2; exit 1; }
            done
        done
    done
    echo "done in $(( $(date +%s) - start )) s" >&2
fi
$PY scripts/study_report.py "$OUT" ${DOC:+doc/study}
