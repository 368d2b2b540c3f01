#!/bin/sh
# Bad input gets a clear message (file and place) and exit code 2, never a crash.
. tests/e2e/lib.sh
expect2() { # expect2 "description" "message substring" command...
    d=$1; msg=$2; shift 2
    "$@" >$TMP/out 2>$TMP/err
    rc=$?
    if [ $rc -eq 2 ] && grep -qF -- "$msg" $TMP/err; then ok "$d (exit 2: $(head -c 150 $TMP/err | head -1))"
    else bad "$d: exit $rc, stderr: $(head -c 300 $TMP/err)"; fi
}
printf 'model:\n  n_layer: 2\n  d_modle: 64\n' > $TMP/typo.yaml
expect2 "config: unknown key" "typo.yaml:3:3" $TXL train -c $TMP/typo.yaml
printf 'model:\n  n_layer: four\n' > $TMP/type.yaml
expect2 "config: wrong type" "type.yaml:2:12" $TXL train -c $TMP/type.yaml
printf 'model: {n_layer: 2\n' > $TMP/syntax.yaml
expect2 "config: YAML syntax error" "syntax.yaml:" $TXL train -c $TMP/syntax.yaml
printf 'model: {d_model: 63}\ndata: {train: x}\n' > $TMP/odd.yaml
expect2 "config: odd d_model" "d_model" $TXL train -c $TMP/odd.yaml
expect2 "config: missing file" "nope.yaml" $TXL train -c $TMP/nope.yaml
expect2 "--set unknown key" "model.d_modle" $TXL train -c tests/configs/micro.yaml --set model.d_modle=3
expect2 "--set malformed value" "model.n_layer" $TXL train -c tests/configs/micro.yaml --set model.n_layer=x
expect2 "missing corpus" "nope.txt" $TXL train -c tests/configs/micro.yaml --set data.train=$TMP/nope.txt --set train.out_dir=$TMP/r1
: > $TMP/empty.txt
expect2 "empty corpus" "empty" $TXL train -c tests/configs/micro.yaml --set data.train=$TMP/empty.txt --set train.out_dir=$TMP/r2
printf 'hello world' > $TMP/short.txt
expect2 "corpus shorter than a segment" "short.txt" $TXL train -c tests/configs/micro.yaml --set data.train=$TMP/short.txt --set train.out_dir=$TMP/r3
expect2 "corpus is a directory" "directory" $TXL train -c tests/configs/micro.yaml --set data.train=$TMP --set train.out_dir=$TMP/r4
head -c 20000 tests/data/tinyshakespeare.txt.gz > $TMP/trunc.gz
expect2 "truncated gzip corpus" "trunc.gz" $TXL train -c tests/configs/micro.yaml --set data.train=$TMP/trunc.gz --set train.out_dir=$TMP/r5
expect2 "unknown flag" "--bogus" $TXL train -c tests/configs/micro.yaml --bogus
expect2 "missing flag value" "--set" $TXL train -c tests/configs/micro.yaml --set
expect2 "eval: non-numeric length" "--tgt-len" $TXL eval tests/fixtures/eval/micro.safetensors.gz --tgt-len abc
expect2 "eval: zero length" "--tgt-len" $TXL eval tests/fixtures/eval/micro.safetensors.gz --tgt-len 0
expect2 "eval: malformed sweep" "--sweep" $TXL eval tests/fixtures/eval/micro.safetensors.gz --sweep 1,,2
expect2 "sample: negative -n" "-n" $TXL sample tests/fixtures/eval/micro.safetensors.gz -n -5
printf 'not a checkpoint at all, just text' > $TMP/bad.safetensors
expect2 "checkpoint: wrong magic" "bad.safetensors" $TXL eval $TMP/bad.safetensors
head -c 3000 tests/fixtures/eval/micro.safetensors.gz > $TMP/trunc.safetensors.gz
expect2 "checkpoint: truncated gzip" "trunc.safetensors.gz" $TXL eval $TMP/trunc.safetensors.gz
expect2 "checkpoint: missing" "nothere" $TXL info $TMP/nothere.safetensors.gz
expect2 "unknown command" "frobnicate" $TXL frobnicate
finish
