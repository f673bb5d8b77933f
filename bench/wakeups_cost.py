#!/usr/bin/env python3
"""The agent's own CPU per second for each wake-up path (issue 15).

For each `[agent] wakeups = MODE` (bpf, trace, proc, off), idle and beside
a load of N wake-ups a second (tests/helpers/waker: timerfd wake-ups),
runs `watt agent --interval 1` and reads the CPU time of all its threads
from /proc/PID/task/*/schedstat (field 1, ns on CPU) over SECONDS, after a
warm-up. With --bpf-stats (root), kernel.bpf_stats_enabled is set for the
run (and restored) and the BPF programs' own run time is reported too: it
is spent in the context of the tasks that fire the tracepoints, not the
agent's, so schedstat alone would hide it.

usage: bench/wakeups_cost.py [--watt build/watt] [--waker build/tests/helpers/waker]
                             [--seconds 15] [--warmup 10] [--hz 10000]
                             [--modes bpf,trace,proc,off]
                             [--bpf-stats]
Prints one line per run and a JSON summary on the last line.
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request


def agent_cpu_ns(pid):
    total = 0
    for f in glob.glob(f"/proc/{pid}/task/*/schedstat"):
        try:
            with open(f) as fh:
                total += int(fh.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return total


def bpf_prog_ns():
    """run_time_ns of the wake counters' programs (bpftool, stats enabled)."""
    try:
        out = subprocess.run(["bpftool", "-j", "prog", "show"], capture_output=True, text=True,
                             timeout=10).stdout
        progs = json.loads(out or "[]")
    except (OSError, ValueError, subprocess.TimeoutExpired):
        return None, None
    ns = cnt = 0
    for p in progs:
        if str(p.get("name", "")).startswith("wake_"):
            ns += p.get("run_time_ns", 0)
            cnt += p.get("run_cnt", 0)
    return ns, cnt


def healthy(port):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1):
            return True
    except OSError:
        return False


def free_port():
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def run(args, mode, hz):
    d = tempfile.mkdtemp(prefix="watt-wcost-")
    conf = os.path.join(d, "agent.ini")
    with open(conf, "w") as f:
        f.write(f"[agent]\nwakeups = {mode}\n")
    load = None
    if hz:
        load = subprocess.Popen([args.waker, "--hz", str(hz), "--seconds",
                                 str(args.seconds + 30), "--name", "wattwcost"],
                                stdout=subprocess.PIPE, text=True)
        load.stdout.readline()
    port = free_port()
    p = subprocess.Popen([args.watt, "agent", "--config", conf, "--listen", f"127.0.0.1:{port}",
                          "--control", "", "--interval", "1"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(200):
            if healthy(port):
                break
            time.sleep(0.05)
        time.sleep(args.warmup)  # the first samples, the first kallsyms passes
        c0, t0 = agent_cpu_ns(p.pid), time.monotonic()
        b0 = bpf_prog_ns() if args.bpf_stats else (None, None)
        time.sleep(args.seconds)
        c1, t1 = agent_cpu_ns(p.pid), time.monotonic()
        b1 = bpf_prog_ns() if args.bpf_stats else (None, None)
        path = None
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
                for ln in r.read().decode().split("\n"):
                    if ln.startswith("watt_agent_wakeups_path_info"):
                        path = ln.split('path="')[1].split('"')[0]
        except OSError:
            pass
    finally:
        p.terminate()
        p.wait()
        if load:
            load.terminate()
            load.wait()
    secs = t1 - t0
    res = {"mode": mode, "hz": hz, "path": path, "seconds": round(secs, 2),
           "agent_ms_per_s": round((c1 - c0) / 1e6 / secs, 3)}
    if b0[0] is not None and b1[0] is not None:
        res["bpf_prog_ms_per_s"] = round((b1[0] - b0[0]) / 1e6 / secs, 3)
        res["bpf_prog_runs_per_s"] = round((b1[1] - b0[1]) / secs)
    res["cpu_pct"] = round((res["agent_ms_per_s"] + res.get("bpf_prog_ms_per_s", 0)) / 10, 3)
    print(json.dumps(res), flush=True)
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--watt", default="build/watt")
    ap.add_argument("--waker", default="build/tests/helpers/waker")
    ap.add_argument("--seconds", type=float, default=15)
    ap.add_argument("--warmup", type=float, default=10,
                    help="seconds before measuring (callback names: kallsyms passes, "
                         "~50 ms each, at most every 10 s while new ones appear)")
    ap.add_argument("--hz", type=int, default=10000)
    ap.add_argument("--modes", default="bpf,trace,proc,off")
    ap.add_argument("--bpf-stats", action="store_true")
    args = ap.parse_args()
    old = None
    if args.bpf_stats:
        with open("/proc/sys/kernel/bpf_stats_enabled") as f:
            old = f.read().strip()
        with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
            f.write("1")
    out = []
    try:
        for hz in (0, args.hz):
            for mode in args.modes.split(","):
                out.append(run(args, mode, hz))
    finally:
        if old is not None:
            with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
                f.write(old)
    print(json.dumps({"runs": out}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
