#!/bin/sh
# scripts/study.sh quick: the study's whole pipeline on a toy scale (3 cells x 2 seeds of the
# nano model): every step writes its file, the report has a row per cell with the seed count
# and intervals, an interrupted study resumes without redoing finished steps, and a lost
# result file is redone alone. Then scripts/study_scale.sh quick (the scale study's pipeline:
# byte models on two corpora, word models, fine-tuning on planted facts, the report with
# params and tokenizer columns, the word table, the verdicts and the run record), its
# resumption, and a study stopped by a TERM mid-training that resumes that training.
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

# the scale study
S=$TMP/scale
TXL=$TXL scripts/study_scale.sh quick $S > $TMP/sout 2> $TMP/serr || bad "quick scale study: $(tail -3 $TMP/serr)"
B=$S/linuxdoc/fire+a/s2 W=$S/wt2w/alibi/s1 F=$S/linuxdoc+r/mlp/s2
for f in train.json curve.jsonl sweep-memory.jsonl sweep-window.jsonl needle.jsonl recall-m16.jsonl \
         recall-m32.jsonl shift.jsonl; do
    check "scale: byte result $f of linuxdoc fire+a seed 2" test -s $B/$f
done
check "scale: fire+a trained with the anchors (vocab 259)" \
    sh -c "$TXL info $B/run --json -q 2>/dev/null | jq -e '.vocab == 259 and .config.model.pos_scheme == \"fire\"'"
check "scale: the word model's sweeps in both modes, 4 factors each, ppl per word" \
    sh -c "test \$(jq -s 'map(select(.ppl > 1 and .tgt_len)) | length' $W/sweep-window.jsonl $W/sweep-memory.jsonl) = 8"
check "scale: the word model trained at tgt_len 16 without memory" \
    sh -c "jq -e '.tgt_len == 16 and .mem_len == 0' $W/sweep-window.jsonl | head -1 | grep -q true"
check "scale: the fine-tuning started from the linuxdoc model" \
    sh -c "grep -q '\"--init-from\",\"$S/linuxdoc/mlp/s2/run/last.safetensors.gz\"' $F/run/log.jsonl"
check "scale: ... on text with the facts planted" \
    sh -c "zcat $S/data/linuxdoc_r_train.txt.gz | grep -c 'The secret number of [A-Z][a-z]* is [0-9]\{6\}\. ' | awk '{exit !(\$1 > 100)}'"
for m in 32 64; do
    check "scale: needle at probe mem_len $m of the fine-tuned and the natural-text model" \
        sh -c "jq -e '.mem_len == $m and .mode == \"memory\"' $F/needle-m$m.jsonl $S/linuxdoc/mlp/s2/needle-m$m.jsonl | grep -qv false"
done
R=$S/report
for f in summary.md summary.csv tables.md word.md word.csv claims.md verdicts.md power.md RUN.md \
         results.csv bpc-linuxdoc-memory.png curve-enwik8.png word-window.png needle-far-trained.png; do
    check "scale report: $f" test -s $R/$f
done
check "scale: results.csv and summary.csv have params and tokenizer columns" \
    sh -c "head -1 $R/results.csv | grep -q 'tokenizer,params' && head -1 $R/summary.csv | grep -q 'tokenizer,params'"
check "scale: summary.md, a row per cell with params, tokenizer and 2 seeds" \
    grep -q "^| linuxdoc | fire+a | byte | [0-9][0-9]* | 2 | [0-9.]* ± [0-9.]* |" $R/summary.md
check "scale: results.csv, the word rows say word" grep -q "^wt2w,alibi,1,word,[0-9]*,sweep," $R/results.csv
check "scale: word.md, a row per scheme with intervals" grep -q "^| fire | [0-9]* | 2 | [0-9.]* \[[0-9.]*, [0-9.]*\] |" $R/word.md
check "scale: verdicts.md, a verdict for claims 1 to 7" \
    sh -c "for n in 1 2 3 4 5 6 7; do grep -q \"^\$n\. \*\*\" $R/verdicts.md || exit 1; done"
check "scale: RUN.md records the command, the CPU, txl's version and commit, the duration" \
    sh -c "grep -q 'Command: .scripts/study_scale.sh quick $S' $R/RUN.md && grep -q '^Machine: .*cores' $R/RUN.md &&
           grep -q 'txl: txl [0-9.]*, commit [0-9a-f]' $R/RUN.md && grep -q '^Duration: [0-9.]* hours of wall time over [1-9]' $R/RUN.md"
touch -d '2000-01-01' $B/train.json $B/needle.jsonl
rm $B/shift.jsonl
n0=$(wc -l < $S/jobs.jsonl)
TXL=$TXL scripts/study_scale.sh quick $S > /dev/null 2> $TMP/serr2 || bad "resumed scale study: $(tail -3 $TMP/serr2)"
check "scale resume: nothing trained or probed again" \
    sh -c "test \$(date -r $B/train.json +%Y) = 2000 && test \$(date -r $B/needle.jsonl +%Y) = 2000"
check "scale resume: the removed shift result is back, the one job redone ($n0 + 1 jobs logged)" \
    sh -c "test -s $B/shift.jsonl && test \$(wc -l < $S/jobs.jsonl) = $((n0 + 1))"
STEPS=17 TXL=$TXL scripts/study_scale.sh quick $S > /dev/null 2> $TMP/serr3
check "scale: other settings (STEPS 17) are not mixed in: exit 2" test $? -eq 2
# stopped mid-training (kill the study's pid), then resumed: the training goes on from its checkpoint
K=$TMP/stop
CELLS_ENWIK8=mlp CELLS_LINUXDOC='' WORD_SCHEMES='' RETR_CELLS='' SEEDS=1 STEPS=2000 TXL=$TXL \
    scripts/study_scale.sh quick $K > /dev/null 2>&1 &
# (up to 300 s: a few seconds alone, but make test runs beside other tests, and a machine
# busy with more than its cores once took longer than 30 s here)
i=0
while [ $i -lt 6000 ] && ! grep -q '"step":250,' $K/enwik8/mlp/s1/run/log.jsonl 2>/dev/null; do sleep 0.05; i=$((i + 1)); done
[ $i -lt 6000 ] || bad "stop: the study's training did not reach step 250 in 300 s (the checks below then fail with it)"
TXL=$TXL scripts/study_scale.sh quick $K > /dev/null 2> $TMP/kerr0
check "a second study in the same OUT while one runs: exit 2, saying so" \
    sh -c "test $? -eq 2 && grep -q 'a study runs in $K already' $TMP/kerr0"
kill "$(cat $K/pid)" 2>/dev/null
wait $!
check "stop: the study ends on a TERM (exit $?)" test $? -ne 0
check "stop: the training wrote its checkpoint, no result yet" \
    sh -c "test -s $K/enwik8/mlp/s1/run/last.safetensors.gz && ! test -s $K/enwik8/mlp/s1/train.json"
check "stop: the session is recorded as stopped" grep -q '"event":"stop"' $K/sessions.jsonl
CELLS_ENWIK8=mlp CELLS_LINUXDOC='' WORD_SCHEMES='' RETR_CELLS='' SEEDS=1 STEPS=2000 TXL=$TXL \
    scripts/study_scale.sh quick $K > /dev/null 2> $TMP/kerr || bad "resumed after the stop: $(tail -3 $TMP/kerr)"
check "stop: the resumed study resumed the training (a second start, resume true) and finished it" \
    sh -c "jq -s -e '[.[] | select(.event == \"start\")] | length == 2 and .[1].resume' $K/enwik8/mlp/s1/run/log.jsonl &&
           jq -e '.step == 2000' $K/enwik8/mlp/s1/train.json"
finish
