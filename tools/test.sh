#!/bin/bash
# The whole test suite: the normal build, the same suite again under
# AddressSanitizer + UndefinedBehaviorSanitizer, and the clang-format check.
# The last line is "N passed, N failed" (meson tests of both builds plus
# the format check).
set -uo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh --test || { echo "0 passed, 1 failed"; exit 1; }
# A build first configured by `tools/setup.sh` lacked cmocka: look again.
meson setup --reconfigure build >/dev/null || { echo "0 passed, 1 failed"; exit 1; }

passed=0
failed=0
count() { # $1: build dir
    local log="$1/meson-logs/testlog.json"
    [ -f "$log" ] || { failed=$((failed + 1)); return; }
    local p f
    p=$(python3 -c 'import json,sys; print(sum(1 for l in open(sys.argv[1]) if json.loads(l)["result"] in ("OK","SKIP","EXPECTEDFAIL")))' "$log")
    f=$(python3 -c 'import json,sys; print(sum(1 for l in open(sys.argv[1]) if json.loads(l)["result"] not in ("OK","SKIP","EXPECTEDFAIL")))' "$log")
    passed=$((passed + p))
    failed=$((failed + f))
}

echo "== tests (gcc, debugoptimized)"
meson test -C build --print-errorlogs --num-processes 2
count build

echo "== tests under -Db_sanitize=address,undefined"
if [ ! -f build-asan/build.ninja ]; then
    meson setup build-asan -Db_sanitize=address,undefined -Db_lundef=false \
        --buildtype=debug -Dwerror=true >/dev/null
fi
if ninja -C build-asan >/dev/null; then
    ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
        meson test -C build-asan --print-errorlogs --num-processes 2
    count build-asan
else
    echo "sanitizer build failed"
    failed=$((failed + 1))
fi

echo "== clang-format"
bad=$(git ls-files '*.c' '*.h' | xargs clang-format --dry-run 2>&1 | grep -c warning || true)
if [ "$bad" = "0" ]; then
    passed=$((passed + 1))
else
    git ls-files '*.c' '*.h' | xargs clang-format --dry-run 2>&1 | grep warning | cut -d: -f1 | sort -u
    failed=$((failed + 1))
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
