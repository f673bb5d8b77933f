#!/bin/sh
# chassis_control program for ipmi_sim (OpenIPMI 2.0.33, lanserv/bmc_chassis.c).
# ipmi_sim runs it through popen(), synchronously, and answers no other IPMI
# request until it exits; a non-zero exit becomes completion code 0xff.
#   chassis.sh STATE get power [boot]       -> prints "power:0|1" ("boot:default")
#   chassis.sh STATE set power "0"|"1"      <- chassis control 0x00 power down,
#                                              0x01 power up; 0x02 power cycle is
#                                              "set power 0", then "set power 1"
#                                              from a 1 s timer in ipmi_sim
#   chassis.sh STATE set reset "1"          <- 0x03 hard reset (logged only)
#   chassis.sh STATE set shutdown "1"       <- 0x05 soft shutdown (ACPI)
#   chassis.sh STATE set boot X | identify I F | check
# STATE holds "0" or "1" (the simulated host's power). Every change is
# appended to STATE.log as "<epoch> power=N" (and "<epoch> hook ARG rc=N").
#
# Hook: if STATE.hook exists and is executable it is run BEFORE the new state
# is recorded, as "STATE.hook on" (power up), "off" (power down) or
# "soft-off" (soft shutdown; the state then becomes 0). Only exit 0 records
# the new state; otherwise the BMC answers an error and the state is kept.
# The hook runs with stdin from /dev/null and stdout/stderr appended to
# STATE.hook.log (a daemon it starts must not hold ipmi_sim's pipe). It is
# called on every request, also when the state already matches, so it must
# be idempotent; and it blocks the BMC while it runs (see README.md).
state="$1"; op="$2"; shift 2
hook="$state.hook"
log="$state.log"
[ -f "$state" ] || echo 0 > "$state"

# run_hook ARG: 0 when there is no hook or it succeeded.
run_hook() {
  [ -f "$hook" ] && [ -x "$hook" ] || return 0
  "$hook" "$1" < /dev/null >> "$state.hook.log" 2>&1
  rc=$?
  echo "$(date +%s) hook $1 rc=$rc" >> "$log"
  return $rc
}

# set_power 0|1 HOOKARG: run the hook, then record the state (atomically).
set_power() {
  if ! run_hook "$2"; then
    echo "hook $2 failed, power stays $(cat "$state")"
    exit 1
  fi
  echo "$1" > "$state.tmp" && mv -f "$state.tmp" "$state"
  echo "$(date +%s) power=$1" >> "$log"
}

case "$op" in
  get)
    for p in "$@"; do
      case "$p" in
        power) echo "power:$(cat "$state")" ;;
        boot)  echo "boot:default" ;;
        *) echo "Invalid parameter: $p"; exit 1 ;;
      esac
    done ;;
  set)
    while [ $# -gt 0 ]; do
      p="$1"; v="$2"; shift 2
      case "$p" in
        power)
          case "$v" in
            0) set_power 0 off ;;
            1) set_power 1 on ;;
            *) echo "Invalid power value: $v"; exit 1 ;;
          esac ;;
        shutdown) set_power 0 soft-off ;;
        reset|boot) echo "$(date +%s) $p=$v" >> "$log" ;;
        identify) : ;;       # value is "INTERVAL FORCE", one quoted word
        *) echo "Invalid parameter: $p"; exit 1 ;;
      esac
    done ;;
  check) exit 1 ;;
  *) echo "Unknown operation: $op"; exit 1 ;;
esac
exit 0
