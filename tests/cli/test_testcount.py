#!/usr/bin/env python3
"""tools/testcount.py, which makes tools/test.sh's last line: skips are
counted apart from passes, and in CI (CI=true) a skip counts as failed
unless tests/skip-allow.txt allows its reason; an allow-list entry without
a comment saying why is itself a failure. Also checks that every entry of
the repository's tests/skip-allow.txt names a registered test.

Usage: test_testcount.py (uses $WATT_SRCDIR, else the checkout this file is in)."""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
from checks import check, summary  # noqa: E402

SRC = os.environ.get("WATT_SRCDIR") or os.path.join(os.path.dirname(__file__), "..", "..")
TOOL = os.path.join(SRC, "tools", "testcount.py")
ALLOW = os.path.join(SRC, "tests", "skip-allow.txt")

LOG = [
    {"name": "watt:unit / base", "result": "OK", "stdout": "1..1\nok 1 - x\n"},
    {"name": "watt:cli / goldens", "result": "FAIL", "stdout": "FAIL something\n"},
    {"name": "watt:cli / top_live", "result": "SKIP",
     "stdout": "# probing\nskip: perf tracepoints unusable here: paranoid 4\n"},
    {"name": "watt:fleet / fleet_e2e", "result": "SKIP",
     "stdout": "SKIP: needs root (a throw-away user, daemons under it)\n"},
    {"name": "watt:unit / tap", "result": "SKIP", "stdout": "1..0 # SKIP no cmocka here\n"},
    {"name": "watt:cli / quiet", "result": "SKIP", "stdout": ""},
    {"name": "watt:cli / timeout", "result": "TIMEOUT", "stdout": ""},
    {"name": "watt:unit / xfail", "result": "EXPECTEDFAIL", "stdout": ""},
    {"name": "watt:cli / guard", "result": "OK",
     "stdout": "ok   fixture part\nskip live part: cpuidle has no POLL state0\npassed\n"},
]


def run(tmp, allow_text, ci):
    log = os.path.join(tmp, "build", "meson-logs", "testlog.json")
    os.makedirs(os.path.dirname(log), exist_ok=True)
    with open(log, "w") as f:
        for e in LOG:
            f.write(json.dumps(e) + "\n")
    allow = os.path.join(tmp, "allow.txt")
    with open(allow, "w") as f:
        f.write(allow_text)
    env = dict(os.environ)
    env.pop("CI", None)
    if ci:
        env["CI"] = ci
    p = subprocess.run([sys.executable, TOOL, allow, log], capture_output=True, text=True,
                       env=env, timeout=60)
    last = p.stdout.strip().splitlines()[-1] if p.stdout.strip() else ""
    return p, last


def one_line(text):
    """TEXT on one line: this test's own output must hold no line that
    starts with "skip", or testcount would take it for a partial skip."""
    return text.strip().replace("\n", " | ")


ALLOWED = """# perf tracepoints are off in CI containers (perf_event_paranoid)
top_live paranoid
# the lab needs root
fleet_e2e needs root
# no cpuidle driver: the live part cannot run
guard no POLL state0
"""


def main():
    with tempfile.TemporaryDirectory(prefix="watt-testcount-") as tmp:
        p, last = run(tmp, ALLOWED, None)
        check(p.returncode == 0 and last == "3 2 4",
              f"outside CI: 3 passed, 2 failed, 4 skipped ({last!r}, {one_line(p.stderr)[:300]})")
        for want in ("skip build: top_live: perf tracepoints unusable here: paranoid 4",
                     "fleet_e2e: needs root (a throw-away user",
                     "tap: no cmocka here", "quiet: (no reason printed)",
                     "skip build: guard: partial skip: live part: cpuidle has no POLL state0"):
            check(want in p.stderr, f"the reason is read from stdout: {one_line(want)!r}")

        p, last = run(tmp, ALLOWED, "true")
        check(p.returncode == 0 and last == "3 4 2",
              f"CI=true: the two skips not allowed count as failed ({last!r})")
        check("FAIL build: tap skipped in CI, reason not in" in p.stderr and
              "FAIL build: quiet skipped in CI" in p.stderr and
              "FAIL build: top_live" not in p.stderr,
              f"CI=true: each disallowed skip is named ({one_line(p.stderr)[:400]})")

        p, last = run(tmp, "# a reason that never comes\ntop_live no such reason\n", "1")
        check(last == "2 7 0", f"CI=1: a pattern that does not match allows nothing, a "
              f"partial skip included ({last!r})")
        check("FAIL build: guard: partial skip in CI, reason not in" in p.stderr,
              "CI=1: the partial skip not allowed is named")

        p, last = run(tmp, "top_live paranoid\n", "true")
        check(last == "2 8 0" and "no comment above 'top_live'" in p.stderr,
              f"an entry without a comment saying why fails the run ({last!r}, "
              f"{one_line(p.stderr)[:200]})")

    # The repository's list: well formed, and every name is a registered test.
    names = set()
    try:
        with open(os.path.join(SRC, "tests", "cli", "meson.build")) as f:
            text = f.read()
        for d in sorted(os.listdir(os.path.join(SRC, "tests"))):
            mb = os.path.join(SRC, "tests", d, "meson.build")
            if d != "cli" and os.path.isfile(mb):
                with open(mb) as f:
                    text += f.read()
        with open(os.path.join(SRC, "tests", "meson.build")) as f:
            text += f.read()
    except OSError as e:
        check(False, f"read the meson.build files: {e}")
    sys.path.insert(0, os.path.join(SRC, "tools"))
    import testcount  # noqa: E402
    try:
        entries = testcount.read_allow(ALLOW)
        check(True, f"{ALLOW}: {len(entries)} entries, each with a comment")
    except ValueError as e:
        entries = []
        check(False, f"{ALLOW}: {e}")
    for name, _, n in entries:
        names_ok = f"'{name}'" in text
        check(names_ok, f"{ALLOW}:{n}: {name} is a test in a meson.build")
    return summary()


if __name__ == "__main__":
    sys.exit(main())
