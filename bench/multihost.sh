#!/bin/sh
# make bench-multihost: the measurements of doc/mpi.md, on two simulated machines
# (tests/mpi/netns.sh: network namespaces joined by a veth pair, TCP only, one core and one
# rank each). For each link rate (tbf on the veth): the link itself (bench/mpi_link.c: the
# latency, one way's bandwidth, the 2-rank sums' times against their size), then S
# and M (bench/lib.sh's shapes) on 2 ranks with train.comm_overlap off, on and auto. Once:
# S and M on 1 rank with the whole batch (the scaling efficiency's base) and with half of it
# (one rank's share of 2: the compute of doc/mpi.md's step-time model).
#
# Every measurement is one JSON line of RESULTS (default runs/multihost/results.jsonl), with
# the date and the load average before and after it; a rerun skips those the file holds, so
# an interrupted run resumes (delete the file to measure afresh). bench/multihost_model.sh
# prints the table and the model from it (run at the end).
# Environment: LINKS (default "10gbit@200 1gbit@200": RATE@US, the rate and the delay each
# way in microseconds, as tests/mpi/netns.sh's link_shape takes them; "10gbit" no delay),
# CONFIGS (default "S M"), S_STEPS (default 6), M_STEPS (default 3: timed steps, after 2 to warm up), NICE (the runs' niceness, default 0;
# -10 keeps most of each core when other work at nice 10 shares the machine), RESULTS,
# TXL_BIN, MPI_LINK_BIN, MH_DELAY_BIN. Needs root and ip netns (as make test-multihost), jq, and the
# machine to itself: the load is recorded (and the niceness), not controlled.
set -u
cd "$(dirname "$0")/.."
TXL=$(readlink -f "${TXL_BIN:-./txl}")
LINK=${MPI_LINK_BIN:-build-mpi/bench/mpi_link}
RESULTS=${RESULTS:-runs/multihost/results.jsonl}
LINKS=${LINKS:-10gbit@200 1gbit@200}
CONFIGS=${CONFIGS:-S M}
S_STEPS=${S_STEPS:-6}
M_STEPS=${M_STEPS:-3}
MH_NICE=${NICE:-0}
DATA=tests/data/tinyshakespeare.txt.gz
. bench/lib.sh # S_SHAPE, M_SHAPE
. tests/mpi/netns.sh
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
command -v jq >/dev/null || { echo "bench-multihost: needs jq" >&2; exit 2; }
mh_can || { echo "bench-multihost: cannot run here: $MH_WHY" >&2; exit 2; }
mkdir -p "$(dirname "$RESULTS")"
touch "$RESULTS"
W=$(mktemp -d "${TMPDIR:-/tmp}/txl-multihost.XXXXXX")
PAIR= # the side-by-side runs under way (outside the namespaces)
trap '[ -z "$PAIR" ] || kill $PAIR 2>/dev/null; link_down; rm -rf "$W"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP
link_up "$W" || { echo "bench-multihost: could not set up the namespaces" >&2; exit 1; }

load() { cut -d' ' -f1 /proc/loadavg; }
have() { jq -e -s --arg k "$1" 'any(.[]; .key == $k)' "$RESULTS" >/dev/null; }
emit() { echo "$1" >> "$RESULTS"; echo "$1"; }
CPU=$(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -1)

# shape_args S|M: the --set arguments of the shape (bench/lib.sh)
shape_args() {
    eval "set -- \$$1_SHAPE"
    echo "--set model.n_layer=$1 --set model.d_model=$2 --set model.n_head=$3 --set model.d_head=$4
          --set model.d_inner=$5 --set model.tgt_len=$6 --set model.mem_len=$7"
}
full_batch() { eval "set -- \$$1_SHAPE"; echo "$8"; }

# train CFG LINK NP BATCH OVERLAP: one measurement (OVERLAP off, on or auto; auto runs its
# trial, 7 steps, then the timed steps with its decision; pair: two 1-rank runs side by side,
# one per core, no communication: one rank's compute as it is when the other core computes)
train() {
    cfg=$1 link=$2 np=$3 b=$4 ov=$5
    key="train|$cfg|$link|$np|$b|$ov"
    have "$key" && { echo "have $key"; return 0; }
    eval "timed=\$${cfg}_STEPS; set -- \$${cfg}_SHAPE"
    ntok=$((b * $6))
    first=3
    [ "$ov" = auto ] && first=8
    steps=$((first - 1 + timed))
    out=$W/run
    rm -rf "$out" "$out"1
    l0=$(load) d=$(date -u +%Y-%m-%dT%H:%M:%SZ)
    # shellcheck disable=SC2046
    set -- train -q --force -c configs/tiny.yaml --set data.train=$DATA $(shape_args "$cfg") \
        --set model.dropout=0.1 --set train.batch_size="$b" --set train.max_steps=$steps \
        --set train.warmup_steps=0 --set train.eval_interval=0 --set train.ckpt_interval=0 \
        --set train.log_interval=1 --set train.threads=1
    if [ "$ov" = pair ]; then
        timeout -k 5 1800 nice -n "$MH_NICE" mpirun -np 1 --bind-to none taskset -c 1 "$TXL" "$@" \
            --set train.out_dir="$out"1 >/dev/null 2>"$W/err1" &
        p1=$!
        timeout -k 5 1800 nice -n "$MH_NICE" mpirun -np 1 --bind-to none taskset -c 0 "$TXL" "$@" \
            --set train.out_dir="$out" >/dev/null 2>"$W/err" &
        PAIR="$p1 $!"
        wait $!
        rc=$?
        wait $p1 || rc=1
        PAIR=
        cat "$W/err1" >> "$W/err"
    else
        mh_mpirun 1800 "$np" "$TXL" "$@" --set train.comm_overlap="$ov" --set train.out_dir="$out" \
            >/dev/null 2>"$W/err"
        rc=$?
    fi
    if [ $rc -ne 0 ]; then
        echo "bench-multihost: $key failed:" >&2
        cat "$W/err" >&2
        return 1
    fi
    r=$(jq -s 'map(select(.event == "start"))[0].ranks' "$out/log.jsonl")
    if [ "$r" != "$np" ]; then
        echo "bench-multihost: $key ran on $r ranks, not $np: is $TXL an MPI build (make MPI=1)?" >&2
        return 1
    fi
    emit "$(jq -s -c --arg key "$key" --arg cfg "$cfg" --arg link "$link" --arg ov "$ov" \
        --argjson np "$np" --argjson b "$b" --argjson first $first --argjson ntok $ntok --arg d "$d" \
        --argjson l0 "$l0" --argjson l1 "$(load)" --argjson nice "$MH_NICE" --arg cpu "$CPU" '
        (map(select(.event == "start"))[0]) as $s | (map(select(.event == "overlap"))[0]) as $o |
        map(select(.event == "train" and .step >= $first)) as $t | ($t | length) as $n |
        {key: $key, kind: "train", config: $cfg, link: $link, ranks: $np, batch: $b,
         overlap: $ov, params: $s.params, steps: $n,
         step_s: ($t | map($ntok / .tok_per_s) | add / $n),
         tok_s: ($ntok / ($t | map($ntok / .tok_per_s) | add / $n)),
         comm_s: ($t | map(.comm_s) | add / $n), exposed_s: ($t | map(.comm_exposed_s) | add / $n),
         decided: (if $o then {on: $o.on, step: $o.step, blocking_step_s: $o.blocking_step_s,
                   blocking_comm_s: $o.blocking_comm_s, overlapped_step_s: $o.overlapped_step_s}
                   else null end),
         date: $d, load: [$l0, $l1], nice: $nice, cpu: $cpu}' "$out/log.jsonl" $([ "$ov" = pair ] && echo "$out"1/log.jsonl))"
}

# probe LINK: the link's latency, bandwidth and allreduce times (64 MiB at most, 5 each)
probe() {
    key="link|$1"
    have "$key" && { echo "have $key"; return 0; }
    l0=$(load) d=$(date -u +%Y-%m-%dT%H:%M:%SZ)
    mh_mpirun 600 2 "$LINK" 64 5 > "$W/probe" 2>"$W/err" || { cat "$W/err" >&2; return 1; }
    emit "$(jq -s -c --arg key "$key" --arg link "$1" --arg d "$d" --argjson l0 "$l0" \
        --argjson l1 "$(load)" --argjson nice "$MH_NICE" '
        {key: $key, kind: "link", link: $link,
         latency_us: (map(select(.probe == "latency"))[0].us),
         p2p_Bps: (map(select(.probe == "p2p"))[0].Bps),
         allreduce: map(select(.probe == "allreduce") | [.bytes, .s]),
         iallreduce: map(select(.probe == "iallreduce") | [.bytes, .s]),
         a_s: (map(select(.probe == "allreduce_fit"))[0].a_s),
         bw_Bps: (map(select(.probe == "allreduce_fit"))[0].bw_Bps),
         nb_a_s: (map(select(.probe == "iallreduce_fit"))[0].a_s),
         nb_bw_Bps: (map(select(.probe == "iallreduce_fit"))[0].bw_Bps),
         date: $d, load: [$l0, $l1], nice: $nice}' "$W/probe")"
}

# config by config, its baselines before and after its runs over the links (the machine's
# speed drifts when other work shares it: the model takes the mean of the two)
fails=0
for cfg in $CONFIGS; do
    B=$(full_batch "$cfg")
    train "$cfg" none 1 "$B" off || fails=$((fails + 1))
    train "$cfg" none 1 $((B / 2)) pair || fails=$((fails + 1))
    for link in $LINKS; do
        link_shape "$link" || { echo "bench-multihost: link $link: ${MH_WHY:-tbf refused}" >&2; exit 1; }
        probe "$link" || fails=$((fails + 1))
        for ov in off on auto; do
            train "$cfg" "$link" 2 "$B" $ov || fails=$((fails + 1))
        done
    done
    train "$cfg" after 1 $((B / 2)) pair || fails=$((fails + 1))
    train "$cfg" after 1 "$B" off || fails=$((fails + 1))
done
sh bench/multihost_model.sh "$RESULTS"
[ $fails -eq 0 ]
