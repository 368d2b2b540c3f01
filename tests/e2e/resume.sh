#!/bin/sh
# Resume equals an uninterrupted run, bit for bit (dropout and dropatt on, cosine schedule),
# whether the first part stopped after --steps or was interrupted by SIGINT mid-run; SIGTERM
# exits 143 with a loadable checkpoint. The same for every positional scheme, stopped right
# after an eval and between evals.
. tests/e2e/lib.sh
CFG=tests/configs/micro.yaml
N=300
OPTS="-q --set train.max_steps=$N --set train.eval_interval=100"

# A: N uninterrupted steps
$TXL train -c $CFG $OPTS --set train.out_dir=$TMP/a >/dev/null 2>$TMP/a.err || bad "run A: $(cat $TMP/a.err)"
step_losses $TMP/a/log.jsonl > $TMP/a.losses
check "run A logged $N steps" test "$(wc -l < $TMP/a.losses)" -eq $N

# B: --steps 25 (between checkpoints), then --resume to the end
$TXL train -c $CFG $OPTS --set train.out_dir=$TMP/b --steps 25 >/dev/null 2>$TMP/b.err || bad "run B part 1: $(cat $TMP/b.err)"
check "--steps 25 stopped at step 25" test "$($TXL info $TMP/b/last.safetensors.gz --json | jq .step)" -eq 25
$TXL train -c $CFG $OPTS --set train.out_dir=$TMP/b --resume $TMP/b/last.safetensors.gz >/dev/null 2>$TMP/b2.err || bad "run B resume: $(cat $TMP/b2.err)"
step_losses $TMP/b/log.jsonl > $TMP/b.losses
check "resume after --steps 25: all $N per-step losses identical to A" cmp -s $TMP/a.losses $TMP/b.losses

# C: interrupted by SIGINT at whatever step it reached, then resumed from the checkpoint alone
$TXL train -c $CFG $OPTS --set train.out_dir=$TMP/c >/dev/null 2>$TMP/c.err &
pid=$!
wait_trained $TMP/c/log.jsonl 30
kill -INT $pid
wait $pid
rc=$?
check "SIGINT exits 130 (got $rc)" test $rc -eq 130
stopped=$($TXL info $TMP/c/last.safetensors.gz --json | jq .step)
check "SIGINT wrote a checkpoint at the step it stopped ($stopped)" test "$stopped" -ge 30 -a "$stopped" -lt $N
$TXL train -q --resume $TMP/c/last.safetensors.gz >/dev/null 2>$TMP/c2.err || bad "resume C: $(cat $TMP/c2.err)"
step_losses $TMP/c/log.jsonl > $TMP/c.losses
check "resume after SIGINT at step $stopped: all $N per-step losses identical to A" cmp -s $TMP/a.losses $TMP/c.losses
check "final weights identical (same eval loss)" \
    test "$($TXL eval $TMP/a/last.safetensors.gz --json -q | jq .loss)" = \
         "$($TXL eval $TMP/c/last.safetensors.gz --json -q | jq .loss)"

# E: SIGTERM -> 143, checkpoint loads
$TXL train -c $CFG -q --set train.out_dir=$TMP/e --set train.max_steps=100000 --set train.eval_interval=0 >/dev/null 2>&1 &
pid=$!
# once it trains (a TERM before the handlers are installed would kill it without a checkpoint)
wait_trained $TMP/e/log.jsonl 1
kill -TERM $pid
wait $pid
rc=$?
check "SIGTERM exits 143 (got $rc)" test $rc -eq 143
check "SIGTERM checkpoint loads" $TXL info $TMP/e/last.safetensors.gz --json >/dev/null

# a second run into the same out_dir is refused (nothing overwritten)
before=$(sha256sum $TMP/a/last.safetensors.gz)
$TXL train -c $CFG $OPTS --set train.out_dir=$TMP/a >/dev/null 2>$TMP/f.err
rc=$?
check "new run into an existing run's out_dir exits 2 (got $rc)" test $rc -eq 2
check "...and says how to resume" grep -q -- "--resume" $TMP/f.err
check "...and leaves last untouched" test "$before" = "$(sha256sum $TMP/a/last.safetensors.gz)"

# every scheme (dropout and dropatt on, the mlp bias with its own parameters): 40 steps
# uninterrupted == stopped right after an eval (step 20: eval, then checkpoint) and resumed ==
# stopped between evals (step 13) and resumed, and the final weights agree too; hier keeps
# the text coordinates of its memory rows in the checkpoint (state.coords), with and
# without anchor tokens
for s in $(schemes) hier+anchors xl+anchors; do
    case $s in
    *+anchors) SO="--set model.pos_scheme=${s%+anchors} --set data.anchors=[bos,para,sent]" ;;
    *) SO="--set model.pos_scheme=$s" ;;
    esac
    SO="-q $SO --set train.eval_interval=10 --set train.ckpt_interval=0"
    $TXL train -c $CFG $SO --set train.out_dir=$TMP/s_$s >/dev/null 2>&1
    step_losses $TMP/s_$s/log.jsonl > $TMP/s_$s.a
    for k in 20 13; do
        rd=$TMP/s_${s}_$k
        $TXL train -c $CFG $SO --set train.out_dir=$rd --steps $k >/dev/null 2>&1
        $TXL train -q --resume $rd/last.safetensors.gz >/dev/null 2>&1
        step_losses $rd/log.jsonl > $rd.l
        check "$s: stopped at step $k, resumed: all 40 step losses identical" \
            test "$(wc -l < $rd.l)" -eq 40 -a -z "$(cmp $TMP/s_$s.a $rd.l 2>&1)"
        check "$s: ...and the same final eval loss" \
            test "$(jq -s 'map(select(.event=="eval")) | last | .loss' $rd/log.jsonl)" = \
                 "$(jq -s 'map(select(.event=="eval")) | last | .loss' $TMP/s_$s/log.jsonl)"
    done
done

# Extending a run (--set train.max_steps raised on --resume) changes a cosine schedule at the
# resumed step: the banner says where it resumes and what the lr does, and
# train.resume_schedule picks as_planned (the new schedule as if planned from step 0: the lr
# jumped back up, silently), continue (decay from the lr reached) or restart (a new warmup).
# micro: lr 2e-3, warmup 5, cosine; 20 steps planned, stopped at 10, extended to 40.
X="--set train.eval_interval=0 --set train.log_interval=1 --set train.ckpt_interval=0"
$TXL train -c $CFG -q $X --set train.max_steps=20 --steps 10 --set train.out_dir=$TMP/x0 >/dev/null 2>&1
lr10=$(jq 'select(.event=="train" and .step==10) | .lr' $TMP/x0/log.jsonl)
# lrs STEP0 DIR: "step lr" of the train events after STEP0
lrs() { jq -r --argjson s $1 'select(.event=="train" and .step > $s) | "\(.step) \(.lr)"' $2/log.jsonl; }
# the formula of each choice, to 1e-5 relative (the log writes %.6g)
near() { awk -v f="$1" '{want = 0; t = $1; pi = atan2(0, -1)
    if (f == "as_planned") want = 0.002 * 0.5 * (1 + cos(pi * (t - 5) / 35))
    if (f == "continue")   want = L * 0.5 * (1 + cos(pi * (t - 10) / 30))
    if (f == "restart")    want = t <= 15 ? 0.002 * (t - 10) / 5 : 0.002 * 0.5 * (1 + cos(pi * (t - 15) / 25))
    d = $2 - want; if (d < 0) d = -d; if (d > 1e-5 * (want > 1e-9 ? want : 1e-9) + 1e-12) bad++; n++}
    END {exit !(n == 30 && bad == 0)}' L="$lr10"; }
for m in as_planned continue restart; do
    cp -r $TMP/x0 $TMP/x_$m
    $TXL train --resume $TMP/x_$m $X --set train.max_steps=40 --set train.resume_schedule=$m \
        >/dev/null 2>$TMP/x_$m.err || bad "extend ($m): $(cat $TMP/x_$m.err)"
    check "extend, $m: the banner says where it resumes" \
        grep -q "resuming at step 10 of 40 from $TMP/x_$m/last.safetensors.gz" $TMP/x_$m.err
    check "  ... that the schedule changed, and what the lr does now" sh -c "
        grep -q 'lr: the schedule differs from the checkpoint.s (max_steps 20 -> 40)' $TMP/x_$m.err &&
        grep -q 'lr: $m (train.resume_schedule): step 11 takes' $TMP/x_$m.err &&
        grep -q 'lr: the choices: as_planned' $TMP/x_$m.err"
    if lrs 10 $TMP/x_$m | near $m; then ok "  ... steps 11-40 follow the $m schedule (step 10 had lr $lr10)"
    else bad "  ... steps 11-40 do not follow the $m schedule: $(lrs 10 $TMP/x_$m | head -3 | tr '\n' ' ')"; fi
done
check "  ... as_planned jumps (it did so without a word), continue does not" sh -c "
    grep -q 'step 11 takes [0-9.e-]*, a jump' $TMP/x_as_planned.err && ! grep -q 'a jump' $TMP/x_continue.err"
# the choice is kept in the checkpoint: the continued run, stopped and resumed again with the
# same config, goes on exactly as without the stop
cp -r $TMP/x0 $TMP/x_c2
$TXL train --resume $TMP/x_c2 -q $X --set train.max_steps=40 --set train.resume_schedule=continue --steps 7 >/dev/null 2>&1
$TXL train --resume $TMP/x_c2 $X --set train.max_steps=40 --set train.resume_schedule=continue \
    >/dev/null 2>$TMP/x_c2.err
check "continue, stopped at 17 and resumed: the same lrs and losses as without the stop" \
    sh -c "test \"\$(jq -c 'select(.event==\"train\") | [.step, .lr, .step_loss]' $TMP/x_c2/log.jsonl)\" = \
                \"\$(jq -c 'select(.event==\"train\") | [.step, .lr, .step_loss]' $TMP/x_continue/log.jsonl)\""
check "  ... and that resume, whose schedule is the checkpoint's, has no lr line" sh -c "
    grep -q 'resuming at step 17 of 40' $TMP/x_c2.err && ! grep -q '^  lr:' $TMP/x_c2.err"
cp -r $TMP/x0 $TMP/x_bad
$TXL train --resume $TMP/x_bad $X --set train.max_steps=14 --set train.resume_schedule=restart \
    --set train.warmup_steps=5 >/dev/null 2>$TMP/x_bad.err
check "restart with a warmup past max_steps: exit 2" test $? -eq 2
check "  ... saying so" grep -q "train.resume_schedule restart: a warmup of 5 steps from step 10 leaves no cosine before train.max_steps 14" $TMP/x_bad.err
finish
