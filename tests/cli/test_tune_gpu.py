#!/usr/bin/env python3
"""The [gpu] knobs of `watt tune` (docs/gpu-knobs.md) on copies of the
`gpu` fixture root (tests/fixtures/gen/mkgpu.py: an amdgpu, an i915 and an
xe card): the plan a profile means, apply + restore giving back the exact
tree, a limit outside a card's range refused before anything is written,
bad [gpu] values, and a tune killed at every crash point restored; then
NVIDIA GPUs through the libnvidia-ml double ($WATT_NVML_DOUBLE,
tests/helpers/nvml_double.c, whose $WATT_NVML_STATE file keeps a limit set
by one process for the next): tune in one process, restore in another,
a limit outside NVML's range refused before anything (sysfs included) is
written, NVML refusing a set (the rest rolled back), and crashes.

Usage: test_tune_gpu.py [WATT] (default: $WATT); fixtures from $WATT_FIXTURES."""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
from checks import check, summary  # noqa: E402

WATT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.environ["WATT"])
FIXTURES = os.environ["WATT_FIXTURES"]
TMP = tempfile.mkdtemp(prefix="watt-tune-gpu-")
CFG = os.path.join(TMP, "cfg")
ENV = dict(os.environ, WATT_CONFIG_DIR=CFG)
for k in ("WATT_ROOT", "WATT_TUNE_CRASH_AT", "WATT_TUNE_CRASH_COUNT_FILE",
          "WATT_NVML_LIBRARY", "WATT_NVML_SCRIPT"):
    ENV.pop(k, None)
JOURNAL = "var/lib/watt/journal"
AMD = "sys/class/drm/card0/device/hwmon/hwmon0/power1_cap"
I915 = "sys/class/drm/card1/device/hwmon/hwmon1/power1_max"
XE = "sys/class/drm/card2/device/hwmon/hwmon2/power1_max"
LEVEL = "sys/class/drm/card0/device/power_dpm_force_performance_level"

PROFILES = {
    "gpu-pct": "[gpu]\npower_limit_pct = 90\n",
    "gpu-amd": "[gpu]\npower_limit_w = 250.4\nperf_level = low\ngpus = card0, card7\n",
    "gpu-pdev": "[gpu]\npower_limit_w = 120\ngpus = 0000:83:00.0, card2\n",
    "gpu-over": "[cpufreq]\nboost = no\n[gpu]\npower_limit_w = 160\ngpus = card1, card2\n",
    "gpu-both": "[gpu]\npower_limit_w = 100\npower_limit_pct = 50\n",
    "gpu-badlist": "[gpu]\npower_limit_w = 100\ngpus = card0, eth0\n",
    "gpu-badlevel": "[gpu]\nperf_level = turbo\n",
    "gpu-milliwatt": "[gpu]\npower_limit_w = 250000\n",
    "gpu-nv": "[gpu]\npower_limit_pct = 90\ngpus = nvml0, nvml1\n",
    "gpu-nv-mixed": "[gpu]\npower_limit_w = 250\ngpus = card0, 0000:3b:00.0\n",
    "gpu-nv-over": "[gpu]\npower_limit_w = 150\ngpus = card0, nvml0\n",
}
NV_SCRIPT = """# two H200s (nvidia-smi -q: power limits 200..700 W)
count 2
name 0 NVIDIA H200
uuid 0 GPU-5d3c1f0e-8a4b-4c1d-9e2f-0123456789ab
bus 0 00000000:19:00.0
limit 0 700000
limit_range 0 200000/700000
name 1 NVIDIA H200
uuid 1 GPU-7a11c2d3-0b9e-4f52-8c6d-fedcba987654
bus 1 00000000:3B:00.0
limit 1 650000
limit_range 1 200000/700000
"""
NV_ORIGINAL = {0: 700000, 1: 650000}


def watt(*args, env=None):
    return subprocess.run([WATT, *args], capture_output=True, text=True, env=env or ENV,
                          timeout=60)


def copy_fixture(tag):
    dst = os.path.join(TMP, tag)
    shutil.copytree(os.path.join(FIXTURES, "gpu"), dst, symlinks=True)
    return dst


def tree_state(root):
    """Every file's bytes and every link's target, var/ (the journal) aside."""
    state = {}
    for d, dirs, files in os.walk(root):
        rel = os.path.relpath(d, root)
        if rel == "var" or rel.startswith("var" + os.sep):
            continue
        for n in files + [x for x in dirs if os.path.islink(os.path.join(d, x))]:
            p = os.path.join(d, n)
            if os.path.islink(p):
                state[os.path.join(rel, n)] = ("link", os.readlink(p))
            else:
                with open(p, "rb") as f:
                    state[os.path.join(rel, n)] = ("file", f.read())
    return state


def read(root, path):
    with open(os.path.join(root, path)) as f:
        return f.read()


def plan(root, profile):
    p = watt("tune", profile, "--dry-run", "--json", "--root", root)
    if p.returncode != 0:
        return p, None
    return p, json.loads(p.stdout)


def test_plans():
    root = copy_fixture("plans")
    before = tree_state(root)
    p, doc = plan(root, "gpu-pct")
    got = {c["path"]: (c["knob"], c["old"], c["new"]) for c in doc["changes"]} if doc else {}
    check(got == {"/" + AMD: ("gpu.power_limit_w", "300000000", "270000000"),
                  "/" + I915: ("gpu.power_limit_w", "150000000", "135000000"),
                  "/" + XE: ("gpu.power_limit_w", "190000000", "171000000")},
          f"power_limit_pct = 90: 90 % of each card's maximum (cap_max, rated_max): {got}")
    p, doc = plan(root, "gpu-amd")
    got = {c["path"]: c["new"] for c in doc["changes"]} if doc else {}
    check(got == {"/" + AMD: "250000000", "/" + LEVEL: "low"},
          f"gpus = card0: amdgpu only, whole watts (250.4 W -> 250 W), perf level low: {got}")
    check(doc and any("no GPU card7" in n for n in doc.get("notes", [])),
          "a gpus entry naming no GPU is a note")
    p, doc = plan(root, "gpu-pdev")
    got = sorted(c["path"] for c in doc["changes"]) if doc else []
    check(got == sorted(["/" + I915, "/" + XE]), f"gpus by PCI address and card: {got}")
    t = watt("tune", "gpu-amd", "--dry-run", "--root", root)
    check(t.returncode == 0 and "power1_cap: 300000000 -> 250000000" in t.stdout
          and "board power limit 250 W (was 300 W; range 0..300 W)" in t.stdout,
          "the text plan shows the file, old -> new and the range")
    check(tree_state(root) == before and not os.path.exists(os.path.join(root, "var")),
          "dry runs write nothing")


def test_round_trip():
    root = copy_fixture("round")
    before = tree_state(root)
    p = watt("tune", "gpu-amd", "--root", root)
    check(p.returncode == 0, f"gpu-amd applied: {p.stderr.strip()}")
    check(read(root, AMD) == "250000000\n" and read(root, LEVEL) == "low\n",
          "power1_cap and the performance level hold what was planned")
    p = watt("tune", "gpu-pct", "--root", root)
    check(p.returncode == 0, "switching to gpu-pct applied")
    check(read(root, LEVEL) == "auto\n", "switching: the performance level went back to auto")
    check(read(root, I915) == "135000000\n" and read(root, AMD) == "270000000\n",
          "switching: gpu-pct's limits hold")
    s = watt("tune", "--status", "--json", "--root", root)
    check(s.returncode == 0 and "power1_max" in s.stdout, "tune --status lists the GPU files")
    r = watt("restore", "--root", root)
    check(r.returncode == 0, f"restore: {r.stdout.strip()} {r.stderr.strip()}")
    check(tree_state(root) == before, "restore: the tree is byte for byte the original")


def test_out_of_range():
    root = copy_fixture("range")
    before = tree_state(root)
    for args in (["--dry-run"], []):
        p = watt("tune", "gpu-over", *args, "--root", root)
        err = p.stderr.strip()
        check(p.returncode != 0 and "gpu-over.conf:4" in err and
              "/sys/class/drm/card1/device/hwmon/hwmon1/power1_max" in err and
              "1..150 W" in err and "nothing was changed" in err,
              f"160 W on a 150 W i915 refused naming the line, file and range {args}: {err}")
    check(tree_state(root) == before, "the refused profile wrote nothing (not even its boost)")
    j = os.path.join(root, JOURNAL)
    check(not os.path.exists(j) or read(root, JOURNAL).count("\n") <= 1,
          "and the journal holds no record")
    p = watt("tune", "gpu-milliwatt", "--dry-run", "--root", root)
    check(p.returncode != 0 and "range" in p.stderr and "1..100000" in p.stderr,
          f"250000 W (a mW slip) is refused at load: {p.stderr.strip()}")


def test_faults():
    """What the drivers do: xe makes power1_max 0444 when the firmware
    locked PL1 (open for writing: EACCES, even as root), and a write the
    driver refuses (EINVAL) rolls back what went before."""
    root = copy_fixture("faults")
    with open(os.path.join(root, "watt-faults"), "a") as f:
        f.write(XE + " EACCES op=write\n" + I915 + " EINVAL op=write\n")
    before = tree_state(root)
    p = watt("tune", "gpu-pdev", "--dry-run", "--root", root)
    if os.geteuid() == 0:
        check(p.returncode == 0 and "gpu.power_limit_w: skipped, /sys/class/drm/card2/device/"
              "hwmon/hwmon2/power1_max is read-only on this machine (EACCES)" in p.stdout
              and "card2" not in p.stdout.split("Notes")[0],
              f"a read-only power1_max (xe, PL1 locked) is a note, not a change: {p.stdout}")
    p = watt("tune", "gpu-pct", "--root", root)
    err = p.stderr.strip()
    check(p.returncode != 0 and "the kernel refused '135000000'" in err and
          "1 value rolled back" in err and tree_state(root) == before,
          f"i915 refusing its limit: card0's cap rolled back, the tree unchanged: {err}")


def test_bad_values():
    root = copy_fixture("bad")
    for prof, want in (("gpu-both", "not both"), ("gpu-badlist", "is not a GPU list"),
                       ("gpu-badlevel", "is not a known value")):
        p = watt("tune", prof, "--dry-run", "--root", root)
        err = p.stderr.strip()
        check(p.returncode in (1, 2) and want in err and err.count("\n") == 0
              and "Sanitizer" not in err, f"{prof}: one line naming the problem: {err}")


def test_crash_points():
    """A tune killed at each crash point, then `watt restore`: the tree
    is the original every time (test_tune_journal.py's method)."""
    root = copy_fixture("crash")
    before = tree_state(root)
    cf = os.path.join(TMP, "count")
    p = watt("tune", "gpu-amd", "--root", root, env=dict(ENV, WATT_TUNE_CRASH_COUNT_FILE=cf))
    points = int(read(TMP, "count").strip()) if os.path.exists(cf) else 0
    watt("restore", "--root", root)
    check(p.returncode == 0 and points >= 10 and tree_state(root) == before,
          f"gpu-amd has {points} crash points")
    ok = 0
    for n in range(1, points + 1):
        p = watt("tune", "gpu-amd", "--root", root, env=dict(ENV, WATT_TUNE_CRASH_AT=str(n)))
        killed = p.returncode == -signal.SIGKILL
        r = watt("restore", "--root", root)
        ok += killed and r.returncode == 0 and tree_state(root) == before
    check(points and ok == points,
          f"killed at each of {points} crash points, restore gave the original {ok} times")


def nv_env(tag, extra=""):
    script = os.path.join(TMP, f"nvml-{tag}.script")
    with open(script, "w") as f:
        f.write(NV_SCRIPT + extra)
    state = os.path.join(TMP, f"nvml-{tag}.state")
    return dict(ENV, WATT_NVML_LIBRARY=os.environ["WATT_NVML_DOUBLE"],
                WATT_NVML_SCRIPT=script, WATT_NVML_STATE=state), state


def nv_limits(state):
    """Each GPU's limit as the double holds it between processes."""
    got = dict(NV_ORIGINAL)
    if os.path.exists(state):
        with open(state) as f:
            for line in f:
                g, mw = line.split()
                got[int(g)] = int(mw)
    return got


def test_nvml():
    if not os.environ.get("WATT_NVML_DOUBLE"):
        print("FAIL $WATT_NVML_DOUBLE is not set (meson sets it)")
        check(False, "the NVML double is there")
        return
    root = copy_fixture("nvml")
    before = tree_state(root)
    env, state = nv_env("trip")
    p = watt("tune", "gpu-nv", "--dry-run", "--json", "--root", root, env=env)
    doc = json.loads(p.stdout) if p.returncode == 0 else {}
    got = {c["path"]: (c["old"], c["new"]) for c in doc.get("changes", [])}
    check(got == {"nvml:GPU-5d3c1f0e-8a4b-4c1d-9e2f-0123456789ab/power_limit_mw":
                  ("700000", "630000"),
                  "nvml:GPU-7a11c2d3-0b9e-4f52-8c6d-fedcba987654/power_limit_mw":
                  ("650000", "630000")},
          f"NVML: 90 % of 700 W on both H200s, by UUID, in mW: {got}")
    p = watt("tune", "gpu-nv", "--root", root, env=env)
    check(p.returncode == 0 and nv_limits(state) == {0: 630000, 1: 630000},
          f"NVML: watt tune set both limits (the double holds {nv_limits(state)}) "
          f"{p.stderr.strip()}")
    j = read(root, JOURNAL)
    check(j.count(" dir=nvml ") == 2, "NVML: the journal holds both old limits (dir=nvml)")
    s = watt("tune", "--status", "--root", root, env=env)
    check(s.returncode == 0 and "nvml:GPU-5d3c1f0e" in s.stdout,
          "NVML: tune --status lists them")
    p = watt("restore", "--root", root, env=env)
    check(p.returncode == 0 and nv_limits(state) == NV_ORIGINAL,
          f"NVML: watt restore, another process, put both back: {nv_limits(state)} "
          f"{p.stdout.strip()} {p.stderr.strip()}")
    check(tree_state(root) == before, "NVML: the tree is untouched")

    env, state = nv_env("mixed")
    p = watt("tune", "gpu-nv-mixed", "--root", root, env=env)
    check(p.returncode == 0 and read(root, AMD) == "250000000\n"
          and nv_limits(state) == {0: 700000, 1: 250000},
          "NVML + sysfs: gpus by card and by PCI address (the double's 00000000:3B:00.0)")
    p = watt("restore", "--root", root, env=env)
    check(p.returncode == 0 and nv_limits(state) == NV_ORIGINAL and tree_state(root) == before,
          "NVML + sysfs: restored, tree and limits")

    env, state = nv_env("over")
    p = watt("tune", "gpu-nv-over", "--root", root, env=env)
    err = p.stderr.strip()
    check(p.returncode != 0 and "nvml0" in err and "200..700 W" in err and "gpu-nv-over.conf:2"
          in err, f"NVML: 150 W under the H200's 200 W minimum refused, naming the range: {err}")
    check(not os.path.exists(state) and tree_state(root) == before,
          "NVML: the refused profile wrote nothing, not even card0's cap (in range)")

    env, state = nv_env("eperm", "set_limit 1 NO_PERMISSION\n")
    p = watt("tune", "gpu-nv", "--root", root, env=env)
    err = p.stderr.strip()
    check(p.returncode != 0 and "gpu.power_limit_w" in err and "nvml:GPU-7a11" in err
          and "rolled back" in err and nv_limits(state) == NV_ORIGINAL,
          f"NVML refusing the second GPU's set: the first is rolled back: {err} "
          f"{nv_limits(state)}")
    shutil.rmtree(os.path.join(root, "var"), ignore_errors=True)

    env, state = nv_env("crash")
    cf = os.path.join(TMP, "nv-count")
    p = watt("tune", "gpu-nv", "--root", root, env=dict(env, WATT_TUNE_CRASH_COUNT_FILE=cf))
    points = int(read(TMP, "nv-count").strip()) if os.path.exists(cf) else 0
    watt("restore", "--root", root, env=env)
    check(p.returncode == 0 and points >= 10 and nv_limits(state) == NV_ORIGINAL,
          f"NVML: gpu-nv has {points} crash points")
    ok = 0
    for n in range(1, points + 1):
        p = watt("tune", "gpu-nv", "--root", root, env=dict(env, WATT_TUNE_CRASH_AT=str(n)))
        killed = p.returncode == -signal.SIGKILL
        r = watt("restore", "--root", root, env=env)
        ok += killed and r.returncode == 0 and nv_limits(state) == NV_ORIGINAL
    check(points and ok == points,
          f"NVML: killed at each of {points} crash points, restore gave both limits back "
          f"{ok} times")

    p = watt("tune", "gpu-nv", "--dry-run", "--root", root)
    check(p.returncode == 0 and "nvml:" not in p.stdout,
          "without $WATT_NVML_LIBRARY a recorded root never reaches this machine's NVML")


def main():
    os.makedirs(os.path.join(CFG, "profiles.d"))
    for name, text in PROFILES.items():
        with open(os.path.join(CFG, "profiles.d", name + ".conf"), "w") as f:
            f.write(text)
    if not os.path.isdir(os.path.join(FIXTURES, "gpu")):
        print("FAIL no gpu fixture root under " + FIXTURES)
        return 1
    try:
        test_plans()
        test_round_trip()
        test_out_of_range()
        test_faults()
        test_bad_values()
        test_crash_points()
        test_nvml()
    finally:
        shutil.rmtree(TMP, ignore_errors=True)
    return summary()


if __name__ == "__main__":
    sys.exit(main())
