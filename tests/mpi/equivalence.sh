#!/bin/sh
# make test-mpi: data-parallel training is the same computation as one process. 1 rank with
# B streams vs 2 ranks with B/2 each (dropout and dropatt on; masks are drawn by global
# stream): the per-step losses agree to float32 round-off of the gradient reduction order,
# and so do the final checkpoints. A run started on 2 ranks resumes on 1 (the memory is
# stored for the whole batch, with its text coordinates), and a batch that cannot be split
# over the ranks is refused. Gradient accumulation splits each micro-batch over the ranks as
# a batch is, and the memory of all its streams is gathered into the checkpoint. Word and BPE
# models: 2 ranks compute what 2 replicas of one process do, bit for bit.
# Needs `make MPI=1 txl` (done by `make test-mpi`) and Open MPI's mpirun.
. tests/e2e/lib.sh
. tests/e2e/badlib.inc # st_tensor
. tests/mpi/auto.inc
# Open MPI on these machines: root, 2 cores, and no cross-memory attach in containers
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_rmaps_base_oversubscribe=1
MPIRUN="mpirun --oversubscribe"
CFG=tests/configs/micro.yaml
OPTS="-q --set train.max_steps=40 --set train.eval_interval=20 --set train.threads=1"

$MPIRUN -np 1 $TXL train -c $CFG $OPTS --set train.out_dir=$TMP/r1 >/dev/null 2>$TMP/r1.err || bad "1 rank: $(cat $TMP/r1.err)"
$MPIRUN -np 2 $TXL train -c $CFG $OPTS --set train.out_dir=$TMP/r2 >/dev/null 2>$TMP/r2.err || bad "2 ranks: $(cat $TMP/r2.err)"
step_losses $TMP/r1/log.jsonl > $TMP/l1
step_losses $TMP/r2/log.jsonl > $TMP/l2
check "both runs logged 40 steps" test "$(wc -l < $TMP/l1)" -eq 40 -a "$(wc -l < $TMP/l2)" -eq 40
worst=$(paste $TMP/l1 $TMP/l2 | awk '{d = ($2 - $4) / $2; if (d < 0) d = -d; if (d > w) w = d} END {printf "%.2e", w}')
check "2 ranks x 4 streams == 1 rank x 8 streams: 40 per-step losses, max rel diff $worst (< 1e-4)" \
    awk -v w="$worst" 'BEGIN {exit !(w < 1e-4)}'
v1=$(jq -s '[.[] | select(.event=="eval")] | last | .loss' $TMP/r1/log.jsonl)
v2=$(jq -s '[.[] | select(.event=="eval")] | last | .loss' $TMP/r2/log.jsonl)
check "validation (split over ranks) agrees: $v1 vs $v2" \
    awk -v a="$v1" -v b="$v2" 'BEGIN {d = (a - b) / a; if (d < 0) d = -d; exit !(d < 1e-4)}'
# one process with 2 threads runs 2 replicas of 4 streams: what 2 ranks compute, bit for bit
$TXL train -c $CFG $OPTS --set train.threads=2 --set train.out_dir=$TMP/t2 >/dev/null 2>$TMP/t2.err || bad "2 threads: $(cat $TMP/t2.err)"
step_losses $TMP/t2/log.jsonl > $TMP/lt
check "1 process x 2 threads (2 replicas) == 2 ranks x 1 thread: 40 step losses bit for bit" \
    cmp -s $TMP/l2 $TMP/lt
check "only rank 0 logs (one start event)" test "$(grep -c '"start"' $TMP/r2/log.jsonl)" -eq 1
check "comm time is logged" jq -s -e 'map(select(.event=="train")) | all(has("comm_s"))' $TMP/r2/log.jsonl
# a word-level model: every rank builds the same vocabulary from the train split and reads
# its streams' words; 2 ranks compute what 2 replicas of one process do, bit for bit
zcat tests/data/tinyshakespeare.txt.gz | head -c 200000 > $TMP/w.txt
WORD="--set data.tokenizer=word --set data.train=$TMP/w.txt --set data.vocab_size=1500"
$MPIRUN -np 2 $TXL train -c $CFG $OPTS $WORD --set train.max_steps=10 --set train.out_dir=$TMP/w2 \
    >/dev/null 2>$TMP/w2.err || bad "2 ranks, word: $(cat $TMP/w2.err)"
$TXL train -c $CFG $OPTS $WORD --set train.max_steps=10 --set train.threads=2 \
    --set train.out_dir=$TMP/wt >/dev/null 2>$TMP/wt.err || bad "2 threads, word: $(cat $TMP/wt.err)"
step_losses $TMP/w2/log.jsonl > $TMP/lw2
step_losses $TMP/wt/log.jsonl > $TMP/lwt
check "word: 2 ranks == 1 process x 2 replicas, 10 step losses bit for bit" \
    sh -c "test -s $TMP/lw2 && cmp -s $TMP/lw2 $TMP/lwt"
$MPIRUN -np 2 $TXL train -c $CFG $WORD --set train.max_steps=1 --set train.warmup_steps=0 \
    --set train.threads=1 --set train.out_dir=$TMP/w2n >/dev/null 2>$TMP/w2n.err
check "word: the vocabulary note is printed once (rank 0)" \
    test "$(grep -c 'built a word vocabulary' $TMP/w2n.err)" -eq 1
# a BPE model: every rank learns the same merges from the train split (the fingerprint in
# the checkpoint is the one process's) and reads its streams' pieces; 2 ranks == 2 replicas,
# bit for bit, validation split over the ranks included
zcat tests/data/tinyshakespeare.txt.gz | head -c 200000 > $TMP/b.txt
BPE="--set data.tokenizer=bpe --set data.train=$TMP/b.txt --set data.vocab_size=500"
$MPIRUN -np 2 $TXL train -c $CFG $BPE --set train.threads=1 --set train.max_steps=10 \
    --set train.eval_interval=5 --set train.out_dir=$TMP/b2 >/dev/null 2>$TMP/b2.err ||
    bad "2 ranks, bpe: $(cat $TMP/b2.err)"
$TXL train -c $CFG $BPE --set train.threads=2 --set train.max_steps=10 --set train.eval_interval=5 \
    --set train.out_dir=$TMP/bt -q >/dev/null 2>$TMP/bt.err || bad "2 threads, bpe: $(cat $TMP/bt.err)"
step_losses $TMP/b2/log.jsonl > $TMP/lb2
step_losses $TMP/bt/log.jsonl > $TMP/lbt
check "bpe: 2 ranks == 1 process x 2 replicas, 10 step losses bit for bit" \
    sh -c "test \$(wc -l < $TMP/lb2) -eq 10 && cmp -s $TMP/lb2 $TMP/lbt"
check "bpe: the validations agree: $(jq -s -c 'map(select(.event == "eval") | .loss)' $TMP/b2/log.jsonl)" \
    test "$(jq -s -c 'map(select(.event == "eval") | [.loss, .tokens, .bytes])' $TMP/b2/log.jsonl)" = \
         "$(jq -s -c 'map(select(.event == "eval") | [.loss, .tokens, .bytes])' $TMP/bt/log.jsonl)"
check "bpe: the same vocabulary in both checkpoints" \
    test "$($TXL vocab info $TMP/b2 --json | jq -c '[.kind, .size, .fingerprint]')" = \
         "$($TXL vocab info $TMP/bt --json | jq -c '[.kind, .size, .fingerprint]')"
check "bpe: the vocabulary note is printed once (rank 0)" \
    test "$(grep -c 'built a bpe vocabulary' $TMP/b2.err)" -eq 1

# train.comm_overlap on: each layer's gradient sum starts when its backward ends (1 replica
# per rank), the same sums (bit for bit); the time the step then waits (comm_exposed_s) is
# part of comm_s. auto (the default) tries both and keeps the faster (tests/mpi/auto.inc);
# with 2 replicas per rank the one sum after the backward is all exposed
$MPIRUN -np 2 $TXL train -c $CFG $OPTS --set train.comm_overlap=on --set train.out_dir=$TMP/r2o >/dev/null 2>$TMP/r2o.err || bad "2 ranks, overlap: $(cat $TMP/r2o.err)"
step_losses $TMP/r2o/log.jsonl > $TMP/lo
check "2 ranks with the layers' sums overlapping the backward == without: 40 losses bit for bit" \
    cmp -s $TMP/l2 $TMP/lo
check "overlap: exposed communication is logged, within comm_s, and less in all" jq -s -e \
    'map(select(.event=="train")) | all(has("comm_exposed_s") and .comm_exposed_s <= .comm_s + 1e-4)
     and (map(.comm_s) | add) > (map(.comm_exposed_s) | add)' $TMP/r2o/log.jsonl
check_auto $TMP/r2/log.jsonl "auto on one machine decides from its trial"
$MPIRUN -np 2 $TXL train -c $CFG $OPTS --set train.threads=2 --set train.out_dir=$TMP/r2t >/dev/null 2>$TMP/r2t.err || bad "2 ranks x 2 threads: $(cat $TMP/r2t.err)"
check "2 ranks x 2 replicas: one blocking sum, all of it exposed" jq -s -e \
    'map(select(.event=="train")) | all(.comm_exposed_s == .comm_s)' $TMP/r2t/log.jsonl

# resume across N: 2 ranks for 20 steps, then 1 rank to 40 == the 2-rank run continued
$MPIRUN -np 2 $TXL train -c $CFG $OPTS --set train.out_dir=$TMP/r3 --steps 20 >/dev/null 2>&1 || bad "r3 part 1"
check "2-rank checkpoint holds the whole batch's memory" \
    test "$($TXL info $TMP/r3/last.safetensors.gz --json | jq .has_memory)" = true
$TXL train -q --resume $TMP/r3/last.safetensors.gz --set train.threads=1 >/dev/null 2>$TMP/r3.err || bad "resume on 1 rank: $(cat $TMP/r3.err)"
step_losses $TMP/r3/log.jsonl > $TMP/l3
worst=$(paste $TMP/l2 $TMP/l3 | awk '{d = ($2 - $4) / $2; if (d < 0) d = -d; if (d > w) w = d} END {printf "%.2e", w}')
check "2 ranks to step 20, then 1 rank to 40: losses follow the 2-rank run (max rel diff $worst)" \
    awk -v w="$worst" 'BEGIN {exit !(w < 1e-4)}'

# gradient accumulation over ranks: micro-batch j (streams 4j..4j+3) split over the ranks as
# a batch is, 2 streams each; the same computation as 1 rank x 8 streams
$MPIRUN -np 2 $TXL train -c $CFG $OPTS --set train.batch_size=4 --set train.grad_accum=2 \
    --set train.out_dir=$TMP/a2 >/dev/null 2>$TMP/a2.err || bad "2 ranks x 2 accum: $(cat $TMP/a2.err)"
step_losses $TMP/a2/log.jsonl > $TMP/la
worst=$(paste $TMP/l1 $TMP/la | awk '$1 != $3 {w = 1} {d = ($2 - $4) / $2; if (d < 0) d = -d; if (d > w) w = d} END {printf "%.2e", w}')
check "2 ranks x 2 streams x 2 accum == 1 rank x 8 streams: max rel diff $worst (< 1e-5)" \
    awk -v w="$worst" -v n="$(wc -l < $TMP/la)" 'BEGIN {exit !(w < 1e-5 && n == 40)}'

# the memory's text coordinates (hier) are gathered from the ranks too: a 2-rank run with
# accumulation stopped at step 20 holds the coordinates of 1 process with batch 8, and
# resumed on 1 rank as batch 8 it follows that run
HO="--set model.pos_scheme=hier --set data.anchors=[bos,para,sent]"
$MPIRUN -np 1 $TXL train -c $CFG $OPTS $HO --set train.out_dir=$TMP/h1 --steps 20 >/dev/null 2>&1 || bad "h1"
$MPIRUN -np 2 $TXL train -c $CFG $OPTS $HO --set train.batch_size=4 --set train.grad_accum=2 \
    --set train.out_dir=$TMP/h2 --steps 20 >/dev/null 2>&1 || bad "h2"
st_tensor $TMP/h1/last.safetensors.gz state.coords $TMP/co1
st_tensor $TMP/h2/last.safetensors.gz state.coords $TMP/co2
check "hier: the 2-rank checkpoint's state.coords equal 1 process's (8 streams x 32 rows)" \
    test "$(wc -c < $TMP/co1)" -eq 3072 -a -z "$(cmp $TMP/co1 $TMP/co2 2>&1)"
$TXL train -q --resume $TMP/h1/last.safetensors.gz --set train.threads=1 >/dev/null 2>&1 || bad "h1 resume"
$TXL train -q --resume $TMP/h2/last.safetensors.gz --set train.threads=1 --set train.batch_size=8 \
    --set train.grad_accum=1 >/dev/null 2>$TMP/h2.err || bad "h2 resume on 1 rank: $(cat $TMP/h2.err)"
step_losses $TMP/h1/log.jsonl > $TMP/lh1
step_losses $TMP/h2/log.jsonl > $TMP/lh2
worst=$(paste $TMP/lh1 $TMP/lh2 | awk '$1 != $3 {w = 1} {d = ($2 - $4) / $2; if (d < 0) d = -d; if (d > w) w = d} END {printf "%.2e", w}')
check "hier: 2 ranks x 2 accum to step 20, then 1 rank x 8 streams: follows 1 process (max rel diff $worst)" \
    awk -v w="$worst" -v n="$(wc -l < $TMP/lh2)" 'BEGIN {exit !(w < 1e-5 && n == 40)}'
# ...and the other way: 1 process with accumulation to step 20, resumed on 2 ranks (each
# loads its streams of every micro-batch: states and coordinates)
$MPIRUN -np 1 $TXL train -c $CFG $OPTS $HO --set train.batch_size=4 --set train.grad_accum=2 \
    --set train.out_dir=$TMP/h3 --steps 20 >/dev/null 2>&1 || bad "h3"
$MPIRUN -np 2 $TXL train -q --resume $TMP/h3/last.safetensors.gz --set train.threads=1 \
    >/dev/null 2>$TMP/h3.err || bad "h3 resume on 2 ranks: $(cat $TMP/h3.err)"
step_losses $TMP/h3/log.jsonl > $TMP/lh3
worst=$(paste $TMP/lh1 $TMP/lh3 | awk '$1 != $3 {w = 1} {d = ($2 - $4) / $2; if (d < 0) d = -d; if (d > w) w = d} END {printf "%.2e", w}')
check "hier: 1 process x 2 accum to step 20, then 2 ranks x 2 accum: follows (max rel diff $worst)" \
    awk -v w="$worst" -v n="$(wc -l < $TMP/lh3)" 'BEGIN {exit !(w < 1e-5 && n == 40)}'

# a batch that cannot be split
$MPIRUN -np 3 $TXL train -c $CFG $OPTS --set train.out_dir=$TMP/r4 >/dev/null 2>$TMP/r4.err
rc=$?
check "batch 8 over 3 ranks is refused (exit $rc)" test $rc -ne 0
check "...with a clear message" grep -q "cannot be split over 3 ranks" $TMP/r4.err
finish
