#!/usr/bin/env python3
"""`watt top --once` on the fixture roots, where there are no tracepoints and
wake-ups come from /proc: every process row against the fixture's own
/proc/PID files (read here, independently of watt), the power split's sum
rule for processes and cgroups, the node figure against `watt report`,
sorting, --limit and the text output; bad input (garbage stat, a status
without its context switches, an unreadable cgroup, a process that exits
inside the window) on copies; usage errors; the TUI refused without a
terminal; and `watt report`'s top wakers.

Usage: test_top.py [WATT] (default: $WATT); fixtures from $WATT_FIXTURES."""
import errno
import json
import math
import os
import pty
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
from checks import check, summary  # noqa: E402

WATT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.environ["WATT"])
FIXTURES = os.environ["WATT_FIXTURES"]
SANITIZER = ("Sanitizer", "runtime error:", "Segmentation", "Aborted", "core dumped")
TMP = tempfile.mkdtemp(prefix="watt-top-")
ENV = dict(os.environ, WATT_CONFIG_DIR=os.path.join(TMP, "cfg"))  # no devices.conf
ENV.pop("WATT_ROOT", None)
ENV.pop("NO_COLOR", None)
MACHINES = ("intel-2s", "amd-epyc", "big-384")
USER_HZ = 100


def watt(*args, timeout=120, **kw):
    kw.setdefault("stdin", subprocess.DEVNULL)
    p = subprocess.run([WATT, *args], capture_output=True, text=True, env=ENV, timeout=timeout,
                       **kw)
    san = [l for l in p.stderr.splitlines() if any(s in l for s in SANITIZER)]
    check(p.returncode >= 0 and not san,
          f"watt {' '.join(args[:2])} ...: no crash (exit {p.returncode}) {san[:1]}")
    return p


def top_json(root, interval=1, *extra):
    p = watt("top", "--once", "--json", "--root", root, "--interval", str(interval), *extra)
    try:
        return p, json.loads(p.stdout)
    except ValueError:
        return p, None


def close(a, b, rel=1e-9):
    """Equal within rel (relative to the larger), or both None."""
    if a is None or b is None:
        return a is None and b is None
    return abs(a - b) <= rel * max(abs(a), abs(b), 1e-300)


# ---- the fixture, read here: the first sample is the tree, the second
# what watt-faults says (host/fault.h: PATH ERRNO|=VALUE|@FILE [from=N])


def load_faults(root):
    faults = {}
    with open(os.path.join(root, "watt-faults")) as f:
        for line in f:
            w = line.split()
            if not w or w[0].startswith("#") or "op=write" in w:
                continue
            frm = next((int(x[5:]) for x in w[2:] if x.startswith("from=")), 1)
            faults.setdefault(w[0], (w[1], frm))  # the first line of a path wins
    return faults


def read_sample(root, faults, rel, sample):
    """The text of rel in sample 1 or 2; OSError for an errno fault."""
    act, frm = faults.get(rel, (None, 0))
    if act and sample >= frm:
        if act[0] == "=":
            return act[1:] + "\n"
        if act[0] == "@":
            rel = act[1:]
        else:
            raise OSError(getattr(errno, act), act, rel)
    with open(os.path.join(root, rel), "rb") as f:
        return f.read().decode("utf-8", "replace")


def parse_stat(text):
    """fs/proc/array.c: "PID (COMM) S ...", the comm ends at the last ')'."""
    head, _, rest = text.rpartition(")")
    pid, _, comm = head.partition(" (")
    f = rest.split()
    if len(f) < 37 or not pid.isdigit():
        raise ValueError("not a stat line")
    return dict(pid=int(pid), comm=comm, state=f[0], flags=int(f[6]), ticks=int(f[11]) + int(f[12]),
                threads=int(f[17]), start=int(f[19]))


def parse_vol(text):
    m = re.search(r"^voluntary_ctxt_switches:\s*(\d+)$", text, re.M)
    if not m:
        raise ValueError("no voluntary_ctxt_switches")
    return int(m.group(1))


def fixture_procs(root):
    """pid -> what the fixture says about the process: its names, and its
    tick and voluntary context switch differences between the samples
    (None when a sample cannot be read or parsed)."""
    faults, out = load_faults(root), {}
    for name in os.listdir(os.path.join(root, "proc")):
        if not name.isdigit():
            continue
        base = f"proc/{name}/"
        try:
            s1 = parse_stat(read_sample(root, faults, base + "stat", 1))
        except (OSError, ValueError):
            continue
        p = dict(comm=s1["comm"], kthread=bool(s1["flags"] & 0x00200000), threads=s1["threads"],
                 d_ticks=None, d_vol=None)
        raw = read_sample(root, faults, base + "cmdline", 1).rstrip("\0 ")
        p["cmdline"] = raw.replace("\0", " ") if raw and not p["kthread"] else None
        try:
            cg = read_sample(root, faults, base + "cgroup", 1)
            p["cgroup"] = next((l[3:] for l in cg.splitlines() if l.startswith("0::")), None)
        except OSError:
            p["cgroup"] = None
        try:
            s2 = parse_stat(read_sample(root, faults, base + "stat", 2))
            p["threads"] = s2["threads"]
            p["d_ticks"] = s2["ticks"] - s1["ticks"]
        except (OSError, ValueError):
            p["gone"] = True
        try:
            tids = os.listdir(os.path.join(root, base + "task"))
            v = [sum(parse_vol(read_sample(root, faults, f"{base}task/{t}/status", k))
                     for t in tids) for k in (1, 2)]
            p["d_vol"] = v[1] - v[0]
        except (OSError, ValueError):
            pass
        out[int(name)] = p
    return out


def active(p):
    return (p["d_ticks"] or 0) > 0 or (p["d_vol"] or 0) > 0


def find_pid(procs, comm=None, cmdline=None):
    return next(pid for pid, p in sorted(procs.items())
                if (comm is None or p["comm"] == comm) and
                (cmdline is None or cmdline in (p["cmdline"] or "")))


def copy_fixture(name, tag):
    dst = os.path.join(TMP, f"{name}-{tag}")
    shutil.copytree(os.path.join(FIXTURES, name), dst, symlinks=True)
    return dst


def set_faults(root, pid, lines):
    """Replace the second-sample faults of proc/PID/ with lines."""
    path = os.path.join(root, "watt-faults")
    with open(path) as f:
        keep = [l for l in f if not l.startswith(f"proc/{pid}/")]
    with open(path, "w") as f:
        f.writelines(keep + [l + "\n" for l in lines])


def rewrite(root, rel, fn):
    """fn(text) over rel and over its second-sample file, when it has one."""
    for r in (rel, "later/" + rel):
        p = os.path.join(root, r)
        if os.path.exists(p):
            with open(p) as f:
                text = f.read()
            os.chmod(p, 0o644)
            with open(p, "w") as f:
                f.write(fn(text))


# ---- the frame against the fixture


def check_sums(tag, doc):
    pw = doc["power"]
    procs = [p["power_w"] for p in doc["processes"]]
    cgs = [c["power_w"] for c in doc["cgroups"]]
    lines = [pw["idle_w"], pw["kernel_w"], pw["unaccounted_w"]]
    ok = pw["node_w"] is not None and None not in lines + procs + cgs
    check(ok, f"{tag}: node, idle, kernel, unaccounted and every process's power are known")
    if not ok:
        return
    check(close(pw["node_w"], sum(lines) + sum(procs)),
          f"{tag}: node_w {pw['node_w']} == idle + kernel + unaccounted + processes "
          f"{sum(lines) + sum(procs)}")
    check(close(pw["node_w"], sum(lines) + sum(cgs)),
          f"{tag}: node_w == idle + kernel + unaccounted + cgroups ({sum(lines) + sum(cgs)})")
    check(close(pw["processes_w"], sum(procs)), f"{tag}: processes_w == the rows' sum")


def check_cgroups(tag, doc):
    groups = {}
    for p in doc["processes"]:
        g = groups.setdefault(p["cgroup"] or "(unknown)", [])
        g.append(p)
    got = {c["path"]: c for c in doc["cgroups"]}
    check(set(got) == set(groups), f"{tag}: one cgroup row per cgroup of the processes")
    bad = []
    for path, ps in groups.items():
        c = got.get(path)
        if not c:
            continue
        for k in ("cpu_pct", "wakeups_per_s", "power_w", "energy_j"):
            vals = [p[k] for p in ps]
            want = None if None in vals else sum(vals)
            if not close(c[k], want):
                bad.append(f"{path} {k} {c[k]} != {want}")
        if c["processes"] != len(ps):
            bad.append(f"{path} processes {c['processes']} != {len(ps)}")
    check(not bad, f"{tag}: cgroups sum their processes {bad[:3]}")


def check_rows(tag, doc, fx, interval):
    rows = {p["pid"]: p for p in doc["processes"]}
    want = {pid for pid, p in fx.items() if active(p)}
    check(want <= set(rows), f"{tag}: every process active in the window is listed "
                             f"(missing {sorted(want - set(rows))[:5]})")
    idle = sorted(set(rows) - want)
    check(not idle, f"{tag}: no row for a process with no CPU time and no wake-ups "
                    f"({len(idle)} such rows: {idle[:6]})")
    bad = []
    for pid, r in rows.items():
        p = fx.get(pid)
        if not p:
            bad.append(f"{pid} is not in the fixture")
            continue
        exp = dict(comm=p["comm"], cmdline=p["cmdline"], cgroup=p["cgroup"],
                   kthread=p["kthread"], threads=p["threads"], exited=False,
                   idle_wakeups_per_s=None)
        for k, v in exp.items():
            if r[k] != v:
                bad.append(f"{pid} {k} {r[k]!r} != {v!r}")
        if p["d_vol"] is None or r["wakeups_per_s"] != p["d_vol"] / interval:
            bad.append(f"{pid} wakeups_per_s {r['wakeups_per_s']} != {p['d_vol']} / {interval}")
        if p["d_ticks"] is None or not close(r["cpu_pct"], p["d_ticks"] / interval, 1e-12):
            bad.append(f"{pid} cpu_pct {r['cpu_pct']} != {p['d_ticks']} ticks / {interval}")
        if r["power_w"] is None or not close(r["energy_j"], r["power_w"] * interval, 1e-12):
            bad.append(f"{pid} energy_j {r['energy_j']} != power_w x {interval}")
    check(not bad, f"{tag}: each row's names, threads, cpu_pct (ticks) and wakeups_per_s "
                   f"(voluntary switches) match the fixture {bad[:4]}")


def report_json(root, interval=1):
    p = watt("report", "--json", "--root", root, "--interval", str(interval))
    try:
        return json.loads(p.stdout)
    except ValueError:
        return None


def test_frames():
    for name in MACHINES:
        root = os.path.join(FIXTURES, name)
        fx = fixture_procs(root)
        for interval in (1, 2) if name == "intel-2s" else (1,):
            tag = f"{name} --interval {interval}"
            p, doc = top_json(root, interval)
            check(p.returncode == 0 and doc is not None and doc.get("schema") == "watt-top/2",
                  f"{tag}: exit 0 and one watt-top/2 document ({p.stderr.strip()[:200]})")
            if not doc:
                continue
            w = doc["wakeups"]
            check(doc["interval_s"] == interval and w["source"] == "proc" and
                  "recorded tree" in (w["why_not_traced"] or "") and w["idle_per_s"] is None,
                  f"{tag}: source proc, why_not_traced names the recorded tree "
                  f"({w['why_not_traced']!r}), idle wake-ups unknown")
            check(doc["totals"]["processes"] == len(doc["processes"]) > 5 and
                  doc["totals"]["cgroups"] == len(doc["cgroups"]),
                  f"{tag}: totals count every row ({doc['totals']})")
            check_rows(tag, doc, fx, interval)
            check_sums(tag, doc)
            check_cgroups(tag, doc)
            check(doc["power"]["unaccounted_w"] is not None and doc["power"]["unaccounted_w"] > 0,
                  f"{tag}: the short-lived processes' time is unaccounted "
                  f"({doc['power']['unaccounted_w']} W)")
            evs = sum(p["wakeups_per_s"] or 0 for p in doc["processes"]) + \
                sum(s["per_s"] for s in doc["sources"])
            check(close(w["total_per_s"], evs), f"{tag}: total_per_s {w['total_per_s']} == "
                                                f"processes' + sources' {evs}")
            if interval == 1:
                rep = report_json(root)
                it_w = rep and rep["power"] and rep["power"]["it_w"]
                check(it_w is not None and close(doc["power"]["node_w"], it_w),
                      f"{tag}: node_w {doc['power']['node_w']} == watt report's power.it_w {it_w}")
        _, again = top_json(root, 1)
        _, first = top_json(root, 1)
        if again and first:
            again["time"] = first["time"] = None
        check(again == first and again is not None, f"{name}: the same frame twice")
    p, doc = top_json(os.path.join(FIXTURES, "node_exporter"), 1)
    check(p.returncode == 0 and doc is not None and isinstance(doc["processes"], list),
          f"node_exporter: exit 0 and a document ({p.stderr.strip()[:120]})")


def nan_last_desc(v):
    return (1, 0) if v is None else (0, -v)


def test_sort_limit_text():
    root = os.path.join(FIXTURES, "intel-2s")
    keys = {"wakeups": "wakeups_per_s", "power": "power_w", "cpu": "cpu_pct",
            "idle": "idle_wakeups_per_s"}
    kinds = ["irq", "timer", "hrtimer", "work", "other"]
    full = {}
    for s, k in keys.items():
        p, doc = top_json(root, 1, "--sort", s)
        if not doc:
            check(False, f"--sort {s}: a document ({p.stderr.strip()[:120]})")
            continue
        full[s] = doc
        ps = doc["processes"]
        want = sorted(ps, key=lambda r: (nan_last_desc(r[k]), nan_last_desc(r["wakeups_per_s"]),
                                         r["pid"]))
        check([r["pid"] for r in ps] == [r["pid"] for r in want],
              f"--sort {s}: processes by {k} descending, unknown last, then wake-ups, pid")
        cg = doc["cgroups"]
        want = sorted(cg, key=lambda r: (nan_last_desc(r[k]), nan_last_desc(r["wakeups_per_s"]),
                                         r["path"]))
        check([r["path"] for r in cg] == [r["path"] for r in want],
              f"--sort {s}: cgroups by {k}, then wake-ups, path")
        src = doc["sources"]
        want = sorted(src, key=lambda r: (nan_last_desc(r["idle_per_s"]) if s == "idle" else 0,
                                          nan_last_desc(r["per_s"]), kinds.index(r["kind"]),
                                          -1 if r["irq"] is None else r["irq"], r["name"]))
        check(src == want, f"--sort {s}: sources by events, then kind, IRQ, name")
    p, doc = top_json(root, 1)
    check(doc is not None and "wakeups" in full and
          doc["processes"] == full["wakeups"]["processes"], "the default sort is wakeups")
    p, lim = top_json(root, 1, "--limit", "3", "--sort", "power")
    if lim and "power" in full:
        f = full["power"]
        check(lim["processes"] == f["processes"][:3] and lim["cgroups"] == f["cgroups"][:3] and
              lim["sources"] == f["sources"][:3] and lim["totals"] == f["totals"],
              "--limit 3: the first 3 processes, cgroups and sources; totals uncut")
    p, lim0 = top_json(root, 1, "--limit", "0")
    check(lim0 is not None and "wakeups" in full and
          len(lim0["processes"]) == lim0["totals"]["processes"], "--limit 0: every row")

    p = watt("top", "--once", "--root", root, "--interval", "1", "--limit", "3", "--sort", "cpu")
    out = p.stdout.splitlines()
    check(p.returncode == 0 and out and out[0].startswith("watt top  intel-2s  6.8.0-45-generic"),
          f"text: the title line ({out[:1]})")
    for head in ("Power     ", "Wake-ups  ", "CPUs      "):
        check(any(l.startswith(head) for l in out[:6]), f"text: the header has {head.strip()!r}")
    wl = next((l for l in out if l.startswith("Wake-ups")), "")
    check("recorded tree" in wl, f"text: the Wake-ups line says why not traced ({wl!r})")
    ntot = full["cpu"]["totals"] if "cpu" in full else {}
    for title in (f"Processes (top 3 of {ntot.get('processes')} processes):",
                  f"Cgroups (top 3 of {ntot.get('cgroups')} cgroups):",
                  f"IRQs/timers/work (top 3 of {ntot.get('sources')} sources):",
                  "C-state summary (4 states):", "C-states per CPU (40 CPUs):", "Notes:"):
        check(title in out, f"text: a table titled {title!r}")
    if "Processes" in p.stdout and "cpu" in full:
        i = next(i for i, l in enumerate(out) if l.startswith("Processes ("))
        check(out[i + 1].split()[:4] == ["PID", "Wake/s", "Idle/s", "CPU%"] and
              out[i + 1].split()[-3:] == ["Watts", "Thr", "Command"],
              f"text: the processes' header ({out[i + 1]!r})")
        pids = [int(l.split()[0]) for l in out[i + 2:i + 5]]
        check(pids == [r["pid"] for r in full["cpu"]["processes"][:3]] and out[i + 5] == "",
              f"text: exactly 3 rows, in --sort cpu order ({pids})")
    p = watt("top", "--once", "--root", root, "--interval", "1")
    rows = {l.split()[0]: l for l in p.stdout.splitlines() if re.match(r" +\d+ ", l)}
    check(rows.get("49", "").endswith(" 1  [ksoftirqd/5]") and
          rows.get("1041", "").endswith(" 5  nginx: worker process") and
          any(l.endswith("python3 /home/admin/bin/run.py --jobs 1") for l in rows.values()),
          "text: Thr, then the command line, [name] for kernel threads")
    jvm = watt("top", "--once", "--root", os.path.join(FIXTURES, "big-384"), "--interval", "1",
               "--limit", "1")
    line = next((l for l in jvm.stdout.splitlines() if "/usr/lib/jvm/" in l), "")
    check(line.endswith("…") and len(line.split("  96  ", 1)[-1]) == 80,
          f"text: a long command line is cut at 80 columns ending in … ({line[-30:]!r})")
    for v in ("processes", "cgroups", "sources", "cstates", "devices",
              "procs", "cpus"):
        p = watt("top", "--once", "--root", root, "--interval", "1", "--view", v)
        check(p.returncode == 0 and p.stdout.startswith("watt top"), f"--view {v}: accepted")


def test_usage():
    root = os.path.join(FIXTURES, "intel-2s")
    cases = [(["--once", "--interval", "0"], "--interval"),
             (["--once", "--interval", "x"], "--interval"),
             (["--once", "--interval", "-1"], "--interval"),
             (["--json"], "--once"),
             (["--once", "--sort", "bogus"], "--sort"),
             (["--once", "--limit", "-1"], "--limit"),
             (["--once", "--limit", "x"], "--limit"),
             (["--once", "--view", "bogus"], "--view"),
             (["--once", "--bogus"], "--bogus"),
             (["--once", "extra"], "extra")]
    for args, word in cases:
        p = watt("top", "--root", root, *args)
        msg = p.stderr.strip().splitlines()
        check(p.returncode == 2 and p.stdout == "" and msg and word in msg[0],
              f"top {' '.join(args)}: exit 2, says {word!r} ({msg[:1]})")
    p = watt("top", "--help")
    check(p.returncode == 0 and "usage: watt top" in p.stdout, "--help: usage, exit 0")
    # the TUI: stdin or stdout not a terminal (the other one is) -> exit 2, use --once
    for what in ("stdin", "stdout"):
        mfd, sfd = pty.openpty()
        io = dict(stdin=subprocess.DEVNULL, stdout=sfd) if what == "stdin" else \
            dict(stdin=sfd, stdout=subprocess.PIPE)
        try:
            p = subprocess.run([WATT, "top", "--root", root, "--interval", "1"], env=ENV,
                               timeout=20, stderr=subprocess.PIPE, text=True, **io)
            check(p.returncode == 2 and "--once" in p.stderr,
                  f"TUI with {what} not a terminal: exit 2, says --once ({p.stderr.strip()!r})")
        except subprocess.TimeoutExpired:
            check(False, f"TUI with {what} not a terminal: it started anyway (timeout)")
        finally:
            os.close(mfd)
            os.close(sfd)


def others_intact(tag, base, doc, skip):
    b = {p["pid"]: p for p in base["processes"] if p["pid"] not in skip}
    d = {p["pid"]: p for p in doc["processes"] if p["pid"] not in skip}
    key = ("cpu_pct", "wakeups_per_s")
    bad = [pid for pid in b if pid not in d or [d[pid][k] for k in key] != [b[pid][k] for k in key]]
    check(not bad and set(d) == set(b), f"{tag}: the other processes' rows are as before {bad[:4]}")
    pw = [(pid, b[pid]["power_w"], d[pid]["power_w"]) for pid in b if pid in d]
    off = [x for x in pw if x[1] and not close(x[1], x[2], 0.05)]
    check(not off, f"{tag}: the other processes' power within 5 % of before {off[:3]}")


def notes_with(doc, *words):
    return [n for n in doc["notes"] if all(w in n for w in words)]


def test_bad_input():
    name = "intel-2s"
    base_root = os.path.join(FIXTURES, name)
    fx = fixture_procs(base_root)
    _, base = top_json(base_root)
    if not base:
        check(False, "bad input: the base frame")
        return
    backend = find_pid(fx, "postgres", " SELECT")
    job = find_pid(fx, "run (a) b) c")
    wal = find_pid(fx, "postgres", "walwriter")
    nginx = find_pid(fx, "nginx", "worker process")
    vacuum = find_pid(fx, "postgres", "autovacuum worker")

    # stat garbage in both samples: left out, named, its time unaccounted
    root = copy_fixture(name, "stat")
    rewrite(root, f"proc/{backend}/stat", lambda t: "garbage\n")
    p, doc = top_json(root)
    check(p.returncode == 0 and doc is not None, "garbage stat: exit 0")
    if doc:
        check(backend not in [r["pid"] for r in doc["processes"]],
              f"garbage stat: process {backend} is left out")
        check(notes_with(doc, f"/proc/{backend}/stat"), f"garbage stat: a note names "
              f"/proc/{backend}/stat ({doc['notes'][1:]})")
        others_intact("garbage stat", base, doc, {backend})
        check_sums("garbage stat", doc)
        check(doc["power"]["unaccounted_w"] > base["power"]["unaccounted_w"],
              "garbage stat: its CPU time is unaccounted")

    # stat garbage in the first sample only (a process unreadable at the
    # first scan is not new: its lifetime is not the window's)
    root = copy_fixture(name, "stat1")
    with open(os.path.join(root, f"proc/{nginx}/stat"), "w") as f:
        f.write("garbage\n")
    p, doc = top_json(root)
    check(p.returncode == 0 and doc is not None, "first-sample garbage stat: exit 0")
    if doc:
        row = next((r for r in doc["processes"] if r["pid"] == nginx), None)
        check(row is None or (row["cpu_pct"] is None and row["wakeups_per_s"] is None) or
              (row["cpu_pct"] <= 500 and row["wakeups_per_s"] <= fx[nginx]["d_vol"]),
              f"first-sample garbage stat: process {nginx} is left out or without its "
              f"lifetime as the window's (cpu_pct {row and row['cpu_pct']}, "
              f"wakeups {row and row['wakeups_per_s']})")
        check(notes_with(doc, f"/proc/{nginx}/stat"),
              f"first-sample garbage stat: a note names /proc/{nginx}/stat ({doc['notes'][1:]})")
        others_intact("first-sample garbage stat", base, doc, {nginx})
        check_sums("first-sample garbage stat", doc)

    # a status without its context switch lines: shown, wake-ups unknown
    root = copy_fixture(name, "status")
    strip = lambda t: "".join(l for l in t.splitlines(True) if "ctxt_switches" not in l)
    for rel in (f"proc/{job}/status", f"proc/{job}/task/{job}/status"):
        rewrite(root, rel, strip)
    p, doc = top_json(root)
    check(p.returncode == 0 and doc is not None, "status without ctxt: exit 0")
    if doc:
        row = next((r for r in doc["processes"] if r["pid"] == job), None)
        check(row is not None and row["cpu_pct"] == base_row(base, job)["cpu_pct"] and
              row["wakeups_per_s"] is None,
              f"status without ctxt: {job} listed with its CPU, wake-ups unknown (null): "
              f"{row and (row['cpu_pct'], row['wakeups_per_s'])}")
        check(notes_with(doc, f"/proc/{job}/", "ctxt_switches"),
              f"status without ctxt: a note names /proc/{job}/ ({doc['notes'][1:]})")
        others_intact("status without ctxt", base, doc, {job})
        check_sums("status without ctxt", doc)
        check_cgroups("status without ctxt", doc)
        _, srt = top_json(root, 1, "--sort", "wakeups")
        check(srt and srt["processes"][-1]["pid"] == job,
              "status without ctxt: --sort wakeups puts the unknown value last")

    # an unreadable cgroup: shown under "(unknown)", named in a note
    root = copy_fixture(name, "cgroup")
    with open(os.path.join(root, "watt-faults"), "a") as f:
        f.write(f"proc/{wal}/cgroup EACCES\n")
    p, doc = top_json(root)
    check(p.returncode == 0 and doc is not None, "unreadable cgroup: exit 0")
    if doc:
        row = next((r for r in doc["processes"] if r["pid"] == wal), None)
        check(row is not None and row["cgroup"] is None and
              row["cpu_pct"] == base_row(base, wal)["cpu_pct"],
              f"unreadable cgroup: {wal} listed, cgroup null ({row and row['cgroup']})")
        unk = [c for c in doc["cgroups"] if c["path"] == "(unknown)"]
        check(len(unk) == 1 and unk[0]["processes"] == 1, "unreadable cgroup: in \"(unknown)\"")
        check(notes_with(doc, f"/proc/{wal}/cgroup"),
              f"unreadable cgroup: a note names /proc/{wal}/cgroup ({doc['notes'][1:]})")
        others_intact("unreadable cgroup", base, doc, {wal})
        check_sums("unreadable cgroup", doc)
        check_cgroups("unreadable cgroup", doc)

    # a process that exits inside the window: gone at the second scan
    root = copy_fixture(name, "exit")
    set_faults(root, vacuum, [f"proc/{vacuum}/stat ENOENT from=2",
                              f"proc/{vacuum}/status ENOENT from=2",
                              f"proc/{vacuum}/task/{vacuum}/status ENOENT from=2"])
    p, doc = top_json(root)
    check(p.returncode == 0 and doc is not None, "exited: exit 0")
    if doc:
        check(vacuum not in [r["pid"] for r in doc["processes"]],
              f"exited: the autovacuum worker {vacuum} is not listed")
        check(notes_with(doc, "1 process exited", "unaccounted"),
              f"exited: a note says 1 process exited ({doc['notes'][1:]})")
        ua, ub = doc["power"]["unaccounted_w"], base["power"]["unaccounted_w"]
        check(ua is not None and ua > ub > 0,
              f"exited: unaccounted_w {ua} > {ub}: its last ticks are unaccounted")
        others_intact("exited", base, doc, {vacuum})
        check_sums("exited", doc)
        check_cgroups("exited", doc)


def rewrite_bytes(root, rel, fn):
    """rewrite() for bytes that are not UTF-8."""
    for r in (rel, "later/" + rel):
        p = os.path.join(root, r)
        if os.path.exists(p):
            with open(p, "rb") as f:
                data = f.read()
            os.chmod(p, 0o644)
            with open(p, "wb") as f:
                f.write(fn(data))


def test_hostile_names():
    """Names from outside with terminal escapes (an OSC that retitles the
    terminal, a CSI that clears it, BEL, the C1 CSI byte 0x9b, DEL) in a
    comm, a command line, a cgroup path, an IRQ name and a USB product
    string: no such byte reaches the terminal in any text output, and the
    JSON is valid UTF-8 with the names escaped."""
    name = "intel-2s"
    root = copy_fixture(name, "hostile")
    fx = fixture_procs(root)
    pid = find_pid(fx, "nginx", "worker process")

    def stat(data):
        head, _, tail = data.partition(b" (")
        return head + b" (\x1b]0;pwned\x07" + tail[tail.rindex(b")"):]

    rewrite_bytes(root, f"proc/{pid}/stat", stat)
    rewrite_bytes(root, f"proc/{pid}/cmdline",
                  lambda d: b"ng\x1b[2Jinx\0-g\x9b\x7f\0")
    rewrite_bytes(root, f"proc/{pid}/cgroup",
                  lambda d: b"0::/system.slice/ev\x1b[2Jil\x07.service\n")
    rewrite_bytes(root, "proc/interrupts",
                  lambda d: d.replace(b"eno1-TxRx-5", b"eno1\x1b]0;irq\x07-5"))
    rewrite_bytes(root, "sys/devices/system/cpu/cpuidle/current_driver",
                  lambda d: b"intel\x9bidle\n")
    cpu = os.path.join(root, "sys/devices/system/cpu")
    for c in os.listdir(cpu):
        if re.fullmatch(r"cpu\d+", c) and os.path.exists(f"{cpu}/{c}/cpuidle/state1/name"):
            rewrite_bytes(root, f"sys/devices/system/cpu/{c}/cpuidle/state1/name",
                          lambda d: b"C\x1b[2J1\n")
    rewrite_bytes(root, "sys/devices/pci0000:00/0000:00:14.0/usb1/1-1/product",
                  lambda d: b"Dell\x1b[2J\x9bKB216\n")
    escapes = (b"\x1b", b"\x9b", b"\x07", b"\x7f")

    def run(*args):
        return subprocess.run([WATT, *args, "--root", root, "--interval", "1"],
                              capture_output=True, env=ENV, timeout=120,
                              stdin=subprocess.DEVNULL)

    for args, shown in ((["top", "--once"], [b"ng?[2Jinx -g??",
                                             b"/system.slice/ev?[2Jil?.service"]),
                        (["top", "--once", "--limit", "3", "--sort", "cpu"], []),
                        (["report"], [b"eno1?]0;irq?-5", b"intel?idle", b"state1 C?[2J1 "]),
                        (["report", "--per-cpu"], [b"C?[2J1 %"])):
        p = run(*args)
        what = f"hostile names: watt {' '.join(args)}"
        bad = [e for e in escapes if e in p.stdout + p.stderr]
        check(p.returncode == 0 and not bad,
              f"{what}: exit 0 ({p.returncode}), no control byte on stdout/stderr ({bad})")
        miss = [x for x in shown if x not in p.stdout]
        check(not miss, f"{what}: the names shown with '?' for each control (missing {miss})")
    for args in (["top", "--once", "--json"], ["report", "--json"]):
        p = run(*args)
        try:
            doc = json.loads(p.stdout.decode("utf-8"))
        except ValueError as e:
            doc = None
            err = e
        bad = [e for e in escapes if e in p.stdout]
        check(doc is not None and not bad,
              f"hostile names: watt {' '.join(args)}: valid UTF-8 JSON, controls escaped "
              f"({bad or (doc is None and err)})")
        if doc and args[0] == "top":
            row = next((r for r in doc["processes"] if r["pid"] == pid), None)
            check(row is not None and "]0;pwned" in row["comm"] and
                  "[2Jinx -g" in row["cmdline"],
                  f"hostile names: top --json has the names, escaped "
                  f"({row and (row['comm'], row['cmdline'])!r})")


def base_row(doc, pid):
    return next((r for r in doc["processes"] if r["pid"] == pid), {"cpu_pct": "absent"})


def test_report():
    for name in MACHINES:
        root = os.path.join(FIXTURES, name)
        _, top = top_json(root, 1, "--sort", "wakeups", "--limit", "10")
        rep = report_json(root)
        got = rep and rep.get("wakeups") and rep["wakeups"].get("processes")
        check(bool(got), f"{name}: report --json has wakeups.processes")
        if got and top:
            want = [{k: r[k] for k in ("pid", "comm", "exited", "wakeups_per_s",
                                       "idle_wakeups_per_s", "cpu_pct", "power_w")}
                    for r in top["processes"]]
            check(got == want, f"{name}: report's top wakers are watt top's first 10 by wake-ups")
        p = watt("report", "--root", root, "--interval", "1")
        out = p.stdout.splitlines()
        i = next((i for i, l in enumerate(out) if l == "Top wake-ups"), None)
        ok = i is not None and top and top["processes"]
        check(ok, f"{name}: report text has a Top wake-ups section")
        if ok:
            hdr = next((j for j in range(i, min(i + 6, len(out))) if "process" in out[j]), None)
            check(hdr is not None and out[hdr].split()[:3] == ["pid", "process", "wake/s"],
                  f"{name}: report text lists the top wakers")
            if hdr is not None:
                first = out[hdr + 1].split()
                t = top["processes"][0]
                check(first[:2] == [str(t["pid"]), t["comm"]],
                      f"{name}: report's first waker is top's ({first[:2]})")


def main():
    os.makedirs(ENV["WATT_CONFIG_DIR"])
    try:
        test_frames()
        test_sort_limit_text()
        test_usage()
        test_bad_input()
        test_report()
        test_hostile_names()
    finally:
        shutil.rmtree(TMP, ignore_errors=True)
    return summary()


if __name__ == "__main__":
    sys.exit(main())
