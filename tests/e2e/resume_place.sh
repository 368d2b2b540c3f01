#!/bin/sh
# Where a resumed run writes, and what a run directory's readers take (no run's work is
# written over):
#  1. --resume of a copied run directory continues in the copy (its checkpoint's directory),
#     not in the directory its config names; the original is untouched, byte for byte;
#     --dry-run and the banner say where the run writes and from which step it resumes;
#  2. --set train.out_dir (or -c) names the directory; one that holds another checkpoint is
#     refused (exit 2, nothing written) unless --force; a loose copy of a checkpoint outside
#     any run directory continues in its config's out_dir, refused there too;
#  3. a run directory holding both formats of last (train.ckpt_gzip switched) is read at the
#     later step by --resume DIR and eval DIR; writing one format removes the other;
#  4. a log.jsonl whose last line was cut (a crash mid-write): the resumed run starts on a new
#     line, and txl plot skips (and counts) the cut line, also in an old log where the start
#     event was glued to it;
#  5. --resume DIR with only a best checkpoint suggests --init-from;
#  6. a run directory as long as train.out_dir may be is resumed and read by its path.
. tests/e2e/lib.sh
. tests/e2e/badlib.inc
OPTS="-c tests/configs/micro.yaml --set train.eval_interval=5 --set train.warmup_steps=1
      --set train.threads=1"
step_of() { $TXL info "$1" --json 2>/dev/null | jq -r .step; }
sums() { (cd "$1" && find . -type f | LC_ALL=C sort | xargs sha256sum); }
# shellcheck disable=SC2086
$TXL train -q $OPTS --set train.max_steps=10 --set train.out_dir=$TMP/a >/dev/null 2>$TMP/a.err ||
    bad "run a: $(cat $TMP/a.err)"

echo "-- a copied run directory continues in the copy"
cp -r $TMP/a $TMP/b
sums $TMP/a > $TMP/a.sum
$TXL train --resume $TMP/b --set train.max_steps=15 --dry-run >$TMP/dry.json 2>$TMP/dry.err
check "--dry-run says it writes into the copy" test "$(jq -r .out_dir $TMP/dry.json)" = "$TMP/b"
check "...and names the checkpoint's step" grep -q "resuming at step 10 of 15 from $TMP/b/last.safetensors.gz" $TMP/dry.err
$TXL train --resume $TMP/b --set train.max_steps=15 >$TMP/b.out 2>$TMP/b.err
check "resume of the copy: exit 0 (got $?)" test -s $TMP/b.out
check "...it says it continues in the copy, whose config names the original" \
    grep -q "continuing in $TMP/b, where $TMP/b/last.safetensors.gz is (its config names train.out_dir $TMP/a" $TMP/b.err
check "...the banner names out_dir and the resumed step" \
    sh -c "grep -q '  out_dir $TMP/b\$' $TMP/b.err && grep -q 'resuming at step 10 of 15' $TMP/b.err"
check "...the copy's last is at step 15" test "$(step_of $TMP/b/last.safetensors.gz)" = 15
check "...its config.yaml names it" grep -q "out_dir: \"\?$TMP/b\"\?\$" $TMP/b/config.yaml
check "...the original is untouched, byte for byte" test "$(sums $TMP/a)" = "$(cat $TMP/a.sum)"
check "...and so with -q" sh -c "cp -r $TMP/a $TMP/c && $TXL train -q --resume $TMP/c --set train.max_steps=12 >/dev/null 2>&1"
check "...(-q) the original is still untouched" test "$(sums $TMP/a)" = "$(cat $TMP/a.sum)"
check "...(-q) the copy went on" test "$(step_of $TMP/c/last.safetensors.gz)" = 12
# cp -al (or an rsync --link-dest snapshot): the copy's files are the original's, by inode;
# checkpoints are renamed into place, but the log was appended to through the shared inode
cp -al $TMP/a $TMP/hl
$TXL train -q --resume $TMP/hl --set train.max_steps=12 >/dev/null 2>$TMP/hl.err
check "resume of a copy made with hard links (cp -al): exit $?" test -s $TMP/hl/last.safetensors.gz
check "...the original is untouched, byte for byte (its log.jsonl too)" test "$(sums $TMP/a)" = "$(cat $TMP/a.sum)"
check "...the copy's log: the original's lines, then the resumed run's" sh -c \
    "head -c $(wc -c < $TMP/a/log.jsonl) $TMP/hl/log.jsonl | cmp -s - $TMP/a/log.jsonl &&
     jq -s -e 'map(select(.event == \"end\")) | .[-1].step == 12' $TMP/hl/log.jsonl"

# a copy whose name is not UTF-8 (Latin-1 \351): it cannot be train.out_dir (a config is
# UTF-8 text); the message named the checkpoint and "train.out_dir", which the user never set
LAT=$TMP/$(printf 'lat\351n')
cp -r $TMP/a "$LAT"
expect2 "a copy in a directory whose name is not UTF-8: why, and what to do" \
    "last.safetensors.gz is in the run directory $LAT, which cannot be train.out_dir (not UTF-8 text); --set train.out_dir=DIR continues the run there" \
    $TXL train -q --resume "$LAT" --set train.max_steps=12
check "...--set train.out_dir continues it there" \
    $TXL train -q --resume "$LAT" --set train.max_steps=12 --set train.out_dir=$TMP/lat2
rm -rf "$LAT" $TMP/lat2

echo "-- a directory holding another checkpoint is refused"
guard_init $TMP/a $TMP/b
expect2 "--resume the copy into the original (--set train.out_dir)" \
    "train.out_dir $TMP/a holds $TMP/a/last.safetensors.gz (step 10), not the checkpoint resumed ($TMP/b/last.safetensors.gz, step 15);;--force" \
    $TXL train -q --resume $TMP/b --set train.out_dir=$TMP/a --set train.max_steps=20
expect2 "...also with --dry-run" "train.out_dir $TMP/a holds $TMP/a/last.safetensors.gz" \
    $TXL train -q --resume $TMP/b --set train.out_dir=$TMP/a --set train.max_steps=20 --dry-run
mkdir -p $TMP/loose
cp $TMP/b/last.safetensors.gz $TMP/loose/x.safetensors.gz
expect2 "a loose copy continues in its config's out_dir, which holds another checkpoint" \
    "train.out_dir $TMP/b holds $TMP/b/last.safetensors.gz (step 15), not the checkpoint resumed ($TMP/loose/x.safetensors.gz, step 15)" \
    $TXL train -q --resume $TMP/loose/x.safetensors.gz --set train.max_steps=20
cp $TMP/a/last.safetensors.gz $TMP/b/old.safetensors.gz
guard_init $TMP/a $TMP/b
expect2 "an older copy inside the run directory would rewind its last" \
    "train.out_dir $TMP/b holds $TMP/b/last.safetensors.gz (step 15), not the checkpoint resumed ($TMP/b/old.safetensors.gz, step 10)" \
    $TXL train -q --resume $TMP/b/old.safetensors.gz --set train.max_steps=20
GUARD_DIRS=
$TXL train -q --resume $TMP/b/old.safetensors.gz --set train.max_steps=11 --force >/dev/null 2>$TMP/f.err
check "--force writes over it (exit $?)" test "$(step_of $TMP/b/last.safetensors.gz)" = 11
rm $TMP/b/old.safetensors.gz

echo "-- train.ckpt_gzip switched: the later step wins, the older format goes"
cp -r $TMP/a $TMP/g
$TXL train --resume $TMP/g --set train.max_steps=13 --set train.ckpt_gzip=false >/dev/null 2>$TMP/g.err
check "a run continued with ckpt_gzip=false writes last.safetensors at step 13" \
    test "$(step_of $TMP/g/last.safetensors)" = 13
check "...and removes the older last.safetensors.gz" test ! -e $TMP/g/last.safetensors.gz
check "...and says so" grep -q "removed $TMP/g/last.safetensors.gz, the older checkpoint" $TMP/g.err
# a directory of a run that stopped before its first write of the new format, or of an
# older txl: both formats; plant the older step as .gz
cp $TMP/a/last.safetensors.gz $TMP/g/last.safetensors.gz
$TXL train --resume $TMP/g --set train.max_steps=14 --set train.ckpt_gzip=false >/dev/null 2>$TMP/g2.err
check "--resume DIR takes the later step (13, not the .gz's 10)" \
    grep -q "resuming at step 13 of 14 from $TMP/g/last.safetensors\$" $TMP/g2.err
check "...and continues from it" test "$(step_of $TMP/g/last.safetensors)" = 14
cp $TMP/a/best.safetensors.gz $TMP/g/best.safetensors.gz
$TXL train -q --resume $TMP/g --set train.max_steps=15 --set train.ckpt_gzip=false >/dev/null 2>&1
bs=$(step_of $TMP/g/best.safetensors)
$TXL eval $TMP/g --max-tokens 500 --json > $TMP/ge.json 2>$TMP/ge.err
check "eval DIR takes the later best (step $bs), not the older .gz (step 10)" \
    grep -q "using $TMP/g/best.safetensors\$" $TMP/ge.err
check "...and reports its step" test "$(jq .step $TMP/ge.json)" = "$bs"

echo "-- both formats, one of them damaged: named, never passed over for the other"
# the newer (plain, step 13) next to the older .gz (step 10): skipping a damaged newer file
# would rewind the run, which would then delete that file as "the older format"
cp -r $TMP/a $TMP/dm
$TXL train -q --resume $TMP/dm --set train.max_steps=13 --set train.ckpt_gzip=false >/dev/null 2>&1
cp $TMP/a/last.safetensors.gz $TMP/dm/
cp $TMP/dm/last.safetensors $TMP/dm.good
head -c 500000 $TMP/dm.good > $TMP/dm/last.safetensors
guard_init $TMP/dm
expect2 "--resume DIR: the newer last with its data cut is taken by its header's step, and named" \
    "$TMP/dm/last.safetensors: ;;past the end of the data" \
    $TXL train -q --resume $TMP/dm --set train.max_steps=20
head -c 100 $TMP/dm.good > $TMP/dm/last.safetensors
guard_init $TMP/dm
expect2 "--resume DIR: a last whose header is cut (no step to compare) is named, both formats said" \
    "$TMP/dm/last.safetensors: header length;;$TMP/dm/last.safetensors[.gz]: both formats" \
    $TXL train -q --resume $TMP/dm --set train.max_steps=20
expect2 "...also with --dry-run" "$TMP/dm/last.safetensors: header length" \
    $TXL train -q --resume $TMP/dm --set train.max_steps=20 --dry-run
head -c 100 $TMP/a/best.safetensors.gz > $TMP/dm/best.safetensors.gz
guard_init $TMP/dm
expect2 "eval DIR: a best.safetensors.gz cut short next to best.safetensors is named" \
    "$TMP/dm/best.safetensors.gz: ;;$TMP/dm/best.safetensors[.gz]: both formats" \
    $TXL eval $TMP/dm --max-tokens 500
GUARD_DIRS=

echo "-- a cut last line in log.jsonl"
cp -r $TMP/a $TMP/l
printf '{"event":"train","step":11,"tok' >> $TMP/l/log.jsonl
$TXL plot $TMP/l -o $TMP/l.svg 2>$TMP/p0.err >/dev/null
if command -v gnuplot >/dev/null 2>&1; then
    check "plot of a log cut mid-line draws (exit $?)" test -s $TMP/l.svg
    check "...and counts the cut line on stderr" grep -q "skipped 1 damaged line (from line" $TMP/p0.err
fi
$TXL train -q --resume $TMP/l --set train.max_steps=12 >/dev/null 2>&1
check "the resumed run's start event is on a line of its own" \
    sh -c "tail -n +2 $TMP/l/log.jsonl | grep -v '^{\"event\":\"train\",\"step\":11,\"tok\$' | jq -e . >/dev/null"
check "...right after the cut line" \
    sh -c "grep -A1 '^{\"event\":\"train\",\"step\":11,\"tok\$' $TMP/l/log.jsonl | tail -1 | jq -e '.event == \"start\"' >/dev/null"
$TXL plot $TMP/l -o $TMP/l2.svg --script > $TMP/l2.gp 2>$TMP/p1.err
check "plot reads the whole log, skipping the cut line (exit $?)" grep -q "skipped 1 damaged line" $TMP/p1.err
check "...with the resumed steps in the data" grep -q '^[0-9.e+]* [0-9.]*' $TMP/l2.gp
# a log of a txl that glued the start event to the cut line
cp -r $TMP/a $TMP/o
printf '{"event":"train","step":11,"tok' >> $TMP/o/log.jsonl
grep '"event":"start"' $TMP/a/log.jsonl | head -1 | sed 's/"resume":false/"resume":true/; s/"step":0/"step":10/' >> $TMP/o/log.jsonl
grep '"event":"train"' $TMP/a/log.jsonl | tail -1 | sed 's/"step":10/"step":11/' >> $TMP/o/log.jsonl
$TXL plot $TMP/o -o $TMP/o.svg --script > $TMP/o.gp 2>$TMP/p2.err
check "a glued start event is read, the cut part skipped (exit $?)" grep -q "skipped 1 damaged line" $TMP/p2.err
sed '3a garbage' $TMP/a/log.jsonl > $TMP/mid.jsonl
expect2 "a damaged line in the middle of a run is still an error" "$TMP/mid.jsonl:4: not a JSON object" \
    $TXL plot $TMP/mid.jsonl -o $TMP/mid.svg

echo "-- a run directory as long as train.out_dir may be (1023 bytes) is read by its path"
# its last is 1043 bytes: readers took checkpoint paths of at most 1023, so the run trained
# (exit 0, "checkpoint": that path) and could not be resumed, evaluated or read by it
LD=$TMP/L
while [ $((${#LD} + 201)) -le 1023 ]; do LD=$LD/$(printf '%0200d' 0); done
LD=$LD/$(printf '%0*d' $((1023 - ${#LD} - 1)) 0)
$TXL train -q $OPTS --set train.max_steps=3 --set train.out_dir=$LD >/dev/null 2>$TMP/ld.err
check "(a run in an out_dir of ${#LD} bytes: exit $?)" test -s $LD/last.safetensors.gz
$TXL train -q --resume $LD --set train.max_steps=4 >/dev/null 2>$TMP/ld.err
check "--resume DIR continues it (exit $?: $(head -c 120 $TMP/ld.err))" test "$(step_of $LD/last.safetensors.gz)" = 4
check "...and --resume DIR/last.safetensors.gz" $TXL train -q --resume $LD/last.safetensors.gz --set train.max_steps=5
check "info of its last names the whole path" test "$($TXL info $LD/last.safetensors.gz --json | jq -r .path)" = "$LD/last.safetensors.gz"
check "eval DIR reads it" $TXL eval $LD --max-tokens 500
rm -rf $TMP/L

echo "-- --resume of a directory with only a best"
mkdir -p $TMP/onlybest
cp $TMP/a/best.safetensors.gz $TMP/onlybest/
expect2 "--resume DIR with only best suggests --init-from" \
    "$TMP/onlybest: a run directory without a last checkpoint, only $TMP/onlybest/best.safetensors.gz;;--init-from $TMP/onlybest/best.safetensors.gz" \
    $TXL train -q --resume $TMP/onlybest

echo "-- numbered checkpoints (train.keep_checkpoints)"
# micro, 40 steps, a checkpoint every 10, the last 2 kept as step-NNNNNNNN files
K="-c tests/configs/micro.yaml --set train.eval_interval=0 --set train.log_interval=1 --set train.threads=1"
$TXL train -q $K --set train.keep_checkpoints=2 --set train.out_dir=$TMP/k >/dev/null 2>$TMP/k.err
check "keep_checkpoints 2: step-00000030 and step-00000040 kept, 10 and 20 removed" \
    test "$(cd $TMP/k && echo step-*)" = "step-00000030.safetensors.gz step-00000040.safetensors.gz"
check "  ... each a whole checkpoint of its step" sh -c "
    test \$($TXL info $TMP/k/step-00000030.safetensors.gz --json | jq '[.step, .resumable, .has_memory] == [30, true, true]') = true"
check "  ... step-00000040 is the last" cmp -s $TMP/k/step-00000040.safetensors.gz $TMP/k/last.safetensors.gz
# several checkpoints, or a quoted glob: one row (or object) each, in step order
$TXL eval "$TMP/k/step-*" --max-tokens 3000 --json -q --threads 1 > $TMP/k.eval
check "eval 'DIR/step-*': one row per checkpoint, in step order, each naming its own" \
    jq -s -e --arg d $TMP/k 'map([.checkpoint, .step]) == [[$d + "/step-00000030.safetensors.gz", 30], [$d + "/step-00000040.safetensors.gz", 40]]' $TMP/k.eval
$TXL eval $TMP/k/step-00000030.safetensors.gz $TMP/k/step-00000040.safetensors.gz --max-tokens 3000 --threads 1 > $TMP/k.table 2>/dev/null
check "  ... a table per checkpoint, each under its name and step" sh -c "
    grep -q '^checkpoint $TMP/k/step-00000030.safetensors.gz (step 30)' $TMP/k.table &&
    grep -q '^checkpoint $TMP/k/step-00000040.safetensors.gz (step 40)' $TMP/k.table"
check "info of two: one JSON line each" \
    test "$($TXL info $TMP/k/step-* --json | jq -s -c 'map(.step)')" = "[30,40]"
expect2 "a pattern that matches nothing" "'$TMP/k/step-9*' matches no file" $TXL eval "$TMP/k/step-9*"
expect2 "a bad checkpoint among several: nothing printed" "nope" $TXL eval $TMP/k/step-00000030.safetensors.gz $TMP/k/nope
check "  ... (nothing on stdout)" test ! -s $TMP/out
# a numbered checkpoint resumes exactly: from step 30 (rewinding last: --force), steps 31-40
# repeat the losses of the run
h40=$(sha256sum < $TMP/k/step-00000040.safetensors.gz)
cp -r $TMP/k $TMP/k2
$TXL train -q --resume $TMP/k2/step-00000030.safetensors.gz --set train.max_steps=40 >/dev/null 2>$TMP/k2.err
check "resuming an older numbered checkpoint rewinds last: refused without --force" test $? -eq 2
$TXL train -q --resume $TMP/k2/step-00000030.safetensors.gz --force >/dev/null 2>$TMP/k2.err ||
    bad "resume from step 30: $(cat $TMP/k2.err)"
check "  ... with --force, steps 31-40 repeat the run's losses, bit for bit" \
    test "$(step_losses $TMP/k2/log.jsonl | tail -10)" = "$(step_losses $TMP/k/log.jsonl | tail -10)"
# a later last is a new file: the kept one keeps its step (the kept file is a hard link)
$TXL train -q --resume $TMP/k --set train.max_steps=50 --set train.keep_checkpoints=2 >/dev/null 2>&1
check "extended to 50: step-40 and step-50 kept, step-40 unchanged by the later last" sh -c "
    test \"\$(cd $TMP/k && echo step-*)\" = 'step-00000040.safetensors.gz step-00000050.safetensors.gz' &&
    test \"\$(sha256sum < $TMP/k/step-00000040.safetensors.gz)\" = '$h40'"
touch $TMP/k/step-00000060.safetensors.gz.tmp.AbC123
$TXL train -q $K --force --set train.max_steps=10 --set train.keep_checkpoints=1 \
    --set train.ckpt_gzip=false --set train.out_dir=$TMP/k >/dev/null 2>$TMP/k3.err
check "--force starts over: the earlier run's numbered checkpoints and temps go, plain files come" \
    test "$(cd $TMP/k && echo step-*)" = "step-00000010.safetensors"
finish
