#!/usr/bin/env python3
"""Kill test of `watt fleet run` (issue 14): the controller, on the exec
engine over a fleet made of files (tests/fleet/fake_fleet.sh, no VM), is
SIGKILLed at KILLS random moments of runs with up to 8 migrations at once,
and restarted (`--once`) after each kill. After each restart:

  - the journal is whole records, numbered strictly upwards in file order
    (no number twice, across all the restarts);
  - every begin has exactly one end, and each begin the kill left open is
    closed by a `recovered` record of the restart;
  - once the migrations the kill left running have ended (they go on, as
    libvirt's do), every VM is on exactly one host and none was lost.

No power engine (power = none): a one-tick run switches no host, and the
BMC commands would double the processes a tick starts; the unit tests
(test_fleet_journal.c) recover power records. What it relies on: a controller starting with every VM at 100 % of one
core, six to a 4-core host on hosts h1-h4 (eight hosts empty), sees an
overload on its first tick (whatever its CPU history, and with the
policy's window = 1) and relieves it at once with 8 migrations
(max_concurrent_migrations = 8); the test fails, saying so, when too few
kills landed during migrations. Stdlib only. WATT_KILLS, WATT_KILL_SEED
override the number of kills and the seed."""
import fcntl
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

WATT = os.environ.get("WATT", "build/watt")
HERE = os.path.dirname(os.path.abspath(__file__))
KILLS = int(os.environ.get("WATT_KILLS", "50"))
SEED = int(os.environ.get("WATT_KILL_SEED", str(int(time.time()))))
HOSTS = [f"h{i}" for i in range(1, 13)]
VMS = [f"vm{i:02d}" for i in range(24)]
MIGRATE_S = 0.15  # how long the fake migration takes

INI = """[controller]
interval_s = 1
state_dir = {d}/state
vm_engine = exec
power = none
max_concurrent_migrations = 8
migrations_per_host = 4
migration_timeout_s = 30
migrations_per_vm_day = 1000
policy = window=1
[exec]
list = {cmd} list {{host}}
migrate = {cmd} migrate {{vm}} {{src}} {{dst}}
timeout_s = 30
[type small]
cores = 4
mips_per_core = 1000
ram_mb = 8192
power_w = 100,110,120,130,140,150,160,170,180,190,200
boot_s = 1
"""

RECORD = re.compile(r"^(\d+) \d+(?:\.\d+)? (?:begin (.*)|end (\d+) (.*))$")

failures = []


def fail(msg):
    print(f"FAIL: {msg}")
    failures.append(msg)


class Fleet:
    def __init__(self, d):
        self.d = d
        self.f = os.path.join(d, "fleet")
        for sub in ("hosts", "power", "locks", "lost"):
            os.makedirs(os.path.join(self.f, sub))
        for h in HOSTS:
            os.makedirs(os.path.join(self.f, "hosts", h))
        shutil.copy(os.path.join(HERE, "fake_fleet.sh"), d)
        with open(os.path.join(self.f, "migrate_s"), "w") as f:
            f.write(f"{MIGRATE_S}\n")
        cmd = f"/bin/sh {d}/fake_fleet.sh {self.f}"
        self.ini = os.path.join(d, "fleet.ini")
        with open(self.ini, "w") as f:
            f.write(INI.format(d=d, cmd=cmd))
            for h in HOSTS:
                f.write(f"[host {h}]\ntype = small\n")

    def reset(self):
        """Every host on, six VMs on each of h1-h4 (at 100 %: overloaded)."""
        for h in HOSTS:
            with open(os.path.join(self.f, "power", h), "w") as f:
                f.write("on\n")
        for vm in VMS:
            for h in self.where(vm):
                os.unlink(os.path.join(self.f, "hosts", h, vm))
        for i, vm in enumerate(VMS):
            with open(os.path.join(self.f, "hosts", HOSTS[i // 6], vm), "w") as f:
                f.write("100 262144 1\n")

    def where(self, vm):
        return [h for h in HOSTS if os.path.exists(os.path.join(self.f, "hosts", h, vm))]

    def wait_migrations(self):
        """Until no migration holds a VM's lock (those a kill left running)."""
        for vm in VMS:
            path = os.path.join(self.f, "locks", vm)
            if not os.path.exists(path):
                continue
            with open(path) as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                fcntl.flock(lock, fcntl.LOCK_UN)

    def check(self, what):
        lost = os.listdir(os.path.join(self.f, "lost"))
        if lost:
            fail(f"{what}: VMs lost with a host switched off: {lost}")
        for vm in VMS:
            at = self.where(vm)
            if len(at) != 1:
                fail(f"{what}: {vm} is on {at or 'no host'}")


def read_journal(path, what):
    """[(seq, ref or None, text)], every line checked."""
    recs = []
    if not os.path.exists(path):
        return recs
    with open(path, "rb") as f:
        data = f.read()
    if data and not data.endswith(b"\n"):
        fail(f"{what}: the journal ends in a torn line: {data[-80:]!r}")
    for n, line in enumerate(data.decode(errors="replace").splitlines(), 1):
        m = RECORD.match(line)
        if not m:
            fail(f"{what}: journal line {n} is not a record: {line!r}")
            continue
        seq = int(m.group(1))
        if m.group(2) is not None:
            recs.append((seq, None, m.group(2)))
        else:
            recs.append((seq, int(m.group(3)), m.group(4)))
    return recs


def open_begins(recs):
    closed = {ref for _, ref, _ in recs if ref is not None}
    return {seq: text for seq, ref, text in recs if ref is None and seq not in closed}


def check_journal(recs, what):
    seqs = [r[0] for r in recs]
    for a, b in zip(seqs, seqs[1:]):
        if b <= a:
            fail(f"{what}: journal number {b} after {a}")
            break
    begins = {seq for seq, ref, _ in recs if ref is None}
    ends = {}
    for seq, ref, _ in recs:
        if ref is None:
            continue
        if ref not in begins or ref > seq:
            fail(f"{what}: end {seq} closes {ref}, no begin before it")
        ends[ref] = ends.get(ref, 0) + 1
    twice = [ref for ref, n in ends.items() if n > 1]
    if twice:
        fail(f"{what}: begins with more than one end: {twice[:5]}")
    left = sorted(begins - set(ends))
    if left:
        fail(f"{what}: begins without an end: {left[:5]}")


def run_once(fleet, env, what):
    t0 = time.monotonic()
    p = subprocess.run([WATT, "fleet", "run", "--config", fleet.ini, "--once", "--json"],
                       capture_output=True, text=True, env=env, timeout=120)
    p.took = time.monotonic() - t0
    if p.returncode != 0:
        fail(f"{what}: exit {p.returncode}: {p.stderr.strip()[-600:]}")
    for line in p.stdout.splitlines():
        try:
            json.loads(line)
        except ValueError:
            fail(f"{what}: not a JSON line: {line[:200]!r}")
    return p


def main():
    if not os.path.exists(WATT):
        print(f"skip: no watt binary at {WATT}")
        return 77
    if not shutil.which("flock"):
        print("skip: no flock(1) (util-linux) for the fake fleet's locks")
        return 77
    rng = random.Random(SEED)
    print(f"# seed {SEED} (WATT_KILL_SEED={SEED} repeats this run), {KILLS} kills")
    env = dict(os.environ)
    d = tempfile.mkdtemp(prefix="watt-fleet-kill-")
    start = time.monotonic()
    in_flight = []  # begins a kill left open, per kill
    fleet = None
    try:
        fleet = Fleet(d)
        journal = os.path.join(d, "state", "journal")
        # A first run, whole: how long a start and its first tick take here
        # (a busy machine, a sanitizer build), so that the kills spread over
        # that time: starting, observing, migrating, closing, waiting.
        fleet.reset()
        took = [run_once(fleet, env, "first run").took]
        fleet.wait_migrations()
        fleet.check("first run")
        for k in range(1, KILLS + 1):
            what = f"kill {k}"
            fleet.reset()
            med = sorted(took)[len(took) // 2]
            size0 = os.path.getsize(journal)
            proc = subprocess.Popen([WATT, "fleet", "run", "--config", fleet.ini, "--json"],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                    env=env)
            t0 = time.monotonic()
            if k % 2:
                # anywhere in a start and its first tick, and a little after
                time.sleep(rng.uniform(0, 1.2 * med))
            else:
                # while the first tick acts: after its first begin
                wait = rng.uniform(0, 0.6 * med)
                while (os.path.getsize(journal) == size0 and proc.poll() is None
                       and time.monotonic() - t0 < 3 * med):
                    time.sleep(0.002)
                time.sleep(wait)
            delay = time.monotonic() - t0
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            err = proc.stderr.read().decode(errors="replace")
            proc.stderr.close()
            if proc.returncode != -signal.SIGKILL:
                fail(f"{what}: the controller ended by itself ({proc.returncode}): {err[-400:]}")
            left = open_begins(read_journal(journal, what))
            in_flight.append(len(left))
            if os.environ.get("WATT_KILL_VERBOSE"):
                print(f"# {what}: after {delay:.3f} s (a whole run: {med:.3f} s), {len(left)} open")

            p = run_once(fleet, env, f"{what}, restart")
            took.append(p.took)
            fleet.wait_migrations()
            recs = read_journal(journal, f"{what}, restart")
            check_journal(recs, f"{what}, restart")
            recovered = {ref for _, ref, text in recs
                         if ref is not None and text.startswith("recovered ")}
            missed = sorted(set(left) - recovered)
            if missed:
                fail(f"{what}: the restart wrote no recovery record for {missed[:5]} "
                     f"({left[missed[0]]!r})")
            fleet.check(f"{what}, restart")
            if failures:
                print(f"# {what}: after {delay:.3f} s; restart's stderr: {p.stderr[-400:]!r}")
                break
        took = time.monotonic() - start
        recs = read_journal(journal, "end")
        migrations = sum(1 for _, ref, text in recs if ref is None and text.startswith("migrate "))
        recovered = sum(1 for _, ref, text in recs if ref is not None and text.startswith("recovered "))
        mid = sum(1 for n in in_flight if n > 0)
        hist = {n: in_flight.count(n) for n in sorted(set(in_flight))}
        print(f"# {len(in_flight)} kills in {took:.1f} s: {len(recs)} records, {migrations} "
              f"migrations begun, {recovered} closed by a restart; begins open at the kills: "
              f"{hist} (count: kills)")
        # the test means something only if kills land while actions run
        if len(in_flight) == KILLS and mid < KILLS // 4:
            fail(f"only {mid} of {KILLS} kills left an action open: the first tick no "
                 "longer migrates at once (see this file's docstring)")
        if len(in_flight) == KILLS and max(in_flight, default=0) < 4:
            fail(f"at most {max(in_flight, default=0)} actions open at a kill: "
                 "the migrations no longer run 8 at once")
    finally:
        if fleet:
            fleet.wait_migrations()
        shutil.rmtree(d, ignore_errors=True)
    if failures:
        print(f"{len(failures)} failure(s)")
        return 1
    print("ok: every begin closed after each restart, no number twice, no VM lost or doubled")
    return 0


if __name__ == "__main__":
    sys.exit(main())
