#!/usr/bin/env python3
"""`watt tune` then `watt restore` on THIS machine: every file the tune
touched reads, byte for byte, as it did before. Runs only where / is the
running system and we are root (exit 77 otherwise); the journal goes to a
temporary directory, and whatever happens, the finally clause restores.

Two profiles: the built-in latency (on a VM with only POLL and haltpoll
it may change nothing), and live-check, which moves every knob a small VM
has: cpuidle state disable files, per-CPU pm_qos, the writeback interval,
and asks for the NMI watchdog and ASPM (notes where they are read-only).

Usage: test_tune_live.py [WATT] (default: $WATT)."""
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
from checks import check, summary  # noqa: E402

WATT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.environ["WATT"])

LIVE_CHECK = """[profile]
description = every knob a small VM has, moved, for the live test
include = latency
[cpuidle]
max_latency_us = 0
[pm_qos]
resume_latency_us = 20
[kernel]
nmi_watchdog = 1
dirty_writeback_centisecs = 1500
[devices]
pcie_aspm = powersave
"""


def live_root():
    """/ is the running kernel's: procfs on /proc, sysfs on /sys."""
    try:
        with open("/proc/self/mountinfo") as f:
            mounts = {(l.split()[4], l.split(" - ")[1].split()[0]) for l in f}
    except OSError:
        return False
    return ("/proc", "proc") in mounts and ("/sys", "sysfs") in mounts


def watched_files():
    """What a tune can touch on this machine, and more: every cpuidle
    state's disable, every CPU's pm_qos, the sysctls, the ASPM policy."""
    pats = ["/sys/devices/system/cpu/cpu[0-9]*/cpuidle/state*/disable",
            "/sys/devices/system/cpu/cpu[0-9]*/power/pm_qos_resume_latency_us",
            "/sys/devices/system/cpu/cpufreq/policy*/scaling_*_freq",
            "/sys/devices/system/cpu/cpufreq/policy*/scaling_governor",
            "/sys/devices/system/cpu/cpufreq/policy*/energy_performance_preference",
            "/sys/class/scsi_host/host*/link_power_management_policy",
            "/proc/sys/kernel/nmi_watchdog", "/proc/sys/vm/dirty_writeback_centisecs",
            "/sys/module/pcie_aspm/parameters/policy"]
    return sorted({p for pat in pats for p in glob.glob(pat)})


def snapshot(paths):
    out = {}
    for p in paths:
        try:
            with open(p, "rb") as f:
                out[p] = f.read()
        except OSError as e:
            out[p] = e.errno
    return out


def active(text):
    """The bracketed word of a choice list, else the stripped text."""
    if "[" in text and "]" in text:
        return text.split("[", 1)[1].split("]", 1)[0]
    return text.strip()


class Run:
    def __init__(self, tmp):
        self.journal = os.path.join(tmp, "journal").lstrip("/")
        self.env = dict(os.environ, WATT_CONFIG_DIR=os.path.join(tmp, "cfg"))
        self.env.pop("WATT_ROOT", None)

    def watt(self, *args):
        return subprocess.run([WATT, *args, "--root", "/", "--journal", self.journal],
                              capture_output=True, text=True, env=self.env, timeout=120)


def round_trip(run, prof, before):
    dry = run.watt("tune", prof, "--dry-run", "--json")
    check(dry.returncode == 0, f"{prof}: --dry-run exit 0 ({dry.stderr.strip()[:300]})")
    if dry.returncode != 0:
        return None
    plan = json.loads(dry.stdout)
    changes = plan["changes"]
    print(f"# {prof}: {len(changes)} changes planned, notes: {plan['notes']}")
    touched = [c["path"] for c in changes]
    planned = snapshot(touched)
    check(all(active(planned[c["path"]].decode()) == c["old"] for c in changes
              if isinstance(planned[c["path"]], bytes)),
          f"{prof}: every planned change's old value is what the file reads")
    ap = run.watt("tune", prof)
    check(ap.returncode == 0, f"{prof}: applied ({ap.stderr.strip()[:300]})")
    now = snapshot(touched)
    for c in changes:
        got = now[c["path"]]
        got = active(got.decode()) if isinstance(got, bytes) else got
        clamped = "Read back" in ap.stdout and c["path"] in ap.stdout.split("Read back", 1)[1]
        check(got == c["new"] or clamped, f"{prof}: {c['path']} reads {got!r} after the tune "
                                          f"(want {c['new']!r})")
    st = run.watt("tune", "--status", "--json")
    doc = json.loads(st.stdout) if st.returncode == 0 else {"changed": None}
    check(doc["changed"] is not None and len(doc["changed"]) == len(changes),
          f"{prof}: --status lists the {len(changes)} changed values")
    rs = run.watt("restore")
    check(rs.returncode == 0 and f"Restored {len(changes)} value" in rs.stdout,
          f"{prof}: watt restore ({rs.stdout.strip()[-200:]}{rs.stderr.strip()[-200:]})")
    after = snapshot(before)
    diff = [p for p in before if after[p] != before[p]]
    check(not diff, f"{prof}: every watched file reads as before ({len(before)} files; "
                    f"differ: {diff[:5]})")
    return plan


def main():
    if os.geteuid() != 0 or os.environ.get("WATT_ROOT") or not live_root():
        print("skip: needs root and / as the running system")
        return 77
    tmp = tempfile.mkdtemp(prefix="watt-tune-live-")
    os.makedirs(os.path.join(tmp, "cfg", "profiles.d"))
    with open(os.path.join(tmp, "cfg", "profiles.d", "live-check.conf"), "w") as f:
        f.write(LIVE_CHECK)
    run = Run(tmp)
    files = watched_files()
    before = snapshot(files)
    print(f"# watching {len(files)} files")
    try:
        round_trip(run, "latency", before)
        plan = round_trip(run, "live-check", before)
        if plan is not None:
            check(len(plan["changes"]) >= 1, "live-check: moves at least one value here")
            nmi = "/proc/sys/kernel/nmi_watchdog"
            if os.path.exists(nmi) and not os.stat(nmi).st_mode & 0o222:
                check(any(n.startswith("kernel.nmi_watchdog: skipped") for n in plan["notes"]) or
                      before[nmi].strip() == b"1",
                      "live-check: a read-only nmi_watchdog is a note, not a failed write")
        v = run.watt("tune", "live-check", "--verify=1")
        check(v.returncode == 0 and "Measured before and after" in v.stdout,
              f"--verify: before/after measured here ({v.stderr.strip()[-300:]})")
        print("\n".join("# " + l for l in v.stdout.split("Measured before and after", 1)[-1]
                        .splitlines()[:30]))
        # every online CPU in some package row; the cstate PMUs here or a reason why not
        ncpu = len(os.sched_getaffinity(0))
        rows = [l for l in v.stdout.splitlines() if l.strip().startswith("package ")]
        check(rows and sum(int(l.split("(")[1].split()[0]) for l in rows) <= ncpu and
              ("PC" in v.stdout or "Package C-states: not measured:" in v.stdout),
              f"--verify: per-package rows here ({rows[:2]})")
        rs = run.watt("restore")
        check(rs.returncode == 0 and snapshot(files) == before, "--verify: restored")
        # a workload of known throughput: one run every ~10 ms of sleep plus
        # a fork and exec of sh (1-5 ms here), so 40-100 runs/s
        wl = run.watt("tune", "live-check", "--verify=1", "--workload", "sleep 0.01", "--json")
        doc = json.loads(wl.stdout) if wl.returncode == 0 else {}
        rates = [doc["verify"][w]["workload_runs_per_s"] for w in ("before", "after")] if doc \
            else []
        check(len(rates) == 2 and all(40 <= r <= 100 for r in rates) and
              doc["verify"]["after"]["workload_failed"] == 0,
              f"--workload 'sleep 0.01': 40-100 runs/s before and after ({rates}, "
              f"{wl.stderr.strip()[-200:]})")
        left = subprocess.run(["pgrep", "-f", "sh -c sleep 0.01"], capture_output=True, text=True)
        check(left.stdout.strip() == "", "--workload: no run left behind after watt tune")
        rs = run.watt("restore")
        check(rs.returncode == 0 and snapshot(files) == before, "--workload: restored")
    finally:
        run.watt("restore")
        after = snapshot(files)
        for p, old in before.items():
            if isinstance(old, bytes) and after[p] != old:
                check(False, f"finally: {p} still differs; writing back {old!r} directly")
                try:
                    with open(p, "wb") as f:
                        f.write(active(old.decode()).encode() + b"\n")
                except OSError as e:
                    print(f"# cannot write back {p}: {e}")
        shutil.rmtree(tmp, ignore_errors=True)
    return summary()


if __name__ == "__main__":
    sys.exit(main())
