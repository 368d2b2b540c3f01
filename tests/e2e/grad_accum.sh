#!/bin/sh
# Gradient accumulation (train.grad_accum k, doc/design.md, "The model": Data): batch_size B
# with k micro-batches is the same computation as batch_size k*B in one piece. Dropout and
# dropatt are on (micro's 0.1; masks are drawn by global stream, so micro-batch j's streams
# j*B.. draw the big batch's masks) and the memory carries across steps (mem_len 32, one
# memory per stream), so the only difference is float round-off: the gradient of the big batch
# is summed by one GEMM over all rows, the accumulated one micro-batch by micro-batch, and the
# loss sums likewise. The step losses and the final weights (an eval of each last checkpoint
# with the same batch) agree to 1e-5 relative, for xl and for hier with anchors (the memory
# rows' text coordinates), for a word model with the adaptive softmax and for BPE, while
# batch B without accumulation is far off (the test can tell).
# Resume with grad_accum 2 equals the uninterrupted run bit for bit; a checkpoint continues
# with another split of its streams (batch_size x grad_accum unchanged) to round-off, and a
# resume with another number of streams exits 2.
. tests/e2e/lib.sh
. tests/e2e/badlib.inc # st_tensor
CFG=tests/configs/micro.yaml
N=30
TOL=1e-5
OPTS="-q --set train.max_steps=$N --set train.eval_interval=0 --set train.ckpt_interval=0"

# relmax A B: the largest relative difference of two step_losses files ("step loss" lines;
# a missing or misnumbered step counts as 1)
relmax() {
    paste -d ' ' "$1" "$2" | awk '{ if ($1 != $3 || NF != 4) { w = 1; next }
        d = ($2 - $4) / $2; if (d < 0) d = -d; if (d > w) w = d }
        END { if (NR == 0) w = 1; printf "%.2e", w }'
}
le() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a <= b) }'; }
# the eval loss of a checkpoint, the same batching for every run
evloss() { $TXL eval "$1" --batch 4 --max-tokens 20000 --json -q | jq .loss; }
reldiff() { awk -v a="$1" -v b="$2" 'BEGIN { d = (a - b) / a; if (d < 0) d = -d; printf "%.2e", d }'; }
# train NAME OPTIONS...: a run into $TMP/NAME, its step losses in $TMP/NAME.l
train() {
    _n=$1; shift
    $TXL train -c $CFG $OPTS --set train.out_dir=$TMP/$_n "$@" >$TMP/$_n.out 2>$TMP/$_n.err ||
        bad "run $_n: $(head -c 300 $TMP/$_n.err)"
    step_losses $TMP/$_n/log.jsonl > $TMP/$_n.l
}

# word and BPE vocabularies: 300 KB of Shakespeare, its punctuation split off for words (a
# word model with the adaptive softmax, whose clusters' gradients accumulate too), a BPE
# vocabulary of 600 built once
zcat tests/data/tinyshakespeare.txt.gz | head -c 300000 > $TMP/sh.txt
sed 's/\([.,;:!?]\)/ \1/g' $TMP/sh.txt > $TMP/wt.txt
$TXL vocab build --tokenizer bpe --size 600 $TMP/sh.txt -o $TMP/b600.vocab -q
for s in xl hier+anchors word bpe; do
    case $s in
    hier+anchors) SO="--set model.pos_scheme=hier --set data.anchors=[bos,para,sent]" ;;
    word) SO="--set data.tokenizer=word --set data.train=$TMP/wt.txt --set data.vocab_size=2000
              --set model.cutoffs=[500,1000]" ;;
    bpe) SO="--set data.tokenizer=bpe --set data.train=$TMP/sh.txt --set data.vocab=$TMP/b600.vocab" ;;
    *) SO="--set model.pos_scheme=$s" ;;
    esac
    # shellcheck disable=SC2086
    train big_$s $SO --set train.batch_size=8
    # shellcheck disable=SC2086
    train acc_$s $SO --set train.batch_size=4 --set train.grad_accum=2
    # shellcheck disable=SC2086
    train acc4_$s $SO --set train.batch_size=2 --set train.grad_accum=4
    # shellcheck disable=SC2086
    train small_$s $SO --set train.batch_size=4
    check "$s: $N steps each" test "$(wc -l < $TMP/big_$s.l)" -eq $N -a "$(wc -l < $TMP/acc_$s.l)" -eq $N
    w=$(relmax $TMP/big_$s.l $TMP/acc_$s.l)
    check "$s: batch 4 x 2 accum == batch 8: $N step losses, max rel diff $w (<= $TOL)" le "$w" $TOL
    w4=$(relmax $TMP/big_$s.l $TMP/acc4_$s.l)
    check "$s: batch 2 x 4 accum == batch 8: max rel diff $w4 (<= $TOL)" le "$w4" $TOL
    ws=$(relmax $TMP/big_$s.l $TMP/small_$s.l)
    check "$s: ...while batch 4 alone is another run (max rel diff $ws > 1e-3)" le 1e-3 "$ws"
    eb=$(evloss $TMP/big_$s/last.safetensors.gz)
    ea=$(evloss $TMP/acc_$s/last.safetensors.gz)
    e4=$(evloss $TMP/acc4_$s/last.safetensors.gz)
    check "$s: final weights agree: eval loss $eb vs $ea (rel $(reldiff "$eb" "$ea"))" \
        le "$(reldiff "$eb" "$ea")" $TOL
    check "$s: ...and with 2 x 4: $e4 (rel $(reldiff "$eb" "$e4"))" le "$(reldiff "$eb" "$e4")" $TOL
    if [ $s = hier+anchors ]; then # integers copied from the text: exactly equal
        st_tensor $TMP/big_$s/last.safetensors.gz state.coords $TMP/co_big
        st_tensor $TMP/acc4_$s/last.safetensors.gz state.coords $TMP/co_acc
        check "$s: the memory rows' coordinates of all 8 streams (state.coords) are the big batch's" \
            test "$(wc -c < $TMP/co_big)" -eq $((8 * 32 * 3 * 4)) -a -z "$(cmp $TMP/co_big $TMP/co_acc 2>&1)"
    fi
    check "$s: ...and the same tokens trained" \
        test "$(jq .tokens $TMP/big_$s.out)" = "$(jq .tokens $TMP/acc_$s.out)" -a \
             "$(jq .tokens $TMP/big_$s.out)" -eq $((N * 8 * 32))
done

# the plan and the log say so
$TXL train -c $CFG --set train.max_steps=6 --set train.eval_interval=0 --set train.batch_size=4 \
    --set train.grad_accum=2 --set train.out_dir=$TMP/plan >/dev/null 2>$TMP/plan.err
check "the plan shows the accumulation: tokens/step 256 (batch 4 x 2 accum x tgt_len 32)" \
    grep -q -F "tokens/step 256 (batch 4 x 2 accum x tgt_len 32)" $TMP/plan.err
check "log.jsonl: the start event has grad_accum 2, a step 256 tokens" \
    test "$(jq -s -c '[(.[] | select(.event=="start") | .grad_accum),
                       (map(select(.event=="train")) | .[0].tokens)]' $TMP/plan/log.jsonl)" = "[2,256]"

# resume with grad_accum 2: stopped at step 13 (memory of all 8 streams in the checkpoint),
# resumed from the checkpoint alone == uninterrupted, bit for bit; hier also keeps the rows'
# coordinates (state.coords)
for s in xl hier+anchors; do
    case $s in
    hier+anchors) SO="--set model.pos_scheme=hier --set data.anchors=[bos,para,sent]" ;;
    *) SO="--set model.pos_scheme=$s" ;;
    esac
    rd=$TMP/r_$s
    $TXL train -c $CFG $OPTS $SO --set train.batch_size=4 --set train.grad_accum=2 \
        --set train.out_dir=$rd --steps 13 >/dev/null 2>&1
    check "$s: the checkpoint holds the memory of 8 streams" \
        test "$($TXL info $rd/last.safetensors.gz --json | jq -c '[.has_memory, .step]')" = "[true,13]"
    cp -r $rd $rd.copy
    $TXL train -q --resume $rd/last.safetensors.gz >/dev/null 2>$rd.err || bad "$s: resume: $(cat $rd.err)"
    step_losses $rd/log.jsonl > $rd.l
    check "$s: grad_accum 2, stopped at step 13 and resumed: all $N step losses identical" \
        cmp -s $TMP/acc_$s.l $rd.l
    check "$s: ...and the same final weights" \
        test "$(evloss $rd/last.safetensors.gz)" = "$(evloss $TMP/acc_$s/last.safetensors.gz)"
done

# the same 8 streams split otherwise: batch 8 (no accumulation) or 2 x 4 from the 4 x 2
# checkpoint continue it to round-off
for split in 8:1 2:4; do
    b=${split%:*} k=${split#*:}
    rd=$TMP/split_$b
    cp -r $TMP/r_xl.copy $rd
    $TXL train -q --resume $rd/last.safetensors.gz --set train.out_dir=$rd \
        --set train.batch_size=$b --set train.grad_accum=$k >/dev/null 2>$rd.err ||
        bad "resume as $b x $k: $(cat $rd.err)"
    step_losses $rd/log.jsonl > $rd.l
    w=$(relmax $TMP/acc_xl.l $rd.l)
    check "4 x 2 checkpoint at step 13 resumed as batch $b x $k accum: $N losses, max rel diff $w (<= $TOL)" \
        le "$w" $TOL
done

# another number of streams: refused, nothing written
rd=$TMP/r_xl.copy
before=$(sha256sum $rd/last.safetensors.gz)
$TXL train -q --resume $rd/last.safetensors.gz --set train.out_dir=$rd --set train.grad_accum=1 \
    >/dev/null 2>$TMP/ref.err
rc=$?
check "resume with 4 x 1 of a 4 x 2 checkpoint exits 2 (got $rc)" test $rc -eq 2
check "...naming both keys and both products" grep -q -F \
    "train.batch_size x train.grad_accum = 4 x 1 = 4 streams differ from the checkpoint's 4 x 2 = 8" $TMP/ref.err
check "...and leaves last untouched" test "$before" = "$(sha256sum $rd/last.safetensors.gz)"
$TXL train -q --resume $rd/last.safetensors.gz --set train.out_dir=$rd --set train.batch_size=8 \
    --set train.grad_accum=2 >/dev/null 2>$TMP/ref2.err
check "resume with 8 x 2 of a 4 x 2 checkpoint exits 2 too" test $? -eq 2

# too few tokens for the streams: the message says where the streams come from
$TXL train -c $CFG -q --set train.batch_size=64 --set train.grad_accum=1024 \
    --set train.out_dir=$TMP/few >/dev/null 2>$TMP/few.err
rc=$?
check "a corpus too small for batch_size x grad_accum streams exits 2 (got $rc)" test $rc -eq 2
check "...naming both keys" grep -q "train.batch_size 64 x train.grad_accum 1024 streams: " $TMP/few.err
finish
