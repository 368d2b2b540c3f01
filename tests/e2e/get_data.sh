#!/bin/sh
# make data (scripts/get_enwik8.sh) without the network, on stand-in files: a download that
# fails (no such file, a refused connection) exits 1 saying what to do and leaves nothing;
# a zip whose enwik8 has the wrong size, or the wrong first 3,000,000 bytes (the standard
# prefix's sha256), is refused and removed, nothing written; one put there by hand is kept
# and named; a stand-in whose size and digest the environment names goes through, and its
# first 3,000,000 bytes are enwik8_first3MB.txt.gz. The tests themselves use tests/data/.
. tests/e2e/lib.sh
G=scripts/get_enwik8.sh
PY=/usr/bin/python3
C=$TMP/corpora
run() { CORPORA=$C "$@" sh $G > $TMP/out 2> $TMP/err; echo $?; }
left() { ls -A $C 2>/dev/null | tr '\n' ' '; }

check "no such file at the URL: exit 1" test "$(run env ENWIK8_URL=file://$TMP/nope.zip)" -eq 1
check "  ... says it could not download, and how to go on" \
    grep -q "could not download file://$TMP/nope.zip (no network?); fetch enwik8.zip by hand into $C/" $TMP/err
check "  ... and leaves nothing in $C ($(left))" test -z "$(left)"
check "a refused connection: exit 1" test "$(run env ENWIK8_URL=http://127.0.0.1:9/enwik8.zip)" -eq 1
check "  ... nothing left ($(left))" test -z "$(left)"

# stand-ins: a zip holding "enwik8" of 3,000,100 bytes (the repository's enwik8 slice, and
# the same again); the real file has 100,000,000
zcat tests/data/enwik8_slice60k.txt.gz > $TMP/slice
: > $TMP/enwik8
while [ $(wc -c < $TMP/enwik8) -lt 3000100 ]; do cat $TMP/slice >> $TMP/enwik8; done
head -c 3000100 $TMP/enwik8 > $TMP/e && mv $TMP/e $TMP/enwik8
mkzip() { $PY -c "import sys, zipfile
with zipfile.ZipFile(sys.argv[1], 'w', zipfile.ZIP_DEFLATED) as z: z.write(sys.argv[2], sys.argv[3])" "$@"; }
mkzip $TMP/standin.zip $TMP/enwik8 enwik8
mkzip $TMP/other.zip $TMP/enwik8 text8
check "a downloaded zip whose enwik8 is not 100,000,000 bytes: exit 1" \
    test "$(run env ENWIK8_URL=file://$TMP/standin.zip)" -eq 1
check "  ... says so, and that the download was removed" \
    grep -q "enwik8 has 3000100 bytes, the standard one 100000000; the download was removed" $TMP/err
check "  ... nothing left ($(left))" test -z "$(left)"
check "the right size, another text: exit 1 (the prefix's sha256)" \
    test "$(run env ENWIK8_URL=file://$TMP/standin.zip ENWIK8_SIZE=3000100)" -eq 1
check "  ... naming both digests" \
    grep -q "the first 3000000 bytes of its enwik8 have sha256 $(head -c 3000000 $TMP/enwik8 | sha256sum | cut -d' ' -f1), the standard enwik8's 72953fcc" $TMP/err
check "  ... nothing left ($(left))" test -z "$(left)"
mkdir -p $C && cp $TMP/other.zip $C/enwik8.zip
check "a zip put there by hand without enwik8 in it: exit 1" test "$(run)" -eq 1
check "  ... kept, and named to remove" sh -c "grep -q 'holds no file enwik8 (not the standard enwik8.zip?); remove $C/enwik8.zip' $TMP/err &&
    test \"\$(ls -A $C)\" = enwik8.zip"
rm -rf $C
want=$(head -c 3000000 $TMP/enwik8 | sha256sum | cut -d' ' -f1)
check "a stand-in of the size and digest named: exit 0" \
    test "$(run env ENWIK8_URL=file://$TMP/standin.zip ENWIK8_SIZE=3000100 ENWIK8_PREFIX_SHA256=$want)" -eq 0
check "  ... enwik8 is the zip's file" cmp -s $C/enwik8 $TMP/enwik8
head -c 3000000 $TMP/enwik8 > $TMP/e3
check "  ... enwik8_first3MB.txt.gz its first 3,000,000 bytes" \
    sh -c "zcat $C/enwik8_first3MB.txt.gz | cmp -s - $TMP/e3"
check "  ... no temp files ($(left))" test "$(left)" = "enwik8 enwik8.zip enwik8_first3MB.txt.gz "
check "run again: there already, exit 0" test "$(run env ENWIK8_URL=file://$TMP/nope.zip)" -eq 0
finish
