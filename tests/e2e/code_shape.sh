#!/bin/sh
# The code-shape rules of doc/design.md ("Module map"): no function over 100 lines and no
# file over 1,000 lines outside tests/, no getenv in model/, no declared function that is
# undefined or unused, cmd/ on include/txl.h and common/ alone, no include circle
# (tests/lint/code_shape.py). Each rule is checked on a made-up tree first.
. tests/e2e/lib.sh
mkdir -p $TMP/t/model $TMP/t/cmd $TMP/t/data $TMP/t/include
{
    echo "int f(void);"
} > $TMP/t/cmd/a.h
{
    echo '#include "a.h"'
    echo "int f(void)"
    echo "{"
    i=0; while [ $i -lt 99 ]; do echo "    (void)0;"; i=$((i + 1)); done
    echo "    return 0;"
    echo "}"
    echo "int g(void) { return f(); }"
} > $TMP/t/cmd/a.c
printf '#include <stdlib.h>\nconst char *h(void) { return getenv("X"); }\n' > $TMP/t/model/b.c
# a file of 1,001 lines (of short functions) outside tests/, and one of 1,000
i=0; while [ $i -lt 1001 ]; do echo "int v$i;"; i=$((i + 1)); done > $TMP/t/data/big.c
head -n 1000 $TMP/t/data/big.c > $TMP/t/data/fits.c
# cmd/ reaching past the public API: an include of model/ and a library function declared
printf 'int m(void);\n' > $TMP/t/model/m.h
printf '#include "m.h"\nint m(void) { return 1; }\n' > $TMP/t/model/m.c
printf '#include "../include/txl.h"\n#include "../model/m.h"\nint m(void);\nint c(void) { return m(); }\n' \
    > $TMP/t/cmd/c.c
printf '/* the public header */\n' > $TMP/t/include/txl.h
# an include circle of two files (p.c includes q.h, q.c includes p.h), and a file with its
# private header (r.c includes r_impl.h, which includes r.h: one node, no circle)
printf 'int p(void);\n' > $TMP/t/data/p.h
printf 'int q(void);\n' > $TMP/t/data/q.h
printf '#include "p.h"\n#include "q.h"\nint p(void) { return q(); }\n' > $TMP/t/data/p.c
printf '#include "q.h"\n#include "p.h"\nint q(void) { return p(); }\n' > $TMP/t/data/q.c
printf 'int r(void);\n' > $TMP/t/data/r.h
printf '#include "r.h"\n' > $TMP/t/data/r_impl.h
printf '#include "r_impl.h"\nint r(void) { return 0; }\nint s(void) { return r(); }\n' \
    > $TMP/t/data/r.c
python3 tests/lint/code_shape.py $TMP/t > $TMP/out; rc=$?
check "the lint fails on a made-up tree (exit 1, got $rc)" test $rc -eq 1
check "  ... naming the 103-line function" grep -q "function f is 103 lines" $TMP/out
check "  ... and the getenv in model/" grep -q "model/b.c: reads the environment" $TMP/out
check "  ... and the file of 1,001 lines" grep -q "data/big.c: 1001 lines" $TMP/out
check_not "  ... but not the one of 1,000" grep -q "data/fits.c" $TMP/out
check "  ... and cmd/'s include of model/" grep -q "cmd/c.c: includes model/m.h" $TMP/out
check "  ... and cmd/'s declaration of a library function" \
    grep -q "cmd/c.c: declares m, which cmd/ does not define" $TMP/out
check_not "  ... but not cmd/'s include of include/txl.h" grep -q "includes include/txl.h" $TMP/out
check "  ... and the include circle of p and q" \
    grep -q "include circle of 2 files (data/p, data/q)" $TMP/out
check_not "  ... but no circle of r and its r_impl.h" grep -q "data/r" $TMP/out
check "  ... and nothing else ($(wc -l < $TMP/out) lines)" test "$(wc -l < $TMP/out)" -eq 6
python3 tests/lint/code_shape.py . > $TMP/real; rc=$?
check "txl's sources keep the rules$(sed 's/^/; /' $TMP/real | tr '\n' ' ')" test $rc -eq 0
finish
