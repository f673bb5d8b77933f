#!/usr/bin/env python3
"""What one `watt report --interval 0 --json` costs, on this machine and on the
generated fixture roots, next to node_exporter scraping the same roots.

usage: bench/report.py [-o FILE] [--runs N] [--quick] [...]   (see --help)

Figures only; this is not a test and exits 0 whatever the numbers are (it
exits non-zero only when it cannot measure at all). Goals from the issue:
<= 5 ms CPU here, <= 50 ms CPU at 256 CPUs, cost linear in online CPUs.

Per target it measures:
  CPU    user+sys of the child (os.wait4 rusage), N runs after W warm-ups;
         median and 90th percentile, in ms
  wall   fork to reap, median, in ms
  self   watt's own "sample_cost_ms" from the JSON: wall time of taking the
         sample, without process start and output (median of 3 runs)
  sysc   system calls of one run (strace -f -c), top five by count, openat
         calls and how many of them failed (absent files)
  RSS    peak resident set of one run (GNU time %M), MiB
  Minst  instructions of one run in user space (valgrind callgrind; the
         kernel side, which dominates here, is not counted)
  peer   node_exporter (Debian's prometheus-node-exporter) pointed at the
         same root on 127.0.0.1 only: CPU the exporter process spends per
         /metrics scrape (sum over its threads of /proc/PID/task/*/schedstat
         field 1, ns, before and after S scrapes) and the scrape's wall time;
         once with the collectors that read what watt reads ("cmp": cpu,
         cpufreq, rapl, hwmon, stat, interrupts) and once with its defaults.
Targets: "live" (/), every fixture under build/tests/fixtures (or generated
into --work when the build has none), and big-384 rescaled to other CPU
counts (--scaled) to check that cost grows linearly with CPUs.
"""
import argparse
import hashlib
import importlib.util
import json
import os
import platform
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GEN = os.path.join(REPO, "tests", "fixtures", "gen", "mkfixture.py")
NE_CANDIDATES = ("prometheus-node-exporter", "node_exporter")
# node_exporter collectors that read what watt report reads (power, cpufreq,
# per-CPU times, interrupts); it has no cpuidle or runtime-PM collector.
NE_CMP = ("cpu", "cpufreq", "rapl", "hwmon", "stat", "interrupts")

# Rescales big-384 (2 sockets x 2 threads x K cores, all online) so the same
# machine shape can be measured at 4*K CPUs. Runs in a child interpreter.
SCALE_CODE = r"""
import importlib.util, sys

from benchutil import Deadline  # noqa: E402
gen, k, dest = sys.argv[1], int(sys.argv[2]), sys.argv[3]
spec = importlib.util.spec_from_file_location("mkfixture", gen)
mk = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mk)
orig = mk.smt_layout
def scaled(sockets, core_ids, pkg_shift, nodes_per_socket=1, offline=()):
    return orig(sockets, list(range(k)), pkg_shift, nodes_per_socket, offline=())
mk.smt_layout = scaled
sys.exit(mk.main(["--force", "big-384", dest]))
"""


def log(msg):
    print("bench: " + msg, file=sys.stderr, flush=True)


def file_digest(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()[:16]


def fresh_tree(dest, key):
    """True if dest was generated with this generator version and key."""
    try:
        with open(dest + ".stamp") as f:
            return f.read().strip() == key
    except OSError:
        return False


def generate(dest, key, argv):
    if fresh_tree(dest, key):
        return True
    shutil.rmtree(dest, ignore_errors=True)
    os.makedirs(os.path.dirname(dest), exist_ok=True)
    r = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        log("generating %s failed: %s" % (dest, r.stderr.strip()[-300:]))
        return False
    with open(dest + ".stamp", "w") as f:
        f.write(key + "\n")
    return True


def gen_machines():
    if not os.path.exists(GEN):
        return []
    r = subprocess.run([sys.executable, GEN, "--list"], capture_output=True,
                       text=True, timeout=30)
    return [ln.split()[0] for ln in r.stdout.splitlines() if ln.strip()]


def collect_targets(a):
    """[(name, root or None)]: live, fixtures, rescaled big-384."""
    targets = [("live", None)]
    gkey = file_digest(GEN) if os.path.exists(GEN) else "none"
    ne = os.path.join(a.fixtures, "node_exporter")  # unpacked by the build only
    if os.path.isdir(os.path.join(ne, "sys")):
        targets.append(("node_exporter", ne))
    names = gen_machines()
    for name in names:
        built = os.path.join(a.fixtures, name)
        # A tree the build is still writing (or failed to) lacks the CPU list.
        if os.path.exists(os.path.join(built, "sys", "devices", "system", "cpu", "online")):
            targets.append((name, built))
            continue
        dest = os.path.join(a.work, "fixtures", name)
        if not fresh_tree(dest, gkey):
            log("generating %s into %s" % (name, dest))
        if generate(dest, gkey, [sys.executable, GEN, "--force", name, dest]):
            targets.append((name, dest))
    if "big-384" in names:
        for n in a.scaled:
            dest = os.path.join(a.work, "scaled", "big-%d" % n)
            if not fresh_tree(dest, gkey):
                log("generating big-384 rescaled to %d CPUs" % n)
            argv = [sys.executable, "-c", SCALE_CODE, GEN, str(n // 4), dest]
            if generate(dest, gkey, argv):
                targets.append(("big-384@%d" % n, dest))
    if a.targets:
        want = set(a.targets)
        targets = [t for t in targets if t[0] in want]
    return targets


def watt_cmd(a, root):
    cmd = [a.watt, "report", "--interval", "0", "--json"]
    return cmd + (["--root", root] if root else [])


def spawn_wait(cmd):
    """Run cmd with stdout/stderr to /dev/null; (status, user_s, sys_s, wall_s)."""
    acts = [(os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
            (os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_WRONLY, 0)]
    t0 = time.perf_counter()
    pid = os.posix_spawn(cmd[0], cmd, os.environ, file_actions=acts)
    _, status, ru = os.wait4(pid, 0)
    wall = time.perf_counter() - t0
    return status, ru.ru_utime, ru.ru_stime, wall


def percentile(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100.0 * (len(xs) - 1))))]


def measure_runs(cmd, runs, warmup):
    for _ in range(warmup):
        spawn_wait(cmd)
    cpu, sys_, wall, bad = [], [], [], 0
    for _ in range(runs):
        st, u, k, w = spawn_wait(cmd)
        bad += st != 0
        cpu.append((u + k) * 1e3)
        sys_.append(k * 1e3)
        wall.append(w * 1e3)
    return {"cpu_med": statistics.median(cpu), "cpu_p90": percentile(cpu, 90),
            # The kernel splits exact runtime into user/sys by tick samples
            # (cputime_adjust), so one short run's split is 0, 1/2 or 1:
            # only the mean over runs is meaningful.
            "sys_med": statistics.mean(sys_),
            "cpu_min": min(cpu), "wall_med": statistics.median(wall),
            "failed_runs": bad, "runs": runs}


def peak_rss_mib(cmd, tmp):
    """Peak RSS of one run, MiB. Measured through GNU time because a child
    posix_spawn()ed from this script shares our memory until exec, and exec
    carries that high-water mark into the child's maxrss."""
    gt = "/usr/bin/time"
    if not os.access(gt, os.X_OK):
        return None
    out = os.path.join(tmp, "time.txt")
    r = subprocess.run([gt, "-f", "%M", "-o", out, "--"] + cmd,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120)
    try:
        with open(out) as f:
            return int(f.read().split()[-1]) / 1024.0 if r.returncode == 0 else None
    except (OSError, ValueError, IndexError):
        return None


def parse_strace(path):
    """strace -c summary -> (total calls, {syscall: (calls, errors)})."""
    calls, total = {}, None
    with open(path) as f:
        for ln in f:
            tok = ln.split()
            if len(tok) < 5 or not tok[3].isdigit():
                continue
            errs = int(tok[4]) if len(tok) >= 6 and tok[4].isdigit() else 0
            if tok[-1] == "total":
                total = int(tok[3])
            else:
                calls[tok[-1]] = (int(tok[3]), errs)
    if total is None:
        total = sum(c for c, _ in calls.values())
    return total, calls


def strace_run(cmd, tmp):
    if not shutil.which("strace"):
        return None
    out = os.path.join(tmp, "strace.txt")
    r = subprocess.run(["strace", "-f", "-c", "-o", out, "--"] + cmd,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       timeout=120)
    if r.returncode != 0 or not os.path.exists(out):
        return None
    total, calls = parse_strace(out)
    top = sorted(calls.items(), key=lambda kv: -kv[1][0])[:5]
    opens = [calls.get(k, (0, 0)) for k in ("openat", "open", "openat2")]
    return {"total": total, "top": [(k, v[0]) for k, v in top],
            "openat": sum(o[0] for o in opens), "open_fail": sum(o[1] for o in opens),
            "errors": sum(e for _, e in calls.values())}


def callgrind_run(cmd, tmp):
    if not shutil.which("valgrind"):
        return None
    out = os.path.join(tmp, "callgrind.out")
    r = subprocess.run(["valgrind", "--tool=callgrind", "-q",
                        "--callgrind-out-file=" + out] + cmd,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       timeout=120)
    if r.returncode != 0 or not os.path.exists(out):
        return None
    with open(out) as f:
        for ln in f:
            if ln.startswith(("summary:", "totals:")):
                return int(ln.split()[1])
    return None


def perf_instructions(cmd, runs):
    """Instructions (user+kernel) per run from hardware counters, or None
    where the PMU does not offer them (as in most VMs)."""
    if not shutil.which("perf"):
        return None
    r = subprocess.run(["perf", "stat", "-x,", "-e", "instructions", "-r", str(runs),
                        "--"] + cmd, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, text=True, timeout=120)
    for ln in r.stderr.splitlines():
        f = ln.split(",")
        if len(f) > 2 and f[2].startswith("instructions"):
            try:
                return float(f[0])
            except ValueError:
                return None
    return None


def self_report(a, root, runs=3):
    """watt's JSON: its own sample_cost_ms (median of a few runs, taken after
    the timed runs so caches are warm), online/possible CPUs, output size."""
    costs, d, r = [], {}, None
    for _ in range(runs):
        r = subprocess.run(watt_cmd(a, root), capture_output=True, timeout=60)
        try:
            d = json.loads(r.stdout)
        except ValueError:
            return {"rc": r.returncode, "json_bytes": len(r.stdout)}
        if isinstance(d.get("sample_cost_ms"), (int, float)):
            costs.append(d["sample_cost_ms"])
    host = d.get("host") or {}
    return {"rc": r.returncode, "json_bytes": len(r.stdout),
            "self_ms": statistics.median(costs) if costs else None,
            "online": host.get("online_cpus"), "possible": host.get("cpus_possible"),
            "problems": len(d.get("problems") or [])}


def find_ne():
    for n in NE_CANDIDATES:
        p = shutil.which(n)
        if p:
            return p
    return None


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def proc_cpu_ns(pid):
    """CPU the whole process has used, ns: sum over its threads of schedstat
    (exact); falls back to utime+stime ticks from /proc/PID/stat."""
    tdir = "/proc/%d/task" % pid
    try:
        total = 0
        for tid in os.listdir(tdir):
            with open("%s/%s/schedstat" % (tdir, tid)) as f:
                total += int(f.read().split()[0])
        if total > 0:
            return total
    except (OSError, ValueError, IndexError):
        pass
    with open("/proc/%d/stat" % pid) as f:
        rest = f.read().rsplit(")", 1)[1].split()
    return (int(rest[11]) + int(rest[12])) * 1e9 / os.sysconf("SC_CLK_TCK")


def scrape(url):
    t0 = time.perf_counter()
    with urllib.request.urlopen(url, timeout=30) as resp:
        n = len(resp.read())
    return time.perf_counter() - t0, n


def ne_measure(exe, root, collectors, scrapes, tmp, max_s=2.0):
    """Start node_exporter on 127.0.0.1 at root; CPU ms and wall ms per scrape,
    over `scrapes` scrapes or as many (at least 3) as fit in max_s seconds."""
    port = free_port()
    argv = [exe, "--web.listen-address=127.0.0.1:%d" % port,
            "--collector.textfile.directory=" + os.path.join(tmp, "textfile")]
    if root:
        argv += ["--path.sysfs=" + os.path.join(root, "sys"),
                 "--path.procfs=" + os.path.join(root, "proc"),
                 "--path.rootfs=" + root]
    if collectors:
        argv += ["--collector.disable-defaults"] + ["--collector." + c for c in collectors]
    os.makedirs(os.path.join(tmp, "textfile"), exist_ok=True)
    url = "http://127.0.0.1:%d/metrics" % port
    with open(os.path.join(tmp, "ne.log"), "w") as logf:
        p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=logf)
    try:
        for _ in range(200):  # up to ~10 s to start listening
            if p.poll() is not None:
                return None
            try:
                scrape(url)
                break
            except OSError:
                time.sleep(0.05)
        else:
            return None
        if scrape(url)[0] < 0.5:  # second warm-up (caches, GC sizing) when cheap
            scrape(url)
        before = proc_cpu_ns(p.pid)
        walls, size, t0 = [], 0, time.monotonic()
        for _ in range(scrapes):
            w, size = scrape(url)
            walls.append(w * 1e3)
            if len(walls) >= 3 and time.monotonic() - t0 > max_s:
                break
        cpu_ms = (proc_cpu_ns(p.pid) - before) / 1e6 / len(walls)
        return {"cpu_ms": cpu_ms, "wall_med": statistics.median(walls), "bytes": size,
                "scrapes": len(walls)}
    finally:
        p.terminate()
        try:
            p.wait(timeout=5)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(timeout=5)


def bench_target(a, name, root, dl, tmp):
    log("%s: %s" % (name, root or "/"))
    cmd = watt_cmd(a, root)
    res = {"name": name, "root": root}
    t0 = time.monotonic()
    res.update(measure_runs(cmd, a.runs, a.warmup))
    res.update(self_report(a, root))
    res["rss_mib"] = peak_rss_mib(cmd, tmp)
    if not a.no_strace:
        res["strace"] = strace_run(cmd, tmp)
    if a.hw_instr:
        res["perf_instr"] = perf_instructions(cmd, min(a.runs, 10))
    if not a.no_callgrind and not dl.passed():
        res["callgrind"] = callgrind_run(cmd, tmp)
    ne = a.ne
    if ne and not dl.passed():
        res["ne_cmp"] = ne_measure(ne, root, NE_CMP, a.scrapes, tmp)
        if not a.ne_cmp_only:
            res["ne_all"] = ne_measure(ne, root, None, a.scrapes, tmp)
    log("%s: %.1f s" % (name, time.monotonic() - t0))
    return res


def bench_other(a, label, cmd, tmp):
    """A reference command (watt --version, cpupower idle-info) on the live host."""
    res = {"name": label, "root": None, "online": None}
    res.update(measure_runs(cmd, a.runs, a.warmup))
    res["rss_mib"] = peak_rss_mib(cmd, tmp)
    if not a.no_strace:
        res["strace"] = strace_run(cmd, tmp)
    return res


def fit_line(pts):
    """Least squares y = a + b x; (a, b, r2)."""
    n = len(pts)
    mx = sum(x for x, _ in pts) / n
    my = sum(y for _, y in pts) / n
    sxx = sum((x - mx) ** 2 for x, _ in pts)
    if sxx == 0:
        return None
    b = sum((x - mx) * (y - my) for x, y in pts) / sxx
    a0 = my - b * mx
    ss_tot = sum((y - my) ** 2 for _, y in pts)
    ss_res = sum((y - a0 - b * x) ** 2 for x, y in pts)
    return a0, b, (1 - ss_res / ss_tot) if ss_tot else 1.0


def fmt(v, spec="%.2f", none="-"):
    return none if v is None else spec % v


def ratio(ne, w):
    if not ne or not w:
        return "-"
    return "%.1fx" % (ne["cpu_ms"] / w)


def render(a, results, others, dl):
    out = []
    w = out.append
    w("watt report cost  (bench/report.py; figures, not a test)")
    w("date      %s" % time.strftime("%Y-%m-%d %H:%M:%S %z"))
    w("commit    %s" % git_desc())
    w("host      %s, kernel %s, %d CPUs online, %s" % (
        platform.node() or "-", platform.release(), os.cpu_count() or 0, cpu_model()))
    w("watt      %s, built %s  (%s)" % (
        a.watt_src, time.strftime("%H:%M:%S", time.localtime(a.watt_mtime)),
        a.version))
    w("peer      %s" % (tool_version([a.ne, "--version"]) if a.ne else "node_exporter not found"))
    w("load avg  %.2f at start, %.2f at end (1 min; other work on the host inflates"
      " every figure)" % (a.load0, os.getloadavg()[0]))
    w("runs      %d per target after %d warm-ups; %d scrapes per node_exporter"
      " config (fewer, >= 3, past 2 s)" % (a.runs, a.warmup, a.scrapes))
    w("hw instr  %s" % ("yes (perf)" if a.hw_instr else
                        "not offered by this PMU; Minst is callgrind, user space only"))
    w("")
    w("CPU = user+sys ms of one `watt report --interval 0 --json` (median / p90),")
    w("sys ms = the kernel's part of it (mean: tick-sampled split); self = watt's sample_cost_ms (wall);")
    w("NE cmp / NE all = node_exporter CPU ms per /metrics scrape of the same root"
      " (cmp: %s; all: defaults)," % ",".join(NE_CMP))
    w("ratio = NE CPU / watt CPU (>1: watt is cheaper).")
    w("")
    hdr = ("%-15s %5s %7s %7s %6s %7s %7s %6s %6s %5s %6s %7s %7s %6s %7s %6s" % (
        "target", "cpus", "CPU ms", "p90", "sys ms", "us/CPU", "wall", "self", "sysc", "open",
        "RSS MB", "Minst", "NE cmp", "ratio", "NE all", "ratio"))
    w(hdr)
    w("-" * len(hdr))
    for r in results:
        st = r.get("strace") or {}
        on = r.get("online")
        per = r["cpu_med"] * 1e3 / on if on else None
        ci = r.get("callgrind")
        w("%-15s %5s %7.2f %7.2f %6.2f %7s %7.2f %6s %6s %5s %6s %7s %7s %6s %7s %6s" % (
            r["name"][:15], fmt(on, "%d"), r["cpu_med"], r["cpu_p90"], r["sys_med"],
            fmt(per, "%.0f"),
            r["wall_med"], fmt(r.get("self_ms"), "%.1f"), fmt(st.get("total"), "%d"),
            fmt(st.get("openat"), "%d"), fmt(r["rss_mib"], "%.1f"), fmt(ci / 1e6 if ci else None, "%.1f"),
            fmt((r.get("ne_cmp") or {}).get("cpu_ms")), ratio(r.get("ne_cmp"), r["cpu_med"]),
            fmt((r.get("ne_all") or {}).get("cpu_ms")), ratio(r.get("ne_all"), r["cpu_med"])))
    for r in others:
        st = r.get("strace") or {}
        w("%-15s %5s %7.2f %7.2f %6.2f %7s %7.2f %6s %6s %5s %6s" % (
            r["name"][:15], "-", r["cpu_med"], r["cpu_p90"], r["sys_med"], "-", r["wall_med"], "-",
            fmt(st.get("total"), "%d"), fmt(st.get("openat"), "%d"), fmt(r["rss_mib"], "%.1f")))
    w("")
    w("reference rows: 'exec floor' = `true` (process start, libc only); 'exec only' ="
      " `watt --version` (start plus watt's shared libraries);")
    w("'cpupower idle' = `cpupower idle-info` on this host (C-states only).")
    failed = [r["name"] for r in results if r.get("failed_runs") or r.get("rc")]
    if failed:
        w("NOTE: watt exited non-zero on: %s" % ", ".join(failed))
    empty = [r["name"] for r in results if not r.get("online")]
    if empty:
        w("NOTE: watt found no online CPU on: %s (incomplete tree?)" % ", ".join(empty))
    w("")
    w("node_exporter scrape wall ms (median) and body size:")
    for r in results:
        parts = []
        for k in ("ne_cmp", "ne_all"):
            ne = r.get(k)
            if ne:
                parts.append("%s %.1f ms %d KiB" % (k[3:], ne["wall_med"], ne["bytes"] // 1024))
        if parts:
            w("  %-15s %s" % (r["name"], "; ".join(parts)))
    w("")
    w("top system calls (one run, strace -f -c; open fails = absent files):")
    for r in results + others:
        st = r.get("strace")
        if st:
            w("  %-15s %s; open fails %d" % (
                r["name"], " ".join("%s %d" % kv for kv in st["top"]), st["open_fail"]))
    w("")
    out += linearity(results)
    w("")
    out += goals(results, others)
    w("")
    w("elapsed %.0f s measuring, %.0f s preparing fixtures (cached in --work)" % (
        dl.elapsed(), a.prep_s))
    return "\n".join(out) + "\n"


def linearity(results):
    out = ["linearity (CPU ms = a + b * online CPUs, least squares):"]
    sets = [("fixtures+rescaled", [r for r in results if r["root"] and r.get("online")]),
            ("rescaled big-384 only", [r for r in results if "@" in r["name"] or
                                       r["name"] == "big-384"])]
    for label, rs in sets:
        pts = [(r["online"], r["cpu_med"]) for r in rs if r.get("online")]
        if len(pts) < 3:
            continue
        f = fit_line(pts)
        if not f:
            continue
        a0, b, r2 = f
        worst = max(abs(y - a0 - b * x) / y for x, y in pts if y > 0)
        out.append("  %-22s a = %.2f ms, b = %.1f us/CPU, R^2 = %.4f, worst residual %.0f%%"
                   " (%d points)" % (label, a0, b * 1e3, r2, worst * 100, len(pts)))
        out.append("  %-22s predicted at 256 CPUs: %.1f ms" % ("", a0 + 256 * b))
    return out


def goals(results, others):
    out = ["goals (issue): live <= 5 ms CPU; 256 CPUs <= 50 ms CPU"]
    live = next((r for r in results if r["name"] == "live"), None)
    if live:
        out.append("  live            %.2f ms  %s" % (
            live["cpu_med"], "met" if live["cpu_med"] <= 5 else "MISSED"))
    big = [r for r in results if r["root"] and (r.get("online") or 0) >= 256]
    for r in big:
        scaled = r["cpu_med"] * 256.0 / r["online"]
        out.append("  %-15s %.2f ms at %d CPUs = %.1f ms per 256 CPUs  %s" % (
            r["name"], r["cpu_med"], r["online"], scaled, "met" if scaled <= 50 else "MISSED"))
    return out


def git_desc():
    try:
        r = subprocess.run(["git", "-C", REPO, "describe", "--always", "--dirty"],
                           capture_output=True, text=True, timeout=10)
        return r.stdout.strip() or "-"
    except (OSError, subprocess.SubprocessError):
        return "-"


def tool_version(argv):
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=10)
        txt = (r.stdout or r.stderr).strip().splitlines()
        return txt[0] if txt else "-"
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


def hw_instructions_work():
    if not shutil.which("perf"):
        return False
    r = subprocess.run(["perf", "stat", "-x,", "-e", "instructions", "true"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                       timeout=30)
    return r.returncode == 0 and "<not supported>" not in r.stderr and \
        "<not counted>" not in r.stderr


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-o", "--out", help="also write the figures to this file")
    ap.add_argument("--watt", default=os.path.join(REPO, "build", "watt"))
    ap.add_argument("--fixtures", default=os.path.join(REPO, "build", "tests", "fixtures"))
    ap.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "watt-bench"),
                    help="where missing and rescaled fixtures are generated (cached)")
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--scrapes", type=int, default=10)
    ap.add_argument("--scaled", default="64,128,256,512",
                    help="CPU counts (multiples of 4) to rescale big-384 to; '' for none")
    ap.add_argument("--targets", help="comma list of target names to keep")
    ap.add_argument("--no-peer", action="store_true")
    ap.add_argument("--ne-cmp-only", action="store_true",
                    help="skip the node_exporter run with its default collectors")
    ap.add_argument("--no-strace", action="store_true")
    ap.add_argument("--no-callgrind", action="store_true")
    ap.add_argument("--budget", type=float, default=150,
                    help="seconds of measuring after which callgrind and peer runs"
                    " are skipped")
    ap.add_argument("--quick", action="store_true",
                    help="10 runs, 3 scrapes, no callgrind, no rescaled trees")
    a = ap.parse_args(argv)
    if a.quick:
        a.runs, a.scrapes, a.no_callgrind, a.scaled = 10, 3, True, ""
    a.runs = max(1, min(a.runs, 1000))
    a.scrapes = max(1, min(a.scrapes, 100))
    a.scaled = [int(x) for x in a.scaled.split(",") if x.strip()]
    a.scaled = [n for n in a.scaled if 4 <= n <= 1024 and n % 4 == 0]
    a.targets = [t for t in a.targets.split(",") if t] if a.targets else None
    return a


def main(argv=None):
    a = parse_args(argv)
    if not os.access(a.watt, os.X_OK):
        log("no watt binary at %s (ninja -C build)" % a.watt)
        return 2
    t0 = time.monotonic()
    a.load0 = os.getloadavg()[0]
    a.ne = None if a.no_peer else find_ne()
    a.hw_instr = hw_instructions_work()
    targets = collect_targets(a)
    a.prep_s = time.monotonic() - t0
    dl = Deadline(a.budget)  # generation (cached) is not part of the budget
    results, others = [], []
    with tempfile.TemporaryDirectory(prefix="watt-bench-") as tmp:
        # Bench a snapshot: the build may relink build/watt meanwhile.
        a.watt_src, a.watt_mtime = a.watt, os.path.getmtime(a.watt)
        a.watt = os.path.join(tmp, "watt")
        shutil.copy2(a.watt_src, a.watt)
        for name, root in targets:
            results.append(bench_target(a, name, root, dl, tmp))
        if not a.targets:
            true = shutil.which("true")
            if true:
                others.append(bench_other(a, "exec floor", [true], tmp))
            others.append(bench_other(a, "exec only", [a.watt, "--version"], tmp))
            cp = shutil.which("cpupower")
            if cp:
                others.append(bench_other(a, "cpupower idle", [cp, "idle-info"], tmp))
        a.version = tool_version([a.watt, "--version"])
    text = render(a, results, others, dl)
    sys.stdout.write(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
