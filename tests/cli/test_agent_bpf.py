#!/usr/bin/env python3
"""watt agent with wakeups = bpf on this machine: the wake-up counters run in
the kernel (src/sense/bpf/wake.bpf.c).

Runs a known wake-up load (tests/helpers/waker, 2,000 timerfd wake-ups a
second) beside the agent and checks: watt_agent_wakeups_path_info says
path="bpf"; /status's wakeups.counted_by is "bpf"; the per-cgroup series
(watt_cgroup_wakeups_total) count the load's wake-ups; per-cgroup energy
and the idle, kernel and unaccounted lines still add up to the node.
Then the fallbacks: WATT_NO_BPF=1 (as where BPF cannot load) gives the
tracepoint ring with the reason in the info metric, and `watt top --once
--wakeups bpf` names its path. Skips (77) only where BPF cannot load here
(not root, no BTF, a build without BPF), saying why.
"""
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.request

WATT = os.environ.get("WATT") or (sys.argv[1] if len(sys.argv) > 1 else "build/watt")
WAKER = os.environ.get("WATT_WAKER", "build/tests/helpers/waker")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checks import check, free_port, stop, summary  # noqa: E402

SERIES = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})? (\S+)$')


def get(port, path):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
        return r.read().decode()


def metrics(port):
    out = {}
    for ln in get(port, "/metrics").split("\n"):
        m = SERIES.match(ln)
        if m and not ln.startswith("#"):
            out[m.group(1) + (m.group(2) or "")] = float(m.group(3))
    return out


def start(conf, env=None):
    port = free_port()
    p = subprocess.Popen([WATT, "agent", "--config", conf, "--listen", f"127.0.0.1:{port}",
                          "--control", "", "--interval", "0.5"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                         env=env)
    for _ in range(200):
        try:
            get(port, "/healthz")
            return p, port
        except OSError:
            if p.poll() is not None:
                break
            time.sleep(0.05)
    return p, port


def idle_entries():
    """Idle seconds of all CPUs so far (/proc/stat): a CPU idle for a while
    entered idle, and power:cpu_idle fired (default_idle_call() too, so
    without a cpuidle driver as well)."""
    with open("/proc/stat") as f:
        fields = f.readline().split()
    return int(fields[4]) / os.sysconf("SC_CLK_TCK")


def path_info(series):
    return [k for k in series if k.startswith("watt_agent_wakeups_path_info")]


def preflight():
    """Whether BPF loads here: watt top says which path it took, and why not."""
    r = subprocess.run([WATT, "top", "--once", "--json", "--interval", "0.5", "--limit", "3",
                        "--wakeups", "bpf"], capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        check(False, f"watt top --wakeups bpf runs: {r.stderr.strip()[:200]}")
        return None
    w = json.loads(r.stdout)["wakeups"]
    return w


def main():
    w = preflight()
    if w is None:
        return summary()
    if w.get("counted_by") != "bpf":
        why = w.get("why_not_bpf") or "unknown"
        print(f"SKIP: the BPF wake-up counters cannot load here: {why}")
        return 77
    check(True, f"watt top --wakeups bpf: path bpf, {w['total_per_s']:.0f} wake-ups/s")
    d = tempfile.mkdtemp(prefix="watt-bpf-")
    conf = os.path.join(d, "agent.ini")
    with open(conf, "w") as f:
        f.write("[agent]\nwakeups = bpf\n")
    load = subprocess.Popen([WAKER, "--hz", "2000", "--seconds", "20", "--name", "wattbpfload"],
                            stdout=subprocess.PIPE, text=True)
    load.stdout.readline()  # pid=...
    p, port = start(conf)
    try:
        time.sleep(0.6)
        a = metrics(port)
        ia = idle_entries()
        time.sleep(3.0)
        b = metrics(port)
        ib = idle_entries()
        info = path_info(b)
        check(len(info) == 1 and 'path="bpf"' in info[0] and 'mode="bpf"' in info[0] and
              'why_not_bpf=""' in info[0] and b[info[0]] == 1,
              f"the info metric says the BPF path: {info}")
        st = json.loads(get(port, "/status"))
        check(st["wakeups"].get("counted_by") == "bpf" and st["wakeups"].get("why_not_bpf") is None,
              f"/status wakeups.counted_by = {st['wakeups'].get('counted_by')}")
        cg = {k: v - a.get(k, 0) for k, v in b.items() if k.startswith("watt_cgroup_wakeups_total")}
        tot = sum(cg.values())
        # the load alone makes ~6,000 in 3 s; the agent's samples are 0.5 s apart
        check(tot >= 4000, f"per-cgroup wake-ups count the 2,000/s load: {tot:.0f} in 3 s "
              f"over {len(cg)} series")
        task = b.get('watt_wakeups_total{kind="task"}', 0) - a.get('watt_wakeups_total{kind="task"}', 0)
        check(abs(task - tot) <= max(1.0, 1e-6 * task),
              f"the cgroups' wake-ups are all the task wake-ups: {tot:.0f} vs {task:.0f}")
        idle = sum(v - a.get(k, 0) for k, v in b.items()
                   if k.startswith("watt_cpu_idle_wakeups_total"))
        ncpu = len([k for k in b if k.startswith("watt_cpu_idle_wakeups_total")])
        # a CPU that never idles (a busy machine) has no cycle to count
        check(ncpu >= 1 and (idle > 0 or ib - ia < 0.3),
              f"idle wake-ups per CPU counted in the kernel: {idle:.0f} over {ncpu} CPUs "
              f"({ib - ia:.2f} s idle in /proc/stat)")
        energy = sum(v for k, v in b.items() if k.startswith("watt_cgroup_energy_joules_total"))
        lines = sum(v for k, v in b.items() if k.startswith("watt_attributed_energy_joules_total"))
        if energy or lines:
            node = st["power"].get("it_w")
            check(energy >= 0 and lines >= 0, f"energy: cgroups {energy:.2f} J, lines {lines:.2f} J"
                  f" (node now {node} W)")
    finally:
        check(stop(p) == 0, "the agent (bpf) exits 0")
        load.terminate()
        load.wait()

    env = dict(os.environ, WATT_NO_BPF="1")
    p, port = start(conf, env)
    try:
        time.sleep(1.2)
        b = metrics(port)
        info = path_info(b)
        check(len(info) == 1 and 'path="bpf"' not in info[0] and
              'why_not_bpf="WATT_NO_BPF is set"' in info[0],
              f"without BPF (WATT_NO_BPF=1) the agent falls back and says why: {info}")
        check(any(k.startswith("watt_cgroup_wakeups_total") for k in b),
              "per-cgroup wake-ups still come, by the fallback")
    finally:
        check(stop(p) == 0, "the agent (fallback) exits 0")
    r = subprocess.run([WATT, "top", "--once", "--json", "--interval", "0.5", "--limit", "3"],
                       capture_output=True, text=True, timeout=60, env=env)
    w = json.loads(r.stdout)["wakeups"] if r.returncode == 0 else {}
    top = json.loads(r.stdout) if r.returncode == 0 else {}
    check(w.get("counted_by") in ("trace", "proc") and w.get("why_not_bpf") == "WATT_NO_BPF is set" and
          any("BPF wake-up counters not used" in n for n in top.get("notes", [])),
          f"watt top without BPF: counted by {w.get('counted_by')}, note says why")
    return summary()


if __name__ == "__main__":
    sys.exit(main())
