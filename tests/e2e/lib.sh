# lib.sh: helpers for the end-to-end scripts (sourced). They run the real binary.
TXL=${TXL_BIN:-./txl}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/txl-e2e.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
fails=0
ok()   { echo "  ok   $*"; }
bad()  { echo "  FAIL $*"; fails=$((fails+1)); }
check() { # check "description" command...   (the command's output is discarded)
    d=$1; shift
    if "$@" >/dev/null 2>&1; then ok "$d"; else bad "$d"; fi
}
check_not() { # check_not "description" command...: passes when the command fails
    d=$1; shift
    if "$@" >/dev/null 2>&1; then bad "$d"; else ok "$d"; fi
}
# schemes: every positional scheme txl knows, from its own registry (the completion's list of
# model.pos_scheme values), so a new scheme is tested without editing the scripts
schemes() { $TXL __complete -- train --set model.pos_scheme= | sed -n 's/^model\.pos_scheme=//p'; }
finish() { echo "$(basename "$0"): $fails failed"; [ "$fails" -eq 0 ]; }
# step_losses LOG: "step loss" per training step (log_interval 1)
step_losses() { jq -r 'select(.event=="train") | "\(.step) \(.step_loss)"' "$1"; }
# wait_trained LOG N: waits (up to 30 s) until LOG holds N train events
wait_trained() {
    _i=0
    while [ $_i -lt 600 ]; do
        _n=$(grep -c '"event":"train"' "$1" 2>/dev/null)
        [ "${_n:-0}" -ge "$2" ] && return 0
        sleep 0.05; _i=$((_i + 1))
    done
    return 1
}
# svg_text SVG: what a reader of a gnuplot SVG sees written (titles, axis labels, legend
# entries, the color bar's label, tic and cell labels), one text per line, each prefixed with
# its fill color and a tab: "rgb(34,34,34)<TAB>layer 0"
svg_text() {
    awk '/fill="rgb\(/ { f = $0; sub(/.*fill="/, "", f); sub(/".*/, "", f) }
         /<text[^>]*>.*<\/text>/ { t = $0; sub(/.*<text[^>]*>/, "", t); sub(/<\/text>.*/, "", t)
             gsub(/<[^>]*>/, "", t); gsub(/&lt;/, "<", t); gsub(/&gt;/, ">", t)
             gsub(/&apos;/, "\047", t); gsub(/&quot;/, "\"", t); gsub(/&amp;/, "\\&", t)
             sub(/^ +/, "", t); print f "\t" t }' "$1"
}
# svg_has SVG TEXT: TEXT is one of the SVG's texts, whole
svg_has() { svg_text "$1" | cut -f 2- | grep -q -x -F -e "$2"; }
# svg_y SVG TEXT: the y coordinate (pixels from the top) of the first text TEXT, whole
svg_y() {
    awk -v want="$2" '/translate\(/ { y = $0; sub(/.*translate\([^,]*,/, "", y); sub(/\).*/, "", y) }
        /<text[^>]*>.*<\/text>/ { t = $0; sub(/.*<text[^>]*>/, "", t); sub(/<\/text>.*/, "", t)
            if (t == want) { print y; exit } }' "$1"
}
