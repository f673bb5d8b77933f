#!/usr/bin/env python3
"""The simulated BMC kit (tests/fleet/ipmi_sim) works: run.sh starts ipmi_sim
on a free 127.0.0.1 UDP port, ipmitool (lanplus, cipher 3) switches chassis
power and reads DCMI watts, the power hook runs before the state changes and
can refuse it, and run.sh stop leaves no process behind. Exit 77 (skip) when
ipmi_sim, ipmitool or a C compiler is missing. Stdlib only."""
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

KIT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ipmi_sim")
RUN = os.path.join(KIT, "run.sh")

HOOK = """#!/bin/sh
echo "$1" >> "$(dirname "$0")/hook.calls"
[ -f "$(dirname "$0")/hook.refuse" ] && exit 3
exit 0
"""


def free_udp_port():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Bmc:
    def __init__(self, work):
        self.work = work
        self.port = free_udp_port()
        self.pid = None

    def start(self):
        p = subprocess.run(["sh", RUN, "start", str(self.port), self.work],
                           capture_output=True, text=True, timeout=30)
        if p.returncode != 0:
            raise AssertionError(f"run.sh start failed ({p.returncode}): {p.stderr}")
        self.pid = int(p.stdout.split()[-1])

    def stop(self):
        subprocess.run(["sh", RUN, "stop", str(self.port), self.work],
                       capture_output=True, timeout=30)

    def ipmitool(self, *args, check=True):
        cmd = ["ipmitool", "-I", "lanplus", "-C", "3", "-H", "127.0.0.1",
               "-p", str(self.port), "-U", "admin", "-P", "secret", *args]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
        if check and p.returncode != 0:
            raise AssertionError(f"{' '.join(args)}: rc {p.returncode}: {p.stderr}")
        return p

    def power(self):
        out = self.ipmitool("chassis", "power", "status").stdout.strip()
        assert out in ("Chassis Power is on", "Chassis Power is off"), out
        return out.endswith("on")

    def state(self):
        with open(os.path.join(self.work, "power.state")) as f:
            return f.read().strip()

    def hook_calls(self):
        try:
            with open(os.path.join(self.work, "hook.calls")) as f:
                return f.read().split()
        except FileNotFoundError:
            return []


def pid_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is gone for our purposes
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except FileNotFoundError:
        return False


def check_power_and_dcmi(b):
    assert not b.power(), "a new BMC starts with power off"
    b.ipmitool("chassis", "power", "on")
    assert b.power() and b.state() == "1"
    with open(os.path.join(b.work, "watts"), "w") as f:
        f.write("230\n")
    out = b.ipmitool("dcmi", "power", "reading").stdout
    assert "Instantaneous power reading:                   230 Watts" in out, out
    assert "activated" in out, out
    with open(os.path.join(b.work, "watts"), "w") as f:
        f.write("none\n")
    out = b.ipmitool("dcmi", "power", "reading").stdout
    assert "deactivated" in out, out
    b.ipmitool("chassis", "power", "off")
    assert not b.power() and b.state() == "0"
    with open(os.path.join(b.work, "watts"), "w") as f:
        f.write("230\n")
    out = b.ipmitool("dcmi", "power", "reading").stdout
    assert "Instantaneous power reading:                     0 Watts" in out, out


def check_hook(b):
    hook = os.path.join(b.work, "power.state.hook")
    with open(hook, "w") as f:
        f.write(HOOK)
    os.chmod(hook, 0o755)
    b.ipmitool("chassis", "power", "on")
    assert b.power() and b.hook_calls() == ["on"], b.hook_calls()
    # soft shutdown (chassis control 0x05): hook soft-off, then power 0
    b.ipmitool("chassis", "power", "soft")
    assert not b.power() and b.hook_calls() == ["on", "soft-off"], b.hook_calls()
    b.ipmitool("chassis", "power", "on")
    # a refusing hook: the BMC answers an error and the state is kept
    open(os.path.join(b.work, "hook.refuse"), "w").close()
    p = b.ipmitool("chassis", "power", "soft", check=False)
    assert p.returncode != 0, "a refused soft-off must fail"
    p = b.ipmitool("chassis", "power", "off", check=False)
    assert p.returncode != 0, "a refused power off must fail"
    assert b.power() and b.state() == "1"
    assert b.hook_calls() == ["on", "soft-off", "on", "soft-off", "off"], b.hook_calls()
    os.unlink(os.path.join(b.work, "hook.refuse"))
    b.ipmitool("chassis", "power", "off")
    assert not b.power()
    with open(os.path.join(b.work, "power.state.log")) as f:
        log = f.read()
    assert "hook soft-off rc=3" in log and "hook off rc=0" in log, log


def main():
    missing = [t for t in ("ipmi_sim", "ipmitool") if not shutil.which(t)]
    if not shutil.which(os.environ.get("CC", "gcc")):
        missing.append("gcc")
    if missing:
        print("SKIP: missing " + ", ".join(missing))
        return 77
    with tempfile.TemporaryDirectory(prefix="watt-ipmi-kit-") as work:
        b = Bmc(work)
        t0 = time.monotonic()
        b.start()
        try:
            print(f"ipmi_sim pid {b.pid} on 127.0.0.1:{b.port}, "
                  f"answered after {time.monotonic() - t0:.2f} s")
            check_power_and_dcmi(b)
            check_hook(b)
        finally:
            b.stop()
        assert not pid_alive(b.pid), f"ipmi_sim {b.pid} still runs after run.sh stop"
        assert not os.path.exists(os.path.join(work, "ipmi_sim.pid"))
    leftovers = [f for f in os.listdir(KIT) if f.endswith((".so", ".log", ".conf"))]
    assert not leftovers, f"run.sh wrote into the source tree: {leftovers}"
    print("ok: power on/off, DCMI reading (and none), hook on/soft-off/refusal, stop")
    return 0


if __name__ == "__main__":
    sys.exit(main())
