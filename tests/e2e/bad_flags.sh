#!/bin/sh
# Bad command lines, one case per class: unknown flags, missing values, non-numeric,
# non-decimal (hex, inf) and out-of-range numbers, malformed lists, conflicting flags
# (--resume/--init-from, --data/--split, -c given twice), sample --seed against train.seed,
# and --resume / --init-from with a config that does not match the checkpoint (the message
# names the differing keys).
# Each exits 2 naming the flag, and the run in the way stays byte for byte as it was.
. tests/e2e/lib.sh
. tests/e2e/badlib.inc
CFG=tests/configs/micro.yaml
CK=tests/fixtures/eval/micro.safetensors.gz
RUN=$TMP/run
setup_run $RUN
guard_init $RUN
LAST=$RUN/last.safetensors.gz
T="$TXL train -q -c $CFG --set train.out_dir=$RUN"

echo "-- any command"
expect2 "no command" "usage: txl COMMAND" $TXL
expect2 "unknown command" "unknown command 'frobnicate'" $TXL frobnicate
expect2 "help of an unknown command" "unknown command 'frobnicate'" $TXL help frobnicate

echo "-- train"
expect2 "unknown flag" "unknown option '--bogus'" $T --bogus
expect2 "a stray argument" "unknown option 'extra.yaml'" $T extra.yaml
expect2 "-c without a value" "-c needs a file" $TXL train -c
expect2 "--set without a value" "--set needs key.path=value" $T --set
expect2 "--resume without a value" "--resume needs a checkpoint or run directory" $T --resume
expect2 "--init-from without a value" "--init-from needs a checkpoint path" $T --init-from
expect2 "--steps without a value" "--steps needs a number" $T --steps
expect2 "--steps not a number" "--steps: expected an integer, found 'abc'" $T --steps abc
expect2 "--steps 0" "--steps: 0 is out of range [1," $T --steps 0
expect2 "--steps negative" "--steps: -3 is out of range [1," $T --steps -3
expect2 "--steps 1e3" "--steps: expected an integer, found '1e3'" $T --steps 1e3
expect2 "--steps too large" "--steps: expected an integer, found '99999999999999999999'" $T --steps 99999999999999999999
expect2 "--resume with --init-from" "--resume and --init-from exclude each other" $T --resume $LAST --init-from $LAST
# one config per run: a second -c (or -c after a lone CONFIG.yaml) is refused, not ignored
expect2 "-c given twice" "-c given twice ('$CFG' and 'configs/tiny.yaml')" \
    $TXL train -c $CFG -c configs/tiny.yaml --print-config
expect2 "--config= given twice" "--config given twice ('$CFG' and 'configs/tiny.yaml')" \
    $TXL train --config=$CFG --config=configs/tiny.yaml --print-config
expect2 "a lone CONFIG.yaml, then -c" "-c given twice ('$CFG' and 'configs/tiny.yaml')" \
    $TXL train $CFG -c configs/tiny.yaml --print-config
expect2 "no -c and no --resume" "missing -c CONFIG.yaml" $TXL train
expect2 "--resume of a missing file" "$TMP/none.safetensors.gz: cannot open: No such file or directory" \
    $T --resume $TMP/none.safetensors.gz
expect2 "--resume, another d_model" \
    "--resume $LAST: the model config differs from the checkpoint's (checkpoint vs now): model.d_model: 64 vs 32" \
    $T --resume $LAST --set model.d_model=32
expect2 "--resume, several keys differ: all named" \
    "model.n_layer: 2 vs 3, model.d_inner: 128 vs 256, model.pos_scheme: xl vs mlp" \
    $T --resume $LAST --set model.n_layer=3 --set model.d_inner=256 --set model.pos_scheme=mlp
expect2 "--resume, another tgt_len" "model.tgt_len: 32 vs 64" $T --resume $LAST --set model.tgt_len=64
expect2 "--resume, another batch_size" "--resume $LAST: train.batch_size 4 differs from the checkpoint's 8" \
    $T --resume $LAST --set train.batch_size=4
head -c 200000 tests/data/tinyshakespeare.txt.gz | gunzip 2>/dev/null > $TMP/other.txt
expect2 "--resume, another corpus" "--resume $LAST: the train split has" \
    $T --resume $LAST --set data.train=$TMP/other.txt
expect2 "--resume of a finished run" "already at step 5 >= train.max_steps 5" \
    $T --resume $LAST --set train.max_steps=5 --set train.warmup_steps=1
expect2 "--init-from, another d_model" \
    "--init-from $LAST: parameter shapes differ from the config (checkpoint vs config): model.d_model: 64 vs 128" \
    $TXL train -q -c $CFG --init-from $LAST --set model.d_model=128 --set train.out_dir=$TMP/r_init
check "...and no run directory was created for it" test ! -e $TMP/r_init/log.jsonl

echo "-- eval"
E="$TXL eval $CK"
expect2 "unknown flag" "unknown option '--bogus'" $E --bogus
expect2 "two checkpoints reading stdin" "--data - reads standard input once: one checkpoint at a time (2 given)" $E $CK --data -
expect2 "a quoted glob that matches nothing" "'$TMP/none-*.safetensors.gz' matches no file" $E "$TMP/none-*.safetensors.gz"
expect2 "no checkpoint" "missing the checkpoint to evaluate" $TXL eval
expect2 "--data without a value" "--data needs a file" $E --data
expect2 "--tgt-len not a number" "--tgt-len: expected an integer, found 'abc'" $E --tgt-len abc
expect2 "--tgt-len with a blank" "--tgt-len: expected an integer, found ' 5'" $E --tgt-len ' 5'
expect2 "--tgt-len 0" "--tgt-len: 0 is out of range [1, 1048576]" $E --tgt-len 0
expect2 "--tgt-len negative" "--tgt-len: -5 is out of range [1, 1048576]" $E --tgt-len -5
expect2 "--tgt-len 1.5" "--tgt-len: expected an integer, found '1.5'" $E --tgt-len 1.5
expect2 "--tgt-len without a value" "--tgt-len needs a number" $E --tgt-len
expect2 "--mem-len negative" "--mem-len: -1 is out of range [0, 4194304]" $E --mem-len -1
expect2 "--batch 0" "--batch: 0 is out of range [1, 65536]" $E --batch 0
expect2 "--batch 1e3" "--batch: expected an integer, found '1e3'" $E --batch 1e3
expect2 "--max-tokens 1" "--max-tokens: 1 is out of range [2," $E --max-tokens 1
expect2 "--clamp-len not a number" "--clamp-len: expected an integer, found 'x'" $E --clamp-len x
expect2 "--clamp-len negative (meant off, silently)" "--clamp-len: -5 is out of range [0, 1073741824]" $E --clamp-len -5
expect2 "--threads negative" "--threads: -1 is out of range [0, 1024]" $E --threads -1
expect2 "--split unknown" "--split: expected valid, test or train, found 'bogus'" $E --split bogus
# --split names a part of the checkpoint's corpus, --data another file: not both
expect2 "--split with --data" "--data and --split exclude each other" \
    $E --split test --data tests/data/enwik8_slice60k.txt.gz --max-tokens 3000
expect2 "--data with --split" "--data and --split exclude each other" \
    $E --data=tests/data/enwik8_slice60k.txt.gz --split=valid --max-tokens 3000
expect2 "--sweep empty" "--sweep: expected a comma-separated list like 1,2,4,8, found ''" $E --sweep ''
expect2 "--sweep 1,,2" "--sweep: expected a comma-separated list of integers in [1, 1024] like 1,2,4,8, found '1,,2'" $E --sweep 1,,2
expect2 "--sweep 0" "found '0'" $E --sweep 0
expect2 "--sweep trailing comma" "--sweep: trailing comma in '1,2,'" $E --sweep 1,2,
expect2 "--sweep letters" "found '1,x'" $E --sweep 1,x
expect2 "--sweep 2000" "found '2000'" $E --sweep 2000
expect2 "--sweep too many values" "--sweep: at most 32 values" $E --sweep 1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,32,33
expect2 "--sweep-mode unknown" "--sweep-mode: expected memory, window or both, found 'bogus'" $E --sweep-mode bogus
expect2 "--term-stats 0" "--term-stats: 0 is out of range" $E --term-stats 0
expect2 "lengths beyond what txl can plan" "the setting: batch 65536 x tgt_len 1048576 with mem_len 32 needs about" \
    $E --batch 65536 --tgt-len 1048576
expect2 "a sweep factor beyond what txl can plan" "sweep factor 1024: batch 8 x tgt_len 1048576 with mem_len 1048576 needs about" \
    $E --sweep 1,1024 --sweep-mode both --tgt-len 1024 --mem-len 1024
expect2 "--batch larger than the data allows" "$CFG: the file has 512 tokens, too few for 65536 streams;;use a batch of at most 511" $E --data $CFG --batch 65536

echo "-- sample"
S="$TXL sample $CK"
expect2 "unknown flag" "unknown option '--bogus'" $S --bogus
expect2 "-n negative" "-n: -5 is out of range [0," $S -n -5
expect2 "-n not a number" "-n: expected an integer, found 'abc'" $S -n abc
expect2 "-n without a value" "-n needs a number" $S -n
expect2 "--temperature negative" "--temperature: -1 is out of range [0, 100]" $S --temperature -1
expect2 "--temperature nan" "--temperature: expected a number, found 'nan'" $S --temperature nan
expect2 "--temperature inf" "--temperature: expected a number, found 'inf'" $S --temperature inf
# numbers on the command line are decimal, like the config file's (no hex, inf, nan, blanks)
expect2 "--temperature hex" "--temperature: expected a number, found '0x1p-1'" $S --temperature 0x1p-1
expect2 "-t hex" "-t: expected a number, found '0x.8'" $S -t 0x.8
expect2 "--top-p hex" "--top-p: expected a number, found '0X.8'" $S --top-p 0X.8
expect2 "--top-p infinity" "--top-p: expected a number, found 'infinity'" $S --top-p infinity
expect2 "--temperature with a blank" "--temperature: expected a number, found ' 1'" $S --temperature ' 1'
expect2 "--temperature 1e999" "--temperature: expected a number, found '1e999'" $S --temperature 1e999
expect2 "plot --ymax hex" "--ymax: expected a number, found '0x10'" $TXL plot $RUN -o $TMP/p.png --ymax 0x10
expect2 "a hex number in a config value too" "train.lr: expected a number, found '0x1p-10'" \
    $TXL train -c $CFG --set train.lr=0x1p-10 --print-config
check "decimal forms: -t .5 --top-p 9e-1 (and 5., +1E0)" \
    $S -n 1 -p x -t .5 --top-p 9e-1 --threads 1 -q
check "  ... 5. and +1E0" $S -n 1 -p x -t 5. --top-p +1E0 --threads 1 -q
check "  ... the same forms in a config" $TXL train -c $CFG --set train.lr=.5 --set train.clip=5. \
    --set train.beta1=9e-1 --set train.eps=+1E-8 --print-config
expect2 "--top-k 70000" "--top-k: 70000 is out of range [0, 65536]" $S --top-k 70000
expect2 "--top-p 0" "--top-p: 0 is out of range" $S --top-p 0
expect2 "--top-p 1.5" "--top-p: 1.5 is out of range" $S --top-p 1.5
expect2 "--seed negative" "--seed: -1 is out of range [0," $S --seed -1
expect2 "--seed 2^64" "--seed: 18446744073709551616 is out of range [0, 18446744073709551615]" \
    $S --seed 18446744073709551616
check "--seed 2^64-1 (train.seed's largest)" $S --seed 18446744073709551615 -n 1 -p x --threads 1 -q
# sample --seed takes exactly what train.seed takes: an unsigned 64-bit decimal integer
for v in 0 +7 007 9223372036854775808 18446744073709551615 18446744073709551616 -1 -0 1e3 \
         0x10 1.0 '' 12a; do
    $S --seed "$v" -n 1 -p x --threads 1 -q > /dev/null 2>&1; a=$?
    $TXL train -c $CFG --set "train.seed=$v" --print-config > /dev/null 2>&1; b=$?
    if [ $a = $b ]; then ok "--seed '$v' and train.seed=$v agree (exit $a)"
    else bad "--seed '$v' exits $a, train.seed=$v exits $b"; fi
done
expect2 "--mem-len negative" "--mem-len: -1 is out of range [0, 1048576]" $S --mem-len -1
expect2 "--prompt with --prompt-file" "--prompt and --prompt-file exclude each other" $S --prompt a --prompt-file $CFG
expect2 "--prompt-file missing" "--prompt-file $TMP/nope.txt: cannot open: No such file or directory" $S --prompt-file $TMP/nope.txt
expect2 "--prompt-file a directory" "--prompt-file $TMP: read error: Is a directory" $S --prompt-file $TMP

echo "-- more memory than the machine allows: refused before it is allocated"
# eval --mem-len 4194304 (the flag allows it) grew to 24 GB before the OOM killer came; every
# setting is now estimated from the plans the pass will make and refused (exit 2) when it
# does not fit, naming the need, the physical memory and the address-space limit. Run under
# a 1 GB limit (ulimit -v) so that a regression fails at a malloc instead of taking the
# machine's memory, and not under a sanitizer, which reserves terabytes of address space
# (limit_vm would run them unlimited).
if ldd "$TXL" 2>/dev/null | grep -q 'lib[atl]*san'; then
    echo "  skipped: a sanitizer build"
else
    N="MiB of memory, more than this machine allows: ;;MiB of physical memory (txl holds;;an address-space limit (ulimit -v) of 977 MiB"
    expect2 "eval --mem-len 4194304" "the setting: the evaluation at batch 8 x tgt_len 32 with mem_len 4194304 needs about;;$N" \
        limit_vm 1000000 timeout 60 $E --mem-len 4194304 --max-tokens 3000
    expect2 "eval --mem-len 100000 (fits the machine, not the limit)" "mem_len 100000 needs about;;$N" \
        limit_vm 1000000 timeout 60 $E --mem-len 100000 --max-tokens 3000
    # just under the limit: OpenBLAS maps a 128 MiB buffer at a thread's first GEMM (and a
    # second thread's first malloc maps an arena), and when the limit leaves no room it
    # retries forever: the plans the check let through with less than ~300 MiB to spare hung.
    # The largest --mem-len accepted (bisection, 2 threads) must run to its end.
    lo=1000 hi=200000 hung=
    while [ $((hi - lo)) -gt 200 ]; do
        mid=$(((lo + hi) / 2))
        limit_vm 1000000 timeout 20 $E --mem-len $mid --max-tokens 300 --threads 2 >/dev/null 2>&1
        case $? in 2) hi=$mid ;; 124) hung="$hung $mid"; lo=$mid ;; *) lo=$mid ;; esac
    done
    check "eval near the limit: no --mem-len the check accepts hangs (hung:${hung:- none})" test -z "$hung"
    # The address space in use when the check runs moves by some MiB from one run to the
    # next (a reader thread's malloc arena is there or not yet), and with it the boundary:
    # a second run may refuse what the bisection's accepted. The largest setting a second
    # run accepts, stepping down from there, must run to its end.
    run=$lo rc=2
    while [ $rc -eq 2 ] && [ $run -gt $((lo - 4000)) ]; do
        limit_vm 1000000 timeout 20 $E --mem-len $run --max-tokens 300 --threads 2 >/dev/null 2>&1
        rc=$?
        [ $rc -eq 2 ] && run=$((run - 200))
    done
    check "...the largest accepted, $run (the bisection's $lo), runs to its end (exit $rc)" test $rc -eq 0
    # (and the other side: past the moving boundary, at the bisection's refused + 2000)
    expect2 "...and $((hi + 2000)) is refused, naming the threads' buffers" "kept for the threads' buffers (OpenBLAS's, malloc's)" \
        limit_vm 1000000 timeout 20 $E --mem-len $((hi + 2000)) --max-tokens 300 --threads 2
    expect2 "eval --sweep 1,1024 --batch 64: the factor that does not fit" "sweep factor 1024: the evaluation at batch 64 x tgt_len 32 with mem_len 32768 needs about;;$N" \
        limit_vm 1000000 timeout 60 $E --sweep 1,1024 --batch 64 --max-tokens 3000
    check "...refused before the first row is printed" test ! -s $TMP/out
    expect2 "eval --term-stats --mem-len 4194304" "mem_len 4194304 needs about;;$N" \
        limit_vm 1000000 timeout 60 $E --term-stats --mem-len 4194304 --max-tokens 3000
    for k in needle recall; do
        expect2 "probe $k --mem-len 4194304" "probe $k, memory mode: 4 trials x tgt_len 32 with mem_len 4194304 needs about;;$N" \
            limit_vm 1000000 timeout 60 $TXL probe $k $CK --mem-len 4194304 --trials 4 --lengths 2
    done
    expect2 "probe shift --mem-len 4194304" "probe shift: the evaluation at tgt_len 32 with mem_len 4194304 needs about;;$N" \
        limit_vm 1000000 timeout 60 $TXL probe shift $CK --mem-len 4194304
    expect2 "sample --mem-len 1048576" "sampling with mem_len 1048576: 1 sample, 1 side by side, needs about;;$N" \
        limit_vm 1000000 timeout 60 $S --mem-len 1048576 -n 5
    expect2 "sample --mem-len 65536 --num-samples 64" "sampling with mem_len 65536: 64 samples, 64 side by side;;$N" \
        limit_vm 1000000 timeout 60 $S --mem-len 65536 --num-samples 64 -n 5
    # the samples' text, kept to be printed at the end (2n + 16 tokens, a byte each)
    expect2 "sample --num-samples 4096 -n 1000000" "sampling 4096 samples of up to 1000000 bytes each (kept until all are drawn) needs about;;$N" \
        limit_vm 1000000 timeout 60 $S --num-samples 4096 -n 1000000
    # prompts: at most 16 MiB (/dev/zero grew to 6.4 GB in 8 s)
    expect2 "sample --prompt-file /dev/zero" "--prompt-file /dev/zero: longer than 16 MiB, the most a prompt may be" \
        limit_vm 1000000 timeout 60 $S --prompt-file /dev/zero
    expect2 "sample with /dev/zero as stdin" "the prompt from stdin: longer than 16 MiB" \
        limit_vm 1000000 timeout 60 sh -c "exec $S < /dev/zero"
    expect2 "sample -i with /dev/zero as stdin (one endless line)" "-i: stdin: a line longer than 16 MiB" \
        limit_vm 1000000 timeout 60 sh -c "exec $S -i < /dev/zero"
fi

echo "-- info and export"
expect2 "info: unknown flag" "unknown option '--bogus'" $TXL info $CK --bogus
expect2 "info: no checkpoint" "missing the checkpoint (or --system)" $TXL info
expect2 "info: a missing one of two checkpoints (nothing printed)" "$TMP/nope: cannot open" $TXL info $CK $TMP/nope
expect2 "export: no -o" "missing -o OUT.safetensors[.gz]" $TXL export $CK
expect2 "export: -o without a value" "-o needs a file" $TXL export $CK -o
expect2 "export: no checkpoint" "missing the checkpoint to export" $TXL export -o $TMP/x.safetensors
expect2 "export into a missing directory (a bad -o, found before anything is read)" \
    "-o $TMP/no/dir/x.safetensors: no directory '$TMP/no/dir' to write it in" \
    $TXL export $CK -o $TMP/no/dir/x.safetensors

echo "-- checkpoint paths longer than txl takes (1055 bytes: a 1023-byte out_dir's last)"
# F1, exactly 1055 bytes, holds one checkpoint (plain); F1.gz, 1058 bytes, another: the longer
# name, cut to fit, used to name the shorter, so txl read the wrong checkpoint with exit 0
L=$TMP/long/$(printf '%0200d' 0)/$(printf '%0200d' 0)/$(printf '%0200d' 0)/$(printf '%0200d' 0)
mkdir -p $L
F1=$L/$(printf '%0*d' $((1055 - ${#L} - 1 - 12)) 0).safetensors
gunzip -c $CK > $F1
cp $LAST $F1.gz
check "(the paths are 1055 and 1058 bytes long)" test "${#F1} $(printf %s "$F1.gz" | wc -c)" = "1055 1058"
check "a checkpoint path of 1055 bytes reads" $TXL info $F1
for c in "info" "eval" "sample" "probe shift"; do
    expect2 "$c: a checkpoint path of 1058 bytes is refused, the reason first (not cut to name another file)" \
        "a checkpoint path of 1058 bytes, more than txl takes (1055): '$TMP/long/" \
        $TXL $c $F1.gz
done
expect2 "export: the same" "a checkpoint path of 1058 bytes, more than txl takes (1055)" \
    $TXL export $F1.gz -o $TMP/x.safetensors
expect2 "train --resume: the same" "a checkpoint path of 1058 bytes, more than txl takes (1055)" \
    $TXL train -q --resume $F1.gz --set train.out_dir=$TMP/lr
expect2 "train --init-from: the same" "a checkpoint path of 1058 bytes, more than txl takes (1055)" \
    $T --init-from $F1.gz --force --set train.out_dir=$TMP/li
rm -rf $TMP/long

guard_sum > $TMP/guard.end
check "the run directory is untouched after all of the above" cmp -s $TMP/guard.sum $TMP/guard.end
finish
