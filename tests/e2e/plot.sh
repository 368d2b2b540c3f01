#!/bin/sh
# txl plot: learning curves of a real (micro, 40 steps) run and an extrapolation sweep,
# rendered to PNG and SVG by gnuplot (checked: PNG magic bytes, SVG root element, nonzero
# size); the gnuplot program (--script) carries the run's points; bad input exits 2 (also an
# -o that is a FIFO, an input, a directory or in a missing directory, and a step or factor
# that is not a whole number in range); a step-0 point never puts a nan in the data, and on
# a log x axis it is left out with a note; a
# a line over 64 MiB (/dev/zero as a log) exits 2 naming it;
# missing gnuplot exits 1 naming the package, an image gnuplot cut short (a full disk) exits 1
# and leaves no file. Rendering is skipped, with a message, when
# gnuplot is not installed (apt-get install gnuplot-nox).
. tests/e2e/lib.sh

$TXL train -c tests/configs/micro.yaml --set train.out_dir=$TMP/run --set train.threads=1 \
    -q > /dev/null 2>$TMP/train.err
check "micro trains (40 steps)" test -s $TMP/run/log.jsonl
$TXL eval $TMP/run/last.safetensors.gz --data tests/data/enwik8_slice60k.txt.gz \
    --max-tokens 8000 --sweep 1,2,4 --json -q --threads 1 > $TMP/sweep.jsonl
for m in memory window; do
    $TXL eval $TMP/run/last.safetensors.gz --data tests/data/enwik8_slice60k.txt.gz \
        --max-tokens 8000 --sweep 1,2,4 --sweep-mode $m --json -q --threads 1 |
        jq -c '. + {scheme: "xl"}'
done > $TMP/schemes.jsonl
check "sweep files written" test -s $TMP/sweep.jsonl -a -s $TMP/schemes.jsonl

# the program txl sends to gnuplot: 40 train points and 4 validation points, in order
$TXL plot $TMP/run -o $TMP/x.png --script > $TMP/prog.gp
check "--script: 40 train points" test "$(sed -n '/^\$train0 << EOD/,/^EOD/p' $TMP/prog.gp | grep -c '^[0-9]')" -eq 40
check "--script: 4 valid points" test "$(sed -n '/^\$valid0 << EOD/,/^EOD/p' $TMP/prog.gp | grep -c '^[0-9]')" -eq 4
check "--script: axis labels with units" grep -q "set ylabel 'bits per byte" $TMP/prog.gp
check "--script: the last train point is the log's (10240 tokens)" \
    grep -q "^10.24 $(jq -r 'select(.event=="train" and .step==40) | .bpc' $TMP/run/log.jsonl | awk '{printf "%.6f", $1}')\$" $TMP/prog.gp
$TXL plot --sweep $TMP/schemes.jsonl -o $TMP/x.svg --script > $TMP/sweep.gp
check "--script --sweep: one curve per sweep_mode, named by scheme" \
    test "$(grep -c "title 'xl, " $TMP/sweep.gp)" -eq 2

# bad input: exit 2 with a message
code() { "$@" >/dev/null 2>$TMP/err; echo $?; }
check "missing run dir: exit 2" test "$(code $TXL plot $TMP/nope -o $TMP/a.png)" -eq 2
check "  ... names it" grep -q "nope" $TMP/err
mkdir -p $TMP/nolog $TMP/empty
check "dir without log.jsonl: exit 2" test "$(code $TXL plot $TMP/nolog -o $TMP/a.png)" -eq 2
check "  ... says so" grep -q "no log.jsonl" $TMP/err
: > $TMP/empty/log.jsonl
check "empty log: exit 2" test "$(code $TXL plot $TMP/empty -o $TMP/a.png)" -eq 2
check "  ... says so" grep -q "empty log" $TMP/err
check "unknown extension: exit 2" test "$(code $TXL plot $TMP/run -o $TMP/a.jpg)" -eq 2
check "  ... names it" grep -q "'.jpg'" $TMP/err
check "no -o: exit 2" test "$(code $TXL plot $TMP/run)" -eq 2
check "empty sweep file: exit 2" test "$(code $TXL plot --sweep $TMP/empty/log.jsonl -o $TMP/a.png)" -eq 2
# a step (or a sweep's or probe's factor) that is not a whole number in range: exit 2 naming
# the file, the line and the value (a cast of 1e300 to long overflowed: UBSan)
mkdir -p $TMP/steps
for v in 1e300 2.5 -3 '"7"'; do
    printf '{"event":"train","step":1,"tokens":256,"bpc":8}\n{"event":"train","step":%s,"tokens":512,"bpc":7}\n' "$v" > $TMP/steps/log.jsonl
    check "log step $v: exit 2" test "$(code $TXL plot $TMP/steps -o $TMP/a.png --script)" -eq 2
    check "  ... names the line and the value" grep -q "log.jsonl:2: 'step' must be a whole number in \[0, 9007199254740992\], found" $TMP/err
done
printf '{"event":"train","step":1,"tokens":256,"bpc":8}\n{"event":"eval","step":1e300,"bpc":7}\n' > $TMP/steps/log.jsonl
check "eval event at step 1e300: exit 2" test "$(code $TXL plot $TMP/steps -o $TMP/a.png --script)" -eq 2
printf '{"event":"terms","step":1e300,"layers":[]}\n' > $TMP/steps/log.jsonl
check "--terms, terms event at step 1e300: exit 2" test "$(code $TXL plot --terms $TMP/steps -o $TMP/a.png --script)" -eq 2
check "  ... names it" grep -q "log.jsonl:1: 'step' must be a whole number" $TMP/err
printf '{"tgt_len":64,"mem_len":64,"bpc":2,"factor":1e300}\n' > $TMP/steps/sweep.jsonl
check "--sweep, factor 1e300: exit 2" test "$(code $TXL plot --sweep $TMP/steps/sweep.jsonl -o $TMP/a.png --script)" -eq 2
check "  ... names it" grep -q "sweep.jsonl:1: 'factor' must be a whole number" $TMP/err
printf '{"probe":"needle","mode":"memory","factor":1e300,"depth":50,"accuracy":1}\n' > $TMP/steps/needle.jsonl
check "--probe, needle factor 1e300: exit 2" test "$(code $TXL plot --probe $TMP/steps/needle.jsonl -o $TMP/a.png --script)" -eq 2
check "  ... names it" grep -q "needle.jsonl:1: 'factor' must be a whole number" $TMP/err
# step 0: no nan in the data; on a log x axis an evaluation at step 0 (0 tokens) is left out
# with a note, a linear one draws it
printf '%s\n' '{"event":"train","step":1,"tokens":256,"bpc":8}' '{"event":"train","step":100,"tokens":25600,"bpc":4}' \
    '{"event":"eval","step":0,"bpc":8.1}' '{"event":"eval","step":100,"bpc":4.2}' > $TMP/steps/log.jsonl
$TXL plot $TMP/steps -o $TMP/a.png --script > $TMP/step0.gp 2>$TMP/err
check "eval at step 0, log x axis (auto): no nan in the data" sh -c "grep -q 'set logscale x' $TMP/step0.gp && ! grep -q -i -w nan $TMP/step0.gp"
check "  ... the step-0 point left out (1 valid point)" test "$(sed -n '/^\$valid0 << EOD/,/^EOD/p' $TMP/step0.gp | grep -c '^[0-9]')" -eq 1
check "  ... with a note" grep -q "1 point at x = 0 (an evaluation at step 0: 0 tokens) left out" $TMP/err
$TXL plot $TMP/steps -o $TMP/a.png --script --no-logx > $TMP/step0.gp 2>$TMP/err
check "  ... --no-logx draws it at 0 tokens" grep -q '^0 8.100000$' $TMP/step0.gp
printf '%s\n' '{"event":"train","step":0,"tokens":256,"bpc":8}' '{"event":"train","step":100,"tokens":25600,"bpc":4}' \
    '{"event":"eval","step":0,"bpc":8.1}' > $TMP/steps/log.jsonl
$TXL plot $TMP/steps -o $TMP/a.png --script > $TMP/step0.gp 2>$TMP/err
check "train and eval events at step 0: no nan in the data (was -nan)" sh -c "test -s $TMP/step0.gp && ! grep -q -i -w nan $TMP/step0.gp"

# a line of at most 64 MiB: getline read any line whole, however long (/dev/zero took all the
# memory there was), and an allocation that failed passed for the end of the file, so the
# events after a long line were left out with exit 0. 1 GB address space (not in sanitizer
# builds, which reserve terabytes).
vm() { if ldd "$TXL" 2>/dev/null | grep -q 'lib[atl]*san'; then "$@"; else (ulimit -v 1000000 && exec "$@"); fi; }
check "/dev/zero as a log: exit 2 (was 'empty log' after taking all the memory)" \
    test "$(code vm timeout 20 $TXL plot /dev/zero -o $TMP/z.png --script)" -eq 2
check "  ... a line longer than 64 MiB, named" grep -q "/dev/zero:1: a line longer than 64 MiB" $TMP/err
{ cat $TMP/run/log.jsonl; head -c 67108865 /dev/zero | tr '\0' x; echo; cat $TMP/run/log.jsonl; } > $TMP/long.jsonl
check "a log with a line of 64 MiB + 1 byte: exit 2" \
    test "$(code vm timeout 20 $TXL plot $TMP/long.jsonl -o $TMP/z.png --script)" -eq 2
check "  ... naming the line" grep -q "long.jsonl:$(($(wc -l < $TMP/run/log.jsonl) + 1)): a line longer than 64 MiB" $TMP/err
rm $TMP/long.jsonl

# -o onto what gnuplot's temp file + rename would wreck: exit 2 before gnuplot is looked for
mkfifo $TMP/fifo.png
check "-o a FIFO: exit 2" test "$(code $TXL plot $TMP/run -o $TMP/fifo.png)" -eq 2
check "  ... says so, and the FIFO is still one" test -p $TMP/fifo.png -a -n "$(grep 'is a FIFO' $TMP/err)"
ln -s sweep.jsonl $TMP/sweep.png
check "-o an input (through a link): exit 2" test "$(code $TXL plot --sweep $TMP/sweep.png -o $TMP/sweep.png)" -eq 2
check "  ... says so, and the link is still one" test -L $TMP/sweep.png -a -n "$(grep '(the same file), an input' $TMP/err)"
mkdir $TMP/dir.png
check "-o a directory: exit 2" test "$(code $TXL plot $TMP/run -o $TMP/dir.png)" -eq 2
check "  ... says so" grep -q "is a directory" $TMP/err
check "-o in a missing directory: exit 2" test "$(code $TXL plot $TMP/run -o $TMP/nodir/a.png)" -eq 2
check "  ... says so" grep -q "no directory" $TMP/err
check "missing gnuplot: exit 1" test "$(TXL_GNUPLOT=/nonexistent/gnuplot code $TXL plot $TMP/run -o $TMP/a.png)" -eq 1
check "  ... names the package" grep -q "apt-get install gnuplot-nox" $TMP/err
check "  ... and leaves no file" test ! -e $TMP/a.png

if ! command -v gnuplot >/dev/null 2>&1; then
    echo "  SKIP rendering: gnuplot is not installed (apt-get install gnuplot-nox)"
    finish
    exit $?
fi
$TXL plot $TMP/run -o $TMP/curves.png 2>$TMP/plot.err
check "plot PNG: exit 0" test $? -eq 0
check "plot PNG: nonzero size" test -s $TMP/curves.png
check "plot PNG: PNG magic bytes" test "$(head -c 8 $TMP/curves.png | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a
check "plot PNG: message on stderr names the file" grep -q "curves.png" $TMP/plot.err
$TXL plot $TMP/run -o $TMP/curves.svg -q
check "plot SVG: nonzero size" test -s $TMP/curves.svg
check "plot SVG: <svg root element" grep -q '<svg' $TMP/curves.svg
check "plot SVG: legend names the run" grep -q '>run train<' $TMP/curves.svg
# what a reader needs, read off the SVG: the title, both axis labels, the legend
check "  ... its title" svg_has $TMP/curves.svg "run: bits per byte while training"
check "  ... both axis labels" sh -c ". tests/e2e/lib.sh; svg_has $TMP/curves.svg 'bits per byte (bpc)' &&
    svg_has $TMP/curves.svg 'training tokens (thousands; 1 token = 1 byte)'"
check "  ... the legend: train and valid" sh -c ". tests/e2e/lib.sh; svg_has $TMP/curves.svg 'run train' &&
    svg_has $TMP/curves.svg 'run valid'"
cp -r $TMP/run $TMP/run2
$TXL plot $TMP/run $TMP/run2/log.jsonl -o $TMP/two.svg -q
check "plot SVG, two runs: both in the legend" grep -q '>run2 valid<' $TMP/two.svg
# two checkpoints' sweeps in one file: a curve each, told apart by the legend (the rows name
# their checkpoint and step; they were grouped by pos_scheme: one zigzag through both)
for c in last best; do
    $TXL eval $TMP/run/$c.safetensors.gz --data tests/data/enwik8_slice60k.txt.gz \
        --max-tokens 8000 --sweep 1,2,4 --json -q --threads 1
done > $TMP/two_ckpt.jsonl
bstep=$(jq -s -r '.[3].step' $TMP/two_ckpt.jsonl)
check "eval rows name their checkpoint and its step" \
    jq -s -e --arg d $TMP/run 'map(.checkpoint) == ([range(3)] | map($d + "/last.safetensors.gz")) + ([range(3)] | map($d + "/best.safetensors.gz")) and .[0].step == 40' $TMP/two_ckpt.jsonl
$TXL plot --sweep $TMP/two_ckpt.jsonl -o $TMP/two_ckpt.svg 2>$TMP/plot.err
check "plot --sweep, two checkpoints in one file: 2 curves (was 1)" grep -q "two_ckpt.svg (2 curves, 6 points)" $TMP/plot.err
check "  ... the legend tells them apart" sh -c ". tests/e2e/lib.sh; svg_has $TMP/two_ckpt.svg 'last, step 40' &&
    svg_has $TMP/two_ckpt.svg 'best, step $bstep'"
check "  ... the title and both axis labels" sh -c ". tests/e2e/lib.sh;
    svg_has $TMP/two_ckpt.svg 'length extrapolation: bits per byte against evaluated context' &&
    svg_has $TMP/two_ckpt.svg 'evaluated context: tgt_len + mem_len (tokens)' && svg_has $TMP/two_ckpt.svg 'bits per byte (bpc)'"
# the same file names in two runs: the legend adds the run directory
$TXL eval $TMP/run2/last.safetensors.gz --data tests/data/enwik8_slice60k.txt.gz \
    --max-tokens 8000 --sweep 1,2 --json -q --threads 1 > $TMP/run2.jsonl
$TXL plot --sweep $TMP/two_ckpt.jsonl $TMP/run2.jsonl -o $TMP/three.svg -q
check "  ... two runs' last checkpoints: named with their directories" sh -c ". tests/e2e/lib.sh;
    svg_has $TMP/three.svg 'run/last, step 40' && svg_has $TMP/three.svg 'run2/last, step 40'"
$TXL plot --sweep $TMP/sweep.jsonl $TMP/schemes.jsonl -o $TMP/extrap.png -q
check "plot --sweep PNG: PNG magic bytes" test "$(head -c 8 $TMP/extrap.png | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a
$TXL plot --sweep $TMP/schemes.jsonl -o $TMP/extrap.svg -q --title "xl, memory vs window"
check "plot --sweep SVG: root element and title" grep -q 'xl, memory vs window' $TMP/extrap.svg
check "TXL_GNUPLOT=/bin/false: exit 1" test "$(TXL_GNUPLOT=/bin/false code $TXL plot $TMP/run -o $TMP/b.png)" -eq 1
check "  ... and no half-written file" test -z "$(ls $TMP | grep '^b.png')"
# gnuplot on a disk that fills mid-write: its terminals do not check their writes, so the
# image is cut short and gnuplot exits 0 (as on a full tmpfs); txl passed the cut file on
cat > $TMP/cutplot <<'EOF'
#!/bin/sh
prog=$(cat)
out=$(printf '%s\n' "$prog" | sed -n "s/^set output '\(.*\)'$/\1/p" | head -1)
printf '%s\n' "$prog" | gnuplot || exit
head -c 2000 "$out" > "$out.cut" && mv "$out.cut" "$out"
EOF
chmod +x $TMP/cutplot
for x in png svg; do
    check "gnuplot cut the $x short: exit 1 (was 0)" \
        test "$(TXL_GNUPLOT=$TMP/cutplot code $TXL plot $TMP/run -o $TMP/cut.$x)" -eq 1
    check "  ... says so" grep -q "cut.$x: gnuplot wrote an incomplete image (2000 bytes" $TMP/err
    check "  ... and leaves no file" test -z "$(ls $TMP | grep "^cut.$x")"
done
finish
