#!/usr/bin/env python3
"""What packing does to the freed CPU on this machine, and what the
packer costs (issue 17's benchmark, live part; bench/pack.py has the
planner's cost and the models' predictions on the fixtures).

A cgroup watt-pack-test (cpuset hierarchy and cgroup2, as in
tests/cli/test_pack_live.py, whose lab module tests/helpers/packlab.py
this reuses) holds tests/helpers/dutyload at 30 % of one CPU. In one run,
alternating ROUNDS times:

  unpacked  no agent: the cgroup has every CPU;
  packed    `watt agent --root /` with [pack] cgroups = watt-pack-test,
            once the cgroup's cpuset.cpus is the plan's first CPU;

each for --seconds, the freed (last online) CPU's idle residency
(cpuidle where a driver is loaded, else /proc/stat), interrupts and idle
entries (sched_switch to the idle task, an ftrace instance), side by side
with their ratios; and while packed, the agent's own CPU time and
wake-ups (watt_agent_cpu_seconds_total, watt_agent_wakeups_total) and
the packer's counters. Then once: the rise to 1.5 CPUs while packed, the
time until cpuset.cpus holds every CPU (polled every 1 ms) and the
agent's own growth latency, and the load's loops/s against an unpacked
rise. Figures, not a test: it exits 0 whatever they are (1 only when it
cannot measure at all: not root, no cpuset hierarchy, no build).

  bench/pack_live.py [--watt build/watt] [--dutyload PATH] [--seconds 10]
                     [--rounds 2] [-o FILE]

Takes /tmp/watt-lab.lock like the live tests. Every cgroup it makes is
removed at the end, also on failure.
"""
import argparse
import json
import os
import shutil
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "helpers"))
import packlab  # noqa: E402

NAME = "watt-pack-test"
PROFILE = """[profile]
description = bench/pack_live.py: watt-pack-test packed while its load fits
[pack]
cgroups = watt-pack-test
window_s = 1
interval_s = 0.05
demand = cgroups
pressure_stall_us = 40000
pressure_window_us = 500000
"""


class Out:
    def __init__(self, path):
        self.f = open(path, "w") if path else None

    def __call__(self, line=""):
        print(line, flush=True)
        if self.f:
            self.f.write(line + "\n")


def pct(x):
    return "-" if x is None else f"{100 * x:.2f} %"


def rate(n, dt):
    return "-" if n is None else f"{n / dt:.1f}/s"


def ratio(a, b):
    return "-" if a is None or not b else f"{a / b:.3f}"


def counter(m, name):
    return sum(v for k, v in m.items() if k == name or k.startswith(name + "{"))


def packed_round(a, cg, pset, freed, seconds, entries, out, pids=()):
    """Wait for the pack, measure; the figures and the agent's costs."""
    took = packlab.poll_until(lambda: cg.cpuset_is(pset), 20, 0.01)
    if took is None:
        out(f"# the agent did not pack {NAME} (cpuset.cpus {cg.cpus()!r}); its log:")
        out(a.text()[-1500:])
        return None
    time.sleep(1.0)
    m0, t0 = a.metrics(), time.monotonic()
    r = packlab.measure(freed, seconds, entries, [a.p.pid] + list(pids))
    m1, dt = a.metrics(), time.monotonic() - t0
    r["agent_cpu"] = (counter(m1, "watt_agent_cpu_seconds_total")
                      - counter(m0, "watt_agent_cpu_seconds_total")) / dt
    r["agent_wakeups"] = (counter(m1, "watt_agent_wakeups_total")
                          - counter(m0, "watt_agent_wakeups_total")) / dt
    r["pack_actions"] = counter(m1, "watt_pack_actions_total") - counter(
        m0, "watt_pack_actions_total")
    r["pack_events"] = counter(m1, "watt_pack_pressure_events_total") - counter(
        m0, "watt_pack_pressure_events_total")
    return r


def rise(load, cg, grown, seconds=3.0):
    """Raise the load to 1.5 CPUs: (seconds until cpuset.cpus is the set
    GROWN, or None; loops/s over SECONDS after the rise)."""
    t = time.monotonic()
    load.rise()
    seen = packlab.poll_until(lambda: cg.cpuset_is(grown), 5, 0.001) if grown else None
    time.sleep(max(0.0, t + seconds + 0.2 - time.monotonic()))
    return (None if seen is None else seen - t), load.rate(t, t + seconds)


def table(out, rows, freed):
    out(f"\n## CPU {freed}, the freed CPU: unpacked and packed, side by side")
    out("(other work: CPUs used by anything but the load and the agent during the sample)")
    out("| round | run | residency | /proc/stat idle | interrupts | idle entries | "
        "agent CPU | agent wake-ups | other work |")
    out("|---|---|---|---|---|---|---|---|---|")
    for i, (u, p) in enumerate(rows):
        for what, r in (("unpacked", u), ("packed", p)):
            if r is None:
                out(f"| {i + 1} | {what} | (not packed) | | | | | | |")
                continue
            dt = r["seconds"]
            agent = ("-", "-") if "agent_cpu" not in r else (
                f"{100 * r['agent_cpu']:.3f} %", f"{r['agent_wakeups']:.1f}/s")
            out(f"| {i + 1} | {what} | {pct(r['residency'])} | {pct(r['stat_idle'])} | "
                f"{rate(r['irqs'], dt)} | {rate(r['idle_entries'], dt)} | {agent[0]} | "
                f"{agent[1]} | {r['others_busy']:.2f} CPUs |")
    pairs = [(u, p) for u, p in rows if p is not None]
    if not pairs:
        return
    out("\n## Ratios, packed / unpacked (mean over rounds)")

    def mean(xs):
        xs = [x for x in xs if x is not None]
        return sum(xs) / len(xs) if xs else None

    for key, what in (("residency", "idle residency"), ("irqs", "interrupts (wake-ups, upper bound)"),
                      ("idle_entries", "idle entries (sched_switch to idle)")):
        u = mean([a[key] / a["seconds"] if key != "residency" and a[key] is not None
                  else a[key] for a, _ in pairs])
        p = mean([b[key] / b["seconds"] if key != "residency" and b[key] is not None
                  else b[key] for _, b in pairs])
        drop = "" if key == "residency" or u in (None, 0) or p is None else \
            f", down {100 * (1 - p / u):.1f} %"
        out(f"- {what}: {ratio(p, u)}{drop}")
    out(f"- the agent while packing: {100 * mean([b['agent_cpu'] for _, b in pairs]):.3f} % "
        f"of a CPU, {mean([b['agent_wakeups'] for _, b in pairs]):.1f} wake-ups/s; packer "
        f"actions {sum(b['pack_actions'] for _, b in pairs):.0f}, pressure events "
        f"{sum(b['pack_events'] for _, b in pairs):.0f} over the packed runs")
    last = pairs[-1][1]
    out(f"- what still woke CPU {freed} while packed (last round, interrupts by line): "
        f"{packlab.top_irqs(last, 8)}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--watt", default="build/watt")
    ap.add_argument("--dutyload", default=None)
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("-o", "--output")
    a = ap.parse_args()
    dutyload = a.dutyload or os.path.join(os.path.dirname(a.watt), "tests/helpers/dutyload")
    v1, v2 = packlab.mounts()
    top, ver = packlab.cpuset_dir(v1, v2)
    online = packlab.online_cpus()
    for ok, why in ((os.geteuid() == 0, "not root"), (top, "no cpuset hierarchy"),
                    (len(online) >= 2, "fewer than 2 online CPUs"),
                    (os.access(a.watt, os.X_OK), f"no {a.watt}"),
                    (os.access(dutyload, os.X_OK), f"no {dutyload}")):
        if not ok:
            print(f"bench/pack_live.py: cannot measure: {why}", file=sys.stderr)
            return 1
    out = Out(a.output)
    lock = packlab.lab_lock()
    freed, grown = online[-1], packlab.cpulist(online)
    pset = {online[0]}
    driver = (packlab.read(packlab.CPU + "/cpuidle/current_driver") or b"?").decode().strip()
    out(f"# bench/pack_live.py, {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}")
    out(f"# kernel {os.uname().release}; online CPUs {grown}; cpuset cgroup v{ver} at {top}; "
        f"cgroup2 at {v2}; cpuidle driver {driver}; load average "
        f"{(packlab.read('/proc/loadavg') or b'').decode().split()[:3]}")
    out(f"# load: dutyload 1 thread at 30 % of a CPU in {NAME}; {a.rounds} rounds of "
        f"{a.seconds:g} s unpacked then packed; the agent (sampling every 1 s, in the packed cgroup as watt.service is in system.slice) with [pack] "
        "window_s 1, interval_s 0.05, demand = cgroups, pressure 40 ms per 500 ms")
    busy, who = packlab.machine_busy(2)
    out(f"# the machine without the load, over 2 s: {busy:.2f} CPUs busy ({who})")
    if driver in ("none", "?"):
        out("# no cpuidle driver: residency is /proc/stat's idle share; wake-ups are the "
            "interrupts CPU 1 took (an upper bound) and its idle entries")
    tmp = tempfile.mkdtemp(prefix="watt-pack-bench-")
    conf = os.path.join(tmp, "conf")
    os.makedirs(os.path.join(conf, "profiles.d"))
    packlab.write(os.path.join(conf, "profiles.d/pbench.conf"), PROFILE)
    entries = packlab.IdleEntries()
    cg = packlab.Cgroup(NAME, v1, v2)
    load = agent = None
    rows = []
    try:
        load = packlab.Load(dutyload)
        cg.add(load.pid)
        time.sleep(1)
        for _ in range(a.rounds):
            packlab.wait_quiet(0.2, 60, out, [load.pid])
            u = packlab.measure(freed, a.seconds, entries, [load.pid])
            agent = packlab.Agent(a.watt, tmp, conf, "pbench")
            cg.add(agent.p.pid)  # as in system.slice under systemd
            p = packed_round(agent, cg, pset, freed, a.seconds, entries, out, [load.pid]) \
                if agent.up() else None
            agent.stop()
            agent = None
            packlab.poll_until(lambda: cg.cpuset_is(online), 5, 0.01)
            rows.append((u, p))
        table(out, rows, freed)

        out("\n## The rise to 1.5 CPUs (3 threads at 50 %)")
        _, base = rise(load, cg, None)
        load.stop()
        load = packlab.Load(dutyload)
        cg.add(load.pid)
        agent = packlab.Agent(a.watt, tmp, conf, "pbench")
        cg.add(agent.p.pid)
        if agent.up() and packlab.poll_until(lambda: cg.cpuset_is(pset), 20, 0.01):
            time.sleep(1.0)
            m0 = agent.metrics()
            lat, thr = rise(load, cg, online)
            m1 = agent.metrics()
            n = counter(m1, "watt_pack_grow_latency_seconds_count") - counter(
                m0, "watt_pack_grow_latency_seconds_count")
            s = counter(m1, "watt_pack_grow_latency_seconds_sum") - counter(
                m0, "watt_pack_grow_latency_seconds_sum")
            own = {k: v for k, v in agent.pack().items() if "latency" in k or "grow" in k}
            out(f"- cpuset.cpus = {grown} after "
                f"{'never (5 s)' if lat is None else f'{1000 * lat:.1f} ms'} (polled every 1 ms)")
            out(f"- the agent's own growth latency: {n:.0f} growths, mean "
                f"{1000 * s / n if n else float('nan'):.2f} ms; status {json.dumps(own)}")
            out(f"- loops/s over 3 s after the rise: {thr or 0:.0f} packed, {base or 0:.0f} "
                f"unpacked: ratio {ratio(thr, base)}")
        else:
            out(f"- the agent did not pack {NAME}: no rise measured")
    finally:
        if load:
            load.stop()
        if agent:
            agent.kill()
            agent.restore()
        for e in cg.remove():
            out(f"# cgroup not removed: {e}")
        entries.close()
        shutil.rmtree(tmp, ignore_errors=True)
        if lock:
            lock.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
