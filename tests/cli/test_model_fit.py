#!/usr/bin/env python3
"""The power model fitted by the agent, end to end (docs/power-model.md).

On a copy of the intel-2s fixture (an ACPI power meter, the whole server),
without its watt-faults, this script is the machine: every 0.5 s it moves
/proc/stat by one step of a known load and sets the meter to 150 W + 2 W
per busy CPU. The agent samples every 0.1 s and fits every second; it
must write ROOT/var/lib/watt/model-fitted.ini with those coefficients.
Then `watt report --model fitted` uses it (text and JSON), plain `watt
report` shows it beside the measurement, and /metrics serves its
estimate; POLL time is counted busy; with no file the error names the
path; a corrupted file is refused naming file and line; a file or state
directory other users may write is refused, and a link planted at the
temporary file is not followed. `watt model fit FILE` fits the same
offline. Prints one line per check, exits 1 on failure.
"""
import json
import re
import os
import subprocess
import sys
import tempfile
import time
import urllib.request

WATT = os.environ.get("WATT") or (sys.argv[1] if len(sys.argv) > 1 else "build/watt")
FIXTURES = os.environ.get("WATT_FIXTURES", "build/tests/fixtures")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checks import check, copy_fixture, free_port, stop, summary  # noqa: E402

FITTED = "var/lib/watt/model-fitted.ini"
BASE_W, PER_BUSY_W = 150.0, 2.0


def read_stat(root):
    with open(os.path.join(root, "proc/stat")) as f:
        return f.read().split("\n")


def write_in_place(path, text):
    # the same inode: the agent keeps files open and re-reads them
    with open(path, "r+") as f:
        f.seek(0)
        f.write(text)
        f.truncate()


def step(root, lines, share, ncpus):
    """One step: 100 ticks per CPU, SHARE of them user time; the meter
    first, so that a sample between the two writes sees no ticks."""
    meter = os.path.join(root, "sys/class/hwmon/hwmon0/power1_average")
    write_in_place(meter, "%d\n" % int((BASE_W + PER_BUSY_W * share * ncpus) * 1e6))
    busy = int(round(100 * share))
    out = []
    for ln in lines:
        f = ln.split()
        if f and f[0].startswith("cpu") and f[0] != "cpu":
            f[1] = str(int(f[1]) + busy)
            f[4] = str(int(f[4]) + 100 - busy)
            ln = " ".join(f)
        elif f and f[0] == "cpu":
            f[1] = str(int(f[1]) + busy * ncpus)
            f[4] = str(int(f[4]) + (100 - busy) * ncpus)
            ln = " ".join(f)
        out.append(ln)
    write_in_place(os.path.join(root, "proc/stat"), "\n".join(out))
    return out


def report(root, *args):
    return subprocess.run([WATT, "report", "--root", root, *args], capture_output=True,
                          text=True, timeout=60)


def test_absent(bare, root):
    """On a copy without the agent's file (made now, as the agent left
    the tree otherwise)."""
    import shutil
    shutil.copytree(root, bare, symlinks=True)
    shutil.rmtree(os.path.join(bare, "var"))
    root = bare
    r = report(root, "--model", "fitted")
    check(r.returncode == 2 and "no fitted model yet: the agent fits one where a power meter "
          "exists, " + os.path.join(root, FITTED) in r.stderr,
          f"--model fitted without a file: exit 2 naming the path ({r.returncode}, "
          f"{r.stderr.strip()[:160]})")
    r = report(root)
    check(r.returncode == 0 and "fitted" not in r.stdout,
          "plain report without a fitted file: no fitted line")


def run_agent(root, d):
    ini = os.path.join(d, "agent.ini")
    with open(ini, "w") as f:
        f.write("[agent]\nfit_interval_s = 1\n")
    port = free_port()
    p = subprocess.Popen([WATT, "agent", "--config", ini, "--root", root, "--listen",
                          f"127.0.0.1:{port}", "--interval", "0.1", "--control", ""],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=dict(os.environ, WATT_TIME_NOW="1796428800"))
    lines = read_stat(root)
    ncpus = sum(1 for ln in lines if ln.startswith("cpu") and not ln.startswith("cpu "))
    shares = [0.05, 0.9, 0.3, 0.6, 0.15, 0.75, 0.45, 0.0, 1.0, 0.5, 0.25, 0.85]
    path = os.path.join(root, FITTED)
    deadline = time.monotonic() + 30
    k = 0
    while time.monotonic() < deadline and p.poll() is None:
        lines = step(root, lines, shares[k % len(shares)], ncpus)
        k += 1
        time.sleep(0.5)
        if k >= 2 * len(shares) and os.path.exists(path):
            break
    # the fitted estimate needs a sample whose interval holds a step: one
    # more step, then scrape until a sample has seen it
    lines = step(root, lines, 0.5, ncpus)
    metrics, seen = "", None
    pat = re.compile(r'^watt_power_watts\{[^}]*model="fitted"[^}]*\} ([0-9.e+]+)$', re.M)
    for _ in range(50):
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
                metrics = r.read().decode()
        except OSError as e:
            metrics = str(e)
        seen = pat.search(metrics)
        if seen:
            break
        time.sleep(0.02)
    rc = stop(p)
    err = p.stderr.read()
    want = BASE_W + PER_BUSY_W * 0.5 * ncpus
    check(seen is not None and abs(float(seen.group(1)) - want) < 1,
          f"/metrics: watt_power_watts{{...,model=\"fitted\"}} {seen and seen.group(1)} ≈ {want}")
    check(rc == 0, f"agent exits 0 on SIGTERM ({rc})")
    check(os.path.exists(path), f"the agent wrote {FITTED} after {k} steps: {err.strip()[-300:]}")
    return ncpus, err


def run_briefly(root, d, steps=14):
    """The agent on ROOT while this script moves it STEPS steps: its stderr."""
    ini = os.path.join(d, "agent.ini")
    with open(ini, "w") as f:
        f.write("[agent]\nfit_interval_s = 1\n")
    p = subprocess.Popen([WATT, "agent", "--config", ini, "--root", root, "--listen",
                          f"127.0.0.1:{free_port()}", "--interval", "0.1", "--control", ""],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines = read_stat(root)
    ncpus = sum(1 for ln in lines if ln.startswith("cpu") and not ln.startswith("cpu "))
    for k in range(steps):
        lines = step(root, lines, (k % 7) / 6.0, ncpus)
        time.sleep(0.5)
    stop(p)
    return p.stderr.read()


def test_hostile(d):
    """Where another user could steer the write, the agent does not write."""
    root = copy_fixture(FIXTURES, "intel-2s", os.path.join(d, "hostile"))
    if not root:
        return
    os.unlink(os.path.join(root, "watt-faults"))
    state = os.path.join(root, "var/lib/watt")
    os.makedirs(state)
    os.chmod(state, 0o777)
    err = run_briefly(root, d)
    check("var/lib/watt is writable by others (mode 0777): refusing" in err
          and not os.path.exists(os.path.join(root, FITTED)),
          "a state directory others may write: refused, nothing written: " + err.strip()[-160:])
    os.chmod(state, 0o755)
    outside = os.path.join(d, "outside.txt")
    with open(outside, "w") as f:
        f.write("precious\n")
    os.symlink(outside, os.path.join(root, FITTED + ".tmp"))
    err = run_briefly(root, d)
    with open(outside) as f:
        kept = f.read() == "precious\n"
    said = [ln for ln in err.split("\n") if "cannot write" in ln]
    check(kept and said and "model-fitted.ini.tmp" in said[0]
          and not os.path.exists(os.path.join(root, FITTED)),
          "a link planted at the temporary file is not followed: " + (said or [err])[0][-160:])


def ini_of(path):
    vals = {}
    with open(path) as f:
        for ln in f:
            if "=" in ln and not ln.startswith("#"):
                key, v = ln.split("=", 1)
                vals[key.strip()] = v.strip()
    return vals


def test_file(root, ncpus, err):
    path = os.path.join(root, FITTED)
    st = os.stat(path)
    check(st.st_mode & 0o022 == 0, f"the fitted file is not group/other writable ({st.st_mode:o})")
    check(not os.path.exists(path + ".tmp"), "no temporary file left beside it")
    v = ini_of(path)
    base = float(v.get("idle_base_w", "nan"))
    active = float(v.get("active_per_core_w", "nan"))
    n = int(v.get("fit_n", "0"))
    check(v.get("fit_cpus") == str(ncpus), f"fit_cpus {v.get('fit_cpus')}: the one CPU count")
    check(v.get("description", "").startswith("fitted on this machine against acpi_power_meter:"),
          f"the description names the meter: {v.get('description')}")
    # one CPU count: base + per-CPU idle is one term, the meter's 150 W
    check(abs(base - BASE_W) < 3 and float(v.get("idle_per_core_w", "1")) == 0,
          f"idle_base_w {base} ≈ {BASE_W} (the sum at one CPU count)")
    check(abs(active - PER_BUSY_W) < 0.1, f"active_per_core_w {active} ≈ {PER_BUSY_W}")
    check(n >= 8 and float(v.get("fit_rmse_w", "nan")) < 5,
          f"fit_n {n}, fit_rmse_w {v.get('fit_rmse_w')}")
    check(v.get("fit_time") == "2026-12-05T00:00:00Z" and "wrote " + path in err,
          f"fit_time {v.get('fit_time')} and the agent said where it wrote")


def schema_check(what, doc, name="watt-report.json"):
    """DOC against schema/watt-report.json (python3-jsonschema; said when absent)."""
    try:
        import jsonschema
    except ImportError:
        print(f"skip {what}: no python3-jsonschema")
        return
    src = os.environ.get("WATT_SRCDIR", os.path.join(os.path.dirname(__file__), "..", ".."))
    with open(os.path.join(src, "schema", name)) as f:
        v = jsonschema.Draft7Validator(json.load(f))
    errs = [f"{'/'.join(map(str, e.absolute_path))}: {e.message[:120]}" for e in v.iter_errors(doc)]
    check(bool(doc) and not errs, f"{what}: valid against schema/{name} {errs[:2]}")


def fixture_poll_cpus(root):
    """The fixture's POLL time over its recorded second, from its files and
    watt-faults: CPUs' worth of time spinning in POLL."""
    us = 0
    base = "sys/devices/system/cpu/"
    with open(os.path.join(root, "watt-faults")) as f:
        for ln in f:
            m = re.match(r"(" + base + r"cpu\d+/cpuidle/state\d+)/time =(\d+) from=2", ln)
            if not m:
                continue
            with open(os.path.join(root, m.group(1), "name")) as g:
                if g.read().strip() != "POLL":
                    continue
            with open(os.path.join(root, m.group(1), "time")) as g:
                us += int(m.group(2)) - int(g.read())
    return us / 1e6


def test_report(root):
    r = report(root, "--model", "fitted")
    check(r.returncode == 0 and "the fitted model would estimate" in r.stdout
          and "fit (" + os.path.join(root, FITTED) + "): RMSE" in r.stdout,
          "report --model fitted: the fitted estimate and its error: "
          + (r.stdout + r.stderr)[-300:].replace("\n", " | "))
    r = report(root, "--model", "fitted", "--json")
    doc = json.loads(r.stdout) if r.returncode == 0 else {}
    pw = doc.get("power", {})
    fit = pw.get("model", {}).get("fit") or {}
    check(pw.get("model", {}).get("name") == "fitted" and fit.get("n", 0) >= 8
          and "rmse_w" in fit and "r2" in fit, f"JSON power.model.fit: {fit}")
    schema_check("report --model fitted --json", doc)
    fitted = pw.get("fitted") or {}
    check(fitted.get("estimated_w") is not None and fitted.get("fit", {}).get("n") == fit.get("n"),
          f"JSON power.fitted: {fitted.get('estimated_w')}")
    # POLL counted busy: the fixture's POLL time over its second, added
    want = fixture_poll_cpus(root)
    poll, busy = fitted.get("poll_cpus"), fitted.get("busy_cpus")
    model_busy = pw.get("model", {}).get("busy_cpus")
    check(want > 0 and poll is not None and abs(poll - want) < 1e-6
          and model_busy is not None and abs(busy - model_busy) < 1e-9,
          f"POLL: {poll} CPUs (the fixture's {want:.6f}), in the fitted busy {busy}")
    r2 = report(root, "--json")
    plain = (json.loads(r2.stdout) if r2.returncode == 0 else {}).get("power", {})
    pbusy = plain.get("model", {}).get("busy_cpus")
    check(pbusy is not None and busy is not None and abs(busy - pbusy - poll) < 1e-6,
          f"the built-in model's busy {pbusy} leaves POLL out; the fitted one's is {busy}")
    check(f"POLL: {want:.2f} CPUs spinning in the POLL idle state" in
          report(root, "--model", "fitted").stdout, "the text says how much POLL was counted")
    # plain report on a machine with a meter: the fitted estimate beside it
    r = report(root, "--json")
    schema_check("report --json with a fitted model", json.loads(r.stdout) if r.stdout else {})
    r = report(root)
    check(r.returncode == 0 and "measured (acpi_power_meter)" in r.stdout
          and "the model (specpower-2023) would estimate" in r.stdout
          and "the fitted model would estimate" in r.stdout,
          "plain report: measured, the default model and the fitted one")


def test_unmetered(root, d):
    """Where no meter reads (amd-epyc: its RAPL is root-only here), the
    fitted model is the node's figure, and says how good it is."""
    other = copy_fixture(FIXTURES, "amd-epyc", os.path.join(d, "epyc"))
    if not other:
        return
    os.makedirs(os.path.join(other, "var/lib/watt"), mode=0o755)
    with open(os.path.join(root, FITTED)) as f, open(os.path.join(other, FITTED), "w") as g:
        g.write(f.read())
    n = ini_of(os.path.join(other, FITTED))["fit_n"]
    r = report(other, "--model", "fitted")
    m = re.search(r"node: [0-9.]+ W estimated \(fitted, RMSE [0-9.]+ W over (\d+) samples\)",
                  r.stdout)
    check(r.returncode == 0 and m and m.group(1) == n,
          "no meter: 'estimated (fitted, RMSE x W over N samples)': "
          + (m.group(0) if m else r.stdout[:300]))
    # fitted on intel-2s's 40 CPUs, used on another machine: said
    flat = " ".join(r.stdout.split())
    w = re.search(r"the fit saw 40 CPUs only, this machine has (\d+) online", flat)
    check(w is not None and w.group(1) != "40", "another CPU count than the fit's is said: "
          + (w.group(0) if w else flat[:200]))


def test_corrupt(root):
    path = os.path.join(root, FITTED)
    with open(path) as f:
        good = f.read()
    bad = good.replace("active_per_core_w = ", "active_per_core_w = lots", 1)
    line = 1 + bad.split("\n").index(next(ln for ln in bad.split("\n")
                                          if ln.startswith("active_per_core_w")))
    with open(path, "w") as f:
        f.write(bad)
    r = report(root, "--model", "fitted")
    want = f"{path}:{line}: active_per_core_w"
    check(r.returncode == 2 and want in r.stderr,
          f"a corrupted file: exit 2 naming {FITTED}:{line} ({r.stderr.strip()[:160]})")
    r = report(root)
    check(r.returncode == 0 and "the fitted model is left out: " + want in r.stderr,
          "plain report: a corrupted fitted model is said and left out")
    with open(path, "w") as f:
        f.write(good)
    os.chmod(path, 0o666)
    r = report(root, "--model", "fitted")
    check(r.returncode == 2 and "writable by others" in r.stderr,
          f"a file others may write is refused ({r.stderr.strip()[:120]})")
    os.chmod(path, 0o644)


def test_offline(d):
    """watt model fit FILE: the same fit from a file of points."""
    pts = os.path.join(d, "points.txt")
    with open(pts, "w") as f:
        f.write("# cpus busy ghz watts\n")
        for i in range(20):
            busy = 32 * i / 19
            f.write(f"32, {busy:.4f}, -, {BASE_W + PER_BUSY_W * busy + (0.5 if i % 2 else -0.5)}\n")
    out = os.path.join(d, "mine.ini")
    r = subprocess.run([WATT, "model", "fit", "--output", out, pts], capture_output=True,
                       text=True, timeout=30)
    m = re.search(r"active_per_core_w = ([0-9.]+) W", r.stdout)
    check(r.returncode == 0 and m and abs(float(m.group(1)) - PER_BUSY_W) < 0.02
          and "RMSE 0.50 W" in r.stdout and os.path.exists(out),
          "watt model fit: coefficients, RMSE, the file: " + r.stdout.replace("\n", " | ")[:300])
    r = report(os.path.join(FIXTURES, "intel-2s"), "--model", out)
    check(r.returncode == 0 and "would estimate" in r.stdout,
          f"report --model {out} reads what watt model fit wrote ({r.stderr.strip()[:100]})")
    r = subprocess.run([WATT, "model", "fit", "--json", pts], capture_output=True, text=True,
                       timeout=30)
    doc = json.loads(r.stdout) if r.returncode == 0 else {}
    check(doc.get("fitted") is True and doc.get("model", {}).get("n") == 20,
          "watt model fit --json: fitted, 20 points")
    schema_check("watt model fit --json", doc, "watt-model-fit.json")
    with open(pts, "a") as f:
        f.write("32 40 - 100\n")
    r = subprocess.run([WATT, "model", "fit", pts], capture_output=True, text=True, timeout=30)
    check(r.returncode == 2 and f"{pts}:22: want whole CPUs" in r.stderr,
          f"a malformed line is refused naming file and line ({r.stderr.strip()[:120]})")
    r = subprocess.run([WATT, "model", "fit", "--json", "-"], input="8 1 - 50\n" * 10,
                       capture_output=True, text=True, timeout=30)
    doc = json.loads(r.stdout) if r.stdout else {}
    check(r.returncode == 1 and doc.get("fitted") is False and "want a range" in doc.get("refused", ""),
          f"one load only: refused, saying why ({doc.get('refused')})")
    schema_check("watt model fit --json, refused", doc, "watt-model-fit.json")


def main():
    with tempfile.TemporaryDirectory() as d:
        root = copy_fixture(FIXTURES, "intel-2s", d)
        if not root:
            return summary()
        test_offline(d)
        test_hostile(d)
        faults = os.path.join(root, "watt-faults")
        os.rename(faults, faults + ".off")  # while the agent runs, this script moves the tree
        moved = ["proc/stat", "sys/class/hwmon/hwmon0/power1_average"]
        saved = {m: open(os.path.join(root, m)).read() for m in moved}
        ncpus, err = run_agent(root, d)
        # the reports: the recorded tree and its one recorded second again
        for m in moved:
            write_in_place(os.path.join(root, m), saved[m])
        os.rename(faults + ".off", faults)
        test_absent(os.path.join(d, "bare"), root)
        if os.path.exists(os.path.join(root, FITTED)):
            test_file(root, ncpus, err)
            test_report(root)
            test_unmetered(root, d)
            test_corrupt(root)
    return summary()


if __name__ == "__main__":
    sys.exit(main())
