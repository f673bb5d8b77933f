#!/usr/bin/env python3
"""What a tick of `watt fleet run` costs as the fleet grows.

usage: bench/fleet_run.py [--hosts 100,500,2000] [--vms-per-host 10] [--ticks 3] [-o FILE]

Figures only; exits 0 whatever they are. No real fleet of hundreds of hosts
is at hand, so the hosts are the exec engine's: each host's `list` command
is `cat` of a file with its domains (one process per host per tick, no
shell, as a script talking to OpenStack or Redfish would cost at least),
power = none.
Every tick then observes all hosts (32 in parallel), builds the simulator
snapshot and runs the watt policy on it (`--dry-run`: the plan, usually a
few hundred migrations at the first tick with CPU rates, is not executed).

Per fleet size it prints, from the ticks after the first (the first has no
CPU rates and plans nothing):
  observe   wall s to list every host (the controller's own figure, median)
  plan      wall s to build the snapshot and plan (median)
  CPU       user+sys s of the whole run / ticks (includes the cats)
  RSS       peak resident set of watt, MiB (GNU time %M)
There is no peer to run beside it here: OpenStack Watcher and the VMware DPM
clones need their whole stacks; their published tick costs are not comparable.
"""
import argparse
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
WATT = os.environ.get("WATT", os.path.join(HERE, "..", "build", "watt"))


def make_fleet(d, n_hosts, per_host):
    lines = ["[controller]", "interval_s = 1", "vm_engine = exec", "power = none",
             "max_concurrent_migrations = 1000", "migrations_per_host = 1000",
             f"state_dir = {d}/state", "", "[exec]",
             f"list = cat {d}/{{host}}.list", "migrate = true", "timeout_s = 60", ""]
    for h in range(n_hosts):
        name = f"h{h}"
        lines += [f"[host {name}]", "type = g5", ""]
        with open(os.path.join(d, f"{name}.list"), "w") as f:
            for v in range(per_host):
                # NAME STATE CPU_NS MEM_KIB VCPUS: some load, varied
                cpu = (h * 7919 + v * 104729) % 10**9
                f.write(f"{name}v{v} running {cpu} 131072 1\n")
    path = os.path.join(d, "fleet.ini")
    with open(path, "w") as f:
        f.write("\n".join(lines))
    return path


def run(config, ticks):
    time_bin = shutil.which("time") or "/usr/bin/time"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    args = [WATT, "fleet", "run", "--config", config, "--dry-run", "--ticks", str(ticks), "--json"]
    rss = None
    if os.path.exists(time_bin):
        p = subprocess.run([time_bin, "-f", "RSS %M", *args], capture_output=True, text=True)
        for ln in p.stderr.splitlines():
            if ln.startswith("RSS "):
                rss = int(ln.split()[1]) / 1024
    else:
        p = subprocess.run(args, capture_output=True, text=True)
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    docs = [json.loads(ln) for ln in p.stdout.splitlines() if ln.startswith("{")]
    return p.returncode, docs, wall, cpu, rss, p.stderr


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--hosts", default="100,500,2000")
    ap.add_argument("--vms-per-host", type=int, default=10)
    ap.add_argument("--ticks", type=int, default=3)
    ap.add_argument("-o", "--output")
    a = ap.parse_args()
    out = [f"# bench/fleet_run.py  {time.strftime('%Y-%m-%d %H:%M')}  {platform.node()}  "
           f"{os.cpu_count()} CPUs  ticks {a.ticks}",
           f"{'hosts':>6} {'VMs':>7} {'observe s':>10} {'plan s':>8} {'actions':>8} "
           f"{'CPU s/tick':>11} {'RSS MiB':>8}"]
    print("\n".join(out), flush=True)
    for n in [int(x) for x in a.hosts.split(",")]:
        d = tempfile.mkdtemp(prefix="wattbench")
        try:
            cfg = make_fleet(d, n, a.vms_per_host)
            rc, docs, wall, cpu, rss, err = run(cfg, a.ticks)
            if rc != 0 or len(docs) < 2:
                line = f"{n:>6} failed: exit {rc}: {err.strip()[:200]}"
            else:
                later = docs[1:]
                obs = statistics.median(x["observe_s"] for x in later)
                plan = statistics.median(x["plan_s"] for x in later)
                acts = max(len(x["actions"]) for x in later)
                line = (f"{n:>6} {n * a.vms_per_host:>7} {obs:>10.3f} {plan:>8.3f} {acts:>8} "
                        f"{cpu / len(docs):>11.2f} {rss if rss else float('nan'):>8.1f}")
        finally:
            shutil.rmtree(d, ignore_errors=True)
        print(line, flush=True)
        out.append(line)
    if a.output:
        with open(a.output, "w") as f:
            f.write("\n".join(out) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
