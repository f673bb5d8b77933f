#!/bin/bash
# The NVML power limit on a real NVIDIA machine (docs/gpu-knobs.md): read
# GPU 0's limit and range with nvidia-smi, `watt tune` a profile that
# lowers it by 10 % (within the range), check nvidia-smi shows the new
# limit, `watt restore`, check the old one is back. Called by
# tests/gpu/live.sh; exits 77 with its reason where it cannot run (no
# nvidia-smi, no NVIDIA GPU, not root: setting a limit needs root).
#
# usage: limit_roundtrip.sh [WATT]     (default: $WATT)
# It uses its own journal (var/lib/watt/limit-roundtrip.journal) and
# config dir, so an operator's journal and profiles are left alone; on any
# failure it restores, and as a last resort sets the limit back with
# nvidia-smi -pl.
set -u

WATT=${1:-${WATT:-}}
if [ -z "$WATT" ] || [ ! -x "$WATT" ]; then
    echo "usage: $0 WATT (or \$WATT): the watt binary" >&2
    exit 2
fi
skip() { echo "SKIP: $*"; exit 77; }
command -v nvidia-smi >/dev/null 2>&1 || skip "no nvidia-smi on this machine"
q=$(nvidia-smi --query-gpu=pci.bus_id,power.limit,power.min_limit,power.max_limit \
    --format=csv,noheader,nounits -i 0 2>&1) || skip "nvidia-smi sees no GPU: $q"
[ "$(id -u)" = 0 ] || skip "setting a power limit needs root (nvmlDeviceSetPowerManagementLimit)"

IFS=', ' read -r bus limit min max <<<"$q"
case "$limit" in
    '' | *N/A* | *Not*) skip "GPU 0 ($bus) reports no power limit ('$q')" ;;
esac
# 00000000:19:00.0 -> 0000:19:00.0, as [gpu] gpus takes it
pdev=$(echo "${bus: -12}" | tr 'A-F' 'a-f')
mw() { awk -v w="$1" 'BEGIN { printf "%d", w * 1000 + 0.5 }'; }
limit_mw=$(mw "$limit")
min_mw=$(mw "$min")
target=$(awk -v l="$limit" 'BEGIN { printf "%d", l * 0.9 }') # whole watts, 10 % lower
if [ "$(mw "$target")" -lt "$min_mw" ]; then
    skip "GPU 0's limit $limit W is within 10 % of its minimum $min W"
fi
echo "GPU 0 ($pdev): limit $limit W, range $min..$max W; tuning to $target W"

tmp=$(mktemp -d)
journal=var/lib/watt/limit-roundtrip.journal
mkdir -p "$tmp/profiles.d"
printf '[gpu]\npower_limit_w = %s\ngpus = %s\n' "$target" "$pdev" >"$tmp/profiles.d/limit-roundtrip.conf"
shown() { nvidia-smi --query-gpu=power.limit --format=csv,noheader,nounits -i 0 | tr -d ' '; }
fail=0
cleanup() {
    if [ "$(mw "$(shown)")" != "$limit_mw" ]; then
        "$WATT" restore --journal "$journal" >/dev/null 2>&1
        [ "$(mw "$(shown)")" = "$limit_mw" ] || nvidia-smi -i 0 -pl "$limit" >/dev/null 2>&1
    fi
    rm -rf "$tmp"
    rm -f "/$journal" "/$journal.lock"
}
trap cleanup EXIT

if ! "$WATT" tune limit-roundtrip --config-dir "$tmp" --journal "$journal"; then
    echo "FAIL watt tune limit-roundtrip"
    exit 1
fi
now=$(shown)
if [ "$(mw "$now")" = "$(mw "$target")" ]; then
    echo "ok   nvidia-smi shows $now W after watt tune (was $limit W)"
else
    echo "FAIL nvidia-smi shows $now W after watt tune, want $target W"
    fail=1
fi
"$WATT" tune --status --journal "$journal" | grep -q "nvml:" ||
    { echo "FAIL watt tune --status does not list the NVML limit"; fail=1; }
if ! "$WATT" restore --journal "$journal"; then
    echo "FAIL watt restore"
    fail=1
fi
now=$(shown)
if [ "$(mw "$now")" = "$limit_mw" ]; then
    echo "ok   nvidia-smi shows $now W after watt restore"
else
    echo "FAIL nvidia-smi shows $now W after watt restore, want $limit W"
    fail=1
fi
[ "$fail" = 0 ] && echo "passed" || echo "FAILED"
exit "$fail"
