# bash completion for watt(1)                                -*- shell-script -*-
#
# Verbs, each verb's options and their values, fleet sub-verbs, profile
# names (asked of the binary: `watt tune --list --json`, honouring
# --config-dir) and host names (the [host NAME] sections of the fleet.ini
# given with --config). The option lists are checked against each verb's
# --help by tests/cli/test_man_completion.py.

# The profile names of `watt tune --list --json`: one "name" member a line.
_watt_profiles()
{
    local confdir=$1
    local -a args=(tune --list --json)
    [[ -n $confdir ]] && args+=(--config-dir "$confdir")
    "$_watt_bin" "${args[@]}" 2>/dev/null |
        sed -n 's/^[[:space:]]*"name":[[:space:]]*"\([^"\\]*\)".*/\1/p'
}

# The [host NAME] sections of a fleet.ini.
_watt_fleet_hosts()
{
    local file=$1
    [[ -r $file ]] || return 0
    sed -n 's/^[[:space:]]*\[[[:space:]]*host[[:space:]]\{1,\}\([^][:space:]]\{1,\}\)[[:space:]]*\].*/\1/p' \
        -- "$file" 2>/dev/null
}

# The value of OPTION (as "--opt VALUE" or "--opt=VALUE") on the line so far.
_watt_opt_value()
{
    local opt=$1 i
    for ((i = 1; i < cword; i++)); do
        if [[ ${words[i]} == "$opt" ]]; then
            printf '%s\n' "${words[i + 1]}"
            return
        elif [[ ${words[i]} == "$opt"=* ]]; then
            printf '%s\n' "${words[i]#*=}"
            return
        fi
    done
}

_watt()
{
    local cur prev words cword split
    _init_completion -s || return
    local _watt_bin=${words[0]}
    [[ $_watt_bin == */* ]] || _watt_bin=$(type -P "$_watt_bin") || _watt_bin=watt

    local verbs="report top snapshot fleet agent ctl tune restore model"
    local fleet_verbs="sim compare run plan check host approve"
    local models="specpower-2023 vm-vcpu seed-2011 fitted"

    # the verb, and for fleet its sub-verb
    local verb="" sub="" sub_i=0 i
    for ((i = 1; i < cword; i++)); do
        if [[ -z $verb && ${words[i]} != -* ]]; then
            verb=${words[i]}
        elif [[ $verb == fleet && -z $sub && ${words[i]} != -* ]]; then
            sub=${words[i]}
            sub_i=$i
            break
        fi
    done

    if [[ -z $verb ]]; then
        if [[ $cur == -* ]]; then
            COMPREPLY=($(compgen -W '--help --version' -- "$cur"))
        else
            COMPREPLY=($(compgen -W "$verbs help" -- "$cur"))
        fi
        return
    fi

    # values of the options that take one
    case $prev in
        -c)
            # agent, fleet: --config FILE; report, tune, restore: --config-dir DIR
            if [[ $verb == agent || $verb == fleet ]]; then _filedir; else _filedir -d; fi
            return
            ;;
        --root | -r | --config-dir)
            _filedir -d
            return
            ;;
        --model | -m)
            COMPREPLY=($(compgen -W "$models" -- "$cur"))
            _filedir ini
            return
            ;;
        --sort)
            COMPREPLY=($(compgen -W 'wakeups power cpu idle gpu' -- "$cur"))
            return
            ;;
        --view)
            COMPREPLY=($(compgen -W 'processes cgroups sources cstates devices' -- "$cur"))
            return
            ;;
        --wakeups)
            COMPREPLY=($(compgen -W 'auto bpf trace proc' -- "$cur"))
            return
            ;;
        --owner)
            COMPREPLY=($(compgen -W 'cli agent' -- "$cur"))
            return
            ;;
        --compat)
            COMPREPLY=($(compgen -W 'cloudsim' -- "$cur"))
            return
            ;;
        --policy)
            COMPREPLY=($(compgen -W 'watt npa dvfs thr-mmt-1.0 thr-mmt-0.8 iqr-mmt-1.5
                mad-mmt-2.5 lr-mmt-1.2 lrr-mmt-1.2' -- "$cur"))
            return
            ;;
        --hosts)
            COMPREPLY=($(compgen -W 'cloudsim 400xg4,400xg5,alternate' -- "$cur"))
            _filedir ini
            return
            ;;
        --show | --profile)
            COMPREPLY=($(compgen -W "$(_watt_profiles "$(_watt_opt_value --config-dir)")" -- "$cur"))
            return
            ;;
        --socket | --control)
            _filedir sock
            return
            ;;
        --html)
            _filedir html
            return
            ;;
        --plot)
            _filedir svg
            return
            ;;
        --csv)
            _filedir csv
            return
            ;;
        --output | -o | --config | --journal | --metrics | --constraints | --trace | \
            --bmc-password-file)
            _filedir
            return
            ;;
        --interval | -i | --pue | --limit | --listen | --synthetic | --seed | --jobs | --bmc | \
            --bmc-user | \
            --boot-s | --boot-j | --off-w | --max-migrations | --policies | --ticks | --sample)
            return # a number or an address: nothing to offer
            ;;
    esac
    [[ $split == true ]] && return

    local opts=""
    case $verb in
        report)
            opts="--interval --json --html --root --per-cpu --model --pue --config-dir --bmc
                --bmc-user --bmc-password-file --help"
            ;;
        top)
            opts="--interval --once --json --sort --limit --view --wakeups --no-trace --model
                --config-dir --root --bmc --bmc-user --bmc-password-file --help"
            ;;
        snapshot)
            opts="--output --root --help"
            ;;
        agent)
            opts="--config --listen --interval --root --control --profile --help"
            ;;
        ctl)
            opts="--socket --help"
            if [[ $cur != -* ]]; then
                COMPREPLY=($(compgen -W 'status reload sample' -- "$cur"))
                return
            fi
            ;;
        tune)
            opts="--dry-run --verbose --verify --workload --status --list --show --recommend --root
                --config-dir --journal --json --help"
            if [[ $cur != -* ]]; then
                COMPREPLY=($(compgen -W "$(_watt_profiles "$(_watt_opt_value --config-dir)")" -- "$cur"))
                return
            fi
            ;;
        restore)
            opts="--dry-run --force --owner --root --journal --json --help"
            ;;
        model)
            if [[ $cur != -* && ${words[cword-1]} == model ]]; then
                COMPREPLY=($(compgen -W "fit" -- "$cur"))
                return
            fi
            opts="--json --output --pue --help"
            ;;
        fleet)
            if [[ -z $sub ]]; then
                if [[ $cur == -* ]]; then
                    COMPREPLY=($(compgen -W '--help' -- "$cur"))
                else
                    COMPREPLY=($(compgen -W "$fleet_verbs" -- "$cur"))
                fi
                return
            fi
            case $sub in
                sim | compare)
                    opts="--trace --synthetic --policy --policies --compat --hosts --boot-s
                        --boot-j --off-w --max-migrations --hard-ram --constraints --seed --jobs
                        --json --markdown --csv --plot --quiet --help"
                    ;;
                run) opts="--config --dry-run --once --ticks --json --metrics --help" ;;
                plan) opts="--config --json --sample --help" ;;
                check) opts="--config --help" ;;
                host | approve) opts="--config --json --help" ;;
            esac
            if [[ $cur != -* && ($sub == host || $sub == approve) ]]; then
                # the words after the sub-verb that are not options or their values
                local -a args=()
                for ((i = sub_i + 1; i < cword; i++)); do
                    [[ ${words[i]} == -* ]] && continue
                    [[ ${words[i - 1]} == --config || ${words[i - 1]} == -c ]] && continue
                    args+=("${words[i]}")
                done
                local config
                config=$(_watt_opt_value --config)
                [[ -n $config ]] || config=$(_watt_opt_value -c)
                if [[ $sub == approve ]]; then
                    COMPREPLY=($(compgen -W 'all' -- "$cur"))
                elif ((${#args[@]} == 0)); then
                    COMPREPLY=($(compgen -W "$(_watt_fleet_hosts "$config")" -- "$cur"))
                elif ((${#args[@]} == 1)); then
                    COMPREPLY=($(compgen -W 'status on off list maintenance' -- "$cur"))
                elif [[ ${args[1]} == maintenance && ${#args[@]} == 2 ]]; then
                    COMPREPLY=($(compgen -W 'on off' -- "$cur"))
                fi
                return
            fi
            ;;
        *)
            return
            ;;
    esac
    if [[ $cur == -* || -z $cur ]]; then
        COMPREPLY=($(compgen -W "$opts" -- "$cur"))
        [[ ${COMPREPLY-} == *= ]] && compopt -o nospace
    fi
} &&
    complete -F _watt watt

# ex: filetype=sh
