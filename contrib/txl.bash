# bash completion for txl(1). Installed by `make install` as
# $(PREFIX)/share/bash-completion/completions/txl; or: source contrib/txl.bash
#
# The candidates come from the binary itself (`txl __complete -- WORDS...`, built from its
# command and option tables and the config keys), so the completion knows exactly the
# commands, flags, values of --split/--sweep-mode/..., --set keys and their values of the
# txl being completed: ./txl in a source tree completes that build. File names (configs
# after -c, checkpoints, run directories) are completed here, with the pattern txl names;
# after -c (and `txl train CONFIG`) the binary adds the names of its installed configs
# (PREFIX/share/txl/configs), which it finds by bare name from any directory.
#
# Registered for `txl` and `./txl`; a command word ending in /txl (build-asan/txl,
# ~/bin/txl) is registered the first time it is completed, through bash's default handler.

# the command line up to the cursor, with "a" "=" "b" joined back into "a=b" when '=' breaks
# words (COMP_WORDBREAKS): txl's values come as --opt=value and key=value
_txl_words() {
    local i w
    _txl_w=()
    for ((i = 0; i <= COMP_CWORD; i++)); do
        w=${COMP_WORDS[i]}
        if ((${#_txl_w[@]} > 1)) && [[ $COMP_WORDBREAKS == *=* ]] &&
            [[ $w == = || ${_txl_w[-1]} == *= ]]; then
            _txl_w[-1]+=$w
        else
            _txl_w+=("$w")
        fi
    done
}

_txl_main() {
    local -a _txl_w
    _txl_words
    local bin=${_txl_w[0]} cur=${_txl_w[-1]} line prefix= glob= dirs= nospace= f
    [[ $bin == "~/"* ]] && bin=$HOME/${bin#"~/"}
    COMPREPLY=()
    local out
    out=$("$bin" __complete -- "${_txl_w[@]:1}" 2>/dev/null) || return
    while IFS= read -r line; do
        case $line in
            "") ;;
            "@prefix "*) prefix=${line#@prefix } ;;
            "@files "*) glob=${line#@files } ;;
            @dirs) dirs=1 ;;
            @nospace) nospace=1 ;;
            *) COMPREPLY+=("$line") ;;
        esac
    done <<< "$out"
    if [[ -n $glob || -n $dirs ]]; then # file names after the prefix (--config=, data.train=)
        local val=${cur#"$prefix"} IFS=$'\n'
        compopt -o filenames 2>/dev/null
        if [[ -n $glob ]]; then
            for f in $(compgen -f -X "!$glob" -- "$val"); do COMPREPLY+=("$prefix$f"); done
        fi
        for f in $(compgen -d -- "$val"); do COMPREPLY+=("$prefix$f"); done
    fi
    [[ -n $nospace ]] && compopt -o nospace 2>/dev/null
    # readline replaces only the part of the word after the last '=' when '=' breaks words
    if [[ $COMP_WORDBREAKS == *=* && $cur == *=* ]]; then
        local head=${cur%"${cur##*=}"} i
        for i in "${!COMPREPLY[@]}"; do COMPREPLY[i]=${COMPREPLY[i]#"$head"}; done
    fi
}

# the file patterns need extglob; the user's setting is restored afterwards
_txl() {
    local had_extglob=0
    shopt -q extglob && had_extglob=1
    shopt -s extglob
    _txl_main
    [[ $had_extglob == 1 ]] || shopt -u extglob
}
complete -F _txl txl ./txl

# Any other command word ending in /txl: bash has no patterns for `complete`, so a default
# handler (complete -D) registers _txl for that word and returns 124, which makes bash
# retry with it; other words go on to the default handler this one replaces (e.g.
# bash-completion's loader), or get bash's default completion.
_txl_prev_default=${_txl_prev_default-} # kept when this file is sourced again
_txl_default() {
    if [[ $1 == */txl ]]; then
        complete -F _txl -- "$1"
        return 124
    fi
    [[ -n $_txl_prev_default ]] && { "$_txl_prev_default" "$@"; return; }
    return 1
}
if complete -p -D >/dev/null 2>&1; then
    _txl_spec=$(complete -p -D)
    if [[ $_txl_spec != *" -F _txl_default "* && $_txl_spec == *" -F "* ]]; then
        _txl_prev_default=${_txl_spec#* -F }
        _txl_prev_default=${_txl_prev_default%% *}
        eval "${_txl_spec/ -F $_txl_prev_default / -F _txl_default }"
    fi
    unset _txl_spec
else
    complete -D -o bashdefault -o default -F _txl_default 2>/dev/null
fi
