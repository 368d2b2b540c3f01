#!/bin/sh
# Bad configs, one case per class (doc/design.md, "Configuration"): YAML syntax, unknown keys and
# sections, wrong types, out-of-range and inconsistent values, duplicates, --set overrides, sizes
# and paths. Each exits 2 with FILE:LINE:COL (or the --set text) and what was expected,
# and the run already in train.out_dir is left byte for byte as it was. The committed
# files of tests/data/config/ are used as they are; the rest is written here.
. tests/e2e/lib.sh
. tests/e2e/badlib.inc
CFG=tests/configs/micro.yaml
RUN=$TMP/run
setup_run $RUN
guard_init $RUN
C=$TMP/cfg
mkdir -p $C
# cfgcase NAME "needles" 'yaml text (printf format)': writes C/NAME.yaml and trains on it into
# the guarded run directory (data.train comes from the file or defaults to micro's corpus)
cfgcase() {
    printf -- "$3" > $C/$1.yaml
    expect2 "$1" "$C/$1.yaml:;;$2" $TXL train -c $C/$1.yaml --set train.out_dir=$RUN
}
# committed cases (tests/data/config): trained with --set data.train so only the bad key fails
datacase() {
    expect2 "$1" "tests/data/config/$1.yaml:$2" $TXL train -c tests/data/config/$1.yaml \
        --set data.train=tests/data/tinyshakespeare.txt.gz --set train.out_dir=$RUN
}
D="data: {train: tests/data/tinyshakespeare.txt.gz}\n"

echo "-- YAML syntax"
datacase bad_syntax "3:11: YAML syntax error: mapping values are not allowed"
cfgcase flow_open "2:1: YAML syntax error: did not find expected ',' or '}'" 'model: {n_layer: 2\n'
cfgcase tab "YAML syntax error;;found character that cannot start any token" "${D}model:\n\tn_layer: 2\n"
cfgcase quote "YAML syntax error;;found unexpected end of stream" "${D}model: {pos_scheme: \"xl}\n"
printf "${D}model: {pos_scheme: \"x\377l\"}\n" > $C/utf8.yaml
expect2 "invalid UTF-8" "$C/utf8.yaml: invalid YAML input at byte 71: invalid leading UTF-8 octet (byte 0xFF)" \
    $TXL train -c $C/utf8.yaml --set train.out_dir=$RUN
printf "${D}model: {n_layer: 2}\000\n" > $C/nul.yaml
expect2 "a NUL byte" "$C/nul.yaml: invalid YAML input at byte;;control characters are not allowed" \
    $TXL train -c $C/nul.yaml --set train.out_dir=$RUN
datacase bad_multi_doc "3:1: expected a single YAML document, found a second one"
cfgcase list_root "1:1: expected a mapping of sections (model, data, train), found a list" '- model\n- data\n'
cfgcase alias_key "YAML syntax error" "${D}model: {*a: 2}\n"
# deep nesting: libyaml's time grows with the square of the depth (40,000 levels took 24 s
# inside it); a config has 3 levels, and the 17th stops the parse at once (timeout 10: a
# regression fails here instead of hanging)
{ printf "${D}model: "; head -c 40000 /dev/zero | tr '\0' '['; } > $C/deep_flow.yaml
expect2 "40,000 nested flow lists (at once)" "$C/deep_flow.yaml:2:23: nested deeper than 16 levels (a txl config has 3" \
    timeout 10 $TXL train -c $C/deep_flow.yaml --set train.out_dir=$RUN
{ printf "${D}model:\n"; i=0; while [ $i -lt 40000 ]; do printf -- '- '; i=$((i + 1)); done; printf 'x\n'; } > $C/deep_block.yaml
expect2 "40,000 nested block lists (at once)" "$C/deep_block.yaml:3:31: nested deeper than 16 levels" \
    timeout 10 $TXL train -c $C/deep_block.yaml --set train.out_dir=$RUN
expect2 "--set with 40,000 nested mappings (at once)" "--set model.n_layer={{{{;;nested deeper than 16 levels" \
    timeout 10 $TXL train -c $CFG --set "model.n_layer=$(head -c 40000 /dev/zero | tr '\0' '{')" --set train.out_dir=$RUN
printf "model: {n_layer: 2}  # [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\ndata: {train: tests/data/tinyshakespeare.txt.gz, doc_separator: \"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\"}\n" > $C/brackets.yaml
$TXL train -c $C/brackets.yaml --print-config > $TMP/brackets.out 2>&1
check "brackets in a comment and a quoted string are text, not nesting ($(grep -m1 -e doc_separator -e "txl train" $TMP/brackets.out))" \
    grep -qF 'doc_separator: "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["' $TMP/brackets.out

echo "-- unknown keys and sections"
datacase bad_unknown_key "3:3: unknown key 'model.d_modle' (did you mean 'model.d_model'?)"
datacase bad_unknown_section "1:1: unknown section 'modle' (expected model, data or train; did you mean 'model'?)"
datacase bad_key_wrong_section "2:3: unknown key 'model.lr' (did you mean 'train.lr'?)"
cfgcase key_not_scalar "2:9: expected a key name in section 'model', found a list" "${D}model: {[a]: 2}\n"

echo "-- wrong types"
datacase bad_wrong_type "2:12: model.n_layer: expected an integer, found 'four'"
datacase bad_float_for_int "2:12: model.n_layer: expected an integer, found '3.5'"
datacase bad_bool "2:14: model.pre_lnorm: expected true or false, found 'maybe'"
datacase bad_enum "2:15: model.pos_scheme: expected one of $(schemes | paste -s -d, | sed 's/,/, /g'), found 'rotary'"
datacase bad_null "2:12: model.n_layer: expected an integer, found null"
datacase bad_mapping_for_scalar "3:5: model.n_layer: expected an integer, found a mapping"
datacase bad_scalar_for_mapping "1:8: section 'model': expected a mapping of keys, found '4'"
datacase bad_split_len "2:10: data.split: expected a list of 3 numbers [train, valid, test], found 2 items"
cfgcase quoted_int "2:18: model.n_layer: expected an integer, found the string \"2\"" "${D}model: {n_layer: \"2\"}\n"
cfgcase hex "2:13: train.lr: expected a number, found '0x10'" "${D}train: {lr: 0x10}\n"
cfgcase nan "2:13: train.lr: expected a number, found '.nan'" "${D}train: {lr: .nan}\n"
cfgcase list_for_path "1:15: data.train: expected a path, found a list" 'data: {train: [a, b]}\n'
cfgcase list_for_separator "1:65: data.doc_separator: expected a string, found a list" "data: {train: tests/data/tinyshakespeare.txt.gz, doc_separator: [a]}\n"
cfgcase big_int "2:18: model.n_layer: expected an integer, found '99999999999999999999' (too large)" "${D}model: {n_layer: 99999999999999999999}\n"
cfgcase big_float "2:13: train.lr: expected a number, found '1e999' (too large for a double)" "${D}train: {lr: 1e999}\n"
cfgcase tag_str "2:18: model.n_layer: expected an integer, found a value tagged !!str" "${D}model: {n_layer: !!str 3}\n"
cfgcase tag_float "2:18: model.n_layer: expected an integer, found a value tagged !!float" "${D}model: {n_layer: !!float 3}\n"
cfgcase tag_custom "2:20: model.pre_lnorm: expected true or false, found a value tagged !x" "${D}model: {pre_lnorm: !x true}\n"
cfgcase tag_section "2:8: section 'train': expected a mapping of keys, found a value tagged !!str" "${D}train: !!str {lr: 1}\n"
expect2 "--set with a tag against the key's type" "--set model.n_layer=!!str 3: model.n_layer: expected an integer, found a value tagged !!str" \
    $TXL train -c $CFG --set 'model.n_layer=!!str 3' --set train.out_dir=$RUN

echo "-- out of range"
datacase bad_odd_d_model "1:30: model.d_model must be even, found 255"
cfgcase tgt_len_0 "2:18: model.tgt_len must be >= 1, found 0" "${D}model: {tgt_len: 0}\n"
cfgcase lr_negative "2:13: train.lr must be > 0, found -0.001" "${D}train: {lr: -1e-3}\n"
cfgcase lr_zero "2:13: train.lr must be > 0, found 0" "${D}train: {lr: 0}\n"
datacase bad_out_of_range "3:12: model.dropout must be in [0, 1), found 1.5"
cfgcase mem_len_negative "2:18: model.mem_len must be >= 0, found -1" "${D}model: {mem_len: -1}\n"
cfgcase clamp_len_negative "2:20: model.clamp_len must be >= 0, found -5" "${D}model: {clamp_len: -5}\n"
expect2 "--set clamp_len -5 (a negative length meant off, silently)" "--set model.clamp_len=-5: model.clamp_len must be >= 0, found -5" \
    $TXL train -c $CFG --set model.clamp_len=-5 --set train.out_dir=$RUN
cfgcase beta2_one "2:16: train.beta2 must be in [0, 1), found 1" "${D}train: {beta2: 1.0}\n"
cfgcase batch_0 "2:21: train.batch_size must be >= 1, found 0" "${D}train: {batch_size: 0}\n"
cfgcase grad_accum_0 "2:21: train.grad_accum must be in [1, 1024], found 0" "${D}train: {grad_accum: 0}\n"
cfgcase grad_accum_negative "2:21: train.grad_accum must be in [1, 1024], found -2" "${D}train: {grad_accum: -2}\n"
cfgcase grad_accum_huge "2:21: train.grad_accum must be in [1, 1024], found 1025" "${D}train: {grad_accum: 1025}\n"
cfgcase grad_accum_float "2:21: train.grad_accum: expected an integer, found '2.5'" "${D}train: {grad_accum: 2.5}\n"
expect2 "--set grad_accum 0" "--set train.grad_accum=0: train.grad_accum must be in [1, 1024], found 0" \
    $TXL train -c $CFG --set train.grad_accum=0 --set train.out_dir=$RUN
expect2 "--set grad_accum a word" "--set train.grad_accum=two: train.grad_accum: expected an integer, found 'two'" \
    $TXL train -c $CFG --set train.grad_accum=two --set train.out_dir=$RUN
cfgcase threads_huge "2:18: train.threads must be in [0, 1024], found 100000" "${D}train: {threads: 100000}\n"
expect2 "--set threads 5000" "--set train.threads=5000: train.threads must be in [0, 1024], found 5000" \
    $TXL train -c $CFG --set train.threads=5000 --set train.out_dir=$RUN
cfgcase int_overflow "2:18: model.n_layer must be <= 2147483647 (the largest the field holds), found 4294967296" "${D}model: {n_layer: 4294967296}\n"
datacase bad_seed "1:25: train.seed: expected a non-negative integer < 2^64, found '-1'"
datacase bad_split_sum "3:10: data.split: the fractions must sum to <= 1"
cfgcase tokenizer "1:61: data.tokenizer: expected one of byte, word, bpe, found \"char\"" "data: {train: tests/data/tinyshakespeare.txt.gz, tokenizer: char}\n"
cfgcase long_path "1:15: data.train: expected a value of at most 1023 bytes" "data: {train: $(head -c 1100 /dev/zero | tr '\0' x)}\n"

echo "-- inconsistent values (cfg_validate: the file, then the keys)"
cfgcase lr_min "train.lr_min must be <= train.lr (0.001), found 0.01" "${D}train: {lr: 1e-3, lr_min: 1e-2}\n"
cfgcase warmup "train.warmup_steps must be < train.max_steps (10) with schedule cosine, found 10" "${D}train: {max_steps: 10, warmup_steps: 10}\n"
cfgcase valid_0 "data.split: the valid fraction must be > 0 when data.valid is empty" "data: {train: x.txt, split: [1, 0, 0]}\n"
cfgcase rope_odd "model.d_head must be even with pos_scheme rope (rotations pair its halves), found 3" "${D}model: {pos_scheme: rope, d_head: 3}\n"
cfgcase huge_model "the model is too large: ;;model.n_layer 2000000000" "${D}model: {n_layer: 2000000000, d_model: 4096, d_inner: 16384}\n"
cfgcase huge_step "a training step is too large;;train.batch_size 1000000 x model.tgt_len 1000000" "${D}model: {tgt_len: 1000000}\ntrain: {batch_size: 1000000}\n"
cfgcase huge_accum_mem "the memory is too large: about;;train.batch_size 1000 x grad_accum 1024 streams" "${D}model: {tgt_len: 1, mem_len: 2000}\ntrain: {batch_size: 1000, grad_accum: 1024}\n"
cfgcase accum_streams "train.batch_size x train.grad_accum (the streams of one update) must be <= 2147483647, found 3000000 x 1000" "${D}train: {batch_size: 3000000, grad_accum: 1000}\n"
cfgcase no_train "data.train is required: expected a non-empty path" 'model: {n_layer: 2}\n'

echo "-- duplicates"
datacase bad_duplicate_key "4:3: duplicate key 'model.n_layer' (first set at 2:3)"
cfgcase dup_section "3:1: duplicate section 'model' (first at 2:1)" "${D}model: {n_layer: 2}\nmodel: {d_model: 64}\n"
cfgcase dup_flow "2:21: duplicate key 'model.n_layer' (first set at 2:9)" "${D}model: {n_layer: 2, n_layer: 3}\n"

echo "-- files"
expect2 "config file missing" "$C/nope.yaml: cannot open config: No such file or directory" $TXL train -c $C/nope.yaml
expect2 "config is a directory" "$C: cannot read config: is a directory" $TXL train -c $C
mkfifo $C/fifo.yaml
expect2 "config is a FIFO (refused, not waited on)" "$C/fifo.yaml: cannot read config: not a regular file but a FIFO" \
    timeout 10 $TXL train -c $C/fifo.yaml
expect2 "config is a device" "/dev/zero: cannot read config: not a regular file" $TXL train -c /dev/zero
: > $C/empty.yaml
expect2 "empty config (all defaults, no data.train)" "$C/empty.yaml: data.train is required" $TXL train -c $C/empty.yaml
# a corpus that cannot be opened: the message names the key and the corpus
corpuscase() { # corpuscase NAME "needles" 'yaml'
    printf -- "$3" > $C/$1.yaml
    expect2 "$1" "$2" $TXL train -c $C/$1.yaml --set train.out_dir=$RUN
}
corpuscase missing_corpus "data.train: $C/no/such/corpus.txt: cannot open corpus: No such file or directory" "data: {train: $C/no/such/corpus.txt}\n"
corpuscase missing_valid "data.valid: $C/novalid.txt: cannot open corpus" "data: {train: tests/data/tinyshakespeare.txt.gz, valid: $C/novalid.txt}\n"
corpuscase missing_test "data.test: $C/notest.txt: cannot open corpus" "data: {train: tests/data/tinyshakespeare.txt.gz, test: $C/notest.txt}\n"
expect2 "out_dir is a file" "train.out_dir $RUN/config.yaml: exists and is not a directory" \
    $TXL train -c $CFG --set train.out_dir=$RUN/config.yaml
expect2 "out_dir holds a run" "train.out_dir $RUN already holds a run;;--resume" $TXL train -c $CFG --set train.out_dir=$RUN

echo "-- --set"
expect2 "--set unknown key" "--set model.d_modle=3: unknown key 'model.d_modle' (did you mean 'model.d_model'?)" \
    $TXL train -c $CFG --set model.d_modle=3 --set train.out_dir=$RUN
expect2 "--set unknown section" "--set modle.d_model=3: unknown key 'modle.d_model'" \
    $TXL train -c $CFG --set modle.d_model=3 --set train.out_dir=$RUN
expect2 "--set without a section" "--set d_model=64: unknown key 'd_model' (did you mean 'model.d_model'?)" \
    $TXL train -c $CFG --set d_model=64 --set train.out_dir=$RUN
expect2 "--set without =" "--set model.d_model: expected section.key=value" \
    $TXL train -c $CFG --set model.d_model --set train.out_dir=$RUN
expect2 "--set malformed value" "--set model.n_layer=x: model.n_layer: expected an integer, found 'x'" \
    $TXL train -c $CFG --set model.n_layer=x --set train.out_dir=$RUN
expect2 "--set empty value" "--set model.n_layer=: model.n_layer: expected an integer, found null" \
    $TXL train -c $CFG --set model.n_layer= --set train.out_dir=$RUN
expect2 "--set two values" "--set model.n_layer=2 3: model.n_layer: expected an integer, found '2 3'" \
    $TXL train -c $CFG --set 'model.n_layer=2 3' --set train.out_dir=$RUN
expect2 "--set YAML syntax error" "--set data.split=[1, 2: YAML syntax error" \
    $TXL train -c $CFG --set 'data.split=[1, 2' --set train.out_dir=$RUN
expect2 "--set a second document" "--set model.n_layer=2?---?3: expected a single YAML document" \
    $TXL train -c $CFG --set "$(printf 'model.n_layer=2\n---\n3')" --set train.out_dir=$RUN
expect2 "--set odd d_model" "--set model.d_model=63: model.d_model must be even, found 63" \
    $TXL train -c $CFG --set model.d_model=63 --set train.out_dir=$RUN
expect2 "--set tgt_len 0" "--set model.tgt_len=0: model.tgt_len must be >= 1, found 0" \
    $TXL train -c $CFG --set model.tgt_len=0 --set train.out_dir=$RUN
expect2 "--set negative lr" "--set train.lr=-1: train.lr must be > 0, found -1" \
    $TXL train -c $CFG --set train.lr=-1 --set train.out_dir=$RUN
expect2 "--set of a mapping" "--set model={n_layer: 2}: unknown key 'model'" \
    $TXL train -c $CFG --set 'model={n_layer: 2}' --set train.out_dir=$RUN
$TXL train -c $CFG --set data.doc_separator='<doc>' --set data.doc_separator= --print-config > $TMP/sep.out 2>&1
check "--set data.doc_separator= (empty) means no separator ($(grep -m1 -e doc_separator -e 'txl train' $TMP/sep.out))" \
    grep -qx '  doc_separator: ""' $TMP/sep.out
expect2 "--set missing corpus" "data.train;;$C/nope.txt: cannot open corpus: No such file or directory" \
    $TXL train -c $CFG --set data.train=$C/nope.txt --set train.out_dir=$TMP/r_missing
check "...and no run directory was created for it" test ! -e $TMP/r_missing

echo "-- other trainers' names: nanoGPT, fairseq, Transformer-XL (did you mean txl's key)"
T="$TXL train -c $CFG --set train.out_dir=$RUN"
expect2 "nanoGPT's train.learning_rate" "did you mean 'train.lr'? learning_rate is nanoGPT's name for it" $T --set train.learning_rate=1e-3
expect2 "nanoGPT's model.n_embd" "did you mean 'model.d_model'? n_embd is nanoGPT's name for it" $T --set model.n_embd=64
expect2 "nanoGPT's block_size" "did you mean 'model.tgt_len'? block_size is nanoGPT's name for it" $T --set block_size=64
expect2 "nanoGPT's max_iters" "did you mean 'train.max_steps'?" $T --set train.max_iters=5
expect2 "batch_size in the wrong section" "unknown key 'model.batch_size' (did you mean 'train.batch_size'?)" $T --set model.batch_size=4
cfgcase flat_nanogpt "1:1: unknown section 'n_layer' (expected model, data or train; keys go in their section: did you mean model: {n_layer: ...}?)" \
    'n_layer: 4\nbatch_size: 8\n'
cfgcase flat_lr "1:1: unknown section 'learning_rate' (expected model, data or train; keys go in their section: did you mean train: {lr: ...}? learning_rate is nanoGPT's name for it)" \
    'learning_rate: 1e-3\n'
expect2 "fairseq's --decoder-layers" "unknown option '--decoder-layers' (did you mean '--set model.n_layer=...'? decoder-layers is fairseq's name for it)" $T --decoder-layers 2
expect2 "fairseq's max_update" "did you mean 'train.max_steps'? max_update is fairseq's name for it" $T --set train.max_update=5
expect2 "Transformer-XL's --tgt_len" "unknown option '--tgt_len' (did you mean '--set model.tgt_len=...'?)" $T --tgt_len 64
expect2 "Transformer-XL's --mem_len" "unknown option '--mem_len' (did you mean '--set model.mem_len=...'?)" $T --mem_len 64
expect2 "Transformer-XL's --n_layer" "unknown option '--n_layer' (did you mean '--set model.n_layer=...'?)" $T --n_layer 2
expect2 "Transformer-XL's --d_model" "unknown option '--d_model' (did you mean '--set model.d_model=...'?)" $T --d_model 64
expect2 "Transformer-XL's --warmup_step" "did you mean '--set train.warmup_steps=...'? warmup_step is Transformer-XL's name for it" $T --warmup_step 5
expect2 "eval --mem_len: eval's own flag" "unknown option '--mem_len' (did you mean '--mem-len'?)" $TXL eval $RUN --mem_len 64

guard_sum > $TMP/guard.end
check "the run directory is untouched after all of the above" cmp -s $TMP/guard.sum $TMP/guard.end
finish
