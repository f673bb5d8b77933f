#!/usr/bin/env python3
"""`watt report` tells the truth on odd trees: copies of the intel-2s fixture
changed the way real machines and partial captures differ from the
generator's trees.

- an energy counter that does not advance while the CPUs are busy is
  absent ("the counter did not advance"), not 0 W; the node figure falls
  back and says why (text and JSON);
- a CPU listed in devices/system/cpu/offline is offline when neither the
  online list nor per-CPU online files exist;
- a powercap zone that cannot be parsed is named in the problems, not
  skipped silently.

Usage: test_odd_trees.py [WATT] (default: $WATT); fixtures from $WATT_FIXTURES."""
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
from checks import check, summary  # noqa: E402

WATT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.environ["WATT"])
FIXTURES = os.environ["WATT_FIXTURES"]
SANITIZER = ("Sanitizer", "runtime error:", "Segmentation", "Aborted", "core dumped")
TMP = tempfile.mkdtemp(prefix="watt-odd-")
ENV = dict(os.environ, WATT_CONFIG_DIR=os.path.join(TMP, "cfg"))
ENV.pop("WATT_ROOT", None)
CPU = "sys/devices/system/cpu"
PC = "sys/class/powercap"


def report(root, *extra):
    """Text and JSON of `watt report --interval 1` on ROOT."""
    out = {}
    for fmt in ("txt", "json"):
        args = [WATT, "report", "--root", root, "--interval", "1", *extra]
        if fmt == "json":
            args.append("--json")
        p = subprocess.run(args, capture_output=True, text=True, env=ENV, timeout=120,
                           stdin=subprocess.DEVNULL)
        san = [l for l in p.stderr.splitlines() if any(s in l for s in SANITIZER)]
        check(p.returncode == 0 and not san,
              f"report {fmt} on {os.path.basename(root)}: exit 0 ({p.returncode}) {san[:1]}")
        out[fmt] = p.stdout
    try:
        out["json"] = json.loads(out["json"])
    except ValueError:
        check(False, "report --json is JSON")
        out["json"] = {"power": {"channels": []}, "problems": [], "host": {}}
    return out["txt"], out["json"]


def faults(root, drop=(), add=()):
    """Rewrite ROOT's watt-faults without the lines whose path is in DROP,
    with the lines ADD appended."""
    path = os.path.join(root, "watt-faults")
    with open(path) as f:
        lines = [l for l in f if l.split(" ", 1)[0] not in drop]
    with open(path, "w") as f:
        f.writelines(lines + [a + "\n" for a in add])


def channel(r, domain):
    return next((c for c in r["power"]["channels"] if c["domain"] == domain), None)


def problem(r, where, what):
    return any(where in p["where"] and what in (p["reason"] or "") for p in r["problems"])


def section(text, title):
    """The lines of one section of the text report."""
    out, on = [], False
    for line in text.splitlines():
        if line == title:
            on = True
        elif on and line and not line.startswith(" "):
            break
        elif on:
            out.append(line)
    return "\n".join(out)


def stuck_counter(root):
    """intel-2s: package-0's energy_uj reads the same twice while 10.4 CPUs
    are busy. The ACPI meter still gives the node figure; without it the
    RAPL sum would have been 0 + 10.7 + 64.4 + 10.1 W, 'measured'."""
    faults(root, drop={f"{PC}/intel-rapl:0/energy_uj"})
    text, r = report(root)
    c = channel(r, "package-0")
    check(c is not None and c["watts"] is None and c["delta_j"] is None
          and c.get("absent") == "the counter did not advance",
          f"stuck package-0: watts null, absent says why ({c})")
    check(c is not None and c["joules"] is not None, "stuck package-0: the counter itself was read")
    check(channel(r, "package-1")["watts"] is not None and channel(r, "package-1").get("absent") is None,
          "package-1, which moved, keeps its watts")
    check(problem(r, "rapl package-0", "absent: the counter did not advance"),
          "stuck package-0 named in problems")
    check(r["power"]["measured"] and r["power"]["source"] == "acpi_power_meter",
          f"node still from the ACPI meter ({r['power']['source']})")
    pw = section(text, "Power")
    row = [l for l in pw.splitlines() if " package-0 " in l]
    check(row and row[0].split()[4] == "-", f"text: package-0 W is '-', not 0.00 ({row})")
    check("rapl package-0: absent: the counter did not advance" in text,
          "text: the problem line names the stuck counter")

    # Without the ACPI meter's reading the node figure would be RAPL's; with
    # package-0 stuck it falls back to the model, and says why.
    meter = "sys/class/hwmon/hwmon0/power1_average"
    faults(root, drop={meter}, add=[f"{meter} EIO"])
    text, r = report(root)
    p = r["power"]
    check(not p["measured"] and p["source"].startswith("model")
          and p["coverage"] == "estimated: rapl package-0 is absent: the counter did not advance",
          f"node falls back to the model and says why ({p['source']}: {p['coverage']})")
    check(p["it_w"] is not None and p["it_w"] > 0, "the model's estimate is given")
    check("estimated: rapl package-0 is absent: the counter did not advance" in section(text, "Power"),
          "text: the power section says why the node figure is estimated")
    check(" W measured" not in section(text, "Power"), "text: nothing 'measured' left")


def offline_list(root):
    """No online list and no per-CPU online files (some kernels and
    architectures have none): the offline list decides."""
    os.unlink(os.path.join(root, CPU, "online"))
    for n in range(40):
        f = os.path.join(root, CPU, f"cpu{n}", "online")
        if os.path.exists(f):
            os.unlink(f)
    with open(os.path.join(root, CPU, "offline"), "w") as f:
        f.write("38-39\n")
    text, r = report(root)
    h = r["host"]
    check(h.get("cpus_online") == "0-37" and h.get("cpus_offline") == "38-39"
          and h.get("online_cpus") == 38,
          f"offline list honoured: online {h.get('cpus_online')}, offline {h.get('cpus_offline')}")
    check("38 CPUs online (0-37)" in text and "2 offline (38-39)" in text,
          "text: 38 online, 2 offline")


def powercap_zones(root):
    """A zone whose id or name watt cannot place is named, with why."""
    pc = os.path.join(root, PC)
    os.symlink("../../devices/virtual/powercap/intel-rapl/intel-rapl:0",
               os.path.join(pc, "intel-rapl:x"))
    with open(os.path.join(pc, "intel-rapl:1", "name"), "w") as f:
        f.write("pkg$%\n")
    text, r = report(root)
    doms = [c["domain"] for c in r["power"]["channels"] if c["via"] == "powercap"]
    check(doms == ["package-0", "dram-0"], f"powercap: the two usable zones left ({doms})")
    check(problem(r, "powercap/intel-rapl:x", "zone skipped"),
          "powercap: the unparsable zone id is named")
    check(problem(r, "intel-rapl:1/name", "not a RAPL domain name"),
          "powercap: the garbage name is named")
    check(problem(r, "intel-rapl:1/name", "subzone skipped"),
          "powercap: dram under the garbage parent: the parent's name is named")
    check("intel-rapl:x: not a zone name watt can parse" in text,
          "text: the unparsable zone is in the problems")


def main():
    src = os.path.join(FIXTURES, "intel-2s")
    if not os.path.isdir(src):
        check(False, "fixture intel-2s present")
        return summary()
    root = os.path.join(TMP, "m")
    try:
        shutil.copytree(src, root, symlinks=True)
        stuck_counter(root)
        offline_list(root)
        powercap_zones(root)
    finally:
        shutil.rmtree(TMP, ignore_errors=True)
    return summary()


if __name__ == "__main__":
    sys.exit(main())
