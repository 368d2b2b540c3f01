# bash completion for txl(1). Installed by `make install` as
# $(PREFIX)/share/bash-completion/completions/txl; or: source contrib/txl.bash
#
# Completes the subcommands, each subcommand's flags, YAML configs after -c, checkpoints
# (*.safetensors, *.safetensors.gz) where a checkpoint goes, run directories for plot,
# and the values of --split, --sweep-mode and --set keys.

_txl_ckpts() {
    # checkpoints and directories (to walk into runs/NAME/)
    local IFS=$'\n'
    compopt -o filenames 2>/dev/null
    COMPREPLY+=($(compgen -f -X '!*.@(safetensors|safetensors.gz)' -- "$cur"))
    COMPREPLY+=($(compgen -d -- "$cur"))
}

_txl_files() { # _txl_files GLOB: files matching GLOB, and directories
    local IFS=$'\n'
    compopt -o filenames 2>/dev/null
    COMPREPLY+=($(compgen -f -X "!$1" -- "$cur"))
    COMPREPLY+=($(compgen -d -- "$cur"))
}

_txl_config_keys() {
    echo model.n_layer model.d_model model.n_head model.d_head model.d_inner model.tgt_len \
        model.mem_len model.pre_lnorm model.dropout model.dropatt model.pos_scheme \
        model.clamp_len model.untie_r model.mlp_num_freqs model.mlp_max_dist model.mlp_hidden \
        data.train data.valid data.test data.split data.tokenizer \
        train.batch_size train.max_steps train.max_minutes train.lr train.schedule \
        train.warmup_steps train.lr_min train.clip train.skip_outlier train.beta1 train.beta2 train.eps \
        train.weight_decay train.optimizer train.seed train.log_interval train.eval_interval \
        train.eval_tokens train.ckpt_interval train.ckpt_gzip train.out_dir train.threads
}

_txl_main() {
    local cur prev words cword
    if declare -F _init_completion >/dev/null 2>&1; then
        _init_completion -n = || return
    else
        cur=${COMP_WORDS[COMP_CWORD]}
        prev=${COMP_WORDS[COMP_CWORD-1]}
        words=("${COMP_WORDS[@]}")
        cword=$COMP_CWORD
    fi
    COMPREPLY=()

    local commands="train eval sample info plot export import help"
    if [[ $cword -eq 1 ]]; then
        COMPREPLY=($(compgen -W "$commands --version --help" -- "$cur"))
        return
    fi
    local cmd=${words[1]}

    # values of the flag before the cursor
    case "$prev" in
        -c|--config)
            _txl_files '*.@(yaml|yml)'; return ;;
        --resume|--init-from)
            _txl_ckpts; return ;;
        --split)
            COMPREPLY=($(compgen -W "valid test train" -- "$cur")); return ;;
        --sweep-mode)
            COMPREPLY=($(compgen -W "memory window both" -- "$cur")); return ;;
        --sweep)
            if [[ $cmd == eval ]]; then
                COMPREPLY=($(compgen -W "1,2,4,8 1,2,4,8,16" -- "$cur")); return
            fi ;;
        --set)
            local keys
            keys=$(_txl_config_keys)
            case "$cur" in
                model.pos_scheme=*)
                    COMPREPLY=($(compgen -P model.pos_scheme= -W "xl mlp rope alibi absolute none" -- "${cur#*=}")) ;;
                train.schedule=*)
                    COMPREPLY=($(compgen -P train.schedule= -W "constant cosine inv_sqrt" -- "${cur#*=}")) ;;
                train.optimizer=*)
                    COMPREPLY=($(compgen -P train.optimizer= -W "adam adamw" -- "${cur#*=}")) ;;
                data.train=*|data.valid=*|data.test=*)
                    local k=${cur%%=*}
                    COMPREPLY=($(compgen -P "$k=" -f -- "${cur#*=}")) ;;
                *)
                    COMPREPLY=($(compgen -S = -W "$keys" -- "$cur"))
                    compopt -o nospace 2>/dev/null ;;
            esac
            return ;;
        --data|--prompt-file)
            local IFS=$'\n'
            compopt -o filenames 2>/dev/null
            COMPREPLY=($(compgen -f -- "$cur")); return ;;
        -o|--output)
            case "$cmd" in
                plot) _txl_files '*.@(png|svg)' ;;
                *) _txl_files '*.@(safetensors|safetensors.gz)' ;;
            esac
            return ;;
        --tgt-len|--mem-len|--clamp-len|--batch|--max-tokens|--threads|--steps|-n|--tokens|\
        -t|--temperature|--top-k|--top-p|--seed|--title|--size|--ymax|-p|--prompt)
            return ;; # a value of the user's
    esac

    local flags
    case "$cmd" in
        train)  flags="-c --config --set --resume --init-from --steps --print-config --force
                       -q --quiet --help" ;;
        eval)   flags="--data --split --tgt-len --mem-len --clamp-len --batch --warmup
                       --max-tokens --sweep --sweep-mode --term-stats --json --threads
                       -q --quiet --help" ;;
        sample) flags="-p --prompt --prompt-file -n --tokens -t --temperature --top-k --top-p
                       --seed --mem-len --echo --stats --threads -q --quiet --help" ;;
        info)   flags="--json --system --help" ;;
        plot)   flags="-o --output --sweep --title --size --logx --no-logx --ymax --script
                       -q --quiet --help" ;;
        export) flags="-o --output -q --quiet --help" ;;
        import) flags="-c --config -o --output --set -q --quiet --help" ;;
        help)   COMPREPLY=($(compgen -W "$commands" -- "$cur")); return ;;
        *)      return ;;
    esac
    if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$flags" -- "$cur"))
        return
    fi
    # positional arguments
    case "$cmd" in
        eval|sample|info|export) _txl_ckpts ;;
        import) _txl_files '*.@(safetensors|safetensors.gz)' ;;
        plot)
            local w sweep=0
            for w in "${words[@]}"; do [[ $w == --sweep ]] && sweep=1; done
            if [[ $sweep == 1 ]]; then
                _txl_files '*.@(jsonl|json)'
            else # run directories (holding log.jsonl)
                local IFS=$'\n'
                compopt -o filenames 2>/dev/null
                COMPREPLY=($(compgen -d -- "$cur"))
            fi ;;
    esac
}
# the file patterns need extglob; the user's setting is restored afterwards
_txl() {
    local had_extglob=0
    shopt -q extglob && had_extglob=1
    shopt -s extglob
    _txl_main
    [[ $had_extglob == 1 ]] || shopt -u extglob
}
complete -F _txl txl
