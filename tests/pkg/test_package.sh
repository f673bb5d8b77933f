#!/bin/bash
# The Debian package, built and installed as a user would (issue 16):
#
#  1. builds watt and watt-fleet with `dpkg-buildpackage -us -uc -b`
#     (DEB_BUILD_OPTIONS=nocheck) in a copy of this tree outside it, so the
#     clone stays clean; a file paths.md agreed on that meson does not
#     install fails the build (debian/*.install, dh_missing) and is named;
#  2. runs lintian on the result and fails on any error;
#  3. makes a fresh Debian 12 root (debootstrap --variant=minbase from the
#     archive in this machine's apt sources, with man-db and systemd for the
#     checks), cached as a tarball under /var/cache/watt-ci/ so a second run
#     skips the download, apt's downloaded .debs and lists cached next to it;
#  4. installs both .debs there with apt, which resolves their dependencies;
#  5. in that root (chroot; /proc and /sys bound read-only where the kernel
#     allows, /dev bound): every agreed path is installed; the binary holds
#     no path of the build tree; `watt report` runs; `watt fleet sim` finds
#     its day in /usr/share/watt; `watt agent` with no config file starts
#     and answers /metrics on 127.0.0.1 (a free port); `systemd-analyze
#     verify` passes on every installed unit; `man watt` renders.
#
# Prints "ok: ...", "FAIL: ..." or "MISSING: ..." (an agreed file that is
# not there, e.g. a man page not merged yet) per check, the time of each
# phase, and exits 0 only when every check passed. Needs root (debootstrap,
# chroot, mount) and the network to the archive on a cold cache: exit 77
# (skip) without root. WATT_CI_CACHE overrides /var/cache/watt-ci;
# WATT_PKG_KEEP=1 keeps the work folder.
set -uo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
CACHE=${WATT_CI_CACHE:-/var/cache/watt-ci}
SUITE=bookworm
INCLUDE=man-db,systemd

if [ "$(id -u)" -ne 0 ]; then
    echo "skip: needs root (debootstrap, chroot, mount)"
    exit 77
fi
for tool in dpkg-buildpackage lintian debootstrap chroot git; do
    command -v "$tool" >/dev/null || {
        echo "FAIL: $tool is not installed (tools/setup.sh --test installs it)"
        exit 1
    }
done

failed=0
ok() { echo "ok: $*"; }
bad() {
    echo "FAIL: $*"
    failed=1
}
missing() {
    echo "MISSING: $*"
    failed=1
}
now() { date +%s.%N; }
since() { awk -v a="$(now)" -v b="$1" 'BEGIN { printf "%.1f", a - b }'; }
T0=$(now)
timings=()

WORK=$(mktemp -d /var/tmp/watt-pkg.XXXXXX)
R=$WORK/root
AGENT_PID=
cleanup() {
    [ -n "$AGENT_PID" ] && kill "$AGENT_PID" 2>/dev/null && wait "$AGENT_PID" 2>/dev/null
    # Unmount everything under the root, deepest first, before any rm.
    if [ -d "$R" ]; then
        findmnt -rn -o TARGET | grep -F "$R/" | sort -r | while read -r m; do
            umount "$m" 2>/dev/null || umount -l "$m"
        done
    fi
    if [ "${WATT_PKG_KEEP:-0}" = 1 ]; then
        echo "kept $WORK"
    elif findmnt -rn -o TARGET | grep -qF "$WORK"; then
        echo "left $WORK: something is still mounted under it"
    else
        rm -rf --one-file-system "$WORK"
    fi
}
trap cleanup EXIT
# a killed run (a timeout) still unmounts: /dev is bound read-write
trap 'exit 143' TERM
trap 'exit 130' INT

# ---- 1. the package ------------------------------------------------------
t=$(now)
mkdir "$WORK/src"
(cd "$SRC" && git ls-files -z --cached --others --exclude-standard |
    tar --null --ignore-failed-read -T - -cf -) | tar -x -C "$WORK/src"
# noautodbgsym: the -dbgsym packages are neither installed nor linted here
if (cd "$WORK/src" && DEB_BUILD_OPTIONS="nocheck noautodbgsym parallel=$(nproc)" \
    dpkg-buildpackage -us -uc -b) >"$WORK/build.log" 2>&1; then
    ok "dpkg-buildpackage -us -uc -b built $(cd "$WORK" && echo *.deb)"
else
    # dh_install names each listed path that meson did not install
    grep -o 'Cannot find (any matches for) "[^"]*"' "$WORK/build.log" | sed 's/.*for) //' |
        while read -r p; do missing "$p is not installed by meson (debian/*.install, paths.md)"; done
    grep -E '^dh_missing: warning: ' "$WORK/build.log" | sed 's/^/    /'
    tail -n 25 "$WORK/build.log" | sed 's/^/    | /'
    bad "dpkg-buildpackage failed (log above)"
    exit 1
fi
timings+=("package build $(since "$t") s")
WATT_DEB=$(echo "$WORK"/watt_*.deb)
FLEET_DEB=$(echo "$WORK"/watt-fleet_*.deb)

# ---- 2. lintian ----------------------------------------------------------
t=$(now)
lintian --fail-on error --info "$WATT_DEB" "$FLEET_DEB" >"$WORK/lintian.log" 2>&1
lrc=$?
grep -E '^[EW]: ' "$WORK/lintian.log" | grep -v '^N:' | sed 's/^/    /'
if [ $lrc -eq 0 ]; then
    ok "lintian: no errors ($(grep -c '^W: ' "$WORK/lintian.log") warnings)"
else
    bad "lintian: $(grep -c '^E: ' "$WORK/lintian.log") errors (exit $lrc)"
fi
timings+=("lintian $(since "$t") s")

# ---- 3. a fresh Debian 12 root -------------------------------------------
# The archive this machine installs from: the first URI of its deb822
# sources, else of sources.list.
mirror=$(sed -n 's/^URIs:[[:space:]]*\([^[:space:]]*\).*/\1/p' /etc/apt/sources.list.d/*.sources 2>/dev/null |
    grep -v security | head -n 1)
[ -n "$mirror" ] || mirror=$(awk '$1 == "deb" && $0 !~ /security/ {print $2; exit}' /etc/apt/sources.list 2>/dev/null)
[ -n "$mirror" ] || mirror=http://deb.debian.org/debian
key=$(printf '%s\n' "$SUITE" minbase "$mirror" "$INCLUDE" v1 | sha256sum | cut -c1-12)
tarball=$CACHE/$SUITE-minbase-$key.tar
mkdir -p "$CACHE/apt-archives/partial" "$CACHE/apt-lists/partial" "$R"
t=$(now)
if [ -f "$tarball" ]; then
    tar -xpf "$tarball" --numeric-owner -C "$R" && how="cached $tarball" ||
        { bad "cannot unpack $tarball"; exit 1; }
else
    if debootstrap --variant=minbase --include="$INCLUDE" "$SUITE" "$R" "$mirror" \
        >"$WORK/debootstrap.log" 2>&1; then
        chroot "$R" apt-get clean
        tar -cpf "$tarball.tmp" --numeric-owner -C "$R" . && mv "$tarball.tmp" "$tarball"
        how="cold, from $mirror; cached as $tarball"
    else
        tail -n 20 "$WORK/debootstrap.log" | sed 's/^/    | /'
        bad "debootstrap $SUITE from $mirror failed"
        exit 1
    fi
fi
ok "Debian 12 root ($how)"
timings+=("root ($( [ "${how#cold}" != "$how" ] && echo cold || echo cached)) $(since "$t") s")

# The same archives as this machine (updates and security too: the .debs
# were linked against its libraries), its resolver, no service starts.
if ls /etc/apt/sources.list.d/*.sources >/dev/null 2>&1; then
    rm -f "$R/etc/apt/sources.list"
    cp /etc/apt/sources.list.d/*.sources "$R/etc/apt/sources.list.d/"
fi
cp -L /etc/resolv.conf "$R/etc/resolv.conf"
printf '#!/bin/sh\nexit 101\n' >"$R/usr/sbin/policy-rc.d"
chmod 755 "$R/usr/sbin/policy-rc.d"

mount --bind /dev "$R/dev"
notes=()
for fs in proc sys; do
    mount --bind "/$fs" "$R/$fs" || { bad "cannot bind /$fs into the root"; exit 1; }
    mount -o remount,bind,ro "$R/$fs" 2>/dev/null || notes+=("/$fs bound read-write (read-only refused here)")
done
# apt's downloads and its package lists are kept between runs (a second
# `apt-get update` fetches only what changed)
mount --bind "$CACHE/apt-archives" "$R/var/cache/apt/archives"
mount --bind "$CACHE/apt-lists" "$R/var/lib/apt/lists"
[ ${#notes[@]} -eq 0 ] || echo "note: ${notes[*]}"
ROOT_ENV=(env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 HOME=/root)
in_root() { chroot "$R" "${ROOT_ENV[@]}" "$@"; }

# ---- 4. install with apt -------------------------------------------------
t=$(now)
mkdir -p "$R/tmp/debs"
cp "$WATT_DEB" "$FLEET_DEB" "$R/tmp/debs/"
if in_root apt-get update -qq >"$WORK/apt.log" 2>&1 &&
    in_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
        "/tmp/debs/$(basename "$WATT_DEB")" "/tmp/debs/$(basename "$FLEET_DEB")" >>"$WORK/apt.log" 2>&1; then
    ok "apt installed watt and watt-fleet with their dependencies ($(grep -c '^Setting up' "$WORK/apt.log") packages set up)"
else
    tail -n 25 "$WORK/apt.log" | sed 's/^/    | /'
    bad "apt-get install of the .debs failed"
    exit 1
fi
timings+=("apt install $(since "$t") s")

# ---- 5. in the root ------------------------------------------------------
t=$(now)
# Every path agreed in paths.md, and every docs/*.md of this tree.
agreed=(/usr/bin/watt /usr/libexec/watt/watt-fleet
    /lib/systemd/system/watt-agent.service /lib/systemd/system/watt-tune@.service
    /usr/share/watt/models/specpower-2023.ini /usr/share/watt/models/seed-2011.ini
    /usr/share/watt/models/vm-vcpu.ini /usr/share/watt/planetlab/20110303
    /usr/share/doc/watt/examples/agent.ini.example /usr/share/doc/watt/examples/fleet.ini.example
    /usr/share/bash-completion/completions/watt /usr/share/zsh/vendor-completions/_watt)
for m in watt watt-report watt-top watt-snapshot watt-fleet watt-agent watt-ctl watt-tune watt-restore watt-model; do
    agreed+=("/usr/share/man/man1/$m.1.gz")
done
for m in watt-profiles watt-agent.ini fleet.ini; do agreed+=("/usr/share/man/man5/$m.5.gz"); done
for f in "$SRC"/docs/*.md; do agreed+=("/usr/share/doc/watt/$(basename "$f")"); done
n_agreed=0
for p in "${agreed[@]}"; do
    # dh_compress gzips documentation over 4 KiB
    if [ -e "$R$p" ] || [ -e "$R$p.gz" ]; then
        n_agreed=$((n_agreed + 1))
    else
        missing "$p is not in the installed packages"
    fi
done
for d in prometheus grafana; do
    if [ -n "$(ls -A "$R/usr/share/doc/watt/examples/$d" 2>/dev/null)" ]; then
        n_agreed=$((n_agreed + 1))
    else
        missing "/usr/share/doc/watt/examples/$d/ (paths.md: the scrape config, rules, dashboard)"
    fi
done
echo "    $n_agreed of $((${#agreed[@]} + 2)) agreed paths installed"

# No path of the build tree in the installed binaries (WATT_SOURCE_DATADIR
# was one): they read only what was installed.
for b in /usr/bin/watt /usr/libexec/watt/watt-fleet; do
    [ -e "$R$b" ] || continue
    if grep -qaF "$WORK/src" "$R$b"; then
        bad "$b holds a path of the build tree ($(grep -aoF "$WORK/src" "$R$b" | head -n 1)...)"
    else
        ok "$b holds no path of the build tree"
    fi
done
if dpkg-deb -c "$WATT_DEB" | grep -q ' \./usr/local'; then
    bad "watt installs under /usr/local"
fi

if in_root watt report >"$WORK/report.out" 2>"$WORK/report.err" && [ -s "$WORK/report.out" ]; then
    ok "watt report runs ($(wc -l <"$WORK/report.out") lines)"
else
    sed 's/^/    | /' "$WORK/report.err" | tail -n 10
    bad "watt report failed in the root"
fi

# the default day, from /usr/share/watt (no WATT_DATADIR in env -i)
if in_root watt fleet sim --quiet --json >"$WORK/sim.json" 2>"$WORK/sim.err" &&
    grep -q '/usr/share/watt/planetlab/20110303' "$WORK/sim.json"; then
    ok "watt fleet sim runs the installed day /usr/share/watt/planetlab/20110303"
else
    sed 's/^/    | /' "$WORK/sim.err" | tail -n 5
    bad "watt fleet sim did not run the installed default day"
fi

# wait_metrics PORT PID: the number of watt_ samples once /metrics answers;
# nothing (status 1) when PID exited first or nothing answered in 60 s.
wait_metrics() {
    python3 - "$1" "$2" <<'EOF'
import os, sys, time, urllib.request
port, pid = sys.argv[1], int(sys.argv[2])
# Not a timed assertion: a start that has not answered in 60 s, or an
# agent that exited, is a failure; the loop ends at the first answer.
for _ in range(600):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
            body = r.read().decode()
            if r.status == 200 and "watt_" in body:
                print(sum(1 for l in body.splitlines() if l.startswith("watt_")))
                sys.exit(0)
    except OSError:
        pass
    try:
        os.kill(pid, 0)
    except OSError:
        sys.exit(1)
    time.sleep(0.1)
sys.exit(1)
EOF
}

# The agent with no config file: built-in defaults, loopback. /run/watt is
# what the unit's RuntimeDirectory= makes (its control socket).
if [ -e "$R/etc/watt/agent.ini" ]; then
    bad "/etc/watt/agent.ini exists after install: the no-config start is not tested"
fi
mkdir -p -m 0700 "$R/run/watt"
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
# chroot itself, not in_root: with &, a function runs in a subshell whose
# kill would leave the agent running; chroot, env, setpriv and unit_seccomp
# each exec the next, so $! is the agent
chroot "$R" "${ROOT_ENV[@]}" watt agent --listen "127.0.0.1:$port" >"$WORK/agent.out" 2>"$WORK/agent.err" &
AGENT_PID=$!
metrics=$(wait_metrics "$port" "$AGENT_PID")
if [ -n "$metrics" ]; then
    ok "watt agent with no config answers /metrics on 127.0.0.1:$port ($metrics watt_ samples)"
else
    sed 's/^/    | /' "$WORK/agent.err" | tail -n 10
    bad "watt agent --listen 127.0.0.1:$port (no config file) did not answer /metrics"
fi
kill "$AGENT_PID" 2>/dev/null
wait "$AGENT_PID" 2>/dev/null
AGENT_PID=

# The installed unit's own ExecStart, run in the root under the installed
# unit's SystemCallFilter=, SystemCallErrorNumber=, RestrictAddressFamilies=
# and MemoryDenyWriteExecute= (emulated with libseccomp by
# tests/helpers/unit_seccomp, groups expanded by the root's own
# systemd-analyze: PID 1 is not systemd here) and its capability bounding
# set (setpriv). Only --listen is added, for a free port.
SECCOMP=${WATT_UNIT_SECCOMP:-build/tests/helpers/unit_seccomp}
unit=/lib/systemd/system/watt-agent.service
if [ ! -x "$SECCOMP" ]; then
    bad "$SECCOMP is not built: the unit's filter cannot be applied (ninja -C build)"
elif [ ! -e "$R$unit" ]; then
    missing "$unit is not installed"
else
    cp "$SECCOMP" "$R/tmp/unit_seccomp"
    read -r -a exec_start < <(sed -n 's/^ExecStart=[-@:+!]*//p' "$R$unit" | tail -n 1)
    caps=$(sed -n 's/^CapabilityBoundingSet=//p' "$R$unit" | tail -n 1)
    capspec=-all
    for c in $caps; do
        c=${c,,}
        capspec+=",+${c#cap_}"
    done
    port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    chroot "$R" "${ROOT_ENV[@]}" setpriv --bounding-set "$capspec" /tmp/unit_seccomp "$unit" -- \
        "${exec_start[@]}" --listen "127.0.0.1:$port" >"$WORK/unit.out" 2>"$WORK/unit.err" &
    AGENT_PID=$!
    metrics=$(wait_metrics "$port" "$AGENT_PID")
    if [ -n "$metrics" ]; then
        filt=$(grep -m1 '^unit_seccomp: allow-list' "$WORK/unit.err" || true)
        ok "the unit's ExecStart (${exec_start[*]}) under its own filter answers /metrics ($metrics watt_ samples; ${filt#unit_seccomp: })"
    else
        sed 's/^/    | /' "$WORK/unit.err" | tail -n 10
        bad "the unit's ExecStart under its own filter did not answer /metrics"
    fi
    kill "$AGENT_PID" 2>/dev/null
    wait "$AGENT_PID" 2>/dev/null
    AGENT_PID=
fi

# Every unit the packages install; a template is verified as an instance.
units=$(in_root dpkg -L watt watt-fleet | grep -E '/systemd/system/[^/]+\.(service|socket|timer|path)$')
if [ -z "$units" ]; then
    missing "no systemd unit installed (paths.md: watt-agent.service, watt-tune@.service)"
fi
for u in $units; do
    name=$(basename "$u")
    target=$u
    if [[ $name == *@.* ]]; then
        inst=${name/@./@verify.}
        ln -sf "$u" "$R/tmp/$inst"
        target=/tmp/$inst
    fi
    out=$(in_root systemd-analyze verify "$target" 2>&1)
    vrc=$?
    # verify exits 0 on warnings (an unknown key, a bad value): those fail too
    warn=$(echo "$out" | grep -F -e "$name" -e "${target##*/}" -e watt || true)
    if [ $vrc -eq 0 ] && [ -z "$warn" ]; then
        ok "systemd-analyze verify $name"
    else
        echo "$out" | sed 's/^/    | /'
        bad "systemd-analyze verify $name (exit $vrc)"
    fi
done

if [ -e "$R/usr/share/man/man1/watt.1.gz" ] || [ -e "$R/usr/share/man/man1/watt.1" ]; then
    if in_root env MANWIDTH=80 man -P cat watt >"$WORK/man.out" 2>"$WORK/man.err" &&
        grep -q '^NAME' "$WORK/man.out"; then
        ok "man watt renders ($(wc -l <"$WORK/man.out") lines)"
    else
        sed 's/^/    | /' "$WORK/man.err" | tail -n 5
        bad "man watt does not render"
    fi
else
    missing "man watt: /usr/share/man/man1/watt.1.gz is not installed"
fi
timings+=("checks in the root $(since "$t") s")
timings+=("total $(since "$T0") s")

echo "times: $(
    IFS=';'
    echo "${timings[*]}"
)" | sed 's/;/; /g'
[ $failed -eq 0 ] && echo "package test passed" || echo "package test FAILED"
exit $failed
