#!/usr/bin/env python3
"""Count the results of `meson test` runs for tools/test.sh.

usage: testcount.py ALLOW_LIST TESTLOG.json...

Prints "PASSED FAILED SKIPPED" on the last line of stdout, and on stderr
one line for each skipped test (its reason) and each failure this adds.

A test skips by exiting 77 (meson's result "SKIP") after printing why on
stdout ("skip: no cpufreq driver", "SKIP: needs root", "1..0 # SKIP ...").
The reason is the last line that starts with "skip" (any case, after
non-word characters such as "# "), else the text after "# SKIP", else the
last line of output.

A test that passes but skipped a part prints a line that starts with
"skip" too ("skip live part: cpuidle has no POLL state0"): each such line
is a partial skip.

In CI (the environment has CI=true or CI=1) a skipped test, or a passed
one with a partial skip, counts as failed unless ALLOW_LIST has a line
for each reason: "NAME REGEX", NAME the test's
name without project and suite ("top_live"), REGEX searched in the reason.
Every entry must follow a comment line ("# ...") that says why the skip is
allowed; a file that breaks that rule fails the run. Outside CI a skip is
only counted."""
import json
import os
import re
import sys

SKIP_LINE = re.compile(r"^\W*skip(?:ped)?\b\W*(.*)$", re.IGNORECASE)
TAP_SKIP = re.compile(r"#\s*SKIP\b\s*(.*)$", re.IGNORECASE)


def in_ci():
    return os.environ.get("CI", "").strip().lower() in ("true", "1")


def short_name(name):
    """'watt:cli / top_live' -> 'top_live'."""
    return name.rsplit(" / ", 1)[-1].strip()


def skip_reason(stdout):
    lines = [l.strip() for l in (stdout or "").splitlines() if l.strip()]
    for l in reversed(lines):
        m = SKIP_LINE.match(l)
        if m:
            return m.group(1).strip() or l
    for l in reversed(lines):
        m = TAP_SKIP.search(l)
        if m:
            return m.group(1).strip() or l
    return lines[-1] if lines else "(no reason printed)"


def partial_skips(stdout):
    """The reasons of the "skip ..." lines of a test that passed."""
    out = []
    for l in (stdout or "").splitlines():
        m = SKIP_LINE.match(l.strip())
        if m:
            out.append(m.group(1).strip() or l.strip())
    return out


def read_allow(path):
    """[(name, regex, line)]; raises ValueError on a malformed file."""
    allow = []
    commented = False
    try:
        f = open(path)
    except FileNotFoundError:
        return allow
    with f:
        for n, raw in enumerate(f, 1):
            line = raw.strip()
            if not line:
                commented = False
                continue
            if line.startswith("#"):
                commented = True
                continue
            parts = line.split(None, 1)
            if len(parts) != 2:
                raise ValueError(f"{path}:{n}: want 'NAME REGEX', got {line!r}")
            if not commented:
                raise ValueError(f"{path}:{n}: no comment above {parts[0]!r} says why its "
                                 f"skip is allowed")
            try:
                rx = re.compile(parts[1])
            except re.error as e:
                raise ValueError(f"{path}:{n}: bad pattern {parts[1]!r}: {e}") from None
            allow.append((parts[0], rx, n))
    return allow


def allowed(allow, name, reason):
    return any(a == name and rx.search(reason) for a, rx, _ in allow)


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    passed = failed = skipped = 0
    try:
        allow = read_allow(argv[1])
    except ValueError as e:
        print(f"testcount: {e}", file=sys.stderr)
        allow, failed = [], 1
    ci = in_ci()
    for log in argv[2:]:
        try:
            with open(log) as f:
                entries = [json.loads(l) for l in f if l.strip()]
        except (OSError, ValueError) as e:
            print(f"testcount: {log}: {e}", file=sys.stderr)
            failed += 1
            continue
        where = os.path.basename(os.path.dirname(os.path.dirname(os.path.abspath(log))))
        for t in entries:
            result = t.get("result")
            if result in ("OK", "EXPECTEDFAIL"):
                name = short_name(t.get("name", "?"))
                parts = partial_skips(t.get("stdout"))
                bad = [r for r in parts if not allowed(allow, name, r)] if ci else []
                for r in parts:
                    print(f"{'FAIL' if r in bad else 'skip'} {where}: {name}: partial skip"
                          f"{' in CI, reason not in ' + argv[1] if r in bad else ''}: {r}",
                          file=sys.stderr)
                if bad:
                    failed += 1
                else:
                    passed += 1
            elif result == "SKIP":
                name = short_name(t.get("name", "?"))
                reason = skip_reason(t.get("stdout"))
                if ci and not allowed(allow, name, reason):
                    failed += 1
                    print(f"FAIL {where}: {name} skipped in CI, reason not in {argv[1]}: "
                          f"{reason}", file=sys.stderr)
                else:
                    skipped += 1
                    print(f"skip {where}: {name}: {reason}", file=sys.stderr)
            else:
                failed += 1
    print(f"{passed} {failed} {skipped}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
