#!/usr/bin/env python3
"""Golden tests: watt report on each fixture machine, text and JSON, with one
snapshot (--interval 0) and with two samples (--interval 1; the fixtures'
watt-faults move counters on in the second sample). WATT_UPDATE_GOLDENS=1
rewrites tests/golden/ instead of comparing; review the diff before
committing it. The documents' "time" is fixed by WATT_TIME_NOW (docs/json.md),
so the goldens hold it as it is."""
import difflib
import json
import os
import re
import subprocess
import sys

WATT = os.environ["WATT"]
FIX = os.environ["WATT_FIXTURES"]
GOLD = os.path.join(os.environ["WATT_TESTDIR"], "golden")
UPDATE = os.environ.get("WATT_UPDATE_GOLDENS") == "1"
MACHINES = ["intel-2s", "amd-epyc", "big-384", "node_exporter"]
TIME_NOW = "1796406600"  # 2026-12-04T17:50:00Z
ENV = dict(os.environ, WATT_TIME_NOW=TIME_NOW)


# watt runs in the fixtures folder with a relative --root, so paths in the
# output (and where long lines wrap) do not depend on the checkout's place.
def normalise_text(s, root):
    return re.sub(r"cost \d+\.\d+ ms", "cost X ms", s)


def normalise_json(s, root):
    r = json.loads(s)
    r["sample_cost_ms"] = None
    return json.dumps(r, indent=1, sort_keys=True) + "\n"


def main():
    failed = 0
    for m in MACHINES:
        root = os.path.join(FIX, m)
        if not os.path.isdir(root):
            print(f"FAIL: fixture {m} missing")
            failed += 1
            continue
        for interval in ("0", "1"):
            for fmt in ("txt", "json"):
                args = [WATT, "report", "--root", m, "--interval", interval]
                if fmt == "json":
                    args.append("--json")
                p = subprocess.run(args, capture_output=True, text=True, cwd=FIX, env=ENV)
                if p.returncode != 0:
                    print(f"FAIL: {' '.join(args)}: exit {p.returncode}: {p.stderr}")
                    failed += 1
                    continue
                out = (normalise_json if fmt == "json" else normalise_text)(p.stdout, root)
                if fmt == "txt":
                    long = [l for l in out.splitlines() if len(l) > 100]
                    if long:
                        print(f"FAIL: {m} text has lines over 100 columns: {long[:3]}")
                        failed += 1
                name = os.path.join(GOLD, f"{m}.interval{interval}.{fmt}")
                if UPDATE:
                    os.makedirs(GOLD, exist_ok=True)
                    with open(name, "w") as f:
                        f.write(out)
                    continue
                try:
                    want = open(name).read()
                except FileNotFoundError:
                    print(f"FAIL: {name} missing (WATT_UPDATE_GOLDENS=1 creates it)")
                    failed += 1
                    continue
                if want != out:
                    d = difflib.unified_diff(want.splitlines(), out.splitlines(), name, "now",
                                             lineterm="", n=2)
                    print("\n".join(list(d)[:60]))
                    print(f"FAIL: {name} differs")
                    failed += 1
    # $WATT_ROOT selects the root like --root does.
    root = "intel-2s"
    a = subprocess.run([WATT, "report", "--root", root, "--interval", "0", "--json"],
                       capture_output=True, text=True, cwd=FIX, env=ENV).stdout
    b = subprocess.run([WATT, "report", "--interval", "0", "--json"], capture_output=True,
                       text=True, env=dict(ENV, WATT_ROOT=root), cwd=FIX).stdout
    if normalise_json(a, root) != normalise_json(b, root):
        print("FAIL: WATT_ROOT and --root give different reports")
        failed += 1
    print(f"goldens: {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
