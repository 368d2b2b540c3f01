# lib.sh: what the bench scripts share (sourced; needs TXL, DATA, THREADS).

# the configs of the performance issue: N d H dh di Lq M B
S_SHAPE="4 256 4 64 1024 128 128 16"
M_SHAPE="8 512 8 64 2048 256 256 8"

# txl_train dir N d H dh di Lq M B steps: trains, then prints the mean tokens/s of the timed
# steps (the first two warm up caches and page in buffers); EXTRA_TRAIN: more arguments
txl_train() {
    dir=$1 N=$2 d=$3 H=$4 dh=$5 di=$6 Lq=$7 M=$8 B=$9 steps=${10}
    $TXL train -q --force -c configs/tiny.yaml --set data.train=$DATA \
        --set model.n_layer=$N --set model.d_model=$d --set model.n_head=$H --set model.d_head=$dh \
        --set model.d_inner=$di --set model.tgt_len=$Lq --set model.mem_len=$M \
        --set model.dropout=0.1 --set train.batch_size=$B --set train.max_steps=$((steps + 2)) \
        --set train.warmup_steps=0 --set train.eval_interval=0 --set train.ckpt_interval=0 \
        --set train.log_interval=1 --set train.threads=${TRAIN_THREADS:-$THREADS} \
        --set train.out_dir="$dir" ${EXTRA_TRAIN:-} \
        > "$dir.train.json" 2> "$dir.train.err" || { cat "$dir.train.err" >&2; exit 1; }
    jq -s '[.[] | select(.event == "train" and .step > 2)] | (map(.tok_per_s) | add / length)' "$dir/log.jsonl"
}

