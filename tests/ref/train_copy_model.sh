#!/bin/sh
# Trains the copy model that tests/e2e/probes_copy.sh probes and writes it (weights only, as
# `txl export` writes them) to tests/fixtures/copy/copy_xl.safetensors.gz.
#
# A tiny model learns to copy (an induction head) only after thousands of steps: the loss
# sits near 5.2 bits per byte, then drops within a few hundred steps to ~2.9 (around step
# 9000 here) and ends near 2.5. That is several minutes on one core, too long for `make
# test`, so the trained model is committed (about 340 KB) and the test trains only a quick
# variant of its own.
#
# The corpus: 2 MB of lines, each a random string of 8..40 characters of [a-z0-9 .] written
# 2 or 3 times, separated by spaces (tests/data/copy_corpus.awk, seed 7: the same bytes with
# any awk). The run: tests/configs/copy.yaml, 20000 steps, one thread (2.5 minutes on an idle
# core, 5 on a busy one; the same machine gives the same weights, another CPU may round
# differently).
#
# Usage: tests/ref/train_copy_model.sh        (from the top of the repository; needs ./txl
# or TXL_BIN)
set -eu
ROOT=$PWD
case ${TXL_BIN:-./txl} in /*) TXL=${TXL_BIN:-./txl} ;; *) TXL=$ROOT/${TXL_BIN:-./txl} ;; esac
OUT=$ROOT/tests/fixtures/copy
TMP=$(mktemp -d)
trap 'rm -rf $TMP' EXIT
mkdir -p $OUT
cd $TMP # the config's paths are relative: copy.txt, run/
awk -v seed=7 -v bytes=2000000 -v 'alpha=abcdefghijklmnopqrstuvwxyz0123456789 .' \
    -v minl=8 -v maxl=40 -v minr=2 -v maxr=3 -f $ROOT/tests/data/copy_corpus.awk > copy.txt
$TXL train -c $ROOT/tests/configs/copy.yaml -q
jq -r 'select(.event=="eval") | "step \(.step): valid bpc \(.bpc)"' run/log.jsonl
$TXL export run/last.safetensors.gz -o $OUT/copy_xl.safetensors.gz
