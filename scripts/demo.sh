#!/bin/sh
# make demo: on a fresh Debian 12 machine (as root), install what is missing, build, train
# configs/tiny.yaml on the King James Bible for a couple of minutes, evaluate, and sample.
set -eu
cd "$(dirname "$0")/.."

need=""
for p in build-essential pkg-config libopenblas-dev libdnnl-dev libcjson-dev libyaml-dev zlib1g-dev bible-kjv; do
    dpkg -s "$p" >/dev/null 2>&1 || need="$need $p"
done
if [ -n "$need" ]; then
    echo "== installing:$need"
    if [ "$(id -u)" -ne 0 ]; then
        echo "demo: missing Debian packages:$need (run as root, or: sudo apt-get install$need)" >&2
        exit 2
    fi
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $need >/dev/null
fi

echo "== building"
make -s txl

# corpora/ (not data/, txl's C sources) holds the text corpora: ignored by git
mkdir -p corpora
if [ ! -s corpora/kjv.txt ]; then
    echo "== extracting the King James Bible (bible-kjv) into corpora/kjv.txt"
    bible -f Gen1:1-Rev22:21 </dev/null | cut -d' ' -f2- > corpora/kjv.txt.tmp
    mv corpora/kjv.txt.tmp corpora/kjv.txt
fi
echo "   $(wc -c < corpora/kjv.txt) bytes"

RUN=${DEMO_OUT:-runs/demo}
STEPS=${DEMO_STEPS:-1500}
echo "== training configs/tiny.yaml for $STEPS steps into $RUN (a couple of minutes on 2 cores)"
./txl train -c configs/tiny.yaml --set train.out_dir="$RUN" --set train.max_steps="$STEPS" \
    --set train.eval_interval=500 --force

echo "== evaluating on the test split"
./txl eval "$RUN/best.safetensors.gz" --split test

echo "== sampling (seed 1, temperature 0.8)"
./txl sample "$RUN/best.safetensors.gz" --prompt "And God said" --echo -n 400 -t 0.8 --seed 1
echo
