#!/usr/bin/env python3
"""`watt top` on THIS machine against a load whose wake-up rate is known:
tests/helpers/waker (a timerfd at N Hz; it counts its own wake-ups).

  (a) N = 10, 100, 1000: the waker's wakeups_per_s (sched_wakeup of its
      threads) is within 10 % of N;
  (b) side by side with powertop (--csv --time=T on the same waker, pinned
      to CPU 0, at the same time): within 10 % of powertop at N = 10 and 100
      when powertop is exact (see test_powertop). At 1000 Hz both numbers are printed, not
      compared: powertop's per-process figure is an idle-exit blame
      heuristic (a wake-up counts only when it took a CPU out of idle) read
      from fixed rings it drains only after --time ends; on this VM
      (haltpoll cpuidle) it read 6-88 for a true 100 Hz and 90-890 for
      1000 Hz, depending on other load and --time, and 0 for a waker
      pinned with taskset;
  (c) every document: node_w = idle_w + kernel_w + unaccounted_w + the sum
      of processes[].power_w, and the same with cgroups[];
  (d) a fork storm (500, then 2000 short-lived processes a second) in the
      window: exit 0, max RSS under 64 MiB (192 under ASan), valid JSON, sum rule,
      unaccounted_w >= 0;
  (e) --no-trace: source "proc", and 100 Hz still within 10 % (voluntary
      context switches);
  (f) as uid 65534: exit 0, source "proc", why_not_traced says why.

Runs only as root on the running system, with perf tracepoints usable
(exit 77 otherwise). Registered not parallel: nothing else should load the
machine while it counts.

Usage: test_top_live.py [WATT [WAKER]] (default: $WATT, $WATT_WAKER)."""
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
from checks import check, summary  # noqa: E402

WATT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.environ["WATT"])
WAKER = os.path.abspath(sys.argv[2] if len(sys.argv) > 2 else
                        os.environ.get("WATT_WAKER") or
                        os.path.join(os.path.dirname(WATT), "tests", "helpers", "waker"))
INTERVAL = 3  # seconds of each watt top window
PT_TIME = 5  # seconds of each powertop/watt side-by-side window
TOL = 0.10  # relative tolerance on a wake-up rate
RSS_LIMIT_KB = 64 * 1024  # (d): watt's max RSS through a fork storm (x3 under ASan)
NOBODY = 65534


def live_root():
    """/ is the running kernel's: procfs on /proc, sysfs on /sys."""
    try:
        with open("/proc/self/mountinfo") as f:
            mounts = {(l.split()[4], l.split(" - ")[1].split()[0]) for l in f}
    except OSError:
        return False
    return ("/proc", "proc") in mounts and ("/sys", "sysfs") in mounts


class Waker:
    """One waker process; stop() returns its own counts (a dict)."""

    def __init__(self, *args, cpu=None):
        pin = (lambda: os.sched_setaffinity(0, {cpu})) if cpu is not None else None
        self.p = subprocess.Popen([WAKER, *args], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True, preexec_fn=pin)
        line = self.p.stdout.readline()
        if not line.startswith("pid="):
            self.p.kill()
            raise RuntimeError(f"waker {args}: {line!r} {self.p.stderr.read()}")
        self.pid = int(line[4:])
        try:
            self.tids = {int(t) for t in os.listdir(f"/proc/{self.pid}/task")}
        except OSError:
            self.tids = {self.pid}

    def stop(self):
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
        out, err = self.p.communicate(timeout=30)
        lines = out.strip().splitlines()
        try:
            return json.loads(lines[-1])
        except (IndexError, ValueError):
            return {"error": f"exit {self.p.returncode}: {out!r} {err!r}"}


class Proc:
    """A finished child: exit code, stdout, stderr, rusage."""

    def __init__(self, rc, out, err, ru, wall):
        self.rc, self.out, self.err, self.ru, self.wall = rc, out, err, ru, wall

    def doc(self):
        try:
            return json.loads(self.out)
        except ValueError:
            return None


def start(argv, tmp, tag, preexec=None, env=None):
    """Popen with stdout/stderr to files (no pipe to fill while we wait)."""
    o = open(os.path.join(tmp, tag + ".out"), "w+")
    e = open(os.path.join(tmp, tag + ".err"), "w+")
    p = subprocess.Popen(argv, stdout=o, stderr=e, preexec_fn=preexec, env=env,
                         cwd="/", stdin=subprocess.DEVNULL)
    return p, o, e, time.monotonic()


def finish(started, timeout):
    """os.wait4 the child (killed after TIMEOUT s): its own rusage."""
    p, o, e, t0 = started
    timer = threading.Timer(timeout, lambda: p.poll() is None and p.kill())
    timer.start()
    _, status, ru = os.wait4(p.pid, 0)
    timer.cancel()
    p.returncode = os.waitstatus_to_exitcode(status)
    wall = time.monotonic() - t0
    o.seek(0)
    e.seek(0)
    out, err = o.read(), e.read()
    o.close()
    e.close()
    return Proc(p.returncode, out, err, ru, wall)


def watt_top(tmp, interval, *extra, preexec=None, env=None, watt=WATT):
    s = start([watt, "top", "--once", "--json", "--interval", str(interval), *extra], tmp,
              "watt", preexec=preexec, env=env)
    return finish(s, interval + 60)


def proc_row(doc, pid):
    return next((p for p in doc.get("processes", []) if p.get("pid") == pid), None)


def num(v):
    """A JSON number as float; NaN for null/missing."""
    return float(v) if isinstance(v, (int, float)) else math.nan


def within(got, want, tol=TOL):
    return not math.isnan(got) and abs(got - want) <= tol * want


def sum_rule(doc, what):
    """(c): node_w = idle_w + kernel_w + unaccounted_w + sum of the rows,
    for processes and cgroups; the rows' rounding is the tolerance."""
    pw = doc.get("power", {})
    node = num(pw.get("node_w"))
    if math.isnan(node):
        print(f"# {what}: node_w is null ({pw.get('note')}): no sum rule to check")
        return
    fixed = num(pw.get("idle_w")) + num(pw.get("kernel_w")) + num(pw.get("unaccounted_w"))
    for key in ("processes", "cgroups"):
        rows = doc.get(key, [])
        vals = [num(r.get("power_w")) for r in rows]
        total = sum(v for v in vals if not math.isnan(v))
        # at most half a milliwatt of rounding per printed non-zero term (watt
        # prints more digits today; this holds if it rounds to 3 decimals)
        tol = 0.0005 * (sum(1 for v in vals if v) + 3) + 1e-9
        check(abs(node - (fixed + total)) <= tol,
              f"{what}: sum rule over {key}: node_w {node:.3f} vs idle+kernel+unaccounted "
              f"{fixed:.3f} + {len(rows)} rows {total:.3f} = {fixed + total:.3f} (tol {tol:.3f})")
    procs_w = num(pw.get("processes_w"))
    if not math.isnan(procs_w):
        total = sum(num(r.get("power_w")) for r in doc.get("processes", [])
                    if not math.isnan(num(r.get("power_w"))))
        nz = sum(1 for r in doc.get("processes", []) if num(r.get("power_w")))
        check(abs(procs_w - total) <= 0.0005 * (nz + 1) + 1e-9,
              f"{what}: power.processes_w {procs_w:.3f} = sum of processes[].power_w {total:.3f}")


def run_with_waker(tmp, hz, interval, *extra, threads=1):
    """Start a waker at HZ, give it 0.3 s, run watt top over it, stop it.
    Returns (watt Proc, waker counts, waker pid)."""
    w = Waker("--hz", str(hz), "--seconds", str(interval + 60), "--threads", str(threads),
              "--name", f"waker{hz}")
    try:
        time.sleep(0.3)
        r = watt_top(tmp, interval, *extra)
    finally:
        own = w.stop()
    return r, own, w.pid


def test_rates(tmp):
    """(a): wakeups_per_s of the waker within 10 % of N."""
    for hz in (10, 100, 1000):
        r, own, pid = run_with_waker(tmp, hz, INTERVAL)
        doc = r.doc()
        check(r.rc == 0 and doc is not None, f"(a) {hz} Hz: exit 0, one JSON document "
                                             f"(rc {r.rc}, {r.err.strip()[-300:]})")
        if doc is None:
            continue
        row = proc_row(doc, pid)
        got = num(row.get("wakeups_per_s")) if row else math.nan
        idle = num(row.get("idle_wakeups_per_s")) if row else math.nan
        wk = doc["wakeups"]
        # per-process counts come from the trace unless it lost > 2 % of the
        # window's events; then from /proc (docs/top.md), and a note says so
        src = wk.get("process_source", "tracepoints")
        print(f"# (a) {hz} Hz: watt top {got:.1f}/s (from {src}), the waker's own count "
              f"{own.get('wakeups_per_s')}/s, idle wake-ups {idle:.1f}/s; lost "
              f"{wk.get('lost_events')} (undelivered {wk.get('undelivered_events')}); watt CPU "
              f"{(r.ru.ru_utime + r.ru.ru_stime) / r.wall * 100:.2f} % over {r.wall:.1f} s")
        check(row is not None, f"(a) {hz} Hz: the waker (pid {pid}) is a row")
        check(within(got, hz), f"(a) {hz} Hz: wakeups_per_s {got:.1f} (from {src}) within "
                               f"10 % of {hz}")
        if src != "tracepoints":
            check(any("lost" in n or "deliver" in n for n in doc.get("notes", [])),
                  f"(a) {hz} Hz: a note says why per-process wake-ups are from {src}")
        check(doc["wakeups"]["source"] == "tracepoints", f"(a) {hz} Hz: source tracepoints")
        sum_rule(doc, f"(a) {hz} Hz")


def powertop_wakeups(path, tids):
    """The waker's Wakeups/s in powertop's "Overview of Software Power
    Consumers" (lines like ` 1.7 ms/s; 63.5;;;;Process;[PID 921] ./waker`),
    summed over its threads (powertop names a thread by its TID); None when
    the section is missing, 0.0 when the waker is not listed."""
    try:
        with open(path, errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    start = next((i for i, l in enumerate(lines) if "Overview of Software Power Consumers" in l),
                 None)
    if start is None:
        return None
    total = 0.0
    for line in lines[start + 1:]:
        if line.startswith("*") or "*  *  *" in line:
            break
        f = line.split(";")
        if len(f) < 7 or f[5].strip() != "Process" or not f[6].startswith("[PID "):
            continue
        try:
            tid = int(f[6][5:].split("]", 1)[0])
            rate = float(f[1]) if f[1].strip() else 0.0
        except ValueError:
            continue
        if tid in tids:
            total += rate
    return total


def side_by_side(tmp, pt, hz):
    """One waker, powertop and watt top started together over PT_TIME s:
    (watt's doc or None, watt's wakeups/s and idle exits/s for the waker,
    powertop's, the waker's own count)."""
    # On CPU 0: this VM's kernel delivers almost no trace samples from CPU 1
    # (docs/top.md), to powertop as to anyone; watt notices, powertop not.
    w = Waker("--hz", str(hz), "--seconds", str(PT_TIME + 60), "--name", f"waker{hz}", cpu=0)
    csv = os.path.join(tmp, f"powertop-{hz}.csv")
    try:
        time.sleep(0.3)
        ps = start([pt, f"--csv={csv}", f"--time={PT_TIME}"], tmp, "powertop")
        ws = start([WATT, "top", "--once", "--json", "--interval", str(PT_TIME)], tmp, "watt")
        r = finish(ws, PT_TIME + 60)
        prc = finish(ps, PT_TIME + 60)
    finally:
        own = w.stop()
    doc = r.doc()
    check(r.rc == 0 and doc is not None, f"(b) {hz} Hz: watt top exit 0 with powertop "
                                         f"beside it ({r.err.strip()[-300:]})")
    row = proc_row(doc, w.pid) if doc else None
    got = num(row.get("wakeups_per_s")) if row else math.nan
    idle = num(row.get("idle_wakeups_per_s")) if row else math.nan
    ptw = powertop_wakeups(csv, w.tids)
    print(f"# (b) {hz} Hz: watt top {got:.1f}/s (idle exits {idle:.1f}/s), powertop "
          f"{ptw}/s (exit {prc.rc}), the waker's own count {own.get('wakeups_per_s')}/s")
    if ptw is None:
        check(False, f"(b) {hz} Hz: powertop wrote its software-consumers section "
                     f"(exit {prc.rc}, {prc.err.strip()[-200:]})")
    if doc:
        sum_rule(doc, f"(b) {hz} Hz")
    return got, ptw, num(own.get("wakeups_per_s"))


def test_powertop(tmp):
    """(b): powertop and watt top at once over the same waker. Powertop
    blames a wake-up on a process only when it took a CPU out of idle, so
    even at 10 Hz it is exact only on a quiet machine: with other work
    keeping the CPUs busy it reads 0.4-2 for a true 10 (and then agrees with
    watt's idle_wakeups_per_s instead). So at 10 Hz, up to 3 tries: the
    first where powertop is exact (within 10 % of the waker's own count) is
    the comparison; if none is, the machine is too busy for powertop and
    watt is held to the waker's own count. Above 10 Hz figures only (see
    the module's docstring)."""
    pt = shutil.which("powertop")
    if not pt:
        print("# (b) skipped: no powertop")
        return
    for hz in (10, 100):
        tries = []
        for _ in range(3):
            got, ptw, own = side_by_side(tmp, pt, hz)
            tries.append((got, ptw, own))
            if ptw is not None and within(ptw, own):
                check(within(got, ptw), f"(b) {hz} Hz: watt top {got:.1f}/s within 10 % of "
                                        f"powertop {ptw:.1f}/s (powertop exact on try "
                                        f"{len(tries)})")
                break
        else:
            print(f"# (b) {hz} Hz: powertop not exact in {len(tries)} tries (the CPUs were "
                  f"busy): {[t[1] for t in tries]}/s for a true ~{hz}")
            check(all(within(t[0], t[2]) for t in tries),
                  f"(b) {hz} Hz: watt top within 10 % of the waker's own count in every try "
                  f"({[(round(t[0], 1), t[2]) for t in tries]})")
    side_by_side(tmp, pt, 1000)


def small_quarantine_env():
    """Under ASan freed memory waits in a quarantine (256 MiB by default) and
    counts in the RSS: keep it small so the bound measures watt, not ASan.
    Ignored by a build without ASan."""
    opts = [o for o in os.environ.get("ASAN_OPTIONS", "").split(":") if o]
    return dict(os.environ, ASAN_OPTIONS=":".join(opts + ["quarantine_size_mb=4"]))


def has_asan(path):
    """Whether the binary is built with AddressSanitizer (it links libasan)."""
    try:
        with open(path, "rb") as f:
            return b"__asan_init" in f.read()
    except OSError:
        return False


def test_fork_storm(tmp):
    """(d): 500 and 2000 forks a second through the window."""
    # ASan's redzones, shadow memory and size-class caches: ~3x here (74 MiB
    # at 2000 forks/s against 17 MiB without it)
    limit = RSS_LIMIT_KB * (3 if has_asan(WATT) else 1)
    env = small_quarantine_env()
    base = watt_top(tmp, INTERVAL, env=env)
    for rate in (500, 2000):
        storm = Waker("--fork-storm", str(rate), "--seconds", str(INTERVAL + 60), "--child-us",
                      "2000", "--name", "forkstorm")
        try:
            time.sleep(0.3)
            r = watt_top(tmp, INTERVAL, env=env)
        finally:
            own = storm.stop()
        storm_check(r, base, own, storm.pid, f"(d) {rate} forks/s", limit)


def storm_check(r, base, own, pid, what, limit):
    doc = r.doc()
    rss, rss0 = r.ru.ru_maxrss, base.ru.ru_maxrss
    print(f"# {what}: {own.get('forks')} forks in {own.get('elapsed_s'):.1f} s "
          f"({own.get('fork_failures')} failed; the parent woke {own.get('wakeups_per_s')}/s "
          f"by its own count); watt max RSS {rss} KiB (without the storm "
          f"{rss0} KiB), CPU {(r.ru.ru_utime + r.ru.ru_stime) * 1e3:.0f} ms "
          f"(without {(base.ru.ru_utime + base.ru.ru_stime) * 1e3:.0f} ms)")
    check(r.rc == 0 and doc is not None,
          f"{what}: exit 0, one JSON document (rc {r.rc}, {r.err.strip()[-300:]})")
    check(rss <= limit, f"{what}: max RSS {rss} KiB <= {limit} KiB")
    if doc is None:
        return
    procs = doc.get("processes", [])
    wk = doc.get("wakeups", {})
    print(f"# {what}: {len(procs)} process rows, {sum(1 for p in procs if p.get('exited'))} "
          f"exited, {len(doc.get('cgroups', []))} cgroups, lost {wk.get('lost_events')}, "
          f"dropped {wk.get('dropped_events')}, notes {doc.get('notes')}")
    sum_rule(doc, what)
    unacc = num(doc.get("power", {}).get("unaccounted_w"))
    check(math.isnan(unacc) or unacc >= 0, f"{what}: unaccounted_w {unacc} >= 0")
    row = proc_row(doc, pid)
    if row:
        print(f"# {what}: the storm's parent: {row.get('wakeups_per_s'):.1f} wake-ups/s, "
              f"{row.get('cpu_pct'):.1f} % CPU, {row.get('power_w')} W")


def test_no_trace(tmp):
    """(e): --no-trace counts voluntary context switches."""
    r, own, pid = run_with_waker(tmp, 100, INTERVAL, "--no-trace")
    doc = r.doc()
    check(r.rc == 0 and doc is not None, f"(e) --no-trace: exit 0 ({r.err.strip()[-300:]})")
    if doc is None:
        return
    check(doc["wakeups"]["source"] == "proc",
          f"(e) --no-trace: source {doc['wakeups']['source']!r} is 'proc'")
    row = proc_row(doc, pid)
    got = num(row.get("wakeups_per_s")) if row else math.nan
    print(f"# (e) --no-trace 100 Hz: watt top {got:.1f}/s, waker's own "
          f"{own.get('wakeups_per_s')}/s, why_not_traced {doc['wakeups'].get('why_not_traced')!r}")
    check(within(got, 100), f"(e) --no-trace: wakeups_per_s {got:.1f} within 10 % of 100")
    sum_rule(doc, "(e) --no-trace")


def as_nobody():
    os.setgroups([])
    os.setgid(NOBODY)
    os.setuid(NOBODY)


def copy_for_nobody(path):
    """PATH copied into a fresh directory under /tmp, which every user can
    reach: the build tree may not be (a clone in a mode-0700 directory, as
    mktemp -d makes, gave EACCES on exec). The caller removes it."""
    d = tempfile.mkdtemp(prefix="watt-top-nobody-", dir="/tmp")
    os.chmod(d, 0o755)
    dst = os.path.join(d, os.path.basename(path))
    shutil.copy(path, dst)
    os.chmod(dst, 0o755)
    return d, dst


def test_nobody(tmp):
    """(f): without the rights to trace, the /proc fallback says why."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": "/nonexistent",
           "LANG": "C"}
    bindir, watt = copy_for_nobody(WATT)
    w = Waker("--hz", "100", "--seconds", "60", "--name", "waker100")
    try:
        time.sleep(0.3)
        r = watt_top(tmp, INTERVAL, preexec=as_nobody, env=env, watt=watt)
    finally:
        own = w.stop()
        shutil.rmtree(bindir, ignore_errors=True)
    doc = r.doc()
    check(r.rc == 0 and doc is not None,
          f"(f) uid {NOBODY}: exit 0, one JSON document (rc {r.rc}, {r.err.strip()[-300:]})")
    if doc is None:
        return
    wk = doc["wakeups"]
    why = wk.get("why_not_traced") or ""
    row = proc_row(doc, w.pid)
    print(f"# (f) uid {NOBODY}: source {wk.get('source')!r}, why_not_traced {why!r}; the "
          f"waker {row.get('wakeups_per_s') if row else None}/s (own "
          f"{own.get('wakeups_per_s')}/s)")
    check(wk.get("source") == "proc", f"(f) uid {NOBODY}: source 'proc'")
    reasons = ("paranoid", "CAP_PERFMON", "root", "EACCES", "EPERM", "ermission")
    check(any(k in why for k in reasons),
          f"(f) uid {NOBODY}: why_not_traced names the reason ({why!r})")
    sum_rule(doc, f"(f) uid {NOBODY}")


def main():
    if os.geteuid() != 0 or os.environ.get("WATT_ROOT") or not live_root():
        print("skip: needs root and / as the running system")
        return 77
    if not os.access(WAKER, os.X_OK):
        print(f"FAIL no waker at {WAKER} (ninja -C build tests/helpers/waker)")
        return 1
    tmp = tempfile.mkdtemp(prefix="watt-top-live-")
    os.chmod(tmp, 0o755)
    try:
        probe = watt_top(tmp, 1)
        doc = probe.doc()
        if probe.rc != 0 or doc is None:
            print(f"FAIL watt top --once --json: exit {probe.rc}: {probe.err.strip()[-500:]}")
            return 1
        if doc["wakeups"]["source"] != "tracepoints":
            print(f"skip: perf tracepoints unusable here: {doc['wakeups'].get('why_not_traced')}")
            return 77
        with open("/proc/loadavg") as f:
            print(f"# load average {f.read().split()[:3]}, {os.cpu_count()} CPUs")
        test_rates(tmp)
        test_powertop(tmp)
        test_fork_storm(tmp)
        test_no_trace(tmp)
        test_nobody(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return summary()


if __name__ == "__main__":
    sys.exit(main())
