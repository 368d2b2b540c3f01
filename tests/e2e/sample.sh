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
check "  ... the first equals the single sample of the same seed, byte for byte" \
    sh -c "head -c 80 $TMP/one | cmp $TMP/first"
# the text ends with a newline (one is added when the sample does not end with one): the
# shell's prompt landed on the text
check "a single sample: its 80 bytes, then a newline unless the 80th is one" sh -c "
    test \$(tail -c 1 $TMP/first | od -An -c | tr -d ' ') = '\\n' && cmp -s $TMP/first $TMP/one ||
    { head -c 80 $TMP/one | cmp -s - $TMP/first && test \$(wc -c < $TMP/one) = 81 &&
      test \"\$(tail -c 1 $TMP/one | od -An -c | tr -d ' ')\" = '\\n'; }"
# greedy: every stream of the batch is the same text, and equals the single greedy text
$TXL sample $CK -p "ROMEO:" -n 60 -t 0 --num-samples 3 -q > $TMP/greedy3
$TXL sample $CK -p "ROMEO:" -n 60 -t 0 -q > $TMP/greedy1
for i in 1 2 3; do cat $TMP/greedy1; printf -- '---------------\n'; done > $TMP/greedy1x3
check "  ... greedy: three samples equal to the single one (batched decoding == one stream)" \
    cmp $TMP/greedy3 $TMP/greedy1x3

# --cache q8: int8 keys and values; each stream still decodes what it would alone
$TXL sample $CK -p "ROMEO:" -n 60 -t 0 --cache q8 --stats -q > $TMP/q8c1 2>$TMP/q8c1.err ||
    bad "--cache q8: $(cat $TMP/q8c1.err)"
check "--cache q8: --stats says cache q8" test "$(grep '^{' $TMP/q8c1.err | jq -r .cache)" = q8
$TXL sample $CK -p "ROMEO:" -n 60 -t 0 --cache q8 --num-samples 3 -q > $TMP/q8c3
for i in 1 2 3; do cat $TMP/q8c1; printf -- '---------------\n'; done > $TMP/q8c1x3
check "  ... greedy: three samples equal to the single one" cmp $TMP/q8c3 $TMP/q8c1x3
$TXL sample $CK -p x --cache q4 -q >/dev/null 2>$TMP/err; rc=$?
check "--cache q4: exit 2, naming the choices" sh -c "test $rc = 2 && grep -q 'fp32, bf16 or q8' $TMP/err"

# --json: one object per sample, printed when all are drawn
$TXL sample $CK -p "ROMEO:" -n 80 --seed 7 --num-samples 3 --json -q > $TMP/s.json
check "--json --num-samples 3: an object per sample: sample, prompt, text, tokens, bytes, seconds, finish" \
    jq -s -e 'length == 3 and map(.sample) == [0, 1, 2] and all(.prompt == null and .bytes == 80 and
              .tokens >= 80 and .seconds >= 0 and .finish == "length" and (.text | length) > 0)' $TMP/s.json
$TXL sample $CK -p "ROMEO:" -n 60 -t 0 --num-samples 2 --json -q > $TMP/g.json
check "  ... greedy: each text is the single sample's (as UTF-8, a bad byte as U+FFFD)" \
    /usr/bin/python3 -c "import json, sys
rows = [json.loads(l) for l in open('$TMP/g.json')]
want = open('$TMP/greedy1', 'rb').read()[:60].decode('utf-8', 'replace')
sys.exit(not all(r['text'] == want for r in rows))"
# --prompts FILE: each line sampled on its own (a fresh memory), named by its index
printf 'ROMEO:\n\nFirst Citizen:\n' > $TMP/prompts
$TXL sample $CK --prompts $TMP/prompts -n 60 -t 0 --json -q > $TMP/p.json
$TXL sample $CK -p "First Citizen:" -n 60 -t 0 --json -q > $TMP/p1.json
check "--prompts: one object per prompt (the empty line skipped), indexed 0 and 1" \
    test "$(jq -s -c 'map(.prompt)' $TMP/p.json)" = "[0,1]"
check "  ... each as if sampled alone (greedy)" sh -c "
    test \"\$(jq -s -r '.[1].text' $TMP/p.json)\" = \"\$(jq -r .text $TMP/p1.json)\" &&
    test \"\$(jq -s -r '.[0].text' $TMP/p.json)\" = \"\$(head -c 60 $TMP/greedy1)\""
$TXL sample $CK --prompts $TMP/prompts -n 60 -t 0 -q > $TMP/p.txt
check "  ... as text: each followed by a line of dashes" test "$(grep -c -x -e '---------------' $TMP/p.txt)" = 2
# --stop: the sample ends where the string appears, the string not printed
stop=$(head -c 60 $TMP/greedy1 | dd bs=1 skip=20 count=3 2>/dev/null)
want=$(head -c 60 $TMP/greedy1 | awk -v s="$stop" 'BEGIN {RS = "^$"} {i = index($0, s); printf "%s", substr($0, 1, i - 1)}')
$TXL sample $CK -p "ROMEO:" -n 60 -t 0 --stop "$stop" --json -q > $TMP/stop.json
check "--stop '$stop': the greedy text up to it, without it" \
    test "$(jq -j .text $TMP/stop.json)" = "$want"
check "  ... finish: stop" test "$(jq -r .finish $TMP/stop.json)" = stop
$TXL sample $CK -p "ROMEO:" -n 60 -t 0 --stop "$stop" -q > $TMP/stop.txt
check "  ... streamed: the same, then a newline" test "$(cat $TMP/stop.txt)" = "$want"
$TXL sample $CK -p "ROMEO:" -n 60 -t 0 --stop 'zzzz' --stop '\n' --json -q > $TMP/stopnl.json
check "--stop '\\n' (with another that never comes): the text's first line" \
    test "$(jq -r .text $TMP/stopnl.json)" = "$(head -c 60 $TMP/greedy1 | head -1)"
$TXL sample $CK -p x --stop '' -q >/dev/null 2>$TMP/err; rc=$?
check "--stop '': exit 2" sh -c "test $rc = 2 && grep -q 'an empty string would stop every sample' $TMP/err"
$TXL sample $CK -i --json -q </dev/null >/dev/null 2>$TMP/err; rc=$?
check "-i --json: exit 2" test $rc = 2

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
# a line ending in a backslash is continued: the answer completes the typed line
printf 'First Citi\\\n' | $TXL sample $CK -i -n 40 -t 0 -q > $TMP/cont
want=$($TXL sample $CK -p "First Citi" -n 40 -t 0 -q | head -1)
check "-i, 'First Citi\\': one line, the typed part and its greedy completion" \
    test "$(cat $TMP/cont)" = "First Citi$want"
# on a terminal, -i asks for each line with '> ' (on stderr; a pipe gets none: above)
if command -v script >/dev/null 2>&1; then
    printf 'First Citizen:\n' | timeout 60 script -qec "$TXL sample $CK -i -n 20 -t 0" /dev/null > $TMP/tty 2>&1
    check "-i on a terminal: the '> ' marker before each line and at the end" \
        test "$(grep -o '> ' $TMP/tty | wc -l)" -ge 2
fi
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
