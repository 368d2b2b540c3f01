#!/bin/sh
# Every example of `txl help`, of each `txl help CMD` (in the order of the command table)
# and of the man page's EXAMPLES runs, in that order, in a fresh copy of the repository
# (git archive HEAD: no runs/, no corpora/, no build), and exits 0. Lines that need
# gnuplot or python3 are skipped without them.
#
# Fast mode: `txl` on PATH is a wrapper around the real binary that keeps training to a few
# steps: a new run gets --set train.max_steps=6 (warmup 2, a short validation, one thread)
# appended, a --resume gets --steps 2 (and train.term_stats_interval 1 when the example asks
# for term statistics, so that some fall within those steps), eval --max-tokens 4000, probe
# --trials 2 --lengths 1,2 (all on one thread). Later options override earlier ones, so an example's own settings
# cannot make the test slow; everything else runs as written.
. tests/e2e/lib.sh
ROOT=$PWD
case $TXL in /*) REAL=$TXL ;; *) REAL=$ROOT/$TXL ;; esac
C=$TMP/clone
mkdir -p $C $TMP/bin
if git -C "$ROOT" rev-parse --verify -q HEAD >/dev/null 2>&1; then
    git -C "$ROOT" archive HEAD | tar -x -C $C
else # a source tree without git: its files, without what runs leave
    tar -c --exclude=./.git --exclude='./build*' --exclude=./runs --exclude=./corpora \
        --exclude=./txl . | tar -x -C $C
fi
check "the copy has the configs and the shipped corpus" \
    test -f $C/configs/tiny.yaml -a -f $C/tests/data/tinyshakespeare.txt.gz -a ! -e $C/corpora/kjv.txt

cat > $TMP/bin/txl <<EOF
#!/bin/sh
# tests/e2e/examples.sh: the examples, with training cut to a few steps
case "\$1" in
    train)
        for a in "\$@"; do
            case "\$a" in
            --dry-run) exec "$REAL" "\$@" ;;
            --resume) # a few steps; term statistics (if asked for) at each of them
                case "\$*" in *term_stats_interval*) exec "$REAL" "\$@" --steps 2 \\
                    --set train.term_stats_interval=1 ;; esac
                exec "$REAL" "\$@" --steps 2 ;;
            esac
        done
        exec "$REAL" "\$@" --set train.max_steps=6 --set train.warmup_steps=2 \\
            --set train.eval_tokens=4000 --set train.threads=1 ;;
    eval) exec "$REAL" "\$@" --max-tokens 4000 --threads 1 ;;
    probe) exec "$REAL" "\$@" --trials 2 --lengths 1,2 --threads 1 ;;
esac
exec "$REAL" "\$@"
EOF
chmod +x $TMP/bin/txl

echo "-- a fresh copy has no corpora/kjv.txt: the message says what to do"
(cd $C && PATH=$TMP/bin:$PATH txl train -c configs/tiny.yaml) > /dev/null 2> $TMP/kjv.err
rc=$?
check "txl train -c configs/tiny.yaml: exit 2 (got $rc)" test $rc -eq 2
check "  ... names corpora/kjv.txt, suggests make demo and --set data.train=FILE: $(head -c 300 $TMP/kjv.err)" \
    sh -c "grep -q 'corpora/kjv.txt: cannot open corpus' $TMP/kjv.err && grep -q '\`make demo\` creates corpora/kjv.txt' $TMP/kjv.err &&
           grep -q -e '--set data.train=FILE' $TMP/kjv.err"
for c in enwik8_10min enwik8_bpe; do
    (cd $C && PATH=$TMP/bin:$PATH txl train -c configs/$c.yaml) > /dev/null 2> $TMP/e8.err
    check "txl train -c configs/$c.yaml: exit 2, names corpora/enwik8_first3MB.txt.gz and make data" \
        sh -c "grep -q 'corpora/enwik8_first3MB.txt.gz: cannot open corpus' $TMP/e8.err &&
               grep -q '\`make data\` downloads enwik8 into corpora/' $TMP/e8.err"
done
check "  ... and creates no run directory" test ! -e $C/runs

# the example lines of a help text (stdin): from the line starting "example:", "examples:"
# or "examples (...):" to the next blank line, label and indentation removed
help_examples() {
    awk 'on && /^$/ { on = 0; next }
         !on && /^examples?[ :(]/ { on = 1; sub(/^examples?[^:]*:/, "") }
         on { sub(/^ +/, ""); if ($0 != "") print }'
}
# the man page's EXAMPLES: the .EX blocks, unescaped, continuation lines joined
man_examples() {
    awk '/^\.SH/ { ex = ($2 == "EXAMPLES") }
         ex && /^\.EX/ { on = 1; next }
         ex && /^\.EE/ { on = 0; next }
         on' doc/txl.1 |
        sed -e 's/\\-/-/g' -e 's/\\e/\\/g' |
        awk '{ if (sub(/\\$/, "")) { buf = buf $0; next }; print buf $0; buf = "" }'
}

: > $TMP/all
add() { # add WHERE: the example lines on stdin, tagged with where they come from
    n=0
    while IFS= read -r line; do
        printf '%s\t%s\n' "$1" "$line" >> $TMP/all
        n=$((n + 1))
    done
    echo $n
}
n=$($REAL help | help_examples | add "txl help")
check "txl help has examples ($n)" test "$n" -ge 2
for c in $($REAL __complete --commands); do
    [ "$c" = help ] && continue
    n=$($REAL help $c | help_examples | add "txl help $c")
    check "txl help $c has an example ($n)" test "$n" -ge 1
done
n=$(man_examples | add "man txl")
check "the man page's EXAMPLES ($n)" test "$n" -ge 10
check "every example line is a command of the tour (txl, jq, python3)" \
    test -z "$(cut -f2 $TMP/all | grep -v -E '^(txl|jq|python3) ')"

echo "-- the examples, in order, in the fresh copy"
i=0
while IFS='	' read -r where line; do
    i=$((i + 1))
    case $line in
        *"txl plot"*) command -v gnuplot >/dev/null 2>&1 || { echo "  SKIP $where: $line (no gnuplot)"; continue; } ;;
        python3*) command -v python3 >/dev/null 2>&1 || { echo "  SKIP $where: $line (no python3)"; continue; } ;;
    esac
    if (cd $C && PATH=$TMP/bin:$PATH sh -c "$line") > $TMP/out.$i 2> $TMP/err.$i < /dev/null; then
        ok "$where: $line"
    else
        bad "$where: exit $? from: $line"
        tail -4 $TMP/err.$i | sed 's/^/        ! /'
    fi
done < $TMP/all
check "they made the runs the later ones read" \
    test -s $C/runs/tiny/last.safetensors.gz -a -s $C/runs/tiny_rope/log.jsonl -a \
         -s $C/runs/demo/summary.json -a -s $C/runs/tuned/best.safetensors.gz
check "the --dry-run example created nothing" test ! -e $C/runs/enwik8_base
finish
