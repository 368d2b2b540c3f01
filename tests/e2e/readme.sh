#!/bin/sh
# Every ```sh block of README.md runs, in order, in a scratch directory holding configs/,
# tools/ and tests/data/, so the README cannot rot: any command that exits non-zero fails
# the test. A block preceded by the line <!-- no-test --> is skipped (make demo, make test,
# make install, the official-model conversion). Blocks that need python3 or gnuplot are
# skipped without them.
#
# Fast mode: ./txl there is a wrapper around the real binary that makes the tour cheap
# (TXL_README_FAST=1 is set for the blocks, should one need to know): `txl train` gets
# --set train.max_steps=30 (and a matching warmup, a short validation, one thread) appended,
# `txl eval` gets --max-tokens 4000 --threads 1. Later options override earlier ones, so a
# README command's own settings cannot make the test slow.
. tests/e2e/lib.sh
ROOT=$PWD
case $TXL in /*) REAL=$TXL ;; *) REAL=$ROOT/$TXL ;; esac
W=$TMP/readme
mkdir -p $W/tests
cp -r configs tools $W/
ln -s $ROOT/tests/data $W/tests/data
cat > $W/txl <<EOF
#!/bin/sh
# tests/e2e/readme.sh: the README's commands, made cheap
case "\$1" in
    train) exec "$REAL" "\$@" --set train.max_steps=30 --set train.warmup_steps=3 \\
               --set train.eval_interval=15 --set train.eval_tokens=4000 --set train.threads=1 ;;
    eval)  exec "$REAL" "\$@" --max-tokens 4000 --threads 1 ;;
esac
exec "$REAL" "\$@"
EOF
chmod +x $W/txl

# README.md -> $W/block.N.sh, and $W/blocks: "N LINE run|skip"
awk -v dir="$W" '
    /^<!-- *no-test *-->/ { skip = 1; next }
    /^```sh[ \t]*$/ && !inb { inb = 1; n++; start = NR; f = dir "/block." n ".sh";
                              printf "" > f; next }
    /^```/ && inb { inb = 0; close(f); print n, start, (skip ? "skip" : "run") > (dir "/blocks");
                    skip = 0; next }
    inb { print > f; next }
    NF { skip = 0 }
' README.md
check "README.md has sh blocks" test -s $W/blocks
nrun=0
while read -r n line what; do
    if [ "$what" = skip ]; then
        echo "  skip README.md:$line (<!-- no-test -->)"
        continue
    fi
    if grep -q python3 $W/block.$n.sh && ! command -v python3 >/dev/null 2>&1; then
        echo "  SKIP README.md:$line: needs python3"
        continue
    fi
    if grep -q 'txl plot' $W/block.$n.sh && ! command -v gnuplot >/dev/null 2>&1; then
        echo "  SKIP README.md:$line: needs gnuplot (apt-get install gnuplot-nox)"
        continue
    fi
    nrun=$((nrun + 1))
    if (cd $W && TXL_README_FAST=1 sh -e block.$n.sh) > $W/out.$n 2> $W/err.$n; then
        ok "README.md:$line: $(head -1 $W/block.$n.sh | cut -c1-70)"
    else
        bad "README.md:$line: this block fails:"
        sed 's/^/        | /' $W/block.$n.sh
        tail -5 $W/err.$n | sed 's/^/        ! /'
    fi
done < $W/blocks
check "ran at least the tour (6 blocks)" test $nrun -ge 6
finish
