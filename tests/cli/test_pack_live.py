#!/usr/bin/env python3
"""The packer on this machine, live (issue 17's live test; docs/pack.md).

Root, a cpuset hierarchy (cgroup2 with the cpuset controller, or cgroup
v1's cpuset mount), cgroup2 for cpu.pressure, and at least 2 online CPUs;
skipped otherwise (tests/skip-allow.txt lists the reasons CI may see).
Takes /tmp/watt-lab.lock itself (unless an ancestor holds it), so no other
live test measures or changes the machine meanwhile.

A cgroup watt-pack-test, made in the cpuset hierarchy and in cgroup2,
holds tests/helpers/dutyload: one thread at 30 % of a CPU, rising on
SIGUSR1 to three threads at 50 % (1.5 CPUs). The last online CPU is "the
freed CPU" (CPU 1 on a 2-CPU machine). Phases:

1. unpacked (no agent): the freed CPU's idle residency and wake-ups over
   MEASURE_S, then the rise and the loops/s over RISE_S after it;
2. the agent (--root /, a profile with [pack] cgroups = watt-pack-test,
   journal in a temporary directory): the cgroup's cpuset.cpus becomes
   the plan's first CPU; the same measurement, printed as goals (below):
   residency >= 95 %; the wake-ups against phase 1 (the issue's -80 % is not
   reachable by cpusets here: the busy CPU's nohz idle-balance kicks),
   with the residual (interrupts by line, other processes);
3. the rise while packed: cpuset.cpus polled every 1 ms holds every
   online CPU within 1 s (checked) and 100 ms (the goal) of the rise; the agent's own growth latency
   (watt ctl status "pack", watt_pack_grow_latency_seconds) printed;
   loops/s over RISE_S at most 5 % below the unpacked runs of phase 1
   and of one more unpacked rise after phase 4 (A-B-A: the host drifts);
4. packed again (a 30 % load), SIGKILL of the agent: `watt restore`
   leaves every cpuset.cpus of the hierarchy byte for byte as before;
5. bad input: a profile naming a cgroup that does not exist (the agent
   refuses to start, with the exit status of a broken profile, naming the
   cgroup and the profile's line); a cpuset the kernel refuses (a child
   cgroup pinned to the freed CPU, so v1 refuses to shrink the parent):
   a message naming the cgroup, every cpuset as it was.

Every cgroup it makes is removed in finally:, the ftrace instance too.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "helpers"))
from checks import check, summary  # noqa: E402
import packlab  # noqa: E402

WATT = os.environ.get("WATT") or (sys.argv[1] if len(sys.argv) > 1 else "build/watt")
DUTYLOAD = os.environ.get("WATT_DUTYLOAD") or os.path.join(os.path.dirname(WATT),
                                                           "tests/helpers/dutyload")
NAME = "watt-pack-test"
MEASURE_S = float(os.environ.get("WATT_PACK_MEASURE_S", "5"))
RISE_S = 3.0
MIN_RESIDENCY = 0.95
MIN_WAKEUP_DROP = 0.80
MAX_GROWTH_S = 0.100
MAX_THROUGHPUT_LOSS = 0.05
# The figures above are speed goals: the project checks those in
# benchmarks that print them (README's contract; bench/pack_live.py), not
# with timed assertions on a shared VM whose neighbours move the same
# unpacked rise by up to 38 %. This test prints each as "# goal met:" or
# "# goal NOT met:" and checks what packing must do whatever the timing:
# packed, grown to every CPU within GROWN_BY_S of the rise, counted,
# restored byte for byte, bad input refused.
GROWN_BY_S = 1.0


def goal(ok, what):
    print(f"# goal {'met' if ok else 'NOT met'}: {what}")
# Other tests and builds share this machine and the packer's demand is the
# whole machine's: wait (at most QUIET_WAIT_S) until they use under
# QUIET_CPUS, or the plan could not be one CPU whatever the packer does.
QUIET_CPUS = 0.5
# A sample during which other work used more than this is taken again.
MAX_OTHERS = 0.2
QUIET_WAIT_S = float(os.environ.get("WATT_PACK_QUIET_WAIT_S", "60"))

# window_s 1: a short test. demand = cgroups: other sessions' builds and
# VMs share this machine; the machine-wide demand (the default) would count
# them. interval_s 0.05 and pressure_stall_us 40000 per 500000: this VM's
# kernel refuses the PSI trigger (the agent lacks CAP_SYS_RESOURCE, so only
# windows in multiples of 2 s are allowed, psi.rst), and the packer reads
# cpu.pressure every tick instead, growing when the stall within the last
# window reaches pressure_stall_us. The rise to 1.5 CPUs on one CPU stalls
# 83-100 % of the time (measured here), so 40 ms of stall come after about
# 45 ms, seen at the next tick: within 100 ms. The 30 % load alone, packed,
# stalls 1.7 % on average (8.5 ms per window; the default 10 ms is crossed
# and the set flapped, 12 changes in 70 s).
PROFILE = """[profile]
description = live pack test: watt-pack-test packed while its load fits
[pack]
cgroups = {cgroups}
window_s = 1
interval_s = 0.05
demand = cgroups
pressure_stall_us = 40000
pressure_window_us = 500000
"""
# how the packer says the kernel refused a cpuset write (src/tune/packer.c)
REFUSED = "the kernel refused CPUs"
BROKEN = """[profile]
[cpufreq]
govenor = performance
"""


def skip_reason():
    if os.geteuid() != 0:
        return "not root"
    v1, v2 = packlab.mounts()
    top, _ = packlab.cpuset_dir(v1, v2)
    if not top:
        return "no cpuset hierarchy (neither cgroup2's cpuset controller nor a v1 cpuset mount)"
    if not v2:
        return "no cgroup2 mount (the packer's PSI trigger needs cpu.pressure)"
    if len(packlab.online_cpus()) < 2:
        return "fewer than 2 online CPUs: nothing to pack"
    if not os.access(DUTYLOAD, os.X_OK):
        return f"no {DUTYLOAD} (build tests/helpers)"
    return None


def explain_residual(r, freed):
    """What woke the freed CPU: interrupts by line, and watt top's view
    (its idle wake-ups of that CPU, and the processes and sources that
    woke an idle CPU most)."""
    print(f"# residual on CPU {freed}: interrupts by line: {packlab.top_irqs(r, 10)}")
    t = subprocess.run([WATT, "top", "--once", "--json", "--interval", "2", "--sort", "idle",
                        "--limit", "8"], capture_output=True, text=True, timeout=60)
    try:
        doc = json.loads(t.stdout)
    except ValueError:
        print(f"# watt top --once --json gave no JSON (rc {t.returncode}): {t.stderr[-300:]}")
        return
    cpu = next((c for c in doc.get("cpus", []) if c.get("cpu") == freed), {})
    print(f"# watt top, CPU {freed}: busy {cpu.get('busy_pct')} %, idle wake-ups/s "
          f"{cpu.get('idle_wakeups_per_s')}, irqs/s {cpu.get('irqs_per_s')}")
    print("# watt top, processes by idle wake-ups/s (all CPUs): " + ", ".join(
        f"{p.get('comm')}[{p.get('pid')}] {p.get('idle_wakeups_per_s', 0):.1f} "
        f"(cgroup {p.get('cgroup')})" for p in doc.get("processes", [])))
    print("# watt top, sources by idle wake-ups/s: " + ", ".join(
        f"{s.get('kind')}:{s.get('name')} {s.get('idle_per_s', 0):.1f}"
        for s in doc.get("sources", [])))


def run_load(cg, settle=1.0):
    load = packlab.Load(DUTYLOAD)
    cg.add(load.pid)
    time.sleep(settle)
    return load


def unpacked(v1, v2, freed, entries):
    """Phase 1: (interval figures, loops/s after the rise)."""
    cg = packlab.Cgroup(NAME, v1, v2)
    load = None
    try:
        load = run_load(cg)
        r = packlab.measure_clean(freed, MEASURE_S, entries, [load.pid], MAX_OTHERS)
        print(f"# unpacked, 30 % load: CPU {freed}: {packlab.describe(r)}")
        t, a = time.monotonic(), packlab.Sample(freed, None, [load.pid])
        load.rise()
        time.sleep(RISE_S)
        others = packlab.interval(a, packlab.Sample(freed, None, [load.pid]))["others_busy"]
        time.sleep(0.2)
        rate = load.rate(t, t + RISE_S)
        print(f"# unpacked, 1.5 CPUs: {rate:.0f} loops/s over {RISE_S} s after the rise "
              f"(other work {others:.2f} CPUs)")
        return r, rate
    finally:
        if load:
            load.stop()
        for e in cg.remove():
            check(False, f"unpacked: cgroup removed: {e}")


RESULT = {}


def unpacked_rise(v1, v2):
    """An unpacked run of the rise alone: loops/s over RISE_S after it."""
    cg = packlab.Cgroup(NAME, v1, v2)
    load = None
    try:
        load = run_load(cg)
        t = time.monotonic()
        load.rise()
        time.sleep(RISE_S + 0.2)
        rate = load.rate(t, t + RISE_S)
        print(f"# unpacked again, 1.5 CPUs: {rate:.0f} loops/s over {RISE_S} s after the rise")
        return rate
    finally:
        if load:
            load.stop()
        for e in cg.remove():
            check(False, f"unpacked again: cgroup removed: {e}")


def judge_throughput(before, packed, after, others):
    """Packed against the unpacked runs before and after it (A-B-A): this
    VM's neighbours move the same unpacked rise by +-25 % over an hour, so
    a lone reference minutes away can be 8 % off either way. One-sided:
    what packing may cost is throughput; faster is no loss. When the two
    references differ by more than twice the band the host drifted
    between them, and the lower one is the reference (said)."""
    if not (before and packed and after):
        check(False, f"throughput: a run gave no rate ({before}, {packed}, {after})")
        return
    spread = abs(before - after) / max(before, after)
    ref = (before + after) / 2
    how = "their mean"
    if spread > 2 * MAX_THROUGHPUT_LOSS:
        ref, how = min(before, after), f"the lower: the host drifted {100 * spread:.1f} % between them"
    loss = 1 - packed / ref
    goal(loss <= MAX_THROUGHPUT_LOSS,
         f"throughput over {RISE_S} s after the rise: {packed:.0f} loops/s packed against "
         f"{before:.0f} unpacked before and {after:.0f} after ({how}; {-100 * loss:+.2f} %, "
         f"at most {100 * MAX_THROUGHPUT_LOSS:.0f} % less; other work {others:.2f} CPUs)")


def packed_phases(v1, v2, freed, entries, base, base_rate, tmp, conf, top):
    packlab.wait_quiet(QUIET_CPUS, QUIET_WAIT_S)
    cg = packlab.Cgroup(NAME, v1, v2)
    load = agent = None
    online = packlab.online_cpus()
    try:
        load = run_load(cg, settle=0.2)
        before = packlab.cpusets(top)
        agent = packlab.Agent(WATT, tmp, conf, "ptest")
        check(agent.up(), "the agent starts with [pack] cgroups = " + NAME)
        # as under systemd, where watt.service is in system.slice, one of the
        # cgroups packed by default: the agent's own wake-ups are the packed
        # set's, not the freed CPU's
        cg.add(agent.p.pid)
        first = str(online[0])
        pset = {online[0]}
        took = packlab.poll_until(lambda: cg.cpuset_is(pset), 15, 0.01)
        st = agent.pack()
        check(took is not None, f"packed: {cg.cpuset}/cpuset.cpus = {cg.cpus()!r}, the plan's "
              f"first CPU {first} (status pack: {json.dumps(st)[:400]})")
        if took is None:
            print(agent.text()[-2000:])
            return
        time.sleep(1.0)
        r = packlab.measure_clean(freed, MEASURE_S, entries, [load.pid, agent.p.pid], MAX_OTHERS,
                                  watch=cg)
        watch = r["watch"]
        print(f"# packed, 30 % load: CPU {freed}: {packlab.describe(r)}")
        check(watch.share(first) >= 0.5, f"packed: the set is {first} for most of the sample "
              f"while the load stays at 30 % ({watch.describe()})")
        goal(not watch.changes, f"no change of the set at a steady 30 % ({watch.describe()})")
        if not (r["clean"] and base["clean"]):
            print(f"note: other work ran through the samples ({base['others_busy']:.2f} CPUs "
                  f"unpacked, {r['others_busy']:.2f} packed): the checks below measure it too")
        ok_res = r["residency"] >= MIN_RESIDENCY
        drop = 1 - r["wakeups"] / base["wakeups"] if base["wakeups"] else 0
        ok_wake = drop >= MIN_WAKEUP_DROP
        if not (ok_res and ok_wake):
            explain_residual(r, freed)
        goal(ok_res, f"packed: CPU {freed} idle {100 * r['residency']:.2f} % "
             f"(>= {100 * MIN_RESIDENCY:.0f} %; unpacked {100 * base['residency']:.2f} %)")
        what = "cpuidle entries" if r["cpuidle_entries"] is not None else "interrupts"
        # a figure, not a check: on this VM the issue's -80 % is out of
        # cpusets' reach. ipi:ipi_send_cpu stacks show the freed CPU's
        # residual wake-ups are function-call IPIs from the busy CPU's tick
        # (update_process_times -> the scheduler's nohz idle-balance kick,
        # kick_ilb), ~50/s while CPU 0 runs the 30 % load, whatever cpuset
        # the load is in; with the root cpuset's sched_load_balance = 0 they
        # stop but CPU 1's own tick rises as much (docs/pack-live.md)
        print(f"# wake-ups: packed CPU {freed} ({what}) {r['wakeups']} against "
              f"{base['wakeups']} unpacked: down {100 * drop:.1f} % (the issue's target "
              f"{100 * MIN_WAKEUP_DROP:.0f} % {'met' if ok_wake else 'NOT met here'})")
        if r["idle_entries"] is not None and base["idle_entries"]:
            print(f"# idle entries (sched_switch to idle) of CPU {freed}: {base['idle_entries']} "
                  f"unpacked, {r['idle_entries']} packed: down "
                  f"{100 * (1 - r['idle_entries'] / base['idle_entries']):.1f} %")
        print(f"# residual on CPU {freed} while packed: {packlab.top_irqs(r)}")

        # 3: the rise
        m0 = agent.metrics()
        grown = packlab.cpulist(online)
        t_rise, a = time.monotonic(), packlab.Sample(freed, None, [load.pid, agent.p.pid])
        load.rise()
        t_seen = packlab.poll_until(lambda: cg.cpuset_is(online), 5, 0.001)
        lat = None if t_seen is None else t_seen - t_rise
        check(lat is not None and lat <= GROWN_BY_S,
              f"rise to 1.5 CPUs: cpuset.cpus = {grown} within {GROWN_BY_S:.0f} s (polled "
              f"every 1 ms)")
        goal(lat is not None and lat <= MAX_GROWTH_S,
             f"rise to 1.5 CPUs: cpuset.cpus = {grown} after "
             f"{'never' if lat is None else f'{1000 * lat:.1f} ms'} (<= "
             f"{1000 * MAX_GROWTH_S:.0f} ms)")
        time.sleep(max(0.0, t_rise + RISE_S - time.monotonic()))
        others = packlab.interval(a, packlab.Sample(freed, None, [load.pid, agent.p.pid]))[
            "others_busy"]
        time.sleep(0.2)
        rate = load.rate(t_rise, t_rise + RISE_S)
        # judged in main() against unpacked runs on both sides of this one
        RESULT["packed_rate"], RESULT["packed_others"] = rate, others
        print(f"# packed, 1.5 CPUs: {rate:.0f} loops/s over {RISE_S} s after the rise "
              f"(other work {others:.2f} CPUs)")
        m1 = agent.metrics()
        st = agent.pack()
        s = m1.get("watt_pack_grow_latency_seconds_sum", 0) - m0.get(
            "watt_pack_grow_latency_seconds_sum", 0)
        n = m1.get("watt_pack_grow_latency_seconds_count", 0) - m0.get(
            "watt_pack_grow_latency_seconds_count", 0)
        ev = m1.get("watt_pack_pressure_events_total", 0) - m0.get(
            "watt_pack_pressure_events_total", 0)
        own = {k: v for k, v in st.items() if "latency" in k or "grow" in k}
        print(f"# the agent's own growth latency: status {json.dumps(own)}; metrics "
              f"{n:.0f} growths, mean {1000 * s / n if n else float('nan'):.2f} ms; "
              f"{ev:.0f} pressure events")
        check(n >= 1, f"the agent counted the growth (watt_pack_grow_latency_seconds_count "
              f"+{n:.0f})")

        # 4: packed again, SIGKILL, watt restore
        load.stop()
        load = run_load(cg, settle=0.2)
        took = packlab.poll_until(lambda: cg.cpuset_is(pset), 30, 0.05)
        check(took is not None, f"the load back at 30 %: shrunk to {first} again "
              f"(cpuset.cpus {cg.cpus()!r})")
        agent.kill()
        check(cg.cpuset_is(pset), f"after SIGKILL the cpuset stays packed ({cg.cpus()!r})")
        rc, out = agent.restore()
        after = packlab.cpusets(top)
        diff = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
        check(rc == 0 and not diff,
              f"watt restore (rc {rc}): every cpuset.cpus of {top} byte for byte as before "
              f"({len(before)} cpusets; differ: {[(k, before.get(k), after.get(k)) for k in diff]})"
              f"; {out[-300:]}")
    finally:
        if load:
            load.stop()
        if agent:
            agent.kill()
            agent.restore()
        for e in cg.remove():
            check(False, f"packed: cgroup removed: {e}")


def bad_input(v1, v2, ver, freed, tmp, conf, top):
    # a cgroup that does not exist, against a profile the agent refuses
    packlab.write(os.path.join(conf, "profiles.d/broken.conf"), BROKEN)
    packlab.write(os.path.join(conf, "profiles.d/nosuch.conf"),
                  PROFILE.format(cgroups="watt-pack-nosuch"))
    b = packlab.Agent(WATT, tmp, conf, "broken")
    b.up(5)
    rc_broken = b.stop()
    before = packlab.cpusets(top)
    a = packlab.Agent(WATT, tmp, conf, "nosuch")
    a.up(5)
    rc = a.stop()
    text = a.text()
    line = next((ln for ln in text.splitlines() if "watt-pack-nosuch" in ln), "")
    check(rc == rc_broken and rc not in (0, None) and re.search(r":\d+", line) is not None,
          f"bad input: a profile naming a missing cgroup: exit {rc} (a broken profile: "
          f"{rc_broken}), message: {line.strip()!r}")
    check(packlab.cpusets(top) == before, "bad input: no cpuset changed")

    # a child pinned to the freed CPU: v1 would refuse the parent's shrink
    packlab.wait_quiet(QUIET_CPUS, QUIET_WAIT_S)  # so that a shrink is due
    cg = packlab.Cgroup(NAME, v1, v2)
    load = agent = None
    try:
        child = cg.child("pinned", str(freed))
        load = run_load(cg, settle=0.2)
        before = packlab.cpusets(top)
        agent = packlab.Agent(WATT, tmp, conf, "ptest")
        check(agent.up(), f"pinned child: the agent starts with {child} pinned to {freed}")
        entry = {}

        def noted():
            nonlocal entry
            entry = next((c for c in agent.pack().get("cgroups", []) if c.get("path") == NAME), {})
            return bool(entry.get("note"))
        packlab.poll_until(noted, 10, 0.1)
        after = packlab.cpusets(top)
        diff = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
        check(not diff, f"pinned child: nothing half-applied, every cpuset as it was "
              f"(differ: {[(k, before.get(k), after.get(k)) for k in diff]})")
        check(bool(entry.get("note")) and not entry.get("packed"),
              f"pinned child: {NAME} left alone, and status says why: {json.dumps(entry)}")
        rc = agent.stop()
        check(rc == 0 and packlab.cpusets(top) == before,
              f"pinned child: SIGTERM exits {rc}, every cpuset as it was")
    finally:
        if load:
            load.stop()
        if agent:
            agent.kill()
            agent.restore()
        for e in cg.remove():
            check(False, f"bad input: cgroup removed: {e}")
    if ver == 1:
        refused(v1, v2, freed, tmp, conf, top)


def refused(v1, v2, freed, tmp, conf, top):
    """A growth the kernel refuses: once the cgroup is packed, a sibling
    cpuset takes the freed CPU with cpu_exclusive (cgroup-v1/cpusets.rst:
    an exclusive cpuset's CPUs may not overlap a sibling's), so v1 refuses
    the cgroup's growth to every CPU (EINVAL) when the load rises. The
    packer must say so and leave the set as it was, and grow once the
    sibling is gone."""
    packlab.wait_quiet(QUIET_CPUS, QUIET_WAIT_S)
    cg = packlab.Cgroup(NAME, v1, v2)
    excl = os.path.join(os.path.dirname(cg.cpuset), NAME + "-excl")
    load = agent = None
    pset = {packlab.online_cpus()[0]}
    try:
        load = run_load(cg, settle=0.2)
        before = packlab.cpusets(top)
        agent = packlab.Agent(WATT, tmp, conf, "ptest")
        check(agent.up(), "refused growth: the agent starts")
        if packlab.poll_until(lambda: cg.cpuset_is(pset), 15, 0.01) is None:
            check(False, f"refused growth: {NAME} packed first ({cg.cpus()!r}; "
                  f"status {json.dumps(agent.pack())[:300]})")
            return
        os.mkdir(excl)
        packlab.write(f"{excl}/cpuset.cpus", str(freed))
        packlab.write(f"{excl}/cpuset.cpu_exclusive", "1")
        packed = packlab.read(f"{cg.cpuset}/cpuset.cpus")
        load.rise()
        st = {}

        def failing():
            nonlocal st
            st = agent.pack()
            return REFUSED in (st.get("note") or "")
        packlab.poll_until(failing, 5, 0.05)
        time.sleep(0.5)
        line = next((ln for ln in agent.text().splitlines() if REFUSED in ln
                     and NAME in ln), "")
        check(REFUSED in (st.get("note") or "") and NAME in line,
              f"refused growth: the kernel's refusal said, naming {NAME}: {line.strip()!r}; "
              f"status: state {st.get('state')!r}, note {st.get('note')!r}")
        check(packlab.read(f"{cg.cpuset}/cpuset.cpus") == packed and agent.p.poll() is None,
              f"refused growth: cpuset.cpus stays {packed!r} byte for byte, the agent runs on")
        os.rmdir(excl)
        took = packlab.poll_until(lambda: cg.cpuset_is(packlab.online_cpus()), 5, 0.01)
        check(took is not None, f"refused growth: the exclusive sibling gone, the set grows "
              f"({cg.cpus()!r})")
        rc = agent.stop()
        check(rc == 0 and packlab.cpusets(top) == before,
              f"refused growth: SIGTERM exits {rc}, every cpuset as it was")
    finally:
        if os.path.isdir(excl):
            os.rmdir(excl)
        if load:
            load.stop()
        if agent:
            agent.kill()
            agent.restore()
        for e in cg.remove():
            check(False, f"refused growth: cgroup removed: {e}")


def main():
    why = skip_reason()
    if why:
        print(f"skip {why}")
        return 77
    lock = packlab.lab_lock()
    print("# /tmp/watt-lab.lock " + ("taken" if lock else "held by an ancestor (flock)"))
    v1, v2 = packlab.mounts()
    top, ver = packlab.cpuset_dir(v1, v2)
    online = packlab.online_cpus()
    freed = online[-1]
    print(f"# cpuset: cgroup v{ver} at {top}; cgroup2 at {v2}; online CPUs {packlab.cpulist(online)}; "
          f"the freed CPU is {freed}; cpuidle driver "
          f"{(packlab.read(packlab.CPU + '/cpuidle/current_driver') or b'?').decode().strip()}")
    made = (os.path.join(top, NAME), os.path.join(v2, NAME), os.path.join(top, NAME + "-excl"))
    for d in made:
        if os.path.isdir(d):  # a crashed run's: empty it and take it away
            print(f"# removing {d}, left by an earlier run")
            packlab.remove_tree(d)
    original = packlab.cpusets(top)
    tmp = tempfile.mkdtemp(prefix="watt-pack-live-")
    conf = os.path.join(tmp, "conf")
    os.makedirs(os.path.join(conf, "profiles.d"))
    packlab.write(os.path.join(conf, "profiles.d/ptest.conf"), PROFILE.format(cgroups=NAME))
    entries = packlab.IdleEntries()
    try:
        busy, _ = packlab.wait_quiet(QUIET_CPUS, QUIET_WAIT_S)
        print(f"# the machine without the test's load: {busy:.2f} CPUs busy over 2 s")
        base, base_rate = unpacked(v1, v2, freed, entries)
        packed_phases(v1, v2, freed, entries, base, base_rate, tmp, conf, top)
        if "packed_rate" in RESULT:
            judge_throughput(base_rate, RESULT["packed_rate"], unpacked_rise(v1, v2),
                             RESULT["packed_others"])
        bad_input(v1, v2, ver, freed, tmp, conf, top)
    finally:
        entries.close()
        shutil.rmtree(tmp, ignore_errors=True)
        left = [d for d in made if os.path.isdir(d)]
        check(not left, f"every cgroup made is gone ({left})")
        now = packlab.cpusets(top)
        check(now == original, "every cpuset.cpus of the hierarchy as at the start")
        if lock:
            lock.close()
    return summary()


if __name__ == "__main__":
    sys.exit(main())
