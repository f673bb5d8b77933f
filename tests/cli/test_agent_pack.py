#!/usr/bin/env python3
"""The agent's packer ([pack], docs/pack.md) on a copy of the intel-2s
fixture root with a cgroup2 tree added (runs anywhere; the live test on a
real cgroup hierarchy is test_pack_live.py, helper packlive's):

- the agent packs system.slice and user.slice to the plan for intel-2s's
  demand (~3 busy CPUs x 1.25: CPUs 0-1,20-21), through the journal
  (owner "pack"); machine.slice is missing and skipped with a note;
- `watt ctl status` shows the "pack" member, valid against
  schema/watt-ctl-status.json;
- /metrics carries watt_pack_* in both formats, and promtool accepts the
  text format (OpenMetrics is checked for # EOF and the histogram's
  series);
- SIGHUP with a changed [pack] puts the cpusets back, then packs anew;
- SIGTERM puts every cpuset back byte for byte; after a SIGKILL the next
  start does;
- a profile naming a cgroup that does not exist is refused at start, the
  error naming the profile line.
"""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checks import check, copy_fixture, free_port, stop, summary  # noqa: E402

WATT = os.environ.get("WATT") or "build/watt"
FIXTURES = os.environ.get("WATT_FIXTURES", "build/tests/fixtures")
SRC = os.environ.get("WATT_SRCDIR", os.path.join(os.path.dirname(__file__), "..", ".."))
ENV = dict(os.environ)
ENV.pop("WATT_ROOT", None)

PROFILE = """[profile]
description = packer test
[pack]
missing = skip
interval_s = 0.1
window_s = 60
"""

CG = "sys/fs/cgroup"
ORIG = {"system.slice": "\n", "user.slice": "0-39\n"}


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def read(path):
    with open(path) as f:
        return f.read()


def http(port, path, om=False):
    with socket.create_connection(("127.0.0.1", port), timeout=5) as c:
        accept = b"Accept: application/openmetrics-text; version=1.0.0\r\n" if om else b""
        c.sendall(b"GET " + path.encode() + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n" +
                  accept + b"\r\n")
        data = b""
        while chunk := c.recv(65536):
            data += chunk
    return data.partition(b"\r\n\r\n")[2].decode(errors="replace")


def status(sock):
    r = subprocess.run([WATT, "ctl", "--socket", sock, "status"], capture_output=True, text=True,
                       env=ENV)
    return json.loads(r.stdout) if r.returncode == 0 else {}


def wait_for(pred, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if pred():
                return True
        except (OSError, ValueError):
            pass
        time.sleep(0.05)
    return False


def make_root(tmp):
    root = copy_fixture(FIXTURES, "intel-2s", tmp)
    write(os.path.join(root, CG, "cgroup.controllers"), "cpuset cpu io memory pids\n")
    write(os.path.join(root, CG, "cgroup.subtree_control"), "cpuset cpu memory\n")
    write(os.path.join(root, CG, "cpuset.cpus.effective"), "0-39\n")
    for cg, cpus in ORIG.items():
        write(os.path.join(root, CG, cg, "cpuset.cpus"), cpus)
        write(os.path.join(root, CG, cg, "cgroup.threads"), "")
        write(os.path.join(root, CG, cg, "cpu.pressure"),
              "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
              "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n")
    # /proc/stat moves when the test says so (advance()), not by a fault
    faults = os.path.join(root, "watt-faults")
    write(faults, "".join(ln for ln in open(faults) if not ln.startswith("proc/stat ")))
    shutil.copyfile(os.path.join(root, "proc/stat"), os.path.join(root, "first-stat"))
    return root


def advance(root):
    """The fixture's second /proc/stat: one second of intel-2s later."""
    shutil.copyfile(os.path.join(root, "later/proc/stat"), os.path.join(root, "proc/stat"))


def rewind(root):
    shutil.copyfile(os.path.join(root, "first-stat"), os.path.join(root, "proc/stat"))


def busy_total(path):
    """The packer's reading of a /proc/stat (packer.h): busy and total ticks."""
    with open(path) as f:
        v = [int(x) for x in f.readline().split()[1:]] + [0] * 10
    busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7]
    return busy, busy + v[3] + v[4]


def expected(root):
    """The demand and the packed set the plan gives for it (docs/pack.md:
    cores of intel-2s are cpuN and cpuN+20, package 0 first)."""
    b0, t0 = busy_total(os.path.join(root, "first-stat"))
    b1, t1 = busy_total(os.path.join(root, "later/proc/stat"))
    demand = (b1 - b0) / (t1 - t0) * 40
    cores = -(-int(-(-demand * 1.25 // 1)) // 2)
    return demand, f"0-{cores - 1},20-{20 + cores - 1}" if cores > 1 else "0,20", 2 * cores


def start(tmp, root, conf, port, sock, log):
    ini = os.path.join(tmp, "agent.ini")
    write(ini, "[agent]\nprofile = pk\nwakeups = off\n")
    return subprocess.Popen([WATT, "agent", "--config", ini, "--root", root, "--listen",
                             f"127.0.0.1:{port}", "--interval", "1", "--control", sock],
                            env=dict(ENV, WATT_CONFIG_DIR=conf), stdout=subprocess.DEVNULL,
                            stderr=log)


def cpus(root, cg):
    return read(os.path.join(root, CG, cg, "cpuset.cpus"))


def restored(root):
    return all(cpus(root, cg) == v for cg, v in ORIG.items())


def main():
    tmp = tempfile.mkdtemp(prefix="watt-agent-pack-")
    agent = None
    try:
        root = make_root(tmp)
        conf = os.path.join(tmp, "conf")
        write(os.path.join(conf, "profiles.d/pk.conf"), PROFILE)
        port, sock = free_port(), os.path.join(tmp, "ctl.sock")
        logp = os.path.join(tmp, "agent.log")
        with open(logp, "w") as log:
            agent = start(tmp, root, conf, port, sock, log)
        time.sleep(0.5)  # a first /proc/stat reading, then the second
        advance(root)
        demand, want, nwant = expected(root)
        packed = wait_for(lambda: cpus(root, "system.slice") == want + "\n", 10)
        check(packed, f"the agent packs system.slice onto {want} (intel-2s's second: "
                      f"{demand:.2f} busy CPUs x 1.25; it shows {cpus(root, 'system.slice')!r})")
        check(cpus(root, "user.slice") == want + "\n", "... and user.slice")
        journal = read(os.path.join(root, "var/lib/watt/journal"))
        check("owner=pack" in journal and "old=%0A" in journal and "old=0-39%0A" in journal,
              "the journal holds owner pack's records, the old values byte for byte")
        st = status(sock)
        pk = st.get("pack") or {}
        check(pk.get("state") == "packed" and pk.get("cpus") == want and
              pk.get("ncpus") == nwant, f"watt ctl status: pack {pk.get('state')} "
              f"{pk.get('cpus')!r} ({pk.get('ncpus')} CPUs)")
        notes = {c["path"]: c for c in pk.get("cgroups", [])}
        check(notes.get("machine.slice", {}).get("note") == "does not exist" and
              notes.get("system.slice", {}).get("packed") is True,
              f"status: machine.slice skipped, said why ({notes.get('machine.slice')})")
        check(abs((pk.get("demand_cpus") or 0) - demand) < 1e-6 and
              abs((pk.get("target_cpus") or 0) - pk["demand_cpus"] * 1.25) < 1e-6,
              f"status: demand {pk.get('demand_cpus')}, target {pk.get('target_cpus')}")
        try:
            import jsonschema
            with open(os.path.join(SRC, "schema", "watt-ctl-status.json")) as f:
                v = jsonschema.Draft7Validator(json.load(f))
            errs = [e.message[:120] for e in v.iter_errors(st)]
            check(not errs, f"watt ctl status is valid against its schema ({errs[:2]})")
        except ImportError:
            check(False, "python3-jsonschema is not installed")

        # metrics are of the last sample (every second): wait for one after the packing
        wait_for(lambda: f"watt_pack_cpus {nwant}" in http(port, "/metrics").splitlines(), 5)
        text = http(port, "/metrics")
        om = http(port, "/metrics", om=True)
        for name in [f"watt_pack_cpus {nwant}", 'watt_pack_actions_total{action="grow"} 1',
                     "watt_pack_pressure_events_total 0",
                     'watt_pack_grow_latency_seconds_bucket{le="+Inf"} 0',
                     "watt_pack_grow_latency_seconds_count 0"]:
            check(name in text.splitlines(), f"/metrics: {name}")
        check(any(ln.startswith("watt_pack_demand_cpus ") for ln in text.splitlines()),
              "/metrics: watt_pack_demand_cpus")
        check("# TYPE watt_pack_grow_latency_seconds histogram" in om and
              "# UNIT watt_pack_grow_latency_seconds seconds" in om and
              "# TYPE watt_pack_actions counter" in om and om.rstrip().endswith("# EOF"),
              "OpenMetrics: the histogram with its unit, counters without _total, # EOF")
        promtool = shutil.which("promtool")
        if promtool:
            r = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True,
                               text=True)
            bad = [ln for ln in (r.stdout + r.stderr).splitlines() if "watt_pack" in ln]
            check(not bad, f"promtool check metrics: nothing about watt_pack_* ({bad[:2]})")

        # SIGHUP with a changed [pack]: the old packing is put back, the new
        # one measured and applied (headroom 0.5: more CPUs)
        write(os.path.join(conf, "profiles.d/pk.conf"), PROFILE + "headroom = 0.5\n")
        rewind(root)
        agent.send_signal(signal.SIGHUP)
        check(wait_for(lambda: restored(root), 5), "SIGHUP, [pack] changed: the cpusets are "
                                                    "put back first")
        time.sleep(0.5)
        advance(root)
        cores = -(-int(-(-demand * 1.5 // 1)) // 2)
        want2 = f"0-{cores - 1},20-{20 + cores - 1}"
        check(wait_for(lambda: cpus(root, "system.slice") == want2 + "\n", 10),
              f"... then packed anew for headroom 0.5: {want2} "
              f"(shows {cpus(root, 'system.slice')!r})")
        write(os.path.join(conf, "profiles.d/pk.conf"), PROFILE)

        rc = stop(agent)
        agent = None
        check(rc == 0 and restored(root),
              f"SIGTERM: exit {rc}, every cpuset back byte for byte "
              f"({cpus(root, 'system.slice')!r}, {cpus(root, 'user.slice')!r})")

        # SIGKILL: the cpusets stay packed; the next start puts them back first
        rewind(root)
        with open(logp, "a") as log:
            agent = start(tmp, root, conf, port, sock, log)
        time.sleep(0.5)
        advance(root)
        wait_for(lambda: cpus(root, "system.slice") == want + "\n", 10)
        agent.send_signal(signal.SIGKILL)
        agent.wait()
        check(cpus(root, "system.slice") == want + "\n", "SIGKILL leaves the set packed")
        res = subprocess.run([WATT, "restore", "--root", root, "--dry-run"], capture_output=True,
                             text=True, env=ENV)
        check("system.slice/cpuset.cpus" in res.stdout + res.stderr,
              "watt restore --dry-run names the packed cpusets")
        ini2 = os.path.join(tmp, "agent2.ini")
        write(os.path.join(conf, "profiles.d/none.conf"), "[profile]\ndescription = none\n")
        write(ini2, "[agent]\nprofile = none\nwakeups = off\n")
        with open(logp, "a") as log:
            agent = subprocess.Popen([WATT, "agent", "--config", ini2, "--root", root, "--listen",
                                      f"127.0.0.1:{port}", "--interval", "1", "--control", sock],
                                     env=dict(ENV, WATT_CONFIG_DIR=conf),
                                     stdout=subprocess.DEVNULL, stderr=log)
        check(wait_for(lambda: restored(root), 10),
              "the next start (a profile without [pack]) restores the killed run's cpusets")
        stop(agent)
        agent = None

        # a cgroup that does not exist: refused at start, the line named
        write(os.path.join(conf, "profiles.d/pk.conf"),
              "[pack]\ncgroups = system.slice nosuch.slice\n")
        r = subprocess.run([WATT, "agent", "--config", os.path.join(tmp, "agent.ini"), "--root",
                            root, "--listen", f"127.0.0.1:{free_port()}", "--control",
                            os.path.join(tmp, "c2.sock")], env=dict(ENV, WATT_CONFIG_DIR=conf),
                           capture_output=True, text=True, timeout=20)
        check(r.returncode != 0 and "pk.conf:2" in r.stderr and
              "'nosuch.slice' does not exist" in r.stderr,
              f"a missing cgroup: the agent refuses to start, naming the line "
              f"({r.stderr.strip().splitlines()[-1:] if r.stderr.strip() else ''})")
        check(restored(root), "... and writes nothing")
    finally:
        if agent:
            stop(agent)
        print("--- agent log ---")
        try:
            print(read(os.path.join(tmp, "agent.log"))[-3000:])
        except OSError:
            pass
        shutil.rmtree(tmp, ignore_errors=True)
    return summary()


if __name__ == "__main__":
    sys.exit(main())
