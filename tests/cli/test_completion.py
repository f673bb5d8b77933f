#!/usr/bin/env python3
"""The shell completions, driven for real. bash: completions/watt.bash
sourced after bash-completion, COMP_WORDS/COMP_CWORD set, _watt called,
COMPREPLY read: the verbs, each verb's options (every option its --help
lists: a drift check), fleet's sub-verbs, the profile names the binary
lists (a user profile of a fixture --config-dir included) and the host
names of a fixture fleet.ini. zsh: `zsh -n`, then the same questions asked
of completions/_watt in an interactive zsh on a pseudo-terminal (zpty)."""
import os
import shlex
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checks import check, failures  # noqa: E402
import helpopts  # noqa: E402

WATT = os.environ["WATT"]
SRC = os.environ["WATT_SRCDIR"]
BASH_COMP = os.path.join(SRC, "completions", "watt.bash")
ZSH_DIR = os.path.join(SRC, "completions")
BASH_COMPLETION = "/usr/share/bash-completion/bash_completion"

FLEET_INI = """\
[controller]
interval_s = 300
vm_engine = libvirt
power = none

[host rack1-a]
type = g4
uri = qemu:///system

[host  rack1-b ]   ; a comment
type = g5
uri = qemu:///system
"""


def bash_complete(cases):
    """COMPREPLY for each list of words (the last one being completed), as
    a list of sets, from one bash."""
    script = [f"source {shlex.quote(BASH_COMPLETION)}", f"source {shlex.quote(BASH_COMP)}"]
    for words in cases:
        arr = " ".join(shlex.quote(w) for w in words)
        line = " ".join(words)
        script.append(f"COMP_WORDS=({arr}); COMP_CWORD={len(words) - 1}; "
                      f"COMP_LINE={shlex.quote(line)}; COMP_POINT={len(line)}; COMPREPLY=(); "
                      "_watt; printf '%s\\n' \"${COMPREPLY[*]}\"")
    p = subprocess.run(["bash", "--norc", "--noprofile", "-c", "\n".join(script)],
                       capture_output=True, text=True, timeout=120)
    if p.returncode != 0 or p.stderr.strip():
        print(f"FAIL bash: rc {p.returncode}: {p.stderr.strip()[:800]}")
        failures.append("bash ran the completion")
    lines = p.stdout.split("\n")
    return [set(lines[i].split()) if i < len(lines) else set() for i in range(len(cases))]


ZPTY_SCRIPT = r"""
# zsh -f zpty.zsh COMPDIR BINDIR OUT LINE...: OUT.N gets the matches of LINE N
zmodload zsh/zpty || exit 77
compdir=$1 bindir=$2 out=$3; shift 3
zpty z zsh -f -i
# no listing (a long list asks 'do you wish to see all?' and eats the keys
# that follow), no menu: the matches are captured from compadd
zpty -w z "stty rows 100 cols 200; unsetopt auto_list auto_menu list_ambiguous list_beep beep"
zpty -w z "PS1='' PROMPT='' RPROMPT=''; PATH=${(q)bindir}:\$PATH; fpath=(${(q)compdir} \$fpath); autoload -Uz compinit; compinit -u -D"
zpty -w z "compadd() { if [[ \${@[1,(i)(-|--)]} == *-(O|A|D)\\ * ]]; then builtin compadd \"\$@\"; return; fi; local -a __h; builtin compadd -A __h \"\$@\"; local r=\$?; (( \$#__h )) && print -rl -- \$__h >> \$__out; return r; }"
# ^T completes, then says so: the next keys are sent only after that (keys
# typed ahead while completion runs a command may be dropped)
zpty -w z "_zc() { zle complete-word; print -rn -- ZPTY_C''DONE; }; zle -N _zc; bindkey '^T' _zc"
integer i=0
for line in "$@"; do
  (( i++ ))
  : > $out.$i
  zpty -w z "__out=${(q)out}.$i; print ZPTY''_READY_$i"
  zpty -r z got "*ZPTY_READY_$i*" || exit 1
  zpty -w -n z "$line"$'\C-t'
  zpty -r z got "*ZPTY_CDONE*" || exit 1
  zpty -w z $'\C-u'
done
zpty -d z
"""


def zsh_complete(tmp, bindir, cases):
    """The matches zsh's completion adds for each line of words (the last
    one being completed), captured by wrapping compadd; one zsh for all."""
    script = os.path.join(tmp, "zpty.zsh")
    with open(script, "w") as f:
        f.write(ZPTY_SCRIPT)
    out = os.path.join(tmp, "zsh.out")
    lines = [" ".join(shlex.quote(w) if w else "" for w in words) for words in cases]
    p = subprocess.run(["zsh", "-f", script, ZSH_DIR, bindir, out, *lines],
                       capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        print(f"FAIL zsh on a pseudo-terminal: rc {p.returncode}: {p.stderr.strip()[:500]}")
        failures.append("zsh ran the completion")
    got = []
    for i in range(len(cases)):
        path = f"{out}.{i + 1}"
        got.append(set(open(path).read().split()) if os.path.exists(path) else set())
    return got


def expectations(confdir, ini):
    """[(what, words, the completions that must all be offered)]."""
    verbs = helpopts.verbs(WATT)
    subs = helpopts.fleet_subverbs(WATT)
    want = [
        ("the verbs", ["watt", ""], set(verbs)),
        ("fleet's sub-verbs", ["watt", "fleet", ""], set(subs)),
        ("an option by its prefix", ["watt", "report", "--per"], {"--per-cpu"}),
        ("the built-in profiles", ["watt", "tune", ""],
         {"balanced", "latency", "performance", "powersave"}),
        ("a user profile of --config-dir", ["watt", "tune", "--config-dir", confdir, "--show", "w"],
         {"webfront"}),
        ("profiles for agent --profile", ["watt", "agent", "--profile", ""], {"balanced"}),
        ("host names of fleet.ini", ["watt", "fleet", "host", "--config", ini, ""],
         {"rack1-a", "rack1-b"}),
        ("host names, fleet.ini given with -c", ["watt", "fleet", "host", "-c", ini, "r"],
         {"rack1-a", "rack1-b"}),
        ("host actions", ["watt", "fleet", "host", "--config", ini, "rack1-a", ""],
         {"status", "on", "off", "list", "maintenance"}),
        ("top --sort keys", ["watt", "top", "--sort", ""], {"wakeups", "power", "cpu", "idle"}),
        ("ctl commands", ["watt", "ctl", ""], {"status", "reload", "sample"}),
    ]
    for page, title, words, opts in helpopts.help_targets(WATT):
        if words[:2] == ["fleet", "run"]:
            continue  # checked over the controller's sub-verbs below
        want.append((f"every option of watt {' '.join(words)} --help", ["watt", *words, "--"],
                     set(opts)))
    return want


def controller_opts():
    """The controller's options: offered over run, plan, check, host, approve."""
    for page, title, words, opts in helpopts.help_targets(WATT):
        if words[:2] == ["fleet", "run"]:
            return set(opts)
    return None


def check_all(shell, answers, want):
    for (what, words, expect), got in zip(want, answers):
        missing = sorted(expect - got)
        line = " ".join(w or "''" for w in words)
        offered = " ".join(sorted(got))[:300]
        check(bool(expect) and not missing, f"{shell}: {what} ({line})"
              + (f"; missing {' '.join(missing)} (got {offered})" if missing else ""))


def main():
    for tool in ("bash", "zsh"):
        if not shutil.which(tool):
            print(f"SKIP {tool} is not installed (tools/setup.sh --test installs it)")
            return 77
    if not os.path.isfile(BASH_COMPLETION):
        print("SKIP bash-completion is not installed (tools/setup.sh --test installs it)")
        return 77
    with tempfile.TemporaryDirectory() as tmp:
        confdir = os.path.join(tmp, "etc")
        os.makedirs(os.path.join(confdir, "profiles.d"))
        with open(os.path.join(confdir, "profiles.d", "webfront.conf"), "w") as f:
            f.write("[profile]\ndescription = a test profile\ninclude = balanced\n")
        ini = os.path.join(tmp, "fleet.ini")
        with open(ini, "w") as f:
            f.write(FLEET_INI)
        # the completion asks the binary it completes for: `watt` in $PATH
        bindir = os.path.join(tmp, "bin")
        os.mkdir(bindir)
        os.symlink(WATT, os.path.join(bindir, "watt"))
        watt = os.path.join(bindir, "watt")

        want = expectations(confdir, ini)
        # bash: words[0] is the binary itself, as typed
        cases = [[watt, *w[1:]] for _, w, _ in want]
        ctl = ["run", "plan", "check", "host", "approve"]
        cases += [[watt, "fleet", s, "--"] for s in ctl]
        answers = bash_complete(cases)
        check_all("bash", answers[:len(want)], want)
        copts = controller_opts()
        if copts is not None:
            got = set().union(*answers[len(want):])
            missing = sorted(copts - got)
            check(not missing, "bash: every option of watt fleet run --help over its sub-verbs"
                  + (f"; missing {' '.join(missing)}" if missing else ""))
        # installed as DATADIR/bash-completion/completions/watt, bash-completion
        # finds it by the command's name when watt is first completed
        data = os.path.join(tmp, "share")
        os.makedirs(os.path.join(data, "bash-completion", "completions"))
        shutil.copy(BASH_COMP, os.path.join(data, "bash-completion", "completions", "watt"))
        p = subprocess.run(["bash", "--norc", "--noprofile", "-c",
                            f"source {shlex.quote(BASH_COMPLETION)}; _completion_loader watt; "
                            "complete -p watt"],
                           capture_output=True, text=True, timeout=60,
                           env=dict(os.environ, XDG_DATA_DIRS=data))
        check(p.stdout.strip() == "complete -F _watt watt",
              f"bash: bash-completion loads completions/watt on demand ({p.stdout.strip()})")
        # the check can fail: an option no verb has is not offered
        check("--no-such-option" not in set().union(*answers), "bash: offers no unknown option")

        p = subprocess.run(["zsh", "-n", os.path.join(ZSH_DIR, "_watt")], capture_output=True,
                           text=True)
        check(p.returncode == 0 and not p.stderr, f"zsh -n _watt {p.stderr.strip()[:300]}")
        zans = zsh_complete(tmp, bindir, [w for _, w, _ in want] +
                            [["watt", "fleet", s, "--"] for s in ctl])
        check_all("zsh", zans[:len(want)], want)
        if copts is not None:
            got = set().union(*zans[len(want):])
            missing = sorted(copts - got)
            check(not missing, "zsh: every option of watt fleet run --help over its sub-verbs"
                  + (f"; missing {' '.join(missing)}" if missing else ""))
    print(f"{len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
