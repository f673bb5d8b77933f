#!/usr/bin/env python3
"""What `watt agent` costs, against prometheus-node-exporter in the same run.

Both exporters run on this machine's real /sys and /proc, on 127.0.0.1.
Figures, not a test (bench/README.md):

  idle      CPU per second, wake-ups per second and RSS while nobody
            scrapes, over --idle seconds (the agent samples every second);
  scrape    CPU per /metrics request: --scrapes requests one after another,
            the process's on-CPU time (/proc/PID/schedstat) divided by them;
            node_exporter with its default collectors, as Debian ships it;
  load      wrk, 64 connections for 10 s against the agent's /metrics:
            requests/s, p99 latency, errors, RSS before and after.

Goals (issue 4): CPU per scrape at most 1/10 of node_exporter's, at most 2
wake-ups per second when idle, RSS at most 8 MB.
"""
import argparse
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def proc_status(pid):
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            out[k] = v.strip()
    return out


def oncpu_ns(pid):
    """On-CPU time of every thread of PID (Go runs several)."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        except OSError:
            pass
    return total


def switches(pid):
    """Context switches of every thread: each is a wake-up of the process."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            st = proc_status(f"{pid}/task/{tid}")
            total += int(st["voluntary_ctxt_switches"]) + int(st["nonvoluntary_ctxt_switches"])
        except (OSError, KeyError):
            pass
    return total


def rss_mb(pid):
    return int(proc_status(pid)["VmRSS"].split()[0]) / 1024


def wait_up(port, path="/metrics", seconds=10):
    end = time.time() + seconds
    while time.time() < end:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=1) as r:
                r.read()
                return True
        except OSError:
            time.sleep(0.1)
    return False


def scrape(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        return len(r.read())


def measure(name, pid, port, args):
    """Idle window, then back-to-back scrapes."""
    c0, w0, t0 = oncpu_ns(pid), switches(pid), time.monotonic()
    time.sleep(args.idle)
    c1, w1, t1 = oncpu_ns(pid), switches(pid), time.monotonic()
    idle_s = t1 - t0
    size = scrape(port)
    c2 = oncpu_ns(pid)
    for _ in range(args.scrapes):
        scrape(port)
    c3 = oncpu_ns(pid)
    return {
        "name": name,
        "idle_cpu_ms_per_s": (c1 - c0) / 1e6 / idle_s,
        "idle_wakeups_per_s": (w1 - w0) / idle_s,
        "scrape_cpu_ms": (c3 - c2) / 1e6 / args.scrapes,
        "bytes": size,
        "rss_mb": rss_mb(pid),
    }


def wrk_load(port, seconds):
    wrk = shutil.which("wrk")
    if not wrk:
        return None
    r = subprocess.run([wrk, "-t2", "-c64", f"-d{seconds}s", "--latency",
                        f"http://127.0.0.1:{port}/metrics"], capture_output=True, text=True,
                       timeout=seconds + 30)
    out = r.stdout
    rps = re.search(r"Requests/sec:\s+([\d.]+)", out)
    p99 = re.search(r"99%\s+([\d.]+)(us|ms|s)", out)
    errs = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    sock = re.search(r"Socket errors: (.*)", out)
    p99_ms = None
    if p99:
        v, unit = float(p99.group(1)), p99.group(2)
        p99_ms = v / 1000 if unit == "us" else v * 1000 if unit == "s" else v
    return {
        "rps": float(rps.group(1)) if rps else None,
        "p99_ms": p99_ms,
        "non2xx": int(errs.group(1)) if errs else 0,
        "socket_errors": sock.group(1) if sock else "none",
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--watt", default=os.path.join(os.path.dirname(__file__), "..", "build",
                                                   "watt"))
    ap.add_argument("--idle", type=float, default=20, help="idle window, s (20)")
    ap.add_argument("--scrapes", type=int, default=100, help="back-to-back scrapes (100)")
    ap.add_argument("--load", type=int, default=10, help="wrk seconds (10; 0: none)")
    ap.add_argument("-o", "--out", default=os.path.join(os.path.dirname(__file__),
                                                        "results-agent-latest.txt"))
    args = ap.parse_args()
    ne = shutil.which("prometheus-node-exporter") or shutil.which("node_exporter")
    aport, nport = free_port(), free_port()
    agent = subprocess.Popen([args.watt, "agent", "--listen", f"127.0.0.1:{aport}", "--control", ""],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    procs = [agent]
    if ne:
        procs.append(subprocess.Popen([ne, f"--web.listen-address=127.0.0.1:{nport}"],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    lines = []
    try:
        if not wait_up(aport) or (ne and not wait_up(nport)):
            print("bench: an exporter did not come up", file=sys.stderr)
            return 1
        time.sleep(2)
        rows = [measure("watt agent", agent.pid, aport, args)]
        if ne:
            rows.append(measure("node_exporter", procs[1].pid, nport, args))
        lines.append("watt agent cost  (bench/agent.py; figures, not a test)")
        lines.append(f"date      {time.strftime('%Y-%m-%d %H:%M:%S %z')}")
        with open("/proc/cpuinfo") as f:
            model = next((ln.split(':', 1)[1].strip() for ln in f if ln.startswith("model name")),
                         "?")
        lines.append(f"host      nproc {os.cpu_count()}, {model}; this VM shows steal time, "
                     "figures vary +-30 %")
        lines.append(f"method    idle {args.idle:g} s, then {args.scrapes} scrapes back to back; "
                     "CPU from /proc/PID/task/*/schedstat")
        lines.append("")
        lines.append(f"{'exporter':<15} {'idle CPU ms/s':>13} {'wake-ups/s':>10} "
                     f"{'CPU ms/scrape':>13} {'bytes':>8} {'RSS MB':>7}")
        for r in rows:
            lines.append(f"{r['name']:<15} {r['idle_cpu_ms_per_s']:>13.3f} "
                         f"{r['idle_wakeups_per_s']:>10.2f} {r['scrape_cpu_ms']:>13.3f} "
                         f"{r['bytes']:>8} {r['rss_mb']:>7.1f}")
        if len(rows) == 2 and rows[0]["scrape_cpu_ms"] > 0:
            ratio = rows[1]["scrape_cpu_ms"] / rows[0]["scrape_cpu_ms"]
            lines.append(f"node_exporter / watt, CPU per scrape: {ratio:.1f}x "
                         f"(goal >= 10x)")
        a = rows[0]
        lines.append(f"goals: wake-ups/s idle {a['idle_wakeups_per_s']:.2f} (<= 2), "
                     f"RSS {a['rss_mb']:.1f} MB (<= 8)")
        if args.load:
            before = rss_mb(agent.pid)
            w = wrk_load(aport, args.load)
            after = rss_mb(agent.pid)
            alive = wait_up(aport, "/healthz", 5)
            if w:
                lines.append(f"load: wrk -t2 -c64 -d{args.load}s /metrics: "
                             f"{w['rps']:.0f} req/s, p99 {w['p99_ms']:.2f} ms, "
                             f"non-2xx {w['non2xx']}, socket errors {w['socket_errors']}; "
                             f"RSS {before:.1f} -> {after:.1f} MB; serving after: {alive}")
            else:
                lines.append("load: wrk not installed (apt-get install wrk)")
    finally:
        for p in procs:
            p.terminate()
            p.wait(timeout=10)
    text = "\n".join(lines) + "\n"
    sys.stdout.write(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
