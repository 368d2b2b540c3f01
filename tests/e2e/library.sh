#!/bin/sh
# libtxl: the examples of examples/ (built by make test, on include/txl.h alone, linked with
# libtxl.a) train, sample and stream; the installed library (make install into a DESTDIR:
# the header, libtxl.a, libtxl.so, txl.pc) builds a program by pkg-config, static and shared,
# that computes what the in-tree one does; libtxl.so exports include/txl.h's functions and
# nothing else; and txl --version is the header's version.
. tests/e2e/lib.sh
ROOT=$(pwd)
B=${BUILD:-build}
# the parent make's flags and command-line variables do not belong to the makes below
clean_make() { env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL -u BIN -u BUILD -u CFLAGS -u LDFLAGS \
    -u TXL_SKIP make "$@"; }
[ -x $B/examples/train_then_sample ] || flock $ROOT/.make.lock env -u MAKEFLAGS -u MFLAGS \
    -u MAKELEVEL -u BIN -u BUILD -u CFLAGS -u LDFLAGS -u TXL_SKIP make -s examples >/dev/null
EX=$ROOT/$B/examples        # make asan's: the examples under ASan
[ -x $EX/train_then_sample ] || EX=$ROOT/build/examples
D=tests/data/tinyshakespeare.txt.gz

echo "-- examples/train_then_sample.c"
$EX/train_then_sample $D $TMP/run 40 > $TMP/ts.out 2> $TMP/ts.err
check "trains 40 steps and samples (exit $?): $(tail -c 200 $TMP/ts.err)" test -s $TMP/run/last.safetensors.gz
check "...its log's last loss is below its first" sh -c "jq -s '[.[] | select(.event==\"train\") | .loss] | (.[0] > .[-1])' $TMP/run/log.jsonl | grep -q true"
check "...it names the checkpoint it read back, at step 40" grep -q "best.safetensors.gz, 91392 parameters, step 40" $TMP/ts.out
check "...and prints 200 bytes of sample and a newline" test "$(tail -n +2 $TMP/ts.out | wc -c)" -eq 201
check "...the progress came through the event callback" grep -q "^step 40/40 | loss" $TMP/ts.err
check "txl reads the run it wrote" $TXL info $TMP/run --json

echo "-- examples/stream_sample.c"
printf 'ROMEO:\nJULIET: \n' | $EX/stream_sample $TMP/run 80 > $TMP/ss1 2>$TMP/ss.err
check "streams an answer per prompt (exit $?: $(head -c 200 $TMP/ss.err))" \
    test "$(grep -c '^> ' $TMP/ss1)" -eq 2
printf 'ROMEO:\nJULIET: \n' | $EX/stream_sample $TMP/run 80 > $TMP/ss2 2>/dev/null
check "...greedy: the same text again" cmp -s $TMP/ss1 $TMP/ss2
printf 'ROMEO:\n' | $EX/stream_sample $TMP/run 80 > $TMP/ss3 2>/dev/null
check "...and the first answer does not depend on what comes after it" \
    sh -c "head -c $(wc -c < $TMP/ss3) $TMP/ss1 | cmp -s - $TMP/ss3"
$EX/stream_sample $TMP/none.safetensors.gz < /dev/null > /dev/null 2>$TMP/bad.err
check "a missing checkpoint: exit 2 and the message (got $?)" \
    sh -c "test $? -eq 2 && grep -q 'none.safetensors.gz' $TMP/bad.err"

echo "-- the installed library"
P=/usr/local
I=$TMP/dest
# install.sh runs make install too, maybe at the same time: one make in the tree at a time
flock $ROOT/.make.lock env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL -u BIN -u BUILD -u CFLAGS \
    -u LDFLAGS -u TXL_SKIP make -s install DESTDIR=$I PREFIX=$P > $TMP/install.out 2>&1
check "make install DESTDIR (exit $?): header, libtxl.a, libtxl.so, txl.pc" \
    test -s $I$P/include/txl.h -a -s $I$P/lib/libtxl.a -a -s $I$P/lib/libtxl.so.0 \
        -a -s $I$P/lib/pkgconfig/txl.pc
check "...libtxl.so.0 -> libtxl.so.0.3.0, libtxl.so -> libtxl.so.0" \
    test "$(readlink $I$P/lib/libtxl.so)" = libtxl.so.0
PC=$(sed "s|^prefix=.*|prefix=$I$P|" $I$P/lib/pkgconfig/txl.pc)
mkdir -p $TMP/pc && printf '%s\n' "$PC" > $TMP/pc/txl.pc
export PKG_CONFIG_PATH=$TMP/pc
check "pkg-config knows txl $(pkg-config --modversion txl 2>/dev/null)" \
    test "$(pkg-config --modversion txl)" = "$($TXL --version | sed 's/^txl //')"
# shellcheck disable=SC2046
cc -std=c11 -O2 -o $TMP/ss_static examples/stream_sample.c \
    $(pkg-config --cflags txl) $I$P/lib/libtxl.a $(pkg-config --static --libs-only-other --libs-only-l txl | sed 's/-ltxl//') 2>$TMP/cc1.err
check "the installed libtxl.a builds examples/stream_sample.c by pkg-config: $(head -c 300 $TMP/cc1.err)" \
    test -x $TMP/ss_static
# shellcheck disable=SC2046
cc -std=c11 -O2 -o $TMP/ss_shared examples/stream_sample.c $(pkg-config --cflags --libs txl) \
    2>$TMP/cc2.err
check "...and libtxl.so: $(head -c 300 $TMP/cc2.err)" test -x $TMP/ss_shared
printf 'ROMEO:\nJULIET: \n' | $TMP/ss_static $TMP/run 80 > $TMP/ss_s 2>/dev/null
check "the static build streams the in-tree build's text" cmp -s $TMP/ss1 $TMP/ss_s
printf 'ROMEO:\nJULIET: \n' | LD_LIBRARY_PATH=$I$P/lib $TMP/ss_shared $TMP/run 80 > $TMP/ss_d 2>/dev/null
check "...and so does the shared one" cmp -s $TMP/ss1 $TMP/ss_d
check "...which loads the installed libtxl.so" \
    sh -c "LD_LIBRARY_PATH=$I$P/lib ldd $TMP/ss_shared | grep -q '$I$P/lib/libtxl.so.0'"
nm -D --defined-only $I$P/lib/libtxl.so | awk '$2 == "T" {print $3}' > $TMP/exports
check "libtxl.so exports only txl_* ($(wc -l < $TMP/exports) functions)" \
    sh -c "test -s $TMP/exports && ! grep -v '^txl_' $TMP/exports"
check "...every function the header declares" sh -c "for f in \$(grep -o '\\btxl_[a-z_]*(' include/txl.h | tr -d '(' | sort -u); do grep -qx \$f $TMP/exports || { echo \$f; exit 1; }; done"
check "txl --version is the header's version" \
    test "$($TXL --version)" = "txl $(sed -n 's/^#define TXL_VERSION "\(.*\)"/\1/p' include/txl.h)"
clean_make -s uninstall DESTDIR=$I PREFIX=$P > /dev/null 2>&1
check "make uninstall removes the library files" \
    test ! -e $I$P/include/txl.h -a ! -e $I$P/lib/libtxl.a -a ! -e $I$P/lib/libtxl.so \
        -a ! -e $I$P/lib/pkgconfig/txl.pc
finish
