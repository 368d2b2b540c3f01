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
