#!/bin/sh
# make test-multihost: 2 ranks on two simulated machines (tests/mpi/netns.sh: network
# namespaces joined by a veth pair, TCP only, a core each) train exactly as 2 ranks on one
# machine do, bit for bit (the step losses and every tensor of the checkpoint), overlapped
# or not; a rank killed mid-run stops the other with Open MPI's message, no hang; the link
# shaped to 200 Mbit/s measures as such, and delayed 200 us its latency; train.comm_overlap auto decides over the link from
# its own trial and logs it. Skips (exit 0, with the reason) where the machine does not
# allow namespaces. The measurements of doc/mpi.md are bench/multihost.sh's (make
# bench-multihost). Needs `make MPI=1 txl` and build-mpi/bench/mpi_link (make test-multihost).
. tests/e2e/lib.sh
. tests/e2e/badlib.inc # st_header, st_hlen
. tests/mpi/netns.sh
. tests/mpi/auto.inc
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_rmaps_base_oversubscribe=1
LINK=${MPI_LINK_BIN:-build-mpi/bench/mpi_link}
if ! mh_can; then
    echo "multihost.sh: skipped: $MH_WHY (needs root, ip netns, unshare --uts, 2 cores)"
    exit 0
fi
trap 'link_down; rm -rf "$TMP"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP
link_up $TMP || { bad "the namespaces and the veth pair: could not set them up"; finish; exit 1; }

# the link shaped to 200 Mbit/s (tbf): one way, 8 MiB arrive at no more than the rate, and not
# at a fraction of it (the bare veth moves 0.6-2 Gbit/s here); the veth's own latency
link_shape 200mbit || bad "tbf on the veth"
mh_mpirun 60 2 $LINK 8 3 > $TMP/probe 2>$TMP/probe.err || bad "mpi_link: $(cat $TMP/probe.err)"
p2p=$(jq -r 'select(.probe == "p2p") | .Bps' $TMP/probe)
lat=$(jq -r 'select(.probe == "latency") | .us' $TMP/probe)
check "200 Mbit/s link: one way $(awk -v b="$p2p" 'BEGIN {printf "%.0f", b * 8e-6}') Mbit/s (120..210), latency $lat us" \
    awk -v b="$p2p" 'BEGIN {exit !(b * 8 > 120e6 && b * 8 < 210e6)}'
# the link delayed 200 us each way (tests/mpi/link_delay.c, as the kernel has no netem): the
# latency the ranks see is the delay and not much more (the veth's own is 5-10 us; the
# queue's hand-offs and wake-ups add tens of microseconds on a busy machine)
if link_shape 1gbit@200; then
    mh_mpirun 60 2 $LINK 1 3 > $TMP/probe 2>$TMP/probe.err || bad "mpi_link: $(cat $TMP/probe.err)"
    lat=$(jq -r 'select(.probe == "latency") | .us' $TMP/probe)
    check "1 Gbit/s, 200 us each way: latency $lat us (200..350)" \
        awk -v l="$lat" 'BEGIN {exit !(l >= 200 && l <= 350)}'
else # a kernel or machine without NFQUEUE or iptables: said, not failed; anything else fails
    case $MH_WHY in
    "no iptables" | "iptables NFQUEUE"* | *"cannot bind queue"*) echo "  skip: the link's delay: $MH_WHY" ;;
    *) bad "the link's delay: $MH_WHY" ;;
    esac
fi
link_shape 1gbit || bad "tbf on the veth"

# bit for bit: 2 ranks across the link, overlapped and not, against 2 ranks on one machine
# (shared memory); dropout and dropatt on, a validation at step 10
CFG=tests/configs/micro.yaml
OPTS="-q --set train.max_steps=20 --set train.eval_interval=10 --set train.ckpt_interval=10 --set train.threads=1"
mpirun --oversubscribe -np 2 $TXL train -c $CFG $OPTS --set train.out_dir=$TMP/one \
    >/dev/null 2>$TMP/one.err || bad "2 ranks on one machine: $(cat $TMP/one.err)"
step_losses $TMP/one/log.jsonl > $TMP/l.one
# same_tensors A B: the checkpoints hold the same tensors (names, offsets), byte for byte
same_tensors() {
    gzip -dc "$1" > $TMP/a.st && gzip -dc "$2" > $TMP/b.st || return 1
    [ "$(st_header $TMP/a.st | jq -S -c 'del(.__metadata__)')" = \
      "$(st_header $TMP/b.st | jq -S -c 'del(.__metadata__)')" ] || return 1
    tail -c +$((9 + $(st_hlen $TMP/a.st))) $TMP/a.st > $TMP/a.data
    tail -c +$((9 + $(st_hlen $TMP/b.st))) $TMP/b.st > $TMP/b.data
    test -s $TMP/a.data && cmp -s $TMP/a.data $TMP/b.data
}
for ov in off on; do
    mh_mpirun 120 2 $TXL train -c $CFG $OPTS --set train.comm_overlap=$ov \
        --set train.out_dir=$TMP/two$ov >/dev/null 2>$TMP/two$ov.err || bad "2 machines ($ov): $(cat $TMP/two$ov.err)"
    step_losses $TMP/two$ov/log.jsonl > $TMP/l.two$ov
    check "2 machines, overlap $ov == 1 machine: 20 step losses bit for bit" \
        sh -c "test \$(wc -l < $TMP/l.two$ov) -eq 20 && cmp -s $TMP/l.one $TMP/l.two$ov"
    check "...the validations agree" test \
        "$(jq -c 'select(.event == "eval") | .loss' $TMP/two$ov/log.jsonl)" = \
        "$(jq -c 'select(.event == "eval") | .loss' $TMP/one/log.jsonl)"
    check "...every tensor of the checkpoint, byte for byte" \
        same_tensors $TMP/one/last.safetensors.gz $TMP/two$ov/last.safetensors.gz
done
check "...overlapped, the sums ran during the backward (exposed < comm)" jq -s -e \
    '[.[] | select(.event == "train")] | (map(.comm_exposed_s) | add) < (map(.comm_s) | add)' \
    $TMP/twoon/log.jsonl

# a rank killed mid-run (SIGKILL, rank 1 on machine B): Open MPI stops rank 0 and says so
mh_mpirun 90 2 $TXL train -c $CFG -q --set train.max_steps=1000000 \
    --set train.eval_interval=0 --set train.ckpt_interval=0 --set train.threads=1 \
    --set train.out_dir=$TMP/kill >/dev/null 2>$TMP/kill.err &
run=$!
wait_trained $TMP/kill/log.jsonl 5 || bad "the run to kill did not train"
victim=
for p in $(ip netns pids "$MH_B"); do # txl (its comm is "exe": it re-executes itself)
    [ "$(readlink -f /proc/$p/exe)" = "$(readlink -f $TXL)" ] && victim=$p
done
t0=$(date +%s)
[ -n "$victim" ] && kill -KILL "$victim"
wait $run
rc=$? t1=$(date +%s)
# (mpirun exits 137, the killed rank's 128 + 9; a hang would be timeout's, 124, after 90 s)
check "rank 1 (pid ${victim:-none}) killed: the run ends in $((t1 - t0)) s (<= 30), exit $rc (not 0 or 124)" \
    test -n "$victim" -a $rc -ne 0 -a $rc -ne 124 -a $((t1 - t0)) -le 30
check "...with Open MPI's message naming rank 1 and its signal" \
    grep -q "rank 1 with PID.*exited on signal 9" $TMP/kill.err
check "...and nothing of it is left in either machine" \
    sh -c "sleep 1; test -z \"\$(ip netns pids $MH_A; ip netns pids $MH_B)\""

# auto over the link (S's shape, 1 Gbit/s): the trial's blocking steps, the decision (an
# overlap event whose verdict follows from its own numbers), the steps after it follow it
S="--set model.n_layer=4 --set model.d_model=256 --set model.n_head=4 --set model.d_head=64
   --set model.d_inner=1024 --set model.tgt_len=128 --set model.mem_len=128 --set train.batch_size=16"
mh_mpirun 240 2 $TXL train -q -c configs/tiny.yaml $S \
    --set data.train=tests/data/tinyshakespeare.txt.gz --set train.max_steps=9 \
    --set train.log_interval=1 --set train.eval_interval=0 --set train.ckpt_interval=0 \
    --set train.warmup_steps=0 --set train.threads=1 --set train.comm_overlap=auto \
    --set train.out_dir=$TMP/auto >/dev/null 2>$TMP/auto.err || bad "auto: $(cat $TMP/auto.err)"
check_auto $TMP/auto/log.jsonl "auto at 1 Gbit/s"
finish
