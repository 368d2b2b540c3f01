#!/bin/sh
# make install / uninstall into a temporary DESTDIR: the binary runs --version, the man page
# renders (man -l; skipped without man) without groff warnings, the bash completion loads
# (complete -p txl) and completes (from `txl __complete`: commands, flags, choice values,
# --set keys and values, files, for txl, ./txl and any path ending in /txl); the docs cannot
# fall behind the code: every flag of each command's table appears in the man page and the
# completion, and every config key of `txl train --print-config` in the man page and the
# --set completion. uninstall removes every file again.
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
# library.sh runs make install too, maybe at the same time: one make in the tree at a time
flock $ROOT/.make.lock env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL -u BIN -u BUILD -u CFLAGS \
    -u LDFLAGS -u TXL_SKIP make -s -o txl install DESTDIR=$D PREFIX=$P > $TMP/install.out 2>&1
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

# bare config names, from another directory: the working directory first, then the installed
# configs (next to the binary: PREFIX/bin/../share/txl/configs; or the PREFIX compiled in)
CD=$(cd $D$P/share/txl/configs && pwd -P)
mkdir -p $TMP/elsewhere
I=$D$P/bin/txl
SHAKE=$ROOT/tests/data/tinyshakespeare.txt.gz
inst() { (cd $TMP/elsewhere && "$I" "$@"); }
inst train -c tiny.yaml --set data.train=$SHAKE --print-config > $TMP/c.yaml 2> $TMP/c.err
check "elsewhere: train -c tiny.yaml takes the installed config (exit $?)" \
    grep -q "^  out_dir: \"runs/tiny\"$" $TMP/c.yaml
check "  ... and says which file: $(head -1 $TMP/c.err)" \
    grep -q -x -F "txl train: using the installed config $CD/tiny.yaml" $TMP/c.err
check "elsewhere: train tiny_rope.yaml (positional)" sh -c "cd $TMP/elsewhere &&
    $I train tiny_rope.yaml --set data.train=$SHAKE --print-config -q | grep -q 'pos_scheme: rope'"
check "elsewhere: train -c tiny_alibi (no .yaml)" sh -c "cd $TMP/elsewhere &&
    $I train -c tiny_alibi --set data.train=$SHAKE --print-config -q | grep -q 'pos_scheme: alibi'"
check "elsewhere: -q says nothing" sh -c "cd $TMP/elsewhere &&
    $I train -c tiny --set data.train=$SHAKE --print-config -q 2>&1 >/dev/null | wc -c | grep -q -x 0"
inst train -c tiny.yaml --set data.train=$SHAKE --set train.out_dir=$TMP/elsewhere/run \
    --set train.max_steps=2 --set train.warmup_steps=1 --set train.eval_tokens=1000 \
    --set train.threads=1 -q > /dev/null 2> $TMP/t.err
check "elsewhere: train -c tiny.yaml trains ($(head -c 200 $TMP/t.err))" test -s $TMP/elsewhere/run/last.safetensors.gz
sed 's/n_layer: 4/n_layer: 1/' configs/tiny.yaml > $TMP/elsewhere/tiny.yaml
inst train -c tiny.yaml --set data.train=$SHAKE --print-config > $TMP/c.yaml 2> $TMP/c.err
check "a tiny.yaml in the working directory comes first" grep -q "^  n_layer: 1$" $TMP/c.yaml
check "  ... without a word" test ! -s $TMP/c.err
rm $TMP/elsewhere/tiny.yaml
inst train -c nothere.yaml > /dev/null 2> $TMP/n.err
rc=$?
check "an unknown bare name: exit 2 ($rc)" test $rc -eq 2
check "  ... naming where it looked and what is installed: $(head -c 300 $TMP/n.err)" \
    grep -q -F "nothere.yaml: no such config in the working directory or in $CD (installed: " $TMP/n.err
check "  ... among them tiny.yaml" grep -q "tiny.yaml" $TMP/n.err
inst import nothere.safetensors -c tiny -o $TMP/x.safetensors.gz > /dev/null 2> $TMP/i.err
check "import -c tiny: the installed config, then the weights are missing: $(tail -1 $TMP/i.err | head -c 200)" \
    sh -c "grep -q 'using the installed config $CD/tiny.yaml' $TMP/i.err && grep -q nothere.safetensors $TMP/i.err"
check "info --system names the installed configs" \
    sh -c "$I info --system --json | jq -e --arg d '$CD' '.configs | index(\$d) != null'"
# a copy of the binary away from its tree falls back on the PREFIX compiled in (this build's:
# the default /usr/local, unless installed there for real)
mkdir -p $TMP/lone && cp $I $TMP/lone/txl
if [ ! -d $P/share/txl/configs ]; then
    (cd $TMP/elsewhere && $TMP/lone/txl train -c tiny.yaml) > /dev/null 2> $TMP/l.err
    check "a lone binary: the compiled-in $P/share/txl/configs: $(head -c 200 $TMP/l.err)" \
        grep -q -F "(none in $P/share/txl/configs)" $TMP/l.err
fi
# the Makefile writes PREFIX into the header cmd/cli.c includes, and only when it changes
clean_make -s BUILD=$TMP/b PREFIX=/opt/txl-test $TMP/b/txl_paths.h
check "make PREFIX=/opt/txl-test: TXL_CONFIG_DIR /opt/txl-test/share/txl/configs" \
    grep -q -x -F '#define TXL_CONFIG_DIR "/opt/txl-test/share/txl/configs"' $TMP/b/txl_paths.h
touch -d @1000000000 $TMP/b/txl_paths.h
clean_make -s BUILD=$TMP/b PREFIX=/opt/txl-test $TMP/b/txl_paths.h
check "  ... the same PREFIX again: the header is not rewritten (nothing to rebuild)" \
    test "$(stat -c %Y $TMP/b/txl_paths.h)" = 1000000000

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
# the completion asks the binary of the command word: `txl` on PATH (this build's directory),
# or a path to it
case $TXL in /*) TXLABS=$TXL ;; *) TXLABS=$ROOT/$TXL ;; esac
mkdir -p $TMP/bin && ln -sf "$TXLABS" $TMP/bin/txl
comp() { # comp WORDS...: what completing the last word offers
    PATH=$TMP/bin:$PATH bash -c 'source "$0"; COMP_WORDS=("$@"); COMP_CWORD=$(( $# - 1 )); _txl;
             printf "%s\n" "${COMPREPLY[*]}"' "$ROOT/contrib/txl.bash" "$@"
}
check "completion: subcommands" test "$(comp txl im)" = import
check "completion: eval flags" test "$(comp txl eval x --sweep-m)" = --sweep-mode
check "completion: --sweep-mode values" test "$(comp txl eval x --sweep-mode '')" = "memory window both"
check "completion: --split values" test "$(comp txl eval x --split '')" = "valid test train"
check "completion: --split=t (readline replaces the part after '=')" \
    test "$(comp txl eval x --split=t)" = "test train"
check "completion: --set keys" test "$(comp txl train --set model.pos)" = "model.pos_scheme="
check "completion: --set model.pos_scheme= values: the registry's schemes" \
    test "$(comp txl train --set model.pos_scheme=)" = "$(schemes | tr '\n' ' ' | sed 's/ $//')"
check "completion: --set, bash splitting at '='" \
    test "$(comp txl import w --set train.optimizer = adam)" = "adam adamw"
check "completion: a flag after a flag's value" test "$(comp txl sample x -p --top --top-)" = "--top-k --top-p"
check "completion: -c offers YAML files" \
    test "$(cd configs && comp txl train -c tiny_r)" = tiny_rope.yaml
check "completion: --config= offers YAML files" \
    test "$(cd configs && comp txl train --config=tiny_ro)" = tiny_rope.yaml
# the installed binary offers its installed configs' names, from any directory
check "completion: -c offers the installed configs" \
    test "$(cd $TMP/elsewhere && comp "$I" train -c tiny_r)" = tiny_rope.yaml
check "completion: -c '' offers all of them" \
    test "$(cd $TMP/elsewhere && comp "$I" train -c '' | tr ' ' '\n' | grep -c yaml)" -eq "$(ls configs/*.yaml | wc -l)"
check "completion: train CONFIG (positional) offers them too" \
    test "$(cd $TMP/elsewhere && comp "$I" train enwik8_ba)" = enwik8_base.yaml
check "completion: ... every config the prefix matches" \
    test "$(cd $TMP/elsewhere && comp "$I" train enwik | tr ' ' '\n' | sort | tr '\n' ' ')" = "$(cd configs && ls enwik*.yaml | sort | tr '\n' ' ')"
check "completion: import -c offers them" \
    test "$(cd $TMP/elsewhere && comp "$I" import w -c tiny_no)" = tiny_none.yaml
mkdir -p $TMP/ck/sub && touch $TMP/ck/a.safetensors.gz $TMP/ck/b.safetensors $TMP/ck/c.txt \
    $TMP/ck/s.jsonl
check "completion: checkpoints (*.safetensors, *.safetensors.gz) and directories" \
    test "$(cd $TMP/ck && comp txl sample '' | tr ' ' '\n' | sort | tr '\n' ' ')" = "a.safetensors.gz b.safetensors sub "
check "completion: plot takes run directories" test "$(cd $TMP/ck && comp txl plot '')" = sub
check "completion: plot --sweep takes .jsonl files" \
    test "$(cd $TMP/ck && comp txl plot --sweep '' | tr ' ' '\n' | sort | tr '\n' ' ')" = "s.jsonl sub "
check "completion: the binary of the command word (a path)" test "$(comp "$TXLABS" expo)" = export
check "completion: registered for txl and ./txl" \
    bash -c 'source contrib/txl.bash && complete -p ./txl | grep -q "_txl ./txl"'
check "completion: a path ending in /txl gets _txl on first use (bash retries on 124)" \
    bash -c 'source contrib/txl.bash; _txl_default build-asan/txl; [ $? = 124 ] &&
             complete -p build-asan/txl | grep -q "F _txl "'
check "completion: other commands go on to the default handler it replaced" \
    bash -c 'f() { echo "prev $1"; return 124; }; complete -D -F f; source contrib/txl.bash;
             complete -p -D | grep -q _txl_default && test "$(_txl_default ls)" = "prev ls" &&
             source contrib/txl.bash && complete -p -D | grep -q _txl_default &&
             test "$(_txl_default ls)" = "prev ls"'

# the docs list every flag and key the code has (tests/e2e/cli_docs.sh checks the synopses
# and the man page's option lists both ways)
for c in $($TXL __complete --commands); do
    for f in $($TXL __complete --options $c); do
        grep -q -e "$(echo "$f" | sed 's/-/\\\\-/g')" doc/txl.1 || bad "man page lacks txl $c $f"
        comp txl $c "$f" | tr ' ' '\n' | grep -q -x -e "$f" || bad "completion lacks txl $c $f"
    done
done
ok "every flag of every command's table is in the man page and the completion"
$TXL train -c tests/configs/micro.yaml --print-config | awk '
    /^[a-z]+:$/ {sec = $1; sub(":", "", sec); next}
    /^  [a-z_0-9]+:/ {k = $1; sub(":", "", k); print sec "." k}' > $TMP/keys
check "config keys listed" test "$(wc -l < $TMP/keys)" -ge 40
SETKEYS=$(comp txl train --set '')
while read -r k; do
    grep -q -E "^\.BR ${k#*.} " doc/txl.1 || grep -q -E "^\.BR [a-z0-9_]+ .*, \" ?${k#*.} " doc/txl.1 ||
        grep -q "${k#*.} \\[" doc/txl.1 || bad "man page lacks config key $k"
    echo "$SETKEYS" | tr ' ' '\n' | grep -q -x -e "$k=" || bad "completion (--set) lacks config key $k"
done < $TMP/keys
ok "every config key is in the man page and the completion"

mk uninstall DESTDIR=$D PREFIX=$P > $TMP/uninstall.out 2>&1
check "make uninstall: exit 0" test $? -eq 0
check "uninstall removes every file" test -z "$(find $D -type f)"
check "uninstall removes share/txl" test ! -e $D$P/share/txl
finish
