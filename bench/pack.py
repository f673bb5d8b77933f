#!/usr/bin/env python3
"""What the packer's planner costs, and what packing saves by the models.

(a) The planner per tick: what the agent's packer runs each tick,
    pack_plan_build() for the window's demand then pack_decide() against the
    set in force, on the intel-2s, amd-epyc and big-384 fixture topologies
    (read by the real topology_read()), the demand a seeded random walk over
    0-90 % of the CPUs. Thread-CPU µs per tick (median, mean, p99), the
    share of one CPU that costs at one tick a second, the actions taken,
    the heap one plan holds and the heap the process holds after the run.

(b) The saving the seed-2011 and specpower-2023 models predict for packing
    a 20 %-busy machine (default intel-2s, 2 sockets) onto one package: the
    plan, the three terms (idle package in PC6, its DRAM in self-refresh,
    idle cores of the awake package in C6), the range, and every assumption
    (model/pack_saving.h, the same code the report's advice uses).

Runs build/bench/bench_pack (bench/pack.c, built on demand). Figures, not a
test: it exits 0 whatever they are, non-zero only when it cannot measure.
The live half (CPU 1's residency and wake-ups with and without packing on
this VM) is bench/pack_live.py's.
"""
import argparse
import json
import os
import platform
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
MACHINES = ["intel-2s", "amd-epyc", "big-384"]
MODELS = ["seed-2011", "specpower-2023"]


def build(builddir):
    exe = os.path.join(builddir, "bench", "bench_pack")
    r = subprocess.run(["ninja", "-C", builddir, "bench/bench_pack"], capture_output=True,
                       text=True)
    if r.returncode != 0 or not os.access(exe, os.X_OK):
        sys.exit(f"pack.py: cannot build {exe}:\n{r.stdout}{r.stderr}")
    return exe


def run(exe, args):
    r = subprocess.run([exe] + args, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"pack.py: {' '.join([exe] + args)}: {r.stderr.strip()}")
    return json.loads(r.stdout)


def ticks_table(rows, w):
    w("(a) the planner per tick: pack_plan_build + pack_decide, thread CPU")
    w("%-10s %5s %5s %4s %7s %7s %7s %8s %6s %6s %6s %7s %8s" % (
        "machine", "cpus", "cores", "pkgs", "us", "mean", "p99", "1 Hz %", "keep", "grow",
        "shrink", "plan B", "heap KiB"))
    for name, r in rows:
        w("%-10s %5d %5d %4d %7.1f %7.1f %7.1f %8.4f %6d %6d %6d %7d %8d" % (
            name, r["cpus"], r["cores"], r["packages"], r["cpu_us"], r["cpu_us_mean"],
            r["cpu_us_p99"], r["cpu_us_mean"] / 1e4, r["keep"], r["grow"], r["shrink"],
            r["plan_heap_bytes"], r["heap_kib"]))
    if len(rows) > 1:
        (n0, a), (n1, b) = rows[0], rows[-1]
        w("ratio %s/%s: %.1fx the CPUs, %.1fx the cost per tick (mean), %.2f us per CPU on "
          "%s, %.2f on %s" % (n1, n0, b["cpus"] / a["cpus"], b["cpu_us_mean"] / a["cpu_us_mean"],
                              a["cpu_us_mean"] / a["cpus"], n0, b["cpu_us_mean"] / b["cpus"], n1))
    w("'1 Hz %' is the mean as a share of one CPU at one tick a second; 'plan B' the heap one")
    w("plan of half the machine holds, 'heap KiB' what the bench process's heap holds after")
    w("every tick (glibc mallinfo2: arena + mmapped), topology included.")


def saving_table(machine, share, rows, w):
    w("(b) packing a %.0f %%-busy %s onto the fewest cores and packages, by the models" % (
        100 * share, machine))
    w("%-15s %6s %-12s %9s %9s %9s %9s %9s %9s %15s %7s" % (
        "model", "busy", "packed", "idle c/p", "node W", "pkg W", "dram W", "cores W",
        "saving W", "range W", "% node"))
    for r in rows:
        w("%-15s %6.2f %-12s %4d/%-4d %9.1f %9.1f %9.1f %9.1f %9.1f %7.1f-%-7.1f %7.1f" % (
            r["model"], r["busy_cpus"], r["packed"], r["idle_cores"], r["idle_packages"],
            r["node_w"], r["saving_packages_w"], r["saving_dram_w"], r["saving_cores_w"],
            r["saving_w"], r["saving_low_w"], r["saving_high_w"],
            100 * r["saving_w"] / r["node_w"]))
    if len(rows) == 2 and rows[1]["saving_w"] > 0:
        w("ratio %s/%s: %.1fx" % (rows[0]["model"], rows[1]["model"],
                                  rows[0]["saving_w"] / rows[1]["saving_w"]))
    w("idle c/p: cores and packages the plan leaves wholly idle (of %d and %d); pkg W: the idle" % (
        rows[0]["cores"], rows[0]["packages"]))
    w("package in PC6; dram W: its memory in self-refresh; cores W: idle cores of the awake")
    w("package in C6; node W: the model at this load, unpacked. Assumptions, per model:")
    for r in rows:
        w("  %s: %s" % (r["model"], r["assumptions"]))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--builddir", default=os.path.join(REPO, "build"))
    ap.add_argument("--fixtures", default=None,
                    help="fixture roots (default BUILDDIR/tests/fixtures, written by the build)")
    ap.add_argument("--ticks", type=int, default=2000)
    ap.add_argument("--busy-share", type=float, default=0.2)
    ap.add_argument("--saving-machine", default="intel-2s")
    ap.add_argument("-o", "--output", help="also write the figures to this file")
    a = ap.parse_args()
    fixtures = a.fixtures or os.path.join(a.builddir, "tests", "fixtures")
    exe = build(a.builddir)
    lines = []

    def w(s=""):
        print(s)
        lines.append(s)

    t0 = time.monotonic()
    w("bench/pack.py on %s (%s, %d CPUs), %s UTC" % (
        platform.node(), platform.release(), os.cpu_count(),
        time.strftime("%Y-%m-%d %H:%M", time.gmtime())))
    w()
    rows = []
    for m in MACHINES:
        root = os.path.join(fixtures, m)
        if not os.path.isdir(root):
            w("%s: no fixture root at %s (ninja -C %s writes it)" % (m, root, a.builddir))
            continue
        rows.append((m, run(exe, ["--ticks", str(a.ticks), root])))
    if not rows:
        sys.exit("pack.py: no fixture root found under " + fixtures)
    ticks_table(rows, w)
    w()
    root = os.path.join(fixtures, a.saving_machine)
    if os.path.isdir(root):
        sav = [run(exe, ["--saving", m, "--busy-share", str(a.busy_share), root])
               for m in MODELS]
        saving_table(a.saving_machine, a.busy_share, sav, w)
    w()
    w("elapsed %.1f s" % (time.monotonic() - t0))
    if a.output:
        with open(a.output, "w") as f:
            f.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
