#!/bin/sh
# A run directory works wherever a checkpoint does: eval, sample, probe, info and export take
# its best checkpoint (else last), --resume its last, --init-from its best; each says on
# stderr which file it took. A directory without a checkpoint is an input error.
. tests/e2e/lib.sh
CFG=tests/configs/micro.yaml
R=$TMP/run
$TXL train -c $CFG -q --set train.out_dir=$R --steps 20 >/dev/null 2>$TMP/err ||
    bad "training: $(cat $TMP/err)"

$TXL eval $R --json --max-tokens 3000 > $TMP/d.json 2>$TMP/d.err
$TXL eval $R/best.safetensors.gz --json --max-tokens 3000 -q > $TMP/f.json
check "eval RUN_DIR == eval RUN_DIR/best.safetensors.gz" \
    test "$(jq -c '[.loss, .step]' $TMP/d.json)" = "$(jq -c '[.loss, .step]' $TMP/f.json)"
check "  ... and says which file it took" \
    grep -q -F "txl eval: $R is a run directory: using $R/best.safetensors.gz" $TMP/d.err
$TXL eval $R --json --max-tokens 3000 -q > /dev/null 2>$TMP/q.err
check "  ... not with -q" test ! -s $TMP/q.err
$TXL sample $R -p "ROMEO:" -n 40 --seed 3 -q > $TMP/s1
$TXL sample $R/best.safetensors.gz -p "ROMEO:" -n 40 --seed 3 -q > $TMP/s2
check "sample RUN_DIR == sample its best" cmp $TMP/s1 $TMP/s2
check "info RUN_DIR: the best checkpoint's path" \
    test "$($TXL info $R --json 2>/dev/null | jq -r .path)" = "$R/best.safetensors.gz"
$TXL export $R -o $TMP/w.safetensors -q 2>$TMP/x.err
check "export RUN_DIR writes the weights" test -s $TMP/w.safetensors
$TXL probe shift $R --offsets 0,5 --max-tokens 2000 --json -q > $TMP/p.json 2>$TMP/p.err
check "probe RUN_DIR runs" jq -s -e 'length == 2' $TMP/p.json

# no best yet (a run stopped before its first evaluation): last
mkdir -p $TMP/onlylast
cp $R/last.safetensors.gz $TMP/onlylast/
check "a directory with only last: eval takes last" \
    test "$($TXL info $TMP/onlylast --json 2>/dev/null | jq -r .path)" = "$TMP/onlylast/last.safetensors.gz"

# --resume RUN_DIR continues from last, equal to --resume RUN_DIR/last.safetensors.gz (a
# twin run resumed by file)
$TXL train -c $CFG -q --set train.out_dir=$TMP/twin --steps 20 >/dev/null 2>&1
$TXL train -q --resume $R --steps 5 >/dev/null 2>$TMP/r.err
check "--resume RUN_DIR trains on (exit $?: $(head -c 200 $TMP/r.err))" \
    test "$($TXL info $R/last.safetensors.gz --json | jq .step)" = 25
$TXL train -q --resume $TMP/twin/last.safetensors.gz --steps 5 >/dev/null 2>&1
check "  ... exactly as --resume RUN_DIR/last.safetensors.gz" \
    test "$(step_losses $R/log.jsonl | md5sum)" = "$(step_losses $TMP/twin/log.jsonl | md5sum)"
$TXL train -c $CFG -q --init-from $R --set train.out_dir=$TMP/ft --steps 2 >/dev/null 2>$TMP/i.err
check "--init-from RUN_DIR (exit $?)" test -s $TMP/ft/last.safetensors.gz

mkdir -p $TMP/empty
$TXL eval $TMP/empty >/dev/null 2>$TMP/e.err; rc=$?
check "eval of a directory without a checkpoint: exit 2 (got $rc)" test $rc -eq 2
check "  ... naming what it looked for" grep -q "a directory without a checkpoint (expected best.safetensors.gz or last.safetensors.gz in it)" $TMP/e.err
$TXL train -q --resume $TMP/empty >/dev/null 2>$TMP/e2.err; rc=$?
check "--resume of such a directory: exit 2 (got $rc)" test $rc -eq 2
finish
