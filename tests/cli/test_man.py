#!/usr/bin/env python3
"""The man pages: each page of man/meson.build is built by scdoc (the
build's output dir is argv[1]) and renders with `man --warnings -l` at 80
columns without a warning; watt(1) names every verb of `watt --help` and
each verb has its page; every option a verb's --help lists is a term of
that verb's page's OPTIONS section (a drift check: a new option fails
here until it is documented)."""
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checks import check, failures  # noqa: E402
import helpopts  # noqa: E402

WATT = os.environ["WATT"]
SRC = os.path.join(os.environ["WATT_SRCDIR"], "man")
BUILT = sys.argv[1]
HAVE_MAN = sys.argv[2] == "built" if len(sys.argv) > 2 else True


def pages():
    """The pages man/meson.build lists."""
    text = open(os.path.join(SRC, "meson.build")).read()
    block = text.split("man_pages = [", 1)[1].split("]", 1)[0]
    return re.findall(r"'([^']+)'", block)


def section(scd, title):
    """The lines of the scd section whose '# ' heading matches TITLE."""
    out, inside = [], False
    for line in scd.splitlines():
        if line.startswith("# "):
            inside = re.search(title, line[2:]) is not None
        elif inside:
            out.append(line)
    return out


def term_has(lines, opt):
    """OPT is named on a term line (a definition's first, unindented line)."""
    pat = re.compile(r"\*" + re.escape(opt) + r"(?![\w-])")
    return any(pat.search(line) for line in lines if line.startswith("*"))


def main():
    if not HAVE_MAN or not shutil.which("man"):
        print("SKIP the man pages are not built (-Dman=disabled, or no scdoc) or man is not "
              "installed (tools/setup.sh --test installs scdoc and man-db)")
        return 77
    listed = pages()
    srcs = sorted(f[:-4] for f in os.listdir(SRC) if f.endswith(".scd"))
    check(sorted(listed) == srcs, f"man/meson.build lists every man/*.scd ({len(srcs)} pages)")
    env = dict(os.environ, MANWIDTH="80", LC_ALL="C.UTF-8", MANPAGER="cat", PAGER="cat")
    for page in listed:
        built = os.path.join(BUILT, page)
        if not os.path.isfile(built):
            check(False, f"{page}: built by scdoc into {built}")
            continue
        p = subprocess.run(["man", "--warnings", "-l", built], capture_output=True, text=True,
                           env=env, timeout=60)
        check(p.returncode == 0 and p.stderr.strip() == "" and "NAME" in p.stdout,
              f"{page}: man --warnings -l renders it without warnings"
              + (f" (rc {p.returncode}: {p.stderr.strip()[:500]})" if p.stderr.strip() or p.returncode else ""))
        name = page.rsplit(".", 1)[0]
        first = p.stdout.splitlines()[0] if p.stdout else ""
        check(first.startswith(f"{name}(") or first.startswith(f"{name.upper()}("),
              f"{page}: its header names it ({first.strip()[:60]})")

    top = open(os.path.join(SRC, "watt.1.scd")).read()
    for v in helpopts.verbs(WATT):
        check(term_has(section(top, r"^VERBS$"), v) or re.search(rf"^\*{v}\*$", top, re.M),
              f"watt(1) lists the verb {v}")
        check(f"watt-{v}.1" in listed, f"the verb {v} has its page watt-{v}(1)")
    for sub in helpopts.fleet_subverbs(WATT):
        fleet = open(os.path.join(SRC, "watt-fleet.1.scd")).read()
        check(re.search(rf"\*watt fleet {sub}\*", fleet) is not None,
              f"watt-fleet(1) has a synopsis of fleet {sub}")

    for page, title, words, opts in helpopts.help_targets(WATT):
        scd = open(os.path.join(SRC, page + ".scd")).read()
        lines = section(scd, title)
        missing = [o for o in opts if not term_has(lines, o)]
        check(not missing and opts,
              f"{page} {title}: every option of watt {' '.join(words)} --help ({len(opts)})"
              + (f"; missing {' '.join(missing)}" if missing else ""))

    # the drift check itself: an option that is not in the page is found
    check(not term_has(section(top, r"OPTIONS"), "--no-such-option"),
          "an undocumented option is reported (self-test)")
    print(f"{len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
