#!/usr/bin/env python3
"""A real Prometheus server scrapes watt agent every second, on 127.0.0.1.

The agent runs on a copy of node_exporter's fixture root whose RAPL
package counter the test advances, and wraps, while Prometheus scrapes.
Through Prometheus' HTTP API: the energy, C-state and self series exist,
rate() of the energy counters is finite and non-negative, and
resets() of them is 0 (no decrease across the hardware wrap).

A second agent runs on a copy of the intel-2s root with a latency guard
profile (port 6379 busy in a fake /proc/net/tcp), per-cgroup wake-ups from
/proc, the fleet controller's metrics from tests/cli/fleet_metrics.prom
and a broken /proc/interrupts (a directory). Prometheus asks it for
OpenMetrics (its default Accept header) with gzip, and loads
dist/prometheus/watt-rules.yml (its `for:` durations cut to 0 so that the
alerts fire within the test). Checked: promtool check rules, promtool
check metrics on the text format; the watt_fleet_* series are stored;
every recording rule in the file evaluates to a non-empty result; every
PromQL expression of dist/grafana/watt-dashboard.json (its $variables
substituted) returns data; WattSamplerDown fires for sampler="irq" and
WattFleetSafetyRefusals once the controller's refusal counter rises.
Exits 77 (skipped) when no prometheus binary is installed.
"""
import gzip
import re
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
TESTS = os.environ.get("WATT_TESTDIR") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
SRC = os.environ.get("WATT_SRCDIR") or os.path.dirname(os.path.abspath(TESTS))
RULES = os.path.join(SRC, "dist/prometheus/watt-rules.yml")
DASHBOARD = os.path.join(SRC, "dist/grafana/watt-dashboard.json")
from checks import check, free_port, stop, summary  # noqa: E402

# Prometheus' own Accept header (scrape.go, 2.42)
PROM_ACCEPT = ("application/openmetrics-text;version=1.0.0,application/openmetrics-text;"
               "version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1")

# The guard's profile and a /proc/net/tcp with two clients on port 6379
# (as test_tune_guard_live.py's fixture part).
GUARD_PROFILE = """[profile]
description = prometheus test: a port guard
[latency]
workload = port:6379
latency_us = 20
cpus = 1-2
busy_connections = 2
busy_after_s = 0
idle_after_s = 0.4
"""
TCP = ("  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt"
       "   uid  timeout inode\n"
       "   0: 0100007F:18EB 00000000:0000 0A 00000000:00000000 00:00000000 00000000"
       "   999        0 1 1 0000000000000000 100 0 0 10 0\n"
       + "".join(f"   {i + 1}: 0100007F:18EB 0100007F:{0xC350 + i:04X} 01 00000000:00000000"
                 " 00:00000000 00000000   999        0 2 1 0000000000000000 20 4 30 10 -1\n"
                 for i in range(2)))


def http(url, timeout=2):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read().decode()


def query(pport, q):
    u = f"http://127.0.0.1:{pport}/api/v1/query?" + urllib.parse.urlencode({"query": q})
    doc = json.loads(http(u))
    return doc["data"]["result"] if doc.get("status") == "success" else None


def fetch(aport, accept=None, encoding=None):
    req = urllib.request.Request(f"http://127.0.0.1:{aport}/metrics")
    if accept:
        req.add_header("Accept", accept)
    if encoding:
        req.add_header("Accept-Encoding", encoding)
    with urllib.request.urlopen(req, timeout=2) as r:
        body = r.read()
        return r.headers, gzip.decompress(body) if r.headers.get("Content-Encoding") == "gzip" else body


def start_fleet_agent(d, aport):
    """The second agent: intel-2s, guard, per-cgroup wake-ups, fleet_metrics,
    a broken /proc/interrupts."""
    root = os.path.join(d, "root2")
    shutil.copytree(os.path.join(FIXTURES, "intel-2s"), root, symlinks=True)
    if os.path.exists(os.path.join(root, "watt-faults")):
        os.remove(os.path.join(root, "watt-faults"))
    with open(os.path.join(root, "proc/net/tcp"), "w") as f:
        f.write(TCP)
    os.remove(os.path.join(root, "proc/interrupts"))
    os.mkdir(os.path.join(root, "proc/interrupts"))
    conf = os.path.join(d, "conf")
    os.makedirs(os.path.join(conf, "profiles.d"))
    with open(os.path.join(conf, "profiles.d/guard.conf"), "w") as f:
        f.write(GUARD_PROFILE)
    fleet = os.path.join(d, "fleet.prom")
    shutil.copy(os.path.join(TESTS, "cli/fleet_metrics.prom"), fleet)
    ini = os.path.join(d, "agent2.ini")
    with open(ini, "w") as f:
        f.write(f"[agent]\nprofile = guard\nwakeups = proc\nfleet_metrics = {fleet}\n")
    env = dict(os.environ, WATT_CONFIG_DIR=conf)
    p = subprocess.Popen([WATT, "agent", "--root", root, "--config", ini, "--interval", "0.5",
                          "--control", "", "--listen", f"127.0.0.1:{aport}"], env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    return p, fleet


def bump_refusals(fleet):
    """The controller refused one more power-off: its file, rewritten by rename."""
    with open(fleet) as f:
        text = f.read()
    text = text.replace("watt_fleet_safety_refusals_total 1\n", "watt_fleet_safety_refusals_total 2\n")
    with open(fleet + ".new", "w") as f:
        f.write(text)
    os.replace(fleet + ".new", fleet)


def dashboard_exprs():
    """Every target's expr in the dashboard, rows' panels included, with the
    variables as Grafana substitutes them for "All" and a short range."""
    with open(DASHBOARD) as f:
        doc = json.load(f)
    out = []

    def walk(panels):
        for p in panels:
            walk(p.get("panels", []))
            for t in p.get("targets", []):
                if t.get("expr"):
                    out.append((p["title"], t["expr"]))
    walk(doc["panels"])
    subst = {"$instance": ".+", "$__rate_interval": "1m", "$__range": "1m", "$__interval": "5s"}
    return [(title, re.sub(r"\$\w+", lambda m: subst.get(m.group(0), m.group(0)), e))
            for title, e in out]


def rules_for_test(d):
    """The rules with every `for:` cut to 0s, so alerts fire at their first
    evaluation; the names of the recording rules and of the alerts."""
    with open(RULES) as f:
        text = f.read()
    path = os.path.join(d, "rules.yml")
    with open(path, "w") as f:
        f.write(re.sub(r"(?m)^(\s+for:) \S+$", r"\1 0s", text))
    return (path, re.findall(r"(?m)^\s+- record: (\S+)$", text),
            re.findall(r"(?m)^\s+- alert: (\S+)$", text))


def promtool_checks(aport2, promtool_dir):
    promtool = shutil.which("promtool")
    if not promtool:
        print("skip: no promtool")
        return
    r = subprocess.run([promtool, "check", "rules", RULES], capture_output=True, text=True)
    check(r.returncode == 0, f"promtool check rules {os.path.basename(RULES)}: "
          f"{(r.stdout + r.stderr).strip().splitlines()[-1:]}")
    # the scrape-config example, its rule_files pointed at this tree's rules
    with open(os.path.join(os.path.dirname(RULES), "prometheus-scrape.yml")) as f:
        example = f.read()
    conf = os.path.join(os.path.dirname(os.path.abspath(promtool_dir)), "scrape-example.yml")
    with open(conf, "w") as f:
        f.write(example.replace("/etc/prometheus/watt-rules.yml", RULES))
    r = subprocess.run([promtool, "check", "config", conf], capture_output=True, text=True)
    check(r.returncode == 0 and "rule files found" in r.stdout,
          f"promtool check config prometheus-scrape.yml: {(r.stdout + r.stderr).strip()[-200:]}")
    _, text = fetch(aport2)
    r = subprocess.run([promtool, "check", "metrics"], input=text.decode(), capture_output=True,
                       text=True)
    check(r.returncode == 0, f"promtool check metrics on the text format with fleet metrics "
          f"{(r.stdout + r.stderr).strip()[:300]}")


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
        aport, pport, aport2 = free_port(), free_port(), free_port()
        rules, records, alerts = rules_for_test(d)
        agent2, fleet = start_fleet_agent(d, aport2)
        agent = subprocess.Popen([WATT, "agent", "--root", root, "--interval", "0.5", "--control", "",
                                  "--listen", f"127.0.0.1:{aport}"],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        with open(os.path.join(d, "prometheus.yml"), "w") as f:
            f.write("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                    f"rule_files: ['{rules}']\n"
                    "scrape_configs:\n  - job_name: watt\n    static_configs:\n"
                    f"      - targets: ['127.0.0.1:{aport}', '127.0.0.1:{aport2}']\n")
        server = subprocess.Popen([prom, f"--config.file={d}/prometheus.yml",
                                   f"--storage.tsdb.path={d}/tsdb",
                                   f"--web.listen-address=127.0.0.1:{pport}"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            up = wait_for(lambda: (lambda r: r if len(r or []) == 2 else None)(
                query(pport, 'up{job="watt"} == 1')), 30)
            check(len(up or []) == 2, "Prometheus scrapes both agents (up == 1)")
            promtool_checks(aport2, os.path.join(d, "promtool"))
            hdr, om = fetch(aport2, PROM_ACCEPT, "gzip")
            check(hdr.get("Content-Encoding") == "gzip" and "Accept-Encoding" in hdr.get("Vary", "")
                  and om.endswith(b"# EOF\n") and b"\nwatt_fleet_migrations_total{" in om
                  and b"# TYPE watt_fleet_migrations counter\n" in om,
                  "Prometheus' Accept and Accept-Encoding: gzipped OpenMetrics with the fleet's "
                  "families, # EOF last")
            energy_uj = os.path.join(root, "sys/class/powercap/intel-rapl:0/energy_uj")
            with open(os.path.join(root, "sys/class/powercap/intel-rapl:0/max_energy_range_uj")) as f:
                top = int(f.read())
            value = top - 12_000_000
            for _ in range(24):  # 12 s: 1 J per half second, wrapping half way
                value = (value + 1_000_000) % (top + 1)
                with open(energy_uj + ".new", "w") as f:
                    f.write(f"{value}\n")
                os.replace(energy_uj + ".new", energy_uj)
                if _ == 16:
                    bump_refusals(fleet)
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
                   if s["metric"].get("domain") == "package-0"
                   and s["metric"].get("instance") == f"127.0.0.1:{aport}"]
            check(pkg and 1.0 <= pkg[0] <= 3.0,
                  f"package-0 draws the 2 W the test feeds it, across the wrap: {pkg}")
            fleet_series = query(pport, '{__name__=~"watt_fleet_.+"}') or []
            names = {s["metric"]["__name__"] for s in fleet_series}
            check({"watt_fleet_migrations_total", "watt_fleet_hosts",
                   "watt_fleet_safety_refusals_total"} <= names,
                  f"Prometheus (OpenMetrics scrape) stores the fleet's series: {sorted(names)}")
            for name in records:
                r = query(pport, name)
                check(bool(r), f"recording rule {name}: {len(r or [])} series")
            exprs = dashboard_exprs()
            check(len(exprs) >= 10, f"{len(exprs)} queries in the dashboard")
            for title, e in exprs:
                r = query(pport, e)
                check(bool(r), f"dashboard '{title}': {e[:90]} returns {len(r or [])} series")
            firing = wait_for(lambda: [a for a in json.loads(http(
                f"http://127.0.0.1:{pport}/api/v1/alerts"))["data"]["alerts"]
                if a["state"] == "firing"], 5) or []
            fired = {(a["labels"]["alertname"], a["labels"].get("sampler", "")) for a in firing}
            check(("WattSamplerDown", "irq") in fired,
                  f"WattSamplerDown fires for the broken /proc/interrupts: {sorted(fired)}")
            check(("WattFleetSafetyRefusals", "") in fired,
                  "WattFleetSafetyRefusals fires when the refusal counter rises")
            check(all(a in alerts for a, _ in fired), f"only watt's alerts fire: {sorted(fired)}")
            resets = query(pport, "resets(watt_energy_joules_total[1m])") or []
            check(resets and all(float(s["value"][1]) == 0 for s in resets),
                  "resets() of the energy counters is 0: they never decreased")
        finally:
            for p in (server, agent, agent2):
                stop(p, timeout=10)
    return summary()


if __name__ == "__main__":
    sys.exit(main())
