#!/bin/sh
# make test-mpi: a stop signal that reaches one rank at the worst moment, right after the
# ranks agreed that no signal had come in this step, stops both ranks alike at the step's
# second agreement (after its checkpoint decision): no hang (one rank used to validate while
# the other skipped it), exit 143 on both, last written at that step, no validation, the end
# event's reason SIGTERM. The moment is
# forced by TXL_TEST_SIGNAL=RANK:STEP (MPI builds only), so the test is deterministic.
# Needs `make MPI=1 txl` and Open MPI's mpirun.
. tests/e2e/lib.sh
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_rmaps_base_oversubscribe=1
CFG=tests/configs/micro.yaml
# eval_interval 0: only the end of a run validates, which is the decision the signal split
OPTS="-q --set train.max_steps=40 --set train.eval_interval=0 --set train.ckpt_interval=0
      --set train.threads=1"
for rank in 1 0; do
    # shellcheck disable=SC2086
    TXL_TEST_SIGNAL=$rank:6 timeout -k 5 120 mpirun --oversubscribe -np 2 \
        $TXL train -c $CFG $OPTS --set train.out_dir=$TMP/r$rank >/dev/null 2>$TMP/r$rank.err
    rc=$?
    check "SIGTERM on rank $rank after the step's agreement: the run ends, exit $rc (143, not 124: a hang)" \
        test $rc -eq 143
    check "...both ranks stopped: last at step 6" \
        test "$($TXL info $TMP/r$rank/last.safetensors.gz --json 2>/dev/null | jq .step)" = 6
    check "...the end event says SIGTERM at step 6, no validation" jq -s -e \
        '(map(select(.event == "eval")) | length == 0) and
         (map(select(.event == "end")) | length == 1 and .[0].reason == "SIGTERM" and .[0].step == 6)' \
        $TMP/r$rank/log.jsonl
done
finish
