#!/bin/bash
# The whole test suite: the normal build, the same suite again under
# AddressSanitizer + UndefinedBehaviorSanitizer, the lean build's link check
# and the clang-format check. The last line is "N passed, N failed, N
# skipped" (meson tests of the builds plus the two checks). A test that
# skips (exit 77) is counted apart; in CI (CI=true) it counts as failed
# unless tests/skip-allow.txt allows its reason (tools/testcount.py).
set -uo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh --test || { echo "0 passed, 1 failed, 0 skipped"; exit 1; }
# A build first configured by `tools/setup.sh` lacked cmocka: look again.
meson setup --reconfigure build >/dev/null || { echo "0 passed, 1 failed, 0 skipped"; exit 1; }

passed=0
failed=0
skipped=0
count() { # $1: build dir
    local log="$1/meson-logs/testlog.json"
    [ -f "$log" ] || { failed=$((failed + 1)); return; }
    local p f s
    read -r p f s < <(python3 tools/testcount.py tests/skip-allow.txt "$log" | tail -n 1)
    [ -n "$s" ] || { failed=$((failed + 1)); return; }
    passed=$((passed + p))
    failed=$((failed + f))
    skipped=$((skipped + s))
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

# The code that runs threads over shared state: the fleet controller (its
# journal, parallel migrations on the exec engine: test_fleet_journal runs
# 8 at once) and the exec engine. Only these targets are built (~1 min on
# 2 cores); a data race fails the test (halt_on_error).
echo "== fleet controller tests under -Db_sanitize=thread"
tsan_tests=(fleet_control fleet_journal fx_exec)
if [ ! -f build-tsan/build.ninja ]; then
    meson setup build-tsan -Db_sanitize=thread --buildtype=debug -Dwerror=true >/dev/null
fi
if ninja -C build-tsan "${tsan_tests[@]/#/tests/unit/test_}" >/dev/null; then
    TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
        meson test -C build-tsan --no-rebuild --print-errorlogs --num-processes 2 \
        --suite unit "${tsan_tests[@]}"
    count build-tsan
else
    echo "thread sanitizer build failed"
    failed=$((failed + 1))
fi

# The lean build: no fleet engines, no tests (meson_options.txt). It must
# configure and build without libvirt, libfreeipmi and cmocka, and its
# watt must link neither library (issue 15: the agent's RSS). One check.
echo "== lean build (-Dfleet=disabled -Dtests=disabled)"
if [ ! -f build-lean/build.ninja ]; then
    meson setup build-lean -Dfleet=disabled -Dtests=disabled -Dwerror=true >/dev/null
fi
if ninja -C build-lean >/dev/null && [ -x build-lean/watt ] && [ ! -e build-lean/watt-fleet ]; then
    heavy=$(ldd build-lean/watt | grep -E 'libvirt|libfreeipmi' || true)
    if [ -z "$heavy" ]; then
        echo "build-lean/watt links neither libvirt nor libfreeipmi"
        passed=$((passed + 1))
    else
        echo "build-lean/watt links: $heavy"
        failed=$((failed + 1))
    fi
else
    echo "lean build failed"
    failed=$((failed + 1))
fi

# The Debian package (tests/pkg/test_package.sh): built, linted, installed
# with apt into a fresh Debian 12 root (cached under /var/cache/watt-ci)
# and run there. One check; ~2 min on 2 cores with a warm cache (+~4 min cold).
echo "== package (build, lintian, install into a Debian 12 root)"
tests/pkg/test_package.sh
case $? in
0) passed=$((passed + 1)) ;;
77) skipped=$((skipped + 1)) ;;
*) failed=$((failed + 1)) ;;
esac

echo "== clang-format"
bad=$(git ls-files '*.c' '*.h' | xargs clang-format --dry-run 2>&1 | grep -c warning || true)
if [ "$bad" = "0" ]; then
    passed=$((passed + 1))
else
    git ls-files '*.c' '*.h' | xargs clang-format --dry-run 2>&1 | grep warning | cut -d: -f1 | sort -u
    failed=$((failed + 1))
fi

echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
