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
expect2 "train: shorter than one segment" "$C/short.txt;;the train split has 9 tokens: 8 streams of 1 tokens each, but each stream needs at least 33 (tgt_len 32 + 1)" \
    $TXL train -q -c $CFG --set data.train=$C/short.txt --set train.out_dir=$RUN
# eval scores a file whole: 11 bytes in 8 streams is fine, 4 are too few for 8, 1 for any
out=$($TXL eval $CK --data $C/short.txt --json 2>/dev/null)
check "eval: 11 bytes in 8 streams, every byte after the first scored" \
    test "$(printf '%s' "$out" | jq -r .tokens 2>/dev/null)" = 10
printf 'hell' > $C/four.txt
expect2 "eval: fewer tokens than streams" "$C/four.txt;;the file has 4 tokens, too few for 8 streams (each needs an input and its target); use a batch of at most 3" \
    $TXL eval $CK --data $C/four.txt
printf 'h' > $C/one.txt
expect2 "eval: one byte" "$C/one.txt;;the file has 1 token: scoring needs at least 2" \
    $TXL eval $CK --data $C/one.txt
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
# the metadata config is YAML: swap one key's line
st_edit $TMP/best.safetensors $TMP/gone.safetensors ".__metadata__.config |= sub(\"\n  train: \\\"[^\\\"]*\\\"\"; \"\n  train: \\\"$C/gone.txt\\\"\")"
expect2 "eval --split of a run whose corpus is gone" "--split valid;;$C/gone.txt: cannot open corpus" \
    $TXL eval $TMP/gone.safetensors
# a run with a separate valid file and no test file has no test split (training never
# held one out): eval --split test must not evaluate part of the training data instead
gunzip -c tests/data/tinyshakespeare.txt.gz | head -c 60000 > $C/v.txt
st_edit $TMP/best.safetensors $TMP/sepvalid.safetensors ".__metadata__.config |= sub(\"\n  valid: \\\"[^\\\"]*\\\"\"; \"\n  valid: \\\"$C/v.txt\\\"\")"
expect2 "eval --split test of a run with data.valid and no data.test" \
    "--split test;;$C/v.txt: there is no test split: data.valid is a separate file and data.test is empty" \
    $TXL eval $TMP/sepvalid.safetensors --split test
check "...while --split valid evaluates data.valid" $TXL eval $TMP/sepvalid.safetensors --split valid --max-tokens 3000 -q
if [ "$(id -u)" = 0 ]; then
    echo "  skip unreadable corpus: running as root, where chmod 000 does not stop reads"
else
    printf 'secret\n' > $C/unreadable.txt
    chmod 000 $C/unreadable.txt
    corpus "unreadable" "cannot open corpus: Permission denied" $C/unreadable.txt
fi

echo "-- what follows the gzip data, and the limit on corpora held in memory"
{ cat tests/data/tinyshakespeare.txt.gz; printf 'junk'; } > $C/junk.txt.gz
corpus "bytes after the gzip stream" "trailing garbage after the gzip data: the bytes from offset $(wc -c < tests/data/tinyshakespeare.txt.gz) of the file are not another gzip member" $C/junk.txt.gz
gunzip -c tests/data/tinyshakespeare.txt.gz > $C/tiny.txt
{ head -c 1000 $C/tiny.txt | gzip -1; tail -c +1001 $C/tiny.txt | gzip -9; } > $C/members.txt.gz   # the split inside the first 4000 bytes
l1=$($TXL eval $CK --data $C/members.txt.gz --max-tokens 4000 --json -q | jq .loss)
l2=$($TXL eval $CK --data $C/tiny.txt --max-tokens 4000 --json -q | jq .loss)
check "two gzip members (cat a.gz b.gz) are one corpus: the plain file's loss ($l1 = $l2)" test -n "$l1" -a "$l1" = "$l2"
expect2 "TXL_MAX_CORPUS_MB=1: the 1.1 MB of tinyshakespeare.txt.gz are too many" \
    "tests/data/tinyshakespeare.txt.gz;;the decompressed corpus is larger than 1 MiB, the limit for a corpus held in memory;;set TXL_MAX_CORPUS_MB to raise it" \
    env TXL_MAX_CORPUS_MB=1 $TXL eval $CK --data tests/data/tinyshakespeare.txt.gz
check "TXL_MAX_CORPUS_MB=2: it fits" env TXL_MAX_CORPUS_MB=2 $TXL eval $CK --data tests/data/tinyshakespeare.txt.gz --max-tokens 3000
check "TXL_MAX_CORPUS_MB=1: a plain file of 1.1 MB is not held in memory" env TXL_MAX_CORPUS_MB=1 $TXL eval $CK --data $C/tiny.txt --max-tokens 3000
for v in abc 0 -5 1.5 '' ' 7' 99999999999999999999; do
    [ -z "$v" ] && continue   # empty: the default
    expect2 "TXL_MAX_CORPUS_MB='$v'" "tests/data/tinyshakespeare.txt.gz;;TXL_MAX_CORPUS_MB is '$v', expected a whole number of MiB >= 1" \
        env TXL_MAX_CORPUS_MB="$v" $TXL eval $CK --data tests/data/tinyshakespeare.txt.gz
done
expect2 "train with a malformed TXL_MAX_CORPUS_MB" "data.train: tests/data/tinyshakespeare.txt.gz: TXL_MAX_CORPUS_MB is 'lots'" \
    env TXL_MAX_CORPUS_MB=lots $TXL train -q -c $CFG --set train.out_dir=$RUN
# /dev/zero and a gzip bomb (1 GiB of zeros in 16 members, 1 MB on disk), under a 1 GB
# memory limit: refused at the limit, not by the OOM killer
expect2 "/dev/zero as a corpus (TXL_MAX_CORPUS_MB=64)" "/dev/zero;;the streamed corpus is larger than 64 MiB" \
    limit_vm 1000000 env TXL_MAX_CORPUS_MB=64 timeout 60 $TXL eval $CK --data /dev/zero
expect2 "train on /dev/zero (TXL_MAX_CORPUS_MB=64)" "data.train: /dev/zero;;the streamed corpus is larger than 64 MiB" \
    limit_vm 1000000 env TXL_MAX_CORPUS_MB=64 timeout 60 $TXL train -q -c $CFG --set data.train=/dev/zero --set train.out_dir=$RUN
head -c 67108864 /dev/zero | gzip -1 > $TMP/zeros64m.gz
i=0; while [ $i -lt 16 ]; do cat $TMP/zeros64m.gz; i=$((i + 1)); done > $C/bomb.txt.gz
expect2 "a gzip bomb (1 GiB of zeros; TXL_MAX_CORPUS_MB=100)" "$C/bomb.txt.gz;;the decompressed corpus is larger than 100 MiB" \
    limit_vm 1000000 env TXL_MAX_CORPUS_MB=100 timeout 60 $TXL eval $CK --data $C/bomb.txt.gz

echo "-- pipes: read as streams"
# feed FIFO FILE: a writer for the FIFO that gives up after 60 s if nobody reads
feed() { timeout 60 sh -c "cat '$2' > '$1'" 2>/dev/null & }
mkfifo $C/fifo
feed $C/fifo $C/tiny.txt
l3=$($TXL eval $CK --data $C/fifo --max-tokens 4000 --json -q 2>$TMP/fifo.err | jq .loss)
check "eval --data FIFO (plain text): the file's loss ($l3 = $l2; $(head -c 200 $TMP/fifo.err))" test -n "$l3" -a "$l3" = "$l2"
feed $C/fifo tests/data/tinyshakespeare.txt.gz
l4=$($TXL eval $CK --data $C/fifo --max-tokens 4000 --json -q 2>$TMP/fifo.err | jq .loss)
check "eval --data FIFO (gzip'd): the same ($l4; $(head -c 200 $TMP/fifo.err))" test -n "$l4" -a "$l4" = "$l2"
feed $C/fifo $C/tiny.txt
$TXL train -q -c $CFG --set data.train=$C/fifo --set train.max_steps=3 --set train.warmup_steps=1 \
    --set train.eval_interval=0 --set train.eval_tokens=2000 --set train.out_dir=$TMP/r_fifo >/dev/null 2>$TMP/fifo.err
check "train on a FIFO (exit $?: $(head -c 200 $TMP/fifo.err))" test -s $TMP/r_fifo/last.safetensors.gz
feed $C/fifo $C/junk.txt.gz
expect2 "a FIFO with bytes after the gzip data" "$C/fifo;;trailing garbage after the gzip data" $TXL eval $CK --data $C/fifo
wait

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
    check "$1: samples 50 bytes" sh -c "$TXL sample $TMP/r_$3/last.safetensors.gz -n 50 --json </dev/null | test \$(jq .bytes) -eq 50"
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
