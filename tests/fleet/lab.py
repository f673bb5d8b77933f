#!/usr/bin/env python3
"""A fleet lab on one machine, for `watt fleet run` end-to-end tests (issue 7).

Stdlib only; needs root, libvirt 9 (`/usr/sbin/libvirtd`, virsh), qemu-system-x86,
openipmi (`ipmi_sim`), ipmitool, gcc. Everything listens on 127.0.0.1 only.

What it builds
--------------
* Hosts h1..hN: each an unprivileged libvirt *session* daemon, all under one
  throw-away user `wattlab` (created by start(), removed by stop()), each with its
  own HOME/XDG dirs under WORKDIR/hN, its own host_uuid, `stdio_handler = "file"`,
  its own incoming migration port range, listening on TCP 127.0.0.1:PORT with auth none:
  URI `qemu+tcp://127.0.0.1:PORT/session` (peer-to-peer migration works).
* Each host has a BMC: `ipmi_sim` on UDP 127.0.0.1:PORT (tests/fleet/ipmi_sim),
  user admin / password secret, cipher suite 3 (`ipmitool -I lanplus -C 3`). Its
  power hook (WORKDIR/hN/bmc/power.state.hook -> `lab.py hook`) makes power real:
  `on` starts the host's libvirtd (detached; it answers ~1 s later), `off` and
  `soft-off` kill it, so the host is unreachable. If any qemu of that host still
  runs at that moment, the hook appends a VIOLATION to WORKDIR/violations.log and
  kills those qemus (a power cut kills VMs); the host's XDG_RUNTIME_DIR is wiped
  (RAM is gone). All hosts are powered on through the BMC by start().
* VMs: 128 MiB, 1 vCPU, TCG, no disk/NIC/balloon, booting the multiboot guest
  tests/fleet/guest/guest.S (built by meson: $WATT_FLEET_GUEST). Its load is
  switched from outside with a key press: idle (`hlt`, < 1 % of a CPU), busy (spin,
  ~100 %), dirty (rewrites 16 MiB on each 18.2 Hz tick, ~1 % CPU; with
  limit_migration(vm, 1) a live migration never converges). The mode lives in
  guest RAM and survives live migration.
* Incoming migrations listen on loopback only: qemu.conf migration_address is
  "::ffff:127.0.0.1" (libvirt refuses "127.0.0.1" there), ports from a range per host.

API
---
    with Lab(workdir, hosts=3, guest=path) as lab:   # start() ... stop()
        lab.hosts            -> [Host]: name, uri, migrate_uri ("tcp://127.0.0.1"),
                                bmc ("127.0.0.1:PORT"), bmc_user, bmc_password, dir
        lab.host(name)       -> Host
        lab.fleet_ini_hosts(type_name="lab") -> the [host NAME] sections, text (with bmc_password:
                                write it mode 0600, or watt refuses it)
        lab.define_vm(name, host, start=True)   persistent domain on host
        lab.set_load(vm, "idle"|"busy"|"dirty"); lab.set_busy(vm, bool)
        lab.where()          -> {vm: [hosts where it is active]}: libvirt's view over
                                the hosts that answer (every VM define_vm made is a
                                key, [] if nowhere; a crashed/frozen host's VMs are
                                missing, a migrating VM is on both hosts)
        lab.running()        -> {vm: [hosts]}: the ground truth, from the qemu
                                processes of each host, whatever libvirt says
        lab.domains(h)       -> active domain names on h, None if h does not answer
        lab.host_up(h)       -> bool: its libvirtd answers within 5 s
        lab.wait_up(h, timeout=30) / lab.wait_down(h, timeout=30)
        lab.cpu_time(vm)     -> seconds of CPU (libvirt domstats cpu.time)
        lab.cpu_share(vm, seconds=2.0) -> CPU used / wall time over that window
        lab.migrate(vm, src, dst, timeout=60) -> wall seconds (virsh p2p live)
        lab.limit_migration(vm, mib_s)  migrate-setspeed; with load "dirty" and 1 MiB/s
                               a migration never converges (a migration timeout)
        lab.ipmi(h, *args)   -> CompletedProcess of ipmitool against h's BMC
        lab.power(h, "on"|"off"|"soft"|"cycle"|"status") -> ipmitool's stdout; raises
        lab.power_state(h)   -> 0/1 as the BMC records it
        lab.power_log(h)     -> [(epoch, key, value)]: ("power", "1"), ("hook", "on rc=0")
        lab.violations()     -> [{"t", "host", "kind" ("off"|"soft-off"), "domains"}]
        lab.virsh(h, *args, timeout=30, check=True) -> CompletedProcess
      faults:
        lab.kill_daemon(h)     SIGKILL libvirtd; its qemus keep running (a crash)
        lab.restart_daemon(h)  start libvirtd again (after kill_daemon); it
                               reconnects to its running qemus
        lab.freeze_daemon(h) / lab.thaw_daemon(h)   SIGSTOP / SIGCONT libvirtd
        lab.bmc_mute(h) / lab.bmc_unmute(h)         SIGSTOP / SIGCONT ipmi_sim; requests
                               sent meanwhile queue in its UDP socket and may run
                               on unmute (a BMC that answers late)
        lab.set_watts(h, W)    the DCMI power reading while on
    `h` is a Host or its name; `vm` a domain name. Errors raise LabError.
    lab.timings: {"start": s, "stop": s}; lab.memory_kib(): RSS of the whole lab.

Measured on the 2-vCPU dev VM (other jobs running): start 0.7-2.4 s, define+start
of a VM 0.5-1.9 s, p2p live migration 0.6-1.3 s, power on -> libvirtd answers
0.2-0.75 s, stop 0.05-0.2 s; 263 MiB RSS for 3 hosts + 4 idle VMs. A busy VM shows
1.0-1.15 CPU in cpu.time (vCPU + main thread): on 2 CPUs, 2 busy VMs fill them.

stop() is idempotent and also runs on SIGTERM (inside `with`) and at exit: it
kills every process of user wattlab (libvirtd, qemu) and every ipmi_sim it
started, removes the user, chowns WORKDIR back to root. Only one lab runs at a
time (flock on /tmp/wattlab.lock; a second waits up to `lock_wait` s). A lab left
behind by a SIGKILL is cleaned up by the next start() (/tmp/wattlab.state).

Keep WORKDIR short (unix socket paths must stay under 108 bytes), e.g.
tempfile.mkdtemp(prefix="wl", dir="/tmp").
"""
import atexit
import fcntl
import json
import os
import pwd
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
IPMI_SIM_DIR = os.path.join(HERE, "ipmi_sim")
USER = "wattlab"
LOCK = "/tmp/wattlab.lock"
STATE = "/tmp/wattlab.state"
LIBVIRTD = "/usr/sbin/libvirtd"
QEMU = "/usr/bin/qemu-system-x86_64"
BMC_USER, BMC_PASSWORD = "admin", "secret"
# Ports other helpers of issue 7 use on this machine; never pick them.
RESERVED = set(range(16711, 16713)) | set(range(49700, 49800)) | set(range(9811, 9813))
MIGRATION_PORTS = 8  # per host: incoming migrations at once
KEYS = {"idle": "KEY_I", "busy": "KEY_B", "dirty": "KEY_D"}


class LabError(Exception):
    pass


# ---------------------------------------------------------------- processes

def _stat(pid):
    """(state letter, start time in clock ticks) of PID, or None if gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            rest = f.read().rsplit(")", 1)[1].split()
        return rest[0], int(rest[19])
    except (OSError, IndexError, ValueError):
        return None


def _alive(pid, start=None):
    """PID exists, is not a zombie and (if START is given) is the same process."""
    st = _stat(pid)
    return st is not None and st[0] not in "ZX" and (start is None or st[1] == start)


def _stopped(pid):
    st = _stat(pid)
    return st is not None and st[0] in "Tt"


def _kill(pid, sig):
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def _wait_gone(pids, timeout):
    end = time.monotonic() + timeout
    while any(_alive(p) for p in pids) and time.monotonic() < end:
        time.sleep(0.02)
    return not any(_alive(p) for p in pids)


def _uid_pids(uid):
    """PIDs of live processes whose real uid is UID."""
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/status") as f:
                for line in f:
                    if line.startswith("Uid:"):
                        if int(line.split()[1]) == uid and _alive(int(d)):
                            out.append(int(d))
                        break
        except OSError:
            pass
    return out


def _read_pidfile(path):
    """(pid, start ticks) from a pidfile written by _write_pidfile, or None."""
    try:
        with open(path) as f:
            pid, start = f.read().split()
        return int(pid), int(start)
    except (OSError, ValueError):
        return None


def _write_pidfile(path, pid):
    st = _stat(pid)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(f"{pid} {st[1] if st else 0}\n")
    os.replace(tmp, path)


def _pidfile_alive(path):
    p = _read_pidfile(path)
    return p[0] if p and _alive(*p) else None


def _children():
    """PIDs of this process's children (all threads), from /proc (CONFIG_PROC_CHILDREN)."""
    out = []
    try:
        for tid in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{tid}/children") as f:
                out += [int(x) for x in f.read().split()]
    except OSError:
        pass
    return out


def _uid_of(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("Uid:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


class _Reaper:
    """Makes this process the child subreaper and reaps the zombies of UID every
    50 ms. libvirt double-forks qemu and the BMC hook detaches libvirtd, so both end
    up as orphans; PID 1 may reap them late (here ~2 s) or never (a container), and
    libvirt waits for a stopped qemu to vanish (kill(pid, 0)) before a migration or
    destroy returns. Only processes of UID are reaped: subprocess's own children
    (virsh, ipmitool: root) keep their exit status."""

    PR_SET_CHILD_SUBREAPER = 36

    def __init__(self, uid):
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(self.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
            raise LabError(f"prctl(PR_SET_CHILD_SUBREAPER): {os.strerror(ctypes.get_errno())}")
        self.uid = uid
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="lab-reaper", daemon=True)
        self._thread.start()

    def reap(self):
        for pid in _children():
            st = _stat(pid)
            if st and st[0] == "Z" and _uid_of(pid) == self.uid:
                try:
                    os.waitpid(pid, os.WNOHANG)
                except ChildProcessError:
                    pass

    def _run(self):
        while not self._stop.wait(0.05):
            self.reap()

    def stop(self):
        self._stop.set()
        self._thread.join()
        self.reap()


# ---------------------------------------------------------------- one host's daemon (also the hook)

def _daemon_env(cfg):
    d = cfg["dir"]
    return {"HOME": f"{d}/home", "XDG_CONFIG_HOME": f"{d}/config",
            "XDG_RUNTIME_DIR": f"{d}/run", "XDG_CACHE_HOME": f"{d}/cache",
            "XDG_DATA_HOME": f"{d}/data", "USER": cfg["user"], "LOGNAME": cfg["user"],
            "PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C"}


def daemon_start(cfg):
    """Start CFG's libvirtd as the lab user, detached; no-op if it runs. Returns its PID."""
    pid = _pidfile_alive(cfg["pidfile"])
    if pid:
        return pid
    run = f"{cfg['dir']}/run"
    os.makedirs(run, mode=0o700, exist_ok=True)
    os.chown(run, cfg["uid"], cfg["gid"])
    with open(cfg["log"], "ab") as log:
        p = subprocess.Popen([LIBVIRTD, "--listen"], env=_daemon_env(cfg), cwd=f"{cfg['dir']}/home",
                             user=cfg["uid"], group=cfg["gid"], extra_groups=[],
                             stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                             start_new_session=True)
    _write_pidfile(cfg["pidfile"], p.pid)
    return p.pid


def host_qemus(cfg):
    """{pid: domain name} of the qemu processes of CFG's host (their command line or
    environment names the host's directory)."""
    mark = (cfg["dir"] + "/").encode()
    out = {}
    for pid in _uid_pids(cfg["uid"]):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
            if not os.path.basename(argv[0]).startswith(b"qemu-system"):
                continue
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = f.read()
        except OSError:
            continue
        if mark not in b"\0".join(argv) and mark not in env:
            continue
        name = "?"
        for i, a in enumerate(argv[:-1]):
            if a == b"-name":
                m = re.match(rb"(?:guest=)?((?:[^,]|,,)+)", argv[i + 1])
                name = m.group(1).replace(b",,", b",").decode(errors="replace") if m else "?"
        out[pid] = name
    return out


def daemon_stop(cfg, kind):
    """Power loss (KIND "off" or "soft-off") for CFG's host: record a violation if a
    qemu of the host runs, kill its qemus and libvirtd, wipe its runtime dir."""
    qemus = host_qemus(cfg)
    if qemus:
        line = (f"{time.time():.3f} {cfg['name']} {kind} "
                f"{','.join(sorted(set(qemus.values())))}\n")
        with open(cfg["violations"], "a") as f:
            f.write(line)
    pid = _pidfile_alive(cfg["pidfile"])
    if pid and kind == "soft-off":
        _kill(pid, signal.SIGCONT)
        _kill(pid, signal.SIGTERM)
        _wait_gone([pid], 1.0)
    victims = ([pid] if pid else []) + list(qemus)
    for p in victims:
        _kill(p, signal.SIGKILL)
    if not _wait_gone(victims, 5.0):
        raise LabError(f"{cfg['name']}: processes {victims} survive SIGKILL")
    shutil.rmtree(f"{cfg['dir']}/run", ignore_errors=True)
    try:
        os.unlink(cfg["pidfile"])
    except FileNotFoundError:
        pass


def hook_main(argv):
    """`lab.py hook HOST.json on|off|soft-off`: the BMC's power hook (chassis.sh)."""
    if len(argv) != 2 or argv[1] not in ("on", "off", "soft-off"):
        print("usage: lab.py hook HOST.json on|off|soft-off", file=sys.stderr)
        return 2
    with open(argv[0]) as f:
        cfg = json.load(f)
    try:
        if argv[1] == "on":
            daemon_start(cfg)
        else:
            daemon_stop(cfg, argv[1])
    except (OSError, LabError) as e:
        print(f"{time.time():.3f} hook {argv[1]} {cfg['name']}: {e}", file=sys.stderr)
        return 1
    return 0


# ---------------------------------------------------------------- ports

def _free_port(kind):
    for _ in range(200):
        s = socket.socket(socket.AF_INET, kind)
        try:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        finally:
            s.close()
        if port not in RESERVED:
            return port
    raise LabError("no free port")


def _port_free(port):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind(("127.0.0.1", port))
        return True
    except OSError:
        return False
    finally:
        s.close()


def _free_range(n, taken):
    """N consecutive free TCP ports in 40000-47999, none in TAKEN or RESERVED."""
    for _ in range(500):
        base = random.randrange(40000, 48000 - n)
        ports = range(base, base + n)
        if not any(p in taken or p in RESERVED for p in ports) and all(map(_port_free, ports)):
            return base
    raise LabError("no free migration port range")


# ---------------------------------------------------------------- the lab

class Host:
    """One lab host. Attributes: name, uri, migrate_uri, bmc, bmc_user, bmc_password,
    dir, port (libvirtd TCP), bmc_port (UDP), migration_ports (range)."""

    def __init__(self, name, workdir, port, bmc_port, mig_base):
        self.name = name
        self.dir = os.path.join(workdir, name)
        self.port = port
        self.uri = f"qemu+tcp://127.0.0.1:{port}/session"
        self.migrate_uri = "tcp://127.0.0.1"
        self.bmc_port = bmc_port
        self.bmc = f"127.0.0.1:{bmc_port}"
        self.bmc_user, self.bmc_password = BMC_USER, BMC_PASSWORD
        self.migration_ports = range(mig_base, mig_base + MIGRATION_PORTS)
        self.bmc_dir = os.path.join(self.dir, "bmc")
        self.cfg_path = os.path.join(self.dir, "host.json")
        self.pidfile = os.path.join(self.dir, "libvirtd.pid")
        self.ipmi_sim = None  # Popen

    def __repr__(self):
        return f"Host({self.name}, {self.uri}, bmc {self.bmc})"


class Lab:
    def __init__(self, workdir, hosts=3, guest=None, lock_wait=240.0):
        self.workdir = os.path.abspath(workdir)
        self.n_hosts = hosts
        self.guest_src = guest or os.environ.get("WATT_FLEET_GUEST")
        self.lock_wait = lock_wait
        self.hosts = []
        self.vms = []
        self.violations_path = os.path.join(self.workdir, "violations.log")
        self.guest = os.path.join(self.workdir, "guest.elf")
        self.uid = self.gid = None
        self._lock_fd = None
        self._started = False
        self._reaper = None
        self._old_sigterm = None
        self.timings = {}  # seconds: "start", "stop"

    # -------- context manager and signals
    def __enter__(self):
        if threading_main():
            self._old_sigterm = signal.signal(signal.SIGTERM, _sigterm)
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc):
        self.stop()
        if self._old_sigterm is not None:
            signal.signal(signal.SIGTERM, self._old_sigterm)
            self._old_sigterm = None
        return False

    # -------- start
    def start(self):
        t0 = time.monotonic()
        if os.geteuid() != 0:
            raise LabError("the lab needs root (useradd, ipmi_sim, setuid libvirtd)")
        if not self.guest_src or not os.path.isfile(self.guest_src):
            raise LabError(f"guest kernel not found: {self.guest_src!r} (set WATT_FLEET_GUEST)")
        self._lock()
        atexit.register(self.stop)
        self._started = True
        self._cleanup_stale()
        self._make_user()
        self._reaper = _Reaper(self.uid)
        self._make_hosts()
        self._save_state()
        for h in self.hosts:
            self._start_bmc(h)
        self._save_state()
        for h in self.hosts:
            self.power(h, "on")
        for h in self.hosts:
            self.wait_up(h, 60)
        self.timings["start"] = time.monotonic() - t0

    def _lock(self):
        self._lock_fd = os.open(LOCK, os.O_RDWR | os.O_CREAT, 0o644)
        end = time.monotonic() + self.lock_wait
        while True:
            try:
                fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                if time.monotonic() > end:
                    os.close(self._lock_fd)
                    self._lock_fd = None
                    raise LabError(f"another lab holds {LOCK} for more than {self.lock_wait} s")
                time.sleep(0.5)

    def _cleanup_stale(self):
        """Undo a lab that died without stop() (we hold the lock, so it is dead)."""
        state = {}
        try:
            with open(STATE) as f:
                state = json.load(f)
        except (OSError, ValueError):
            pass
        for pid, start in state.get("ipmi_sims", []):
            if _alive(pid, start):
                _kill(pid, signal.SIGKILL)
        try:
            pw = pwd.getpwnam(USER)
        except KeyError:
            pw = None
        if pw:
            if state.get("user") != USER:
                raise LabError(f"user {USER} exists but no lab made it ({STATE} does not name "
                               f"it); remove it by hand")
            self._kill_user(pw.pw_uid)
            p = _passwd_tool(["userdel", USER])
            if p.returncode != 0:
                raise LabError(f"userdel {USER} (left by a dead lab): {p.stderr.strip()}")
        if os.path.exists(STATE):
            os.unlink(STATE)

    def _save_state(self):
        st = {"user": USER if self.uid is not None else None, "workdir": self.workdir,
              "ipmi_sims": [[h.ipmi_sim.pid, _stat(h.ipmi_sim.pid)[1]] for h in self.hosts
                            if h.ipmi_sim and _stat(h.ipmi_sim.pid)]}
        with open(STATE + ".tmp", "w") as f:
            json.dump(st, f)
        os.replace(STATE + ".tmp", STATE)

    def _make_user(self):
        with open(STATE, "w") as f:  # name the user before it exists: a crash between is cleaned
            json.dump({"user": USER, "workdir": self.workdir, "ipmi_sims": []}, f)
        p = _passwd_tool(["useradd", "--system", "--no-create-home", "--home-dir", self.workdir,
                          "--shell", "/usr/sbin/nologin", "--user-group", USER])
        if p.returncode != 0:
            raise LabError(f"useradd {USER}: {p.stderr.strip()}")
        pw = pwd.getpwnam(USER)
        self.uid, self.gid = pw.pw_uid, pw.pw_gid

    def _make_hosts(self):
        os.makedirs(self.workdir, exist_ok=True)
        os.chmod(self.workdir, 0o755)  # the user must reach its dirs and the guest
        d = os.path.dirname(self.workdir)
        while d != "/":
            if not os.stat(d).st_mode & 0o001:
                raise LabError(f"{d} is not searchable by others (mode "
                               f"{oct(os.stat(d).st_mode & 0o777)}): user {USER} cannot "
                               f"reach the lab in {self.workdir}")
            d = os.path.dirname(d)
        shutil.copyfile(self.guest_src, self.guest)
        os.chmod(self.guest, 0o644)
        open(self.violations_path, "a").close()
        so = os.path.join(self.workdir, "dcmi_power.so")
        cc = os.environ.get("CC", "gcc").split()
        p = subprocess.run(cc + ["-shared", "-fPIC", "-O2", "-o", so,
                                 os.path.join(IPMI_SIM_DIR, "dcmi_power.c")],
                           capture_output=True, text=True)
        if p.returncode != 0:
            raise LabError(f"building dcmi_power.so: {p.stderr.strip()}")
        taken = set()
        for i in range(1, self.n_hosts + 1):
            port, bmc_port = _free_port(socket.SOCK_STREAM), _free_port(socket.SOCK_DGRAM)
            mig = _free_range(MIGRATION_PORTS, taken | {port})
            taken |= set(range(mig, mig + MIGRATION_PORTS)) | {port}
            h = Host(f"h{i}", self.workdir, port, bmc_port, mig)
            self._write_host(h, so)
            self.hosts.append(h)
        if len(self.hosts[0].dir) + 60 > 107:
            raise LabError(f"workdir {self.workdir} is too long for unix socket paths")

    def _write_host(self, h, so):
        d = h.dir
        for sub in ("home", "config/libvirt", "run", "cache", "data", "bmc/state"):
            os.makedirs(os.path.join(d, sub), exist_ok=True)
        with open(f"{d}/config/libvirt/libvirtd.conf", "w") as f:
            f.write(f'listen_tls = 0\nlisten_tcp = 1\nlisten_addr = "127.0.0.1"\n'
                    f'tcp_port = "{h.port}"\nauth_tcp = "none"\nhost_uuid = "{uuid.uuid4()}"\n')
        with open(f"{d}/config/libvirt/qemu.conf", "w") as f:
            # Incoming migrations listen on loopback only (else qemu listens on
            # every address). libvirt refuses "127.0.0.1" there (not "a local
            # address"); its IPv4-mapped form passes and accepts 127.0.0.1.
            f.write(f'stdio_handler = "file"\nmigration_address = "::ffff:127.0.0.1"\n'
                    f'migration_port_min = {h.migration_ports[0]}\n'
                    f'migration_port_max = {h.migration_ports[-1]}\n')
        for p in ("home", "config", "run", "cache", "data"):
            _chown_tree(os.path.join(d, p), self.uid, self.gid)
        os.chmod(os.path.join(d, "run"), 0o700)
        cfg = {"name": h.name, "dir": d, "user": USER, "uid": self.uid, "gid": self.gid,
               "pidfile": h.pidfile, "log": os.path.join(d, "libvirtd.log"),
               "violations": self.violations_path}
        with open(h.cfg_path, "w") as f:
            json.dump(cfg, f)
        b = h.bmc_dir
        shutil.copyfile(so, f"{b}/dcmi_power.so")
        with open(f"{b}/watts", "w") as f:
            f.write("150\n")
        with open(f"{b}/power.state", "w") as f:
            f.write("0\n")
        with open(os.path.join(IPMI_SIM_DIR, "lan.conf.in")) as f:
            conf = f.read()
        for k, v in (("@NAME@", f"wattlab-{h.name}"), ("@PORT@", str(h.bmc_port)),
                     ("@WORK@", b), ("@SRC@", IPMI_SIM_DIR)):
            conf = conf.replace(k, v)
        with open(f"{b}/lan.conf", "w") as f:
            f.write(conf)
        hook = f"{b}/power.state.hook"
        with open(hook, "w") as f:
            f.write(f"#!/bin/sh\nexec {sys.executable} {os.path.abspath(__file__)} hook "
                    f"{h.cfg_path} \"$@\"\n")
        os.chmod(hook, 0o755)

    def _start_bmc(self, h):
        b = h.bmc_dir
        with open(f"{b}/ipmi_sim.log", "ab") as log:
            h.ipmi_sim = subprocess.Popen(
                ["ipmi_sim", "-n", "-c", f"{b}/lan.conf", "-f", f"{IPMI_SIM_DIR}/pmsim.emu",
                 "-s", f"{b}/state"], cwd=b, stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT, start_new_session=True)
        end = time.monotonic() + 5
        while self.ipmi(h, "mc", "info", retries=1).returncode != 0:
            if h.ipmi_sim.poll() is not None or time.monotonic() > end:
                raise LabError(f"{h.name}: ipmi_sim on {h.bmc} does not answer; log: "
                               f"{_tail(f'{b}/ipmi_sim.log')}")
            time.sleep(0.1)

    # -------- stop
    def stop(self):
        """Kill everything the lab started, remove the user. Idempotent."""
        if not self._started:
            return
        t0 = time.monotonic()
        errors = []
        for h in self.hosts:  # no BMC request may start a daemon from here on
            for p in (f"{h.bmc_dir}/power.state.hook",):
                try:
                    os.unlink(p)
                except FileNotFoundError:
                    pass
        for h in self.hosts:
            if h.ipmi_sim and h.ipmi_sim.poll() is None:
                h.ipmi_sim.kill()
        for h in self.hosts:
            if h.ipmi_sim:
                try:
                    h.ipmi_sim.wait(5)
                except subprocess.TimeoutExpired:
                    errors.append(f"ipmi_sim {h.ipmi_sim.pid} of {h.name} survives SIGKILL")
        if self.uid is not None:
            if not self._kill_user(self.uid):
                errors.append(f"processes of {USER} survive SIGKILL")
            if self._reaper:
                self._reaper.stop()
                self._reaper = None
            p = _passwd_tool(["userdel", USER])
            if p.returncode not in (0, 6):  # 6: no such user
                errors.append(f"userdel {USER}: {p.stderr.strip()}")
            _chown_tree(self.workdir, 0, 0)
            self.uid = None
        try:
            os.unlink(STATE)
        except FileNotFoundError:
            pass
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None
        self._started = False
        self.timings["stop"] = time.monotonic() - t0
        if errors:
            raise LabError("; ".join(errors))

    @staticmethod
    def _kill_user(uid):
        for _ in range(5):
            pids = _uid_pids(uid)
            if not pids:
                return True
            for p in pids:
                _kill(p, signal.SIGCONT)
                _kill(p, signal.SIGKILL)
            _wait_gone(pids, 2.0)
        return not _uid_pids(uid)

    # -------- hosts
    def host(self, h):
        if isinstance(h, Host):
            return h
        for x in self.hosts:
            if x.name == h:
                return x
        raise LabError(f"no host {h!r}")

    def _cfg(self, h):
        with open(self.host(h).cfg_path) as f:
            return json.load(f)

    def daemon_pid(self, h):
        """PID of H's libvirtd, None if it does not run."""
        return _pidfile_alive(self.host(h).pidfile)

    def fleet_ini_hosts(self, type_name="lab"):
        out = []
        for h in self.hosts:
            out.append(f"[host {h.name}]\ntype = {type_name}\nuri = {h.uri}\n"
                       f"migrate_uri = {h.migrate_uri}\nbmc = {h.bmc}\n"
                       f"bmc_user = {h.bmc_user}\nbmc_password = {h.bmc_password}\n")
        return "\n".join(out)

    def virsh(self, h, *args, timeout=30, check=True):
        h = self.host(h)
        try:
            p = subprocess.run(["virsh", "-q", "-c", h.uri, *args], capture_output=True,
                               text=True, timeout=timeout, stdin=subprocess.DEVNULL,
                               env=_client_env())
        except subprocess.TimeoutExpired:
            if check:
                raise LabError(f"{h.name}: virsh {' '.join(args)}: no answer in {timeout} s")
            return subprocess.CompletedProcess(args, 124, "", "timeout")
        if check and p.returncode != 0:
            raise LabError(f"{h.name}: virsh {' '.join(args)}: {p.stderr.strip()}")
        return p

    def domains(self, h, timeout=10):
        """Active domains on H, or None if its daemon is down, frozen or silent."""
        pid = self.daemon_pid(h)
        if not pid or _stopped(pid):
            return None
        p = self.virsh(h, "list", "--name", timeout=timeout, check=False)
        if p.returncode != 0:
            return None
        return [x.strip() for x in p.stdout.splitlines() if x.strip()]

    def host_up(self, h):
        return self.domains(h, timeout=5) is not None

    def wait_up(self, h, timeout=30):
        h = self.host(h)
        end = time.monotonic() + timeout
        while not self.host_up(h):
            if not self.daemon_pid(h) and self.power_state(h) == 1:
                raise LabError(f"{h.name}: libvirtd exited; log: {_tail(self._cfg(h)['log'])}")
            if time.monotonic() > end:
                raise LabError(f"{h.name}: libvirtd does not answer on {h.uri} after {timeout} s;"
                               f" log: {_tail(self._cfg(h)['log'])}")
            time.sleep(0.1)

    def wait_down(self, h, timeout=30):
        h = self.host(h)
        end = time.monotonic() + timeout
        while self.daemon_pid(h) or _tcp_open(h.port):
            if time.monotonic() > end:
                raise LabError(f"{h.name}: still up after {timeout} s")
            time.sleep(0.1)

    def running(self):
        out = {vm: [] for vm in self.vms}
        for h in self.hosts:
            for name in sorted(set(host_qemus(self._cfg(h)).values())):
                out.setdefault(name, []).append(h.name)
        return out

    def where(self):
        out = {vm: [] for vm in self.vms}
        for h in self.hosts:
            for d in self.domains(h) or []:
                out.setdefault(d, []).append(h.name)
        return out

    # -------- VMs
    def define_vm(self, name, host, start=True):
        h = self.host(host)
        xml = os.path.join(self.workdir, f"{name}.xml")
        with open(xml, "w") as f:
            f.write(_domain_xml(name, self.guest))
        os.chmod(xml, 0o644)
        self.virsh(h, "define", xml)
        if name not in self.vms:
            self.vms.append(name)
        if start:
            self.virsh(h, "start", name)

    def _running_on(self, vm):
        for h in self.hosts:
            if vm in (self.domains(h) or []):
                st = self.virsh(h, "domstate", vm, check=False).stdout.strip()
                if st == "running":
                    return h
        raise LabError(f"VM {vm} runs on no host that answers")

    def set_load(self, vm, mode, host=None):
        if mode not in KEYS:
            raise LabError(f"load mode {mode!r}: want one of {', '.join(KEYS)}")
        if host:
            self.virsh(self.host(host), "send-key", vm, KEYS[mode])
            return
        # a controller may migrate VM between the lookup and the key: look
        # again (the CI lab on a loaded machine lost vm2 from h1 that way)
        why = ""
        for attempt in range(10):
            try:
                h = self._running_on(vm)
            except LabError as e:  # mid-migration: running nowhere for a moment
                why = str(e)
                time.sleep(0.5)
                continue
            p = self.virsh(h, "send-key", vm, KEYS[mode], check=False)
            if p.returncode == 0:
                return
            why = f"{h.name}: virsh send-key {vm} {KEYS[mode]}: {p.stderr.strip()}"
            if "Domain not found" not in p.stderr and "not running" not in p.stderr:
                break
            time.sleep(0.5)
        raise LabError(why)

    def set_busy(self, vm, busy, host=None):
        self.set_load(vm, "busy" if busy else "idle", host)

    def cpu_time(self, vm, host=None):
        h = self.host(host) if host else self._running_on(vm)
        out = self.virsh(h, "domstats", "--cpu-total", vm).stdout
        m = re.search(r"cpu\.time=(\d+)", out)
        if not m:
            raise LabError(f"{h.name}: no cpu.time in domstats of {vm}: {out!r}")
        return int(m.group(1)) / 1e9

    def cpu_share(self, vm, seconds=2.0, host=None):
        h = self.host(host) if host else self._running_on(vm)
        c0, t0 = self.cpu_time(vm, h), time.monotonic()
        time.sleep(seconds)
        return (self.cpu_time(vm, h) - c0) / (time.monotonic() - t0)

    def limit_migration(self, vm, mib_s):
        """Cap VM's migration bandwidth (MiB/s, 0: none) on the host it runs on. With
        set_load(vm, "dirty") and 1 MiB/s, a live migration never converges."""
        self.virsh(self._running_on(vm), "migrate-setspeed", vm, str(int(mib_s)))

    def migrate(self, vm, src, dst, timeout=60):
        src, dst = self.host(src), self.host(dst)
        t0 = time.monotonic()
        self.virsh(src, "migrate", "--live", "--p2p", "--persistent", "--undefinesource",
                   "--migrateuri", dst.migrate_uri, vm, dst.uri, timeout=timeout)
        return time.monotonic() - t0

    # -------- BMC
    def ipmi(self, h, *args, retries=2, timeout=20):
        h = self.host(h)
        cmd = ["ipmitool", "-I", "lanplus", "-C", "3", "-H", "127.0.0.1", "-p", str(h.bmc_port),
               "-U", h.bmc_user, "-P", h.bmc_password, "-N", "1", "-R", str(retries), *args]
        try:
            return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                                  stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            return subprocess.CompletedProcess(cmd, 124, "", "timeout")

    def power(self, h, action):
        if action not in ("on", "off", "soft", "status", "cycle"):
            raise LabError(f"power action {action!r}")
        h = self.host(h)
        p = self.ipmi(h, "chassis", "power", action)
        if p.returncode != 0:
            raise LabError(f"{h.name}: ipmitool chassis power {action}: "
                           f"{(p.stderr or p.stdout).strip()}")
        return p.stdout.strip()

    def power_state(self, h):
        with open(f"{self.host(h).bmc_dir}/power.state") as f:
            return int(f.read().strip())

    def power_log(self, h):
        out = []
        try:
            with open(f"{self.host(h).bmc_dir}/power.state.log") as f:
                for line in f:
                    parts = line.split(None, 1)
                    if len(parts) < 2:
                        continue
                    rest = parts[1].strip()
                    if rest.startswith("hook "):
                        out.append((int(parts[0]), "hook", rest[5:]))
                    elif "=" in rest:
                        k, v = rest.split("=", 1)
                        out.append((int(parts[0]), k, v))
        except FileNotFoundError:
            pass
        return out

    def set_watts(self, h, watts):
        with open(f"{self.host(h).bmc_dir}/watts", "w") as f:
            f.write(f"{int(watts)}\n")

    def violations(self):
        out = []
        try:
            with open(self.violations_path) as f:
                for line in f:
                    t, host, kind, doms = line.split()
                    out.append({"t": float(t), "host": host, "kind": kind,
                                "domains": doms.split(",")})
        except FileNotFoundError:
            pass
        return out

    # -------- faults
    def kill_daemon(self, h):
        pid = self.daemon_pid(h)
        if not pid:
            raise LabError(f"{self.host(h).name}: libvirtd does not run")
        _kill(pid, signal.SIGKILL)
        _wait_gone([pid], 5)

    def restart_daemon(self, h):
        pid = self.daemon_pid(h)
        if pid:
            _kill(pid, signal.SIGCONT)
            _kill(pid, signal.SIGTERM)
            if not _wait_gone([pid], 5):
                _kill(pid, signal.SIGKILL)
                _wait_gone([pid], 5)
        daemon_start(self._cfg(h))

    def freeze_daemon(self, h):
        self._signal_daemon(h, signal.SIGSTOP)

    def thaw_daemon(self, h):
        self._signal_daemon(h, signal.SIGCONT)

    def _signal_daemon(self, h, sig):
        pid = self.daemon_pid(h)
        if not pid:
            raise LabError(f"{self.host(h).name}: libvirtd does not run")
        _kill(pid, sig)

    def bmc_mute(self, h):
        self.host(h).ipmi_sim.send_signal(signal.SIGSTOP)

    def bmc_unmute(self, h):
        self.host(h).ipmi_sim.send_signal(signal.SIGCONT)

    def memory_kib(self):
        """Resident memory of every lab process (libvirtd, qemu, ipmi_sim), KiB."""
        pids = (_uid_pids(self.uid) if self.uid is not None else []) + \
            [h.ipmi_sim.pid for h in self.hosts if h.ipmi_sim and h.ipmi_sim.poll() is None]
        total = 0
        for pid in pids:
            try:
                with open(f"/proc/{pid}/status") as f:
                    for line in f:
                        if line.startswith("VmRSS:"):
                            total += int(line.split()[1])
            except OSError:
                pass
        return total


# ---------------------------------------------------------------- helpers

def threading_main():
    return threading.current_thread() is threading.main_thread()


def _sigterm(signum, frame):
    raise SystemExit(128 + signum)  # unwinds through Lab.__exit__ -> stop()


def _passwd_tool(argv):
    """useradd/userdel, retried for 5 s while another tool locks /etc/passwd or
    /etc/group (rc 1, 10) or a just-killed process of the user lingers (userdel rc 8)."""
    end = time.monotonic() + 5
    while True:
        p = subprocess.run(argv, capture_output=True, text=True)
        if p.returncode not in (1, 8, 10) or time.monotonic() > end:
            return p
        time.sleep(0.2)


def _client_env():
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LIBVIRT_", "VIRSH_"))}
    env["LANG"] = "C"
    return env


def _chown_tree(path, uid, gid):
    for root, dirs, files in os.walk(path):
        os.lchown(root, uid, gid)
        for n in dirs + files:
            os.lchown(os.path.join(root, n), uid, gid)


def _tcp_open(port):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def _tail(path, n=800):
    try:
        with open(path, errors="replace") as f:
            return f.read()[-n:]
    except OSError as e:
        return str(e)


def _domain_xml(name, kernel):
    return f"""<domain type='qemu'>
  <name>{name}</name>
  <memory unit='MiB'>128</memory>
  <vcpu>1</vcpu>
  <os>
    <type arch='x86_64' machine='pc'>hvm</type>
    <kernel>{kernel}</kernel>
  </os>
  <on_poweroff>destroy</on_poweroff>
  <on_reboot>restart</on_reboot>
  <on_crash>destroy</on_crash>
  <devices>
    <emulator>{QEMU}</emulator>
    <controller type='usb' model='none'/>
    <input type='keyboard' bus='ps2'/>
    <memballoon model='none'/>
  </devices>
</domain>
"""


if __name__ == "__main__":
    if len(sys.argv) >= 2 and sys.argv[1] == "hook":
        sys.exit(hook_main(sys.argv[2:]))
    print(__doc__)
    sys.exit(2)
