#!/bin/sh
# scripts/study.sh quick: the study's whole pipeline on a toy scale (3 cells x 2 seeds of the
# nano model): every step writes its file, the report has a row per cell with the seed count
# and intervals, an interrupted study resumes without redoing finished steps, and a lost
# result file is redone alone.
. tests/e2e/lib.sh
O=$TMP/study
TXL=$TXL scripts/study.sh quick $O > $TMP/out 2> $TMP/err || bad "quick study: $(tail -3 $TMP/err)"
R=$O/shakespeare/hier+a/s2
for f in train.json sweep-memory.jsonl sweep-window.jsonl needle.jsonl recall-m16.jsonl \
         recall-m32.jsonl shift.jsonl; do
    check "result file $f of hier+a seed 2" test -s $R/$f
done
check "the anchors reached the model (vocab 259)" \
    sh -c "$TXL info $R/run --json -q 2>/dev/null | jq -e '.vocab == 259'"
check "sweep: 4 factors per mode" test "$(wc -l < $R/sweep-window.jsonl)" = 4
check "needle: 2 lengths x 2 depths x 2 modes" test "$(wc -l < $R/needle.jsonl)" = 8
for c in mlp hier+a absolute; do
    check "tables.md: $c with 2 seeds" grep -q "^| $c | 2 | [0-9.]* ± [0-9.]* |" $O/report/tables.md
done
check "claims.md compares mlp and absolute" grep -q "mlp − absolute = " $O/report/claims.md
check "results.jsonl: every row parses, tagged" \
    sh -c "jq -e 'has(\"corpus\") and has(\"cell\") and has(\"seed\")' $O/results.jsonl >/dev/null"
check "the shift probe moves absolute, not mlp" \
    sh -c "jq -s -e '([.[] | select(.cell==\"absolute\" and .kind==\"shift\") | .delta | fabs] | max) > 0
                and ([.[] | select(.cell==\"mlp\" and .kind==\"shift\") | .delta | fabs] | max) < 1e-6' $O/results.jsonl"
# resume: nothing is redone; a removed result is redone alone
touch -d '2000-01-01' $R/train.json $R/needle.jsonl
rm $R/shift.jsonl
TXL=$TXL scripts/study.sh quick $O > /dev/null 2> $TMP/err2 || bad "resumed study: $(tail -3 $TMP/err2)"
check "resume: the trained model was not trained again" \
    test "$(date -r $R/train.json +%Y)" = 2000
check "resume: the needle probe was not run again" test "$(date -r $R/needle.jsonl +%Y)" = 2000
check "resume: the removed shift result is back" test -s $R/shift.jsonl
STEPS=13 TXL=$TXL scripts/study.sh quick $O > /dev/null 2> $TMP/err3
check "other settings: exit 2" test $? -eq 2
check "other settings (STEPS 13) are not mixed into the study: exit 2 ($(cat $TMP/err3))" \
    grep -q "holds a study with other settings" $TMP/err3
finish
