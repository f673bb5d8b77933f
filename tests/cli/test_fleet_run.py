#!/usr/bin/env python3
"""`watt fleet run|plan|check|host` on the command line, the verbs of a real
fleet that watt exec()s from watt-fleet (the binary that links the fleet
engines, libvirt and libfreeipmi): their help, the shipped example
fleet.ini, fleet.ini's BMC passwords, [exec] templates, hostile VM names,
and watt's message when watt-fleet is missing. Registered only when the
fleet engines are built (-Dfleet, tests/cli/meson.build). The helpers are
test_fleet.py's.

Usage: test_fleet_run.py [WATT] (default: $WATT); data from $WATT_SRCDIR."""
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
from test_fleet import ENV, SRCDIR, WATT, crashed, fail, failures, ok, secret, watt, write  # noqa: E402


def test_help():
    for verb in ("run", "plan", "check", "host"):
        p = watt(verb, "--help")
        if p.returncode != 0 or "usage: watt fleet" not in p.stdout + p.stderr:
            fail(f"fleet {verb} --help: exit {p.returncode}, output {p.stdout[:200]!r}")
    # the shipped example fleet.ini is valid, next to its password files
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(SRCDIR, "dist", "fleet.ini.example")) as f:
            path = write(os.path.join(d, "fleet.ini"), f.read())
        for h in ("h1", "h2"):
            secret(os.path.join(d, f"bmc-{h}.password"), f"pw-{h}\n")
        p = watt("check", "--config", path)
        if (p.returncode != 0 or "2 hosts (1 types), 3 VMs listed" not in p.stdout
                or "BMC password of h2: from bmc-h2.password" not in p.stdout):
            fail(f"fleet check dist/fleet.ini.example: exit {p.returncode}: "
                 f"{p.stderr.strip()[:200]} {p.stdout[:300]}")
    # a fleet of 300 hosts and 3,000 listed VMs (inih's 200-byte lines once broke this)
    with tempfile.TemporaryDirectory() as d:
        hosts = "".join(f"[host h{i}]\ntype = {'g4' if i % 2 else 'g5'}\nuri = qemu+ssh://h{i}/system\n"
                        for i in range(300))
        vms = ", ".join(f"vm{i}" for i in range(3000))
        path = write(os.path.join(d, "big.ini"), f"[controller]\npower = none\nvms = {vms}\n{hosts}")
        p = watt("check", "--config", path)
        if p.returncode != 0 or "300 hosts (2 types), 3000 VMs listed" not in p.stdout:
            fail(f"fleet check, 300 hosts: exit {p.returncode}: {p.stderr.strip()[:200]}")
    p = watt("run")
    if p.returncode != 2 or "--config FLEET.INI is required" not in p.stderr:
        fail(f"fleet run without --config: exit {p.returncode}: {p.stderr.strip()[:200]}")


# ---- fleet run's fleet.ini: BMC passwords (docs/fleet-run.md)

# power = exec: the power commands get the password in WATT_BMC_PASSWORD,
# so `fleet host H status` shows which password watt read.
EXEC_INI = """[controller]
vm_engine = exec
power = exec
state_dir = {state}
[exec]
list = {list}
migrate = true
power_on = true
power_off = true
power_status = sh -c 'test "$WATT_BMC_PASSWORD" = "p;w# 1 " && echo on || echo off' 
[host a]
type = g5
bmc = 10.0.0.1
bmc_user = admin
{password}
[host b]
type = g4
"""


def exec_ini(d, password, name="fleet.ini", mode=0o644, list_cmd="true"):
    text = EXEC_INI.format(state=os.path.join(d, "state"), password=password, list=list_cmd)
    return secret(os.path.join(d, name), text, mode)


def refused(what, p, want):
    """P exited 2 with one error line holding every string of WANT."""
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    if crashed(p) or p.returncode != 2 or len(lines) != 1 or any(w not in lines[0] for w in want):
        fail(f"{what}: want exit 2 and one line naming {want}; got exit {p.returncode}: "
             f"{p.stderr.strip()[:300]!r}")
    else:
        print(f"ok: {what}: {lines[0]}")


# Names from outside with terminal escapes: an OSC that retitles the
# terminal (ESC ] ... BEL), a CSI that clears it (ESC [ 2J), a C1 CSI byte
# (0x9b, also invalid UTF-8) and DEL. Host a lists them: no engine passes
# such a name on (docs/fleet-run.md), so host a's list is refused, the name
# escaped in the message. Host b lists legal names that are still no
# friend of a terminal or a shell: a right-to-left override (shown as
# '?'), quotes, a backslash, blanks, $().
HOSTILE_LIST = r"""#!/bin/sh
if [ "$1" = a ]; then
    printf 'ev\033]0;pwned\007il running 1000000 1048576 1\n'
    printf 'x\033[2Jy running 5 1024 1\n'
    printf 'z\233w\177 running 5 1024 1\n'
else
    printf 'r\342\200\256l running 5 1024 1\n'
    printf '%s running 5 1024 1\n' 'say "hi" \ x' '$(touch pwned)'
fi
"""
ESCAPES = (b"\x1b", b"\x9b", b"\x07", b"\x7f", b"\xe2\x80\xae")


def watt_bytes(*args, cwd=None):
    return subprocess.run([WATT, "fleet", *args], capture_output=True, env=ENV, cwd=cwd)


def test_hostile_names():
    refusal = b"host a: list command output line 1: VM name 'ev\\x1b]0;pwned\\x07il' holds a " \
              b"control character (U+001B)"
    with tempfile.TemporaryDirectory() as d:
        lister = os.path.join(d, "list.sh")
        write(lister, HOSTILE_LIST, 0o755)
        path = exec_ini(d, "", list_cmd=f"{lister} {{host}}")
        with open(path) as f:
            text = f.read().replace("power = exec", "power = none")
        write(path, text)
        for args in (["plan", "--config", path, "--sample", "0"],
                     ["run", "--config", path, "--once", "--dry-run"],
                     ["host", "--config", path, "a", "list"],
                     ["host", "--config", path, "b", "list"]):
            p = watt_bytes(*args, cwd=d)
            what = f"hostile VM names: fleet {' '.join(args[:1] + args[3:])}"
            out = p.stdout + p.stderr
            bad = [e for e in ESCAPES if e in out]
            want_rc = 1 if args[-2:] == ["a", "list"] else 0
            if p.returncode != want_rc or bad:
                fail(f"{what}: exit {p.returncode} (want {want_rc}), control bytes {bad} in "
                     f"{out[-400:]!r}")
            elif args[-1] != "list" and (refusal not in out or b"r?l" not in out):
                fail(f"{what}: host a's list refused naming the VM, host b's shown: {out!r}")
            elif args[-1] == "list" and (refusal if args[-2] == "a" else b"r?l") not in out:
                fail(f"{what}: {out!r}")
            elif os.path.exists(os.path.join(d, "pwned")):
                fail(f"{what}: a VM name ran a command")
            else:
                print(f"ok: {what}: no control byte reaches the terminal")
        # JSON: escaped, and still the names the hypervisor gave
        p = watt_bytes("host", "--config", path, "b", "list", "--json")
        try:
            names = sorted(x["name"] for x in json.loads(p.stdout)["domains"])
        except (ValueError, KeyError) as e:
            names = f"not JSON: {e}"
        want = ["$(touch pwned)", "r\u202el", "say \"hi\" \\ x"]
        if names != want or any(e in p.stdout for e in ESCAPES[:4]):  # U+202E is JSON's
            fail(f"hostile VM names, --json: {names!r} (want {want!r}), raw {p.stdout!r}")
        else:
            print("ok: hostile VM names, --json: escaped, names intact")


def test_passwords():
    with tempfile.TemporaryDirectory() as d:
        # bmc_password in a fleet.ini that group or others can read: refused
        for mode in (0o644, 0o640, 0o604):
            path = exec_ini(d, "bmc_password = p;w", mode=mode)
            for verb, *more in (["check"], ["plan", "--sample", "0"], ["run", "--once"]):
                refused(f"bmc_password, fleet.ini mode {mode:04o}, {verb}",
                        watt(verb, "--config", path, *more),
                        [f"fleet.ini {path} holds bmc_password (line 15)",
                         f"readable by group/others (mode {mode:04o})", "chmod 600",
                         "bmc_password_file"])
        # ... and accepted at 0600
        for mode in (0o600, 0o400):
            path = exec_ini(d, "bmc_password = p;w", mode=mode)
            p = watt("check", "--config", path)
            if p.returncode != 0 or "BMC passwords: 1 in" not in p.stdout:
                fail(f"bmc_password, fleet.ini mode {mode:04o}: exit {p.returncode} "
                     f"{p.stderr.strip()[:200]} {p.stdout[:200]!r}")
        # no password: the mode is the owner's business
        path = exec_ini(d, "", mode=0o644)
        ok("no password, fleet.ini mode 0644", watt("check", "--config", path))

        # bmc_password_file: its first line, from fleet.ini's folder; fleet.ini 0644 is fine
        os.makedirs(os.path.join(d, "pw"))
        pw = secret(os.path.join(d, "pw", "a"), "p;w# 1 \r\nsecond line\n")
        path = exec_ini(d, "bmc_password_file = pw/a   ; relative", mode=0o644)
        p = ok("bmc_password_file", watt("check", "--config", path))
        if p and "BMC password of a: from pw/a" not in p.stdout:
            fail(f"fleet check names the password file: {p.stdout!r}")
        p = ok("bmc_password_file, the password reaches the power command",
               watt("host", "--config", path, "a", "status"))
        if p and "a: power on" not in p.stdout:
            fail(f"bmc_password_file: the first line (without \\r\\n) is the password: "
                 f"{p.stdout!r}")
        # from another folder: still relative to fleet.ini's
        ok("bmc_password_file, from another folder",
           watt("host", "--config", path, "a", "status", cwd="/"))
        for mode in (0o640, 0o604, 0o644):
            os.chmod(pw, mode)
            refused(f"bmc_password_file mode {mode:04o}", watt("check", "--config", path),
                    [f"{path} line 15", f"bmc_password_file {d}/pw/a",
                     f"readable by group/others (mode {mode:04o})", "chmod 600"])
        os.chmod(pw, 0o600)
        bad = [("missing", "bmc_password_file = pw/none", ["line 15", "pw/none", "No such file"]),
               ("a folder", "bmc_password_file = pw", ["line 15", "pw", "not a regular file"]),
               ("both", "bmc_password_file = pw/a\nbmc_password = x",
                ["line 16", "password already (line 15)"]),
               ("empty path", "bmc_password_file =", ["line 15", "bmc_password_file is empty"])]
        for what, text, want in bad:
            refused(f"bmc_password_file: {what}",
                    watt("check", "--config", exec_ini(d, text)), want)
        empty = secret(os.path.join(d, "pw", "empty"), "\nsecond\n")
        refused("bmc_password_file: empty first line",
                watt("check", "--config", exec_ini(d, f"bmc_password_file = {empty}")),
                ["line 15", empty, "first line is empty"])
        big = secret(os.path.join(d, "pw", "big"), "x" * 5000)
        refused("bmc_password_file: 5000 bytes",
                watt("check", "--config", exec_ini(d, f"bmc_password_file = {big}")),
                ["line 15", big, "larger than 4096 bytes"])


def test_templates():
    """fleet check refuses an [exec] template with a placeholder inside
    quotes (a VM name would run as shell there), naming the line, the key
    and the template; the same placeholder outside the quotes is fine."""
    bad = [("migrate = true", 7, 'migrate = sh -c "virsh migrate --live {vm} {dst_uri}"',
            "placeholder {vm} inside quotes"),
           ("power_on = true", 8, "power_on = ipmitool -H '{bmc}' -E power on",
            "placeholder {bmc} inside quotes"),
           ("migrate = true", 7, "migrate = virsh migrate 'x{vm}y'",
            "placeholder {vm} inside quotes"),
           ("migrate = true", 7, "migrate = {vm} --now", "placeholder {vm} in the first word"),
           ("list = true", 6, "list = ssh {host} 'virsh list", "unterminated ' quote")]
    with tempfile.TemporaryDirectory() as d:
        for old, line, new, why in bad:
            path = exec_ini(d, "")
            with open(path) as f:
                text = f.read()
            write(path, text.replace(old, new))
            tmpl = new.split(" = ", 1)[1]
            refused(f"fleet check, {new}", watt("check", "--config", path),
                    [f"{path} line {line}: [exec] {new.split()[0]}: {why} in '{tmpl}'"])
        path = exec_ini(d, "")
        with open(path) as f:
            text = f.read()
        write(path, text.replace("migrate = true",
                                 "migrate = sh -c 'virsh migrate --live \"$1\" \"$2\"' sh {vm} {dst_uri}"))
        p = ok("fleet check, placeholders outside quotes", watt("check", "--config", path))
        if p and "vm engine exec, power exec" not in p.stdout:
            fail(f"fleet check names the engines: {p.stdout!r}")


def test_missing_engines():
    """A watt with no watt-fleet beside it (nor, on this machine, in its
    libexecdir) names the paths it tried; with one beside it, runs it."""
    with tempfile.TemporaryDirectory() as d:
        copy = shutil.copy(WATT, os.path.join(d, "watt"))
        p = subprocess.run([copy, "fleet", "check", "--config", "/nonexistent/fleet.ini"],
                           capture_output=True, text=True, env=ENV)
        beside = os.path.join(d, "watt-fleet")
        if "--config" in p.stderr or "/nonexistent/fleet.ini" in p.stderr:
            print("skip: missing watt-fleet: an installed watt-fleet answered")
        elif (p.returncode != 1 or crashed(p) or
              not p.stderr.startswith("watt fleet check: cannot run watt-fleet") or
              f"{beside}: No such file or directory" not in p.stderr or
              "/watt/watt-fleet: No such file or directory" not in p.stderr):
            fail(f"missing watt-fleet: exit {p.returncode}, stderr {p.stderr!r}, want exit 1 "
                 f"naming {beside} and libexecdir/watt/watt-fleet")
        else:
            print(f"ok: missing watt-fleet: {p.stderr.strip()}")
        shutil.copy(os.path.join(os.path.dirname(WATT), "watt-fleet"), beside)
        p = subprocess.run([copy, "fleet", "check", "--config", "/nonexistent/fleet.ini"],
                           capture_output=True, text=True, env=ENV)
        if p.returncode != 2 or "/nonexistent/fleet.ini" not in p.stderr or crashed(p):
            fail(f"watt-fleet beside watt: exit {p.returncode}, stderr {p.stderr!r}")
        else:
            print(f"ok: watt-fleet beside watt runs: {p.stderr.strip()}")


def main():
    test_help()
    test_passwords()
    test_templates()
    test_hostile_names()
    test_missing_engines()
    if failures:
        print(f"FAIL: {len(failures)} failures")
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
