#!/bin/sh
# txl vocab: building (word, bpe), importing GPT-2's, encoding to ids and token files,
# decoding them back to the exact bytes, info on files, checkpoints and run directories; and
# bad input: every fault exits 2 naming the file and the line or offset, and writes nothing.
. tests/e2e/lib.sh
D=tests/data/vocab
expect2() { # expect2 "description" "message substring" command...
    d=$1; msg=$2; shift 2
    "$@" >$TMP/out 2>$TMP/err
    rc=$?
    if [ $rc -eq 2 ] && grep -qF -- "$msg" $TMP/err; then ok "$d (exit 2: $(head -1 $TMP/err | head -c 160))"
    else bad "$d: exit $rc, stderr: $(head -c 300 $TMP/err)"; fi
}

# ---- word ----
$TXL vocab build --tokenizer word $D/wt2_valid_head.txt -o $TMP/w.vocab -q
check "word: built" test -s $TMP/w.vocab
$TXL vocab info $TMP/w.vocab --json > $TMP/w.json
check "word: info --json: kind word, <eos> 0, <unk> its own" \
    test "$(jq -r '"\(.kind) \(.specials.eos) \(.specials.unk) \(.size)"' $TMP/w.json)" = "word 0 1 1912"
$TXL vocab encode $TMP/w.vocab $D/wt2_valid_head.txt > $TMP/w.ids
$TXL vocab decode $TMP/w.vocab $TMP/w.ids > $TMP/w.dec
awk '{$1 = $1; print}' $D/wt2_valid_head.txt > $TMP/w.norm
check "word: decode(encode(text)) is the text's words, a space apart, a line each" \
    cmp $TMP/w.dec $TMP/w.norm
$TXL vocab build --tokenizer word --size 100 --min-freq 3 $D/word_edge.txt - -o $TMP/w2.vocab -q \
    < $D/wt2_test_head.txt
check "word: --size, --min-freq and stdin as a corpus" \
    test "$($TXL vocab info $TMP/w2.vocab --json | jq -c '[.size, .specials.unk]')" = "[101,1]"

# ---- bpe ----
$TXL vocab build --tokenizer bpe --size 600 tests/data/tinyshakespeare.txt.gz -o $TMP/b.vocab -q
check "bpe: built, 600 tokens" test "$($TXL vocab info $TMP/b.vocab --json | jq .size)" = 600
cat $D/gpt2/*.txt > $TMP/mixed.txt
head -c 3000 /dev/urandom >> $TMP/mixed.txt
$TXL vocab encode $TMP/b.vocab $TMP/mixed.txt | $TXL vocab decode $TMP/b.vocab > $TMP/b.dec
check "bpe: decode(encode(x)) == x (scripts, emoji, random bytes), ids through a pipe" \
    cmp $TMP/b.dec $TMP/mixed.txt
$TXL vocab encode $TMP/b.vocab - --binary -o $TMP/b.tok -q < $TMP/mixed.txt
$TXL vocab decode $TMP/b.vocab $TMP/b.tok > $TMP/b.dec2
check "bpe: a token file from stdin decodes to the text" cmp $TMP/b.dec2 $TMP/mixed.txt
check "bpe: the token file has ids of 2 bytes" \
    test $(( $(wc -c < $TMP/b.tok) - 32 )) -eq $(( 2 * $($TXL vocab encode $TMP/b.vocab $TMP/mixed.txt | wc -w) ))
$TXL vocab info $TMP/b.vocab --data tests/data/tinyshakespeare.txt.gz --json > $TMP/b.json
check "bpe: info --data: bytes per token over 2 on Shakespeare" \
    jq -e '.data.bytes == 1115394 and .data.bytes_per_token > 2' $TMP/b.json

# ---- GPT-2 ----
$TXL vocab import-gpt2 $D/gpt2_encoder.json.gz $D/gpt2_vocab.bpe.gz -o $TMP/g.vocab -q
check "gpt2: 'Hello world' is 15496 995" \
    test "$(printf 'Hello world' | $TXL vocab encode $TMP/g.vocab)" = "15496 995"
$TXL vocab info $TMP/g.vocab > $TMP/g.info
check "gpt2: info names eot=50256 and 50000 merges" \
    sh -c "grep -q 'eot=50256' $TMP/g.info && grep -q '50000 merges' $TMP/g.info"

# ---- checkpoints ----
CK=tests/fixtures/eval/micro.safetensors.gz
$TXL vocab info $CK --json > $TMP/c.json
check "a byte model's checkpoint: the byte vocabulary" \
    jq -e '.kind == "byte" and .size == 256 and .source == "bytes"' $TMP/c.json
# a bpe model's run directory: its checkpoint holds the vocabulary (the vocab tensor)
$TXL train -c tests/configs/micro.yaml --set data.tokenizer=bpe --set data.vocab_size=300 \
    --set train.max_steps=2 --set train.warmup_steps=1 --set train.eval_tokens=2000 \
    --set train.out_dir=$TMP/run -q > /dev/null 2>&1
$TXL vocab info $TMP/run --json > $TMP/r.json
check "a run directory's checkpoint: its vocab tensor, bpe of 300 tokens" \
    jq -e '.source == "checkpoint" and .kind == "bpe" and .size == 300 and
           (.path | endswith("best.safetensors.gz"))' $TMP/r.json
$TXL vocab encode $TMP/run/last.safetensors.gz $TMP/mixed.txt --binary -o $TMP/r.tok -q
$TXL vocab decode $TMP/run $TMP/r.tok > $TMP/r.dec
check "  ... encodes and decodes any bytes (a checkpoint file, then the directory)" \
    cmp $TMP/r.dec $TMP/mixed.txt
expect2 "  ... whose token files another vocabulary refuses" "r.tok: its ids are of another vocabulary" \
    $TXL vocab decode $TMP/b.vocab $TMP/r.tok

# ---- bad vocabulary files ----
vbad() { # vbad "description" "message" FILE-CONTENT-COMMAND...: info on the file exits 2
    d=$1; msg=$2; shift 2
    "$@" > $TMP/bad.vocab
    expect2 "$d" "$msg" $TXL vocab info $TMP/bad.vocab
}
vbad "vocab: not a vocabulary" "bad.vocab:1: not a txl vocabulary" printf 'hello\n'
vbad "vocab: truncated" "bad.vocab:262: the size is 600 but the file lists 257 tokens" head -n 261 $TMP/b.vocab
vbad "vocab: a corrupt line" "bad.vocab:100:" sed '100s/.*/garbage here/' $TMP/b.vocab
vbad "vocab: a duplicate token" "bad.vocab:10: token 3 is a duplicate of token 2 (line 9)" \
    sed '10s/.*/3 a/; 9s/.*/2 a/' $TMP/w.vocab
vbad "vocab: a missing token" "bad.vocab:9: expected token 2, found token 3" sed '9d' $TMP/w.vocab
vbad "vocab: a merge of unknown tokens" "merge 0: its left part is not a token" \
    sed 's/^merges 344$/merges 344/; /^merges/{n;s/.*/zzzq e/}' $TMP/b.vocab
vbad "vocab: a size that is not a number" "bad.vocab:3:8: 'size' needs a number" sed '3s/.*/size 12x/' $TMP/w.vocab
vbad "vocab: a declared size that disagrees" "bad.vocab:1919: the size is 2000 but the file lists 1912 tokens" \
    sed '3s/.*/size 2000/' $TMP/w.vocab
gzip -c $TMP/b.vocab | head -c 3000 > $TMP/trunc.vocab.gz
expect2 "vocab: a truncated gzip'd file" "trunc.vocab.gz" $TXL vocab info $TMP/trunc.vocab.gz

# ---- bad token files ----
cp $TMP/b.tok $TMP/big.tok
printf '\377\377' | dd of=$TMP/big.tok bs=1 seek=40 conv=notrunc 2>/dev/null
expect2 "token file: an id >= V" "big.tok: token 4 (byte 40) is id 65535, not below the vocabulary's size 600" \
    $TXL vocab decode $TMP/b.vocab $TMP/big.tok
check "  ... and nothing on stdout" test ! -s $TMP/out
expect2 "token file: another vocabulary's" "b.tok: its ids are of another vocabulary" \
    $TXL vocab decode $TMP/w.vocab $TMP/b.tok
head -c 1001 $TMP/b.tok > $TMP/short.tok
expect2 "token file: truncated" "short.tok: the header says" $TXL vocab decode $TMP/b.vocab $TMP/short.tok

# ---- bad ids and flags ----
printf '10 20\n30 x7 40\n' > $TMP/ids.txt
expect2 "decode: an id that is not a number" "ids.txt:2:4: 'x7' is not a token id" \
    $TXL vocab decode $TMP/b.vocab $TMP/ids.txt
check "  ... and nothing on stdout" test ! -s $TMP/out
printf '10 20\n  600\n' | { $TXL vocab decode $TMP/b.vocab > $TMP/out 2> $TMP/err; echo $? > $TMP/rc; }
check "decode: an id out of range, from stdin (<stdin>:2:3, exit 2, nothing printed)" \
    sh -c "[ \$(cat $TMP/rc) = 2 ] && grep -q '<stdin>:2:3: id 600 is not below' $TMP/err && [ ! -s $TMP/out ]"
expect2 "flags: no action" "missing the action" $TXL vocab
expect2 "flags: an unknown action" "unknown action 'make'" $TXL vocab make x
expect2 "flags: build without --tokenizer" "--tokenizer" $TXL vocab build $D/word_edge.txt -o $TMP/x.vocab
expect2 "flags: bpe without --size" "--size" $TXL vocab build --tokenizer bpe $D/word_edge.txt -o $TMP/x.vocab
expect2 "flags: an unknown tokenizer" "--tokenizer" $TXL vocab build --tokenizer char $D/word_edge.txt -o $TMP/x.vocab
expect2 "flags: --size 100 for bpe" "256" $TXL vocab build --tokenizer bpe --size 100 $D/word_edge.txt -o $TMP/x.vocab
expect2 "flags: --size outside build" "are for 'vocab build'" $TXL vocab info $TMP/b.vocab --size 3
expect2 "flags: --binary without -o" "-o FILE" $TXL vocab encode $TMP/b.vocab $D/word_edge.txt --binary
expect2 "flags: -o onto the vocabulary itself" "an input" \
    $TXL vocab encode $TMP/b.vocab $D/word_edge.txt --binary -o $TMP/b.vocab
expect2 "flags: -o a directory" "is a directory" $TXL vocab build --tokenizer word $D/word_edge.txt -o $TMP
mkfifo $TMP/fifo
expect2 "flags: -o a FIFO" "a FIFO" $TXL vocab import-gpt2 $D/gpt2_encoder.json.gz $D/gpt2_vocab.bpe.gz -o $TMP/fifo
expect2 "build: a missing corpus" "nope.txt" $TXL vocab build --tokenizer word $TMP/nope.txt -o $TMP/x.vocab
# a word vocabulary without <unk> (txl's builds always have one; a hand-made file need not)
printf 'txl-vocab 1\nkind word\nsize 3\nspecial eos 0\ntokens\n0 <eos>\n1 the\n2 cat\nend\n' > $TMP/e.vocab
expect2 "encode: a word outside a vocabulary without <unk>" "wt2_test_head.txt: byte 3: the word '='" \
    $TXL vocab encode $TMP/e.vocab $D/wt2_test_head.txt --binary -o $TMP/x.tok
check "nothing was written by the failures" sh -c "[ ! -e $TMP/x.vocab ] && [ ! -e $TMP/x.tok ] && \
    [ -z \"\$(ls $TMP | grep tmp)\" ]"
finish
