"""The packer's live lab: shared by tests/cli/test_pack_live.py and
bench/pack_live.py, so the test's thresholds and the bench's figures are
measured by the same code.

What it knows about this kind of machine (docs/pack.md, "Live test"):
the cpuset controller may be a cgroup v1 hierarchy (found in
/proc/self/mountinfo, fstype cgroup with the cpuset option) and cgroup2
may be mounted beside it without controllers but with cpu.pressure per
cgroup (what the packer's PSI trigger needs); where cgroup2 itself has
the cpuset controller, that one is used. The workload is
tests/helpers/dutyload (a duty-cycled busy loop reporting loops/s).

CPU 1's idleness is measured three ways, whichever the kernel gives:
  - cpuidle residency and entries (cpu1/cpuidle/state*/time and usage),
    only where a cpuidle driver is loaded (not on a VM whose
    current_driver is "none": then said, and not faked);
  - /proc/stat's idle + iowait ticks of cpu1 (always);
  - the interrupts taken by cpu1 (/proc/interrupts, its column summed,
    and per line so a residual can be named): every wake-up of an idle
    CPU is an interrupt, so this is an upper bound on its wake-ups (it
    also counts the ticks of a busy CPU, which the unpacked run has);
  - idle entries from the sched:sched_switch tracepoint (switches to the
    idle task, next_pid == 0) in a private ftrace instance, where tracefs
    is mounted: one per idle period, so it counts the wake-ups that ended
    an idle period with a task to run (not those that only ran an
    interrupt and went back to idle).
"""
import fcntl
import json
import os
import re
import signal
import socket
import subprocess
import threading
import time
import urllib.request

LAB_LOCK = "/tmp/watt-lab.lock"
CPU = "/sys/devices/system/cpu"


def read(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return None


def write(path, data):
    with open(path, "w") as f:
        f.write(data)


# ---- the lab lock ----

def _ancestors():
    pids, pid = set(), os.getpid()
    while pid > 1:
        pids.add(pid)
        st = read(f"/proc/{pid}/stat")
        if not st:
            break
        pid = int(st.rsplit(b")", 1)[1].split()[1])
    return pids


def _lock_holders(path):
    """PIDs holding a flock on PATH (/proc/locks, by inode)."""
    try:
        ino = os.stat(path).st_ino
    except OSError:
        return set()
    out = set()
    for ln in (read("/proc/locks") or b"").decode().splitlines():
        v = ln.split()
        # 1: FLOCK  ADVISORY  WRITE 1234 00:1a:5678 0 EOF  (v[0] may be "->")
        if "->" in v:
            v.remove("->")
        if len(v) >= 6 and v[1] == "FLOCK" and v[5].rsplit(":", 1)[-1] == str(ino):
            out.add(int(v[4]))
    return out


def lab_lock(timeout=600):
    """Take /tmp/watt-lab.lock (the live tests' lock) and return its file,
    or None when an ancestor already holds it (`flock /tmp/watt-lab.lock
    meson test ...`: taking it again would wait for ever)."""
    f = open(LAB_LOCK, "a")
    deadline = time.monotonic() + timeout
    while True:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return f
        except BlockingIOError:
            if _lock_holders(LAB_LOCK) & _ancestors():
                f.close()
                return None
            if time.monotonic() > deadline:
                raise TimeoutError(f"{LAB_LOCK} held for {timeout} s by {_lock_holders(LAB_LOCK)}")
            time.sleep(0.2)


# ---- cgroups ----

def mounts():
    """(v1 cpuset mount or None, cgroup2 mount or None) from mountinfo."""
    v1 = v2 = None
    for ln in (read("/proc/self/mountinfo") or b"").decode().splitlines():
        pre, _, post = ln.partition(" - ")
        f, p = pre.split(), post.split()
        if len(p) < 3:
            continue
        if p[0] == "cgroup" and "cpuset" in p[2].split(",") and v1 is None:
            v1 = f[4]
        elif p[0] == "cgroup2" and v2 is None:
            v2 = f[4]
    return v1, v2


def cpuset_dir(v1, v2):
    """The hierarchy whose cpuset.cpus the packer writes: cgroup2 when its
    root offers the cpuset controller, else the v1 cpuset mount."""
    if v2 and b"cpuset" in (read(f"{v2}/cgroup.controllers") or b"").split():
        return v2, 2
    return (v1, 1) if v1 else (None, 0)


def cpusets(top):
    """Every cpuset.cpus under TOP: {relative dir: bytes}, byte for byte."""
    out = {}
    for d, _, files in os.walk(top):
        if "cpuset.cpus" in files:
            out[os.path.relpath(d, top)] = read(os.path.join(d, "cpuset.cpus"))
    return out


def parse_cpulist(text):
    """The set of CPUs of a kernel cpu-list ("0-2,5"; "" is empty)."""
    out = set()
    for part in (text or "").strip().split(","):
        if part:
            a, _, b = part.partition("-")
            out.update(range(int(a), int(b or a) + 1))
    return out


class Cgroup:
    """NAME in the cpuset hierarchy and in cgroup2 (for cpu.pressure).
    Made with the parent's CPUs and memory nodes (v1 needs both before a
    task may join); remove() moves what is left to the root and removes
    the directories, children first, and is safe to call twice. On a
    cgroup2 cpuset hierarchy the root's cgroup.subtree_control gets
    +cpuset for the test if it lacks it (put back by remove()): the
    cgroup's cpuset.cpus exists only then."""

    def __init__(self, name, v1, v2):
        self.name, self.dirs, self.mount = name, [], {}
        self.enabled = None
        cs, ver = cpuset_dir(v1, v2)
        if ver == 2 and b"cpuset" not in (read(f"{cs}/cgroup.subtree_control") or b"").split():
            write(f"{cs}/cgroup.subtree_control", "+cpuset")
            self.enabled = f"{cs}/cgroup.subtree_control"
        self.cpuset = os.path.join(cs, name)
        self.version = ver
        self.v2 = os.path.join(v2, name) if v2 else None
        for d in dict.fromkeys(x for x in (self.cpuset, self.v2) if x):
            if os.path.isdir(d):
                raise FileExistsError(f"{d} exists already (a previous run's? remove it)")
            os.mkdir(d)
            self.dirs.append(d)
            self.mount[d] = os.path.dirname(d)
        if ver == 1:
            for f in ("cpuset.cpus", "cpuset.mems"):
                write(f"{self.cpuset}/{f}", read(f"{cs}/{f}").decode().strip())

    def add(self, pid):
        for d in self.dirs:
            write(f"{d}/cgroup.procs", str(pid))

    def child(self, name, cpus):
        """A child cpuset pinned to CPUS (v1: with the parent's mems)."""
        d = os.path.join(self.cpuset, name)
        os.mkdir(d)
        self.dirs.insert(0, d)
        self.mount[d] = os.path.dirname(self.cpuset)
        if self.version == 1:
            write(f"{d}/cpuset.mems", read(f"{self.cpuset}/cpuset.mems").decode().strip())
        write(f"{d}/cpuset.cpus", cpus)
        return d

    def cpus(self):
        v = read(f"{self.cpuset}/cpuset.cpus")
        return None if v is None else v.decode().strip()

    def cpuset_is(self, cpus):
        """Whether the cgroup's cpuset.cpus is the set CPUS (on cgroup2 an
        empty one inherits the parent's: every online CPU here)."""
        v = self.cpus()
        if v is None:
            return False
        s = parse_cpulist(v)
        if not s and self.version == 2:
            s = set(online_cpus())
        return s == set(cpus)

    def remove(self):
        errors = []
        for d in sorted(self.dirs, key=len, reverse=True):
            if not os.path.isdir(d):
                continue
            root = self.mount[d]
            procs = (read(f"{d}/cgroup.procs") or b"").split()
            for pid in procs:
                try:
                    write(f"{root}/cgroup.procs", pid.decode())
                except OSError:
                    pass  # exited meanwhile
            for _ in range(50):  # an exiting task leaves the cgroup a moment later
                try:
                    os.rmdir(d)
                    break
                except OSError as e:
                    err = e
                    time.sleep(0.02)
            else:
                errors.append(f"{d}: {err}")
        self.dirs = [d for d in self.dirs if os.path.isdir(d)]
        if self.enabled and not self.dirs:
            try:
                write(self.enabled, "-cpuset")
                self.enabled = None
            except OSError as e:
                errors.append(f"{self.enabled}: -cpuset: {e}")
        return errors


def remove_tree(d):
    """Remove cgroup D and its children (an earlier run's), their tasks
    moved to the hierarchy's root first."""
    root = os.path.dirname(d)
    for sub, _, _ in sorted(os.walk(d), key=lambda w: -len(w[0])):
        for pid in (read(f"{sub}/cgroup.procs") or b"").split():
            try:
                write(f"{root}/cgroup.procs", pid.decode())
            except OSError:
                pass
        os.rmdir(sub)


# ---- CPU 1's idleness ----

def online_cpus():
    text = (read(f"{CPU}/online") or b"0").decode().strip()
    out = []
    for part in text.split(","):
        a, _, b = part.partition("-")
        out += range(int(a), int(b or a) + 1)
    return out


def _stat_cpu(cpu):
    """(idle + iowait ticks, all ticks) of CPU from /proc/stat."""
    for ln in (read("/proc/stat") or b"").decode().splitlines():
        v = ln.split()
        if v and v[0] == f"cpu{cpu}":
            n = [int(x) for x in v[1:]]
            return n[3] + n[4], sum(n[:8])  # guest time is already in user
    return None


def _proc_ticks():
    """{pid: (comm, utime + stime ticks)} of every process."""
    out = {}
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            st = read(f"/proc/{pid}/stat")
            if st:
                comm, rest = st.rsplit(b")", 1)
                v = rest.split()
                out[int(pid)] = (comm.split(b"(", 1)[1].decode(errors="replace"),
                                 int(v[11]) + int(v[12]))
    return out


def _cpu_line():
    for ln in (read("/proc/stat") or b"").decode().splitlines():
        if ln.startswith("cpu "):
            n = [int(x) for x in ln.split()[1:]]
            return sum(n[:8]) - n[3] - n[4], sum(n[:8])
    return 0, 0


def machine_busy(seconds, pids=()):
    """Busy CPUs of the whole machine over SECONDS (/proc/stat's cpu line:
    what the packer's demand is made of) but those of PIDS (the test's
    own), and the busiest other processes then ("comm[pid] N %")."""
    p0, (b0, t0) = _proc_ticks(), _cpu_line()
    time.sleep(seconds)
    p1, (b1, t1) = _proc_ticks(), _cpu_line()
    hz = os.sysconf("SC_CLK_TCK")
    ours = set(pids)
    top = sorted(((v[1] - p0[k][1], f"{v[0]}[{k}]") for k, v in p1.items()
                  if k in p0 and k not in ours), reverse=True)[:4]
    who = ", ".join(f"{name} {100 * d / hz / seconds:.0f} %" for d, name in top if d > 0)
    own = sum(p1[k][1] - p0[k][1] for k in ours if k in p0 and k in p1) / hz / seconds
    busy = len(online_cpus()) * (b1 - b0) / (t1 - t0) if t1 > t0 else 0.0
    return max(0.0, busy - own), who


def wait_quiet(max_busy, timeout, say=print, pids=()):
    """Wait until the machine's other work (all but PIDS) is under MAX_BUSY
    CPUs over 2 s (other tests and builds share this machine and wake the
    freed CPU). The last figure, and whether it was reached."""
    end = time.monotonic() + timeout
    while True:
        b, who = machine_busy(2, pids)
        if b <= max_busy:
            return b, True
        if time.monotonic() > end:
            say(f"# the machine stayed busy with other work: {b:.2f} CPUs over 2 s after "
                f"{timeout:.0f} s of waiting ({who})")
            return b, False
        say(f"# waiting for the machine to be quiet: {b:.2f} CPUs busy ({who})")


def _cpuidle(cpu):
    """{state: (time µs, usage)} or {} without a cpuidle driver."""
    out = {}
    d = f"{CPU}/cpu{cpu}/cpuidle"
    if not os.path.isdir(d):
        return out
    for s in sorted(os.listdir(d)):
        t, u = read(f"{d}/{s}/time"), read(f"{d}/{s}/usage")
        if t is not None and u is not None:
            name = (read(f"{d}/{s}/name") or b"").decode().strip()
            out[f"{s}({name})"] = (int(t), int(u))
    return out


def _interrupts(cpu):
    """{irq line: count on CPU} from /proc/interrupts."""
    text = (read("/proc/interrupts") or b"").decode().splitlines()
    if not text:
        return {}
    cols = text[0].split()
    try:
        k = cols.index(f"CPU{cpu}")
    except ValueError:
        return {}
    out = {}
    for ln in text[1:]:
        name, _, rest = ln.partition(":")
        v = rest.split()
        if len(v) > k and v[k].isdigit():
            desc = " ".join(v[len(cols):]) if len(v) > len(cols) else ""
            out[f"{name.strip()} {desc}".strip()] = int(v[k])
    return out


TRACEFS = ("/sys/kernel/tracing", "/sys/kernel/debug/tracing")


class IdleEntries:
    """Switches to the idle task per CPU, counted by a private ftrace
    instance (sched:sched_switch, filter next_pid == 0): its buffer's
    per-CPU "entries" are the count. None where tracefs is missing."""

    def __init__(self, name="watt-pack-lab"):
        self.dir = None
        for t in TRACEFS:
            if os.path.isdir(f"{t}/instances") and os.path.isdir(f"{t}/events/sched/sched_switch"):
                self.dir = f"{t}/instances/{name}"
                break
        if not self.dir:
            return
        try:
            os.mkdir(self.dir)
            write(f"{self.dir}/buffer_size_kb", "8192")
            write(f"{self.dir}/events/sched/sched_switch/filter", "next_pid == 0")
            write(f"{self.dir}/events/sched/sched_switch/enable", "1")
        except OSError:
            self.close()
            self.dir = None

    def count(self, cpu):
        if not self.dir:
            return None
        st = (read(f"{self.dir}/per_cpu/cpu{cpu}/stats") or b"").decode()
        m = re.search(r"^entries: (\d+)", st, re.M)
        o = re.search(r"^overrun: (\d+)", st, re.M)
        return int(m.group(1)) + (int(o.group(1)) if o else 0) if m else None

    def close(self):
        if self.dir and os.path.isdir(self.dir):
            try:
                write(f"{self.dir}/events/sched/sched_switch/enable", "0")
            except OSError:
                pass
            for _ in range(20):
                try:
                    os.rmdir(self.dir)
                    break
                except OSError:
                    time.sleep(0.05)


def _pid_ticks(pid):
    st = read(f"/proc/{pid}/stat")
    if not st:
        return 0
    v = st.rsplit(b")", 1)[1].split()
    return int(v[11]) + int(v[12])


class Sample:
    def __init__(self, cpu, entries=None, pids=()):
        self.t = time.monotonic()
        self.stat = _stat_cpu(cpu)
        self.idle = _cpuidle(cpu)
        self.irq = _interrupts(cpu)
        self.entries = entries.count(cpu) if entries else None
        self.machine = _cpu_line()
        self.pids = {p: _pid_ticks(p) for p in pids}


def interval(a, b):
    """CPU's figures between two Samples: a dict."""
    dt = b.t - a.t
    di, dall = b.stat[0] - a.stat[0], b.stat[1] - a.stat[1]
    r = {"seconds": dt, "stat_idle": di / dall if dall > 0 else None}
    if a.idle and b.idle:
        t = sum(b.idle[s][0] - a.idle[s][0] for s in b.idle if s in a.idle)
        u = sum(b.idle[s][1] - a.idle[s][1] for s in b.idle if s in a.idle)
        r["cpuidle_residency"] = t / (dt * 1e6)
        r["cpuidle_entries"] = u
        r["cpuidle_states"] = {s: b.idle[s][1] - a.idle[s][1] for s in b.idle if s in a.idle}
    else:
        r["cpuidle_residency"] = r["cpuidle_entries"] = None
    irq = {k: b.irq[k] - a.irq.get(k, 0) for k in b.irq}
    r["irqs"] = sum(irq.values())
    r["irq_lines"] = {k: v for k, v in sorted(irq.items(), key=lambda kv: -kv[1]) if v}
    r["idle_entries"] = (b.entries - a.entries
                         if a.entries is not None and b.entries is not None else None)
    # the machine's busy CPUs, and those of other work than PIDS (the load
    # and the agent): other tests and builds share this machine
    (mb0, mt0), (mb1, mt1) = a.machine, b.machine
    hz = os.sysconf("SC_CLK_TCK")
    r["machine_busy"] = len(online_cpus()) * (mb1 - mb0) / (mt1 - mt0) if mt1 > mt0 else 0.0
    ours = sum(b.pids[p] - a.pids.get(p, 0) for p in b.pids) / hz / dt if dt > 0 else 0.0
    r["others_busy"] = max(0.0, r["machine_busy"] - ours)
    # the residency the thresholds use: cpuidle's where there is a driver
    r["residency"] = r["cpuidle_residency"] if r["cpuidle_residency"] is not None \
        else r["stat_idle"]
    r["wakeups"] = r["cpuidle_entries"] if r["cpuidle_entries"] is not None else r["irqs"]
    return r


def measure(cpu, seconds, entries=None, pids=()):
    a = Sample(cpu, entries, pids)
    time.sleep(seconds)
    return interval(a, Sample(cpu, entries, pids))


def measure_clean(cpu, seconds, entries, pids, max_others, tries=3, say=print, watch=None):
    """measure(), again (up to TRIES times, waiting for quiet in between)
    while work other than PIDS used more than MAX_OTHERS CPUs during it: a
    sample another test's VM or build ran through says nothing about the
    packer. The last sample; its "clean" says whether it was. WATCH: a
    Cgroup whose cpuset.cpus is watched through each sample (r["watch"],
    a stopped CpusetWatch)."""
    for i in range(tries):
        w = CpusetWatch(watch) if watch else None
        r = measure(cpu, seconds, entries, pids)
        r["watch"] = w.stop() if w else None
        r["clean"] = r["others_busy"] <= max_others
        if r["clean"] or i == tries - 1:
            return r
        say(f"# discarded a {seconds:g}-s sample: other work used {r['others_busy']:.2f} CPUs "
            f"(at most {max_others:g}); {describe(r)}")
        wait_quiet(max_others, 60, say, pids)
    return r


def describe(r):
    """One line of an interval's figures."""
    parts = [f"/proc/stat idle {100 * r['stat_idle']:.2f} %"]
    if r["cpuidle_residency"] is not None:
        parts.insert(0, f"cpuidle residency {100 * r['cpuidle_residency']:.2f} %, "
                        f"{r['cpuidle_entries']} entries")
    else:
        parts.append("no cpuidle driver (residency from /proc/stat)")
    parts.append(f"{r['irqs']} interrupts ({r['irqs'] / r['seconds']:.1f}/s)")
    if r["idle_entries"] is not None:
        parts.append(f"{r['idle_entries']} idle entries ({r['idle_entries'] / r['seconds']:.1f}/s)")
    parts.append(f"the machine {r['machine_busy']:.2f} CPUs busy, other work "
                 f"{r['others_busy']:.2f}")
    return ", ".join(parts) + f" over {r['seconds']:.2f} s"


def top_irqs(r, n=6):
    return ", ".join(f"{k}: {v}" for k, v in list(r["irq_lines"].items())[:n])


# ---- the workload ----

class Load:
    """tests/helpers/dutyload: THREADS at DUTY, and on rise() RISE_THREADS
    at RISE_DUTY. Its report lines are read in a thread; loops(t0, t1)
    interpolates the loops done between two monotonic times."""

    def __init__(self, exe, threads=1, duty=0.3, rise_threads=3, rise_duty=0.5, name="watt-pack-load"):
        self.p = subprocess.Popen([exe, "--threads", str(threads), "--duty", str(duty),
                                   "--rise-threads", str(rise_threads), "--rise-duty",
                                   str(rise_duty), "--report-ms", "50", "--name", name],
                                  stdout=subprocess.PIPE, text=True)
        first = self.p.stdout.readline()
        if not first.startswith("pid="):
            raise RuntimeError(f"dutyload did not start: {first!r}")
        self.pid = int(first[4:])
        self.points = []  # (t, loops)
        self.rise_t = None
        self.lock = threading.Lock()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        keep_off_freed()
        for ln in self.p.stdout:
            m = re.match(r"t=(\S+) loops=(\d+) rise=(\d) rise_t=(\S+)", ln)
            if m:
                with self.lock:
                    self.points.append((float(m.group(1)), int(m.group(2))))
                    if m.group(3) == "1":
                        self.rise_t = float(m.group(4))

    def rise(self):
        self.p.send_signal(signal.SIGUSR1)

    def rate(self, t0, t1):
        """Loops per second between monotonic times T0 and T1 (from the
        report points nearest inside the interval)."""
        with self.lock:
            pts = [p for p in self.points if t0 <= p[0] <= t1]
        if len(pts) < 2:
            return None
        return (pts[-1][1] - pts[0][1]) / (pts[-1][0] - pts[0][0])

    def stop(self):
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
            try:
                self.p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()


def keep_off_freed():
    """Run the calling thread on the first online CPU only (Linux:
    sched_setaffinity(0) is this thread): the lab's own polling threads
    must not be what wakes the freed CPU (a 5-ms watch there was 200
    wake-ups a second of its own)."""
    os.sched_setaffinity(0, {online_cpus()[0]})


class CpusetWatch:
    """Polls a Cgroup's cpuset.cpus every STEP s in a thread: how long it
    held each value and how often it changed, so a measurement can say
    whether the set stayed packed through it."""

    def __init__(self, cg, step=0.01):
        self.cg, self.step = cg, step
        self.held, self.changes = {}, []
        self.stopping = False
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        keep_off_freed()
        last, t_last = self.cg.cpus(), time.monotonic()
        while not self.stopping:
            time.sleep(self.step)
            v, t = self.cg.cpus(), time.monotonic()
            self.held[last] = self.held.get(last, 0.0) + t - t_last
            if v != last:
                self.changes.append((t, v))
            last, t_last = v, t

    def stop(self):
        self.stopping = True
        self.thread.join()
        return self

    def share(self, value):
        total = sum(self.held.values())
        return self.held.get(value, 0.0) / total if total else 0.0

    def describe(self):
        total = sum(self.held.values())
        return (f"cpuset.cpus over {total:.2f} s: " + ", ".join(
            f"{v!r} {100 * h / total:.1f} %" for v, h in sorted(self.held.items(),
                                                                key=lambda kv: -kv[1]))
            + f"; {len(self.changes)} changes")


def poll_until(pred, timeout, step=0.001):
    """Poll PRED every STEP s until true: the monotonic time it was first
    seen true, or None."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return time.monotonic()
        time.sleep(step)
    return None


def cpulist(cpus):
    """The kernel's shortest list of CPUS: 0-1, 0,2."""
    out, cpus = [], sorted(cpus)
    i = 0
    while i < len(cpus):
        j = i
        while j + 1 < len(cpus) and cpus[j + 1] == cpus[j] + 1:
            j += 1
        out.append(str(cpus[i]) if i == j else f"{cpus[i]}-{cpus[j]}")
        i = j + 1
    return ",".join(out)


# ---- the agent ----

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Agent:
    """`watt agent --root /` with PROFILE from CONF/profiles.d, its
    journal, control socket and log in TMP, sampling every INTERVAL s
    (the default 1 s; the packer ticks at its own [pack] interval_s)."""

    def __init__(self, watt, tmp, conf, profile, interval="1"):
        self.watt, self.port = watt, free_port()
        self.sock = os.path.join(tmp, "ctl.sock")
        self.journal = os.path.join(tmp, "journal")
        self.ini = os.path.join(tmp, "agent.ini")
        # the journal is relative to the root, /
        write(self.ini, f"[agent]\njournal = {self.journal.lstrip('/')}\n")
        self.log = os.path.join(tmp, f"agent-{profile}.log")
        env = dict(os.environ, WATT_CONFIG_DIR=conf)
        args = [watt, "agent", "--root", "/", "--config", self.ini, "--profile", profile,
                "--interval", interval, "--control", self.sock,
                "--listen", f"127.0.0.1:{self.port}"]
        with open(self.log, "w") as log:
            self.p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=log, env=env)

    def get(self, path):
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=5) as r:
            return r.read().decode()

    def up(self, timeout=10):
        """True once /healthz answers; False if the agent exited."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.p.poll() is not None:
                return False
            try:
                if self.get("/healthz").startswith("ok"):
                    return True
            except OSError:
                pass
            time.sleep(0.05)
        return False

    def metrics(self):
        """{name{labels}: value} of every sample of /metrics."""
        out = {}
        try:
            text = self.get("/metrics")
        except OSError:
            return out
        for ln in text.splitlines():
            m = re.match(r"([a-zA-Z_:][\w:]*(\{[^}]*\})?) (\S+)", ln)
            if m and not ln.startswith("#"):
                try:
                    out[m.group(1)] = float(m.group(3))
                except ValueError:
                    pass
        return out

    def status(self):
        r = subprocess.run([self.watt, "ctl", "--socket", self.sock, "status"],
                           capture_output=True, text=True, timeout=5)
        try:
            return json.loads(r.stdout) if r.returncode == 0 else {}
        except ValueError:
            return {}

    def pack(self):
        """watt ctl status's member "pack" ({} without one)."""
        return self.status().get("pack") or {}

    def text(self):
        with open(self.log, errors="replace") as f:
            return f.read()

    def kill(self):
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGKILL)
            self.p.wait()

    def stop(self):
        """SIGTERM (SIGKILL after 10 s): the exit status, None if killed."""
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
            try:
                return self.p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()
                return None
        return self.p.returncode

    def restore(self):
        """`watt restore` of this agent's journal: (exit status, output)."""
        r = subprocess.run([self.watt, "restore", "--root", "/", "--journal",
                            self.journal.lstrip("/")], capture_output=True, text=True,
                           timeout=30)
        return r.returncode, (r.stdout + r.stderr).strip()
