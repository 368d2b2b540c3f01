#!/bin/sh
# Builds tests/fixtures/eval/: a small checkpoint written by txl (micro config, 200 steps on
# tinyshakespeare) and the losses the independent reference (tests/ref/eval_ckpt.py,
# float64) computes for it on corpora and lengths txl's tests do not train on, including
# 4x the trained tgt_len and mem_len. tests/e2e/reference_eval.sh compares txl eval to them.
# Needs ./txl and /usr/bin/python3 with torch. Usage: tests/ref/gen_eval_fixture.sh
set -eu
OUT=tests/fixtures/eval
PY=${PYTHON:-/usr/bin/python3}
mkdir -p $OUT
TMP=$(mktemp -d)
trap 'rm -rf $TMP' EXIT
./txl train -c tests/configs/micro.yaml -q --set train.out_dir=$TMP/run --set train.max_steps=200 \
    --set train.eval_interval=0 --set train.ckpt_gzip=true >/dev/null
cp $TMP/run/last.safetensors.gz $OUT/micro.safetensors.gz
: > $OUT/expected.jsonl
# setting: data | extra txl flags | reference flags
while IFS='|' read -r data tflags rflags; do
    [ -n "$data" ] || continue
    line=$($PY tests/ref/eval_ckpt.py $OUT/micro.safetensors.gz --data $data $rflags --dtype float64)
    echo "$line" | $PY -c "import json,sys; d=json.loads(sys.stdin.read()); d['txl_flags']='$tflags'.strip(); print(json.dumps(d))" >> $OUT/expected.jsonl
done <<'SETTINGS'
tests/data/enwik8_slice60k.txt.gz | |
tests/data/enwik8_slice60k.txt.gz | --tgt-len 128 --mem-len 128 --batch 4 | --tgt-len 128 --mem-len 128 --batch 4
tests/data/enwik8_slice60k.txt.gz | --tgt-len 32 --mem-len 256 --batch 2 | --tgt-len 32 --mem-len 256 --batch 2
tests/data/enwik8_slice60k.txt.gz | --tgt-len 128 --mem-len 0 --batch 4 | --tgt-len 128 --mem-len 0 --batch 4
tests/data/enwik8_slice60k.txt.gz | --clamp-len 16 --mem-len 96 | --clamp-len 16 --mem-len 96
tests/data/tinyshakespeare.txt.gz | --tgt-len 100 --mem-len 50 --batch 16 | --tgt-len 100 --mem-len 50 --batch 16
SETTINGS
echo "wrote $OUT/micro.safetensors.gz and $(wc -l < $OUT/expected.jsonl) expected results"
