#!/bin/bash
# watt report on this machine's real /sys and /proc.
set -u
W=${WATT:?}
fail=0
check() { if ! grep -qE "$2" <<<"$1"; then echo "FAIL: $3"; fail=1; fi; }

out=$("$W" report --interval 0.2) || { echo "FAIL: watt report exited $?"; exit 1; }
echo "$out"
# Every line fits 100 columns.
long=$(awk 'length > 100' <<<"$out")
[ -z "$long" ] || { echo "FAIL: lines over 100 columns:"; echo "$long"; fail=1; }
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
"$W" report --interval 0.2 --json >"$tmp" || { echo "FAIL: --json exited $?"; exit 1; }
python3 - "$tmp" <<'PY' || fail=1
import json, sys, os
r = json.load(open(sys.argv[1]))
assert r["schema"] == "watt-report/2", r["schema"]
assert r["live"] is True
# The real cpuidle states of this machine.
names = [s["name"] for s in r["cstates"]["states"]]
real = []
base = "/sys/devices/system/cpu/cpu0/cpuidle"
if os.path.isdir(base):
    for d in sorted(os.listdir(base), key=lambda x: int(x[5:])):
        real.append(open(f"{base}/{d}/name").read().strip())
assert names == real, (names, real)
# The kernel's "none" (no cpuidle driver: a VM without haltpoll, idle=poll)
# is JSON null, as docs/report-json.md says: no driver, not one named "none".
drv = open("/sys/devices/system/cpu/cpuidle/current_driver").read().strip()
assert r["cstates"]["driver"] == (None if drv == "none" else drv), (r["cstates"]["driver"], drv)
online = open("/sys/devices/system/cpu/online").read().strip()
assert r["host"]["cpus_online"] == online, (r["host"]["cpus_online"], online)
# No meter here (no powercap, no hwmon power, no power PMU): estimated, and said so.
meters = os.path.isdir("/sys/class/powercap") and os.listdir("/sys/class/powercap")
if not meters and not os.path.isdir("/sys/bus/event_source/devices/power"):
    p = r["power"]
    assert p["measured"] is False, p
    assert p["source"].startswith("model"), p["source"]
# Package C-states: the cstate PMUs where the kernel has them (never in a
# VM: intel_cstate does not load under a hypervisor), else said so and
# every package row is the mean of its CPUs.
dev = "/sys/bus/event_source/devices/"
pkg_pmu = next((n for n in ("cstate_die", "cstate_pkg") if os.path.isdir(dev + n)), None)
if r["cstates"] is not None:
    assert r["cstates"]["package_pmu"]["pmu"] == pkg_pmu, (r["cstates"]["package_pmu"], pkg_pmu)
    if pkg_pmu is None:
        assert {p["source"] for p in r["cstates"]["per_package"]} <= {"mean of CPUs"}
if pkg_pmu is None and not os.path.isdir(dev + "cstate_core"):
    why = [u["reason"] for u in r["unavailable"] if u["sampler"] == "cstate"]
    assert why and "no cstate_core or cstate_pkg perf PMU" in why[0], r["unavailable"]
print("live JSON checks passed")
PY
if [ -d /sys/devices/system/cpu/cpu0/cpuidle ]; then
    for s in /sys/devices/system/cpu/cpu0/cpuidle/state*/name; do
        check "$out" "$(cat "$s")" "state $(cat "$s") missing from the text report"
    done
fi
if ! ls /sys/class/powercap/*/energy_uj >/dev/null 2>&1 && ! [ -d /sys/bus/event_source/devices/power ]; then
    check "$out" "estimated" "the report must say the power is estimated"
    check "$out" "no power meter" "the report must say no meter exists"
fi
# A process holding /dev/cpu_dma_latency is named while its request is in
# force; the request dies with the file (pm_qos_interface.rst), so nothing
# stays changed.
if [ -w /dev/cpu_dma_latency ]; then
    python3 - "$W" <<'PY' || fail=1
import os, struct, subprocess, sys
fd = os.open("/dev/cpu_dma_latency", os.O_RDWR)
os.write(fd, struct.pack("i", 7))
try:
    out = subprocess.run([sys.argv[1], "report", "--interval", "0", "--json"],
                         capture_output=True, text=True, check=True).stdout
finally:
    os.close(fd)
import json
lat = json.loads(out)["latency"]
assert lat["global"]["us"] <= 7, lat["global"]
assert any(h["pid"] == os.getpid() for h in lat["holders"]), lat["holders"]
print("holder found:", lat["holders"])
PY
fi
exit $fail
