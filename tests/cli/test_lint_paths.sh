#!/bin/bash
# One door to the kernel: no "/sys/", "/proc/" or "/dev/" string literal
# may appear in src/ outside src/host/ (DESIGN.md). Fails naming each one.
set -u
cd "${WATT_SRCDIR:?}" || exit 1
hits=$(grep -rnE '"/(sys|proc|dev)/' src --include='*.c' --include='*.h' | grep -v '^src/host/')
if [ -n "$hits" ]; then
    echo "kernel path literals outside src/host/:"
    echo "$hits"
    exit 1
fi
# The check itself must be able to fail: a literal in src/host/ is found.
grep -rqE '"/proc/' src/host || { echo "lint self-check: expected a literal in src/host"; exit 1; }
echo "no kernel path literal outside src/host/"
