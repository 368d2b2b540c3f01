#!/bin/sh
# The positional-encoding study at a scale that can decide (issue 33; doc/study/scale/PLAN.md):
#   scripts/study_scale.sh full [OUT]    the whole plan, about 10 hours of 2 cores, resumable:
#                                        nohup scripts/study_scale.sh full runs/study-scale &
#   scripts/study_scale.sh quick [OUT]   the same pipeline on a toy scale (a minute)
#   scripts/study_scale.sh report [OUT]  the tables, plots and verdicts from OUT's results so
#                                        far (a full study's also into doc/study/scale/)
#   scripts/study_scale.sh plan [OUT]    the jobs, with an estimate of their hours; runs none
# Stop a running study with `kill $(cat OUT/pid)`: every training writes its last checkpoint
# and the next `full` resumes it (a step whose result file exists is skipped; a half-trained
# model resumes from its last checkpoint; a failed job is retried).
#
# Three kinds of job, in this order (seed-major within each, so a study cut short is
# balanced), walked by WORKERS workers (default 2, one thread each) that share OUT:
#   byte CORPUS CELL SEED  a byte model of the S shape (4 layers, d 256, 3.2-3.5M parameters,
#                          tgt_len = mem_len = 128), STEPS steps, bf16 where the CPU has it;
#                          on its test split: bpc at 1x-8x the trained context in both sweep
#                          modes, the needle grid, the recall probe at mem_len 128/256/512,
#                          the shift probe; its valid curve (curve.jsonl).
#   word wt2w SCHEME SEED  a word-level model (configs/wt2_word.yaml's shape) trained at
#                          tgt_len WL without memory on WikiText-2: perplexity per word at
#                          1x-8x in window and memory mode (the word table).
#   retr linuxdoc+r CELL SEED  claim 5: the linuxdoc model CELL/SEED fine-tuned FT_STEPS
#                          steps on linuxdoc with planted facts asked for later
#                          (scripts/retrieval_mix.py); the needle probe at mem_len
#                          128..1024 of it and of the model before (natural text).
# Order: byte seeds 1-3, word, retr, byte seeds 4-5. After every job the report in OUT/report
# is rewritten, so results show as they come.
#
# Environment: WORKERS, THREADS (per run, 1), DATA (../shared/data: enwik8_first3MB,
# wikitext2_tok_*), CORPORA_DIR (corpora: linuxdoc_*, `make data-linuxdoc`), TXL (./txl),
# SEEDS, STEPS, CELLS_ENWIK8, CELLS_LINUXDOC, WORD_SCHEMES, WORD_SEEDS, WSTEPS, RETR_CELLS,
# RETR_SEEDS, FT_STEPS, KEEP_CKPT=1 (keep every checkpoint; by default a model's are removed
# once nothing needs them), DOC (where a full study's report goes, doc/study/scale; empty:
# only OUT/report). A study resumes only with the settings it began with; cells and
# seeds may grow (SEEDS="1 2 3 4 5 6 7" adds two seeds to every byte cell).
set -eu
SCRIPTS=$(cd "$(dirname "$0")" && pwd) # scripts/, or OUT/bin when the study runs from its copies
cd "${STUDY_SCALE_ROOT:-$SCRIPTS/..}"
MODE=${1:-}
case "$MODE" in
full | quick | report | plan) ;;
*) echo "usage: $0 full|quick|report|plan [OUT]" >&2; exit 2 ;;
esac
TXL=${TXL:-./txl}
command -v jq >/dev/null || { echo "$0: needs jq (apt-get install jq)" >&2; exit 2; }
PY=/usr/bin/python3
[ -x $PY ] || PY=python3
THREADS=${THREADS:-1}
WORKERS=${WORKERS:-2}
DATA=${DATA:-../shared/data}
CORPORA_DIR=${CORPORA_DIR:-corpora}
CMDLINE=${STUDY_SCALE_CMD:-"$0 $*"}

if [ "$MODE" = quick ]; then
    OUT=${2:-runs/study-scale-quick}
    SEEDS=${SEEDS:-"1 2"} FIRST=1
    STEPS=${STEPS:-16} WSTEPS=${WSTEPS:-12} FT_STEPS=${FT_STEPS:-8}
    CELLS_ENWIK8=${CELLS_ENWIK8-"mlp t5"} CELLS_LINUXDOC=${CELLS_LINUXDOC-"mlp fire+a absolute"}
    WORD_SCHEMES=${WORD_SCHEMES-"alibi fire"} WORD_SEEDS=${WORD_SEEDS-"1 2"}
    RETR_CELLS=${RETR_CELLS-"mlp absolute"} RETR_SEEDS=${RETR_SEEDS-"1 2"}
    # toy stand-ins: the repository's enwik8 slice and Shakespeare, words of Shakespeare
    BYTE_SHAPE="-c tests/configs/nano.yaml"
    WORD_SHAPE="-c tests/configs/nano.yaml --set data.tokenizer=word --set data.vocab_size=500"
    WL=16 TRIALS=2 LENGTHS=4,8 DEPTHS=0,100 DISTANCES=16,64 MEMS="16 32" RMEMS="32 64"
    OFFSETS=0,1000 EVAL_TOKENS=2000 WEVAL_TOKENS=800 SHIFT_TOKENS=500 VALID_TOKENS=1000
    GAP=24,64 DIST=8,64
else
    OUT=${2:-runs/study-scale}
    SEEDS=${SEEDS:-"1 2 3 4 5"} FIRST=3
    STEPS=${STEPS:-2000} WSTEPS=${WSTEPS:-500} FT_STEPS=${FT_STEPS:-800}
    CELLS_ENWIK8=${CELLS_ENWIK8-"xl mlp hier fire t5 rope alibi absolute"}
    CELLS_LINUXDOC=${CELLS_LINUXDOC-"xl mlp hier fire t5 rope alibi absolute mlp+a hier+a fire+a"}
    WORD_SCHEMES=${WORD_SCHEMES-"absolute rope t5 alibi xl mlp fire hier"} WORD_SEEDS=${WORD_SEEDS-"1 2 3"}
    RETR_CELLS=${RETR_CELLS-"xl mlp hier fire t5 rope alibi absolute"} RETR_SEEDS=${RETR_SEEDS-"1 2"}
    # S: configs/tiny.yaml (4 layers, 4 heads, dropout 0.1, lr 2e-3 cosine to 1e-4, clip
    # 0.25, batch 16) widened to d 256 and tgt_len = mem_len = 128 (doc/performance.md's S)
    BYTE_SHAPE="-c configs/tiny.yaml --set model.d_model=256 --set model.d_head=64
        --set model.d_inner=1024 --set model.tgt_len=128 --set model.mem_len=128"
    WORD_SHAPE="-c configs/wt2_word.yaml --set train.max_minutes=0 --set train.schedule_by=steps"
    WL=128 TRIALS=10 LENGTHS=1,2,4,8 DEPTHS=0,25,50,75,100 DISTANCES="" MEMS="128 256 512"
    RMEMS="256 512 1024" OFFSETS=0,1,1000,100000 EVAL_TOKENS=150000 WEVAL_TOKENS=0
    SHIFT_TOKENS=20000 VALID_TOKENS=50000 GAP=256,1280 DIST=32,2048
fi

# The functions share the shell's variables (POSIX sh has no locals): each names its own with
# a prefix of its initials.

# corpus NAME: the --set flags of its splits
corpus() {
    case $1 in
    enwik8) if [ "$MODE" = quick ]; then co_f=tests/data/enwik8_slice60k.txt.gz; else
                co_f=$DATA/enwik8_first3MB.txt.gz; [ -s "$co_f" ] || co_f=$CORPORA_DIR/enwik8_first3MB.txt.gz; fi
            echo "--set data.train=$co_f --set data.split=[0.9,0.05,0.05]" ;;
    linuxdoc) if [ "$MODE" = quick ]; then
                echo "--set data.train=tests/data/tinyshakespeare.txt.gz --set data.split=[0.9,0.05,0.05]"
            else
                echo "--set data.train=$CORPORA_DIR/linuxdoc_train.txt.gz --set data.split=[1,0,0]" \
                     "--set data.valid=$CORPORA_DIR/linuxdoc_valid.txt.gz --set data.test=$CORPORA_DIR/linuxdoc_test.txt.gz"
            fi ;;
    linuxdoc+r) echo "$(corpus linuxdoc) --set data.train=$OUT/data/linuxdoc_r_train.txt.gz" ;;
    wt2w) if [ "$MODE" = quick ]; then
                echo "--set data.train=tests/data/tinyshakespeare.txt.gz --set data.split=[0.9,0.05,0.05]"
            else # train on 95% of WikiText-2's valid file, test on its test file (wt2_word.yaml)
                echo "--set data.train=$DATA/wikitext2_tok_valid.txt.gz --set data.split=[0.95,0.05,0]" \
                     "--set data.test=$DATA/wikitext2_tok_test.txt.gz"
            fi ;;
    *) echo "$0: unknown corpus '$1'" >&2; exit 2 ;;
    esac
}

# cell NAME: the --set flags of the cell (scheme; "+a": the anchors [bos, para, sent])
cell() {
    ce_c=$1 ce_f=""
    case $ce_c in *+a) ce_f="--set data.anchors=[bos,para,sent]"; ce_c=${ce_c%+a} ;; esac
    echo "--set model.pos_scheme=$ce_c $ce_f"
}

# the jobs in order, one "KIND CORPUS CELL SEED" a line
job_list() {
    byte_seeds() {
        for bs_s in $SEEDS; do
            [ "$1" = first ] && [ "$bs_s" -gt $FIRST ] && continue
            [ "$1" = rest ] && [ "$bs_s" -le $FIRST ] && continue
            for bs_c in $CELLS_ENWIK8; do echo "byte enwik8 $bs_c $bs_s"; done
            for bs_c in $CELLS_LINUXDOC; do echo "byte linuxdoc $bs_c $bs_s"; done
        done
    }
    byte_seeds first
    for jl_s in $WORD_SEEDS; do for jl_c in $WORD_SCHEMES; do echo "word wt2w $jl_c $jl_s"; done; done
    for jl_s in $RETR_SEEDS; do for jl_c in $RETR_CELLS; do echo "retr linuxdoc+r $jl_c $jl_s"; done; done
    byte_seeds rest
}

# step FILE CMD...: runs CMD with stdout into FILE unless FILE exists (atomically: a killed
# step leaves no FILE and runs again); its stderr stays in FILE.err when it fails
step() {
    st_f=$1; shift
    [ -s "$st_f" ] && return 0
    DID=1
    "$@" > "$st_f.part" 2> "$st_f.err" && mv "$st_f.part" "$st_f" && rm -f "$st_f.err"
}

# claim DIR: this study takes the job (its workers share the study's pid; a lock whose study
# is gone is taken over)
claim() {
    if mkdir "$1/.lock" 2>/dev/null; then echo $$ > "$1/.lock/pid"; return 0; fi
    cl_p=$(cat "$1/.lock/pid" 2>/dev/null || echo "")
    if [ -n "$cl_p" ] && ! kill -0 "$cl_p" 2>/dev/null; then echo $$ > "$1/.lock/pid"; return 0; fi
    return 1
}

# train DIR STEPS FLAGS...: trains into DIR/run (resuming DIR/run's last checkpoint) unless
# DIR/train.json exists; train.json gets train_seconds and the start event's params and
# arithmetic, curve.jsonl the validations of the log
train() {
    tr_d=$1 tr_n=$2; shift 2
    [ -s $tr_d/train.json ] && return 0
    if [ -f $tr_d/run/last.safetensors.gz ]; then tr_how="--resume $tr_d/run"; else tr_how="--force"; fi
    tr_e=$((tr_n / 8 > 0 ? tr_n / 8 : 1))
    tr_t0=$(date +%s) DID=1
    # shellcheck disable=SC2086
    $TXL train $tr_how -q "$@" --set train.max_steps=$tr_n \
        --set train.warmup_steps=$((tr_n / 10 > 0 ? tr_n / 10 : 1)) --set train.eval_interval=$tr_e \
        --set train.ckpt_interval=$tr_e --set train.log_interval=$tr_e \
        --set train.eval_tokens=$VALID_TOKENS --set train.threads=$THREADS \
        --set train.precision=auto --set train.out_dir=$tr_d/run > $tr_d/train.json.part 2> $tr_d/train.err || return 1
    jq -c 'select(.event == "eval") | {step, bpc, loss, ppl}' $tr_d/run/log.jsonl > $tr_d/curve.jsonl
    # the first start event: parameters and arithmetic (a resumed run's log has several)
    jq -c 'select(.event == "start") | {params, precision, precision_kernel, blas_core}' $tr_d/run/log.jsonl |
        head -1 > $tr_d/start.part
    jq -c --argjson s $(( $(date +%s) - tr_t0 )) --slurpfile st $tr_d/start.part \
        '. + $st[0] + {train_seconds: $s}' $tr_d/train.json.part > $tr_d/train.json &&
        rm $tr_d/train.json.part $tr_d/start.part
}

# sweeps DIR [--max-tokens N]: the model's test split at 1x-8x in both modes
sweeps() {
    sw_d=$1; shift
    for sw_m in memory window; do
        step $sw_d/sweep-$sw_m.jsonl $TXL eval $sw_d/run/last.safetensors.gz -q --json --threads $THREADS \
            --precision auto --split test "$@" --sweep 1,2,4,8 --sweep-mode $sw_m || return 1
    done
}

probe() { # probe OUTFILE KIND CKPT ARGS...
    pr_f=$1 pr_k=$2 pr_ck=$3; shift 3
    step $pr_f $TXL probe $pr_k $pr_ck -q --json --threads $THREADS --precision auto --split test "$@"
}

byte_job() { # byte_job CORPUS CELL SEED
    by_d=$OUT/$1/$2/s$3
    # shellcheck disable=SC2046
    train $by_d $STEPS $BYTE_SHAPE $(corpus $1) $(cell $2) --set train.seed=$3 || return 1
    sweeps $by_d --max-tokens $EVAL_TOKENS || return 1
    by_ck=$by_d/run/last.safetensors.gz
    probe $by_d/needle.jsonl needle $by_ck --trials $TRIALS --lengths $LENGTHS --depths $DEPTHS --seed $3 || return 1
    by_dist=""; [ -n "$DISTANCES" ] && by_dist="--distances $DISTANCES"
    for by_m in $MEMS; do
        # shellcheck disable=SC2086
        probe $by_d/recall-m$by_m.jsonl recall $by_ck --trials $TRIALS --mode memory --mem-len $by_m $by_dist \
            --seed $3 || return 1
    done
    probe $by_d/shift.jsonl shift $by_ck --offsets $OFFSETS --max-tokens $SHIFT_TOKENS || return 1
    # a model the retrieval jobs start from keeps its last checkpoint until they are done
    if [ "$1" = linuxdoc ] && is_retr_base $2 $3; then rm -f $by_d/run/best.safetensors.gz; else drop_ckpt $by_d; fi
}

is_retr_base() { # is_retr_base CELL SEED
    for ib_c in $RETR_CELLS; do for ib_s in $RETR_SEEDS; do
        [ "$ib_c" = "$1" ] && [ "$ib_s" = "$2" ] && return 0
    done; done
    return 1
}

drop_ckpt() { [ -n "${KEEP_CKPT:-}" ] || [ "$MODE" != full ] || rm -f $1/run/*.safetensors.gz; }

word_job() { # word_job wt2w SCHEME SEED
    wo_d=$OUT/$1/$2/s$3
    # shellcheck disable=SC2046
    train $wo_d $WSTEPS $WORD_SHAPE $(corpus $1) $(cell $2) --set model.tgt_len=$WL --set model.mem_len=0 \
        --set train.seed=$3 || return 1
    if [ "$WEVAL_TOKENS" -gt 0 ]; then sweeps $wo_d --max-tokens $WEVAL_TOKENS; else sweeps $wo_d; fi || return 1
    drop_ckpt $wo_d
}

retr_job() { # retr_job linuxdoc+r CELL SEED
    re_d=$OUT/$1/$2/s$3 re_b=$OUT/linuxdoc/$2/s$3
    # the model it starts from: trained here if no worker has it yet, else waited for
    while [ ! -s $re_b/needle.jsonl ] || [ ! -s $re_b/shift.jsonl ]; do
        mkdir -p $re_b
        if claim $re_b; then
            byte_job linuxdoc $2 $3 || { rm -rf $re_b/.lock; return 1; }
            rm -rf $re_b/.lock
        else
            sleep 20
        fi
    done
    re_bck=$re_b/run/last.safetensors.gz
    if [ ! -s $re_d/train.json ]; then
        [ -f $re_bck ] || { echo "retr $2 seed $3: $re_bck is gone (remove $re_b/shift.jsonl to retrain it)" > $re_d/FAILED; return 1; }
        mkdir -p $OUT/data
        if [ ! -s $OUT/data/linuxdoc_r_train.txt.gz ]; then
            re_src=$(corpus linuxdoc | sed 's/.*data.train=\([^ ]*\).*/\1/')
            $PY $SCRIPTS/retrieval_mix.py $re_src $OUT/data/linuxdoc_r_train.txt.gz --seed 1 --gap $GAP \
                --dist $DIST 2> $OUT/data/linuxdoc_r_train.log || return 1
        fi
        # fine-tuning: the base's weights, a fresh optimiser, lr 1e-3 (resumed as any run)
        re_init="--init-from $re_bck"; [ -f $re_d/run/last.safetensors.gz ] && re_init=""
        # shellcheck disable=SC2046,SC2086
        train $re_d $FT_STEPS $BYTE_SHAPE $(corpus $1) $(cell $2) --set train.seed=$3 \
            --set train.lr=1e-3 $re_init || return 1
    fi
    re_ck=$re_d/run/last.safetensors.gz
    probe $re_d/needle.jsonl needle $re_ck --trials $TRIALS --lengths $LENGTHS --depths $DEPTHS --seed $3 || return 1
    for re_m in $RMEMS; do
        probe $re_d/needle-m$re_m.jsonl needle $re_ck --trials $TRIALS --lengths $LENGTHS --depths $DEPTHS \
            --mode memory --mem-len $re_m --seed $3 || return 1
        probe $re_b/needle-m$re_m.jsonl needle $re_bck --trials $TRIALS --lengths $LENGTHS --depths $DEPTHS \
            --mode memory --mem-len $re_m --seed $3 || return 1
    done
    drop_ckpt $re_d
    drop_ckpt $re_b
}

# run_job KIND CORPUS CELL SEED: skipped when another worker has it; FAILED in its
# directory (with the last lines of the failed step's stderr) when it fails, not when the
# study is being stopped
run_job() {
    rj_d=$OUT/$2/$3/s$4
    mkdir -p $rj_d
    claim $rj_d || return 0
    rm -f $rj_d/FAILED
    if ! ${1}_job $2 $3 $4; then
        if [ -z "${WK_STOP:-}" ] && [ ! -s $rj_d/FAILED ]; then
            rj_b=""; [ $1 = retr ] && rj_b=$OUT/linuxdoc/$3/s$4 # its base model's steps too
            rj_e=$(ls -t $rj_d/*.err ${rj_b:+$rj_b/*.err} 2>/dev/null | while read -r x; do
                [ -s "$x" ] && { echo "$x"; break; }; done)
            echo "$1 $2 $3 seed $4 failed: ${rj_e:+$rj_e: $(tail -3 $rj_e)}" > $rj_d/FAILED
        fi
        rm -rf "$rj_d/.lock"
        return 1
    fi
    rm -rf "$rj_d/.lock"
}

# worker N: walks the job list; OUT/jobs.jsonl gets the seconds of each job run. A TERM
# lets the running txl write its checkpoint and end, then the worker ends (the list is read
# from a file, not a pipe, so that the loop runs in this shell, under its trap).
worker() {
    trap 'WK_STOP=1' TERM INT HUP
    job_list > $OUT/.jobs.$1
    wk_n=0 wk_total=$(wc -l < $OUT/.jobs.$1)
    while [ -z "${WK_STOP:-}" ] && read -r wk_k wk_c wk_cl wk_s; do
        wk_n=$((wk_n + 1))
        wk_t0=$(date +%s) DID=0
        if run_job $wk_k $wk_c $wk_cl $wk_s; then
            wk_t=$(( $(date +%s) - wk_t0 ))
            [ $DID = 1 ] || continue # its results were there (or another worker has it)
            echo "[$wk_n/$wk_total] $wk_k $wk_c $wk_cl seed $wk_s: $wk_t s"
            echo "{\"kind\":\"$wk_k\",\"corpus\":\"$wk_c\",\"cell\":\"$wk_cl\",\"seed\":$wk_s,\"seconds\":$wk_t,\"worker\":$1,\"end\":\"$(date -u +%Y-%m-%dT%H:%M:%SZ)\"}" >> $OUT/jobs.jsonl
        elif [ -n "${WK_STOP:-}" ]; then
            echo "[$wk_n/$wk_total] $wk_k $wk_c $wk_cl seed $wk_s: stopped (resumes on the next run)"
        else
            echo "[$wk_n/$wk_total] $wk_k $wk_c $wk_cl seed $wk_s FAILED: $(cat $OUT/$wk_c/$wk_cl/s$wk_s/FAILED)"
        fi
        [ -n "${WK_STOP:-}" ] || report_quiet
    done < $OUT/.jobs.$1
    rm -f $OUT/.jobs.$1
}

# the report of the results so far into OUT/report (one worker at a time; skipped if busy)
report_quiet() {
    if mkdir $OUT/.report.lock 2>/dev/null; then
        $PY $SCRIPTS/study_scale_report.py $OUT > /dev/null 2>&1 || true
        rmdir $OUT/.report.lock
    fi
}

settings() {
    echo "mode=$MODE steps=$STEPS wsteps=$WSTEPS ft_steps=$FT_STEPS shape=$(echo $BYTE_SHAPE | tr -s ' ')" \
         "wl=$WL trials=$TRIALS lengths=$LENGTHS eval_tokens=$EVAL_TOKENS gap=$GAP dist=$DIST"
}

# the machine, the txl, the corpora: what the results were measured with
manifest() {
    cpu=$(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | sed 's/.*: //')
    flags=$(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | tr ' ' '\n' |
        grep -E '^(avx2|avx512f|avx512_bf16|amx_bf16|amx_tile)$' | tr '\n' ' ')
    ver=$($TXL --version 2>/dev/null | head -1)
    commit=$(cat $OUT/bin/txl.commit 2>/dev/null || git rev-parse --short HEAD 2>/dev/null || echo unknown)
    sums=""
    [ "$MODE" = full ] && [ -s $CORPORA_DIR/linuxdoc.sha256 ] && sums=$(head -4 $CORPORA_DIR/linuxdoc.sha256)
    jq -n -c --arg cmd "$CMDLINE" --arg cpu "$cpu" --arg flags "$flags" --arg ver "$ver" \
        --arg commit "$commit" --arg cores "$(grep -c '^processor' /proc/cpuinfo 2>/dev/null || getconf _NPROCESSORS_ONLN)" --arg settings "$(settings)" \
        --arg workers "$WORKERS" --arg threads "$THREADS" --arg start "$(date -u +%Y-%m-%dT%H:%M:%SZ)" \
        --arg kernel "$(uname -sr)" --arg linuxdoc "$sums" \
        '{event: "start", command: $cmd, cpu: $cpu, cpu_flags: $flags, cores: $cores, kernel: $kernel,
          txl: $ver, commit: $commit, workers: $workers, threads: $threads,
          settings: $settings, start: $start, linuxdoc_sha256: $linuxdoc}'
}

if [ "$MODE" = plan ]; then
    # CPU seconds of one job on one core of the AMX Xeon this was planned on (bf16; measured
    # under load, doc/study/scale/PLAN.md): a training step of S by scheme, 30 s of a
    # training's validations and checkpoints, 110 s of a byte model's sweeps and probes (hier
    # 120), a word step 0.32 s and its sweeps 110 s, a fine-tuning's needle probes 160 s
    job_list | awk -v st=$STEPS -v ws=$WSTEPS -v ft=$FT_STEPS -v w=$WORKERS '
        BEGIN { c["xl"] = 0.239; c["mlp"] = 0.240; c["hier"] = 0.305; c["fire"] = 0.247
                c["t5"] = 0.262; c["rope"] = 0.258; c["alibi"] = 0.240; c["absolute"] = 0.242 }
        { s = $3; sub(/\+a$/, "", s); k = (s in c) ? c[s] : 0.254 }
        $1 == "byte" { t = st * k + 30 + (s == "hier" ? 120 : 110) }
        $1 == "word" { t = ws * 0.32 + 30 + 110 }
        $1 == "retr" { t = ft * k + 30 + 160 }
        { n[$1]++; sum[$1] += t; all += t; print $0 "\t" int(t) " s" }
        END { for (j in n) printf "# %s: %d jobs, %.1f core-hours\n", j, n[j], sum[j] / 3600
              printf "# in all: %.1f core-hours, %.1f hours with %d workers\n", all / 3600, all / 3600 / w, w }'
    exit 0
fi

if [ "$MODE" != report ]; then
    [ -x "$TXL" ] || make -s txl
    if [ "$MODE" = full ]; then
        # the prose corpus, built (checked by its sha256) when it is not there yet
        [ -s $CORPORA_DIR/linuxdoc_test.txt.gz ] || CORPORA=$CORPORA_DIR scripts/get_corpus_linuxdoc.sh >&2 ||
            { echo "$0: could not build the linuxdoc corpus (make data-linuxdoc)" >&2; exit 2; }
        for f in $CORPORA_DIR/linuxdoc_train.txt.gz $CORPORA_DIR/linuxdoc_valid.txt.gz \
                 $CORPORA_DIR/linuxdoc_test.txt.gz $DATA/wikitext2_tok_valid.txt.gz $DATA/wikitext2_tok_test.txt.gz; do
            [ -s "$f" ] || { echo "$0: $f is missing (make data-linuxdoc; DATA names ../shared/data)" >&2; exit 2; }
        done
        [ -s $DATA/enwik8_first3MB.txt.gz ] || [ -s $CORPORA_DIR/enwik8_first3MB.txt.gz ] ||
            { echo "$0: enwik8_first3MB.txt.gz is in neither $DATA nor $CORPORA_DIR (make data)" >&2; exit 2; }
    fi
    # The study runs from copies in OUT/bin: of its scripts, taken at each start, and of txl,
    # taken at the first (its commit in OUT/bin/txl.commit), so that a checkout, a merge or a
    # build in this tree while it runs changes nothing of it, and every model of the study is
    # trained and measured by one binary (remove OUT/bin/txl to take another). It runs in its
    # own process group, so that a TERM to the study reaches every worker and training.
    if [ -z "${STUDY_SCALE_GROUP:-}" ]; then
        if [ -s $OUT/pid ] && kill -0 "$(cat $OUT/pid)" 2>/dev/null; then
            echo "$0: a study runs in $OUT already (pid $(cat $OUT/pid); remove $OUT/pid if it is not this study's)" >&2
            exit 2
        fi
        mkdir -p $OUT/bin
        if [ ! -x $OUT/bin/txl ]; then
            cp "$TXL" $OUT/bin/txl.part && mv $OUT/bin/txl.part $OUT/bin/txl
            echo "$(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git status --porcelain \
                --untracked-files=no 2>/dev/null | grep -q . && echo ' (with uncommitted changes)')" > $OUT/bin/txl.commit
        fi
        for f in study_scale.sh study_report.py study_scale_report.py retrieval_mix.py; do
            cp scripts/$f $OUT/bin/$f
        done
        set -- "$MODE" "$OUT"
        if command -v setsid >/dev/null; then
            STUDY_SCALE_GROUP=1 STUDY_SCALE_ROOT=$PWD STUDY_SCALE_CMD="$CMDLINE" TXL=$OUT/bin/txl \
                exec setsid -w /bin/sh $OUT/bin/study_scale.sh "$@"
        fi
        STUDY_SCALE_GROUP=1 STUDY_SCALE_ROOT=$PWD STUDY_SCALE_CMD="$CMDLINE" TXL=$OUT/bin/txl \
            exec /bin/sh $OUT/bin/study_scale.sh "$@"
    fi
    mkdir -p $OUT
    stamp=$(settings)
    if [ -f $OUT/settings ] && [ "$(cat $OUT/settings)" != "$stamp" ]; then
        echo "$0: $OUT holds a study with other settings ($(cat $OUT/settings)); not mixing them with ($stamp)" >&2
        exit 2
    fi
    echo "$stamp" > $OUT/settings
    echo $$ > $OUT/pid
    manifest >> $OUT/sessions.jsonl
    rm -rf $OUT/.report.lock # a report a stopped study left unfinished
    start=$(date +%s) pids=""
    # a TERM (kill $(cat OUT/pid)): every process of the study's group gets it, each running
    # txl writes its checkpoint, the workers end after it, and then the study
    stop() {
        trap '' TERM INT HUP
        kill -TERM -$$ 2>/dev/null || kill -TERM $pids 2>/dev/null || true
        for p in $pids; do wait $p || true; done
        echo "{\"event\":\"stop\",\"seconds\":$(( $(date +%s) - start )),\"end\":\"$(date -u +%Y-%m-%dT%H:%M:%SZ)\"}" >> $OUT/sessions.jsonl
        rm -f $OUT/pid
        exit 143
    }
    trap stop TERM INT HUP
    i=1
    while [ $i -le $WORKERS ]; do
        worker $i > $OUT/worker-$i.log 2>&1 &
        pids="$pids $!"
        i=$((i + 1))
    done
    echo "$0: $(job_list | wc -l) jobs, $WORKERS workers, logs in $OUT/worker-*.log" >&2
    for p in $pids; do wait $p || true; done
    echo "{\"event\":\"end\",\"seconds\":$(( $(date +%s) - start )),\"end\":\"$(date -u +%Y-%m-%dT%H:%M:%SZ)\"}" >> $OUT/sessions.jsonl
    rm -f $OUT/pid
    failed=$(find $OUT -name FAILED | wc -l)
    echo "$0: done in $(( $(date +%s) - start )) s; $failed failed job(s)" >&2
fi
doc=""
[ "$MODE" != quick ] && grep -q "^mode=full" $OUT/settings 2>/dev/null && doc=${DOC-doc/study/scale}
$PY $SCRIPTS/study_scale_report.py $OUT $doc
[ "$MODE" = report ] || [ "${failed:-0}" -eq 0 ]
