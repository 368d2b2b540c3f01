#!/bin/sh
# Writes the seed inputs of the fuzz harnesses into tests/fuzz/corpus/<name>/ (run once,
# before the first `make fuzz`; the committed corpora grew from these). Needs ./txl.
#   config:     every YAML under tests/data/config, tests/configs and configs, and a few
#               with --set assignments after a NUL
#   checkpoint: tiny checkpoints of every positional scheme (1 layer, d_model 4), plain and
#               gzip'd, with and without optimiser state and memory
#   corpus:     4 parameter bytes + small text, gzip'd text, binary and one-byte files
# and then make_cases.sh: the hand-made cases (duplicate keys, too many tensors, non-finite
# values, bytes after gzip data, gzip members)
set -eu
cd "$(dirname "$0")/../.."
TXL=${TXL_BIN:-./txl}
C=tests/fuzz/corpus
mkdir -p $C/config $C/checkpoint $C/corpus
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

for f in tests/data/config/*.y*ml tests/configs/*.yaml configs/*.yaml; do
    cp "$f" "$C/config/seed-$(basename "$(dirname "$f")")-$(basename "$f")"
done
printf 'model: {n_layer: 2}\n\000model.d_model=64\000train.lr=1e-3\000data.train=x.txt' > $C/config/seed-set1
printf 'data: {train: a.txt}\n\000model.pos_scheme=mlp\000data.split=[0.8, 0.1, 0.1]' > $C/config/seed-set2
printf '\000train.seed=18446744073709551615\000data.valid=~\000data.train="q.txt"' > $C/config/seed-set3

# a small corpus for the tiny runs: 3000 bytes of varied text
i=0
while [ $i -lt 60 ]; do printf 'line %d: the quick brown fox jumps over the lazy dog\n' $i; i=$((i+1)); done > $tmp/text.txt
for scheme in xl xl_untie mlp rope alibi absolute none; do
    pos=$scheme; extra=
    [ $scheme = xl_untie ] && { pos=xl; extra="--set model.untie_r=true --set model.clamp_len=3"; }
    # shellcheck disable=SC2086
    $TXL train -q -c tests/configs/micro.yaml --set data.train=$tmp/text.txt \
        --set model.n_layer=1 --set model.d_model=4 --set model.n_head=1 --set model.d_head=2 \
        --set model.d_inner=4 --set model.tgt_len=4 --set model.mem_len=3 \
        --set model.mlp_num_freqs=2 --set model.mlp_hidden=2 --set model.pos_scheme=$pos \
        --set train.batch_size=2 --set train.max_steps=2 --set train.warmup_steps=0 \
        --set train.eval_interval=0 --set train.eval_tokens=64 --set train.ckpt_gzip=false \
        --set train.out_dir=$tmp/$scheme $extra >/dev/null
    cp $tmp/$scheme/last.safetensors $C/checkpoint/seed-$scheme-last.safetensors
    cp $tmp/$scheme/best.safetensors $C/checkpoint/seed-$scheme-best.safetensors
done
gzip -9 -c $tmp/xl/last.safetensors > $C/checkpoint/seed-xl-last.safetensors.gz
gzip -1 -c $tmp/mlp/best.safetensors > $C/checkpoint/seed-mlp-best.safetensors.gz

printf '\003\007\001\021' > $tmp/p
cat $tmp/p $tmp/text.txt > $C/corpus/seed-text
{ printf '\001\040\000\005'; gzip -c $tmp/text.txt; } > $C/corpus/seed-gzip
{ printf '\007\077\001\000'; head -c 3000 /bin/sh; } > $C/corpus/seed-binary
{ printf '\000\000\001\000'; printf 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa'; } > $C/corpus/seed-repeat
printf '\000\000\000\000x' > $C/corpus/seed-one
sh tests/fuzz/make_cases.sh
echo "seeds: $(ls $C/config | wc -l) config, $(ls $C/checkpoint | wc -l) checkpoint, $(ls $C/corpus | wc -l) corpus"
