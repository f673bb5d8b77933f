#!/usr/bin/env python3
"""What tracing wake-ups costs: `watt top` next to powertop, under a load of
1k, 10k and 100k wake-ups a second.

usage: bench/top.py [-o FILE] [--rates 1000,10000,100000] [--time 10] [--quick]

The load is tests/helpers/waker (timerfd wake-ups at a known rate; built by
the normal build). Up to 10k/s one process; above, rate/10k processes of 10k
each (100k: 10 x 10k). For each rate, with the load running:

  load alone  no tracer: the machine's busy CPU over --time s (/proc/stat),
              the load's own CPU (its rusage) and the rate it reached;
  watt        `watt top --once --json --interval T`, T = --time and 2x that:
              watt's CPU (os.wait4 rusage utime+stime) / its wall time, in %
              of one CPU; the steady part is the slope between the two runs,
              (CPU(2T) - CPU(T)) / T, which drops start-up (tracefs formats,
              kallsyms, perf_event_open per CPU) and output;
  powertop    `powertop --csv=F --time=T`, measured the same way (powertop
              spends ~2 s at start-up, so its whole-process % and its slope
              differ more).

A tracepoint's cost is paid by the task that hits it (in the kernel, when
the waker is woken), not only by the tracer process that reads the rings;
"machine" is the whole machine's extra busy CPU over the load alone (from
/proc/stat, 10 ms resolution; other work on the machine shows up in it).
"saw" is the wake-ups/s of the load's processes each tool reported, next to
the rate the load reached by its own count.

Figures, not a test: exits 0 whatever they are (non-zero only when it cannot
measure at all). Goal reported against: watt <= 1 % of one CPU at 10k
wake-ups/s, and below powertop. Needs root.
"""
import argparse
import json
import math
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PER_PROC = 10000  # wake-ups/s of one waker process at most
USER_HZ = os.sysconf("SC_CLK_TCK")


def busy_ticks():
    """Busy CPU time of the whole machine so far, in ticks (/proc/stat)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return sum(v[:8]) - v[3] - v[4]  # minus idle and iowait (guest is in user)


class Load:
    """RATE wake-ups/s over one or more waker processes."""

    def __init__(self, waker, rate, seconds):
        n = max(1, math.ceil(rate / PER_PROC))
        self.procs = []
        for _ in range(n):
            p = subprocess.Popen([waker, "--hz", str(rate / n), "--seconds", str(seconds),
                                  "--name", "bench-waker"], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
            line = p.stdout.readline()
            if not line.startswith("pid="):
                p.kill()
                self.stop()
                raise RuntimeError(f"waker --hz {rate / n}: {line!r} {p.stderr.read()}")
            self.procs.append((p, int(line[4:])))
        self.pids = {pid for _, pid in self.procs}
        self.tids = set()
        for pid in self.pids:
            try:
                self.tids |= {int(t) for t in os.listdir(f"/proc/{pid}/task")}
            except OSError:
                self.tids.add(pid)

    def stop(self):
        """SIGTERM all; their own counts summed: rate reached, CPU %."""
        rate = cpu = 0.0
        elapsed = []
        for p, _ in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
            out, _ = p.communicate(timeout=30)
            try:
                r = json.loads(out.strip().splitlines()[-1])
            except (IndexError, ValueError):
                continue
            rate += r["wakeups_per_s"]
            cpu += r["cpu_s"]
            elapsed.append(r["elapsed_s"])
        self.procs = []
        wall = max(elapsed) if elapsed else math.nan
        return {"rate": rate, "cpu_pct": 100 * cpu / wall if elapsed else math.nan}


def measure(argv, timeout):
    """Run ARGV to the end: wall s, CPU s (own rusage), max RSS KiB, stdout,
    machine busy ticks over the run."""
    tmp = tempfile.TemporaryFile("w+")
    err = tempfile.TemporaryFile("w+")
    b0, t0 = busy_ticks(), time.monotonic()
    p = subprocess.Popen(argv, stdout=tmp, stderr=err, stdin=subprocess.DEVNULL)
    timer = threading.Timer(timeout, lambda: p.poll() is None and p.kill())
    timer.start()
    _, status, ru = os.wait4(p.pid, 0)
    timer.cancel()
    wall, busy = time.monotonic() - t0, busy_ticks() - b0
    p.returncode = os.waitstatus_to_exitcode(status)
    tmp.seek(0)
    err.seek(0)
    return {"rc": p.returncode, "wall": wall, "cpu": ru.ru_utime + ru.ru_stime,
            "rss_kb": ru.ru_maxrss, "out": tmp.read(), "err": err.read()[-400:],
            "busy_s": busy / USER_HZ}


def watt_saw(out, pids):
    try:
        doc = json.loads(out)
    except ValueError:
        return math.nan, {}
    saw = sum(p.get("wakeups_per_s") or 0 for p in doc.get("processes", []) if p["pid"] in pids)
    return saw, doc.get("wakeups", {})


def powertop_saw(path, tids):
    """Wakeups/s of TIDS in powertop's "Overview of Software Power Consumers"."""
    try:
        with open(path, errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return math.nan
    start = next((i for i, l in enumerate(lines) if "Overview of Software Power Consumers" in l),
                 None)
    if start is None:
        return math.nan
    total = 0.0
    for line in lines[start + 1:]:
        if "*  *  *" in line:
            break
        f = line.split(";")
        if len(f) >= 7 and f[5].strip() == "Process" and f[6].startswith("[PID "):
            try:
                if int(f[6][5:].split("]", 1)[0]) in tids:
                    total += float(f[1]) if f[1].strip() else 0.0
            except ValueError:
                pass
    return total


def run_tool(tool, args, load_args, t, work):
    """One tool run of T seconds over a fresh load; a result dict."""
    waker, rate = load_args
    load = Load(waker, rate, t + 120)
    try:
        time.sleep(0.5)
        if tool == "watt":
            r = measure([args.watt, "top", "--once", "--json", "--interval", str(t)], t + 120)
            r["saw"], r["wk"] = watt_saw(r["out"], load.pids)
        else:
            csv = os.path.join(work, f"powertop-{rate}-{t}.csv")
            r = measure([args.powertop, f"--csv={csv}", f"--time={t}"], t + 120)
            r["saw"] = powertop_saw(csv, load.tids)
    finally:
        r_load = load.stop()
    r["load"] = r_load
    r["pct"] = 100 * r["cpu"] / r["wall"]
    r["machine_pct"] = 100 * r["busy_s"] / r["wall"]
    return r


def run_alone(waker, rate, t):
    load = Load(waker, rate, t + 120)
    b0, t0 = busy_ticks(), time.monotonic()
    try:
        time.sleep(t)
    finally:
        res = load.stop()
    wall = time.monotonic() - t0
    res["machine_pct"] = 100 * (busy_ticks() - b0) / USER_HZ / wall
    return res


def median_run(runs):
    """The run with the median CPU time (its other figures stay consistent);
    how far the others were from it goes along as "spread"."""
    ok = sorted((r for r in runs if r["rc"] == 0), key=lambda r: r["cpu"]) or runs
    m = dict(ok[len(ok) // 2])
    m["spread"] = (min(r["cpu"] for r in ok), max(r["cpu"] for r in ok))
    m["n"] = len(ok)
    return m


def fmt(v, spec=".2f"):
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else format(v, spec)


def tool_rows(name, rate, runs, alone):
    """Lines for one tool at one rate: one per T."""
    out = []
    for tt in sorted(runs):
        r = runs[tt]
        if r.get("skipped"):
            out.append(f"{rate:>7} {name:<8} {tt:>3}  {r['skipped']}")
            continue
        note = "" if r["rc"] == 0 else f"  exit {r['rc']}: {r['err'].strip()[-120:]}"
        if name == "watt" and r.get("wk"):
            wk = r["wk"]
            note += (f"  lost {wk.get('lost_events')} (undelivered "
                     f"{wk.get('undelivered_events')}) dropped {wk.get('dropped_events')}")
            if wk.get("process_source", "tracepoints") != "tracepoints":
                note += f", saw/s from {wk['process_source']}"
        lo, hi = r["spread"]
        dload = r["load"]["cpu_pct"] - alone["cpu_pct"]
        out.append(f"{rate:>7} {name:<8} {tt:>3} {r['wall']:>6.2f} {r['cpu']:>6.3f} "
                   f"{lo:>6.3f}-{hi:<6.3f} {r['pct']:>6.2f} {fmt(dload, '>+7.2f')} "
                   f"{r['machine_pct']:>6.0f} {r['rss_kb'] / 1024:>5.1f} "
                   f"{fmt(r['saw'], '>8.0f')} {r['load']['rate']:>8.0f}{note}")
    return out


def slope(runs):
    """Steady CPU % of one CPU: (CPU(2T) - CPU(T)) / T."""
    ts = sorted(t for t in runs if not runs[t].get("skipped") and runs[t]["rc"] == 0)
    if len(ts) < 2:
        return math.nan
    a, b = runs[ts[0]], runs[ts[-1]]
    return 100 * (b["cpu"] - a["cpu"]) / (ts[-1] - ts[0])


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def have_watt_top(watt):
    r = subprocess.run([watt, "top", "--help"], capture_output=True, text=True)
    return r.returncode == 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(HERE, "..", "build"))
    ap.add_argument("--watt", help="default BUILD/watt")
    ap.add_argument("--waker", help="default BUILD/tests/helpers/waker")
    ap.add_argument("--powertop", default=shutil.which("powertop"))
    ap.add_argument("--rates", default="1000,10000,100000", help="wake-ups/s (1000,10000,100000)")
    ap.add_argument("--time", type=int, default=10, help="seconds per run, T (10)")
    ap.add_argument("--repeat", type=int, default=3, help="runs per tool and T; median (3)")
    ap.add_argument("--quick", action="store_true", help="one run per tool, no 2T (no slope)")
    ap.add_argument("--no-watt", action="store_true", help="powertop and the load only")
    ap.add_argument("-o", "--out", default=os.path.join(HERE, "results-top-latest.txt"))
    args = ap.parse_args()
    args.watt = args.watt or os.path.join(args.build, "watt")
    args.waker = args.waker or os.path.join(args.build, "tests", "helpers", "waker")
    if os.geteuid() != 0:
        sys.exit("top.py: needs root (perf tracepoints for watt top and powertop)")
    if not os.access(args.waker, os.X_OK):
        sys.exit(f"top.py: no waker at {args.waker}: ninja -C build tests/helpers/waker")
    use_watt = not args.no_watt and os.access(args.watt, os.X_OK) and have_watt_top(args.watt)
    rates = [int(x) for x in args.rates.split(",") if x]
    times = [args.time] if args.quick else [args.time, 2 * args.time]
    if args.quick:
        args.repeat = 1
    work = tempfile.mkdtemp(prefix="watt-bench-top-")
    t_start = time.monotonic()
    args.load_start = loadavg()
    results = {}
    try:
        for rate in rates:
            alone = run_alone(args.waker, rate, args.time)
            tools = {}
            for name, ok, why in (("watt", use_watt, "watt top not built"),
                                  ("powertop", bool(args.powertop), "no powertop")):
                tools[name] = {t: (median_run([run_tool(name, args, (args.waker, rate), t, work)
                                               for _ in range(args.repeat)]) if ok
                                   else {"skipped": why}) for t in times}
            results[rate] = (alone, tools)
            print(f"# {rate}/s done ({time.monotonic() - t_start:.0f} s)", file=sys.stderr)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    text = report(args, rates, times, results, time.monotonic() - t_start)
    sys.stdout.write(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    return 0


def report(args, rates, times, results, total_s):
    load = loadavg()
    pt_ver = "-"
    if args.powertop:
        r = subprocess.run([args.powertop, "--version"], capture_output=True, text=True)
        pt_ver = (r.stdout or r.stderr).strip().splitlines()[-1] if r.returncode == 0 else "-"
    out = ["watt top vs powertop: the cost of tracing wake-ups  "
           "(bench/top.py; figures, not a test)",
           f"date      {time.strftime('%Y-%m-%d %H:%M:%S %z')}",
           f"host      kernel {platform.release()}, {os.cpu_count()} CPUs, load average "
           f"{args.load_start} at the start, {load} at the end; {pt_ver}",
           f"method    load = waker processes of <= {PER_PROC}/s each; per tool, runs of "
           f"{' and '.join(str(t) for t in times)} s over a fresh load, {args.repeat} of "
           f"each, median",
           "",
           "   rate tool       T wall s  CPU s   (min-max)     CPU%1 load%1 machine%  RSS"
           "    saw/s   load/s",
           "                                                         vs alone  busy  MiB"]
    summ = []
    for rate in rates:
        alone, tools = results[rate]
        out.append(f"{rate:>7} {'alone':<8} {times[0]:>3} {'':>6} {'':>6} {'':>13} {'':>6} "
                   f"{alone['cpu_pct']:>7.2f} {alone['machine_pct']:>6.0f} {'':>5} {'':>8} "
                   f"{alone['rate']:>8.0f}")
        for name in ("watt", "powertop"):
            out += tool_rows(name, rate, tools[name], alone)
        ws, ps = slope(tools["watt"]), slope(tools["powertop"])
        w1 = tools["watt"].get(times[0], {})
        p1 = tools["powertop"].get(times[0], {})
        wp = w1.get("pct", math.nan)
        pp = p1.get("pct", math.nan)
        ratio = wp / pp if pp and not math.isnan(pp) and not math.isnan(wp) else math.nan
        sratio = ws / ps if ps and not math.isnan(ps) and ps > 0 else math.nan
        summ.append(f"{rate:>7}/s: watt {fmt(wp)} % whole, {fmt(ws)} % steady; powertop "
                    f"{fmt(pp)} % whole, {fmt(ps)} % steady; watt/powertop {fmt(ratio)} whole, "
                    f"{fmt(sratio)} steady")
        if rate == 10000 and not math.isnan(wp):
            def met(ok):
                return "-" if ok is None else "met" if ok else "MISSED"
            steady_ok = None if math.isnan(ws) else ws <= 1.0
            summ.append(f"         goal <= 1 % of one CPU at 10k/s: whole {met(wp <= 1.0)} "
                        f"({wp:.2f} %), steady {met(steady_ok)} ({fmt(ws)} %); below "
                        f"powertop (whole): {met(math.isnan(pp) or wp < pp)} ({wp:.2f} % vs "
                        f"{fmt(pp)} %)")
    out += ["",
            "CPU s: the tool's utime+stime, median of the runs (min-max); CPU%1: that / its wall",
            "  time, % of one CPU, start-up included; steady: (CPU(2T) - CPU(T)) / T",
            "load%1: the load's own CPU % (its rusage) with the tool beside it, minus alone (the",
            "  row \"alone\" gives it absolute): tracepoint cost paid in the woken tasks' context",
            "machine%: busy % of all CPUs (/proc/stat; anything else running shows up here)",
            "saw/s: the load's wake-ups/s as the tool reported them; load/s: the load's own count",
            "  (watt takes per-process wake-ups from /proc when the trace lost > 2 % of events:",
            "  \"from proc\"; see docs/top.md on events the kernel never delivers)",
            "powertop drains its rings only after --time ends: what does not fit is lost, so its",
            "  CPU hardly grows with T or the rate, and its saw/s falls as they grow",
            ""] + summ
    out.append(f"total {total_s:.0f} s")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    sys.exit(main())
