#!/usr/bin/env python3
"""The systemd units as meson built them (build/dist/), on a machine where
systemd is installed but is not PID 1 (this project's CI).

Usage: test_units.py AGENT_UNIT TUNE_UNIT (meson passes build/dist/...).

Checks: `systemd-analyze verify` passes on both; the exposure score of
`systemd-analyze security --offline=yes`, printed, is at most 3.4 for the
agent (the score of the unit before issue 16); the agent's ExecStart, run
under the unit's own system call filter (tests/helpers/unit_seccomp:
SystemCallFilter=, SystemCallErrorNumber=, RestrictAddressFamilies=,
MemoryDenyWriteExecute=) and capability bounding set (setpriv), starts
with no config file, answers /metrics and /status on a free loopback port
and counts wake-ups, and says which path it counts them by; in a private
mount namespace without tracefs or debugfs, its mount() is refused by the
filter (EPERM, not SIGSYS) and the agent counts from /proc and says why;
a broken or missing config exits with the status the unit lists in
RestartPreventExitStatus=; watt-tune@'s ExecStart applies a profile to a
fixture tree and its ExecStop puts every byte back, under that unit's
filter. Prints one line per check, exits 1 on any failure.
"""
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checks import check, free_port, stop, summary  # noqa: E402

WATT = os.path.abspath(os.environ.get("WATT", "build/watt"))
FIXTURES = os.environ.get("WATT_FIXTURES", "build/tests/fixtures")
SECCOMP = os.environ.get("WATT_UNIT_SECCOMP")
MAX_EXPOSURE = 3.4


def unit_values(path, key, section="Service"):
    """Every value of KEY in [SECTION], in order."""
    out, cur = [], None
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("["):
                cur = line[1:-1]
            elif cur == section and not line.startswith("#") and "=" in line:
                k, v = line.split("=", 1)
                if k == key:
                    out.append(v)
    return out


def exec_argv(unit, key, instance=None):
    """The unit's command line for KEY with the build's watt for the
    installed one (the unit names @bindir@/watt, not installed here)."""
    vals = unit_values(unit, key)
    if len(vals) != 1:
        return None
    argv = shlex.split(vals[0].replace("%i", instance or "%i"))
    check(os.path.basename(argv[0]) == "watt" and argv[0].startswith("/"),
          f"{os.path.basename(unit)} {key}= runs an absolute .../watt: {vals[0]}")
    return [WATT] + argv[1:]


def verify(units, tmp):
    """systemd-analyze verify, on copies whose ExecStart names the build's
    watt (verify checks that the program exists); man pages are another
    package's part (--man=no)."""
    copies = []
    for u in units:
        with open(u) as f:
            text = f.read()
        bindir = re.search(r"^ExecStart=(\S+)/watt ", text, re.M)
        check(bindir is not None and "@" not in bindir.group(1),
              f"{os.path.basename(u)}: @bindir@ filled in ({bindir.group(1) if bindir else None})")
        if bindir:
            text = text.replace(bindir.group(1) + "/watt", WATT)
        dst = os.path.join(tmp, os.path.basename(u))
        with open(dst, "w") as f:
            f.write(text)
        copies.append(dst)
    r = subprocess.run(["systemd-analyze", "verify", "--man=no", *copies],
                       capture_output=True, text=True, timeout=120)
    check(r.returncode == 0 and not r.stderr.strip(),
          f"systemd-analyze verify on {', '.join(map(os.path.basename, units))} "
          f"({r.stderr.strip()[:300] or 'clean'})")


def exposure(unit):
    r = subprocess.run(["systemd-analyze", "security", "--offline=yes", unit],
                       capture_output=True, text=True, timeout=120)
    m = re.search(r"Overall exposure level for \S+: ([0-9.]+)", r.stdout)
    score = float(m.group(1)) if m else None
    print(f"# systemd-analyze security --offline=yes {os.path.basename(unit)}: {score}")
    return score


def caps_prefix(unit):
    """setpriv with the unit's CapabilityBoundingSet= (as root; [] else)."""
    vals = unit_values(unit, "CapabilityBoundingSet")
    if os.geteuid() != 0 or not shutil.which("setpriv") or not vals:
        print("# skip part: the capability bounding set is not applied (needs root and setpriv)")
        return []
    caps = vals[-1].split()
    spec = ",".join(["-all"] + ["+" + c.lower().removeprefix("cap_") for c in caps])
    return ["setpriv", "--bounding-set", spec]


# LeakSanitizer (the -Db_sanitize=address build) runs its check through
# ptrace, which the units' filters refuse, as systemd's would.
os.environ["ASAN_OPTIONS"] = (os.environ.get("ASAN_OPTIONS", "") + ":detect_leaks=0").lstrip(":")


def under_unit(unit, argv):
    """ARGV as the unit would run it: its capabilities and filters."""
    return caps_prefix(unit) + [SECCOMP, unit, "--"] + argv


def get(port, path):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, ""
    except OSError:
        return None, ""


def metrics(port):
    series = {}
    for line in get(port, "/metrics")[1].splitlines():
        if line and not line.startswith("#"):
            k, _, v = line.rpartition(" ")
            series[k] = v
    return series


def start_agent(argv, port, env=None):
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    for _ in range(200):
        if get(port, "/healthz")[0] == 200 or p.poll() is not None:
            break
        time.sleep(0.05)
    return p


def wait_samples(port, n=3):
    """Until the agent has counted some wake-ups (N samples: no time asserted)."""
    got = {}
    for _ in range(200):
        got = metrics(port)
        kinds = [v for k, v in got.items() if k.startswith("watt_wakeups_total")]
        if kinds and sum(float(v) for v in kinds) > 0:
            return got
        time.sleep(0.1)
    return got


def path_info(series):
    line = next((k for k in series if k.startswith("watt_agent_wakeups_path_info")), "")
    return dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', line))


def default_config():
    """The default config path, from the agent's --help."""
    r = subprocess.run([WATT, "agent", "--help"], capture_output=True, text=True)
    m = re.search(r"\(default (\S+) when it exists", r.stdout)
    return m.group(1) if m else None


PROBE = r"""
import ctypes, errno, socket
libc = ctypes.CDLL(None, use_errno=True)
libc.mount(b"nodev", b"/nonexistent", b"tracefs", 0, None)
print("mount", errno.errorcode.get(ctypes.get_errno()))
for name, fam, proto in (("AF_PACKET", socket.AF_PACKET, 0), ("AF_NETLINK", socket.AF_NETLINK, 4)):
    try:
        socket.socket(fam, socket.SOCK_RAW, proto).close()
        print(name, "ok")
    except OSError as e:
        print(name, errno.errorcode.get(e.errno))
"""


def test_filter_itself(unit):
    """The emulation is not a no-op: under the agent unit's filter mount()
    fails with EPERM (SystemCallErrorNumber=), AF_PACKET with EAFNOSUPPORT,
    and AF_NETLINK (sock_diag, protocol 4) is allowed."""
    r = subprocess.run([SECCOMP, unit, "--", sys.executable, "-c", PROBE], capture_output=True,
                       text=True, timeout=60)
    got = dict(ln.split(" ", 1) for ln in r.stdout.splitlines() if " " in ln)
    check(r.returncode == 0 and got == {"mount": "EPERM", "AF_PACKET": "EAFNOSUPPORT",
                                        "AF_NETLINK": "ok"},
          f"under {os.path.basename(unit)}'s filter: mount() EPERM, AF_PACKET EAFNOSUPPORT, "
          f"AF_NETLINK allowed ({got or r.stderr.strip()[-200:]})")


def test_agent(unit):
    argv = exec_argv(unit, "ExecStart")
    if argv is None:
        return
    check("--config" not in argv, f"the agent's ExecStart names no config file: {argv[1:]}")
    conf = default_config()
    if conf and os.path.exists(conf):
        print(f"# skip: {conf} exists here, so 'no config' cannot be tried")
        return
    port = free_port()
    p = start_agent(under_unit(unit, argv + ["--listen", f"127.0.0.1:{port}", "--control", ""]),
                    port)
    try:
        series = wait_samples(port)
        status, body = get(port, "/status")
        alive = p.poll() is None
        check(alive and any(k.startswith("watt_") for k in series),
              f"the agent under {os.path.basename(unit)}'s filter, with no config, answers "
              f"/metrics on 127.0.0.1:{port}")
        check(status == 200 and body.startswith("{"), "... and /status")
        info = path_info(series)
        total = sum(float(v) for k, v in series.items() if k.startswith("watt_wakeups_total"))
        print(f"# wake-ups counted by path={info.get('path')!r} "
              f"why_not_bpf={info.get('why_not_bpf')!r} "
              f"why_not_traced={info.get('why_not_traced')!r}; {total:.0f} so far")
        check(total > 0 and info.get("path") in ("bpf", "trace", "proc"),
              f"... counts wake-ups ({total:.0f}) and says by which path ({info.get('path')})")
        if info.get("path") == "proc":
            check(bool(info.get("why_not_traced")), "... and, counting from /proc, why")
        p.send_signal(signal.SIGHUP)  # systemctl reload: the default file is still missing
        for _ in range(100):
            if get(port, "/healthz")[0] == 200 and p.poll() is None:
                break
            time.sleep(0.05)
    finally:
        rc = stop(p)
        err = p.stderr.read()
    check(rc == 0, f"... exits 0 on SIGTERM (got {rc})")
    check("running on built-in defaults" in err,
          f"... and said it runs on built-in defaults ({err.strip().splitlines()[:3]})")
    check("SIGSYS" not in err and "Bad system call" not in err, "... no call killed it (SIGSYS)")
    san = [ln for ln in err.splitlines() if "Sanitizer" in ln or "runtime error:" in ln]
    check(not san, f"... no sanitizer report under the filter ({san[:2]})")
    check(f"SIGHUP: no {conf}: keeping the built-in defaults" in err,
          "... and a reload without the file keeps the defaults, saying so")


def tracing_mounts():
    with open("/proc/self/mountinfo") as f:
        return [ln.split(" - ")[0].split()[4] for ln in f
                if " - tracefs " in ln or " - debugfs " in ln]


def test_trace_path(unit, tmp):
    """wakeups = trace under the filter: tracefs wherever the mount table
    has it (this VM: only debugfs's tracing/, /sys/kernel/tracing empty),
    with no mount() (the filter would refuse it)."""
    mounts = tracing_mounts()
    ini = os.path.join(tmp, "trace-here.ini")
    with open(ini, "w") as f:
        f.write("[agent]\nwakeups = trace\n")
    port = free_port()
    argv = exec_argv(unit, "ExecStart") + ["--config", ini, "--listen", f"127.0.0.1:{port}",
                                           "--control", ""]
    p = start_agent(under_unit(unit, argv), port)
    try:
        info = path_info(wait_samples(port))
    finally:
        rc = stop(p)
        p.stderr.read()
    print(f"# tracing file systems mounted here: {mounts}; wakeups = trace took {info}")
    if os.geteuid() == 0 and mounts:
        check(info.get("path") == "trace" and rc == 0,
              f"wakeups = trace under the filter: the tracepoint ring, tracefs found in the "
              f"mount table at {mounts[-1]} without mount() ({info.get('path')}, exit {rc})")
    else:
        check(info.get("path") in ("trace", "proc") and rc == 0,
              f"wakeups = trace under the filter: path {info.get('path')} said, exit {rc}")


def test_refused_mount(unit, tmp):
    """No tracefs and no debugfs in a private mount namespace: the agent
    tries mount(), the filter refuses it with EPERM, and the agent counts
    from /proc and says why, in /metrics and /status."""
    unshare = shutil.which("unshare")
    mounts = tracing_mounts()
    if os.geteuid() != 0 or not unshare:
        print("# skip: the refused mount needs root and unshare (a private mount namespace)")
        return
    ini = os.path.join(tmp, "trace.ini")
    with open(ini, "w") as f:
        f.write("[agent]\nwakeups = trace\n")
    port = free_port()
    argv = exec_argv(unit, "ExecStart") + ["--config", ini, "--listen", f"127.0.0.1:{port}",
                                           "--control", ""]
    # deepest first: debugfs's tracing/ before debugfs
    umounts = " && ".join(f"umount {shlex.quote(m)}" for m in sorted(mounts, key=len, reverse=True))
    script = (f"{umounts + ' && ' if umounts else ''}"
              "! grep -qE ' - (tracefs|debugfs) ' /proc/self/mountinfo && "
              f"exec {shlex.join(under_unit(unit, argv))}")
    p = start_agent([unshare, "-m", "--propagation", "private", "sh", "-c", script], port)
    try:
        series = wait_samples(port)
        info = path_info(series)
        why = info.get("why_not_traced", "")
        status, body = get(port, "/status")
        check(p.poll() is None and info.get("path") == "proc" and "refused: EPERM" in why,
              f"no tracefs mounted: mount() refused by the filter (EPERM), counted from /proc, "
              f"said in watt_agent_wakeups_path_info ({info})")
        check(status == 200 and "refused: EPERM" in body, "... and in /status")
    finally:
        rc = stop(p)
        err = p.stderr.read()
    check(rc == 0 and "refused: EPERM" in err,
          f"... and on stderr; exits 0 on SIGTERM (got {rc}: {err.strip().splitlines()[-3:]})")
    check(tracing_mounts() == mounts, "... this machine's own mounts untouched")


def test_bad_config(unit, tmp):
    prevent = " ".join(unit_values(unit, "RestartPreventExitStatus")).split()
    check(unit_values(unit, "Restart") == ["on-failure"] and prevent,
          f"Restart=on-failure, RestartPreventExitStatus={' '.join(prevent)}")
    bad = os.path.join(tmp, "bad.ini")
    with open(bad, "w") as f:
        f.write("[agent]\ninterval = 1\nlisten = nowhere\n")
    argv = exec_argv(unit, "ExecStart")
    for what, cfg in (("broken", bad), ("missing", os.path.join(tmp, "none.ini"))):
        r = subprocess.run(under_unit(unit, argv + ["--config", cfg, "--control", ""]),
                           capture_output=True, text=True, timeout=60)
        check(str(r.returncode) in prevent and cfg in r.stderr,
              f"a {what} config exits {r.returncode}, which the unit does not restart on, "
              f"naming it ({r.stderr.strip().splitlines()[-1:]})")


def tree_state(root):
    state = {}
    for d, _, files in os.walk(root):
        rel = os.path.relpath(d, root)
        if rel == "var" or rel.startswith("var" + os.sep):
            continue
        for n in files:
            p = os.path.join(d, n)
            if os.path.islink(p):
                state[os.path.join(rel, n)] = "-> " + os.readlink(p)
            else:
                with open(p, "rb") as f:
                    state[os.path.join(rel, n)] = f.read()
    return state


def test_tune(unit, tmp):
    """ExecStart applies and journals, ExecStop puts every byte back: on a
    fixture tree ($WATT_ROOT, which `watt tune` reads), under the unit's
    own filter and (no) capabilities."""
    profile = "powersave"
    start, stop_ = exec_argv(unit, "ExecStart", profile), exec_argv(unit, "ExecStop", profile)
    if start is None or stop_ is None:
        check(False, "watt-tune@: one ExecStart= and one ExecStop=")
        return
    check(unit_values(unit, "Type") == ["oneshot"] and unit_values(unit, "RemainAfterExit") ==
          ["yes"], "watt-tune@: Type=oneshot, RemainAfterExit=yes")
    root = os.path.join(tmp, "intel-2s")
    subprocess.run(["cp", "-a", os.path.join(FIXTURES, "intel-2s"), root], check=True)
    before = tree_state(root)
    env = dict(os.environ, WATT_ROOT=root, WATT_CONFIG_DIR=os.path.join(tmp, "no-confdir"))
    r = subprocess.run(under_unit(unit, start), capture_output=True, text=True, env=env,
                       timeout=120)
    changed = sum(1 for k, v in tree_state(root).items() if before.get(k) != v)
    journal = os.path.join(root, "var/lib/watt/journal")
    check(r.returncode == 0 and changed > 0 and os.path.exists(journal),
          f"watt-tune@{profile} ExecStart (under its filter): exit {r.returncode}, {changed} "
          f"files changed, journal written ({r.stderr.strip()[:200]})")
    r = subprocess.run(under_unit(unit, stop_), capture_output=True, text=True, env=env,
                       timeout=120)
    after = tree_state(root)
    check(r.returncode == 0 and after == before,
          f"ExecStop: exit {r.returncode}, the tree as it was ({r.stderr.strip()[:200]})")


def main():
    if len(sys.argv) < 3:
        print("usage: test_units.py AGENT_UNIT TUNE_UNIT")
        return 2
    agent_unit, tune_unit = map(os.path.abspath, sys.argv[1:3])
    if not shutil.which("systemd-analyze"):
        print("FAIL systemd-analyze not found (tools/setup.sh --test installs systemd)")
        return 1
    with tempfile.TemporaryDirectory(prefix="watt-units-") as tmp:
        os.chmod(tmp, 0o755)
        verify([agent_unit, tune_unit], tmp)
        score = exposure(agent_unit)
        check(score is not None and score <= MAX_EXPOSURE,
              f"watt-agent.service exposure {score} <= {MAX_EXPOSURE}")
        tscore = exposure(tune_unit)
        check(tscore is not None and tscore <= MAX_EXPOSURE,
              f"watt-tune@.service exposure {tscore} <= {MAX_EXPOSURE}")
        if not SECCOMP:
            print("SKIP the units' filters: tests/helpers/unit_seccomp not built "
                  "(libseccomp-dev; tools/setup.sh --test)")
            return 77 if not summary() else 1
        test_filter_itself(agent_unit)
        test_agent(agent_unit)
        test_bad_config(agent_unit, tmp)
        test_trace_path(agent_unit, tmp)
        test_refused_mount(agent_unit, tmp)
        test_tune(tune_unit, tmp)
    return summary()


if __name__ == "__main__":
    sys.exit(main())
