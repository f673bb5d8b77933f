#!/bin/bash
# Bad input gets a clear error naming what and where, and a non-zero exit;
# bad sysfs values are absent with a reason, never a crash or a wrong number.
set -u
W=${WATT:?}
F=${WATT_FIXTURES:?}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
expect() { # expect EXIT_CODE PATTERN CMD...
    local code=$1 pat=$2; shift 2
    out=$("$@" 2>&1); rc=$?
    if [ $rc -ne "$code" ] || ! grep -qE -- "$pat" <<<"$out"; then
        echo "FAIL: '$*' gave rc=$rc, wanted $code and /$pat/:"; echo "$out" | head -5; fail=1
    fi
}
expect 2 "unknown verb 'frobnicate'" "$W" frobnicate
expect 2 "interval 'abc'" "$W" report --interval abc
expect 2 "interval '-1'" "$W" report --interval -1
expect 2 "pue '0.3'" "$W" report --pue 0.3
expect 1 "cannot open root '/nonexistent'" "$W" report --root /nonexistent
expect 1 "no sys/ or proc/" "$W" report --root "$tmp"
printf '[model]\nidle_base_w = lots\n' >"$tmp/bad.ini"
expect 2 "bad.ini:2: idle_base_w = 'lots'" "$W" report --model "$tmp/bad.ini"
expect 2 "cannot read model file $tmp/none.ini" "$W" report --model "$tmp/none.ini"
expect 0 "usage: watt report" "$W" report --help
expect 0 "usage: watt" "$W" --help

# A copy of a fixture with broken files: the report still runs, and names them.
src="$F/intel-2s"
[ -d "$src" ] || src="$F/node_exporter"
cp -a "$src" "$tmp/m"
cpu=$tmp/m/sys/devices/system/cpu
echo garbage >"$cpu/cpu1/cpufreq/scaling_cur_freq" 2>/dev/null
[ -d "$cpu/cpu0/cpuidle/state1" ] && : >"$cpu/cpu0/cpuidle/state1/usage"
{
    echo "sys/class/powercap/intel-rapl:0/energy_uj EACCES"
    echo "sys/devices/system/cpu/cpu0/cpuidle/state1/time =1 from=2"
} >"$tmp/m/watt-faults"
"$W" report --root "$tmp/m" --interval 1 --json >"$tmp/out.json" 2>"$tmp/err"; rc=$?
[ $rc -eq 0 ] || { echo "FAIL: report on a broken tree exited $rc"; tail -5 "$tmp/err"; fail=1; }
python3 - "$tmp/out.json" <<'PY' || fail=1
import json, sys
r = json.load(open(sys.argv[1]))
probs = r["problems"]
def has(where, what=None):
    return any(where in p["where"] and (what is None or what in (p["reason"] or "") or what == p["error"]) for p in probs)
assert has("intel-rapl:0/energy_uj", "EACCES"), probs
PY
# Hostile trees: a FIFO must not block, an absolute symlink must not reach
# the running machine, a NUL inside a value is garbage.
cp -a "$src" "$tmp/h"
rm -f "$tmp/h/watt-faults" "$tmp/h/proc/stat" "$tmp/h/proc/interrupts"
mkfifo "$tmp/h/proc/stat"
ln -s /proc/interrupts "$tmp/h/proc/interrupts"
printf '0-3\0,4-39\n' >"$tmp/h/sys/devices/system/cpu/online"
timeout 20 "$W" report --root "$tmp/h" --interval 0 --json >"$tmp/h.json" 2>"$tmp/err"; rc=$?
[ $rc -eq 0 ] || { echo "FAIL: hostile tree: exit $rc"; tail -3 "$tmp/err"; fail=1; }
python3 - "$tmp/h.json" <<'PY' || fail=1
import json, sys
r = json.load(open(sys.argv[1]))
where = {p["where"].split("/", 1)[-1] if "/" in p["where"] else p["where"]: p for p in r["problems"]}
probs = " ".join(p["where"] + " " + (p["error"] or "") + " " + p["reason"] for p in r["problems"])
assert "proc/stat" in probs, probs                        # the FIFO: no hang, named
unavail = " ".join(u["reason"] for u in r["unavailable"])
assert "leaves the recorded tree" in probs or "interrupts" in unavail, (probs, unavail)
assert "cpu/online" in probs, probs                       # the NUL: garbage, named
assert r["interrupts"] is None or not r["interrupts"].get("sources"), "read the live /proc/interrupts"
PY
# A cycle of slave links under the root partition must not explode.
blk=$(find "$tmp/h/sys/devices" -path '*/block/*' -name partition -printf '%h\n' 2>/dev/null | head -1)
if [ -n "$blk" ]; then
    mkdir -p "$blk/slaves"
    for i in $(seq 12); do ln -s "../../$(basename "$blk")" "$blk/slaves/s$i"; done
    timeout 20 "$W" report --root "$tmp/h" --interval 0 >/dev/null 2>&1 ||
        { echo "FAIL: a cycle of slave links hangs or crashes the report"; fail=1; }
fi
# malformed fault file
echo "sys/x NOTANERRNO" >"$tmp/m/watt-faults"
expect 1 "watt-faults: malformed" "$W" report --root "$tmp/m" --interval 0
exit $fail
