#!/bin/sh
# The code-shape rules of doc/design.md ("Module map"): no function over 100 lines outside
# tests/, no getenv in model/, no declared function that is undefined or unused
# (tests/lint/code_shape.py). The rule itself is checked on a made-up tree first.
. tests/e2e/lib.sh
mkdir -p $TMP/t/model $TMP/t/cmd
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
python3 tests/lint/code_shape.py $TMP/t > $TMP/out; rc=$?
check "the lint fails on a made-up tree (exit 1, got $rc)" test $rc -eq 1
check "  ... naming the 103-line function" grep -q "function f is 103 lines" $TMP/out
check "  ... and the getenv in model/" grep -q "model/b.c: reads the environment" $TMP/out
python3 tests/lint/code_shape.py . > $TMP/real; rc=$?
check "txl's sources keep the rules$(sed 's/^/; /' $TMP/real | tr '\n' ' ')" test $rc -eq 0
finish
