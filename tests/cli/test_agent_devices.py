#!/usr/bin/env python3
"""The agent judges devices with the policy of `watt report` and `watt
tune`: CONFDIR/devices.conf from its config_dir, read at start and on
SIGHUP (docs/agent-metrics.md, docs/tune-devices.md).

On a copy of the intel-2s fixture: the devices at 1 in
watt_device_autosuspend_safe are exactly the SAFE devices of `watt report
--interval 0 --json --config-dir DIR`, with a devices.conf that denies the
USB stick by the driver of its interface, after SIGHUP with one that denies
nothing, and after SIGHUP with a broken one (which keeps the running
policy and says file:line in one line). A broken devices.conf at start is
refused with file:line. The printer (usblp on interface 1 behind a
vendor-specific interface 0) is never safe.

Usage: test_agent_devices.py [WATT] (default: $WATT); fixtures from
$WATT_FIXTURES."""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checks import check, free_port, stop, summary  # noqa: E402

WATT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.environ["WATT"])
FIXTURES = os.environ.get("WATT_FIXTURES") or os.path.join(
    os.path.dirname(WATT), "tests", "fixtures")
SAFE = re.compile(r'^watt_device_autosuspend_safe\{bus="([^"]*)",device="([^"]*)"\} 1$', re.M)


def env():
    e = dict(os.environ)
    e.pop("WATT_CONFIG_DIR", None)
    e.pop("WATT_ROOT", None)
    return e


def report_safe(root, confdir):
    p = subprocess.run([WATT, "report", "--interval", "0", "--json", "--root", root,
                        "--config-dir", confdir], capture_output=True, text=True, env=env(),
                       timeout=60)
    check(p.returncode == 0, f"watt report --config-dir {confdir}: exit {p.returncode} "
          f"{p.stderr.strip()[-200:]}")
    if p.returncode != 0:
        return None
    devs = json.loads(p.stdout)["devices"]["devices"]
    return {(d["bus"], d["name"]) for d in devs if d["verdict"] == "safe"}


def agent_safe(port):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
            return set(SAFE.findall(r.read().decode()))
    except OSError:
        return None


def wait_safe(port, want, timeout=5.0):
    """The agent's safe set once it equals WANT, else the last one seen."""
    got = None
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        got = agent_safe(port)
        if got == want:
            break
        time.sleep(0.1)
    return got


def write(path, text):
    with open(path, "w") as f:
        f.write(text)


def ini(d, root, confdir, port):
    path = os.path.join(d, "agent.ini")
    write(path, f"[agent]\nlisten = 127.0.0.1:{port}\ninterval_s = 0.2\nroot = {root}\n"
                f"control =\nconfig_dir = {confdir}\n")
    return path


def start(config, port):
    p = subprocess.Popen([WATT, "agent", "--config", config], stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True, env=env())
    for _ in range(100):
        if p.poll() is not None or agent_safe(port) is not None:
            break
        time.sleep(0.05)
    return p


def main():
    src = os.path.join(FIXTURES, "intel-2s")
    if not os.path.isdir(src):
        print(f"skip: no fixture {src}")
        return 77
    with tempfile.TemporaryDirectory(prefix="watt-agent-devices-") as d:
        root = os.path.join(d, "root")
        shutil.copytree(src, root, symlinks=True)
        confdir = os.path.join(d, "conf")
        os.mkdir(confdir)
        conf = os.path.join(confdir, "devices.conf")
        builtin = report_safe(root, os.path.join(d, "none"))
        check(builtin == {("usb", "2-1")}, f"built-in rules: the USB stick alone is safe "
              f"({builtin})")

        # a deny by the driver of the stick's interface (usb-storage)
        write(conf, "deny driver=usb-storage   # the stick\n")
        want = report_safe(root, confdir)
        check(want == set(), f"report --config-dir: the deny takes the stick out ({want})")
        port = free_port()
        p = start(ini(d, root, confdir, port), port)
        try:
            got = wait_safe(port, want)
            check(got == want, f"agent at start: safe {got} == report's {want}")
            check(got != builtin, "the devices.conf deny changed the agent's safe count")

            write(conf, "# nothing denied\nallow 03f0:*   # cannot lift the printer\n")
            want = report_safe(root, confdir)
            p.send_signal(signal.SIGHUP)
            got = wait_safe(port, want)
            check(got == want == builtin, f"agent after SIGHUP: safe {got} == report's {want}")

            write(conf, "deny driver=usb-storage\ndney 0781:*\n")
            p.send_signal(signal.SIGHUP)
            time.sleep(1.0)
            got = agent_safe(port)
            check(got == builtin, f"a broken devices.conf on SIGHUP keeps the running policy "
                  f"({got})")
            check(p.poll() is None, "the agent still runs")
        finally:
            rc = stop(p)
        err = p.stderr.read()
        lines = [ln for ln in err.splitlines() if f"{conf}:2" in ln]
        check(rc == 0 and len(lines) == 1 and "keeping the running device policy" in lines[0]
              and "unknown action 'dney'" in lines[0],
              f"one line names {conf}:2: {lines}")
        san = [ln for ln in err.splitlines() if "Sanitizer" in ln or "runtime error" in ln]
        check(not san, "no sanitizer report: " + "; ".join(san[:2]))

        # broken at start: refused, as watt report and watt tune refuse it
        port = free_port()
        r = subprocess.run([WATT, "agent", "--config", ini(d, root, confdir, port)],
                           capture_output=True, text=True, env=env(), timeout=30)
        check(r.returncode != 0 and f"{conf}:2: unknown action 'dney'" in r.stderr,
              f"a broken devices.conf at start is refused naming file:line "
              f"(exit {r.returncode}: {r.stderr.strip()[:120]})")
        slow_reads(d, root)
    return summary()


def stick_never(port):
    """never_suspends of the USB stick in the agent's /status, None when
    unreadable."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/status", timeout=5) as r:
            devs = json.loads(r.read().decode())["devices"]["devices"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    for x in devs:
        if x.get("bus") == "usb" and x.get("name") == "2-1":
            return x.get("never_suspends")
    return None


def wait_never(port, want, timeout=5.0):
    got = None
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        got = stick_never(port)
        if got is want:
            break
        time.sleep(0.1)
    return got


def slow_reads(d, root):
    """device_interval: runtime PM read afresh every second while samples
    come every 0.2 s. A stick at control=auto that keeps suspending (its
    runtime_suspended_time grows) is never said to "never suspend", not
    even between two fresh reads, which hold the same values; once it
    stops suspending it is said to again."""
    pw = os.path.join(root, "sys/devices/pci0000:00/0000:00:14.0/usb2/2-1/power")
    write(os.path.join(pw, "control"), "auto\n")
    write(os.path.join(pw, "runtime_suspended_time"), "0\n")
    confdir = os.path.join(d, "conf-slow")
    os.makedirs(confdir, exist_ok=True)
    port = free_port()
    path = ini(d, root, confdir, port)
    with open(path, "a") as f:
        f.write("device_interval_s = 1\n")
    p = start(path, port)
    try:
        got = wait_never(port, True)
        check(got is True, f"slow reads: the idle stick at control=auto never suspends ({got})")
        seen, t0, n = [], time.monotonic(), 0
        while time.monotonic() - t0 < 4.0:
            n += 100
            write(os.path.join(pw, "runtime_suspended_time"), f"{n}\n")
            if time.monotonic() - t0 > 2.2:  # two fresh reads since it began
                seen.append(stick_never(port))
            time.sleep(0.05)
        bad = [x for x in seen if x is not False]
        check(seen and not bad, f"slow reads: a suspending stick is not said to never suspend, "
              f"between fresh reads too ({len(bad)} of {len(seen)} scrapes said so or failed)")
        got = wait_never(port, True, timeout=5.0)
        check(got is True, f"slow reads: it never suspends again once it stops ({got})")
    finally:
        rc = stop(p)
    check(rc == 0, f"slow reads: the agent stopped cleanly (exit {rc})")


if __name__ == "__main__":
    sys.exit(main())
