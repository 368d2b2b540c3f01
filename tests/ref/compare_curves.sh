#!/bin/sh
# Train the same config with txl and with the PyTorch reference (tests/ref/train_ref.py)
# and print their validation-bpc curves side by side.
#
# usage: tests/ref/compare_curves.sh CONFIG.yaml STEPS [--set key=value ...]
#
# Both runs get --set train.max_steps=STEPS plus the given overrides (txl also gets a
# temporary train.out_dir).  Runs from the repository root, so relative paths in the
# config and the overrides are taken from there.  The curves agree within noise, not
# bit for bit (different init RNGs and dropout masks).
#
# environment: TXL (default ./txl), PYTHON (default /usr/bin/python3),
#   REF_THREADS (torch threads of the reference, default 1: this torch build is
#   slower with 2 threads on the 2-core machine), KEEP=DIR (keep both logs in DIR).
#
# example:
#   tests/ref/compare_curves.sh configs/tiny.yaml 1500 \
#     --set data.train=tests/data/tinyshakespeare.txt.gz --set 'data.split=[0.9,0.05,0.05]' \
#     --set train.eval_interval=250
set -eu

if [ $# -lt 2 ]; then
    sed -n '2,/^set -eu/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
    exit 2
fi
cfg=$1
steps=$2
shift 2

case $cfg in /*) ;; *) cfg=$(pwd)/$cfg ;; esac
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
TXL=${TXL:-./txl}
PYTHON=${PYTHON:-/usr/bin/python3}
REF_THREADS=${REF_THREADS:-1}

if [ ! -x "$TXL" ]; then
    make >&2
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# "$@" holds the --set pairs: pass them through unchanged to both programs
echo "== txl train ($steps steps)" >&2
t0=$(date +%s)
"$TXL" train -c "$cfg" --set train.max_steps="$steps" "$@" \
    --set train.out_dir="$work/txl" --quiet >&2
t1=$(date +%s)
echo "== train_ref.py ($steps steps, $REF_THREADS threads)" >&2
"$PYTHON" tests/ref/train_ref.py "$cfg" --set train.max_steps="$steps" "$@" \
    --out "$work/ref.jsonl" --threads "$REF_THREADS" 2>"$work/ref.err" || {
    cat "$work/ref.err" >&2
    exit 1
}
t2=$(date +%s)

if [ -n "${KEEP:-}" ]; then
    mkdir -p "$KEEP"
    cp "$work/txl/log.jsonl" "$KEEP/txl.jsonl"
    cp "$work/ref.jsonl" "$KEEP/ref.jsonl"
fi

"$PYTHON" - "$work/txl/log.jsonl" "$work/ref.jsonl" $((t1 - t0)) $((t2 - t1)) <<'EOF'
import json, sys

def evals(path):
    out = {}
    for line in open(path):
        line = line.strip()
        if not line:
            continue
        r = json.loads(line)
        if r.get("event") == "eval" and r.get("split", "valid") == "valid":
            out[r["step"]] = r
    return out

a, b = evals(sys.argv[1]), evals(sys.argv[2])
print("%8s  %10s  %10s  %8s" % ("step", "txl bpc", "ref bpc", "diff"))
for s in sorted(set(a) | set(b)):
    ta = "%10.4f" % a[s]["bpc"] if s in a else "%10s" % "-"
    tb = "%10.4f" % b[s]["bpc"] if s in b else "%10s" % "-"
    d = "%+8.4f" % (a[s]["bpc"] - b[s]["bpc"]) if s in a and s in b else "%8s" % "-"
    print("%8d  %s  %s  %s" % (s, ta, tb, d))
if a and b:
    fa, fb = a[max(a)], b[max(b)]
    print("final: txl %.4f bpc (step %d, %d tokens), ref %.4f bpc (step %d, %d tokens), "
          "txl - ref = %+.4f bpc (%+.2f%%)" % (fa["bpc"], fa["step"], fa["tokens"], fb["bpc"],
          fb["step"], fb["tokens"], fa["bpc"] - fb["bpc"],
          100.0 * (fa["bpc"] - fb["bpc"]) / fb["bpc"]))
print("wall time: txl %ss, ref %ss" % (sys.argv[3], sys.argv[4]))
EOF
