"""What `watt --help` and each verb's --help list: the verbs, fleet's
sub-verbs and each verb's long options. test_man.py and test_completion.py
check the man pages and the completions against them, so that an option
added to a --help fails both until it is documented and completed."""
import os
import re
import subprocess

OPT = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")


def run_help(watt, *args):
    """The --help text of `watt ARGS --help` (exit 0 required)."""
    p = subprocess.run([watt, *args, "--help"], capture_output=True, text=True, timeout=60)
    if p.returncode != 0:
        raise RuntimeError(f"watt {' '.join(args)} --help exited {p.returncode}: {p.stderr}")
    return p.stdout


def verbs(watt):
    """The verbs of `watt --help`: the two-blank-indented lines under 'verbs:'."""
    text = run_help(watt)
    body = text.split("verbs:", 1)[1].split("\n\n", 1)[0]
    return [m.group(1) for m in re.finditer(r"^  ([a-z]+) ", body, re.M)]


def options(text, verb):
    """The long options VERB's --help text names, in order, once each; not
    those it quotes of another verb ("/status (watt report --json)")."""
    text = re.sub(r"watt (\w+)((?: --[a-z][a-z0-9-]*)+)",
                  lambda m: m.group(0) if m.group(1) == verb else "", text)
    seen = []
    for o in OPT.findall(text):
        if o not in seen:
            seen.append(o)
    return seen


def fleet_subverbs(watt):
    """sim, compare, run, ...: the words after 'watt fleet' in its usage."""
    subs = []
    for m in re.finditer(r"watt fleet ([a-z|]+)", run_help(watt, "fleet")):
        for s in m.group(1).split("|"):
            if s not in subs:
                subs.append(s)
    return subs


def help_targets(watt):
    """[(page, section-title regex, words before --help, [options])]: what to
    check, one entry per --help text. The fleet controller's --help (watt-fleet)
    only where the fleet engines are built."""
    out = []
    for v in verbs(watt):
        if v == "fleet":
            # its usage names the controller's --config: those lines are not sim's
            sim = "\n".join(line for line in run_help(watt, "fleet").splitlines()
                            if "run|plan" not in line)
            out.append(("watt-fleet.1", r"SIMULATOR OPTIONS", ["fleet", "sim"],
                        options(sim, "fleet")))
            if os.environ.get("WATT_FLEET_ENGINES") == "1":
                out.append(("watt-fleet.1", r"CONTROLLER OPTIONS", ["fleet", "run"],
                            options(run_help(watt, "fleet", "run"), "fleet")))
            continue
        out.append((f"watt-{v}.1", r"OPTIONS", [v], options(run_help(watt, v), v)))
    return out
