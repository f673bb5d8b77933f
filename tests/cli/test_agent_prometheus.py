#!/usr/bin/env python3
"""A real Prometheus server scrapes watt agent every second, on 127.0.0.1.

The agent runs on a copy of node_exporter's fixture root whose RAPL
package counter the test advances, and wraps, while Prometheus scrapes.
Through Prometheus' HTTP API: the energy, C-state and self series exist,
rate() of the energy counters is finite and non-negative, and
resets() of them is 0 (no decrease across the hardware wrap).
Exits 77 (skipped) when no prometheus binary is installed.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

WATT = os.environ.get("WATT") or (sys.argv[1] if len(sys.argv) > 1 else "build/watt")
FIXTURES = os.environ.get("WATT_FIXTURES", "build/tests/fixtures")
from checks import check, free_port, stop, summary  # noqa: E402


def http(url, timeout=2):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read().decode()


def query(pport, q):
    u = f"http://127.0.0.1:{pport}/api/v1/query?" + urllib.parse.urlencode({"query": q})
    doc = json.loads(http(u))
    return doc["data"]["result"] if doc.get("status") == "success" else None


def wait_for(fn, seconds):
    end = time.time() + seconds
    while time.time() < end:
        try:
            v = fn()
            if v:
                return v
        except OSError:
            pass
        time.sleep(0.25)
    return None


def main():
    prom = shutil.which("prometheus")
    if not prom:
        print("SKIP: prometheus is not installed (tools/setup.sh --test installs it)")
        return 77
    with tempfile.TemporaryDirectory() as d:
        root = os.path.join(d, "root")
        shutil.copytree(os.path.join(FIXTURES, "node_exporter"), root, symlinks=True)
        aport, pport = free_port(), free_port()
        agent = subprocess.Popen([WATT, "agent", "--root", root, "--interval", "0.5", "--control", "",
                                  "--listen", f"127.0.0.1:{aport}"],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        with open(os.path.join(d, "prometheus.yml"), "w") as f:
            f.write("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                    "scrape_configs:\n  - job_name: watt\n    static_configs:\n"
                    f"      - targets: ['127.0.0.1:{aport}']\n")
        server = subprocess.Popen([prom, f"--config.file={d}/prometheus.yml",
                                   f"--storage.tsdb.path={d}/tsdb",
                                   f"--web.listen-address=127.0.0.1:{pport}"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            up = wait_for(lambda: query(pport, 'up{job="watt"} == 1'), 30)
            check(bool(up), "Prometheus scrapes the agent (up == 1)")
            energy_uj = os.path.join(root, "sys/class/powercap/intel-rapl:0/energy_uj")
            with open(os.path.join(root, "sys/class/powercap/intel-rapl:0/max_energy_range_uj")) as f:
                top = int(f.read())
            value = top - 12_000_000
            for _ in range(24):  # 12 s: 1 J per half second, wrapping half way
                value = (value + 1_000_000) % (top + 1)
                with open(energy_uj + ".new", "w") as f:
                    f.write(f"{value}\n")
                os.replace(energy_uj + ".new", energy_uj)
                time.sleep(0.5)
            # 8 s of 1-s scrapes, all inside the feed: robust on a busy CI machine
            rates = query(pport, "rate(watt_energy_joules_total[8s])") or []
            for name in ("watt_energy_joules_total", "watt_cpu_scaling_frequency_hertz",
                         "watt_cpu_seconds_total", "watt_agent_cpu_seconds_total"):
                r = query(pport, name)
                check(bool(r), f"{name}: {len(r or [])} series in Prometheus")
            vals = [float(s["value"][1]) for s in rates]
            check(vals and all(v == v and v >= 0 and v != float("inf") for v in vals),
                  f"rate() of the energy counters finite and >= 0: {vals[:4]}")
            pkg = [float(s["value"][1]) for s in rates
                   if s["metric"].get("domain") == "package-0"]
            check(pkg and 1.0 <= pkg[0] <= 3.0,
                  f"package-0 draws the 2 W the test feeds it, across the wrap: {pkg}")
            resets = query(pport, "resets(watt_energy_joules_total[1m])") or []
            check(resets and all(float(s["value"][1]) == 0 for s in resets),
                  "resets() of the energy counters is 0: they never decreased")
        finally:
            for p in (server, agent):
                stop(p, timeout=10)
    return summary()


if __name__ == "__main__":
    sys.exit(main())
