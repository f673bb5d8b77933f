#!/usr/bin/env python3
"""watt and node_exporter read the same fixture tree
(tests/fixtures/node_exporter, node_exporter's own end-to-end fixture):
every quantity both export must be equal to node_exporter's e2e-output.txt.

Compared: RAPL joules, per-CPU /proc/stat seconds per mode and guest
seconds, cpufreq current/min/max and governor, /proc/cpuinfo MHz, context
switches, interrupts, forks, running/blocked processes, boot time, and
every per-CPU count of /proc/interrupts. A value watt lacks is a failure,
not a skip."""
import json
import os
import re
import subprocess
import sys

WATT = os.environ["WATT"]
ROOT = os.path.join(os.environ["WATT_FIXTURES"], "node_exporter")
E2E = os.path.join(os.environ["WATT_TESTDIR"], "fixtures", "node_exporter", "e2e-output.txt")

LINE = re.compile(r'^([a-z_:]+)(?:\{(.*)\})? (\S+)$')
LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def load_e2e():
    metrics = {}
    for line in open(E2E):
        m = LINE.match(line.strip())
        if not m:
            continue
        name, labels, value = m.groups()
        lab = dict(LABEL.findall(labels or ""))
        metrics.setdefault(name, []).append((lab, float(value)))
    return metrics


class Compare:
    def __init__(self):
        self.n = 0
        self.bad = []

    def eq(self, what, ours, theirs, tol=0.0):
        self.n += 1
        if ours is None or abs(ours - theirs) > tol * max(1.0, abs(theirs)):
            self.bad.append(f"{what}: watt {ours} != node_exporter {theirs}")


def main():
    e2e = load_e2e()
    p = subprocess.run([WATT, "report", "--root", ROOT, "--interval", "0", "--json"],
                       capture_output=True, text=True)
    if p.returncode != 0:
        print(f"FAIL: watt report exited {p.returncode}: {p.stderr}")
        return 1
    r = json.loads(p.stdout)
    c = Compare()

    # RAPL: node_rapl_<domain>_joules_total{index="0"}
    chans = {ch["domain"]: ch for ch in r["power"]["channels"] if ch["source"] == "rapl"}
    for name, series in e2e.items():
        m = re.match(r"node_rapl_(\w+)_joules_total$", name)
        if not m:
            continue
        for lab, v in series:
            dom = f"{m.group(1)}-{lab.get('index', '0')}"
            # exact: both divide the same µJ integer by 1e6
            c.eq(f"rapl {dom} joules", chans.get(dom, {}).get("joules"), v)

    util = {x["cpu"]: x for x in r["utilisation"]["per_cpu"]}
    for lab, v in e2e["node_cpu_seconds_total"]:
        cpu = util.get(int(lab["cpu"]), {})
        c.eq(f"cpu{lab['cpu']} {lab['mode']} seconds", cpu.get("seconds", {}).get(lab["mode"]), v,
             1e-12)
    for lab, v in e2e["node_cpu_guest_seconds_total"]:
        key = "guest" if lab["mode"] == "user" else "guest_nice"
        cpu = util.get(int(lab["cpu"]), {})
        c.eq(f"cpu{lab['cpu']} guest {lab['mode']}", cpu.get("seconds", {}).get(key), v, 1e-12)

    freq = {x["cpu"]: x for x in r["frequency"]["per_cpu"]}
    for metric, key in (("node_cpu_scaling_frequency_hertz", "scaling_cur_khz"),
                        ("node_cpu_scaling_frequency_min_hertz", "scaling_min_khz"),
                        ("node_cpu_scaling_frequency_max_hertz", "scaling_max_khz")):
        for lab, v in e2e[metric]:
            khz = freq.get(int(lab["cpu"]), {}).get(key)
            c.eq(f"cpu{lab['cpu']} {key}", None if khz is None else khz * 1000, v)
    for lab, v in e2e["node_cpu_scaling_governor"]:
        gov = freq.get(int(lab["cpu"]), {}).get("governor")
        c.eq(f"cpu{lab['cpu']} governor {lab['governor']}", float(gov == lab["governor"]), v)
    mhz = {x["cpu"]: x["mhz"] for x in r["frequency"]["proc_cpuinfo_mhz"]}
    for lab, v in e2e["node_cpu_frequency_hertz"]:
        m = mhz.get(int(lab["cpu"]))
        c.eq(f"cpu{lab['cpu']} cpuinfo MHz", None if m is None else m * 1e6, v, 1e-9)

    u = r["utilisation"]
    for metric, key in (("node_context_switches_total", "context_switches"),
                        ("node_intr_total", "interrupts"), ("node_forks_total", "forks"),
                        ("node_procs_running", "procs_running"),
                        ("node_procs_blocked", "procs_blocked"),
                        ("node_boot_time_seconds", "boot_time_s")):
        c.eq(key, u.get(key), e2e[metric][0][1])

    irqs = {s["irq"]: s for s in r["interrupts"]["sources"]}
    for lab, v in e2e["node_interrupts_total"]:
        src = irqs.get(lab["type"])
        count = None
        if src:
            # per_cpu lists the CPUs with a non-zero count (docs/report-json.md)
            count = next((x["count"] for x in src["per_cpu"] if x["cpu"] == int(lab["cpu"])), 0)
        c.eq(f"irq {lab['type']} cpu{lab['cpu']}", count, v)

    for b in c.bad:
        print("FAIL:", b)
    print(f"{c.n} values compared with node_exporter, {len(c.bad)} differ")
    if c.n < 200:
        print("FAIL: fewer values compared than the fixture holds")
        return 1
    return 1 if c.bad else 0


if __name__ == "__main__":
    sys.exit(main())
