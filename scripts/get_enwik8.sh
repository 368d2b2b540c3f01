#!/bin/sh
# make data: the standard enwik8 (the first 10^8 bytes of the English Wikipedia dump of
# 2006-03-03, the Hutter Prize's and Transformer-XL's character-level benchmark) into
# corpora/: enwik8 (100,000,000 bytes) and enwik8_first3MB.txt.gz (its first 3,000,000
# bytes, gzip -9 -n: what configs/enwik8_10min.yaml and the README's probes train on).
#
# It downloads http://mattmahoney.net/dc/enwik8.zip (ENWIK8_URL to take another copy; an
# enwik8.zip already in corpora/, fetched by hand, is used as it is), unzips it and checks
# the file: 100,000,000 bytes whose first 3,000,000 have the sha256 of the standard prefix
# (72953fcc..., checked against an independent enwik8 prefix; the whole file's digest is
# not checked: txl's authors could not verify one). Nothing is left behind on a failure:
# the files are written under temporary names and renamed at the end, and a zip this run
# downloaded that fails the check is removed (one put there by hand is kept, and named).
# Without network (or curl and wget) it says so and exits 1. Tests and the tour need
# none of this: they use tests/data/, which the repository ships.
#
# Environment: CORPORA (default corpora), ENWIK8_URL, and for tests with a stand-in file
# ENWIK8_SIZE and ENWIK8_PREFIX_SHA256 (the size and the prefix's digest to expect).
set -eu
cd "$(dirname "$0")/.."
DIR=${CORPORA:-corpora}
URL=${ENWIK8_URL:-http://mattmahoney.net/dc/enwik8.zip}
SIZE=${ENWIK8_SIZE:-100000000}
PREFIX=3000000
SHA=${ENWIK8_PREFIX_SHA256:-72953fccfeb78e55251024bd6ffbe269d1d8d730ce2e4fb028117a3613c45aac}
fetched=0
fail() {
    echo "get_enwik8: $*" >&2
    rm -f "$DIR/enwik8.zip.part" "$DIR/enwik8.part" "$DIR/enwik8_first3MB.txt.gz.part"
    [ $fetched = 1 ] && rm -f "$DIR/enwik8.zip"
    exit 1
}

if [ -s "$DIR/enwik8" ] && [ -s "$DIR/enwik8_first3MB.txt.gz" ]; then
    echo "get_enwik8: $DIR/enwik8 and $DIR/enwik8_first3MB.txt.gz are there already"
    exit 0
fi
mkdir -p "$DIR"
command -v unzip >/dev/null || fail "needs unzip (apt-get install unzip)"
zip=$DIR/enwik8.zip
if [ ! -s "$zip" ]; then
    echo "get_enwik8: downloading $URL"
    if command -v curl >/dev/null; then
        curl -fL --retry 2 --connect-timeout 20 -o "$zip.part" "$URL" ||
            fail "could not download $URL (no network?); fetch enwik8.zip by hand into $DIR/ and run this again"
    elif command -v wget >/dev/null; then
        wget -q -T 20 -O "$zip.part" "$URL" ||
            fail "could not download $URL (no network?); fetch enwik8.zip by hand into $DIR/ and run this again"
    else
        fail "needs curl or wget to download $URL (or put enwik8.zip into $DIR/ by hand)"
    fi
    mv "$zip.part" "$zip"
    fetched=1
fi
# a zip put there by hand that fails a check: its name, to remove it
bad=$( [ $fetched = 1 ] && echo "the download was removed" || echo "remove $zip" )
unzip -p "$zip" enwik8 > "$DIR/enwik8.part" 2>/dev/null ||
    fail "$zip holds no file enwik8 (not the standard enwik8.zip?); $bad and run this again"
got=$(wc -c < "$DIR/enwik8.part" | tr -d ' ')
[ "$got" = "$SIZE" ] || fail "$zip: enwik8 has $got bytes, the standard one $SIZE; $bad and run this again"
sum=$(head -c $PREFIX "$DIR/enwik8.part" | sha256sum | cut -d' ' -f1)
[ "$sum" = "$SHA" ] ||
    fail "$zip: the first $PREFIX bytes of its enwik8 have sha256 $sum, the standard enwik8's $SHA; $bad and run this again"
head -c $PREFIX "$DIR/enwik8.part" | gzip -9 -n > "$DIR/enwik8_first3MB.txt.gz.part"
mv "$DIR/enwik8.part" "$DIR/enwik8"
mv "$DIR/enwik8_first3MB.txt.gz.part" "$DIR/enwik8_first3MB.txt.gz"
echo "get_enwik8: $DIR/enwik8 ($SIZE bytes, the first $PREFIX checked) and $DIR/enwik8_first3MB.txt.gz"
