#!/usr/bin/env python3
"""Device runtime PM: the SAFE candidates `watt report --json` lists are
exactly the devices `watt tune balanced --dry-run --json` would change, on
every fixture (a copy where the test changes files), with no devices.conf and with one that denies a
device and allows one whose wakeup is enabled (docs/tune-devices.md).
Also: no virtio, HID, root-fs or default-NIC device is ever planned; a bad
devices.conf gives one error line naming file:line in both verbs; live on
this machine (read-only), no virtio device is SAFE and none is planned.

Report and tune both judge from one sample here (`--interval 0`), as
documented: with an interval the report may see fewer candidates.

Usage: test_tune_devices.py [WATT] (default: $WATT); fixtures from
$WATT_FIXTURES."""
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checks import check, summary  # noqa: E402

WATT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.environ["WATT"])
FIXTURES = os.environ.get("WATT_FIXTURES") or os.path.join(
    os.path.dirname(WATT), "tests", "fixtures")
SANITIZER = ("Sanitizer", "runtime error:", "Segmentation", "Aborted", "core dumped")
KNOBS = ("devices.runtime_pm", "devices.autosuspend_delay_ms")
HARD_TAGS = {"virtio", "HID", "input below", "root fs", "root fs?", "default NIC", "NIC?"}


def run(args, confdir):
    env = dict(os.environ, WATT_CONFIG_DIR=confdir)
    env.pop("WATT_ROOT", None)
    return subprocess.run([WATT, *args], capture_output=True, text=True, env=env, timeout=120)


def crashed(p):
    return p.returncode < 0 or any(s in p.stderr for s in SANITIZER)


def report(root, confdir):
    args = ["report", "--interval", "0", "--json"] + (["--root", root] if root else [])
    p = run(args, confdir)
    check(p.returncode == 0 and not crashed(p), f"report {root or 'live'}: exit {p.returncode} "
          f"{p.stderr.strip()[-300:]}")
    return json.loads(p.stdout)["devices"] if p.returncode == 0 else None


def tune(root, confdir):
    args = ["tune", "balanced", "--dry-run", "--json"] + (["--root", root] if root else [])
    p = run(args, confdir)
    check(p.returncode == 0 and not crashed(p), f"tune {root or 'live'}: exit {p.returncode} "
          f"{p.stderr.strip()[-300:]}")
    return json.loads(p.stdout) if p.returncode == 0 else None


def device_of(path):
    """/sys/devices/X/power/control -> devices/X (report's sysfs_path)."""
    for suffix in ("/power/control", "/power/autosuspend_delay_ms"):
        if path.startswith("/sys/") and path.endswith(suffix):
            return path[len("/sys/"):-len(suffix)]
    return None


def compare(what, root, confdir):
    """Report's SAFE set == tune's device set; nothing unsafe planned.
    Returns the report's devices object and the SAFE set (sysfs paths)."""
    dev, plan = report(root, confdir), tune(root, confdir)
    if dev is None or plan is None:
        return dev, set()
    by_path = {d["sysfs_path"]: d for d in dev["devices"]}
    safe = {d["sysfs_path"] for d in dev["devices"] if d["verdict"] == "safe"}
    changes = [c for c in plan["changes"] if c["knob"] in KNOBS]
    planned = {device_of(c["path"]) for c in changes}
    control = {device_of(c["path"]) for c in changes if c["path"].endswith("/power/control")}
    check(safe == planned, f"{what}: report's safe {sorted(safe)} == tune's {sorted(planned)}")
    # control "on" -> "auto" for exactly the SAFE devices whose control is on
    on = {p for p in safe if by_path[p]["control"] == "on"}
    check(control == on, f"{what}: power/control planned for the safe devices that are on")
    check(all(c["new"] == "auto" for c in changes if c["path"].endswith("/power/control")),
          f"{what}: power/control only ever set to auto")
    protected = [a["sysfs_path"] for a in dev["protected"]]
    for p in planned:
        d = by_path.get(p)
        check(d is not None, f"{what}: planned {p} is a device the report lists")
        if d is None:
            continue
        bad = (d["kind"] == "virtio" or d["driver"] == "virtio-pci" or d["vendor"] == "0x1af4"
               or d["class"] == "HID" or d["tag"] in HARD_TAGS
               or any(a == p or a.startswith(p + "/") for a in protected))
        check(not bad, f"{what}: {p} ({d['tag']}) is no virtio/HID/root-fs/default-NIC device")
    unsafe = sum(1 for d in dev["devices"] if d["verdict"] == "unsafe")
    note = [n for n in plan["notes"] if "left on" in n]
    check((unsafe == 0) == (not note) and
          (not note or note[0].startswith(f"devices.runtime_pm: {unsafe} device")),
          f"{what}: one note counts the {unsafe} unsafe devices: {note}")
    return dev, safe


def write(root, rel, text):
    path = os.path.join(root, rel)
    check(os.path.isdir(os.path.dirname(path)), f"{os.path.dirname(path)} exists")
    with open(path, "w") as f:
        f.write(text)


def find(dev, name):
    return next(d for d in dev["devices"] if d["name"] == name)


# Per fixture: how to prepare the copy, the devices.conf, and the SAFE set
# expected under it (names). Each denies a SAFE device and allows a device
# armed for wakeup that nothing else forbids.
def prep_amd(root):
    return ("deny driver=ahci            # the spare SATA controller\n"
            "allow 1022:148c             # xHCI, wakeup enabled\n", {"0000:02:00.3"})


def prep_intel(root):
    # the USB stick's interface made a candidate of its own, armed for wakeup
    iface = "sys/devices/pci0000:00/0000:00:14.0/usb2/2-1/2-1:1.0/power"
    write(root, iface + "/control", "on\n")
    write(root, iface + "/wakeup", "enabled\n")
    return ("deny path=/sys/bus/usb/devices/2-1\n"
            "allow driver=usb-storage\n", {"2-1:1.0"})


def prep_big(root):
    # nothing SAFE here; allow cannot lift a hard or built-in rule
    return "allow *:*\ndeny 8086:1521\n", set()


SCENARIOS = {"amd-epyc": prep_amd, "intel-2s": prep_intel, "big-384": prep_big}
# Fixtures the test changes are copied; the others (big-384: 130 MB) are
# only read: report and `tune --dry-run` write nothing, and on these two the
# dry run plans no change, so it opens no knob for writing either (checked
# with inotify over a whole run of the suite).
WRITES = {"intel-2s", "amd-epyc"}


def fixture(name, tmp):
    src = os.path.join(FIXTURES, name)
    if not os.path.isdir(src):
        check(False, f"fixture {src} exists")
        return
    root = src
    if name in WRITES:
        root = os.path.join(tmp, name)
        shutil.copytree(src, root, symlinks=True)
    empty = os.path.join(tmp, name + "-noconf")
    os.mkdir(empty)
    _, base = compare(f"{name} built-in", root, empty)
    if name in ("intel-2s", "amd-epyc"):
        check(len(base) > 0, f"{name}: some SAFE candidate without a policy")
    if name not in SCENARIOS:
        return
    conf, want = SCENARIOS[name](root)
    confdir = os.path.join(tmp, name + "-conf")
    os.mkdir(confdir)
    write(confdir, "devices.conf", conf)
    dev, safe = compare(f"{name} devices.conf", root, confdir)
    if dev is None:
        return
    names = {d["name"] for d in dev["devices"] if d["sysfs_path"] in safe}
    check(names == want, f"{name} devices.conf: SAFE {sorted(names)}, want {sorted(want)}")
    check(dev["policy_file"] == os.path.join(confdir, "devices.conf"),
          f"{name}: report names the policy file")
    decided = [d for d in dev["devices"] if d["policy_rule"]]
    for d in decided:
        check(d["policy_rule"].startswith(os.path.join(confdir, "devices.conf") + ":"),
              f"{name}: {d['name']} decided by {d['policy_rule']}")
    if name == "amd-epyc":
        d = find(dev, "0000:03:00.0")
        check(d["verdict"] == "unsafe" and d["reason"] ==
              f"denied by {confdir}/devices.conf:1 (driver=ahci)", f"amd-epyc deny: {d['reason']}")
        d = find(dev, "0000:02:00.3")
        check(d["wakeup"] == "enabled" and d["verdict"] == "safe" and
              "allowed by" in d["reason"], f"amd-epyc allow: {d['reason']}")


def bad_conf(tmp):
    confdir = os.path.join(tmp, "bad")
    os.mkdir(confdir)
    write(confdir, "devices.conf", "deny driver=btusb\n# fine so far\ndney 8086:1533\n")
    # the copy fixture() made: a dry run opens each knob it would change for
    # writing (tune/knobs.c, writable()), which is not for the shared tree
    # other tests copy and read at the same time
    root = os.path.join(tmp, "amd-epyc")
    want = f"{confdir}/devices.conf:3: unknown action 'dney'"
    for verb, args in (("report", ["report", "--interval", "0", "--root", root]),
                       ("tune", ["tune", "balanced", "--dry-run", "--root", root])):
        p = run(args, confdir)
        lines = p.stderr.strip().splitlines()
        check(p.returncode != 0 and not crashed(p) and not p.stdout.strip(),
              f"bad devices.conf: {verb} refuses (exit {p.returncode})")
        check(len(lines) == 1 and want in lines[0],
              f"bad devices.conf: {verb} prints one line with file:line: {lines}")
    # --config-dir wins over $WATT_CONFIG_DIR in both verbs
    p = run(["report", "--interval", "0", "--root", root, "--config-dir", tmp], confdir)
    check(p.returncode == 0, f"report --config-dir overrides the environment: {p.stderr.strip()}")
    p = run(["tune", "balanced", "--dry-run", "--root", root, "--config-dir", tmp], confdir)
    check(p.returncode == 0, f"tune --config-dir overrides the environment: {p.stderr.strip()}")


def live(tmp):
    if not os.path.isdir("/sys/bus"):
        print("skip live: no /sys/bus")
        return
    empty = os.path.join(tmp, "live-noconf")
    os.mkdir(empty)
    dev = report(None, empty)
    if dev is None:
        return
    virtio = [d for d in dev["devices"] if d["kind"] == "virtio" or
              d["driver"] == "virtio-pci" or d["vendor"] == "0x1af4"]
    check(all(d["verdict"] != "safe" for d in virtio),
          f"live: none of {len(virtio)} virtio devices is SAFE")
    plan = tune(None, empty)  # --dry-run: reads only
    if plan is None:
        return
    planned = {device_of(c["path"]) for c in plan["changes"] if c["knob"] in KNOBS}
    check(not planned & {d["sysfs_path"] for d in virtio}, "live: no virtio device planned")
    safe = {d["sysfs_path"] for d in dev["devices"] if d["verdict"] == "safe"}
    check(planned == safe, f"live: report's safe {sorted(safe)} == tune's {sorted(planned)}")


def main():
    with tempfile.TemporaryDirectory(prefix="watt-tune-devices-") as tmp:
        for name in ("intel-2s", "amd-epyc", "big-384", "node_exporter"):
            fixture(name, tmp)
        bad_conf(tmp)
        live(tmp)
    return summary()


if __name__ == "__main__":
    sys.exit(main())
