#!/bin/bash
# Live check of watt's GPU readings on a machine with an NVIDIA GPU.
#
# usage: tests/gpu/live.sh [WATT]    (default $WATT, else build/watt)
#
# 1. watt report --json --interval 10 and nvidia-smi's power.draw sampled
#    every 0.5 s over the same 10 s: per GPU (matched by PCI address) the
#    means agree within 5 %.
# 2. With python3 and torch or cupy importable: a matrix-multiply load on
#    GPU 0; watt's GPU 0 power rises above its idle figure, and `watt top
#    --json` attributes GPU use to the load's pid (where top has per-process
#    GPU fields: helper "gpuattr"'s part; else that part is skipped).
# 3. tests/gpu/limit_roundtrip.sh, where it exists, with the same watt.
#
# Exits 77 ("skip: ...") where there is no NVIDIA GPU, 1 on a failure.
set -u
WATT=${1:-${WATT:-build/watt}}
HERE=$(cd "$(dirname "$0")" && pwd)
TMP=$(mktemp -d /tmp/watt-gpu-live.XXXXXX)
LOAD_PID=
cleanup() {
    [ -n "$LOAD_PID" ] && kill "$LOAD_PID" 2>/dev/null && wait "$LOAD_PID" 2>/dev/null
    rm -rf "$TMP"
}
trap cleanup EXIT
FAILS=0
ok() { echo "ok   $*"; }
fail() { echo "FAIL $*"; FAILS=$((FAILS + 1)); }

if ! command -v nvidia-smi >/dev/null 2>&1; then
    echo "skip: no NVIDIA GPU: nvidia-smi not found"
    exit 77
fi
if ! nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
    echo "skip: no NVIDIA GPU: nvidia-smi lists none"
    exit 77
fi
if [ ! -x "$WATT" ]; then
    echo "FAIL no watt binary at $WATT"
    exit 1
fi

# Mean power per GPU from nvidia-smi and watt over the same window.
# $1: seconds; writes $TMP/smi.csv and $TMP/report.json
measure() {
    local secs=$1
    nvidia-smi --query-gpu=pci.bus_id,power.draw --format=csv,noheader,nounits -lms 500 \
        >"$TMP/smi.csv" 2>"$TMP/smi.err" &
    local smi=$!
    "$WATT" report --json --interval "$secs" >"$TMP/report.json" 2>"$TMP/report.err"
    local rc=$?
    kill "$smi" 2>/dev/null
    wait "$smi" 2>/dev/null
    return $rc
}

# Prints "PDEV SMI_MEAN WATT_W" per GPU nvidia-smi listed.
compare() {
    python3 - "$TMP/smi.csv" "$TMP/report.json" <<'PY'
import json, sys
sums = {}
for line in open(sys.argv[1]):
    parts = [p.strip() for p in line.split(",")]
    if len(parts) != 2:
        continue
    try:
        w = float(parts[1])
    except ValueError:
        continue  # "[N/A]"
    dom, rest = parts[0].split(":", 1)
    pdev = ("%04x:" % (int(dom, 16) & 0xFFFF) + rest).lower()
    s = sums.setdefault(pdev, [0.0, 0])
    s[0] += w
    s[1] += 1
doc = json.load(open(sys.argv[2]))
gpus = {d["pdev"]: d for d in doc["gpus"]["devices"] if d.get("pdev")}
for pdev, (tot, n) in sorted(sums.items()):
    d = gpus.get(pdev)
    w = d["watts"] if d and d["watts"] is not None else float("nan")
    print(pdev, "%.2f" % (tot / n), "%.2f" % w, (d or {}).get("watts_from") or "-")
PY
}

# 1. idle (or whatever runs now): means within 5 %
if measure 10; then
    ok "watt report --json --interval 10"
    compare >"$TMP/cmp" || fail "comparing: $(tail -1 "$TMP/cmp")"
    [ -s "$TMP/cmp" ] || fail "no GPU in nvidia-smi's samples or watt's report"
    while read -r pdev smi w from; do
        if python3 -c "import sys; s,w=float(sys.argv[1]),float(sys.argv[2]); sys.exit(0 if w==w and abs(w-s) <= 0.05*s else 1)" "$smi" "$w"; then
            ok "GPU $pdev: watt $w W ($from), nvidia-smi mean $smi W: within 5 %"
        else
            fail "GPU $pdev: watt $w W ($from), nvidia-smi mean $smi W: not within 5 %"
        fi
    done <"$TMP/cmp"
    echo "# idle: $(tr '\n' ';' <"$TMP/cmp")"
else
    fail "watt report --json --interval 10: $(tail -3 "$TMP/report.err")"
fi

# 2. a load, where torch or cupy can make one
LOADER=
if python3 -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
    LOADER=torch
elif python3 -c "import cupy; cupy.cuda.runtime.getDeviceCount()" 2>/dev/null; then
    LOADER=cupy
fi
if [ -z "$LOADER" ]; then
    echo "skip load part: neither torch (with CUDA) nor cupy importable by python3"
else
    python3 - "$LOADER" >"$TMP/load.out" 2>&1 <<'PY' &
import sys, time
end = time.time() + 40
if sys.argv[1] == "torch":
    import torch
    a = torch.randn(8192, 8192, device="cuda:0")
    while time.time() < end:
        b = a @ a
        torch.cuda.synchronize()
else:
    import cupy
    with cupy.cuda.Device(0):
        a = cupy.random.rand(8192, 8192, dtype=cupy.float32)
        while time.time() < end:
            b = a @ a
            cupy.cuda.Stream.null.synchronize()
PY
    LOAD_PID=$!
    sleep 5
    idle0=$(head -1 "$TMP/cmp" 2>/dev/null | awk '{print $3}')
    if measure 10; then
        compare >"$TMP/cmp_load"
        read -r pdev smi w from <"$TMP/cmp_load"
        echo "# load ($LOADER, pid $LOAD_PID): $(tr '\n' ';' <"$TMP/cmp_load")"
        if python3 -c "import sys; s,w=float(sys.argv[1]),float(sys.argv[2]); sys.exit(0 if w==w and abs(w-s) <= 0.05*s else 1)" "$smi" "$w"; then
            ok "loaded GPU $pdev: watt $w W, nvidia-smi mean $smi W: within 5 %"
        else
            fail "loaded GPU $pdev: watt $w W, nvidia-smi mean $smi W: not within 5 %"
        fi
        if [ -n "$idle0" ] && python3 -c "import sys; sys.exit(0 if float(sys.argv[2]) > float(sys.argv[1]) * 1.2 else 1)" "$idle0" "$w"; then
            ok "loaded GPU $pdev draws more than idle ($idle0 W -> $w W)"
        else
            fail "loaded GPU $pdev: $w W is not above idle $idle0 W by 20 %"
        fi
    else
        fail "watt report under load: $(tail -3 "$TMP/report.err")"
    fi
    if "$WATT" top --once --json --interval 2 >"$TMP/top.json" 2>"$TMP/top.err"; then
        python3 - "$TMP/top.json" "$LOAD_PID" <<'PY'
import json, sys
doc, pid = json.load(open(sys.argv[1])), int(sys.argv[2])
def walk(x):
    if isinstance(x, dict):
        yield x
        for v in x.values():
            yield from walk(v)
    elif isinstance(x, list):
        for v in x:
            yield from walk(v)
gpu_rows = [d for d in walk(doc) if any("gpu" in k for k in d)]
if not gpu_rows:
    print("skip attribution part: watt top --json has no GPU fields (per-process GPU attribution not built)")
    sys.exit(0)
mine = [d for d in gpu_rows if d.get("pid") == pid]
used = [d for d in mine if any("gpu" in k and isinstance(v, (int, float)) and v > 0
                               for k, v in d.items())]
print(("ok   " if used else "FAIL ") + "watt top --json attributes GPU use to the load's pid %d: %s"
      % (pid, json.dumps(mine)[:300]))
sys.exit(0 if used else 1)
PY
        [ $? -eq 0 ] || FAILS=$((FAILS + 1))
    else
        fail "watt top --once --json: $(tail -3 "$TMP/top.err")"
    fi
    kill "$LOAD_PID" 2>/dev/null
    wait "$LOAD_PID" 2>/dev/null
    LOAD_PID=
fi

# 3. the power-limit round trip, where helper "gpuknob" wrote it
if [ -f "$HERE/limit_roundtrip.sh" ]; then
    bash "$HERE/limit_roundtrip.sh" "$WATT" 2>&1 | sed 's/^/  limit_roundtrip: /' | tee "$TMP/limit.out"
    rc=${PIPESTATUS[0]}
    if [ "$rc" -eq 0 ]; then
        ok "limit_roundtrip.sh"
    elif [ "$rc" -eq 77 ]; then
        why=$(sed -n 's/^  limit_roundtrip: [Ss][Kk][Ii][Pp]:* *//p' "$TMP/limit.out" | tail -1)
        echo "skip limit part: limit_roundtrip.sh: ${why:-skipped}"
    else
        fail "limit_roundtrip.sh exited $rc"
    fi
else
    echo "skip limit part: tests/gpu/limit_roundtrip.sh not in this tree"
fi

[ $FAILS -eq 0 ] && echo "passed: 0 failures" || echo "FAILED: $FAILS failures"
[ $FAILS -eq 0 ]
