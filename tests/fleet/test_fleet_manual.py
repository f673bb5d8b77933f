#!/usr/bin/env python3
"""watt fleet run as an operator drives it (issue 14), in the lab of
test_fleet_e2e.py (tests/fleet/lab.py): three libvirt session daemons
behind simulated BMCs, four TCG VMs; one lab session, about a minute.

fleet.ini says mode = manual, pins vm3 to h2 and keeps vm1 and vm2 apart
(they start together on h1). Phases, with the invariants of
test_fleet_e2e.py's Watch at every tick, and at every tick once split:
vm1 and vm2 never share a host, vm3 never leaves h2.

  - manual mode holds: ticks pass, plan.json lists the actions with their
    IDs, nothing moves, watt_fleet_plan_pending > 0;
  - watt fleet approve ID: exactly that migration (the anti-affinity
    split) is executed at the next tick, nothing else;
  - watt fleet approve all, each tick: the fleet packs as far as the pin
    and the group allow (two hosts on, one off);
  - watt fleet host HX maintenance on (HX: the other host on): HX is
    evacuated (the group needs the host that was off, switched on on
    approval), HX stays on and in plan.json's maintenance; off again: the
    controller shows it out of maintenance.
"""
import json
import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cli"))
import lab as lablib  # noqa: E402
from checks import check, summary  # noqa: E402
from test_fleet_e2e import (GUEST, VMS, WATT, Controller, Watch, fleet_ini,  # noqa: E402
                            hosts_off, write_ini)

EXTRA = "mode = manual\n"
RULES = "[pin]\nvm3 = h2\n[anti-affinity]\napart = vm1 vm2\n"


def watt(config, *args):
    return subprocess.run([WATT, "fleet", *args, "--config", config], capture_output=True,
                          text=True, timeout=60)


def read_plan(state_dir):
    with open(os.path.join(state_dir, "plan.json")) as f:
        return json.load(f)


class Operator:
    """Ticks one at a time, the constraints checked at each."""

    def __init__(self, lab, ctl, watch):
        self.lab, self.ctl, self.watch = lab, ctl, watch
        self.split = False
        self.bad = []

    def tick(self):
        t = self.ctl.next_tick(timeout=60)
        self.watch.tick(t)
        w = self.lab.where()
        if w.get("vm3") != ["h2"]:
            self.bad.append(f"tick {t and t['tick']}: vm3 (pinned to h2) on {w.get('vm3')}")
        together = w.get("vm1") and w.get("vm1") == w.get("vm2")
        if self.split and together:
            self.bad.append(f"tick {t and t['tick']}: vm1 and vm2 share {w['vm1']}")
        self.split |= bool(w.get("vm1")) and not together
        return t


def main():
    if os.geteuid() != 0:
        print("SKIP: needs root (a throw-away user, daemons under it)")
        return 77
    tmp = tempfile.mkdtemp(prefix="wm", dir="/tmp")
    os.chmod(tmp, 0o755)  # the lab's user must reach its work dir
    state_dir = os.path.join(tmp, "state")
    config = os.path.join(tmp, "fleet.ini")
    metrics = os.path.join(tmp, "fleet.prom")
    t0 = time.monotonic()
    with lablib.Lab(os.path.join(tmp, "lab"), hosts=3, guest=GUEST) as lab:
        for vm, h in zip(VMS, ["h1", "h1", "h2", "h3"]):
            lab.define_vm(vm, h)
        print(f"     lab up in {time.monotonic() - t0:.1f} s")
        write_ini(config, fleet_ini(lab, state_dir, extra=EXTRA) + RULES)
        p = watt(config, "check")
        check(p.returncode == 0 and "mode: manual" in p.stdout and
              "pinned: vm3 to h2" in p.stdout and "anti-affinity apart" in p.stdout,
              f"watt fleet check: mode, pin and group ({p.stdout.strip()[-200:]})")
        before = lab.where()
        ctl = Controller(config, metrics)
        op = Operator(lab, ctl, Watch(lab, os.path.join(state_dir, "journal")))
        try:
            # 1. manual mode holds
            for _ in range(3):
                t = op.tick()
            plan = read_plan(state_dir)
            acts = plan["actions"]
            with open(metrics) as f:
                m = f.read()
            check(lab.where() == before and acts and all(a["state"] == "pending" for a in acts)
                  and all(re.fullmatch(r"[0-9a-f]{8}", a["id"]) for a in acts) and
                  t and t["mode"] == "manual" and not any(a["executed"] for a in t["actions"]) and
                  re.search(r"watt_fleet_plan_pending [1-9]", m),
                  f"manual: {len(acts)} actions planned with IDs, none executed "
                  f"({[(a['id'], a['what']) for a in acts]})")
            split = [a for a in acts if a["reason"] == "anti-affinity"]
            check(len(split) == 1 and split[0]["vm"] in ("vm1", "vm2") and split[0]["src"] == "h1",
                  f"plan.json: vm1/vm2 split for their anti-affinity group ({split})")
            # 2. approve that one; its destination may change before the next
            # tick (the hosts' loads move): then the approval is dropped, said
            # so, and the new action is approved
            done = []
            for attempt in range(4):
                split = [a for a in read_plan(state_dir)["actions"]
                         if a["reason"] == "anti-affinity"]
                if not split:
                    break
                p = watt(config, "approve", split[0]["id"])
                check(p.returncode == 0 and f"approved {split[0]['id']}: migrate" in p.stdout,
                      f"watt fleet approve ID ({p.stdout.strip()[:200]} {p.stderr.strip()})")
                t = op.tick()
                done = [a for a in t["actions"] if a["executed"]] if t else []
                dropped = t and any(f"approval of {split[0]['id']} dropped: no longer planned" in n
                                    for n in t["notes"])
                if done or not dropped:
                    break
                print(f"     {split[0]['id']} ({split[0]['what']}) no longer planned: again")
            w = lab.where()
            moved = [vm for vm in VMS if w.get(vm) != before.get(vm)]
            check(split and len(done) == 1 and done[0]["id"] == split[0]["id"] and done[0]["ok"]
                  and moved == [split[0]["vm"]] and w[split[0]["vm"]] == [split[0]["dst"]] and
                  not hosts_off(lab),
                  f"approved ID: exactly that migration ran ({done}, moved {moved})")
            p = watt(config, "approve", "0badc0de")
            check(p.returncode == 1 and "no such action pending" in p.stderr,
                  f"approve of an ID not in the plan: refused ({p.stderr.strip()})")
            # 3. approve all, each tick, until packed
            end = time.monotonic() + 90
            while time.monotonic() < end:
                w = lab.where()
                if (len(hosts_off(lab)) == 1 and all(len(w.get(vm, [])) == 1 for vm in VMS)
                        and not read_plan(state_dir)["actions"]):
                    break
                if read_plan(state_dir)["actions"]:
                    watt(config, "approve", "all")
                op.tick()
            w = lab.where()
            check(len(hosts_off(lab)) == 1 and w["vm1"] != w["vm2"] and w["vm3"] == ["h2"],
                  f"approve all: packed onto two hosts, vm1/vm2 apart, vm3 on h2 ({w}, "
                  f"off: {hosts_off(lab)})")
            # 4. maintenance of the other host on
            on = [h.name for h in lab.hosts if h.name != "h2" and lab.power_state(h) == 1]
            hx = on[0] if on else "h1"
            p = watt(config, "host", hx, "maintenance", "on")
            check(p.returncode == 0 and "maintenance on" in p.stdout,
                  f"watt fleet host {hx} maintenance on ({p.stdout.strip()} {p.stderr.strip()})")
            end = time.monotonic() + 90
            seen_flag = False
            while time.monotonic() < end:
                t = op.tick()
                seen_flag |= bool(t) and any(x["name"] == hx and x["maintenance"]
                                             for x in t["hosts"])
                w = lab.where()
                if not any(hx in w.get(vm, []) for vm in VMS) and not read_plan(state_dir)["actions"]:
                    break
                if read_plan(state_dir)["actions"]:
                    watt(config, "approve", "all")
            for _ in range(2):  # empty, and left on
                op.tick()
            w = lab.where()
            plan = read_plan(state_dir)
            with open(metrics) as f:
                m = f.read()
            check(seen_flag and not any(hx in w.get(vm, []) for vm in VMS) and
                  lab.power_state(hx) == 1 and plan["maintenance"] == [hx] and
                  f'watt_fleet_host_maintenance{{host="{hx}"}} 1' in m and w["vm1"] != w["vm2"],
                  f"maintenance: {hx} evacuated and left on ({w}, off: {hosts_off(lab)}, "
                  f"plan.json maintenance {plan['maintenance']})")
            p = watt(config, "plan", "--sample", "0")
            line = [ln for ln in p.stdout.splitlines() if ln.strip().startswith(hx)]
            check(p.returncode == 0 and line and "(maintenance)" in line[0],
                  f"watt fleet plan shows {hx} in maintenance ({line})")
            p = watt(config, "host", hx, "maintenance", "off")
            t = op.tick()
            check(p.returncode == 0 and t and
                  not any(x["maintenance"] for x in t["hosts"]) and
                  read_plan(state_dir)["maintenance"] == [],
                  f"maintenance off: {hx} out of maintenance at the next tick")
        finally:
            rc = ctl.stop()
        check(rc == 0, f"SIGTERM: the controller exits 0 ({rc}; {ctl.err[-3:]})")
        check(not op.watch.bad and not op.bad,
              f"invariants, pin and group held at all {op.watch.ticks} ticks "
              f"({(op.watch.bad + op.bad)[:3]})")
        check(not op.watch.journal_closed(), "the journal closes every action it began")
        check(not lab.violations(), "no host was ever switched off with a VM on it")
    print(f"     whole test {time.monotonic() - t0:.0f} s")
    subprocess.run(["rm", "-rf", tmp], check=False)
    return summary()


if __name__ == "__main__":
    sys.exit(main())
