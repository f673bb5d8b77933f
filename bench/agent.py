#!/usr/bin/env python3
"""What `watt agent` costs in all, beside prometheus-node-exporter, in one run.

Every exporter runs on this machine's real /sys and /proc, on 127.0.0.1, and
all of them run at once, so each phase measures them in the same window
(--serial: one agent at a time, the others stopped).
Figures, not a test (bench/README.md); it prints each goal and a verdict.

  modes     which `wakeups` modes the binary accepts: off, proc, trace, and
            bpf and auto when its config parser takes them (an agent is
            started with each; one that refuses its config is listed with
            its error), plus the default config (no config file);
  idle      CPU per second of each whole process (all threads,
            /proc/PID/task/*/schedstat), its wake-ups (context switches) per
            second and RSS, over --idle seconds while nobody scrapes (the
            agents sample every second);
  scrape    CPU per /metrics request, --scrapes requests back to back; with
            the idle rate this gives each exporter's total at 15-s and 60-s
            scrape intervals: idle CPU/s + CPU per scrape / interval;
  load      bench_wakeload (bench/wakeload.c) makes --wake-rate wake-ups a
            second (it counts how many it really got) for --wake-seconds:
            each agent's CPU/s and wake-ups/s meanwhile, and the machine's
            context switches per second (/proc/stat ctxt);
  samplers  where the default agent's sample time goes, when the binary
            exports watt_agent_sampler_seconds_total{sampler=...};
  wrk       64 connections for --wrk seconds against the default agent's
            /metrics: requests/s, p99 latency, errors, RSS before and after;
  fixtures  `watt agent --root FIX --interval 1` on every fixture tree the
            agent accepts, one at a time: CPU per sample
            (watt_agent_cpu_seconds_total over watt_agent_samples_total)
            against the number of online CPUs, and the least-squares slope.
"""
import argparse
import glob
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchutil import (cpu_jiffies, fit_line, loadavg, parse_prometheus,  # noqa: E402
                       proc_ctxt, shares, sum_series, verdict)

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
# Tried in this order; the binary's config parser decides which exist.
CANDIDATE_MODES = ["off", "proc", "trace", "bpf", "auto"]
SCRAPE_INTERVALS = (15, 60)

# Goals of issue 15 (and issue 4's per-scrape ratio), checked as figures.
GOAL_OFF_VS_NE = 0.5  # wakeups=off total at 15-s scrapes / node_exporter's
GOAL_IDLE_MS_S = 1.0  # default config, idle machine
GOAL_LOAD_MS_S = 20.0  # 2 % of a CPU at 10,000 wake-ups/s
GOAL_BIG_MS = 10.0  # one sample on big-384
GOAL_RSS_MB = 8.0
GOAL_WAKEUPS_S = 2.0
GOAL_SCRAPE_RATIO = 10.0


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def proc_status(pid):
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            out[k] = v.strip()
    return out


def oncpu_ns(pid):
    """On-CPU time of every thread of PID (Go runs several)."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        except OSError:
            pass
    return total


def switches(pid):
    """Context switches of every thread: each is a wake-up of the process."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            st = proc_status(f"{pid}/task/{tid}")
            total += int(st["voluntary_ctxt_switches"]) + int(st["nonvoluntary_ctxt_switches"])
        except (OSError, KeyError):
            pass
    return total


def rss_mb(pid, key="VmRSS"):
    """Resident set (VmRSS), or its anonymous part (RssAnon: heap, stacks,
    no library text), in MiB."""
    return int(proc_status(pid)[key].split()[0]) / 1024


def get(port, path="/metrics", timeout=10):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=timeout) as r:
        return r.read()


def scrape(port):
    return len(get(port))


class Proc:
    """One exporter under measurement: a watt agent or node_exporter."""

    def __init__(self, name, cmd, port, work, kind="agent"):
        self.name, self.cmd, self.port, self.kind = name, cmd, port, kind
        self.errpath = os.path.join(work, re.sub(r"[^\w.-]", "_", name) + ".err")
        self.err = open(self.errpath, "w")
        self.p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=self.err)
        self.pid = self.p.pid
        self.refused = None  # its error when it would not start
        self.res = {}

    def stderr(self):
        self.err.flush()
        with open(self.errpath) as f:
            return f.read()

    def wait_up(self, seconds=10):
        """True once /metrics answers; False (and self.refused) when it exits."""
        end = time.time() + seconds
        while time.time() < end:
            if self.p.poll() is not None:
                lines = [ln for ln in self.stderr().splitlines() if ln.strip()]
                self.refused = lines[-1] if lines else f"exit {self.p.returncode}"
                return False
            try:
                get(self.port, timeout=1)
                return True
            except OSError:
                time.sleep(0.1)
        self.refused = f"no answer on /metrics within {seconds:g} s"
        return False

    def metrics(self):
        return parse_prometheus(get(self.port).decode("utf-8", "replace"))

    def status(self):
        return json.loads(get(self.port, "/status"))

    def snap(self):
        """CPU and wake-ups so far."""
        return {"t": time.monotonic(), "cpu_ns": oncpu_ns(self.pid), "sw": switches(self.pid)}

    def stop(self):
        if self.p.poll() is None:
            self.p.terminate()
            try:
                self.p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
        self.err.close()


def start_agent(watt, name, work, mode=None, root=None, interval=1):
    port = free_port()
    cmd = [watt, "agent", "--listen", f"127.0.0.1:{port}", "--control", "",
           "--interval", f"{interval:g}"]
    if mode is not None:
        conf = os.path.join(work, re.sub(r"[^\w.-]", "_", name) + ".conf")
        with open(conf, "w") as f:
            f.write(f"[agent]\nwakeups = {mode}\n")
        cmd += ["--config", conf]
    if root is not None:
        cmd += ["--root", root]
    return Proc(name, cmd, port, work)


def window(procs, seconds):
    """Measure every process over the same window: CPU ms/s, wake-ups/s.

    The agents' own counters (m0, m1) are read by a scrape just before and
    just after the window, so the scrapes' CPU and wake-ups stay out of it."""
    m0 = {p.name: p.metrics() for p in procs if p.kind == "agent"}
    time.sleep(0.2)  # the scrape's connection closes before the window opens
    c0, j0 = proc_ctxt(), cpu_jiffies()
    a = {p.name: p.snap() for p in procs}
    time.sleep(seconds)
    b = {p.name: p.snap() for p in procs}
    c1, j1 = proc_ctxt(), cpu_jiffies()
    m1 = {p.name: p.metrics() for p in procs if p.kind == "agent"}
    out = {}
    for p in procs:
        x, y = a[p.name], b[p.name]
        dt = y["t"] - x["t"]
        out[p.name] = {
            "cpu_ms_s": (y["cpu_ns"] - x["cpu_ns"]) / 1e6 / dt,
            "wakeups_s": (y["sw"] - x["sw"]) / dt,
            "rss_mb": rss_mb(p.pid), "anon_mb": rss_mb(p.pid, "RssAnon"),
            "m0": m0.get(p.name), "m1": m1.get(p.name),
        }
    out["_ctxt_s"] = (c1[1] - c0[1]) / (c1[0] - c0[0])
    out["_busy"] = shares(j0, j1)[0]
    return out


def windows(procs, seconds, serial):
    """window() over all of procs at once, or with serial, one agent at a
    time (node_exporter beside the first) while the other agents are
    stopped (SIGSTOP: they neither run nor wake); each group's window is
    `seconds` long and opens 2 s after the others stopped. _ctxt_s is then
    the mean over the groups."""
    if not serial:
        return window(procs, seconds)
    agents = [p for p in procs if p.kind == "agent"]
    rest = [p for p in procs if p.kind != "agent"]
    groups = [[a] + (rest if i == 0 else []) for i, a in enumerate(agents)]
    out, ctxt = {}, []
    for g in groups:
        others = [a for a in agents if a not in g]
        for o in others:
            os.kill(o.pid, signal.SIGSTOP)
        try:
            # the group was stopped during the last window: its backlog
            # (a late sample, a full trace ring) is done before this one
            time.sleep(2)
            r = window(g, seconds)
        finally:
            for o in others:
                os.kill(o.pid, signal.SIGCONT)
        ctxt.append((r.pop("_ctxt_s"), r.pop("_busy")))
        out.update(r)
    out["_ctxt_s"] = sum(c for c, _ in ctxt) / len(ctxt)
    out["_busy"] = sum(b for _, b in ctxt) / len(ctxt)
    return out


def per_scrape(p, n):
    """CPU ms per /metrics request, n requests back to back."""
    size = scrape(p.port)
    c0 = oncpu_ns(p.pid)
    for _ in range(n):
        scrape(p.port)
    return (oncpu_ns(p.pid) - c0) / 1e6 / n, size


def per_sample_ms(m0, m1):
    """The agent's CPU ms per sample between two snapshots, or None."""
    if not m0 or not m1:
        return None
    n = sum_series(m1, "watt_agent_samples_total") - sum_series(m0, "watt_agent_samples_total")
    cpu = (sum_series(m1, "watt_agent_cpu_seconds_total")
           - sum_series(m0, "watt_agent_cpu_seconds_total"))
    return cpu * 1e3 / n if n > 0 else None


def samplers(m0, m1):
    """ms per sample of each sampler between two snapshots, or None."""
    fams = [k for k in m1 if re.match(r"watt_agent_sampler\w*_seconds_total$", k)]
    if not fams or not m0:
        return None
    n = sum_series(m1, "watt_agent_samples_total") - sum_series(m0, "watt_agent_samples_total")
    if n <= 0:
        return None
    out = {}
    for fam in fams:
        for labels, v in m1[fam].items():
            key = dict(labels).get("sampler") or ",".join(f"{k}={v}" for k, v in labels) or fam
            out[key] = out.get(key, 0.0) + (v - m0.get(fam, {}).get(labels, 0.0)) * 1e3 / n
    return dict(sorted(out.items(), key=lambda kv: -kv[1])), n


def wakeup_source(m):
    """Where the wake-ups come from when the agent says so in a family of
    its own (watt_wakeups_source{source="bpf"} 1 and the like), else None."""
    for fam, series in m.items():
        if re.match(r"watt_(agent_)?wakeups?_(source|method|backend|via)\w*$", fam):
            on = [", ".join(f"{k}={v}" for k, v in labels) for labels, v in series.items() if v]
            if on:
                return f"{fam}{{{'; '.join(on)}}}"
    for labels in m.get("watt_agent_sampler_info", {}):
        d = dict(labels)
        if d.get("sampler") == "wakeups" and d.get("path"):
            return f"{d['path']} (watt_agent_sampler_info{{sampler=wakeups}})"
    return None


def wrk_load(port, seconds):
    wrk = shutil.which("wrk")
    if not wrk:
        return None
    r = subprocess.run([wrk, "-t2", "-c64", f"-d{seconds}s", "--latency",
                        f"http://127.0.0.1:{port}/metrics"], capture_output=True, text=True,
                       timeout=seconds + 30)
    out = r.stdout
    rps = re.search(r"Requests/sec:\s+([\d.]+)", out)
    p99 = re.search(r"99%\s+([\d.]+)(us|ms|s)", out)
    errs = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    sock = re.search(r"Socket errors: (.*)", out)
    p99_ms = None
    if p99:
        v, unit = float(p99.group(1)), p99.group(2)
        p99_ms = v / 1000 if unit == "us" else v * 1000 if unit == "s" else v
    return {
        "rps": float(rps.group(1)) if rps else None,
        "p99_ms": p99_ms,
        "non2xx": int(errs.group(1)) if errs else 0,
        "socket_errors": sock.group(1) if sock else "none",
    }


def build_helper(builddir, target):
    exe = os.path.join(builddir, *target.split("/"))
    r = subprocess.run(["ninja", "-C", builddir, target], capture_output=True, text=True)
    if r.returncode != 0 or not os.access(exe, os.X_OK):
        print(f"agent.py: cannot build {exe}:\n{r.stdout}{r.stderr}", file=sys.stderr)
        return None
    return exe


def parse_wakeload(line):
    return {k: float(v) for k, v in re.findall(r"(\w+)=([\d.]+)", line)}


def fixture_roots(dirs):
    """Every fixture tree: a directory with sys/ under one of dirs."""
    seen, out = set(), []
    for d in dirs:
        for path in sorted(glob.glob(os.path.join(d, "*", "sys"))):
            root = os.path.dirname(path)
            name = os.path.basename(root)
            if name not in seen:
                seen.add(name)
                out.append((name, root))
    return out


def measure_fixtures(watt, work, batch, seconds):
    """Agents on fixture roots, all of batch at once: CPU per sample from
    the agent's own counters, both read from the same snapshot."""
    rows, refused = [], []
    fprocs = []
    try:
        for name, root, m in batch:
            fp = start_agent(watt, f"{name}/{m}", work, root=root,
                             mode=None if m == "default" else m)
            fp.fixture, fp.mode = name, m
            fprocs.append(fp)
        up = []
        for fp in fprocs:
            if fp.wait_up(30):
                up.append(fp)
            else:
                refused.append((fp.name, fp.refused))
        # two samples in each before the window opens (the first pays for
        # start-up, and rates need two)
        end = time.time() + 30
        try:
            while time.time() < end and any(
                    sum_series(fp.metrics(), "watt_agent_samples_total") < 2 for fp in up):
                time.sleep(0.2)
            for fp in up:
                try:
                    fp.cpus = int(fp.status()["host"]["online_cpus"])
                except (KeyError, ValueError, TypeError):
                    fp.cpus = None
            w = window(up, seconds) if up else {}
        except OSError as e:  # an agent died or stopped answering
            dead = [fp for fp in up if fp.p.poll() is not None]
            why = "; ".join(f"{fp.name} exited {fp.p.returncode}: "
                            + (fp.stderr().strip().splitlines() or [""])[-1] for fp in dead)
            return rows, refused + [(", ".join(fp.name for fp in up), why or str(e))]
        for fp in up:
            r = w[fp.name]
            m0, m1 = r["m0"], r["m1"]
            n = (sum_series(m1, "watt_agent_samples_total")
                 - sum_series(m0, "watt_agent_samples_total"))
            rows.append({
                "fixture": fp.fixture, "mode": fp.mode, "cpus": fp.cpus, "samples": n,
                "ms_sample": per_sample_ms(m0, m1),
                "wall_ms": sum_series(m1, "watt_agent_sample_duration_seconds") * 1e3,
                "cpu_ms_s": r["cpu_ms_s"], "rss_mb": r["rss_mb"],
                "samplers": samplers(m0, m1),
            })
    finally:
        for fp in fprocs:
            fp.stop()
    return rows, refused


def describe(watt):
    tree = os.path.dirname(os.path.dirname(os.path.abspath(watt)))
    r = subprocess.run(["git", "-C", tree, "describe", "--always", "--dirty"],
                       capture_output=True, text=True)
    ver = subprocess.run([watt, "--version"], capture_output=True, text=True).stdout.strip()
    return f"{ver} ({r.stdout.strip() or 'not a git tree'})"


def log(msg):
    print(f"agent.py: {msg}", file=sys.stderr, flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--watt", default=os.path.join(REPO, "build", "watt"))
    ap.add_argument("--builddir", default=None,
                    help="where bench/bench_wakeload is built (the --watt binary's folder)")
    ap.add_argument("--quick", action="store_true",
                    help="smoke run: a few seconds per phase, 20 scrapes")
    ap.add_argument("--idle", type=float, default=None, help="idle window, s (20; quick 4)")
    ap.add_argument("--scrapes", type=int, default=None,
                    help="back-to-back scrapes (100; quick 20)")
    ap.add_argument("--wake-rate", type=float, default=10000,
                    help="wake-ups/s bench_wakeload asks for (10000; 0: no load phase)")
    ap.add_argument("--wake-seconds", type=float, default=None,
                    help="load window, s (20; quick 4)")
    ap.add_argument("--wrk", type=int, default=None, help="wrk seconds (10; quick 2; 0: none)")
    ap.add_argument("--fixture-seconds", type=float, default=None,
                    help="window per fixture, s (10; quick 3)")
    ap.add_argument("--fixtures", default=None,
                    help="folders holding fixture trees, comma-separated (BUILD/tests/fixtures)")
    ap.add_argument("--fixture-modes", default=None,
                    help="configs run on each fixture: default and wakeups modes "
                    "(default,off; quick: default)")
    ap.add_argument("--fixtures-parallel", action="store_true",
                    help="all fixture agents at once (faster, noisier)")
    ap.add_argument("--modes", default=",".join(CANDIDATE_MODES),
                    help="wakeups modes to try (off,proc,trace,bpf,auto)")
    ap.add_argument("--serial", action="store_true",
                    help="idle and load windows one agent at a time, the others stopped")
    ap.add_argument("--self-check", action="store_true",
                    help="check the parsing and arithmetic on canned input; runs nothing")
    ap.add_argument("-o", "--out", default=None,
                    help="results file (bench/results-agent-latest.txt; quick: none; '': none)")
    args = ap.parse_args()
    if args.self_check:
        return self_check()
    q = args.quick
    idle = args.idle if args.idle is not None else 4 if q else 20
    nscr = args.scrapes if args.scrapes is not None else 20 if q else 100
    wake_s = args.wake_seconds if args.wake_seconds is not None else 4 if q else 20
    wrk_s = args.wrk if args.wrk is not None else 2 if q else 10
    fix_s = args.fixture_seconds if args.fixture_seconds is not None else 3 if q else 10
    out_path = args.out if args.out is not None else "" if q else os.path.join(
        HERE, "results-agent-latest.txt")
    watt = os.path.abspath(args.watt)
    if not os.access(watt, os.X_OK):
        print(f"agent.py: no {watt}: build first (ninja -C build)", file=sys.stderr)
        return 1
    builddir = args.builddir or os.path.dirname(watt)
    fixdirs = args.fixtures.split(",") if args.fixtures else [
        os.path.join(builddir, "tests", "fixtures")]
    work = tempfile.mkdtemp(prefix="watt-bench-agent-")
    t_start = time.monotonic()
    la0, j0 = loadavg(), cpu_jiffies()
    ne_bin = shutil.which("prometheus-node-exporter") or shutil.which("node_exporter")

    L = []  # the report
    procs = []
    try:
        # --- modes: one agent per candidate, plus the default config -----
        log("starting the agents and node_exporter")
        agents = [start_agent(watt, "default", work)]
        agents += [start_agent(watt, f"wakeups={m}", work, mode=m)
                   for m in args.modes.split(",") if m]
        procs += agents
        ne = None
        if ne_bin:
            nport = free_port()
            ne = Proc("node_exporter", [ne_bin, f"--web.listen-address=127.0.0.1:{nport}"],
                      nport, work, kind="node_exporter")
            procs.append(ne)
        live = [a for a in agents if a.wait_up()]
        refused = [a for a in agents if a.refused]
        if not live or live[0].name != "default":
            print("agent.py: the default agent did not come up: "
                  f"{agents[0].refused}", file=sys.stderr)
            return 1
        if ne and not ne.wait_up():
            log(f"node_exporter did not come up: {ne.refused}")
            ne = None
        measured = live + ([ne] if ne else [])
        # every agent past its first sample (rates need two) and trace setup
        time.sleep(3)
        for a in live:
            try:
                m = a.metrics()
            except OSError:
                m = {}
            a.traced, a.source = m.get("watt_wakeups_traced"), wakeup_source(m)
            a.notes = [ln for ln in a.stderr().splitlines() if "listening on" not in ln]
        dflt = live[0]

        # --- idle -----------------------------------------------------
        log(f"idle window, {idle:g} s" + (" per agent" if args.serial else ""))
        w_idle = windows(measured, idle, args.serial)
        # --- scrapes --------------------------------------------------
        log(f"{nscr} scrapes of each exporter")
        for p in measured:
            p.res["scrape_ms"], p.res["bytes"] = per_scrape(p, nscr)
        # --- load: N wake-ups per second ------------------------------
        w_load, wl = None, None
        if args.wake_rate > 0 and wake_s > 0:
            exe = build_helper(builddir, "bench/bench_wakeload")
            if exe:
                log(f"load window: {args.wake_rate:g} wake-ups/s for {wake_s:g} s"
                    + (" per agent" if args.serial else ""))
                span = (wake_s + 2.5) * (len(live) if args.serial else 1) + 2
                h = subprocess.Popen([exe, f"{args.wake_rate:g}", f"{span:g}"],
                                     stdout=subprocess.PIPE, text=True)
                time.sleep(1)
                w_load = windows(measured, wake_s, args.serial)
                line = h.communicate(timeout=span + 30)[0]
                wl = parse_wakeload(line)
        # --- wrk against the default agent ----------------------------
        wrk = None
        if wrk_s:
            log(f"wrk, {wrk_s} s")
            before = rss_mb(dflt.pid)
            wrk = wrk_load(dflt.port, wrk_s)
            if wrk is not None:
                wrk["rss_before"], wrk["rss_after"] = before, rss_mb(dflt.pid)
                try:
                    wrk["alive"] = get(dflt.port, "/healthz", 5).strip() == b"ok"
                except OSError:
                    wrk["alive"] = False
    finally:
        for p in procs:
            p.stop()
    la_mid, j_mid = loadavg(), cpu_jiffies()

    # --- fixtures: cost of one sample against CPUs -------------------------
    roots = fixture_roots(fixdirs)
    fx_rows, fx_refused = [], []
    fmodes = [m for m in (args.fixture_modes or ("default" if q else "default,off")).split(",")
              if m]
    fmodes = [m for m in fmodes
              if m == "default" or m in [a.name.split("=", 1)[-1] for a in live]]
    if roots and fmodes and fix_s > 0:
        log(f"fixtures: {', '.join(n for n, _ in roots)} x {', '.join(fmodes)}, "
            f"{fix_s:g} s each, " + ("all at once" if args.fixtures_parallel else "one at a time"))
        todo = [(name, root, m) for name, root in roots for m in fmodes]
        batches = [todo] if args.fixtures_parallel else [[t] for t in todo]
        for batch in batches:
            rows, refused_fx = measure_fixtures(watt, work, batch, fix_s)
            fx_rows += rows
            fx_refused += refused_fx
    la1 = loadavg()
    shutil.rmtree(work, ignore_errors=True)

    # --- the report --------------------------------------------------------
    L.append("watt agent cost, beside node_exporter  (bench/agent.py; figures, not a test)")
    L.append(f"date      {time.strftime('%Y-%m-%d %H:%M:%S %z')}")
    with open("/proc/cpuinfo") as f:
        model = next((ln.split(':', 1)[1].strip() for ln in f if ln.startswith("model name")), "?")
    L.append(f"host      nproc {os.cpu_count()}, {model}; this VM shows steal time, "
             "figures vary +-30 %")
    L.append(f"load avg  1-min {la0:.2f} at the start, {la_mid:.2f} after the live phases, "
             f"{la1:.2f} at the end")
    busy, steal = shares(j0, j_mid)
    L.append(f"machine   busy {w_idle['_busy']:.0f} % of all CPU time in the idle window; "
             f"{busy:.0f} % busy and {steal:.1f} % stolen over the live phases (/proc/stat)")
    L.append(f"binary    {watt}: {describe(watt)}")
    L.append(f"method    " + ("one agent at a time (the others SIGSTOPped), node_exporter beside the "
                              "default; " if args.serial else "all exporters at once; ")
             + f"idle {idle:g} s, {nscr} scrapes back to back each, load {wake_s:g} s; "
             "CPU = /proc/PID/task/*/schedstat of all threads")
    L.append("")
    L.append("wakeups modes: " + ", ".join(
        f"{a.name.split('=', 1)[-1]} "
        + ("(default config)" if a.name == "default" else "accepted") for a in live))
    for a in live:
        if a.source:
            src = "wake-ups: " + a.source
        elif not a.traced:
            src = "wake-ups: none counted (no watt_wakeups_traced)"
        elif next(iter(a.traced.values())) >= 1:
            src = "wake-ups: tracepoints (watt_wakeups_traced 1)"
        else:
            src = "wake-ups: /proc (watt_wakeups_traced 0)"
        note = "; ".join(a.notes)
        L.append(f"  {a.name:<15} {src}{'; stderr: ' + note if note else ''}")
    for a in refused:
        L.append(f"  {a.name:<15} refused: {a.refused}")
    L.append("")

    # idle and totals
    hdr = (f"{'exporter':<16} {'idle ms/s':>9} {'ms/sample':>9} {'wakeups/s':>9} "
           f"{'RSS MB':>6} {'anon':>5} "
           f"{'ms/scrape':>9} {'bytes':>7} " + " ".join(
               f"{'tot@' + str(s) + 's':>8}" for s in SCRAPE_INTERVALS))
    if w_load:
        hdr += f" {'load ms/s':>9} {'load wk/s':>9}"
    L.append(hdr)
    tot = {}
    for p in measured:
        r = w_idle[p.name]
        tot[p.name] = {s: r["cpu_ms_s"] + p.res["scrape_ms"] / s for s in SCRAPE_INTERVALS}
        ps = per_sample_ms(r["m0"], r["m1"])
        row = (f"{p.name:<16} {r['cpu_ms_s']:>9.3f} "
               + (f"{ps:>9.3f}" if ps is not None else f"{'-':>9}")
               + f" {r['wakeups_s']:>9.2f} {r['rss_mb']:>6.1f} {r['anon_mb']:>5.1f} "
               f"{p.res['scrape_ms']:>9.3f} {p.res['bytes']:>7} " + " ".join(
                   f"{tot[p.name][s]:>8.3f}" for s in SCRAPE_INTERVALS))
        if w_load:
            lr = w_load[p.name]
            row += f" {lr['cpu_ms_s']:>9.3f} {lr['wakeups_s']:>9.1f}"
        L.append(row)
    L.append("  tot@Ns = idle ms/s + ms/scrape / N: the process's whole CPU per second when "
             "scraped every N s (ms of CPU per s; 10 ms/s = 1 % of a CPU)")
    L.append("  ms/sample: the agent's own CPU (watt_agent_cpu_seconds_total) over its samples "
             "in the idle window")
    L.append("  RSS MB: VmRSS; anon: its anonymous part (RssAnon), without the shared libraries' "
             "pages")
    L.append(f"  machine context switches/s (/proc/stat ctxt): idle {w_idle['_ctxt_s']:.0f}"
             + (f", load {w_load['_ctxt_s']:.0f}" if w_load else ""))
    if wl:
        L.append(f"  load: bench_wakeload asked {wl.get('target', 0):.0f}/s, got "
                 f"{wl.get('total', 0):.0f}/s (timer {wl.get('timer', 0):.0f} + pipe "
                 f"{wl.get('pipe', 0):.0f}; its own CPU {wl.get('cpu_ms_per_s', 0):.0f} ms/s, "
                 f"timer period at the end {wl.get('period_us', 0):.0f} us)")
    elif args.wake_rate > 0:
        L.append("  load: no bench_wakeload (see stderr), no load phase")
    L.append("")

    # samplers of the default agent
    sm_idle = samplers(w_idle[dflt.name]["m0"], w_idle[dflt.name]["m1"])
    sm_load = samplers(w_load[dflt.name]["m0"], w_load[dflt.name]["m1"]) if w_load else None
    big = next((r for r in fx_rows if r["fixture"] == "big-384" and r["mode"] == "default"), None)
    sm_big = big["samplers"] if big else None
    if sm_idle:
        cols = [("idle", sm_idle), ("load", sm_load), ("big-384", sm_big)]
        cols = [(n, s) for n, s in cols if s]
        L.append("default agent, ms of CPU per sample by sampler "
                 "(watt_agent_sampler_seconds_total / watt_agent_samples_total):")
        paths = {dict(lab).get("sampler"): dict(lab).get("path", "")
                 for lab in (w_idle[dflt.name]["m1"] or {}).get("watt_agent_sampler_info", {})}
        L.append(f"  {'sampler':<20} " + " ".join(f"{n:>9}" for n, _ in cols)
                 + ("  how it reads (watt_agent_sampler_info)" if paths else ""))
        for k in sm_idle[0]:
            L.append(f"  {k:<20} " + " ".join(
                f"{s[0].get(k, float('nan')):>9.3f}" for _, s in cols)
                + (f"  {paths.get(k, '')}" if paths else ""))
        L.append(f"  {'(sum)':<20} " + " ".join(f"{sum(s[0].values()):>9.3f}" for _, s in cols))
    else:
        L.append("per-sampler costs: not exported by this binary "
                 "(no watt_agent_sampler_seconds_total)")
    L.append("")

    # fixtures
    if fx_rows:
        L.append("one sample on fixture trees (--root, --interval 1, "
                 + ("all at once" if args.fixtures_parallel else "one at a time") + "): "
                 "ms CPU per sample = delta watt_agent_cpu_seconds_total / delta "
                 "watt_agent_samples_total")
        L.append(f"  {'fixture':<14} {'config':<12} {'CPUs':>5} {'samples':>7} "
                 f"{'ms/sample':>9} {'wall ms':>8} {'RSS MB':>6}")
        for r in sorted(fx_rows, key=lambda r: (r["mode"], r["cpus"] or 0)):
            L.append(f"  {r['fixture']:<14} {r['mode']:<12} {r['cpus'] or '?':>5} "
                     f"{r['samples']:>7.0f} {r['ms_sample'] or float('nan'):>9.3f} "
                     f"{r['wall_ms']:>8.2f} {r['rss_mb']:>6.1f}")
        for m in fmodes:
            pts = [(r["cpus"], r["ms_sample"]) for r in fx_rows
                   if r["mode"] == m and r["cpus"] and r["ms_sample"] is not None]
            if len(pts) >= 2:
                a, b, r2 = fit_line(pts)
                L.append(f"  fit ({m}): ms/sample = {a:.3f} + {b * 1e3:.2f} us x CPUs "
                         f"(R^2 {r2:.3f}); at 376 CPUs {a + b * 376:.2f} ms")
    for name, why in fx_refused:
        L.append(f"  {name}: refused: {why}")
    if not roots:
        L.append(f"fixtures: none under {', '.join(fixdirs)} (ninja -C build tests/fixtures.stamp)")
    L.append("")

    # goals
    L.append("goals (issue 15; figures, not assertions):")
    off = next((p for p in measured if p.name == "wakeups=off"), None)
    if off and ne:
        ratio = tot[off.name][15] / tot[ne.name][15] if tot[ne.name][15] > 0 else float("inf")
        L.append(verdict(f"(a) wakeups=off, 1-s interval, total at 15-s scrapes <= "
                         f"{GOAL_OFF_VS_NE:g} x node_exporter's",
                         f"{tot[off.name][15]:.3f} vs {tot[ne.name][15]:.3f} ms/s = {ratio:.3f}x",
                         ratio <= GOAL_OFF_VS_NE))
    else:
        L.append("(a) not measured: " + ("no node_exporter" if not ne else "no wakeups=off"))
    di = w_idle[dflt.name]
    L.append(verdict(f"(b) default config, idle machine, total at 15-s scrapes <= "
                     f"{GOAL_IDLE_MS_S:g} ms/s",
                     f"{tot[dflt.name][15]:.3f} ms/s (idle alone {di['cpu_ms_s']:.3f})",
                     tot[dflt.name][15] <= GOAL_IDLE_MS_S))
    if w_load and wl:
        got = wl.get("total", 0)
        lm = w_load[dflt.name]["cpu_ms_s"]
        reached = "" if got >= 0.95 * args.wake_rate else \
            f"; the VM made only {got:.0f}/s, not {args.wake_rate:.0f}"
        L.append(verdict(f"(b) default config at {args.wake_rate:.0f} wake-ups/s <= "
                         f"{GOAL_LOAD_MS_S:g} ms/s (2 % of a CPU)",
                         f"{lm:.3f} ms/s at {got:.0f} wake-ups/s{reached}", lm <= GOAL_LOAD_MS_S))
    else:
        L.append("(b) under load: not measured")
    if big and big["ms_sample"] is not None:
        L.append(verdict(f"(c) big-384 ({big['cpus']} CPUs online), one sample <= "
                         f"{GOAL_BIG_MS:g} ms CPU", f"{big['ms_sample']:.2f} ms",
                         big["ms_sample"] <= GOAL_BIG_MS))
    else:
        L.append("(c) big-384: not measured")
    L.append(verdict(f"(d) default config RSS <= {GOAL_RSS_MB:g} MB",
                     f"{di['rss_mb']:.1f} MB (anonymous {di['anon_mb']:.1f} MB)",
                     di["rss_mb"] <= GOAL_RSS_MB))
    L.append(verdict(f"(d) default config idle wake-ups <= {GOAL_WAKEUPS_S:g}/s",
                     f"{di['wakeups_s']:.2f}/s", di["wakeups_s"] <= GOAL_WAKEUPS_S))
    if ne and dflt.res["scrape_ms"] > 0:
        ratio = ne.res["scrape_ms"] / dflt.res["scrape_ms"]
        L.append(verdict(f"(issue 4) node_exporter / default agent, CPU per scrape >= "
                         f"{GOAL_SCRAPE_RATIO:g}x", f"{ratio:.1f}x", ratio >= GOAL_SCRAPE_RATIO))
    if wrk_s:
        if wrk is not None:
            L.append(f"wrk -t2 -c64 -d{wrk_s}s on the default agent's /metrics: "
                     f"{wrk['rps'] or 0:.0f} req/s, p99 {wrk['p99_ms'] or 0:.2f} ms, "
                     f"non-2xx {wrk['non2xx']}, socket errors {wrk['socket_errors']}; RSS "
                     f"{wrk['rss_before']:.1f} -> {wrk['rss_after']:.1f} MB; serving after: "
                     f"{wrk['alive']}")
        else:
            L.append("wrk: not installed (apt-get install wrk)")
    L.append(f"(run took {time.monotonic() - t_start:.0f} s)")
    text = "\n".join(L) + "\n"
    sys.stdout.write(text)
    if out_path:
        with open(out_path, "w") as f:
            f.write(text)
    return 0


def self_check():
    """The parsing and arithmetic on canned input; starts nothing."""
    text = ('# HELP watt_agent_samples_total Samples.\n# TYPE watt_agent_samples_total counter\n'
            'watt_agent_samples_total 12\n'
            'watt_agent_sampler_seconds_total{sampler="cpustat"} 0.5\n'
            'watt_agent_sampler_seconds_total{sampler="a \\"q\\", b"} 0.25\n'
            'watt_wakeups_traced 1\n'
            'node_x{a="1",b="2"} 1e3\nnode_y +Inf\n')
    m = parse_prometheus(text)
    assert sum_series(m, "watt_agent_samples_total") == 12, m
    assert m["watt_agent_sampler_seconds_total"][(("sampler", 'a "q", b'),)] == 0.25, m
    assert m["node_x"][(("a", "1"), ("b", "2"))] == 1000.0
    assert m["node_y"][()] == float("inf")
    m0 = parse_prometheus(text.replace(" 12\n", " 2\n").replace(" 0.5\n", " 0.1\n"))
    s, n = samplers(m0, m)
    assert n == 10 and abs(s["cpustat"] - 40.0) < 1e-9 and s['a "q", b'] == 0.0, s
    m1 = parse_prometheus("watt_agent_samples_total 12\nwatt_agent_cpu_seconds_total 1.5\n")
    m0 = parse_prometheus("watt_agent_samples_total 2\nwatt_agent_cpu_seconds_total 0.5\n")
    assert abs(per_sample_ms(m0, m1) - 100.0) < 1e-9 and per_sample_ms(None, m1) is None
    m1 = parse_prometheus("watt_agent_samples_total 12\nwatt_agent_cpu_seconds_total 1.5\n")
    m0 = parse_prometheus("watt_agent_samples_total 2\nwatt_agent_cpu_seconds_total 0.5\n")
    assert abs(per_sample_ms(m0, m1) - 100.0) < 1e-9 and per_sample_ms(None, m1) is None
    a, b, r2 = fit_line([(4, 1.0), (40, 2.8), (376, 19.6)])
    assert abs(a - 0.8) < 1e-9 and abs(b - 0.05) < 1e-9 and abs(r2 - 1) < 1e-9, (a, b, r2)
    wl = parse_wakeload("wakeload target=10000 seconds=5.00 timer=4538.9 pipe=4488.7 "
                        "total=9027.6 cpu_ms_per_s=216.9\n")
    assert wl["total"] == 9027.6 and wl["target"] == 10000, wl
    assert verdict("g", "1", True).endswith("met") and verdict("g", "1", False).endswith("MISSED")
    assert wakeup_source(parse_prometheus('watt_wakeups_source{source="bpf"} 1\n'
                                          'watt_wakeups_source{source="trace"} 0\n')) \
        == "watt_wakeups_source{source=bpf}"
    assert wakeup_source(m) is None
    assert wakeup_source(parse_prometheus(
        'watt_agent_sampler_info{sampler="wakeups",path="bpf"} 1\n')).startswith("bpf ")
    print("agent.py: self-check ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
