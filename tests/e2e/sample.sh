#!/bin/sh
# txl sample: several samples as one batch (each stream decodes what it would alone),
# interactive prompts from stdin (none when stdin is empty, an error when it is closed),
# --prompt - .
. tests/e2e/lib.sh
$TXL train -c tests/configs/nano.yaml -q --set train.max_steps=30 --set train.out_dir=$TMP/run \
    >/dev/null 2>$TMP/err || bad "training: $(cat $TMP/err)"
CK=$TMP/run/last.safetensors.gz

# a batch: sample b of N uses the seed's b-th key; b = 0 is the single sample of that seed
$TXL sample $CK -p "ROMEO:" -n 80 --seed 7 --num-samples 4 -q > $TMP/batch 2>$TMP/err ||
    bad "--num-samples: $(cat $TMP/err)"
check "--num-samples 4: four samples, each followed by a line of dashes" \
    test "$(grep -c -x -e '---------------' $TMP/batch)" = 4
$TXL sample $CK -p "ROMEO:" -n 80 --seed 7 -q > $TMP/one
head -c 80 $TMP/batch > $TMP/first
check "  ... the first equals the single sample of the same seed, byte for byte" cmp $TMP/first $TMP/one
# greedy: every stream of the batch is the same text, and equals the single greedy text
$TXL sample $CK -p "ROMEO:" -n 60 -t 0 --num-samples 3 -q > $TMP/greedy3
$TXL sample $CK -p "ROMEO:" -n 60 -t 0 -q > $TMP/greedy1
for i in 1 2 3; do cat $TMP/greedy1; printf '\n---------------\n'; done > $TMP/greedy1x3
check "  ... greedy: three samples equal to the single one (batched decoding == one stream)" \
    cmp $TMP/greedy3 $TMP/greedy1x3

# --batch: the samples decoded in groups, one after the other, are the samples of one batch
# (at most 16 streams: each row's products round the same whatever the rows beside it)
$TXL sample $CK -p "ROMEO:" -n 80 --seed 7 --num-samples 6 --stats -q > $TMP/six 2>$TMP/six.err ||
    bad "--num-samples 6: $(cat $TMP/six.err)"
$TXL sample $CK -p "ROMEO:" -n 80 --seed 7 --num-samples 6 --batch 4 --stats -q > $TMP/six4 \
    2>$TMP/six4.err || bad "--batch 4: $(cat $TMP/six4.err)"
check "--batch 4 of 6 samples: two groups of 3 (--stats batch 3)" \
    test "$(grep '^{' $TMP/six4.err | jq .batch)" = 3
check "  ... the same six samples as one batch of 6, byte for byte" cmp $TMP/six $TMP/six4
check "  ... auto: the nano model's 6 streams fit the cache, one batch (--stats batch 6)" \
    test "$(grep '^{' $TMP/six.err | jq .batch)" = 6
$TXL sample $CK -i --batch 2 -q </dev/null >/dev/null 2>$TMP/err; rc=$?
check "--batch with -i: exit 2, named" sh -c "test $rc = 2 && grep -q -- '--batch' $TMP/err"

# interactive: one answer per line, the memory kept from line to line
printf 'First Citizen:\nSecond Citizen:\n' | $TXL sample $CK -i -n 40 --seed 3 -q > $TMP/inter 2>$TMP/err ||
    bad "-i: $(cat $TMP/err)"
check "-i: one answer line per prompt line (2)" test "$(wc -l < $TMP/inter)" = 2
printf 'First Citizen:\n' | $TXL sample $CK -i -n 40 --seed 3 -q > $TMP/inter1
check "  ... the first answer does not depend on what follows" \
    test "$(head -1 $TMP/inter)" = "$(head -1 $TMP/inter1)"
printf 'Second Citizen:\n' | $TXL sample $CK -i -n 40 --seed 3 -q > $TMP/inter2
check "  ... the second answer sees the first exchange (memory carried): it differs from a fresh start" \
    test "$(sed -n 2p $TMP/inter)" != "$(head -1 $TMP/inter2)"
# -i with a closed stdin is an error, before the model is loaded; an empty stdin has no prompts
$TXL sample $CK -i -q <&- >$TMP/out 2>$TMP/err; rc=$?
check "-i <&- (stdin closed): exit 2 (got $rc)" test $rc = 2
check "  ... says so" grep -q -- "-i reads the prompts from stdin, which is closed" $TMP/err
$TXL sample $CK -i -q </dev/null >$TMP/out 2>$TMP/err; rc=$?
check "-i </dev/null (no prompts): exit 0 (got $rc), nothing printed" test $rc = 0 -a ! -s $TMP/out -a ! -s $TMP/err

# --prompt - reads the prompt from stdin
printf 'ROMEO:' | $TXL sample $CK -p - -n 80 --seed 7 -q > $TMP/stdin
check "--prompt -: the prompt from stdin" cmp $TMP/stdin $TMP/one
$TXL sample $CK -i -p - -q </dev/null >/dev/null 2>$TMP/err; rc=$?
check "-i with --prompt -: exit 2 (both would read stdin)" test $rc = 2
finish
