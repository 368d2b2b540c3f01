#!/bin/sh
# make data (scripts/get_enwik8.sh) without the network, on stand-in files: a download that
# fails (no such file, a refused connection) exits 1 saying what to do and leaves nothing;
# a zip whose enwik8 has the wrong size, or the wrong first 3,000,000 bytes (the standard
# prefix's sha256), is refused and removed, nothing written; one put there by hand is kept
# and named; a stand-in whose size and digest the environment names goes through, and its
# first 3,000,000 bytes are enwik8_first3MB.txt.gz. The tests themselves use tests/data/.
# make data-linuxdoc (scripts/get_corpus_linuxdoc.sh) on a stand-in linux-source-6.1 .deb: the
# .rst files outside translations/ go whole to the split their path's sha256 names, in byte
# order, each ending in a newline and a blank line; an unknown version is built unchecked and
# says so; a .deb with a known version's name but not its sha256 is refused, nothing written.
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

# the prose corpus from a stand-in .deb (dpkg-deb builds it; nothing is downloaded)
L=$TMP/linux C=$TMP/ld
D=$L/linux-source-6.1/Documentation
mkdir -p $D/admin-guide $D/translations/it_IT $L/deb/DEBIAN $L/deb/usr/src $C
for i in 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29; do
    printf 'Title %s\n========\n\nSome prose. A sentence.\n' $i > $D/admin-guide/f$i.rst
done
printf 'no final newline' > $D/last.rst
printf 'Italiano.\n' > $D/translations/it_IT/index.rst
printf 'not rst\n' > $D/notes.txt
(cd $L && tar -cJf deb/usr/src/linux-source-6.1.tar.xz linux-source-6.1)
printf 'Package: linux-source-6.1\nVersion: 9.9-1\nArchitecture: all\nMaintainer: t <t@t>\nDescription: t\n' \
    > $L/deb/DEBIAN/control
dpkg-deb -Zgzip --build $L/deb $C/linux-source-6.1_9.9-1_all.deb > /dev/null 2>&1
G2=scripts/get_corpus_linuxdoc.sh
r=$(CORPORA=$C LINUXDOC_VERSION=9.9-1 sh $G2 > $TMP/out 2> $TMP/err; echo $?)
check "linuxdoc: a stand-in of an unknown version: exit 0 ($(tail -1 $TMP/err))" test "$r" -eq 0
check "  ... says its sums are unchecked" grep -q "UNCHECKED: 9.9-1 is not a version" $TMP/out
$PY - $D $TMP/want <<'PY'
import hashlib, os, sys
d, out = sys.argv[1], sys.argv[2]
files = sorted(os.path.relpath(os.path.join(r, f), d).encode() for r, _, fs in os.walk(d)
               for f in fs if f.endswith(".rst") and not r.startswith(os.path.join(d, "translations")))
split = {b"train": b"", b"valid": b"", b"test": b""}
for f in files:
    k = int(hashlib.sha256(f).hexdigest()[:8], 16) % 20
    s = b"test" if k == 0 else b"valid" if k == 1 else b"train"
    t = open(os.path.join(d.encode(), f), "rb").read()
    split[s] += t + (b"" if t.endswith(b"\n") else b"\n") + b"\n"
for s, t in split.items():
    open(f"{out}_{s.decode()}", "wb").write(t)
PY
for s in train valid test; do
    check "  ... linuxdoc_$s: the rule's files, in order, joined by blank lines ($(wc -c < $TMP/want_$s) bytes)" \
        sh -c "zcat $C/linuxdoc_$s.txt.gz | cmp -s - $TMP/want_$s"
done
check "  ... every split has a file (the stand-in's names reach each)" \
    sh -c "test -s $TMP/want_test && test -s $TMP/want_valid"
check "  ... linuxdoc.sha256 names the version and the train text's sha256" \
    sh -c "grep -q '9.9-1' $C/linuxdoc.sha256 && grep -q \"^\$(sha256sum < $TMP/want_train | cut -d' ' -f1)  linuxdoc_train.txt\" $C/linuxdoc.sha256"
check "  ... the translation and the .txt are left out" \
    sh -c "! zcat $C/linuxdoc_*.txt.gz | grep -q -e Italiano -e 'not rst'"
rm -f $C/linuxdoc*
mv $C/linux-source-6.1_9.9-1_all.deb $C/linux-source-6.1_6.1.192-3_all.deb
r=$(CORPORA=$C sh $G2 > $TMP/out 2> $TMP/err; echo $?)
check "linuxdoc: a .deb named as a known version, another sha256: exit 1" test "$r" -eq 1
check "  ... says so" grep -q "not the 5259c57c.* of Debian's linux-source-6.1 6.1.192-3" $TMP/err
check "  ... nothing written ($(ls -A $C | tr '\n' ' '))" test "$(ls -A $C)" = linux-source-6.1_6.1.192-3_all.deb
finish
