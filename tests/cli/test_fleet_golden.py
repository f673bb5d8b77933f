#!/usr/bin/env python3
"""`watt fleet compare` gives the same results, byte for byte, as c810ab9
(the simulator before the watt policy became a pure function of a fleet
view, issue 14): every policy on the five shipped PlanetLab days in both
modes, one day with --hard-ram and its time series, and a synthetic day.

The goldens in tests/golden/fleet/ were written by c810ab9's binary with
the commands below; "trace" is made relative to the source tree. A change
that moves a figure on purpose regenerates them (WATT_GOLDEN_WRITE=1) and
says why in its commit message. Issue 16 rewrote them once for the
watt-fleet-compare/2 document (docs/json.md: "schema" and "time" first,
the runs under "runs"), with every run's figures unchanged; the time is
fixed by WATT_TIME_NOW.

Usage: test_fleet_golden.py [WATT] (default: $WATT); data from $WATT_SRCDIR."""
import os
import subprocess
import sys
import tempfile

SRC = os.environ.get("WATT_SRCDIR", os.path.join(os.path.dirname(__file__), "..", ".."))
GOLD = os.path.join(SRC, "tests", "golden", "fleet")
DAYS = ["20110303", "20110306", "20110309", "20110322", "20110325"]
TIME_NOW = "1796406600"  # 2026-12-04T17:50:00Z, the goldens' "time"
POLICIES = ("npa,dvfs,thr-mmt-1.0,thr-mmt-0.8,iqr-mmt-1.5,mad-mmt-2.5,lr-mmt-1.2,lrr-mmt-1.2,"
            "watt,iqr-mc-1.5,lr-mu-1.2,thr-rs-0.8")


def runs(tmp):
    pl = os.path.join(SRC, "data", "planetlab")
    for day in DAYS:
        base = ["compare", "--trace", os.path.join(pl, day), "--policies", POLICIES, "--json",
                "--quiet", "--jobs", "2"]
        yield day + ".compat.json", base + ["--compat", "cloudsim"], None
        yield day + ".real.json", base, None
    yield ("hard.json", ["compare", "--trace", os.path.join(pl, "20110303"), "--policies",
                         "watt,dvfs", "--hard-ram", "--json", "--quiet", "--csv",
                         os.path.join(tmp, "hard.csv")], "hard.csv")
    yield ("syn.json", ["compare", "--synthetic", "400", "--seed", "7", "--policies",
                        "watt,iqr-mmt-1.5", "--json", "--quiet", "--csv",
                        os.path.join(tmp, "syn.csv")], "syn.csv")


def normalise(text):
    # the trace as the goldens name it: relative to the source tree
    prefix = os.path.realpath(SRC) + "/"
    return text.replace('"trace": "' + prefix, '"trace": "').replace(
        '"trace": "' + SRC.rstrip("/") + "/", '"trace": "')


def main():
    watt = sys.argv[1] if len(sys.argv) > 1 else os.environ["WATT"]
    write = os.environ.get("WATT_GOLDEN_WRITE") == "1"
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        for name, args, csv in runs(tmp):
            p = subprocess.run([watt, "fleet"] + args, capture_output=True, text=True,
                               timeout=600, env=dict(os.environ, WATT_TIME_NOW=TIME_NOW))
            if p.returncode != 0:
                print(f"FAIL {name}: exit {p.returncode}: {p.stderr.strip()[:400]}")
                failed += 1
                continue
            outs = [(name, normalise(p.stdout))]
            if csv:
                with open(os.path.join(tmp, csv)) as f:
                    outs.append((csv, f.read()))
            for fname, got in outs:
                path = os.path.join(GOLD, fname)
                if write:
                    with open(path, "w") as f:
                        f.write(got)
                    print(f"wrote {path}")
                    continue
                with open(path) as f:
                    want = f.read()
                if got == want:
                    print(f"ok   {fname}")
                    continue
                failed += 1
                gl, wl = got.splitlines(), want.splitlines()
                line = next((i for i in range(min(len(gl), len(wl))) if gl[i] != wl[i]),
                            min(len(gl), len(wl)))
                print(f"FAIL {fname}: differs from c810ab9 at line {line + 1}:\n"
                      f"  want: {wl[line] if line < len(wl) else '(end)'}\n"
                      f"  got:  {gl[line] if line < len(gl) else '(end)'}")
    print(f"{'FAIL' if failed else 'PASS'}: {failed} output(s) differ from c810ab9's")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
