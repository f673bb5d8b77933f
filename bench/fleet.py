#!/usr/bin/env python3
"""What `watt fleet sim` costs: one PlanetLab day per policy, and synthetic
fleets from 10,000 to 1,000,000 VMs.

usage: bench/fleet.py [--quick | --full] [-o FILE] [...]   (see --help)

Figures only; this is not a test and exits 0 whatever the numbers are (it
exits non-zero only when it cannot measure at all). Goals: one PlanetLab day
(1052 VMs, 800 hosts, 288 steps) in <= 0.2 s of CPU per policy on one core;
100,000 synthetic VMs in <= 20 s. Reference: CloudSim 3.0.3 takes 15-60 s per
day-run on one core (/work/shared/research/cluster.md section 4); the
"x faster than CloudSim" column divides the LOW end, 15 s, by our CPU time.

Every run is one child `watt fleet sim ... --jobs 1 -q` of a snapshot of
build/watt (the build may relink it meanwhile). Per run it measures:
  CPU    user+sys s of the child: its rusage from wait4(), which is the same
         figure as a getrusage(RUSAGE_CHILDREN) delta around the run, but per
         child. Exact (scheduler ns runtime), not tick-sampled
  wall   fork to reap, s
  RSS    peak resident set of the simulator, MiB, through GNU time (%M). The
         child's own ru_maxrss cannot be used: a child spawned from Python
         inherits the interpreter's high-water mark across exec
PlanetLab runs are repeated N times, round-robin over the policies so that
load drift hits all of them alike, and the median is printed. Synthetic runs
are run once each, in the order of priority, while the --budget lasts; a run
past --timeout is killed and printed as "timeout" (with the CPU it had used).
If a CloudSim 3.0.3 build is present (--cloudsim DIR with README.md and
classes/), one IQR-MMT-1.5 run of the same day is timed too, for a measured
ratio.

--baseline WATT (an older build's binary, e.g. of c810ab9, also snapshotted)
runs every PlanetLab cell and every synthetic cell with that binary too, in
the same command and interleaved run by run: within a round each cell runs
with both binaries back to back, the two taking turns at going first, so load
drift hits both alike. The PlanetLab cells get one extra run per binary under
GNU time, for RSS only. It prints both side by side with the ratio (this build
/ baseline) of the median CPU s and of the peak RSS, whether the result rows
are identical, and one verdict line per mode: "watt fleet sim vs NAME: CPU
ratio median X, worst Y" over all cells of that mode (> 1.05 counts as
slower). NAME is `git describe` of the baseline's tree (--baseline-name).
--policies and --synth-runs narrow a rerun to the cells in doubt.
"""
import argparse
import math
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

from benchutil import Deadline  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
POLICIES = ("npa", "dvfs", "thr-mmt-1.0", "thr-mmt-0.8", "iqr-mmt-1.5", "mad-mmt-2.5",
            "lr-mmt-1.2", "watt")
MODES = (("compat", ["--compat", "cloudsim"]), ("realistic", []))
GOAL_DAY_S = 0.2        # CPU s per PlanetLab day-run and policy
GOAL_100K_S = 20.0      # CPU s for 100,000 synthetic VMs
SLOWER = 1.05           # --baseline: a CPU ratio above this counts as slower
CLOUDSIM_LOW_S = 15.0   # CloudSim 3.0.3 per day-run, low end of 15-60 s
CLOUDSIM_HIGH_S = 60.0
CLOUDSIM_MAIN = "org.cloudbus.cloudsim.examples.power.planetlab.RunOne"
COMMONS_MATH = "/usr/share/java/commons-math3.jar"
CLK_TCK = os.sysconf("SC_CLK_TCK")


def log(msg):
    print("bench: " + msg, file=sys.stderr, flush=True)


def session_usage(sid):
    """(CPU s, RSS MiB) summed over the live processes of session sid."""
    cpu, rss = 0.0, 0.0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % pid) as f:
                st = f.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(st[3]) != sid:  # field 6, session; st[0] is field 3
            continue
        cpu += (int(st[11]) + int(st[12])) / CLK_TCK  # utime, stime
        rss += int(st[21]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    return cpu, rss


def run_child(cmd, timeout, label, progress_s=0.0, rss=False):
    """Run cmd in its own session; kill the session past timeout s.
    Returns {rc, cpu, wall, rss_mib, out, err, timeout}."""
    gnu_time = shutil.which("time") if rss else None
    tmp = tempfile.mkdtemp(prefix="watt-fleet-")
    rss_file = os.path.join(tmp, "rss")
    if gnu_time:
        cmd = [gnu_time, "-f", "%M", "-o", rss_file] + cmd
    res = {"timeout": False, "rss_mib": None}
    with open(os.path.join(tmp, "out"), "w+") as out, open(os.path.join(tmp, "err"), "w+") as err:
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                             start_new_session=True)
        done = threading.Event()

        def watchdog():
            step = progress_s if progress_s > 0 else timeout
            while True:
                left = timeout - (time.perf_counter() - t0)
                if done.wait(max(0.0, min(step, left))):
                    return
                el = time.perf_counter() - t0
                if el >= timeout:
                    res["cpu_at_kill"] = session_usage(p.pid)[0]
                    res["timeout"] = True
                    try:
                        os.killpg(p.pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                    return
                cpu, mib = session_usage(p.pid)
                log("  %s: %.0f s wall, %.0f s CPU, RSS %.0f MiB, still running"
                    " (timeout %.0f s)" % (label, el, cpu, mib, timeout))

        th = threading.Thread(target=watchdog, daemon=True)
        th.start()
        _, status, ru = os.wait4(p.pid, 0)
        res["wall"] = time.perf_counter() - t0
        done.set()
        th.join()
        p.returncode = os.waitstatus_to_exitcode(status)  # reaped already
        # A killed `time` never reaped its child: take the sampled figure.
        res["cpu"] = ru.ru_utime + ru.ru_stime
        if res["timeout"]:
            res["cpu"] = max(res["cpu"], res.get("cpu_at_kill") or 0.0)
        res["rc"] = p.returncode
        out.seek(0)
        err.seek(0)
        res["out"], res["err"] = out.read(), err.read()
    if gnu_time and not res["timeout"]:
        try:
            with open(rss_file) as f:
                res["rss_mib"] = int(f.read().split()[-1]) / 1024.0
        except (OSError, ValueError, IndexError):
            pass
    shutil.rmtree(tmp, ignore_errors=True)
    return res


def parse_table(text):
    """watt's table (columns split by 2+ spaces) -> {column: value} of row 1."""
    rows = [re.split(r"\s{2,}", ln.strip()) for ln in text.splitlines() if ln.strip()]
    if len(rows) < 2 or "policy" not in rows[0]:
        return {}
    return dict(zip(rows[0], rows[1]))


def sim_cmd(binary, mode_args, extra):
    return [binary, "fleet", "sim"] + extra + mode_args + ["--jobs", "1", "-q"]


def binaries(a):
    """[(label, snapshot path)]: the binary under test, then the baseline if any."""
    return [("new", a.watt_bin)] + ([("base", a.base_bin)] if a.baseline else [])


def rotate(bins, k):
    """bins, starting at index k: with a baseline, new and baseline take turns
    at going first, so neither always runs on the other's warm caches."""
    k %= len(bins)
    return bins[k:] + bins[:k]


def bench_planetlab(a):
    """{label: {(policy, mode): {cpu: [...], wall: [...], row: {...}, bad, rss_mib}}}"""
    bins = binaries(a)
    res = {b: {(p, m): {"cpu": [], "wall": [], "row": {}, "bad": 0, "rss_mib": None}
               for p in a.policies for m, _ in MODES} for b, _ in bins}
    for i in range(a.runs):
        log("PlanetLab %s, round %d of %d" % (os.path.basename(a.trace), i + 1, a.runs))
        for j, p in enumerate(a.policies):
            for k, (m, margs) in enumerate(MODES):
                for b, path in rotate(bins, i + j + k):
                    r = run_child(sim_cmd(path, margs, ["--trace", a.trace, "--policy", p]),
                                  a.timeout, "%s %s %s" % (b, p, m))
                    d = res[b][(p, m)]
                    if r["timeout"] or r["rc"] != 0:
                        d["bad"] += 1
                        d["err"] = "timeout" if r["timeout"] else r["err"].strip()[-200:]
                        continue
                    d["cpu"].append(r["cpu"])
                    d["wall"].append(r["wall"])
                    d["row"] = parse_table(r["out"])
    if a.baseline:
        # Peak RSS needs GNU time around the child, which adds its own start to
        # the CPU figure: one extra run per cell and binary, for RSS only.
        log("PlanetLab %s, one RSS run per cell and binary" % os.path.basename(a.trace))
        for j, p in enumerate(a.policies):
            for k, (m, margs) in enumerate(MODES):
                for b, path in rotate(bins, j + k):
                    r = run_child(sim_cmd(path, margs, ["--trace", a.trace, "--policy", p]),
                                  a.timeout, "%s %s %s" % (b, p, m), rss=True)
                    res[b][(p, m)]["rss_mib"] = r["rss_mib"]
    return res


def bench_cloudsim(a):
    """One CloudSim 3.0.3 IQR-MMT-1.5 run of the same day, if a build exists."""
    d = a.cloudsim
    classes = os.path.join(d, "classes")
    java = shutil.which("java")
    if not (os.path.exists(os.path.join(d, "README.md")) and os.path.isdir(classes)
            and java and os.path.exists(COMMONS_MATH)):
        return None
    cmd = [java, "-Xmx1g", "-cp", classes + ":" + COMMONS_MATH, CLOUDSIM_MAIN,
           os.path.abspath(a.trace), "iqr", "mmt", "1.5"]
    log("CloudSim 3.0.3 iqr-mmt-1.5 on %s (15-60 s)" % os.path.basename(a.trace))
    r = run_child(cmd, a.cloudsim_timeout, "cloudsim", progress_s=30)
    m = re.search(r"Energy consumption:\s*([0-9.]+)\s*kWh", r["out"])
    r["energy"] = m.group(1) if m else None
    r["cmd"] = "java -Xmx1g RunOne %s iqr mmt 1.5" % a.trace
    return r


def synth_plan(a):
    """Synthetic runs in order of priority: (policy, VMs, mode, optional)."""
    plan = []
    for n in a.sizes:
        if n > 100000:
            continue
        for m, _ in MODES[::-1]:  # realistic first: the default mode
            plan.append(("watt", n, m, n not in (10000, 100000)))
    for m, _ in MODES:  # compat first: CloudSim's PABFD
        if a.iqr_vms > 0:
            plan.append(("iqr-mmt-1.5", a.iqr_vms, m, m == "realistic"))
    # Intermediate sizes only serve the growth figure: last.
    plan.sort(key=lambda x: x[3])
    return plan


def merge_runs(rs):
    """One synthetic result from its runs: the median CPU and wall, the
    highest RSS. A timed-out run stands for the whole cell."""
    for r in rs:
        if r["timeout"] or r["rc"] != 0:
            return r
    r = dict(rs[-1])
    r["cpus"] = [x["cpu"] for x in rs]
    r["cpu"] = statistics.median(r["cpus"])
    r["wall"] = statistics.median(x["wall"] for x in rs)
    rss = [x["rss_mib"] for x in rs if x.get("rss_mib") is not None]
    r["rss_mib"] = max(rss) if rss else None
    return r


def bench_cell(a, label, extra, margs, timeout, idx):
    """--synth-runs runs of one synthetic cell with each binary, interleaved
    run by run: {label: result}."""
    runs = {b: [] for b, _ in binaries(a)}
    for i in range(a.synth_runs):
        for b, path in rotate(binaries(a), i + idx):
            r = run_child(sim_cmd(path, margs, extra), timeout,
                          "%s %s" % (b, label), progress_s=30, rss=True)
            r["row"] = parse_table(r["out"])
            runs[b].append(r)
    return {b: merge_runs(rs) for b, rs in runs.items()}


def bench_synthetic(a, dl, plan, res):
    """Fills res[label][(policy, VMs, mode)] for each binary."""
    modes = dict(MODES)
    for idx, (pol, n, m, optional) in enumerate(plan):
        key = (pol, n, m)
        if dl.passed() and not a.full:
            for b, _ in binaries(a):
                res[b][key] = {"skipped": "budget"}
            continue
        log("synthetic %s VMs, %s, %s (timeout %.0f s)" % (f"{n:,}", pol, m, a.timeout))
        extra = ["--synthetic", str(n), "--policy", pol]
        for b, r in bench_cell(a, "%s VMs %s" % (f"{n:,}", m), extra, modes[m],
                               a.timeout, idx).items():
            res[b][key] = r


def bench_million(a, res):
    """--full: 1,000,000 VMs per mode, unless 100,000 already timed out."""
    modes = dict(MODES)
    for idx, (m, _) in enumerate(MODES[::-1]):
        key = ("watt", 1000000, m)
        prev = res["new"].get(("watt", 100000, m)) or {}
        if prev.get("timeout"):
            for b, _ in binaries(a):
                res[b][key] = {"skipped": "100,000 timed out"}
            continue
        log("synthetic 1,000,000 VMs, watt, %s (timeout %.0f s; may take minutes)"
            % (m, a.full_timeout))
        for b, r in bench_cell(a, "1,000,000 VMs " + m,
                               ["--synthetic", "1000000", "--policy", "watt"], modes[m],
                               a.full_timeout, idx).items():
            res[b][key] = r


def fmt(v, spec="%.2f", none="-"):
    return none if v is None else spec % v


def cpu_s(r):
    """Median CPU s of a PlanetLab cell, or None."""
    return statistics.median(r["cpu"]) if r["cpu"] else None


def render_planetlab(a, pl):
    w = []
    w.append("PlanetLab %s (1052 VMs, 800 hosts, 288 steps), one day-run per policy, one core;"
             % os.path.basename(a.trace))
    w.append("CPU s = median of %d runs (min beside it); vs CS = CloudSim 3.0.3's LOW end, 15 s"
             " per day-run, / our CPU s" % a.runs)
    hdr = "%-12s | %7s %7s %9s %6s %6s | %7s %7s %9s %6s %6s" % (
        ("policy",) + ("CPU s", "min", "energy", "goal", "vs CS") * 2)
    w.append("%-12s | %-41s | %s" % ("", "compat (--compat cloudsim)", "realistic (default)"))
    w.append(hdr)
    w.append("-" * len(hdr))
    tot = {m: 0.0 for m, _ in MODES}
    for p in a.policies:
        cells = []
        for m, _ in MODES:
            r = pl[(p, m)]
            c = cpu_s(r)
            if c is None:
                cells.append("%7s %7s %9s %6s %6s" % ("fail", "-", "-", "-", "-"))
                continue
            tot[m] += c
            cells.append("%7.3f %7.3f %9s %6s %5.0fx" % (
                c, min(r["cpu"]), r["row"].get("energy kWh", "-"),
                "met" if c <= GOAL_DAY_S else "MISSED", CLOUDSIM_LOW_S / max(c, 1e-6)))
        w.append("%-12s | %s | %s" % (p, cells[0], cells[1]))
    n = len(a.policies)
    w.append("%-12s | %7.3f %7s %9s %6s %5.0fx | %7.3f %7s %9s %6s %5.0fx" % (
        "all %d (sum)" % n, tot["compat"], "", "", "", n * CLOUDSIM_LOW_S / max(tot["compat"], 1e-6),
        tot["realistic"], "", "", "", n * CLOUDSIM_LOW_S / max(tot["realistic"], 1e-6)))
    bad = ["%s %s (%d failed: %s)" % (p, m, r["bad"], r.get("err", "")) for (p, m), r in
           pl.items() if r["bad"]]
    if bad:
        w.append("NOTE: runs failed: " + "; ".join(bad))
    w.append("energy = watt's own figure (kWh), to show each run did the day; goal = <= %.1f s CPU"
             % GOAL_DAY_S)
    return w


def render_cloudsim(a, pl, cs):
    w = []
    if cs is None:
        w.append("CloudSim 3.0.3: no local build at %s (README.md, classes/, java, %s);"
                 " ratios above use 15 s." % (a.cloudsim, COMMONS_MATH))
        return w
    if cs.get("skipped"):
        w.append("CloudSim 3.0.3: run skipped (%s); ratios above use 15 s." % cs["skipped"])
        return w
    if ("iqr-mmt-1.5", "compat") not in pl:
        w.append("CloudSim 3.0.3 measured here, but iqr-mmt-1.5 was not run (--policies).")
        return w
    ours = cpu_s(pl[("iqr-mmt-1.5", "compat")])
    w.append("CloudSim 3.0.3 measured here (%s, one run, JVM start included; the JVM's"
             % cs["cmd"])
    w.append("  JIT and GC threads make its CPU exceed its wall):")
    if cs["timeout"] or cs["rc"] != 0:
        w.append("  iqr-mmt-1.5 %s: %s" % (os.path.basename(a.trace), "timeout after %.0f s" %
                 cs["wall"] if cs["timeout"] else "failed: " + cs["err"].strip()[-200:]))
        return w
    w.append("  iqr-mmt-1.5 %s: %.2f s CPU, %.2f s wall, %s kWh (watt --compat: %s kWh)" % (
        os.path.basename(a.trace), cs["cpu"], cs["wall"], cs["energy"] or "-",
        pl[("iqr-mmt-1.5", "compat")]["row"].get("energy kWh", "-")))
    if ours:
        ow = statistics.median(pl[("iqr-mmt-1.5", "compat")]["wall"])
        w.append("  measured ratio: %.0fx by CPU (%.2f s / %.3f s), %.0fx by wall"
                 " (%.2f s / %.3f s), watt --compat cloudsim on one core" % (
                     cs["cpu"] / ours, cs["cpu"], ours, cs["wall"] / ow, cs["wall"], ow))
    return w


def growth(prev, cur):
    """Time ratio per 10x VMs between two (VMs, CPU s) points."""
    (n0, t0), (n1, t1) = prev, cur
    if t0 <= 0 or n1 <= n0:
        return None
    return (t1 / t0) ** (1.0 / math.log10(n1 / n0))


def render_synthetic(a, sy, base=None):
    runs = "one run each" if a.synth_runs == 1 else "median of %d runs" % a.synth_runs
    w = ["synthetic day (--synthetic VMS, hosts 0.8 per VM, g4/g5 alternating), %s,"
         " one core;" % runs,
         "x/10x = CPU time ratio per 10x VMs from the previous size (from the CPU used so far"
         " if timed out: a lower bound)"]
    hdr = "%-11s %-12s %-9s %9s %8s %8s %7s %9s %10s" % (
        "policy", "VMs", "mode", "CPU s", "wall s", "RSS MB", "x/10x", "energy", "migrations")
    if base is not None:
        w.append("%s s, %s MB = the same cell run by %s (--baseline), interleaved run by run;"
                 " ratio = this build / %s; same = identical result row"
                 % (a.base_name, a.base_name, a.base_name, a.base_name))
        hdr += " | %8s %6s %8s %6s %4s" % (a.base_name[:7] + " s", "ratio",
                                           a.base_name[:7], "ratio", "same")
    w.append(hdr)
    w.append("-" * len(hdr))
    last = {}
    keys = sorted(sy, key=lambda k: (k[0] != "watt", k[2], k[1]))
    for pol, n, m in keys:
        r = sy[(pol, n, m)]
        name = f"{n:,}"
        if r.get("skipped"):
            w.append("%-11s %-12s %-9s %9s   (skipped: %s)" % (pol, name, m, "-", r["skipped"]))
            continue
        if r["rc"] != 0 and not r["timeout"]:
            w.append("%-11s %-12s %-9s %9s   (failed: %s)" % (
                pol, name, m, "-", r["err"].strip()[-120:]))
            continue
        g = growth(last[(pol, m)], (n, r["cpu"])) if (pol, m) in last else None
        gs = "-" if g is None else ("%s%.0fx" % (">" if r["timeout"] else "", g))
        cpu = (">%.1f" % r["cpu"]) if r["timeout"] else "%.2f" % r["cpu"]
        row = r.get("row") or {}
        line = "%-11s %-12s %-9s %9s %8s %8s %7s %9s %10s" % (
            pol, name, m, cpu, "timeout" if r["timeout"] else "%.2f" % r["wall"],
            fmt(r.get("rss_mib"), "%.1f"), gs, row.get("energy kWh", "-"),
            row.get("migrations", "-"))
        if base is not None:
            line += " | " + base_cells_synth(r, base.get((pol, n, m)))
        w.append(line)
        if not r["timeout"]:
            last[(pol, m)] = (n, r["cpu"])
    w.append("timeout = killed after %.0f s wall (--timeout; --full-timeout %.0f s for 1,000,000)"
             % (a.timeout, a.full_timeout))
    return w


def ratio(x, y):
    return None if x is None or y is None or y <= 0 else x / y


def usable(r):
    return bool(r) and not r.get("skipped") and r.get("rc") == 0 and not r.get("timeout")


def base_cells_synth(r, b):
    """The baseline's columns of one synthetic row."""
    if not b or b.get("skipped"):
        return "%8s %6s %8s %6s %4s" % ("-", "-", "-", "-", "-")
    if b["rc"] != 0 and not b["timeout"]:
        return "%8s %6s %8s %6s %4s" % ("failed", "-", "-", "-", "-")
    bc = (">%.1f" % b["cpu"]) if b["timeout"] else "%.2f" % b["cpu"]
    ok = usable(r) and usable(b)
    return "%8s %6s %8s %6s %4s" % (
        bc, fmt(ratio(r["cpu"], b["cpu"]) if ok else None, "%.3f"), fmt(b.get("rss_mib"), "%.1f"),
        fmt(ratio(r.get("rss_mib"), b.get("rss_mib")) if ok else None, "%.3f"),
        ("yes" if r.get("row") == b.get("row") else "NO") if ok else "-")


def compare_cells(a, pl, sy):
    """[(mode, cell name, policy, CPU ratio, RSS ratio, same)] of every cell
    measured with both binaries."""
    out = []
    for m, _ in MODES:
        for p in a.policies:
            r, b = pl["new"][(p, m)], pl["base"][(p, m)]
            c = ratio(cpu_s(r), cpu_s(b))
            if c is not None:
                out.append((m, "%s day" % p, p, c, ratio(r["rss_mib"], b["rss_mib"]),
                            r["row"] == b["row"]))
        for (pol, n, mm), r in sorted(sy["new"].items(), key=lambda kv: kv[0][1]):
            b = sy["base"].get((pol, n, mm))
            if mm != m or not (usable(r) and usable(b)):
                continue
            out.append((m, "%s %s VMs" % (pol, f"{n:,}"), pol, ratio(r["cpu"], b["cpu"]),
                        ratio(r.get("rss_mib"), b.get("rss_mib")), r["row"] == b["row"]))
    return out


def render_baseline_planetlab(a, pl):
    """This build and the baseline side by side, per PlanetLab cell."""
    nb = a.base_name[:7]
    w = ["PlanetLab %s, this build vs %s (%s), the same %d runs per cell interleaved run by run"
         % (os.path.basename(a.trace), a.base_name, a.baseline, a.runs),
         "(round-robin, the two binaries taking turns at going first); CPU s = median;"
         " ratio = this build / %s;" % a.base_name,
         "min r = ratio of the minima; RSS MB from one extra run per cell and binary (GNU time);"
         " same = identical result row"]
    cell = "%6s %7s %6s %5s %6s %6s %4s"
    hdr = "%-12s | %s | %s" % (("policy",) + (cell % ("CPU s", nb + " s", "ratio", "min r",
                                                       "RSS MB", "ratio", "same"),) * 2)
    w.append("%-12s | %-48s | %s" % ("", "compat (--compat cloudsim)", "realistic (default)"))
    w.append(hdr)
    w.append("-" * len(hdr))
    for p in a.policies:
        cells = []
        for m, _ in MODES:
            r, b = pl["new"][(p, m)], pl["base"][(p, m)]
            c, bc = cpu_s(r), cpu_s(b)
            if c is None or bc is None:
                cells.append(cell % (fmt(c, "%.3f", "fail"), fmt(bc, "%.3f", "fail"),
                                     "-", "-", "-", "-", "-"))
                continue
            cells.append(cell % ("%.3f" % c, "%.3f" % bc, "%.3f" % (c / bc),
                                 fmt(ratio(min(r["cpu"]), min(b["cpu"])), "%.2f"),
                                 fmt(r["rss_mib"], "%.1f"),
                                 fmt(ratio(r["rss_mib"], b["rss_mib"]), "%.3f"),
                                 "yes" if r["row"] == b["row"] else "NO"))
        w.append("%-12s | %s | %s" % (p, cells[0], cells[1]))
    bad = ["%s %s (%d failed: %s)" % (p, m, r["bad"], r.get("err", ""))
           for (p, m), r in pl["base"].items() if r["bad"]]
    if bad:
        w.append("NOTE: %s runs failed: %s" % (a.base_name, "; ".join(bad)))
    return w


def render_verdict(a, pl, sy):
    """One line per mode: the CPU ratio over every cell measured with both."""
    cells = compare_cells(a, pl, sy)
    w = ["this build vs %s (--baseline %s): ratio = this build / %s, CPU s per cell"
         " (median of its runs); > %.2f counts as slower"
         % (a.base_name, a.baseline, a.base_name, SLOWER)]
    for m, _ in MODES:
        cs = [c for c in cells if c[0] == m]
        if not cs:
            w.append("  %-10s watt fleet sim vs %s: no cell measured with both" % (m, a.base_name))
            continue
        worst = max(cs, key=lambda c: c[3])
        wp = [c[3] for c in cs if c[2] == "watt"]
        rss = [c[4] for c in cs if c[4] is not None]
        slow = ["%s %.3f" % (c[1], c[3]) for c in cs if c[3] > SLOWER]
        diff = [c[1] for c in cs if not c[5]]
        w.append("  %-10s watt fleet sim vs %s: CPU ratio median %.3f, worst %.3f (%s);"
                 " watt policy worst %s; RSS ratio worst %s; %s; %s" % (
                     m, a.base_name, statistics.median(c[3] for c in cs), worst[3], worst[1],
                     fmt(max(wp) if wp else None, "%.3f"), fmt(max(rss) if rss else None, "%.3f"),
                     "no slower" if not slow else "SLOWER: " + ", ".join(slow),
                     "results identical in %d cells" % len(cs) if not diff else
                     "results DIFFER: " + ", ".join(diff)))
    return w


def render_goals(a, pl, sy):
    w = ["goals: PlanetLab day-run <= %.1f s CPU per policy; 100,000 synthetic VMs <= %.0f s CPU"
         % (GOAL_DAY_S, GOAL_100K_S)]
    for m, _ in MODES:
        if not a.policies:
            break
        cs = [(p, cpu_s(pl[(p, m)])) for p in a.policies]
        miss = ["%s %s s" % (p, fmt(c, "%.3f")) for p, c in cs if c is None or c > GOAL_DAY_S]
        worst = max((c for _, c in cs if c is not None), default=None)
        w.append("  PlanetLab %-10s worst %s s  %s" % (
            m, fmt(worst, "%.3f"), "met" if not miss else "MISSED (" + ", ".join(miss) + ")"))
    for m, _ in MODES[::-1]:
        r = sy.get(("watt", 100000, m))
        if not r or r.get("skipped") or (r["rc"] != 0 and not r["timeout"]):
            w.append("  100,000 VMs %-9s not measured" % m)
            continue
        w.append("  100,000 VMs %-9s %s s  %s" % (
            m, (">%.1f" % r["cpu"]) if r["timeout"] else "%.2f" % r["cpu"],
            "MISSED (timeout)" if r["timeout"] else
            ("met" if r["cpu"] <= GOAL_100K_S else "MISSED")))
    w.append("  CloudSim 3.0.3 reference: 15-60 s per day-run on one core"
             " (/work/shared/research/cluster.md section 4)")
    return w


def read_steal():
    """(steal, total) jiffies of all CPUs from /proc/stat."""
    try:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        return v[7] if len(v) > 7 else 0, sum(v[:8])
    except (OSError, ValueError):
        return 0, 0


def git_desc():
    try:
        r = subprocess.run(["git", "-C", REPO, "describe", "--always", "--dirty"],
                           capture_output=True, text=True, timeout=10)
        return r.stdout.strip() or "-"
    except (OSError, subprocess.SubprocessError):
        return "-"


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for ln in f:
                if ln.startswith("model name"):
                    return ln.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.machine()


def render(a, dl, pls, cs, sys_, steal):
    pl, sy = pls["new"], sys_["new"]
    w = ["watt fleet sim cost  (bench/fleet.py; figures, not a test)",
         "date      %s" % time.strftime("%Y-%m-%d %H:%M:%S %z"),
         "commit    %s" % git_desc(),
         "host      %s, kernel %s, nproc %d, %s" % (
             platform.node() or "-", platform.release(), len(os.sched_getaffinity(0)),
             cpu_model()),
         "watt      %s, built %s  (%s)" % (
             a.watt, time.strftime("%H:%M:%S", time.localtime(a.watt_mtime)), a.version),
         ] + (["baseline  %s, built %s  (%s, %s; a snapshot taken at the start)" % (
             a.baseline, time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(a.base_mtime)),
             a.base_name, a.base_version)] if a.baseline else []) + [
         "load avg  %.2f at start, %.2f at end (1 min; other work on the host inflates"
         " every figure)" % (a.load0, os.getloadavg()[0]),
         "steal     %.1f %% of all CPU time during the run (/proc/stat): this VM shows steal"
         " time, so figures vary +-30 %%" % steal,
         "runs      %d per PlanetLab policy and mode (median); %d per synthetic size%s;"
         " timeout %.0f s per run%s" % (a.runs, a.synth_runs, "" if a.synth_runs == 1 else
                                        " (median)", a.timeout, ", --quick" if a.quick else
                                        (", --full" if a.full else "")),
         "",
         "CPU = user+sys s of the child `watt fleet sim ... --jobs 1 -q` (wait4 rusage, the same"
         " as a RUSAGE_CHILDREN delta);",
         "RSS MB = peak resident set of the simulator in MiB (GNU time %M); wall = fork to reap.",
         ""]
    if a.policies:
        w += render_planetlab(a, pl)
        w.append("")
        if a.baseline:
            w += render_baseline_planetlab(a, pls)
            w.append("")
        w += render_cloudsim(a, pl, cs)
        w.append("")
    w += render_synthetic(a, sy, sys_["base"] if a.baseline else None)
    w.append("")
    w += render_goals(a, pl, sy)
    w.append("")
    if a.baseline:
        w += render_verdict(a, pls, sys_)
        w.append("")
    w.append("elapsed %.0f s" % dl.elapsed())
    return "\n".join(w) + "\n"


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-o", "--out", default=os.path.join(REPO, "bench", "results-fleet-latest.txt"),
                    help="also write the figures here (default %(default)s; '' for none)")
    ap.add_argument("--watt", default=os.path.join(REPO, "build", "watt"))
    ap.add_argument("--baseline", default=None, metavar="WATT",
                    help="an older build's binary (e.g. of c810ab9): every cell is run with it"
                    " too, interleaved run by run, and the ratios printed")
    ap.add_argument("--baseline-name", default=None,
                    help="what to call the baseline (default: git describe of its tree)")
    ap.add_argument("--policies", default=",".join(POLICIES),
                    help="PlanetLab policies (default all 8; '' for no PlanetLab runs)")
    ap.add_argument("--synth-runs", type=int, default=1,
                    help="runs per synthetic cell, median printed (%(default)s)")
    ap.add_argument("--trace", default=os.path.join(REPO, "data", "planetlab", "20110303"))
    ap.add_argument("--runs", type=int, default=None, help="PlanetLab runs per cell (5; --quick 1)")
    ap.add_argument("--timeout", type=float, default=None,
                    help="seconds per run before it is killed (120; --quick 40)")
    ap.add_argument("--sizes", default=None,
                    help="synthetic VM counts (10000,30000,100000; --quick 10000;"
                    " --full adds 1000000)")
    ap.add_argument("--iqr-vms", type=int, default=10000,
                    help="VMs of the iqr-mmt-1.5 synthetic run (%(default)s; 0 for none)")
    ap.add_argument("--budget", type=float, default=None,
                    help="seconds after which synthetic runs are skipped (420; --quick 60)")
    ap.add_argument("--cloudsim", default="/tmp/cloudsim",
                    help="CloudSim 3.0.3 build to time once ('' for none)")
    ap.add_argument("--cloudsim-timeout", type=float, default=None,
                    help="seconds for the CloudSim run (150; --quick 60)")
    ap.add_argument("--quick", action="store_true",
                    help="1 PlanetLab run, 10,000 VMs only, 40 s timeout: under 2 minutes")
    ap.add_argument("--full", action="store_true",
                    help="also 1,000,000 VMs (minutes to hours; progress every 30 s)")
    ap.add_argument("--full-timeout", type=float, default=3600)
    a = ap.parse_args(argv)
    q = a.quick
    a.runs = max(1, a.runs if a.runs is not None else (1 if q else 5))
    a.timeout = a.timeout if a.timeout is not None else (40.0 if q else 120.0)
    a.budget = a.budget if a.budget is not None else (60.0 if q else 420.0)
    if a.cloudsim_timeout is None:
        a.cloudsim_timeout = 60.0 if q else 150.0
    sizes = a.sizes if a.sizes is not None else ("10000" if q else "10000,30000,100000")
    a.sizes = sorted({int(x) for x in sizes.split(",") if x.strip()})
    a.policies = [x.strip() for x in a.policies.split(",") if x.strip()]
    a.synth_runs = max(1, a.synth_runs)
    return a


def tree_name(binary):
    """git describe of the tree a binary was built in (its build folder's parent)."""
    try:
        r = subprocess.run(["git", "-C", os.path.dirname(os.path.realpath(binary)), "describe",
                            "--always", "--dirty"], capture_output=True, text=True, timeout=10)
        if r.returncode == 0 and r.stdout.strip():
            return r.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        pass
    return os.path.basename(binary)


def snapshot_watt(src, tmp, name="watt"):
    """Copy build/watt (a relink may be under way: retry until it runs)."""
    dst = os.path.join(tmp, name)
    for _ in range(30):
        try:
            shutil.copy2(src, dst)
            r = subprocess.run([dst, "--version"], capture_output=True, text=True, timeout=10)
            if r.returncode == 0:
                return dst, r.stdout.strip().splitlines()[0]
        except (OSError, subprocess.SubprocessError):
            pass
        time.sleep(2)
    return None, None


def main(argv=None):
    a = parse_args(argv)
    if not os.access(a.watt, os.X_OK):
        log("no watt binary at %s (ninja -C build)" % a.watt)
        return 2
    if a.baseline:
        if not os.access(a.baseline, os.X_OK):
            log("no baseline binary at %s" % a.baseline)
            return 2
        a.base_name = a.baseline_name or tree_name(a.baseline)
    if not os.path.isdir(a.trace):
        log("no PlanetLab day at %s" % a.trace)
        return 2
    a.load0 = os.getloadavg()[0]
    steal0 = read_steal()
    dl = Deadline(a.budget)
    with tempfile.TemporaryDirectory(prefix="watt-fleet-bench-") as tmp:
        a.watt_mtime = os.path.getmtime(a.watt)
        a.watt_bin, a.version = snapshot_watt(a.watt, tmp)
        if not a.watt_bin:
            log("%s does not run (a build in progress?)" % a.watt)
            return 2
        if a.baseline:
            a.base_mtime = os.path.getmtime(a.baseline)
            a.base_bin, a.base_version = snapshot_watt(a.baseline, tmp, "watt-baseline")
            if not a.base_bin:
                log("the baseline %s does not run" % a.baseline)
                return 2
        pl = bench_planetlab(a)
        sy = {b: {} for b, _ in binaries(a)}
        plan = synth_plan(a)
        # Required synthetic runs before the optional CloudSim one.
        bench_synthetic(a, dl, [x for x in plan if not x[3]], sy)
        cs = None
        if a.cloudsim and a.policies:
            cs = {"skipped": "budget"} if dl.passed() and not a.full else bench_cloudsim(a)
        bench_synthetic(a, dl, [x for x in plan if x[3]], sy)
        if a.full:
            bench_million(a, sy)
    s1 = read_steal()
    steal = 100.0 * (s1[0] - steal0[0]) / max(1, s1[1] - steal0[1])
    text = render(a, dl, pl, cs, sy, steal)
    sys.stdout.write(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
