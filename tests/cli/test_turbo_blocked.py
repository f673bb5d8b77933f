#!/usr/bin/env python3
"""Turbo headroom when settings block it (docs/report-json/frequency.md):
copies of intel-2s and amd-epyc whose watt-faults make the kernel files
read as they do on such machines, checked in watt report's JSON and text.

- intel-2s with intel_pstate/no_turbo=1 and max_perf_pct=80: the kernel
  then reports cpuinfo_max_freq as the non-turbo maximum (2400 MHz) and
  clamps scaling_max_freq to it; cpu0 is further capped at 2000 MHz and
  has EPP "power" under the powersave governor.
- amd-epyc with cpufreq/boost=0, then with boost on and cpu3's policy boost
  0 (kernel 6.7+ per-policy boost)."""
import json
import os
import shutil
import subprocess
import sys
import tempfile

WATT = os.environ["WATT"]
FIX = os.environ["WATT_FIXTURES"]
CPU = "sys/devices/system/cpu"
failed = 0


def check(ok, what):
    global failed
    if not ok:
        print("FAIL: " + what)
        failed += 1


def with_faults(tmp, name, lines, copy="a"):
    """A copy of fixture `name` whose watt-faults starts with `lines` (the
    first fault of a path wins, so these hold from the first read on)."""
    root = os.path.join(tmp, name + "." + copy)
    shutil.copytree(os.path.join(FIX, name), root, symlinks=True)
    with open(os.path.join(root, "watt-faults")) as f:
        old = f.read()
    with open(os.path.join(root, "watt-faults"), "w") as f:
        f.write("".join(l + "\n" for l in lines) + old)
    return root


def report(root, fmt):
    args = [WATT, "report", "--root", root, "--interval", "0"] + (["--json"] if fmt else [])
    p = subprocess.run(args, capture_output=True, text=True)
    check(p.returncode == 0, f"{args}: exit {p.returncode}: {p.stderr}")
    return json.loads(p.stdout) if fmt else p.stdout


def main():
    with tempfile.TemporaryDirectory() as tmp:
        lines = [f"{CPU}/intel_pstate/no_turbo =1", f"{CPU}/intel_pstate/max_perf_pct =80",
                 f"{CPU}/cpu0/cpufreq/energy_performance_preference =power",
                 f"{CPU}/cpu0/cpufreq/scaling_max_freq =2000000"]
        for c in range(40):
            lines += [f"{CPU}/cpu{c}/cpufreq/cpuinfo_max_freq =2400000",
                      f"{CPU}/cpu{c}/cpufreq/scaling_max_freq =2400000"]
        root = with_faults(tmp, "intel-2s", lines)
        pk = {p["package"]: p["turbo"] for p in report(root, True)["frequency"]["per_package"]}
        check(pk[0]["blocked_by"] == ["no_turbo", "max_freq_cap", "max_perf_pct",
                                      "powersave_epp_power"], f"pkg0 blockers {pk[0]}")
        check(pk[1]["blocked_by"] == ["no_turbo", "max_perf_pct"], f"pkg1 blockers {pk[1]}")
        check(pk[0]["boost"] is False and pk[0]["max_turbo_mhz"] is None and
              pk[0]["max_turbo_source"] == "hidden by no_turbo=1", f"pkg0 turbo {pk[0]}")
        check(pk[0]["max_nonturbo_mhz"] == 2400 and pk[0]["base_mhz"] == 2400 and
              pk[0]["scaling_max_lowest_mhz"] == 2000, f"pkg0 figures {pk[0]}")
        text = report(root, False)
        for want in ("  pkg0 turbo blocked: intel_pstate/no_turbo is 1\n",
                     "  pkg0 turbo blocked: governor powersave with EPP \"power\"\n",
                     "  pkg1 turbo blocked: intel_pstate/max_perf_pct is below 100\n"):
            check(want in text, f"text lacks {want!r}")
        check("pkg1 turbo blocked: scaling_max_freq" not in text, "pkg1 has no cap below base")
        check(all(len(l) <= 100 for l in text.splitlines()), "text over 100 columns")

        root = with_faults(tmp, "amd-epyc", [f"{CPU}/cpufreq/boost =0"])
        t = report(root, True)["frequency"]["per_package"][0]["turbo"]
        check(t["boost"] is False and t["boost_source"] == "cpufreq/boost" and
              t["blocked_by"] == ["boost_off"], f"amd-epyc boost off {t}")
        check(t["base_mhz"] == 2500 and t["max_turbo_mhz"] is None, f"amd-epyc figures {t}")

        # 6.7+ per-policy boost: one policy off while the global switch is on
        root = with_faults(tmp, "amd-epyc", [f"{CPU}/cpu3/cpufreq/boost =0"], "b")
        t = report(root, True)["frequency"]["per_package"][0]["turbo"]
        check(t["boost"] is True and t["blocked_by"] == ["policy_boost_off"],
              f"amd-epyc policy boost off {t}")
        check("  pkg0 turbo blocked: a CPU's cpufreq policy has boost 0\n" in report(root, False),
              "text lacks the policy boost line")
    print(f"turbo_blocked: {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
