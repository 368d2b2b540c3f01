#!/bin/sh
# Corpora: missing, empty, too short for one segment, a directory, unreadable, truncated or
# damaged gzip, a device: exit 2 naming the file (and the key, the split, the byte count),
# for `train` and `eval --data`, and the run already in out_dir stays as it was. Bytes are
# bytes: a binary file and a file of one repeated byte train, evaluate and sample fine.
. tests/e2e/lib.sh
. tests/e2e/badlib.inc
CFG=tests/configs/micro.yaml
CK=tests/fixtures/eval/micro.safetensors.gz
RUN=$TMP/run
setup_run $RUN
guard_init $RUN
C=$TMP/corpora
mkdir -p $C
corpus() { # corpus "description" "needles" FILE: train on it (into the guarded run), eval it
    expect2 "train: $1" "$3;;$2" $TXL train -q -c $CFG --set data.train="$3" --set train.out_dir=$RUN
    expect2 "eval --data: $1" "$3;;$2" $TXL eval $CK --data "$3"
}

corpus "missing" "cannot open corpus: No such file or directory" $C/nope.txt
: > $C/empty.txt
corpus "empty" "corpus is empty" $C/empty.txt
printf '' | gzip > $C/empty.txt.gz
corpus "gzip of nothing" "corpus is empty" $C/empty.txt.gz
corpus "a directory" "is a directory, expected a text file" $C
corpus "/dev/null" "corpus is empty" /dev/null
printf 'hello world' > $C/short.txt
expect2 "train: shorter than one segment" "$C/short.txt;;the train split has 9 bytes: 8 streams of 1 tokens each, but each stream needs at least 33 (tgt_len 32 + 1)" \
    $TXL train -q -c $CFG --set data.train=$C/short.txt --set train.out_dir=$RUN
expect2 "eval: shorter than one token per stream" "$C/short.txt;;the file split has 11 bytes: 8 streams of 1 tokens each, but each stream needs at least 2" \
    $TXL eval $CK --data $C/short.txt
head -c 300 tests/data/tinyshakespeare.txt.gz > $C/trunc.txt.gz
corpus "truncated gzip" "corrupt or truncated gzip data: unexpected end of file after" $C/trunc.txt.gz
s=$(wc -c < tests/data/tinyshakespeare.txt.gz)
flip_byte tests/data/tinyshakespeare.txt.gz $C/flip.txt.gz $((s - 7)) 1
corpus "gzip with a damaged CRC" "corrupt or truncated gzip data: incorrect data check" $C/flip.txt.gz
flip_byte tests/data/tinyshakespeare.txt.gz $C/flip2.txt.gz $((s / 2)) 8
corpus "gzip with a bit flip in the payload" "corrupt or truncated gzip data" $C/flip2.txt.gz
expect2 "data.valid missing" "data.valid: $C/novalid.txt: cannot open corpus" \
    $TXL train -q -c $CFG --set data.valid=$C/novalid.txt --set train.out_dir=$RUN
expect2 "data.test empty" "data.test: $C/empty.txt: corpus is empty" \
    $TXL train -q -c $CFG --set data.test=$C/empty.txt --set train.out_dir=$RUN
gunzip -c $RUN/best.safetensors.gz > $TMP/best.safetensors
st_edit $TMP/best.safetensors $TMP/gone.safetensors ".__metadata__.config |= (fromjson | .data.train = \"$C/gone.txt\" | tojson)"
expect2 "eval --split of a run whose corpus is gone" "--split valid;;$C/gone.txt: cannot open corpus" \
    $TXL eval $TMP/gone.safetensors
if [ "$(id -u)" = 0 ]; then
    echo "  skip unreadable corpus: running as root, where chmod 000 does not stop reads"
else
    printf 'secret\n' > $C/unreadable.txt
    chmod 000 $C/unreadable.txt
    corpus "unreadable" "cannot open corpus: Permission denied" $C/unreadable.txt
fi

guard_sum > $TMP/guard.end
check "the run directory is untouched after all of the above" cmp -s $TMP/guard.sum $TMP/guard.end

# bytes are bytes: an executable and one repeated byte are corpora like any other
trains() { # trains "description" FILE
    $TXL train -q -c $CFG --set data.train="$2" --set train.max_steps=5 --set train.warmup_steps=1 \
        --set train.eval_interval=0 --set train.out_dir=$TMP/r_$3 >$TMP/out 2>$TMP/err
    rc=$?
    check "$1: trains (exit $rc$( [ $rc -ne 0 ] && head -c 200 $TMP/err))" test $rc -eq 0
    loss=$(jq -r 'select(.event=="train") | .loss' $TMP/r_$3/log.jsonl 2>/dev/null | tail -1)
    check "$1: finite loss ($loss)" awk -v l="$loss" 'BEGIN {exit !(l + 0 == l && l > 0 && l < 100)}'
    check "$1: evaluates" $TXL eval $TMP/r_$3/last.safetensors.gz --data "$2" --max-tokens 20000 -q
    check "$1: samples 50 bytes" sh -c "$TXL sample $TMP/r_$3/last.safetensors.gz -n 50 </dev/null | test \$(wc -c) -eq 50"
}
BIN=/usr/bin/ls
[ -r $BIN ] || BIN=/bin/sh
head -c 150000 $BIN > $C/binary
trains "binary ($BIN)" $C/binary bin
head -c 50000 /dev/zero > $C/zeros
trains "50000 NUL bytes" $C/zeros zeros
head -c 50000 /dev/zero | tr '\0' 'a' > $C/aaaa
trains "50000 times 'a'" $C/aaaa aaaa
head -c 100000 $BIN | gzip > $C/binary.gz
trains "gzip'd binary" $C/binary.gz bingz
finish
