#!/bin/sh
# make data-linuxdoc: the prose corpus of the scale study (doc/study/scale/), built from the
# Linux kernel's documentation as Debian ships it, into corpora/:
#   linuxdoc_train.txt.gz, linuxdoc_valid.txt.gz, linuxdoc_test.txt.gz   (gzip -9 -n)
#   linuxdoc.sha256                         (the version, and sha256sum lines of the raw texts)
#
# The source is the Debian package linux-source-6.1 (its /usr/src/linux-source-6.1.tar.xz)
# at a pinned version: `apt-get download` fetches the .deb (no root needed, nothing is
# installed); a linux-source-6.1_VERSION_all.deb already in corpora/ is used as it is. The
# text is every reStructuredText file of Documentation/ (`*.rst`) outside
# Documentation/translations/ (the Chinese, Italian, Japanese, Korean and Spanish
# translations): English prose about the kernel with headings, paragraphs, lists and
# literal blocks. Left out besides the translations: every file that is not .rst (the
# device-tree bindings in YAML and plain text, ABI entries, scripts, images, Makefiles).
# Nothing inside a file is changed or removed.
#
# The files are taken in byte order of their paths (LC_ALL=C sort) and each goes whole to one
# split by its path: the first 8 hex digits of sha256("path relative to Documentation/")
# modulo 20 are 0 for test, 1 for valid, else train (about 5%, 5%, 90% of the files: held-out
# documents, not a cut through one). A split is its files concatenated, each followed by a
# newline if it lacks one (7 files do) and by one blank line, so every file starts a paragraph.
#
# The bytes depend only on the package version. The sums of the versions this was built
# from are below; a known version is checked against them (a mismatch removes the output and
# exits 1). Debian replaces linux-source-6.1 at each point release and security update and the
# mirror then drops the old .deb: when no known version can be had, LINUXDOC_VERSION=V
# builds from version V and prints its sums, unchecked (the documentation changes between
# versions: 26 .rst files differ from 6.1.176-1 to 6.1.192-3), and linuxdoc.sha256 names
# the version the study's results then belong to. The .deb's own sha256 is recorded too.
# Environment: CORPORA (default corpora), LINUXDOC_VERSION.
set -eu
cd "$(dirname "$0")/.."
DIR=${CORPORA:-corpora}
PKG=linux-source-6.1
# version, the .deb's sha256, the sha256 of the raw train, valid and test texts
KNOWN="
6.1.192-3 5259c57ca92092da39bd2ea803046da0e3c28f2b6a11ea20f6297468188ceb67 c6f884e98b397814dca2e0eae87dede7c43afc3d126305371c1c8a0cc5a178f3 7680f1015c462ad4fa8f887929c6291a43a70d4eb37a5df08f1bba982ca99f4f 2c28c33fe02383a46140a86fd5077c422d35ca28d4ea8cda507827458322a852
6.1.176-1 9305d1a151b8e83dcb88aa11361e7b9513f0c252bdf7f5647e4542762d99c094 bd3c298100570fc8f7394c3747ff445564a1060694c302cc02251044a538e8ed 84852c574fe4cb5310a7be7730c77c517e282245e7f40b3390d6384761b20f48 2c28c33fe02383a46140a86fd5077c422d35ca28d4ea8cda507827458322a852
"
TMP=$DIR/.linuxdoc.tmp
fail() {
    echo "get_corpus_linuxdoc: $*" >&2
    rm -rf "$TMP"
    rm -f "$DIR"/linuxdoc_*.txt.gz.part "$DIR/linuxdoc.sha256.part"
    exit 1
}

out_ok=1
for s in train valid test; do [ -s "$DIR/linuxdoc_$s.txt.gz" ] || out_ok=0; done
if [ $out_ok = 1 ] && [ -s "$DIR/linuxdoc.sha256" ]; then
    echo "get_corpus_linuxdoc: $DIR/linuxdoc_{train,valid,test}.txt.gz are there already ($(head -1 "$DIR/linuxdoc.sha256"))"
    exit 0
fi
for t in xz tar sha256sum gzip dpkg-deb; do
    command -v $t >/dev/null || fail "needs $t"
done
mkdir -p "$DIR"
rm -rf "$TMP"
mkdir -p "$TMP"

# the .deb: one in corpora/ by hand, else the first known version apt can download
# (LINUXDOC_VERSION: that version only)
want=${LINUXDOC_VERSION:-$(echo "$KNOWN" | awk 'NF {print $1}')}
deb="" ver=""
for v in $want; do
    if [ -s "$DIR/${PKG}_${v}_all.deb" ]; then deb=$DIR/${PKG}_${v}_all.deb ver=$v; break; fi
done
if [ -z "$deb" ]; then
    command -v apt-get >/dev/null || fail "needs apt-get (Debian), or ${PKG}_VERSION_all.deb in $DIR/"
    for v in $want; do
        echo "get_corpus_linuxdoc: apt-get download $PKG=$v"
        if (cd "$TMP" && apt-get download -q "$PKG=$v" >/dev/null 2>"$TMP/apt.err"); then
            deb=$TMP/${PKG}_${v}_all.deb ver=$v
            break
        fi
    done
    [ -n "$deb" ] || fail "apt-get could download none of $PKG $want ($(tail -1 "$TMP/apt.err"));
  apt has: $(apt-cache madison $PKG 2>/dev/null | awk '{printf "%s ", $3}')
  LINUXDOC_VERSION=ONE_OF_THEM $0 builds from another version (its sums unchecked)"
fi
known=$(echo "$KNOWN" | awk -v v="$ver" '$1 == v')
deb_sum=$(sha256sum "$deb" | cut -d' ' -f1)
if [ -n "$known" ] && [ "$(echo "$known" | awk '{print $2}')" != "$deb_sum" ]; then
    fail "$deb: sha256 $deb_sum, not the $(echo "$known" | awk '{print $2}') of Debian's $PKG $ver"
fi
echo "get_corpus_linuxdoc: $PKG $ver (.deb sha256 $deb_sum): extracting Documentation/*.rst"
dpkg-deb --fsys-tarfile "$deb" | tar -xO ./usr/src/$PKG.tar.xz | xz -dc |
    tar -x -C "$TMP" --wildcards "$PKG/Documentation/*.rst" ||
    fail "$deb: no $PKG/Documentation/*.rst in its /usr/src/$PKG.tar.xz"

# the files in byte order of their paths, each to its split by the hash of its path
(cd "$TMP/$PKG/Documentation" && find . -path ./translations -prune -o -type f -name '*.rst' -print) |
    sed 's|^\./||' | LC_ALL=C sort > "$TMP/files"
[ -s "$TMP/files" ] || fail "$deb: no .rst file under Documentation/"
: > "$TMP/train" && : > "$TMP/valid" && : > "$TMP/test"
while IFS= read -r f; do
    h=$(printf '%s' "$f" | sha256sum | cut -c1-8)
    case $(( 0x$h % 20 )) in 0) s="test" ;; 1) s="valid" ;; *) s="train" ;; esac
    p=$TMP/$PKG/Documentation/$f
    cat "$p" >> "$TMP/$s"
    [ -z "$(tail -c 1 "$p")" ] || printf '\n' >> "$TMP/$s"
    printf '\n' >> "$TMP/$s"
    echo "$s $f" >> "$TMP/assign"
done < "$TMP/files"

{
    echo "# $PKG $ver (.deb sha256 $deb_sum): Documentation/*.rst outside translations/, $(wc -l < "$TMP/files" | tr -d ' ') files"
    for s in train valid test; do
        echo "$(sha256sum < "$TMP/$s" | cut -d' ' -f1)  linuxdoc_$s.txt ($(wc -c < "$TMP/$s" | tr -d ' ') bytes, $(grep -c "^$s " "$TMP/assign") files)"
    done
} > "$TMP/sums"
if [ -n "$known" ]; then
    i=3
    for s in train valid test; do
        want_sum=$(echo "$known" | awk -v i=$i '{print $i}')
        got=$(grep " linuxdoc_$s.txt " "$TMP/sums" | cut -d' ' -f1)
        [ "$got" = "$want_sum" ] || fail "linuxdoc_$s.txt from $PKG $ver has sha256 $got, not the recorded $want_sum"
        i=$((i + 1))
    done
    check="checked against the recorded sums"
else
    check="UNCHECKED: $ver is not a version this script knows; its results belong to this version"
fi
for s in train valid test; do
    gzip -9 -n -c "$TMP/$s" > "$DIR/linuxdoc_$s.txt.gz.part"
done
cp "$TMP/sums" "$DIR/linuxdoc.sha256.part"
for s in train valid test; do mv "$DIR/linuxdoc_$s.txt.gz.part" "$DIR/linuxdoc_$s.txt.gz"; done
mv "$DIR/linuxdoc.sha256.part" "$DIR/linuxdoc.sha256"
rm -rf "$TMP"
cat "$DIR/linuxdoc.sha256"
echo "get_corpus_linuxdoc: $DIR/linuxdoc_{train,valid,test}.txt.gz ($check)"
