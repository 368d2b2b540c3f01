#!/bin/sh
# make install / uninstall into a temporary DESTDIR: the binary runs --version, the man page
# renders (man -l; skipped without man) without groff warnings, the bash completion loads
# (complete -p txl) and completes; the docs cannot fall behind the code: every flag of
# `txl COMMAND --help` appears in the man page and the completion, and every config key of
# `txl train --print-config` in the man page. uninstall removes every file again.
. tests/e2e/lib.sh

D=$TMP/dest
ROOT=$PWD
P=/usr/local
# the parent make's flags and command-line variables (make asan passes BIN, BUILD, CFLAGS,
# which make also exports to the environment) do not belong to this make
clean_make() { env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL -u BIN -u BUILD -u CFLAGS -u LDFLAGS \
    -u TXL_SKIP make "$@"; }
mk() { clean_make -s -o txl "$@"; }
[ -x ./txl ] || clean_make -s txl
mk install DESTDIR=$D PREFIX=$P > $TMP/install.out 2>&1
check "make install DESTDIR=... PREFIX=$P: exit 0" test $? -eq 0
for f in bin/txl share/man/man1/txl.1 share/txl/configs/tiny.yaml \
         share/txl/configs/enwik8_base.yaml share/bash-completion/completions/txl; do
    check "installed $P/$f" test -s $D$P/$f
done
check "installed binary is executable" test -x $D$P/bin/txl
check "installed binary: --version" test "$($D$P/bin/txl --version)" = "$($TXL --version)"
check "installed configs: all of configs/" test "$(ls $D$P/share/txl/configs | wc -l)" -eq "$(ls configs/*.yaml | wc -l)"
check "an installed config loads" $D$P/bin/txl train -c $D$P/share/txl/configs/tiny.yaml \
    --set data.train=tests/data/tinyshakespeare.txt.gz --print-config

if command -v man >/dev/null 2>&1; then
    MANPAGER=cat MANWIDTH=100 man -l $D$P/share/man/man1/txl.1 > $TMP/man.txt 2>$TMP/man.err
    check "man -l renders the installed page" grep -q "txl import" $TMP/man.txt
    check "  ... with its sections" test "$(grep -c -E '^(NAME|SYNOPSIS|COMMANDS|CONFIGURATION|FILES|EXIT STATUS|EXAMPLES)$' $TMP/man.txt)" -eq 7
else
    echo "  SKIP man -l: man is not installed (apt-get install man-db)"
fi
if command -v groff >/dev/null 2>&1; then
    groff -man -Tutf8 -ww doc/txl.1 > /dev/null 2> $TMP/groff.err
    check "groff -man -ww: no warnings" test ! -s $TMP/groff.err
    [ -s $TMP/groff.err ] && head -5 $TMP/groff.err
fi

check "bash: source contrib/txl.bash; complete -p txl" \
    bash -c 'source contrib/txl.bash && complete -p txl | grep -q "_txl txl"'
check "bash: the installed completion loads" \
    bash -c "source $D$P/share/bash-completion/completions/txl && complete -p txl"
comp() { # comp WORDS...: what completing the last word offers
    bash -c 'source "$0"; COMP_WORDS=("$@"); COMP_CWORD=$(( $# - 1 )); _txl;
             echo "${COMPREPLY[*]}"' "$ROOT/contrib/txl.bash" "$@"
}
check "completion: subcommands" test "$(comp txl im)" = import
check "completion: eval flags" test "$(comp txl eval x --sweep-m)" = --sweep-mode
check "completion: --sweep-mode values" test "$(comp txl eval x --sweep-mode '')" = "memory window both"
check "completion: --split values" test "$(comp txl eval x --split '')" = "valid test train"
check "completion: -c offers YAML files" sh -c "cd configs && test \"\$(bash -c 'source ../contrib/txl.bash; COMP_WORDS=(txl train -c tiny_r); COMP_CWORD=3; _txl; echo \"\${COMPREPLY[*]}\"')\" = tiny_rope.yaml"
mkdir -p $TMP/ck/sub && touch $TMP/ck/a.safetensors.gz $TMP/ck/b.safetensors $TMP/ck/c.txt
check "completion: checkpoints (*.safetensors, *.safetensors.gz) and directories" \
    test "$(cd $TMP/ck && comp txl sample '' | tr ' ' '\n' | sort | tr '\n' ' ')" = "a.safetensors.gz b.safetensors sub "

# the docs list every flag and key the code has
for c in train eval sample info plot export import; do
    for f in $($TXL help $c | grep -o -E -- '(^|[ [,|(])--?[a-zA-Z][a-z-]*' | sed 's/^[^-]*//' | sort -u); do
        case $f in -h|--help) continue ;; esac
        grep -q -e "$(echo "$f" | sed 's/-/\\\\-/g')" doc/txl.1 || bad "man page lacks txl $c $f"
        grep -q -e " $f\\b" -e "\"$f\\b" -e "|$f)" -e "|$f|" contrib/txl.bash || bad "completion lacks txl $c $f"
    done
done
ok "every flag of txl COMMAND --help is in the man page and the completion"
$TXL train -c tests/configs/micro.yaml --print-config | awk '
    /^[a-z]+:$/ {sec = $1; sub(":", "", sec); next}
    /^  [a-z_0-9]+:/ {k = $1; sub(":", "", k); print sec "." k}' > $TMP/keys
check "config keys listed" test "$(wc -l < $TMP/keys)" -ge 40
while read -r k; do
    grep -q -E "^\.BR ${k#*.} " doc/txl.1 || grep -q -E "^\.BR [a-z0-9_]+ .*, \" ?${k#*.} " doc/txl.1 ||
        grep -q "${k#*.} \\[" doc/txl.1 || bad "man page lacks config key $k"
    grep -q -w "$k" contrib/txl.bash || bad "completion (--set) lacks config key $k"
done < $TMP/keys
ok "every config key is in the man page and the completion"

mk uninstall DESTDIR=$D PREFIX=$P > $TMP/uninstall.out 2>&1
check "make uninstall: exit 0" test $? -eq 0
check "uninstall removes every file" test -z "$(find $D -type f)"
check "uninstall removes share/txl" test ! -e $D$P/share/txl
finish
