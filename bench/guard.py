#!/usr/bin/env python3
"""What one tick of the latency guard's workload probe costs.

The guard of a `watt agent` profile probes its workload every tick (up to
once a second). This measures one probe of each kind on this machine's
kernel, through build/bench/bench_guard (bench/guard.c, built on demand):

  port (netlink)  the sockets of that port only, by NETLINK_SOCK_DIAG with
                  a bytecode filter on the local port (as ss does);
  port (text)     the text tables net/tcp and tcp6, as before (and still on
                  a recorded root or where netlink is refused);
  process:NAME    this script's own comm: a listing of /proc and the stat
                  files of new processes and those with the name (every
                  10th tick all of them, so the mean is above the median);
  cgroup:PATH     this script's own cgroup: one cpu.stat read.

with 0, 1,000 and 10,000 ESTABLISHED loopback connections to the port,
both ends opened by this script (so the TCP table holds twice that many
sockets). Per probe: median (and mean) wall and thread-CPU µs over up to
--ticks probes, at most --seconds each. Figures, not a test (it exits 0
whatever they are); finishes in well under 60 s.
"""
import argparse
import json
import os
import platform
import resource
import socket
import struct
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchutil import Deadline  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
# close() with a reset: no 2N sockets left in TIME_WAIT for a minute, which
# every later walk of the TCP table (and the next run) would pay for
LINGER_RST = struct.pack("ii", 1, 0)


def build(builddir):
    exe = os.path.join(builddir, "bench", "bench_guard")
    r = subprocess.run(["ninja", "-C", builddir, "bench/bench_guard"], capture_output=True,
                       text=True)
    if r.returncode != 0 or not os.access(exe, os.X_OK):
        sys.exit(f"guard.py: cannot build {exe}:\n{r.stdout}{r.stderr}")
    return exe


def raise_nofile(n):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft >= n:
        return True
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (n, max(n, hard)))
        return True
    except (ValueError, OSError):
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (ValueError, OSError):
            pass
        return False


def read(path, default=""):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return default


def own_cgroup():
    """This process's cgroup v2 path (relative), "" for the root."""
    for line in read("/proc/self/cgroup").splitlines():
        if line.startswith("0::"):
            return line[3:].strip("/")
    return ""


def time_wait():
    """TIME_WAIT sockets (IPv4) now: the text table lists them and every
    walk of the hash table visits them."""
    for line in read("/proc/net/sockstat").splitlines():
        f = line.split()
        if f and f[0] == "TCP:" and "tw" in f:
            return f[f.index("tw") + 1]
    return "?"


def nprocs():
    return sum(1 for d in os.listdir("/proc") if d.isdigit())


class Conns:
    """A loopback listener and N connections to it: this process holds the
    listener and the accepted ends, a child (this script with --clients)
    the connecting ends, so each stays under RLIMIT_NOFILE."""

    def __init__(self):
        self.lsock = socket.socket()
        self.lsock.bind(("127.0.0.1", 0))
        self.lsock.listen(4096)
        self.port = self.lsock.getsockname()[1]
        self.accepted = []
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()
        self.child = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--clients",
                                       str(self.port)], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, text=True)

    def _accept(self):
        while True:
            try:
                a, _ = self.lsock.accept()
            except OSError:
                return
            a.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, LINGER_RST)
            self.accepted.append(a)

    def grow(self, n):
        self.child.stdin.write(f"{n}\n")
        self.child.stdin.flush()
        line = self.child.stdout.readline().strip()
        if line != "ok":
            raise RuntimeError(f"cannot open {n} connections: {line or 'the client died'}")
        end = time.monotonic() + 20
        while len(self.accepted) < n and time.monotonic() < end:
            time.sleep(0.01)
        if len(self.accepted) < n:
            raise RuntimeError(f"only {len(self.accepted)} of {n} connections accepted")

    def close(self):
        self.child.stdin.close()
        self.child.wait(timeout=30)
        self.lsock.shutdown(socket.SHUT_RDWR)
        self.lsock.close()
        self.thread.join(timeout=5)
        for s in self.accepted:
            s.close()


def clients(port):
    """--clients PORT: per line N on stdin, connect until N are open; "ok"."""
    socks = []
    for line in sys.stdin:
        n = int(line)
        raise_nofile(n + 64)
        try:
            while len(socks) < n:
                c = socket.create_connection(("127.0.0.1", port))
                c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, LINGER_RST)
                socks.append(c)
        except OSError as e:
            print(f"after {len(socks)}: {e}", flush=True)
            continue
        print("ok", flush=True)
    return 0


def probe(exe, spec, text, ticks, seconds):
    cmd = [exe, "--ticks", str(ticks), "--seconds", str(seconds)] + (["--text"] if text else [])
    r = subprocess.run(cmd + [spec], capture_output=True, text=True, timeout=seconds + 30)
    if r.returncode != 0:
        return {"error": (r.stderr or r.stdout).strip()}
    return json.loads(r.stdout)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(HERE, "..", "build"))
    ap.add_argument("--conns", default="0,1000,10000", help="connection counts (0,1000,10000)")
    ap.add_argument("--ticks", type=int, default=300, help="probes per measurement (300)")
    ap.add_argument("--seconds", type=float, default=1.5, help="at most, per measurement (1.5)")
    ap.add_argument("--budget", type=float, default=50,
                    help="after this many seconds, skip what is left (50)")
    ap.add_argument("-o", "--out", default=os.path.join(HERE, "results-guard-latest.txt"))
    ap.add_argument("--clients", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.clients:
        return clients(args.clients)
    deadline = Deadline(args.budget)
    exe = build(args.build)
    counts = [int(x) for x in args.conns.split(",") if x != ""]
    if not raise_nofile(max(counts + [0]) + 64):
        print("guard.py: cannot raise RLIMIT_NOFILE; fewer connections", file=sys.stderr)
        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        counts = [n for n in counts if n + 64 <= soft]

    tw = time_wait()
    comm = read("/proc/self/comm", "python3")
    cg = own_cgroup()
    conns = Conns()
    kinds = [
        ("port (netlink)", f"port:{conns.port}", False),
        ("port (text)", f"port:{conns.port}", True),
        (f"process:{comm}", f"process:{comm}", False),
        ("cgroup (own)", f"cgroup:{cg}", False),
    ]
    rows = []
    try:
        for n in counts:
            if deadline.passed():
                print(f"guard.py: budget spent, {n} connections skipped", file=sys.stderr)
                break
            t0 = time.monotonic()
            conns.grow(n)
            setup = time.monotonic() - t0
            for name, spec, text in kinds:
                res = probe(exe, spec, text, args.ticks, args.seconds)
                rows.append((n, name, res, setup))
    finally:
        conns.close()

    out = []
    out.append("watt latency guard: the cost of one workload probe  (bench/guard.py; "
               "figures, not a test)")
    out.append(f"date      {time.strftime('%Y-%m-%d %H:%M:%S %z')}")
    out.append(f"host      kernel {platform.release()}, nproc {os.cpu_count()}, "
               f"{nprocs()} processes, TCP ehash "
               f"{read('/proc/sys/net/ipv4/tcp_ehash_entries', '?')} buckets, "
               f"{tw} in TIME_WAIT at the start")
    out.append(f"method    median (mean) of up to {args.ticks} probes, at most {args.seconds} s "
               "each, after one untimed probe; wall and thread-CPU µs (CPU includes the "
               "kernel's work in the probe's system calls); both ends of every connection "
               "are local, so the TCP table holds 2N sockets")
    out.append("")
    hdr = (f"{'conns':>6} {'probe':<18} {'ticks':>5} {'wall us':>9} {'(mean)':>9} "
           f"{'CPU us':>9} {'(mean)':>9} {'seen':>7} {'sent':>5}  source")
    out.append(hdr)
    by = {}
    for n, name, res, _ in rows:
        by[(n, name)] = res
        if "error" in res:
            out.append(f"{n:>6} {name:<18} error: {res['error']}")
            continue
        seen = res["connections"] if name.startswith("port") else res["processes"]
        sent = res["netlink_sockets"] if "netlink" in res["source"] else "-"
        out.append(f"{n:>6} {name:<18} {res['ticks']:>5} {res['wall_us']:>9.1f} "
                   f"{res['wall_us_mean']:>9.1f} {res['cpu_us']:>9.1f} {res['cpu_us_mean']:>9.1f} "
                   f"{seen:>7} {sent:>5}  {res['source']}")
    out.append("")
    out.append("seen: ESTABLISHED connections to the port (port) or processes with the name; "
               "sent: sockets the kernel sent over netlink (the port's only)")
    ok = True
    for n in counts:
        nl, tx = by.get((n, "port (netlink)")), by.get((n, "port (text)"))
        if not nl or not tx or "error" in nl or "error" in tx:
            continue
        agree = nl["connections"] == n == tx["connections"]
        ok &= agree
        if "netlink" not in nl["source"]:
            out.append(f"{n:>6} connections: netlink not used here ({nl['source']})")
            continue
        out.append(f"{n:>6} connections: text / netlink = {tx['cpu_us'] / nl['cpu_us']:.1f}x CPU, "
                   f"{tx['wall_us'] / nl['wall_us']:.1f}x wall; counts "
                   f"{'agree' if agree else 'DIFFER'} (netlink {nl['connections']}, "
                   f"text {tx['connections']}, opened {n})")
    setups = ", ".join(f"{n}: {s:.1f} s" for n, _, _, s in rows[::len(kinds)])
    out.append(f"connection setup (not measured): {setups}; total {deadline.elapsed():.1f} s")
    text = "\n".join(out) + "\n"
    sys.stdout.write(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
