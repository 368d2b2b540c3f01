#!/bin/sh
# Training on several threads runs one replica per thread (each whole streams of the batch,
# its own gradient, added in replica order): the same computation as one thread to float32
# round-off of the gradient sum, every scheme's inputs included (hier's coordinates, the
# anchors), with gradient accumulation, and bit for bit again when resumed on as many
# threads. A batch the threads do not divide falls back to one replica (the threads split
# each op). Evaluation splits the streams over the threads alike, with the same losses (bit
# for bit on an sgemm kernel whose rows do not depend on the row count; see below). (make test-mpi checks that 2 threads compute what 2 MPI ranks do, bit for bit.)
. tests/e2e/lib.sh
CFG=tests/configs/micro.yaml
OPTS="-q --set train.max_steps=30 --set train.eval_interval=0 --set train.ckpt_interval=0"

# run NAME THREADS [flags...]: trains into $TMP/NAME, its step losses into $TMP/NAME.l
run() {
    n=$1 th=$2; shift 2
    $TXL train -c $CFG $OPTS --set train.threads=$th --set train.out_dir=$TMP/$n "$@" \
        >/dev/null 2>$TMP/$n.err || bad "$n: $(cat $TMP/$n.err)"
    step_losses $TMP/$n/log.jsonl > $TMP/$n.l
}
# agree A B TOL: the step losses of runs A and B, 30 steps each, within TOL relative
agree() {
    paste $TMP/$1.l $TMP/$2.l | awk -v t=$3 '$1 != $3 {w = 1} {d = ($2 - $4) / $2; if (d < 0) d = -d; if (d > w) w = d}
        END {printf "%.2e", w; exit !(w < t && NR == 30)}'
}
replicas() { jq -s 'map(select(.event == "start")) | first | .replicas' $TMP/$1/log.jsonl; }

run t1 1
run t2 2
check "2 threads run 2 replicas (start event)" test "$(replicas t2)" = 2
check "1 thread runs 1" test "$(replicas t1)" = 1
w=$(agree t1 t2 1e-5) || true
check "2 replicas x 4 streams == 1 thread x 8 streams: 30 step losses, max rel diff $w" agree t1 t2 1e-5

HO="--set model.pos_scheme=hier --set data.anchors=[bos,para,sent]"
run h1 1 $HO
run h2 2 $HO
w=$(agree h1 h2 1e-5) || true
check "hier with anchors: 2 replicas == 1 thread (the coordinates follow the streams): $w" agree h1 h2 1e-5

run a2 2 --set train.batch_size=4 --set train.grad_accum=2
w=$(agree t1 a2 1e-5) || true
check "2 replicas x 2 streams x 2 micro-batches == 1 thread x 8 streams: $w" agree t1 a2 1e-5

# resumed on as many threads: bit for bit the run that did not stop
$TXL train -c $CFG $OPTS --set train.threads=2 --set train.out_dir=$TMP/r2 --steps 12 >/dev/null 2>&1 || bad "r2 part 1"
$TXL train -q --resume $TMP/r2/last.safetensors.gz --set train.threads=2 >/dev/null 2>$TMP/r2.err || bad "r2 resume: $(cat $TMP/r2.err)"
step_losses $TMP/r2/log.jsonl > $TMP/r2.l
check "2 replicas stopped at step 12 and resumed: the 30 losses of the run that did not stop" \
    cmp -s $TMP/t2.l $TMP/r2.l

run t3 3
check "3 threads do not divide 8 streams: 1 replica, the threads split each op" test "$(replicas t3)" = 1
w=$(agree t1 t3 1e-5) || true
check "3 threads x 1 replica == 1 thread: $w" agree t1 t3 1e-5

# evaluation splits the streams over the threads too (each its own memory; the last stream's
# memory goes on into the tail): every token scored once, on 1, 2 and 4 threads, in both sweep
# modes, and the same losses. Bit for bit for xl where OpenBLAS's sgemm gives a row the same
# bits whatever the number of rows of the product (its Sandybridge and SkylakeX kernels); its
# Haswell kernel (also Zen's) rounds the rows past the last full tile of 4 or 8 otherwise, and
# a replica multiplies fewer rows, so there the losses agree to float rounding (measured on an
# AMD EPYC, Zen core: 3e-9 relative). hier with anchors (its coordinates follow the streams)
# builds its tables over a replica's streams, so fewer streams make smaller products whose
# sums round apart: 5e-12 to 1e-10 relative in the mean loss on the Sandybridge core (printed
# to 17 digits once), within 1e-7 on every core. So: xl bit for bit on the Sandybridge core
# (any AVX CPU has it), and xl and hier to 1e-7 on the default one.
ev() { # ev CKPT THREADS MODE
    $TXL eval $1 --split valid --json -q --threads $2 --sweep 1,2,4 --sweep-mode $3 |
        jq -r '"\(.loss) \(.tokens)"'; }
same() { # same A B: the same token counts, losses within 1e-7 relative
    paste $1 $2 | awk '$2 != $4 {bad = 1} {d = ($1 - $3) / $1; if (d < 0) d = -d; if (d > 1e-7) bad = 1}
        END {exit bad || NR != 3}'
}
same_threads() { same $TMP/d1 $TMP/d2 && same $TMP/d1 $TMP/d4; }
core=$($TXL info --system | sed -n 's/^OpenBLAS core: //p')
for mode in memory window; do
    for t in 1 2 4; do OPENBLAS_CORETYPE=Sandybridge ev $TMP/t2/last.safetensors.gz $t $mode > $TMP/e$t; done
    check "xl: eval $mode sweep on 2 and 4 threads == 1 thread, bit for bit (Sandybridge core): $(tr '\n' ' ' < $TMP/e1)" \
        sh -c "cmp -s $TMP/e1 $TMP/e2 && cmp -s $TMP/e1 $TMP/e4 && test \$(wc -l < $TMP/e1) -eq 3"
    for ck in t2 h2; do
        for t in 1 2 4; do ev $TMP/$ck/last.safetensors.gz $t $mode > $TMP/d$t; done
        check "$ck: eval $mode sweep on 2 and 4 threads == 1 thread on the $core core: every token once, losses within 1e-7: $(tr '\n' ' ' < $TMP/d2)" \
            same_threads
    done
done

# the plan counts a gradient per replica
DRY="-c configs/tiny.yaml --set data.train=tests/data/tinyshakespeare.txt.gz --dry-run -q"
g1=$($TXL train $DRY --set train.threads=1 | jq .params_grads_adam_mib)
g2=$($TXL train $DRY --set train.threads=2 | jq .params_grads_adam_mib)
check "--dry-run: 2 replicas hold 5 model-sized arrays, 1 holds 4 ($g2 vs $g1 MiB)" \
    awk -v a="$g1" -v b="$g2" 'BEGIN {r = b / a; exit !(r > 1.24 && r < 1.26)}'
check "--dry-run reports the replicas" test "$($TXL train $DRY --set train.threads=2 | jq .replicas)" = 2
finish
