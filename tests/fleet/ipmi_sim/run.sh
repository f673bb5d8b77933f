#!/bin/sh
# Start/stop one simulated BMC (ipmi_sim) on 127.0.0.1:PORT (UDP).
#   sh run.sh start PORT [WORKDIR]   # prints the ipmi_sim PID once it answers
#   sh run.sh stop  PORT [WORKDIR]
# Everything it writes goes to WORKDIR (default /tmp/ipmi_sim.PORT), never to
# this directory: lan.conf, dcmi_power.so, watts, power.state(.log),
# ipmi_sim.log, ipmi_sim.pid, state/. Put an executable WORKDIR/power.state.hook
# there to make power real (see chassis.sh).
# Needs: apt-get install openipmi ipmitool gcc   (CC overrides the compiler)
# Then:  ipmitool -I lanplus -C 3 -H 127.0.0.1 -p PORT -U admin -P secret chassis power status
set -e
SRC=$(cd "$(dirname "$0")" && pwd)
cmd="$1"; PORT="$2"; WORK="${3:-/tmp/ipmi_sim.$PORT}"
usage() { echo "usage: $0 start|stop PORT [WORKDIR]" >&2; exit 2; }
case "$PORT" in ''|*[!0-9]*) usage ;; esac
case "$cmd" in
start)
  mkdir -p "$WORK/state"
  WORK=$(cd "$WORK" && pwd)   # lan.conf needs absolute paths
  case "$SRC$WORK" in *' '*|*'"'*) echo "$0: paths with spaces or quotes are not supported" >&2; exit 2 ;; esac
  if [ -f "$WORK/ipmi_sim.pid" ] && kill -0 "$(cat "$WORK/ipmi_sim.pid")" 2>/dev/null; then
    echo "$0: ipmi_sim already runs for $WORK (pid $(cat "$WORK/ipmi_sim.pid"))" >&2; exit 1
  fi
  if [ ! -f "$WORK/dcmi_power.so" ] || [ "$SRC/dcmi_power.c" -nt "$WORK/dcmi_power.so" ]; then
    ${CC:-gcc} -shared -fPIC -O2 -o "$WORK/dcmi_power.so" "$SRC/dcmi_power.c"
  fi
  [ -f "$WORK/watts" ] || echo 150 > "$WORK/watts"
  [ -f "$WORK/power.state" ] || echo 0 > "$WORK/power.state"
  sed -e "s|@NAME@|pmsim$PORT|g" -e "s|@PORT@|$PORT|g" -e "s|@WORK@|$WORK|g" -e "s|@SRC@|$SRC|g" \
      "$SRC/lan.conf.in" > "$WORK/lan.conf"
  # -n: no console; run from WORKDIR so nothing lands in the caller's cwd.
  (cd "$WORK" && exec ipmi_sim -n -c "$WORK/lan.conf" -f "$SRC/pmsim.emu" -s "$WORK/state" \
      < /dev/null > "$WORK/ipmi_sim.log" 2>&1) &
  pid=$!
  echo $pid > "$WORK/ipmi_sim.pid"
  # Wait until the BMC answers (about 0.1-0.2 s when healthy), at most 5 s.
  i=0
  until ipmitool -I lanplus -C 3 -H 127.0.0.1 -p "$PORT" -U admin -P secret -N 1 -R 1 mc info >/dev/null 2>&1; do
    i=$((i+1))
    if ! kill -0 "$pid" 2>/dev/null || [ $i -ge 50 ]; then
      echo "ipmi_sim on 127.0.0.1:$PORT did not answer (port in use?); log:" >&2
      cat "$WORK/ipmi_sim.log" >&2
      kill "$pid" 2>/dev/null || true
      rm -f "$WORK/ipmi_sim.pid"; exit 1
    fi
    sleep 0.1
  done
  echo $pid ;;
stop)
  WORK=$(cd "$WORK" 2>/dev/null && pwd) || exit 0
  [ -f "$WORK/ipmi_sim.pid" ] || exit 0
  pid=$(cat "$WORK/ipmi_sim.pid")
  kill -CONT "$pid" 2>/dev/null || true   # a test may have stopped it (SIGSTOP)
  kill "$pid" 2>/dev/null || true
  # ipmi_sim needs about 1 s to exit after SIGTERM; SIGKILL after 5 s.
  i=0; while kill -0 "$pid" 2>/dev/null && [ $i -lt 50 ]; do sleep 0.1; i=$((i+1)); done
  kill -KILL "$pid" 2>/dev/null || true
  rm -f "$WORK/ipmi_sim.pid" ;;
*) usage ;;
esac
