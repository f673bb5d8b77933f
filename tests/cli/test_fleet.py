#!/usr/bin/env python3
"""`watt fleet sim|compare` on the command line: the default run, JSON
(docs/fleet-json.md), CSV and SVG outputs, compare, synthetic traces and
their seeds, and bad input. Every run checks the simulator's invariants
(WATT_FLEET_CHECK=1). Bad input must give a non-zero exit and one error
line on stderr naming the file (and line), never a signal or a sanitizer
report.

Usage: test_fleet.py [WATT] (default: $WATT); data from $WATT_SRCDIR."""
import csv
import json
import math
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

WATT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.environ["WATT"])
SRCDIR = os.environ.get("WATT_SRCDIR") or os.path.join(os.path.dirname(__file__), "..", "..")
DAY = os.path.join(SRCDIR, "data", "planetlab", "20110303")
# a fixed "time" (docs/json.md), so that two runs of one seed give the same bytes
ENV = dict(os.environ, WATT_FLEET_CHECK="1", WATT_TIME_NOW="1796406600")
SANITIZER = ("Sanitizer", "runtime error:", "Segmentation", "Aborted", "core dumped")

FIELDS = {  # docs/fleet-json.md, run object: key -> allowed types
    "policy": (str,), "mode": (str,), "trace": (str, type(None)),
    "energy_kwh": (int, float), "slatah": (int, float), "pdm": (int, float),
    "slav": (int, float), "esv": (int, float), "migrations": (int,),
    "power_ons": (int,), "power_offs": (int,), "unserved": (int, float),
    "max_active_hosts": (int,), "mean_active_hosts": (int, float), "vms_end": (int,),
    "lower_bound_kwh": (int, float), "above_lower_bound": (int, float, type(None)),
    "served_bound_kwh": (int, float), "vms_failed": (int,),
}
CSV_HEADER = ["run", "policy", "t_s", "active_hosts", "vms", "power_w", "sla_violation",
              "migrations"]

failures = []


def fail(msg):
    failures.append(msg)
    print(f"FAIL: {msg}")


def watt(*args, cwd=None):
    return subprocess.run([WATT, "fleet", *args], capture_output=True, text=True, env=ENV,
                          cwd=cwd)


def crashed(p):
    return p.returncode < 0 or any(s in p.stderr for s in SANITIZER)


def ok(what, p):
    """P exited 0 without a crash; else record a failure. Returns P or None."""
    if p.returncode != 0 or crashed(p):
        fail(f"{what}: exit {p.returncode}: {p.stderr.strip()[-800:]}")
        return None
    return p


def runs_of(what, p):
    """The run objects of a --json document (docs/fleet-json.md)."""
    try:
        doc = json.loads(p.stdout)
    except ValueError as e:
        fail(f"{what}: --json output does not parse: {e}")
        return []
    verb = "compare" if "compare" in p.args else "sim"
    if not isinstance(doc, dict) or doc.get("schema") != f"watt-fleet-{verb}/2" or \
            not isinstance(doc.get("runs"), list):
        fail(f"{what}: not a watt-fleet-{verb}/2 document with runs: {str(doc)[:200]}")
        return []
    return doc["runs"]


def check_run(what, r):
    for key, types in FIELDS.items():
        if key not in r:
            fail(f"{what}: JSON lacks '{key}'")
        elif not isinstance(r[key], types) or isinstance(r[key], bool):
            fail(f"{what}: '{key}' is {r[key]!r}, want {'/'.join(t.__name__ for t in types)}")
    if any(k not in r or not isinstance(r[k], FIELDS[k]) for k in FIELDS):
        return
    if r["mode"] not in ("compat", "realistic"):
        fail(f"{what}: mode {r['mode']!r}")
    for k in ("slatah", "pdm", "slav", "unserved"):
        if not 0 <= r[k] <= 1:
            fail(f"{what}: {k} {r[k]} is not a fraction 0..1")
    for k in ("energy_kwh", "esv", "lower_bound_kwh", "mean_active_hosts", "migrations",
              "power_ons", "power_offs", "max_active_hosts", "vms_end"):
        if not r[k] >= 0:
            fail(f"{what}: {k} {r[k]} < 0")
    if not math.isclose(r["slav"], r["slatah"] * r["pdm"], rel_tol=1e-6, abs_tol=1e-15):
        fail(f"{what}: slav {r['slav']} != slatah x pdm {r['slatah'] * r['pdm']}")
    if not math.isclose(r["esv"], r["energy_kwh"] * r["slav"], rel_tol=1e-6, abs_tol=1e-15):
        fail(f"{what}: esv {r['esv']} != energy x slav")
    if r["energy_kwh"] < r["served_bound_kwh"] * (1 - 1e-9):
        fail(f"{what}: energy {r['energy_kwh']} below the served bound {r['served_bound_kwh']}")
    if r["unserved"] < 1e-9 and r["energy_kwh"] < r["lower_bound_kwh"] * (1 - 1e-9):
        fail(f"{what}: energy {r['energy_kwh']} below the lower bound {r['lower_bound_kwh']}")
    lb = r["lower_bound_kwh"]
    alb = r["above_lower_bound"]
    if lb > 0 and (alb is None or not math.isclose(alb, r["energy_kwh"] / lb - 1, rel_tol=1e-6,
                                                   abs_tol=1e-12)):
        fail(f"{what}: above_lower_bound {alb} != energy / bound - 1")
    if r["mean_active_hosts"] > r["max_active_hosts"] + 1e-9:
        fail(f"{what}: mean_active_hosts {r['mean_active_hosts']} > max {r['max_active_hosts']}")


def test_default():
    p = ok("fleet sim (no arguments)", watt("sim"))
    if not p:
        return
    rows = [line.split() for line in p.stdout.splitlines() if line.strip()]
    if len(rows) != 2 or "policy" not in rows[0] or "watt" not in rows[1]:
        fail(f"fleet sim: want a header and one row of policy watt, got:\n{p.stdout}")


def test_datadir(tmp):
    """The default day comes from WATT_DATADIR (the tests set it to data/)
    or the installed datadir, never from a source path compiled in: with
    WATT_DATADIR on an empty folder, sim says which folder it looked in."""
    empty = os.path.join(tmp, "no-data")
    os.mkdir(empty)
    p = subprocess.run([WATT, "fleet", "sim", "-q"], capture_output=True, text=True,
                       env=dict(ENV, WATT_DATADIR=empty))
    want = os.path.join(empty, "planetlab", "20110303")
    if p.returncode == 0 or crashed(p) or want not in p.stderr or "WATT_DATADIR" not in p.stderr:
        fail(f"fleet sim, WATT_DATADIR={empty}: exit {p.returncode}, want an error naming "
             f"{want}: {p.stderr.strip()}")


def test_json():
    for mode in ([], ["--compat", "cloudsim"]):
        what = f"fleet sim --json {' '.join(mode)}"
        p = ok(what, watt("sim", "-q", "--json", *mode))
        if not p:
            continue
        runs = runs_of(what, p)
        if len(runs) != 1:
            fail(f"{what}: {len(runs)} runs, want 1")
            continue
        r = runs[0]
        check_run(what, r)
        want_mode = "compat" if mode else "realistic"
        if r.get("policy") != "watt" or r.get("mode") != want_mode:
            fail(f"{what}: policy {r.get('policy')!r} mode {r.get('mode')!r}")
        if "20110303" not in (r.get("trace") or ""):
            fail(f"{what}: trace {r.get('trace')!r} is not the default day")
        if mode and r.get("vms_end") != 520:  # CloudSim drops idle VMs: 520 of 1052 left
            fail(f"{what}: vms_end {r.get('vms_end')}, want 520")


def read_csv(what, path):
    try:
        with open(path, newline="") as f:
            rows = list(csv.reader(f))
    except OSError as e:
        fail(f"{what}: {e}")
        return None
    if not rows or rows[0] != CSV_HEADER:
        fail(f"{what}: header {rows[0] if rows else None}, want {CSV_HEADER}")
        return None
    return rows[1:]


def per_run(rows):
    n = {}
    for row in rows:
        n[(row[0], row[1])] = n.get((row[0], row[1]), 0) + 1
    return n


def test_csv_plot(tmp):
    for mode, points in (([], 288), (["--compat", "cloudsim"], 287)):
        what = f"fleet sim --csv {' '.join(mode)}"
        out = os.path.join(tmp, "series.csv")
        if not ok(what, watt("sim", "-q", "--csv", out, *mode)):
            continue
        rows = read_csv(what, out)
        if rows is None:
            continue
        counts = per_run(rows)
        if list(counts.values()) != [points]:
            fail(f"{what}: rows per run {counts}, want {points}")
        for row in rows:
            if len(row) != len(CSV_HEADER):
                fail(f"{what}: row {row} has {len(row)} fields")
                break
            try:
                [float(x) for x in row[2:]]
            except ValueError:
                fail(f"{what}: row {row} has a non-number")
                break
        t = [float(row[2]) for row in rows]
        if t != sorted(t) or len(set(t)) != len(t):
            fail(f"{what}: t_s not strictly increasing")

    svg = os.path.join(tmp, "plot.svg")
    what = "fleet sim --plot"
    if ok(what, watt("sim", "-q", "--plot", svg)):
        try:
            root = ET.parse(svg).getroot()
        except (ET.ParseError, OSError) as e:
            fail(f"{what}: not well-formed XML: {e}")
        else:
            if root.tag != "{http://www.w3.org/2000/svg}svg":
                fail(f"{what}: root element {root.tag}")
            if root.get("width") != "900":
                fail(f"{what}: width {root.get('width')}, want 900")
            if any(el.tag.endswith("}script") for el in root.iter()):
                fail(f"{what}: has a script")


def test_outputs_early(tmp):
    """--csv and --plot: made before the simulation, filled after it; a
    failure to fill one still prints the table; titles from the command."""
    d = os.path.join(tmp, "early")
    os.makedirs(d)
    # a bad path fails before the simulation: no progress line, no table
    p = watt("sim", "--synthetic", "2000", "--plot", os.path.join(d, "no", "p.svg"))
    lines = [line for line in p.stderr.splitlines() if line.strip()]
    if p.returncode != 1 or len(lines) != 1 or "no/p.svg" not in lines[0] or p.stdout:
        fail(f"--plot into a missing folder: want exit 1 and one line before any run, got "
             f"{p.returncode} {p.stderr!r} {p.stdout[:100]!r}")
    # the csv cannot be put in place (a folder has its name): said, table printed,
    # the plot written, nothing temporary left
    os.makedirs(os.path.join(d, "busy.csv"))
    svg = os.path.join(d, "ok.svg")
    p = watt("compare", "-q", "--synthetic", "100", "--policies", "watt,iqr-mmt-1.5",
             "--csv", os.path.join(d, "busy.csv"), "--plot", svg)
    rows = [line for line in p.stdout.splitlines()[1:] if line.strip()]
    if p.returncode != 1 or "cannot write " + os.path.join(d, "busy.csv") not in p.stderr:
        fail(f"--csv onto a folder: want exit 1 naming it, got {p.returncode} {p.stderr!r}")
    if len(rows) != 2 or "watt" not in rows[0] or "iqr-mmt-1.5" not in rows[1]:
        fail(f"--csv onto a folder: the table is still printed, got {p.stdout!r}")
    if sorted(os.listdir(d)) != ["busy.csv", "ok.svg"]:
        fail(f"--csv onto a folder: files left {sorted(os.listdir(d))}")
    try:
        title = ET.parse(svg).getroot().find("{http://www.w3.org/2000/svg}title").text
    except (ET.ParseError, OSError, AttributeError) as e:
        fail(f"--plot beside a failed --csv: no plot ({e})")
    else:
        want = "watt fleet compare: watt and iqr-mmt-1.5 on synthetic-100-seed1, 80 hosts"
        if title != want:
            fail(f"compare --plot: title {title!r}, want {want!r}")
    # a run that fails leaves no file at all
    out = os.path.join(d, "never.csv")
    p = watt("sim", "-q", "--trace", os.path.join(d, "missing.csv"), "--csv", out)
    if p.returncode == 0 or os.path.exists(out) or sorted(os.listdir(d)) != ["busy.csv", "ok.svg"]:
        fail(f"a failed run: want no csv and no temporary file, got {sorted(os.listdir(d))}")
    # sim's title names its policy, the trace day and the hosts
    p = ok("sim --plot (title)", watt("sim", "-q", "--trace", DAY, "--plot", svg))
    if p:
        title = ET.parse(svg).getroot().find("{http://www.w3.org/2000/svg}title").text
        want = f"watt fleet sim: watt on {os.path.basename(DAY.rstrip('/'))}, 800 hosts"
        if title != want:
            fail(f"sim --plot: title {title!r}, want {want!r}")
        else:
            print(f"ok: titles from the command ({title})")


def test_compare(tmp):
    what = "fleet compare --policies watt,iqr-mmt-1.5"
    out = os.path.join(tmp, "compare.csv")
    args = ["compare", "-q", "--policies", "watt,iqr-mmt-1.5", "--trace", DAY]
    p = ok(what, watt(*args))
    if p:
        rows = [line for line in p.stdout.splitlines()[1:] if line.strip()]
        if len(rows) != 2 or "watt" not in rows[0] or "iqr-mmt-1.5" not in rows[1]:
            fail(f"{what}: want 2 rows (watt, iqr-mmt-1.5), got:\n{p.stdout}")
    p = ok(what + " --json", watt(*args, "--json", "--csv", out))
    if p:
        runs = runs_of(what, p)
        if [r.get("policy") for r in runs] != ["watt", "iqr-mmt-1.5"]:
            fail(f"{what} --json: policies {[r.get('policy') for r in runs]}")
        for r in runs:
            check_run(f"{what} --json {r.get('policy')}", r)
        rows = read_csv(what + " --csv", out)
        if rows is not None and sorted(per_run(rows).values()) != [288, 288]:
            fail(f"{what} --csv: rows per run {per_run(rows)}, want 288 each")


def test_synthetic():
    def synth(seed):
        what = f"fleet sim --synthetic 500 --seed {seed}"
        p = ok(what, watt("sim", "-q", "--json", "--synthetic", "500", "--seed", str(seed)))
        if not p:
            return None
        runs = runs_of(what, p)
        for r in runs:
            check_run(what, r)
        return p.stdout

    a, b, c = synth(7), synth(7), synth(8)
    if a is not None and b is not None and a != b:
        fail("fleet sim --synthetic 500 --seed 7: two runs differ")
    if a is not None and c is not None and a == c:
        fail("fleet sim --synthetic 500: seeds 7 and 8 give the same JSON")


def test_help():
    for verb in ("sim", "compare"):
        p = watt(verb, "--help")
        if p.returncode != 0 or "usage: watt fleet" not in p.stdout + p.stderr:
            fail(f"fleet {verb} --help: exit {p.returncode}, output {p.stdout[:200]!r}")
    # A watt built without the fleet engines (-Dfleet=disabled: no watt-fleet,
    # tests/cli/test_fleet_run.py not registered) says so for their verbs.
    if os.environ.get("WATT_FLEET_ENGINES") == "0":
        for verb in ("run", "plan", "check", "host", "approve"):
            p = watt(verb, "--help")
            want = f"watt fleet {verb}: this watt was built without the fleet engines"
            if p.returncode != 1 or not p.stderr.startswith(want) or crashed(p):
                fail(f"fleet {verb} without the engines: exit {p.returncode}, "
                     f"stderr {p.stderr[:300]!r}, want exit 1 and {want!r}")
            else:
                print(f"ok: fleet {verb} without the engines: {p.stderr.strip()}")


def write(path, text, mode=0o644):
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, mode)
    return path


def secret(path, text, mode=0o600):
    """A file only its owner reads (whatever the umask), then MODE."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.chmod(path, mode)
    return path


def planetlab(folder, files):
    """A PlanetLab folder: FILES maps a name to its list of lines."""
    os.makedirs(folder)
    for name, lines in files.items():
        write(os.path.join(folder, name), "".join(f"{x}\n" for x in lines))
    return folder


def bad_inputs(tmp):
    """(description, args, strings the one error line must contain)."""
    good = [5] * 288
    d = lambda name: os.path.join(tmp, name)  # noqa: E731
    hdr = "vm,time_s,cpu_pct\n"
    # Four VMs: by CloudSim's quarters rule the first ('big') is 2500 MIPS,
    # more than a G4 core (1860 MIPS).
    four = hdr + "".join(f"{vm},{t},10\n" for vm in ("big", "v1", "v2", "v3")
                         for t in (0, 300, 600))
    os.makedirs(d("empty"))
    return [
        ("missing trace folder", ["--trace", d("nonexistent")], ["nonexistent"]),
        ("empty folder", ["--trace", d("empty")], ["empty"]),
        ("an empty file", ["--trace", planetlab(d("pl_empty"), {"a": good, "b": []})], ["b"]),
        ("'abc' on line 6", ["--trace", planetlab(d("pl_abc"), {
            "a": good, "b": good[:5] + ["abc"] + good[6:]})], ["b", "line 6", "abc"]),
        ("150 on line 10", ["--trace", planetlab(d("pl_150"), {
            "a": good, "b": good[:9] + [150] + good[10:]})], ["b", "line 10", "150"]),
        ("100 digits on line 10", ["--trace", planetlab(d("pl_long"), {
            "a": good, "b": good[:9] + ["1" * 100] + good[10:]})], ["b", "line 10"]),
        ("-3 on line 1", ["--trace", planetlab(d("pl_neg"), {
            "a": good, "b": [-3] + good[1:]})], ["b", "line 1", "-3"]),
        ("a NUL byte on line 288", ["--trace", planetlab(d("pl_nul"), {
            "a": good[:287] + ["5\0"]})], ["a", "line 288"]),
        ("files of different lengths", ["--trace", planetlab(d("pl_len"), {
            "a": good, "b": good[:200]})], ["pl_len", "200"]),
        ("CSV rows out of time order", ["--trace", write(d("unsorted.csv"), hdr + (
            "a,300,5\na,0,6\nb,0,5\nb,300,7\n"))], ["unsorted.csv", "line 3"]),
        ("CSV duplicate row", ["--trace", write(d("dup.csv"), hdr + (
            "a,0,5\na,0,5\na,300,6\nb,0,5\nb,300,7\n"))], ["dup.csv", "line 3"]),
        ("CSV VM rows not grouped", ["--trace", write(d("interleaved.csv"), hdr + (
            "a,0,5\nb,0,5\na,300,6\nb,300,7\n"))], ["interleaved.csv", "line 4"]),
        ("CSV bad header", ["--trace", write(d("header.csv"), "vm;time;cpu\na,0,5\n")],
         ["header.csv", "line 1"]),
        ("CSV 'abc'", ["--trace", write(d("abc.csv"), hdr + "a,0,5\na,300,abc\n")],
         ["abc.csv", "line 3", "abc"]),
        ("CSV 150 %", ["--trace", write(d("c150.csv"), hdr + "a,0,5\na,300,150\n")],
         ["c150.csv", "line 3", "150"]),
        ("CSV header only", ["--trace", write(d("hdronly.csv"), hdr)], ["hdronly.csv"]),
        # two rows 10^12 s apart: refused at once (it simulated for ~32 h)
        ("CSV horizon of 2 x 10^12 s", ["--trace", write(d("far.csv"), hdr + (
            "a,0,50\na,1000000000000,50\n"))], ["far.csv", "line 3", "31622400 s (366 days)"]),
        ("CSV empty", ["--trace", write(d("empty.csv"), "")], ["empty.csv"]),
        ("--hosts garbage", ["--hosts", "garbage"], ["garbage"]),
        ("--hosts 10xg4, a 2500-MIPS VM", ["--hosts", "10xg4", "--trace", write(
            d("types.csv"), four)], ["'big'"]),
        ("--hosts 10xg4, PlanetLab compat", ["--hosts", "10xg4", "--compat", "cloudsim",
                                             "--trace", planetlab(d("pl_g4"), {
                                                 "vm_a": good, "vm_b": good})], ["vm_a"]),
        ("--hosts 0xg4", ["--hosts", "0xg4"], ["0xg4"]),
        ("--hosts 10xg9", ["--hosts", "10xg9"], ["g9"]),
        ("--hosts INI that is missing", ["--hosts", d("nohosts.ini")], ["nohosts.ini"]),
        ("--csv into a missing folder", ["--csv", d("no/such.csv")], ["no/such.csv"]),
        ("--plot into a missing folder", ["--plot", d("no/such.svg")], ["no/such.svg"]),
        ("unknown policy", ["--policy", "foo"], ["foo"]),
        ("unknown policy in compare", ["--policies", "watt,foo"], ["foo"]),
        ("--compat other", ["--compat", "other"], ["other"]),
        ("--synthetic 0", ["--synthetic", "0"], ["--synthetic"]),
        ("--seed garbage", ["--seed", "x1"], ["--seed"]),
    ]


def test_bad_input(tmp):
    for what, args, want in bad_inputs(tmp):
        verb = "compare" if "--policies" in args else "sim"
        p = watt(verb, "-q", *args, cwd=tmp)
        lines = [line for line in p.stderr.splitlines() if line.strip()]
        if crashed(p):
            fail(f"{what}: crashed (exit {p.returncode}): {p.stderr.strip()[-800:]}")
        elif p.returncode == 0:
            fail(f"{what}: exit 0, want an error ({' '.join(args)})")
        elif len(lines) != 1:
            fail(f"{what}: want one error line on stderr, got {len(lines)}:\n{p.stderr}")
        elif any(w not in lines[0] for w in want):
            fail(f"{what}: error '{lines[0]}' does not name {want}")
        elif p.stdout.strip():
            fail(f"{what}: output on stdout despite the error: {p.stdout[:200]!r}")
        else:
            print(f"ok: {what}: exit {p.returncode}: {lines[0]}")


def test_constraints(tmp):
    """--constraints: maintenance, pins and anti-affinity are honoured (the
    simulator's invariant checks, WATT_FLEET_CHECK, verify them every tick),
    and bad files get one error line naming file, line and what."""
    syn = ["--synthetic", "300", "--seed", "3", "--policies", "watt", "--json"]
    good = write(os.path.join(tmp, "k.ini"),
                 "[maintenance]\nhosts = 0-9, 20\n[anti-affinity]\n"
                 "web = synth-0 synth-1 synth-2\nrandom = 40x3\n[pin]\nsynth-7 = 30\n")
    env = dict(ENV, WATT_FLEET_CHECK="1")
    for mode in ([], ["--compat", "cloudsim"]):
        p = subprocess.run([WATT, "fleet", "compare", "-q", *syn, *mode, "--constraints", good],
                           capture_output=True, text=True, env=env)
        if ok(f"constraints {mode}", p):
            runs = runs_of("constraints", p)
            # compat mode drops idle VMs, as CloudSim does: count only realistic
            if len(runs) != 1 or (not mode and runs[0]["vms_end"] != 300):
                fail(f"constraints {mode}: want one run with 300 VMs at the end, got {runs}")
            else:
                print(f"ok: constraints {mode}: {runs[0]['energy_kwh']:.2f} kWh, invariants held")
    bad = [
        ("unknown section", "[pinned]\nsynth-1 = 3\n", ["k1.ini", "line 2", "pinned"]),
        ("VM not in the trace", "[pin]\nnope = 3\n", ["k2.ini", "line 2", "nope"]),
        ("host out of range", "[maintenance]\nhosts = 0-900\n", ["k3.ini", "line 2", "0-900"]),
        ("VM in two groups", "[anti-affinity]\na = synth-1 synth-2\nb = synth-2 synth-3\n",
         ["k4.ini", "line 3", "synth-2"]),
        ("pinned to a host in maintenance", "[maintenance]\nhosts = 3\n[pin]\nsynth-1 = 3\n",
         ["k5.ini", "synth-1", "maintenance"]),
        ("random groups too many", "[anti-affinity]\nrandom = 200x3\n", ["k6.ini", "200x3"]),
        # a line longer than inih's 199 characters is read whole, and the
        # lines after it keep their numbers (docs/config.md)
        ("an error after a long line", "[anti-affinity]\nbig = " +
         " ".join(f"synth-{i}" for i in range(10, 50)) + " ; forty\n[pin]\nnope = 3\n",
         ["k7.ini", "line 4", "nope"]),
        ("a long line's own error", "[anti-affinity]\nbig = " +
         " ".join(f"synth-{i}" for i in range(10, 50)) + " synth-10\n",
         ["k8.ini", "line 2", "synth-10"]),
    ]
    for i, (what, text, want) in enumerate(bad, 1):
        path = write(os.path.join(tmp, f"k{i}.ini"), text)
        p = watt("sim", "-q", "--synthetic", "300", "--constraints", path)
        lines = [line for line in p.stderr.splitlines() if line.strip()]
        if crashed(p) or p.returncode == 0 or len(lines) != 1 or \
                any(w not in lines[0] for w in want):
            fail(f"constraints, {what}: exit {p.returncode}, stderr {p.stderr.strip()!r}, "
                 f"want one line naming {want}")
        else:
            print(f"ok: constraints, {what}: {lines[0]}")
    long_group = write(os.path.join(tmp, "long.ini"), "[anti-affinity]\nbig = " +
                       " ".join(f"synth-{i}" for i in range(10, 50)) + "\n")
    p = watt("sim", "-q", "--synthetic", "300", "--constraints", long_group)
    if crashed(p) or p.returncode != 0:
        fail(f"constraints, a group on a 400-character line: exit {p.returncode}, "
             f"{p.stderr.strip()!r}")
    else:
        print("ok: constraints, a group on a 400-character line")
    p = watt("compare", "-q", "--synthetic", "300", "--policies", "dvfs", "--constraints", good)
    if p.returncode == 0 or "watt policy" not in p.stderr:
        fail(f"constraints with dvfs: want a refusal naming the watt policy, got "
             f"{p.returncode} {p.stderr!r}")


def main():
    with tempfile.TemporaryDirectory() as tmp:
        test_constraints(tmp)
        test_default()
        test_datadir(tmp)
        test_json()
        test_csv_plot(tmp)
        test_outputs_early(tmp)
        test_compare(tmp)
        test_synthetic()
        test_help()
        test_bad_input(tmp)
    if failures:
        print(f"FAIL: {len(failures)} failures")
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
