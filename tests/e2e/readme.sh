#!/bin/sh
# Every ```sh block of README.md runs, in order, in a scratch directory holding configs/,
# tools/ and tests/data/, so the README cannot rot: any command that exits non-zero fails
# the test. A block preceded by the line <!-- no-test --> is skipped (make demo, make test,
# make install, the official-model conversion). Blocks that need python3 or gnuplot are
# skipped without them.
#
# The ```text block after a block shows its output (stdout and stderr, in order), and
# tests/e2e/readme_out.py holds it to the real one: every shown line must be a line of the
# output, in its place, but for numbers and durations ("..." stands for lines or text left
# out; <!-- output: sample --> marks sampled text, whose first line alone is compared). So
# a change of what a command prints fails here until the README shows it.
#
# Fast mode (the test): ./txl there is a wrapper around the real binary that makes the tour
# cheap (TXL_README_FAST=1 is set for the blocks, should one need to know): `txl train` gets
# --set train.max_steps=30 (and a matching warmup, a short validation, two threads: the
# banner of the 2-core machine the README's output comes from) appended, `txl eval` gets
# --max-tokens 4000 --threads 1. Later options override earlier ones, so a README command's
# own settings cannot make the test slow.
#
# TXL_README=write sh tests/e2e/readme.sh runs the commands as the README shows them (in
# full: about 15 minutes on 2 cores) and writes their output into README.md's text blocks
# (the lines the templates show, with this run's numbers and words).
. tests/e2e/lib.sh
ROOT=$PWD
case $TXL in /*) REAL=$TXL ;; *) REAL=$ROOT/$TXL ;; esac
W=$TMP/readme
mkdir -p $W/tests
cp -r configs tools $W/
ln -s $ROOT/tests/data $W/tests/data
WRITE=0
[ "${TXL_README:-}" = write ] && WRITE=1
if [ $WRITE = 1 ]; then # the real commands: ./txl is the binary
    ln -s "$REAL" $W/txl
else
cat > $W/txl <<EOF
#!/bin/sh
# tests/e2e/readme.sh: the README's commands, made cheap
case "\$1" in
    train) case " \$* " in *" --resume "*) # extending the run: 30 steps more, checkpoints every 10
        exec "$REAL" "\$@" --set train.max_steps=60 --set train.ckpt_interval=10 \\
             --set train.eval_interval=10 --set train.eval_tokens=4000 --set train.threads=2 ;;
        esac
        exec "$REAL" "\$@" --set train.max_steps=30 --set train.warmup_steps=3 \\
               --set train.eval_interval=15 --set train.eval_tokens=4000 --set train.threads=2 ;;
    eval)  exec "$REAL" "\$@" --max-tokens 4000 --threads 1 ;;
esac
exec "$REAL" "\$@"
EOF
chmod +x $W/txl
fi

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
    fast=$((1 - WRITE))
    if (cd $W && TXL_README_FAST=$fast sh -e block.$n.sh) > $W/out.$n 2>&1; then
        ok "README.md:$line: $(head -1 $W/block.$n.sh | cut -c1-70)"
    else
        bad "README.md:$line: this block fails:"
        sed 's/^/        | /' $W/block.$n.sh
        tail -5 $W/out.$n | sed 's/^/        ! /'
    fi
done < $W/blocks
check "ran at least the tour (6 blocks)" test $nrun -ge 6
if [ $WRITE = 1 ]; then
    python3 tests/e2e/readme_out.py write README.md $W || bad "README.md: not written (above)"
elif python3 tests/e2e/readme_out.py check README.md $W > $W/shown 2>&1; then
    ok "the output README.md shows is the commands' (but for numbers and durations)"
else
    bad "the output README.md shows is not the commands' (TXL_README=write sh tests/e2e/readme.sh writes it):"
    sed 's/^/        /' $W/shown
fi
finish
