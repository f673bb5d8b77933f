#!/usr/bin/env python3
"""`watt report --html FILE` on the fixture roots, on a copy with hostile
names (a process and a hostname holding HTML), and on this machine with a
live process named "<script>w": the page parses with balanced tags, has
every section and plot, loads nothing (no URL, script, link, image or
style import), shows hostile names as text; a bad path fails before the
interval; a failed write leaves no temporary file and the old FILE as it was.

Usage: test_report_html.py [WATT] (default: $WATT); fixtures from $WATT_FIXTURES."""
import ctypes
import html.parser
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
from checks import check, copy_fixture, summary  # noqa: E402

WATT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.environ["WATT"])
FIXTURES = os.environ["WATT_FIXTURES"]
ENV = dict(os.environ, WATT_CONFIG_DIR="/nonexistent-watt-config")
ENV.pop("WATT_ROOT", None)
VOID = {"meta", "br", "hr", "img", "input", "link", "wbr", "area", "base", "col", "source"}
SVG_LEAF = {"rect"}  # written with a closing tag: <rect ...><title>..</title></rect>
SECTIONS = ["plots", "plot-cstates", "plot-power", "plot-wakeups", "host", "power", "cstates",
            "frequency", "utilisation", "interrupts", "wakeups", "devices", "latency", "tsc",
            "advice", "unmeasured"]


class Page(html.parser.HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack, self.errors, self.ids, self.tags = [], [], set(), {}
        self.attrs, self.text = [], []
        self.where = []

    def handle_starttag(self, tag, attrs):
        self.tags[tag] = self.tags.get(tag, 0) + 1
        self.attrs += attrs
        for k, v in attrs:
            if k == "id":
                self.ids.add(v)
            if k == "fill" and self.stack and "cstates" in " ".join(self.where):
                pass
        if tag not in VOID:
            self.stack.append(tag)
            self.where.append(dict(attrs).get("id", ""))

    def handle_endtag(self, tag):
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes {self.stack[-1] if self.stack else 'nothing'}")
            return
        self.stack.pop()
        self.where.pop()

    def handle_data(self, data):
        self.text.append(data)


def parse(path):
    with open(path, encoding="utf-8") as f:
        raw = f.read()
    p = Page()
    p.feed(raw)
    p.close()
    return raw, p


def report(root, out, *extra):
    args = [WATT, "report", "--html", out, *extra]
    if root:
        args += ["--root", root]
    return subprocess.run(args, capture_output=True, text=True, env=ENV, timeout=300)


def self_contained(name, raw, page, nsvg=3):
    check(not page.errors and not page.stack,
          f"{name}: tags balanced ({page.errors[:3]}, open {page.stack[:3]})")
    for s in SECTIONS:
        check(s in page.ids, f"{name}: has section/plot #{s}")
    bad = [t for t in ("script", "link", "img", "iframe", "object", "embed") if t in page.tags]
    check(not bad, f"{name}: no script, link, image or frame ({bad})")
    urls = [f"{k}={v}" for k, v in page.attrs
            if k in ("src", "href", "xlink:href", "action") and not (v or "").startswith("#")]
    check(not urls, f"{name}: every link is a local anchor ({urls[:3]})")
    low = raw.lower()
    check("http:" not in low and "https:" not in low and "url(" not in low
          and "@import" not in low, f"{name}: no URL anywhere in the page")
    check(nsvg is None or page.tags.get("svg", 0) == nsvg, f"{name}: {nsvg} inline SVG plots ({page.tags.get('svg')})")


def fixtures(tmp):
    # amd-epyc has RAPL through perf only, which a recorded tree cannot open
    cpus = {"intel-2s": (40, "rapl package-0"), "amd-epyc": (64, "node (model"),
            "big-384": (376, "rapl package-0")}
    for name, (n, source) in cpus.items():
        out = os.path.join(tmp, f"{name}.html")
        p = report(os.path.join(FIXTURES, name), out)
        check(p.returncode == 0 and out in p.stdout, f"{name}: exit 0, says where ({p.stderr})")
        if p.returncode:
            continue
        raw, page = parse(out)
        self_contained(name, raw, page)
        cst = raw[raw.index('id="plot-cstates"'):raw.index('id="plot-power"')]
        check(cst.count("<text") == n, f"{name}: a residency bar per online CPU "
              f"({cst.count('<text')} of {n})")
        pw = raw[raw.index('id="plot-power"'):raw.index('id="plot-wakeups"')]
        check(source in pw, f"{name}: power plot has {source}")
        wk = raw[raw.index('id="plot-wakeups"'):raw.index('id="host"')]
        check(wk.count("<rect") >= 5, f"{name}: wake-up plot has processes ({wk.count('<rect')})")
        check(os.stat(out).st_mode & 0o777 == 0o666 & ~UMASK, f"{name}: mode 0666 less the umask")
    out = os.path.join(tmp, "snap.html")
    p = report(os.path.join(FIXTURES, "intel-2s"), out, "--interval", "0")
    if p.returncode == 0:
        raw, page = parse(out)
        self_contained("intel-2s --interval 0", raw, page, nsvg=None)
    check(p.returncode == 0 and "residency needs an interval" in raw,
          "--interval 0: the plots say why they are empty")


def hostile(tmp):
    root = copy_fixture(FIXTURES, "intel-2s", os.path.join(tmp, "hostile"))
    evil = "<script>x"
    for base in ("proc/1041", "later/proc/1041"):
        for dirpath, _, files in os.walk(os.path.join(root, base)):
            for fn in files:
                path = os.path.join(dirpath, fn)
                with open(path) as f:
                    text = f.read()
                with open(path, "w") as f:
                    f.write(text.replace("(nginx)", f"({evil})").replace("\tnginx", f"\t{evil}"))
    host = "<b onload=\"x\">'&amp;"
    with open(os.path.join(root, "proc", "sys", "kernel", "hostname"), "w") as f:
        f.write(host + "\n")
    out = os.path.join(tmp, "hostile.html")
    p = report(root, out)
    check(p.returncode == 0, f"hostile: exit 0 ({p.stderr})")
    if p.returncode:
        return
    raw, page = parse(out)
    self_contained("hostile", raw, page)
    text = "".join(page.text)
    check("<script" not in raw.lower(), "hostile: no <script in the page")
    check(evil in text and "&lt;script&gt;x" in raw, "hostile: the comm is shown as text, escaped")
    check(host in text and "<b " not in raw, "hostile: the hostname is shown as text, escaped")


def live(tmp):
    pid = os.fork()
    if pid == 0:  # a process named "<script>w" that wakes up often
        libc = ctypes.CDLL(None)
        libc.prctl(15, b"<script>w", 0, 0, 0)  # PR_SET_NAME
        end = time.monotonic() + 60
        while time.monotonic() < end:
            time.sleep(0.001)
        os._exit(0)
    try:
        out = os.path.join(tmp, "live.html")
        p = report(None, out, "--interval", "1")
        check(p.returncode == 0, f"live: exit 0 ({p.stderr})")
        if p.returncode == 0:
            raw, page = parse(out)
            self_contained("live", raw, page)
            check("<script" not in raw.lower(), "live: no <script in the page")
            check("<script>w" in "".join(page.text),
                  "live: the process named <script>w is listed, as text")
    finally:
        os.kill(pid, 9)
        os.waitpid(pid, 0)


def failures(tmp):
    t0 = time.monotonic()
    p = report(os.path.join(FIXTURES, "intel-2s"), "/nonexistent/watt-dir/r.html",
               "--interval", "3600")
    check(p.returncode == 1 and "cannot write /nonexistent/watt-dir/r.html" in p.stderr,
          f"a bad path: exit 1 naming it ({p.stderr.strip()})")
    check(time.monotonic() - t0 < 600, "a bad path fails before the 3600 s interval")
    # the target is a directory: rename fails after the page is written
    d = os.path.join(tmp, "busy")
    os.makedirs(os.path.join(d, "page.html"))
    p = report(os.path.join(FIXTURES, "amd-epyc"), os.path.join(d, "page.html"))
    check(p.returncode == 1 and f"cannot write {d}/page.html" in p.stderr,
          f"a failed rename: exit 1 naming the path ({p.stderr.strip()})")
    check(sorted(os.listdir(d)) == ["page.html"], f"no temporary file left ({os.listdir(d)})")
    # an old page is replaced whole
    old = os.path.join(tmp, "old.html")
    with open(old, "w") as f:
        f.write("old")
    p = report(os.path.join(FIXTURES, "amd-epyc"), old)
    with open(old) as f:
        check(p.returncode == 0 and f.read().startswith("<!DOCTYPE html>"), "an old page replaced")
    for args, what in ((["--json"], "--html with --json"), ([], "an empty --html")):
        q = subprocess.run([WATT, "report", "--html", "" if not args else old, *args],
                           capture_output=True, text=True, env=ENV, timeout=60)
        check(q.returncode == 2 and q.stderr.startswith("watt report: "),
              f"{what}: exit 2 ({q.stderr.strip()})")


UMASK = os.umask(0o022)
os.umask(UMASK)


def main():
    tmp = tempfile.mkdtemp(prefix="watt-html-")
    try:
        fixtures(tmp)
        hostile(tmp)
        live(tmp)
        failures(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return summary()


if __name__ == "__main__":
    sys.exit(main())
