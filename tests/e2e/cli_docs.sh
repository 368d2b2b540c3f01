#!/bin/sh
# The docs name exactly the options of the code. The option tables are the truth
# (`txl __complete --options CMD`: one line per option, its short and long names); for every
# command they are compared with
#   - README.md's synopsis block (the ``` block of `txl train ...` lines),
#   - the man page's SYNOPSIS (.SY txl / .B CMD ... / .YS) and its COMMANDS option lists
#     (the .TP tags under .SS "txl CMD"),
#   - `txl help` (the synopsis section) and `txl help CMD` (usage lines, option list),
# both ways: a flag the docs name must be in the table, and each option of the table must be
# named (in a synopsis by one of its names, in an option list by all of them). Every command
# of the table must appear in each of them. -h/--help are everyone's and left out. The man
# page's CONFIGURATION names exactly the key table's keys.
. tests/e2e/lib.sh

# flags named in text on stdin, one per line (man escapes \- and \fX removed first)
flags() {
    sed -e 's/\\-/-/g' -e 's/\\f[BIRP]//g' -e 's/#.*//' |
        grep -o -E -- '(^|[][ |(,"])--?[a-zA-Z][a-zA-Z0-9-]*' | sed 's/^[^-]*//' |
        grep -v -x -e -h -e --help | sort -u
}

# compare WHERE CMD FILE MODE: FILE holds the flags a doc names for CMD; MODE any (a
# synopsis: each option by one of its names) or all (an option list: by every name)
compare() {
    where=$1 cmd=$2 file=$3 mode=$4
    tr ' ' '\n' < $TMP/opts.$cmd > $TMP/names
    while read -r f; do
        grep -q -x -F -e "$f" $TMP/names || bad "$where names $f, which txl $cmd does not have"
    done < $file
    while read -r line; do
        hit=0 all=1
        for n in $line; do
            if grep -q -x -F -e "$n" $file; then hit=1; else all=0; fi
        done
        if [ $hit = 0 ] || { [ $mode = all ] && [ $all = 0 ]; }; then
            bad "$where misses txl $cmd $(echo $line | sed 's/ /, /')"
        fi
    done < $TMP/opts.$cmd
    [ -s $file ] || [ ! -s $TMP/opts.$cmd ] || bad "$where: no flags found for txl $cmd"
}

$TXL __complete --commands > $TMP/commands
check "the command table lists commands" test "$(wc -l < $TMP/commands)" -ge 7
check "  ... and hides __complete" test -z "$(grep __complete $TMP/commands)"
for c in $(cat $TMP/commands); do
    $TXL __complete --options $c > $TMP/opts.$c
done
check "  ... with options (eval has a dozen)" test "$(wc -l < $TMP/opts.eval)" -ge 12

# README.md: "CMD<TAB>line" for every line of the synopsis block
awk '/^```/ { if (inb) exit; inb = 1; first = 1; next }
     inb && first { first = 0; if ($1 != "txl") inb = 0 }
     inb { if ($1 == "txl") cmd = $2; print cmd "\t" $0 }' README.md > $TMP/readme
check "README.md has a synopsis block" test -s $TMP/readme

# man page SYNOPSIS: "CMD<TAB>line" for the lines of every .SY block
awk '/^\.SH/ { syn = ($2 == "SYNOPSIS") } 
     syn && /^\.SY/ { cmd = ""; next }
     syn && /^\.YS/ { cmd = "-"; next }
     syn && cmd == "" { cmd = $2 }
     syn && cmd != "-" { print cmd "\t" $0 }' doc/txl.1 > $TMP/mansyn
check "the man page has a SYNOPSIS" test -s $TMP/mansyn
# man page COMMANDS: "CMD<TAB>tag" for the line after every .TP under .SS "txl CMD"
awk '/^\.S[HS]/ { cmd = ""; if ($1 == ".SS" && $2 == "\"txl") { cmd = $3; sub(/"$/, "", cmd) } }
     cmd != "" && tp { print cmd "\t" $0 }
     { tp = ($0 ~ /^\.TP/) }' doc/txl.1 > $TMP/manopts

# txl help: "CMD<TAB>line" for the synopsis section
$TXL help > $TMP/help.txt
awk '/^synopsis:/ { s = 1; next } s && /^$/ { exit }
     s { if ($1 == "txl") cmd = $2; print cmd "\t" $0 }' $TMP/help.txt > $TMP/helpsyn
check "txl help has a synopsis section" test -s $TMP/helpsyn

for c in $(cat $TMP/commands); do
    grep -q -E "^  $c " $TMP/help.txt || bad "txl help does not list the command $c"
    for doc in readme mansyn helpsyn; do
        grep -q "^$c	" $TMP/$doc || bad "$doc: no synopsis of txl $c"
        grep "^$c	" $TMP/$doc | cut -f2- | flags > $TMP/f.$doc.$c
    done
    compare "README.md's synopsis" $c $TMP/f.readme.$c any
    compare "the man page's SYNOPSIS" $c $TMP/f.mansyn.$c any
    compare "txl help's synopsis" $c $TMP/f.helpsyn.$c any
    [ -s $TMP/opts.$c ] || continue
    grep "^$c	" $TMP/manopts | cut -f2- | flags > $TMP/f.manopts.$c
    compare "the man page's options of txl $c" $c $TMP/f.manopts.$c all
    # txl help CMD: the usage lines (a synopsis), then the option list
    $TXL help $c > $TMP/h.$c
    check "txl help $c and txl $c --help agree" sh -c "$TXL $c --help | cmp -s - $TMP/h.$c"
    awk '/^usage:/ { u = 1 } u && /^$/ { exit } u' $TMP/h.$c | flags > $TMP/f.usage.$c
    compare "the usage of txl help $c" $c $TMP/f.usage.$c any
    awk '/^options:/ { o = 1; next } o && /^$/ { exit } o && /^  -/' $TMP/h.$c |
        sed -e 's/^  //' -e 's/  .*//' | flags > $TMP/f.help.$c  # names: up to the help column
    compare "the options of txl help $c" $c $TMP/f.help.$c all
done
ok "README.md, the man page, txl help and txl help CMD name exactly the tables' options"

# the config keys: the man page's CONFIGURATION (a key per bold word of a .TP tag, under its
# section's .SS) names exactly the key table's (txl __complete's keys for --set)
awk '/^\.SH/ { conf = ($2 == "CONFIGURATION") }
     conf && /^\.SS/ { sec = $2; gsub(/"/, "", sec) }
     conf && tp && /^\.B/ { line = $0; gsub(/"[^"]*"/, " ", line)
                            n = split(line, w, " "); for (i = 2; i <= n; i++) print sec "." w[i] }
     { tp = ($0 ~ /^\.TP/) }' doc/txl.1 | sort > $TMP/mankeys
$TXL __complete -- train --set '' | grep -v '^@' | sed 's/=$//' | sort > $TMP/keys
check "the key table has keys ($(wc -l < $TMP/keys))" test "$(wc -l < $TMP/keys)" -gt 50
check "the man page's CONFIGURATION names exactly the key table's keys$(diff $TMP/keys $TMP/mankeys | grep '^[<>]' | sed -e 's/^</; missing:/' -e 's/^>/; not a key:/' | tr '\n' ' ')" \
    cmp -s $TMP/keys $TMP/mankeys
finish
