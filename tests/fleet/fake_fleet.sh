#!/bin/sh
# A fleet made of files, for the exec engine (docs/fleet-run.md) in the
# controller's tests that need no VM (tests/unit/test_fleet_control.c,
# tests/fleet/test_fleet_kill.py):
#
#   DIR/hosts/H/VM   a VM running on host H; its one line: LOAD_PCT MEM_KIB VCPUS
#   DIR/power/H      "on" or "off" (the BMC)
#   DIR/locks/VM     held during a migration of VM (a hypervisor's job lock)
#   DIR/lost/VM      a VM that was on a host switched off: gone (a test failure)
#   DIR/migrate_s    seconds a migration takes (default 0.2)
#   DIR/log          "start|end VM SRC DST" for every migration, in time order
#
# usage: fake_fleet.sh DIR list HOST
#        fake_fleet.sh DIR migrate VM SRC DST
#        fake_fleet.sh DIR power HOST on|off|status
#
# A migration links the VM into DST, waits, then removes it from SRC: while
# it runs both hosts list the VM, as with a live migration. A migration the
# controller started goes on when the controller is killed (as libvirt's
# does), and the lock keeps a second one of the same VM from starting.
set -u
D=$1
cmd=$2
shift 2

# what host $1's BMC says, in $p (no fork: commands are most of a test's time)
power_of() {
    read -r p <"$D/power/$1" || p=unknown
}

case $cmd in
list)
    h=$1
    power_of "$h"
    [ "$p" = on ] || { echo "host $h is off" >&2; exit 1; }
    # the clock without a fork: seconds since boot, to 10 ms (CPU_NS is a counter)
    read -r up _ </proc/uptime
    cs=${up#*.}
    now=$(((${up%.*} * 100 + ${cs#0}) * 10000000)) # "08": not octal
    for f in "$D/hosts/$h"/*; do
        [ -f "$f" ] || continue
        read -r load mem vcpus <"$f" || continue
        # CPU time grows at LOAD_PCT of one CPU per vCPU
        echo "${f##*/} running $((now / 100 * load * vcpus)) $mem $vcpus"
    done
    ;;
migrate)
    vm=$1 src=$2 dst=$3
    exec 9>"$D/locks/$vm"
    flock 9
    [ -f "$D/hosts/$src/$vm" ] || { echo "vm $vm is not on $src" >&2; exit 1; }
    power_of "$dst"
    [ "$p" = on ] || { echo "host $dst is off" >&2; exit 1; }
    echo "start $vm $src $dst" >>"$D/log"
    ln "$D/hosts/$src/$vm" "$D/hosts/$dst/$vm" || exit 1
    s=0.2
    [ -f "$D/migrate_s" ] && read -r s <"$D/migrate_s"
    sleep "$s"
    rm -f "$D/hosts/$src/$vm"
    echo "end $vm $src $dst" >>"$D/log"
    ;;
power)
    h=$1
    case $2 in
    status) power_of "$h" && echo "$p" ;;
    on) echo on >"$D/power/.$h" && mv "$D/power/.$h" "$D/power/$h" ;;
    off)
        # a host switched off takes what runs on it along
        for f in "$D/hosts/$h"/*; do
            [ -f "$f" ] && mv "$f" "$D/lost/"
        done
        echo off >"$D/power/.$h" && mv "$D/power/.$h" "$D/power/$h"
        ;;
    *) echo "power $2: want on, off or status" >&2; exit 2 ;;
    esac
    ;;
*)
    echo "fake_fleet.sh: unknown command $cmd" >&2
    exit 2
    ;;
esac
