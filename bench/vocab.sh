#!/bin/sh
# make bench-vocab: the tokenizers' speed, side by side in one run, one thread each, runs
# alternating (the machine is shared: the best of each is compared).
#  1. GPT-2 encoding, tokens/s: txl's bpe encoder (build/bench/vocab_encode, the text in
#     memory) against tiktoken's npm build (node, its Rust core in WASM) on enwik8_first3MB
#     (markup) and two prose texts; the token counts must agree.
#  2. Learning bpe merges: txl vocab build --tokenizer bpe --size 32000 against
#     spm_train --model_type=bpe --vocab_size=32000 --num_threads=1 (Debian's sentencepiece)
#     on 10 MB: the shared corpora (enwik8_first3MB, tinyshakespeare, wikitext2 valid and
#     test: 6.5 MB), then their first 3.5 MB again; the time and the peak resident memory
#     of each (GNU time's %M, when /usr/bin/time is installed).
# Needs node and npm (tiktoken is installed into NPM_REF when missing) and spm_train.
# Environment: TXL_BIN, BUILD, DATA (the shared corpora), ROUNDS (2), REPS (3), OUT.
set -eu
TXL=${TXL_BIN:-./txl}
BUILD=${BUILD:-build}
DATA=${DATA:-../shared/data}
ROUNDS=${ROUNDS:-2}
REPS=${REPS:-3}
NPM_REF=${NPM_REF:-/tmp/txl-npm-ref}
OUT=${OUT:-runs/bench-vocab}
V=tests/data/vocab
mkdir -p "$OUT"
[ -d "$NPM_REF/node_modules/tiktoken" ] || (mkdir -p "$NPM_REF" && cd "$NPM_REF" &&
    npm install --no-save --no-package-lock tiktoken gpt-3-encoder >/dev/null 2>&1)
export NODE_PATH="$(cd "$NPM_REF" && pwd)/node_modules" OMP_NUM_THREADS=1
cpu=$(lscpu | sed -n 's/^Model name: *//p')
flags=$(grep -o -w -E 'avx2|avx512f|avx512bw|avx512_vbmi2' /proc/cpuinfo | sort -u | tr '\n' ' ')
echo "CPU: $cpu ($(getconf _NPROCESSORS_ONLN) cores; $flags); load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "$(date -u '+%Y-%m-%d %H:%M UTC'); OpenBLAS core $($TXL info --system --json | jq -r .blas_core) (vocab build uses none)"
echo "node $(node --version), tiktoken $(jq -r .version "$NODE_PATH/tiktoken/package.json"), $(spm_train --version 2>&1 | head -1)"

zcat "$DATA/enwik8_first3MB.txt.gz" > "$OUT/enwik8_3MB.txt"
zcat "$DATA/tinyshakespeare.txt.gz" > "$OUT/shakespeare.txt"
zcat "$DATA/wikitext2_tok_valid.txt.gz" > "$OUT/wikitext2_valid.txt"
echo
echo "1. GPT-2 encoding (tokens/s, one thread; best of $REPS encodings x $ROUNDS rounds)"
for t in enwik8_3MB shakespeare wikitext2_valid; do
    bt=0 bk=0 nt=0 nk=0
    for r in $(seq "$ROUNDS"); do
        set -- $("$BUILD/bench/vocab_encode" $V/gpt2_encoder.json.gz $V/gpt2_vocab.bpe.gz \
                 "$OUT/$t.txt" "$REPS")
        nt=$1; bt=$(echo "$bt $1 $2" | awk '{r = $2 / $3; print (r > $1) ? r : $1}')
        set -- $(node bench/tiktoken_encode.js "$OUT/$t.txt" "$REPS")
        nk=$1; bk=$(echo "$bk $1 $2" | awk '{r = $2 / $3; print (r > $1) ? r : $1}')
    done
    [ "$nt" = "$nk" ] || { echo "token counts differ on $t: txl $nt, tiktoken $nk" >&2; exit 1; }
    echo "$t $(wc -c < "$OUT/$t.txt") $nt $bt $bk" | awk '{printf "  %-16s %9d bytes %8d tokens: txl %6.2f Mtok/s (%5.1f MB/s), tiktoken %5.2f Mtok/s: %.1fx\n", $1, $2, $3, $4 / 1e6, $4 * $2 / $3 / 1e6, $5 / 1e6, $4 / $5}'
done

echo
echo "2. Learning 32000 bpe tokens from 10 MB (seconds, one thread; best of $ROUNDS; peak"
echo "   resident memory, the most of the rounds, by GNU time when /usr/bin/time is there)"
for i in 1 2; do
    zcat "$DATA/enwik8_first3MB.txt.gz" "$DATA/tinyshakespeare.txt.gz" \
         "$DATA/wikitext2_tok_valid.txt.gz" "$DATA/wikitext2_tok_test.txt.gz"
done | head -c 10000000 > "$OUT/c10.txt"
tt=999999 ts=999999 mt=0 ms=0
measure() { # measure CMD...: "wall_seconds peak_rss_kib" (0 KiB: no GNU time to tell)
    s=$(date +%s.%N)
    if [ -x /usr/bin/time ]; then
        /usr/bin/time -f %M -o "$OUT/rss" "$@" > /dev/null 2>&1 || { echo "failed: $*" >&2; exit 1; }
    else
        "$@" > /dev/null 2>&1 || { echo "failed: $*" >&2; exit 1; }
        echo 0 > "$OUT/rss"
    fi
    echo "$s $(date +%s.%N) $(tail -1 "$OUT/rss")" | awk '{print $2 - $1, $3}'
}
for r in $(seq "$ROUNDS"); do
    set -- $(measure "$TXL" vocab build --tokenizer bpe --size 32000 "$OUT/c10.txt" -o "$OUT/txl.vocab" -q)
    tt=$(echo "$tt $1" | awk '{print ($2 < $1) ? $2 : $1}')
    mt=$(echo "$mt $2" | awk '{print ($2 > $1) ? $2 : $1}')
    set -- $(measure spm_train --input="$OUT/c10.txt" --model_prefix="$OUT/spm" --model_type=bpe \
        --vocab_size=32000 --num_threads=1 --minloglevel=2)
    ts=$(echo "$ts $1" | awk '{print ($2 < $1) ? $2 : $1}')
    ms=$(echo "$ms $2" | awk '{print ($2 > $1) ? $2 : $1}')
done
echo "$tt $ts $($TXL vocab info "$OUT/txl.vocab" --json | jq .size) $mt $ms" | awk '{
    printf "  txl vocab build %.2f s (%d tokens), spm_train %.2f s: %.1fx\n", $1, $3, $2, $2 / $1
    if ($4 > 0) printf "  peak memory: txl vocab build %.0f MB, spm_train %.0f MB (%.1fx less)\n", $4 * 1024 / 1e6, $5 * 1024 / 1e6, $5 / $4
    else print "  peak memory: not measured (no /usr/bin/time: apt-get install time)" }'
