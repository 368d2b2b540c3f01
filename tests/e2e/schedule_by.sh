#!/bin/sh
# train.schedule_by time: warmup and cosine span the time budget (max_minutes), so a run cut
# by the clock has annealed fully whatever the machine's speed; a max_steps reached first
# anneals it too. Without max_minutes it is a config error (exit 2, nothing written).
. tests/e2e/lib.sh
CFG=tests/configs/micro.yaml
OPTS="-q --set train.schedule_by=time --set train.eval_interval=0 --set train.warmup_steps=0"
lrs() { jq -r 'select(.event=="train") | .lr' "$1"; }

$TXL train -c $CFG $OPTS --set train.max_minutes=0.08 --set train.max_steps=1000000 \
    --set train.out_dir=$TMP/t >/dev/null 2>$TMP/t.err || bad "time run: $(cat $TMP/t.err)"
check "the clock ended it" test "$(jq -r .reason $TMP/t/summary.json)" = max_minutes
n=$(lrs $TMP/t/log.jsonl | wc -l)
first=$(lrs $TMP/t/log.jsonl | head -1) last=$(lrs $TMP/t/log.jsonl | tail -1)
check "it trained ($n steps, from lr $first)" test "$n" -gt 5
check "...and annealed: the last lr ($last) is under a tenth of lr" \
    awk -v l="$last" 'BEGIN { exit !(l < 2e-4) }'
check "...the lr falls step by step (cosine over the time used)" \
    sh -c "lrs() { jq -r 'select(.event==\"train\") | .lr' \"\$1\"; }; lrs $TMP/t/log.jsonl | sort -g -r -c"

$TXL train -c $CFG $OPTS --set train.max_minutes=60 --set train.max_steps=30 \
    --set train.out_dir=$TMP/s >/dev/null 2>$TMP/s.err || bad "step-bound run: $(cat $TMP/s.err)"
last=$(lrs $TMP/s/log.jsonl | tail -1)
check "max_steps first: step 30 of 30 still ends at lr_min ($last)" \
    awk -v l="$last" 'BEGIN { exit !(l < 1e-9) }'

$TXL train -c $CFG $OPTS --set train.out_dir=$TMP/n >/dev/null 2>$TMP/n.err
rc=$?
check "schedule_by time without max_minutes: exit 2 (got $rc)" test $rc -eq 2
check "...saying why" grep -q "schedule_by time needs train.max_minutes > 0" $TMP/n.err
check "...writing nothing" test ! -e $TMP/n
finish
