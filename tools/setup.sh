#!/bin/bash
# Install what watt needs on Debian 12 (as root), then build it into
# build/. Idempotent: a second run only rebuilds what changed.
#   tools/setup.sh           build dependencies only
#   tools/setup.sh --test    also what the test suite needs
set -euo pipefail
cd "$(dirname "$0")/.."

# libc6-dev: gcc only recommends it, and recommends are not installed.
# libvirt-dev, libfreeipmi-dev: watt fleet run's executors (live migration, BMCs)
# clang, libbpf-dev, bpftool: the BPF wake-up counters (src/sense/bpf/; -Dbpf=auto
# builds without them, and wake-ups then come from the tracepoint ring)
pkgs=(gcc libc6-dev meson ninja-build pkg-config libinih-dev libarchive-dev libmicrohttpd-dev zlib1g-dev libncurses-dev
      libvirt-dev libfreeipmi-dev clang libbpf-dev bpftool)
if [ "${1:-}" = "--test" ]; then
    # prometheus: the agent's end-to-end test scrapes it with a real server
    # powertop: watt top is checked side by side with it; tmux drives the TUI test
    pkgs+=(libcmocka-dev python3 clang-format git prometheus prometheus-node-exporter wrk powertop tmux util-linux)
    # python3-jsonschema: every --json document is validated against schema/ (test_json_schema.py)
    pkgs+=(python3-jsonschema)
    # the fleet lab: three libvirt session daemons with TCG guests, simulated BMCs
    pkgs+=(libvirt-daemon libvirt-daemon-driver-qemu libvirt-clients qemu-system-x86 openipmi ipmitool passwd)
    # the man pages (scdoc builds them, man renders them) and the shell
    # completions driven for real (tests/cli/test_man.py, test_completion.py)
    pkgs+=(scdoc man-db bash-completion zsh)
    # the systemd units' test: systemd-analyze verify/security/syscall-filter,
    # and the unit's filter emulated with libseccomp (tests/helpers/unit_seccomp)
    pkgs+=(systemd libseccomp-dev)
    # the package test (tests/pkg/test_package.sh): build the .debs (debian/control's
    # Build-Depends besides the ones above: scdoc, bash-completion, systemd), lint
    # them, debootstrap a Debian 12 root to install them into
    pkgs+=(dpkg-dev debhelper fakeroot lintian debootstrap scdoc bash-completion systemd)
fi
missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "setup: installing ${missing[*]}"
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO=sudo
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" |
        grep -v '^\(Selecting\|Preparing\|Unpacking\|Setting up\|Processing\|(Reading\)' || true
    for p in "${missing[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
            { echo "setup: $p did not install" >&2; exit 1; }
    done
fi
if [ ! -f build/build.ninja ]; then
    meson setup build --buildtype=debugoptimized | tail -n 3
fi
ninja -C build >/dev/null
echo "setup: built build/watt"
