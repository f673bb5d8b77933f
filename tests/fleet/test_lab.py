#!/usr/bin/env python3
"""Smoke test of the fleet lab (lab.py), without watt: three libvirt session
daemons answer; four VMs start across them; the guest's idle/busy load shows in
libvirt's cpu.time and survives a p2p live migration; a BMC power off (ipmitool)
makes its host unreachable and power on brings it back; switching off a host that
runs a VM records a violation and kills the VM; the faults (daemon crash and
restart, frozen daemon, mute BMC, a migration that does not converge) behave; a
lab killed by SIGTERM cleans up, one killed by SIGKILL is cleaned up by the next
start(); stop() leaves no process, port or user behind. Prints the lab's timings and memory.

Needs root, libvirtd, qemu-system-x86_64, ipmi_sim, ipmitool, gcc; exits 77
(skip) without them. The guest kernel comes from $WATT_FLEET_GUEST (meson)."""
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lab as L  # noqa: E402

failures = []


def fail(msg):
    failures.append(msg)
    print(f"FAIL: {msg}", flush=True)


def check(cond, msg):
    if not cond:
        fail(msg)
    return cond


def skip_reason():
    if os.geteuid() != 0:
        return "needs root"
    for tool in (L.LIBVIRTD, L.QEMU):
        if not os.access(tool, os.X_OK):
            return f"{tool} missing"
    for tool in ("virsh", "ipmi_sim", "ipmitool", "gcc"):
        if not shutil.which(tool):
            return f"{tool} missing"
    guest = os.environ.get("WATT_FLEET_GUEST")
    if not guest or not os.path.isfile(guest):
        return "WATT_FLEET_GUEST (the guest kernel) not set or missing"
    return None


def ipmitool(h, *args):
    """The command line an operator would type, not the lab's helper."""
    return subprocess.run(["ipmitool", "-I", "lanplus", "-C", "3", "-H", "127.0.0.1",
                           "-p", str(h.bmc_port), "-U", "admin", "-P", "secret", *args],
                          capture_output=True, text=True, timeout=30)


def cpu_idle_share():
    """Machine-wide idle jiffies (idle + iowait) and total, from /proc/stat."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return v[3] + v[4], sum(v[:8])


def busy_ok(lab, vm, what):
    """VM's busy share > 0.8 of a CPU, or > 0.25 while the machine had no idle CPU
    (other work competes: the guest takes what it can get)."""
    i0, t0 = cpu_idle_share()
    share = lab.cpu_share(vm, 3.0)
    i1, t1 = cpu_idle_share()
    idle = (i1 - i0) / max(1, t1 - t0)
    print(f"  {what}: {vm} busy {share:.2f} CPU (machine idle {idle:.0%})", flush=True)
    if share > 0.8:
        return share
    check(idle < 0.05 and share > 0.25,
          f"{what}: busy {vm} used {share:.2f} CPU while the machine was {idle:.0%} idle")
    return share


def idle_ok(lab, vm, what):
    share = lab.cpu_share(vm, 3.0)
    print(f"  {what}: {vm} idle {share:.3f} CPU", flush=True)
    check(share < 0.05, f"{what}: idle {vm} used {share:.3f} CPU (want < 0.05)")
    return share


def child_lab(workdir, sig):
    """Start a lab in a child process, wait until it is up, send SIG. Returns
    (rc, the child's ipmi_sim PIDs)."""
    code = ("import sys, time; sys.path.insert(0, %r); import lab as L\n"
            "with L.Lab(%r, hosts=1) as lab:\n"
            "    print(lab.hosts[0].ipmi_sim.pid, flush=True); time.sleep(120)\n"
            % (os.path.dirname(os.path.abspath(__file__)), workdir))
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    p.send_signal(sig)
    rc = p.wait(60)
    return rc, [int(line)] if line.strip() else []


def no_lab_left(what, uid, pids):
    check(not os.path.exists(L.STATE), f"{what}: {L.STATE} left behind")
    try:
        pwd.getpwnam(L.USER)
        fail(f"{what}: user {L.USER} left behind")
    except KeyError:
        pass
    if uid is not None:
        left = L._uid_pids(uid)
        check(not left, f"{what}: processes of uid {uid} left: {left}")
    left = [p for p in pids if L._alive(p)]
    check(not left, f"{what}: ipmi_sim left: {left}")


def test_signals(tmp):
    """SIGTERM: the lab stops itself. SIGKILL: the next start() cleans up."""
    rc, pids = child_lab(os.path.join(tmp, "term"), signal.SIGTERM)
    check(rc == 128 + signal.SIGTERM, f"SIGTERM'd lab exited {rc}")
    check(pids, "SIGTERM'd lab never came up")
    no_lab_left("after SIGTERM", None, pids)
    rc, pids = child_lab(os.path.join(tmp, "kill"), signal.SIGKILL)
    check(rc == -signal.SIGKILL, f"SIGKILL'd lab exited {rc}")
    check(os.path.exists(L.STATE), "a SIGKILL'd lab left no state for the next one")
    return pids


def test_power(lab, h):
    """Switch H (running no VM) off and on with ipmitool; soft off and on."""
    p = ipmitool(h, "chassis", "power", "off")
    check(p.returncode == 0 and "Down/Off" in p.stdout, f"power off {h.name}: {p.stdout}{p.stderr}")
    check(not lab.host_up(h), f"{h.name} still answers after power off")
    check(not L._tcp_open(h.port), f"{h.name}: libvirtd port {h.port} still open after power off")
    v = lab.virsh(h, "list", check=False, timeout=10)
    check(v.returncode != 0, f"virsh still reaches {h.name} after power off")
    p = ipmitool(h, "chassis", "power", "status")
    check("is off" in p.stdout, f"{h.name} power status after off: {p.stdout}{p.stderr}")
    t0 = time.monotonic()
    p = ipmitool(h, "chassis", "power", "on")
    check(p.returncode == 0 and "Up/On" in p.stdout, f"power on {h.name}: {p.stdout}{p.stderr}")
    lab.wait_up(h, 30)
    print(f"  power on -> {h.name} answers: {time.monotonic() - t0:.2f} s", flush=True)
    check(lab.domains(h) == [], f"{h.name} runs {lab.domains(h)} after power on")
    p = ipmitool(h, "chassis", "power", "soft")
    check(p.returncode == 0, f"soft off {h.name}: {p.stdout}{p.stderr}")
    check(not lab.host_up(h) and lab.power_state(h) == 0, f"{h.name} up after soft off")
    lab.power(h, "on")
    lab.wait_up(h, 30)
    raw = [(k, v) for _, k, v in lab.power_log(h)]
    # ipmitool resends a request after its 1-s timeout (-N 1 -R 2); on a
    # loaded machine the hook that boots a host can outlast it, so the BMC
    # runs the same "on" twice: a repeated (hook, power) pair is one request
    log = []
    for i in range(0, len(raw), 2):
        pair = raw[i:i + 2]
        if len(log) < 2 or log[-2:] != pair:
            log += pair
    want = [("hook", "on rc=0"), ("power", "1"), ("hook", "off rc=0"), ("power", "0"),
            ("hook", "on rc=0"), ("power", "1"), ("hook", "soft-off rc=0"), ("power", "0"),
            ("hook", "on rc=0"), ("power", "1")]
    check(log == want, f"{h.name} power log {raw}, want {want} (a repeated pair counted once)")


def test_migration_timeout(lab, vm, src, dst):
    """A dirty VM with 1 MiB/s of migration bandwidth does not converge; aborted,
    it stays on SRC alone."""
    lab.set_load(vm, "dirty")
    lab.limit_migration(vm, 1)
    t0 = time.monotonic()
    try:
        lab.migrate(vm, src, dst, timeout=6)
        fail(f"{vm}: migration with 1 MiB/s while dirtying RAM converged")
    except L.LabError as e:
        check("no answer in 6 s" in str(e), f"{vm}: migration failed early: {e}")
    check(lab.running()[vm] == [src.name, dst.name], f"{vm} not on both hosts: {lab.running()}")
    lab.virsh(src, "domjobabort", vm)
    end = time.monotonic() + 15
    # the destination's qemu goes first, then its libvirtd forgets the domain
    while ((lab.running()[vm], lab.where()[vm]) != ([src.name], [src.name])
           and time.monotonic() < end):
        time.sleep(0.1)
    print(f"  {vm} {src.name} -> {dst.name} at 1 MiB/s: no convergence, aborted after "
          f"{time.monotonic() - t0:.2f} s", flush=True)
    check(lab.running()[vm] == [src.name] and lab.where()[vm] == [src.name],
          f"{vm} after the aborted migration: running {lab.running()}, where {lab.where()}")
    lab.limit_migration(vm, 0)
    lab.set_load(vm, "idle")


def test_faults(lab, h, vm):
    """Daemon crash and restart (the VM keeps running), frozen daemon, mute BMC."""
    qemus = L.host_qemus(lab._cfg(h))
    lab.kill_daemon(h)
    check(not lab.host_up(h), f"{h.name} answers after kill_daemon")
    check(vm not in lab.where() or lab.where()[vm] == [], f"where() sees {vm} on a dead daemon")
    check(lab.running()[vm] == [h.name], f"running() lost {vm}: {lab.running()}")
    check(L.host_qemus(lab._cfg(h)) == qemus, f"{h.name}: qemus changed by kill_daemon")
    lab.restart_daemon(h)
    lab.wait_up(h, 30)
    check(vm in (lab.domains(h) or []), f"{h.name} lost {vm} over a daemon restart")
    lab.freeze_daemon(h)
    t0 = time.monotonic()
    up = lab.virsh(h, "list", check=False, timeout=3).returncode == 0
    check(not up, f"frozen {h.name} answered virsh")
    check(not lab.host_up(h), f"frozen {h.name} counts as up")
    lab.thaw_daemon(h)
    lab.wait_up(h, 30)
    print(f"  freeze/thaw {h.name}: {time.monotonic() - t0:.2f} s", flush=True)
    lab.bmc_mute(h)
    p = lab.ipmi(h, "chassis", "power", "status", retries=0, timeout=10)
    check(p.returncode != 0, f"mute BMC of {h.name} answered: {p.stdout}")
    lab.bmc_unmute(h)
    p = ipmitool(h, "chassis", "power", "status")
    check("is on" in p.stdout, f"BMC of {h.name} after unmute: {p.stdout}{p.stderr}")


def run(tmp):
    stale_pids = test_signals(tmp)
    work = os.path.join(tmp, "lab")
    uid = None
    lab = L.Lab(work, hosts=3)
    try:
        with lab:
            uid = lab.uid
            print(f"lab start: {lab.timings['start']:.2f} s "
                  f"(after a SIGKILL'd lab: cleaned up)", flush=True)
            check(not [p for p in stale_pids if L._alive(p)], "stale ipmi_sim survives start()")
            h1, h2, h3 = lab.hosts
            for h in lab.hosts:
                check(lab.host_up(h) and lab.power_state(h) == 1, f"{h.name} not up at start")
                p = ipmitool(h, "chassis", "power", "status")
                check("is on" in p.stdout, f"{h.name}: {p.stdout}{p.stderr}")
            ini = lab.fleet_ini_hosts()
            check(ini.count("[host ") == 3 and f"uri = {h1.uri}" in ini, f"fleet.ini: {ini}")

            place = {"vm1": h1, "vm2": h2, "vm3": h3, "vm4": h1}
            for vm, h in place.items():
                t0 = time.monotonic()
                lab.define_vm(vm, h)
                print(f"VM {vm} on {h.name}: define+start {time.monotonic() - t0:.2f} s",
                      flush=True)
            where = lab.where()
            check(where == {vm: [h.name] for vm, h in place.items()}, f"where(): {where}")
            check(lab.running() == where, f"running() {lab.running()} != where() {where}")
            time.sleep(1)  # boot: SeaBIOS and the multiboot loader
            print(f"memory, 3 hosts + 4 idle VMs: {lab.memory_kib() / 1024:.0f} MiB", flush=True)

            print("load:", flush=True)
            idle_ok(lab, "vm1", "boot")
            lab.set_busy("vm1", True)
            time.sleep(0.5)
            busy_ok(lab, "vm1", "on h1")
            dt = lab.migrate("vm1", h1, h2)
            print(f"  p2p live migration vm1 h1 -> h2 (busy): {dt:.2f} s", flush=True)
            check(lab.where()["vm1"] == ["h2"], f"vm1 after migration: {lab.where()}")
            check(lab.virsh(h1, "dominfo", "vm1", check=False).returncode != 0,
                  "vm1 still defined on h1 after --undefinesource")
            busy_ok(lab, "vm1", "after migration")
            lab.set_busy("vm1", False)
            time.sleep(0.5)
            idle_ok(lab, "vm1", "on h2")
            dt = lab.migrate("vm3", h3, h2)
            print(f"  p2p live migration vm3 h3 -> h2 (idle): {dt:.2f} s", flush=True)

            print("power:", flush=True)
            test_power(lab, h3)
            check(lab.violations() == [], f"violations without a VM: {lab.violations()}")

            print("migration timeout:", flush=True)
            test_migration_timeout(lab, "vm2", h2, h3)

            print("violation:", flush=True)
            lab.power(h2, "off")  # runs vm1, vm2, vm3
            v = lab.violations()
            check(len(v) == 1 and v[0]["host"] == "h2" and v[0]["kind"] == "off"
                  and v[0]["domains"] == ["vm1", "vm2", "vm3"], f"violations: {v}")
            check(not L.host_qemus(lab._cfg(h2)), "qemus of h2 survive its power off")
            lab.power(h2, "on")
            lab.wait_up(h2, 30)
            w = lab.where()
            check(w == {"vm1": [], "vm2": [], "vm3": [], "vm4": ["h1"]},
                  f"VMs of a switched-off host run: {w}")

            print("faults:", flush=True)
            test_faults(lab, h1, "vm4")
            print(f"memory at the end: {lab.memory_kib() / 1024:.0f} MiB", flush=True)
            pids = [h.ipmi_sim.pid for h in lab.hosts]
            ports = [h.port for h in lab.hosts]
    finally:
        if lab.timings.get("stop") is not None:
            print(f"lab stop: {lab.timings['stop']:.2f} s", flush=True)
    no_lab_left("after stop()", uid, pids + stale_pids)
    check(not any(map(L._tcp_open, ports)), "a libvirtd port is still open after stop()")
    lab.stop()  # idempotent


def main():
    why = skip_reason()
    if why:
        print(f"SKIP: {why}")
        return 77
    with tempfile.TemporaryDirectory(prefix="wlt", dir="/tmp") as tmp:
        os.chmod(tmp, 0o755)  # the lab's user must reach the child labs below it
        t0 = time.monotonic()
        try:
            run(tmp)
        except L.LabError as e:
            fail(f"lab: {e}")
        print(f"total {time.monotonic() - t0:.1f} s", flush=True)
    if failures:
        print(f"{len(failures)} failure(s)")
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
