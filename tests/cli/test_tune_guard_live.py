#!/usr/bin/env python3
"""The agent's side of watt tune and the latency guard, end to end.

Part 1, on a copy of the intel-2s fixture root (runs anywhere): the agent
applies a profile at start (journal owner "agent"), its [latency] guard
holds the per-CPU resume latency of CPUs 1-2 while port 6379 has two
ESTABLISHED connections in the tree's proc/net/tcp, a SIGKILL leaves the
values changed and the next start restores them ("left by a previous
run") before applying again, the guard releases when the connections go,
SIGHUP with a broken profile keeps the running one and with another
profile restores then applies, restore_on_exit = no leaves the values for
the next start, and SIGTERM leaves the tree byte for byte as it was.

Part 2, on this machine (root, /dev/cpu_dma_latency, cpuidle with POLL as
state0; skipped otherwise): a profile whose guard holds cpu_dma_latency at
0 µs while a process named watt-guard-busy burns ~30 % of a CPU
(busy_after_s = 0.5, idle_after_s = 2). Idle: haltpoll (state1) entries
rise. Busy: cpu_dma_latency reads 0, POLL (state0) entries rise and
state1 stays flat. Stopped: within idle_after_s + 2 s the constraint is
gone (2000000000) and state1 entries rise again. The metrics show the
held seconds and 2 transitions; SIGTERM puts everything back.

Exit 77 when neither part can run. Prints one line per check and the
measured counts.
"""
import fcntl
import json
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checks import check, free_port, stop, summary  # noqa: E402

WATT = os.environ.get("WATT") or (sys.argv[1] if len(sys.argv) > 1 else "build/watt")
FIXTURES = os.environ.get("WATT_FIXTURES", "build/tests/fixtures")
NO_CONSTRAINT = 2000000000
CPU = "sys/devices/system/cpu"


def get(port, path, timeout=5):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=timeout) as r:
        return r.read().decode()


def metric(port, name):
    """The value of the (only) series of NAME, or None."""
    for ln in get(port, "/metrics").splitlines():
        m = re.match(re.escape(name) + r"(\{[^}]*\})? (\S+)$", ln)
        if m:
            return float(m.group(2))
    return None


def start(args, port, env, log):
    p = subprocess.Popen([WATT, "agent", "--listen", f"127.0.0.1:{port}", *args],
                         stdout=subprocess.DEVNULL, stderr=log, env=env)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            if get(port, "/healthz", timeout=1).startswith("ok"):
                return p
        except OSError:
            pass
        if p.poll() is not None:
            break
        time.sleep(0.05)
    return p


def wait_for(pred, timeout, step=0.05):
    """Poll PRED until true; the seconds it took, or None."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if pred():
            return time.monotonic() - t0
        time.sleep(step)
    return None


def read(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return None


def snapshot(root):
    """Every file of sys/, proc/ and dev/ under ROOT: {path: bytes}."""
    out = {}
    for top in ("sys", "proc", "dev"):
        for d, _, files in os.walk(os.path.join(root, top)):
            for f in files:
                p = os.path.join(d, f)
                if not os.path.islink(p):
                    out[os.path.relpath(p, root)] = read(p)
    return out


def log_text(path):
    with open(path, errors="replace") as f:
        return f.read()


# ---- part 1: a fixture root ----

TCP_HEAD = ("  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt"
            "   uid  timeout inode\n"
            "   0: 0100007F:18EB 00000000:0000 0A 00000000:00000000 00:00000000 00000000"
            "   999        0 1 1 0000000000000000 100 0 0 10 0\n")


def tcp(n):
    """proc/net/tcp with redis listening on 6379 and N clients."""
    lines = [TCP_HEAD]
    for i in range(n):
        lines.append(f"   {i + 1}: 0100007F:18EB 0100007F:{0xC350 + i:04X} 01 00000000:00000000"
                     " 00:00000000 00000000   999        0 2 1 0000000000000000 20 4 30 10 -1\n")
    return "".join(lines)


FX = """[profile]
description = agent test: performance, a writeback interval and a port guard
include = performance
[kernel]
dirty_writeback_centisecs = 1500
[latency]
workload = port:6379
latency_us = 20
cpus = 1-2
busy_connections = 2
busy_after_s = 0
idle_after_s = 0.4
"""
FX2 = """[profile]
description = agent test: performance only
include = performance
"""
BROKEN = """[profile]
[cpufreq]
govenor = performance
"""


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def fixture_part():
    src = os.path.join(FIXTURES, "intel-2s")
    if not os.path.isdir(src):
        print(f"skip fixture part: no {src}")
        return False
    tmp = tempfile.mkdtemp(prefix="watt-agent-tune-")
    procs = []
    try:
        root = os.path.join(tmp, "root")
        shutil.copytree(src, root, symlinks=True)
        if os.path.exists(os.path.join(root, "watt-faults")):
            os.remove(os.path.join(root, "watt-faults"))  # no "one second later" values
        write(os.path.join(root, "proc/net/tcp"), tcp(0))
        conf = os.path.join(tmp, "conf")
        write(os.path.join(conf, "profiles.d/fx.conf"), FX)
        write(os.path.join(conf, "profiles.d/fx2.conf"), FX2)
        write(os.path.join(conf, "profiles.d/broken.conf"), BROKEN)
        ini = os.path.join(tmp, "agent.ini")
        write(ini, "[agent]\nprofile = fx\n")
        env = dict(os.environ, WATT_CONFIG_DIR=conf)
        before = snapshot(root)
        gov = os.path.join(root, CPU, "cpufreq/policy0/scaling_governor")
        dwb = os.path.join(root, "proc/sys/vm/dirty_writeback_centisecs")
        res1 = os.path.join(root, CPU, "cpu1/power/pm_qos_resume_latency_us")
        res2 = os.path.join(root, CPU, "cpu2/power/pm_qos_resume_latency_us")
        res3 = os.path.join(root, CPU, "cpu3/power/pm_qos_resume_latency_us")
        orig = {p: read(p) for p in (gov, dwb, res1, res2, res3)}
        port = free_port()
        args = ["--root", root, "--config", ini, "--interval", "0.2", "--control", ""]
        logp = os.path.join(tmp, "agent.log")

        with open(logp, "w") as log:
            a = start(args, port, env, log)
            procs.append(a)
        check(a.poll() is None, "fixture: the agent starts with profile fx")
        check(read(gov) == b"performance\n" and read(dwb) == b"1500\n",
              "fixture: profile fx applied at start (governor performance, writeback 1500)")
        check(read(res1) == orig[res1], "fixture: no guard hold while port 6379 is idle")

        write(os.path.join(root, "proc/net/tcp"), tcp(2))
        took = wait_for(lambda: read(res1) == b"20\n" and read(res2) == b"20\n", 15)
        check(took is not None, f"fixture: 2 connections: CPUs 1-2 held at 20 µs "
              f"(after {took if took is None else round(took, 2)} s)")
        check(read(res3) == orig[res3], "fixture: CPU 3, not listed, untouched")
        check(wait_for(lambda: metric(port, "watt_latency_guard_held") == 1, 15) is not None,
              "fixture: watt_latency_guard_held 1")

        a.send_signal(signal.SIGKILL)  # a crash: nothing is put back
        a.wait()
        check(read(gov) == b"performance\n" and read(res1) == b"20\n",
              "fixture: after SIGKILL the values stay changed")
        journal = read(os.path.join(root, "var/lib/watt/journal")) or b""
        check(b"owner=agent" in journal and b"owner=guard" in journal,
              "fixture: the journal holds the agent's and the guard's records")

        with open(logp, "w") as log:
            a = start(args, port, env, log)
            procs.append(a)
        text = log_text(logp)
        check(a.poll() is None and "left by a previous run" in text,
              "fixture: the next start restores what the crash left: "
              + "; ".join(ln for ln in text.splitlines() if "previous run" in ln))
        check(read(gov) == b"performance\n" and read(dwb) == b"1500\n",
              "fixture: and applies the profile again")
        check(wait_for(lambda: read(res1) == b"20\n", 15) is not None,
              "fixture: and the guard holds again (2 connections still)")

        write(os.path.join(root, "proc/net/tcp"), tcp(1))  # below busy_connections
        took = wait_for(lambda: read(res1) == orig[res1] and read(res2) == orig[res2], 15)
        check(took is not None, f"fixture: 1 connection: released within idle_after_s "
              f"(after {took if took is None else round(took, 2)} s)")
        check(wait_for(lambda: metric(port, "watt_latency_guard_transitions_total") == 2, 15)
              is not None, "fixture: 2 transitions (hold again after the restart, release)")

        # SIGHUP while the guard holds and another tuner holds the lock: the
        # guard cannot let go now, and the profile stays; once the lock is
        # free the hold is still put back, though the new guard sees no load
        write(os.path.join(root, "proc/net/tcp"), tcp(2))
        check(wait_for(lambda: read(res1) == b"20\n", 15) is not None,
              "fixture: 2 connections again: held")
        lock = open(os.path.join(root, "var/lib/watt/journal.lock"), "a")
        fcntl.flock(lock, fcntl.LOCK_EX)
        write(ini, "[agent]\nprofile = fx2\n")
        write(os.path.join(root, "proc/net/tcp"), tcp(0))  # the lock keeps the hold
        a.send_signal(signal.SIGHUP)
        time.sleep(0.6)
        write(ini, "[agent]\nprofile = fx\n")
        lock.close()
        took = wait_for(lambda: read(res1) == orig[res1] and read(res2) == orig[res2], 15)
        check(took is not None and read(dwb) == b"1500\n",
              "fixture: SIGHUP while locked: fx kept, and the guard's hold is put back "
              f"once the lock is free (CPU 1 at {read(res1)!r})")

        write(ini, "[agent]\nprofile = broken\n")
        a.send_signal(signal.SIGHUP)
        wait_for(lambda: "keeping profile fx" in log_text(logp), 15)
        text = log_text(logp)
        check("keeping profile fx" in text and read(dwb) == b"1500\n",
              "fixture: SIGHUP with a broken profile keeps fx: "
              + next((ln for ln in text.splitlines() if "govenor" in ln), "(no error logged)"))

        write(ini, "[agent]\nprofile = fx2\n")
        a.send_signal(signal.SIGHUP)
        # fx is restored first, then fx2 applied: wait for both, not the first
        # alone (a loaded CI machine shows the moment in between)
        ok = wait_for(lambda: read(dwb) == orig[dwb] and read(gov) == b"performance\n", 15)
        check(ok is not None,
              "fixture: SIGHUP with fx2: fx restored (writeback back to "
              f"{orig[dwb].strip().decode()}), fx2 applied (governor performance)")
        check(wait_for(lambda: metric(port, "watt_latency_guard_held") is None, 15) is not None,
              "fixture: fx2 has no [latency]: the guard's metrics are gone")

        rc = stop(a)
        check(rc == 0, f"fixture: SIGTERM exits 0 (got {rc})")
        write(os.path.join(root, "proc/net/tcp"), tcp(0))
        after = snapshot(root)
        diff = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
        check(not diff, f"fixture: the tree is byte for byte as it was ({len(before)} files; "
              f"differ: {diff[:5]})")

        # restore_on_exit = no: values stay until the next start
        write(ini, "[agent]\nprofile = fx\nrestore_on_exit = no\n")
        with open(logp, "w") as log:
            a = start(args, port, env, log)
            procs.append(a)
        rc = stop(a)
        check(rc == 0 and read(dwb) == b"1500\n" and "stays in force" in log_text(logp),
              "fixture: restore_on_exit = no: the profile stays after SIGTERM")
        write(ini, "[agent]\nprofile = fx\n")
        with open(logp, "w") as log:
            a = start(args, port, env, log)
            procs.append(a)
        check("left by a previous run" in log_text(logp) and read(dwb) == b"1500\n",
              "fixture: the next start restores and applies again")
        rc = stop(a)
        diff = sorted(k for k, v in snapshot(root).items() if before.get(k) != v)
        check(rc == 0 and not diff, f"fixture: SIGTERM: the tree is as it was (differ: {diff[:5]})")

        # another tuner holds the journal's lock: the agent waits for it
        lock = open(os.path.join(root, "var/lib/watt/journal.lock"), "a")
        fcntl.flock(lock, fcntl.LOCK_EX)
        with open(logp, "w") as log:
            a = start(args, port, env, log)
            procs.append(a)
        time.sleep(0.5)
        check(a.poll() is None and read(dwb) == orig[dwb] and "trying again" in log_text(logp),
              "fixture: journal locked by another tuner: the agent serves and waits")
        lock.close()
        took = wait_for(lambda: read(dwb) == b"1500\n", 15)
        check(took is not None, f"fixture: lock released: applied on a later tick "
              f"(after {took if took is None else round(took, 2)} s)")
        rc = stop(a)
        diff = sorted(k for k, v in snapshot(root).items() if before.get(k) != v)
        check(rc == 0 and not diff, f"fixture: SIGTERM: the tree is as it was (differ: {diff[:5]})")
        return True
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        shutil.rmtree(tmp, ignore_errors=True)


# ---- part 2: this machine ----

BUSY = r"""
import ctypes, time
ctypes.CDLL(None).prctl(15, b"watt-guard-busy", 0, 0, 0)  # PR_SET_NAME: the comm
while True:  # ~30 % of one CPU: 3 ms of work, 7 ms asleep
    t = time.monotonic()
    while time.monotonic() - t < 0.003:
        pass
    time.sleep(0.007)
"""

GTEST = """[profile]
description = live guard test: cpu_dma_latency 0 while watt-guard-busy is busy
[latency]
workload = process:watt-guard-busy
latency_us = 0
busy_after_s = 0.5
idle_after_s = 2
"""


def dma():
    with open("/dev/cpu_dma_latency", "rb") as f:
        return struct.unpack("i", f.read(4))[0]


def cpus():
    out = []
    for name in os.listdir("/" + CPU):
        if re.fullmatch(r"cpu\d+", name) and os.path.isdir(f"/{CPU}/{name}/cpuidle/state1"):
            out.append(int(name[3:]))
    return sorted(out)


def usage():
    """{cpu: (state0 usage, state1 usage)}"""
    u = {}
    for c in cpus():
        u[c] = tuple(int(read(f"/{CPU}/cpu{c}/cpuidle/state{k}/usage")) for k in (0, 1))
    return u


def idle_ticks():
    """Idle + iowait clock ticks of every CPU (/proc/stat)."""
    with open("/proc/stat") as f:
        for ln in f:
            if ln.startswith("cpu "):
                v = ln.split()
                return int(v[4]) + int(v[5])
    return 0


MIN_IDLE = 0.5  # idle share below which entry counts say nothing


def entries(seconds, what):
    """Idle entries per state over SECONDS: (state0, state1, idle share)
    and a line with the numbers. Idle states are entered only when a CPU
    idles: on a machine busy with other work the counts are few, so the
    share of idle time comes along to say whether they mean anything."""
    a, ia, t = usage(), idle_ticks(), time.monotonic()
    time.sleep(seconds)
    b, ib, dt = usage(), idle_ticks(), time.monotonic() - t
    per = {c: (b[c][0] - a[c][0], b[c][1] - a[c][1]) for c in a if c in b}
    share = (ib - ia) / (os.sysconf("SC_CLK_TCK") * dt * max(len(per), 1))
    s0, s1 = sum(v[0] for v in per.values()), sum(v[1] for v in per.values())
    print(f"# {what}, {seconds} s: state0 (POLL) +{s0}, state1 (haltpoll) +{s1}; "
          f"per CPU {per}; CPUs {100 * share:.0f} % idle")
    return s0, s1, share


def gated(ok, share, what):
    """A check on idle entries, when the CPUs idled enough to enter any."""
    if share < MIN_IDLE:
        print(f"note not measured: {what}: the CPUs were only {100 * share:.0f} % idle "
              f"(other work on this machine); need {100 * MIN_IDLE:.0f} %")
        return
    check(ok, what)


def live_reason():
    if os.geteuid() != 0:
        return "not root"
    if not os.path.exists("/dev/cpu_dma_latency"):
        return "no /dev/cpu_dma_latency"
    if read(f"/{CPU}/cpu0/cpuidle/state0/name") != b"POLL\n" or not cpus():
        return "cpuidle has no POLL state0 and a state1 here"
    # another test may hold it for a moment (test_live.sh holds 7 µs)
    if wait_for(lambda: dma() == NO_CONSTRAINT, 5) is None:
        return f"another holder keeps cpu_dma_latency at {dma()} µs"
    return None


def ctl(sock):
    r = subprocess.run([WATT, "ctl", "--socket", sock, "status"], capture_output=True,
                       text=True, timeout=5)
    return json.loads(r.stdout) if r.returncode == 0 else {}


def live_part():
    why = live_reason()
    if why:
        print(f"skip live part: {why}")
        return False
    tmp = tempfile.mkdtemp(prefix="watt-guard-live-")
    agent = busy = None
    try:
        conf = os.path.join(tmp, "conf")
        write(os.path.join(conf, "profiles.d/gtest.conf"), GTEST)
        ini = os.path.join(tmp, "agent.ini")
        # the live root, the journal in the temporary directory
        write(ini, f"[agent]\njournal = {tmp}/journal\n")
        sock = os.path.join(tmp, "ctl.sock")
        resume = {c: read(f"/{CPU}/cpu{c}/power/pm_qos_resume_latency_us") for c in cpus()}
        port = free_port()
        logp = os.path.join(tmp, "agent.log")
        with open(logp, "w") as log:
            agent = start(["--config", ini, "--profile", "gtest", "--interval", "0.25",
                           "--control", sock], port, dict(os.environ, WATT_CONFIG_DIR=conf), log)
        check(agent.poll() is None, "live: the agent starts with --profile gtest")
        check(wait_for(lambda: dma() == NO_CONSTRAINT, 3) is not None,
              "live: no constraint while idle")
        w0 = metric(port, "watt_agent_wakeups_total")
        c0 = metric(port, "watt_agent_cpu_seconds_total")
        t0 = time.monotonic()

        s0, s1, share = entries(2, "idle")
        gated(s1 > 20, share, f"live: idle: haltpoll entries rise (+{s1} in 2 s)")

        busy = subprocess.Popen([sys.executable, "-c", BUSY])
        took = wait_for(lambda: dma() == 0, 4)
        check(took is not None, f"live: busy: cpu_dma_latency reads 0 "
              f"(after {took if took is None else round(took, 2)} s; busy_after_s 0.5)")
        st = ctl(sock)
        g = st.get("guard") or {}
        check(g.get("held") is True and g.get("state") == "held" and g.get("processes") == 1,
              f"live: watt ctl status shows the guard held: {json.dumps(g)}")
        s0, s1, share = entries(2, "held")
        # slack: one entry per CPU, decided just before the limit changed
        check(s1 <= len(cpus()), f"live: held: haltpoll stays flat (+{s1})")
        gated(s0 > 100, share, f"live: held: idle entries go to POLL (+{s0})")
        check(metric(port, "watt_latency_guard_held") == 1, "live: watt_latency_guard_held 1")

        busy.kill()
        busy.wait()
        busy = None
        took = wait_for(lambda: dma() == NO_CONSTRAINT, 2 + 2)
        check(took is not None, f"live: stopped: the constraint is gone within idle_after_s + 2 s "
              f"(after {took if took is None else round(took, 2)} s)")
        s0, s1, share = entries(2, "released")
        gated(s1 > 20, share, f"live: released: haltpoll entries rise again (+{s1})")

        time.sleep(0.3)  # the next sample renders the release
        held = metric(port, "watt_latency_guard_held_seconds_total")
        trans = metric(port, "watt_latency_guard_transitions_total")
        check(held is not None and 2 < held < 8,
              f"live: watt_latency_guard_held_seconds_total {held} (held about 2 s + idle_after_s)")
        check(trans == 2, f"live: watt_latency_guard_transitions_total {trans}")
        dt = time.monotonic() - t0
        w1 = metric(port, "watt_agent_wakeups_total")
        c1 = metric(port, "watt_agent_cpu_seconds_total")
        print(f"# the agent at a 0.25-s interval with the guard: {(w1 - w0) / dt:.1f} wake-ups/s, "
              f"{100 * (c1 - c0) / dt:.2f} % of a CPU over {dt:.1f} s")

        rc = stop(agent)
        agent = None
        check(rc == 0, f"live: SIGTERM exits 0 (got {rc})")
        now = {c: read(f"/{CPU}/cpu{c}/power/pm_qos_resume_latency_us") for c in cpus()}
        jr = read(os.path.join(tmp, "journal")) or b""
        gone = wait_for(lambda: dma() == NO_CONSTRAINT, 3) is not None
        check(gone and now == resume and b"owner=" not in jr,
              "live: everything restored (cpu_dma_latency 2000000000, resume latencies, "
              "no journal records)")
        port_phase(tmp, conf, ini)
        return True
    finally:
        for p in (busy, agent):
            if p and p.poll() is None:
                p.kill()
                p.wait()
        shutil.rmtree(tmp, ignore_errors=True)


def port_phase(tmp, conf, ini):
    """port:N on the live tables: two connections to a listener hold the
    limit, closing them releases it."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()
    port = srv.getsockname()[1]
    write(os.path.join(conf, "profiles.d/gport.conf"),
          f"[latency]\nworkload = port:{port}\nlatency_us = 0\nbusy_connections = 2\n"
          "busy_after_s = 0\nidle_after_s = 1\n")
    conns, agent = [], None
    try:
        with open(os.path.join(tmp, "port.log"), "w") as log:
            agent = start(["--config", ini, "--profile", "gport", "--interval", "0.25",
                           "--control", ""], free_port(), dict(os.environ, WATT_CONFIG_DIR=conf),
                          log)
        for _ in range(2):
            conns.append(socket.create_connection(("127.0.0.1", port)))
            conns.append(srv.accept()[0])
        took = wait_for(lambda: dma() == 0, 2)
        check(took is not None, f"live: port:{port} with 2 connections: cpu_dma_latency 0 "
              f"(after {took if took is None else round(took, 2)} s)")
        for c in conns:
            c.close()
        conns = []
        took = wait_for(lambda: dma() == NO_CONSTRAINT, 3)
        check(took is not None, f"live: connections closed: released "
              f"(after {took if took is None else round(took, 2)} s; idle_after_s 1)")
        rc = stop(agent)
        agent = None
        check(rc == 0, f"live: port guard: SIGTERM exits 0 (got {rc})")
    finally:
        for c in conns:
            c.close()
        srv.close()
        if agent and agent.poll() is None:
            agent.kill()
            agent.wait()


def main():
    ran = fixture_part()
    ran = live_part() or ran
    if not ran:
        return 77
    return summary()


if __name__ == "__main__":
    sys.exit(main())
