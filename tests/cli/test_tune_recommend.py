#!/usr/bin/env python3
"""`watt tune --recommend` on the fixture roots, on copies changed to be a
VM, a laptop, a redis or a PTP host, and on this machine: the profile, which
reason decided, the facts each line names, the command to apply it, the
same output twice, the JSON shape, and usage errors.

Usage: test_tune_recommend.py [WATT] (default: $WATT); fixtures from $WATT_FIXTURES."""
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
from checks import check, copy_fixture, summary  # noqa: E402

WATT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.environ["WATT"])
FIXTURES = os.environ["WATT_FIXTURES"]
ENV = dict(os.environ, WATT_CONFIG_DIR="/nonexistent-watt-config")
ENV.pop("WATT_ROOT", None)
BAD = ("Sanitizer", "runtime error:", "Segmentation", "Aborted")


def run(*args):
    return subprocess.run([WATT, "tune", "--recommend", *args], capture_output=True, text=True,
                          env=ENV, timeout=120)


def recommend(root):
    p = run("--root", root, "--json")
    check(p.returncode == 0 and not any(b in p.stderr for b in BAD),
          f"{root}: exit 0, clean stderr ({p.returncode}: {p.stderr.strip()[:200]})")
    try:
        return json.loads(p.stdout)
    except ValueError as e:
        check(False, f"{root}: JSON parses ({e})")
        return None


def reasons(doc):
    return {r["check"]: r for r in doc["reasons"]} if doc else {}


def expect(name, root, profile, decided, facts):
    doc = recommend(root)
    if not doc:
        return None
    r = reasons(doc)
    check(doc.get("schema") == "watt-tune-recommend/1" and isinstance(doc.get("time"), str),
          f"{name}: schema watt-tune-recommend/1 and a time")
    check(doc["profile"]["name"] == profile, f"{name}: profile {profile} ({doc['profile']['name']})")
    got = sorted(k for k, v in r.items() if v["decides"])
    check(got == sorted(decided), f"{name}: decided by {decided} ({got})")
    for key, text in facts.items():
        check(key in r and text in r[key]["found"],
              f"{name}: {key} says '{text}' ({r.get(key, {}).get('found')})")
    check(doc["profile"]["apply"] == f"watt tune {profile} --root {root}"
          and doc["profile"]["dry_run"] == f"watt tune {profile} --dry-run --root {root}",
          f"{name}: the commands name the profile and the root")
    for x in doc["reasons"]:
        check(all(isinstance(x.get(k), str) and x[k] for k in ("check", "found", "means")),
              f"{name}: reason {x.get('check')} has check, found and means")
    return doc


def add_process(root, pid, comm):
    d = os.path.join(root, "proc", str(pid))
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "stat"), "w") as f:
        f.write(f"{pid} ({comm}) S 1 {pid} {pid} 0 -1 4194560 0 0 0 0 10 5 0 0 20 0 4 0 900 "
                "1000 100 0\n")


def add_listener(root, port):
    os.makedirs(os.path.join(root, "proc", "net"), exist_ok=True)
    with open(os.path.join(root, "proc", "net", "tcp6"), "w") as f:
        f.write("  sl  local_address                         remote_address                        "
                "st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n")
        f.write(f"   0: 00000000000000000000000000000000:{port:04X} "
                "00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 "
                "00000000   999        0 4321 1 0000000000000000 100 0 0 10 0\n")


def fixtures(tmp):
    fx = lambda n: os.path.join(FIXTURES, n)  # noqa: E731
    expect("intel-2s", fx("intel-2s"), "balanced", ["battery"],
           {"virtualisation": "bare metal", "cpufreq": "intel_pstate",
            "cpuidle": "intel_idle, 4 states", "rapl": "powercap", "packages": "2 packages",
            "latency": "no latency-critical daemon"})
    expect("amd-epyc", fx("amd-epyc"), "balanced", ["battery"],
           {"cpufreq": "acpi-cpufreq", "cpuidle": "acpi_idle", "rapl": "perf power PMU",
            "packages": "1 package, 64 CPUs"})
    expect("big-384", fx("big-384"), "balanced", ["battery"],
           {"cpufreq": "amd-pstate-epp", "packages": "2 packages, 376 CPUs"})
    expect("node_exporter", fx("node_exporter"), "powersave", ["battery"],
           {"battery": "BAT0", "virtualisation": "DMI: Dell Inc. PowerEdge R6515"})

    # the same tree, one fact changed each
    vm = copy_fixture(FIXTURES, "intel-2s", os.path.join(tmp, "vm"))
    path = os.path.join(vm, "proc", "cpuinfo")
    with open(path) as f:
        text = f.read()
    with open(path, "w") as f:
        f.write(text.replace("flags\t\t: ", "flags\t\t: hypervisor "))
    expect("intel-2s+hypervisor", vm, "balanced", ["virtualisation"],
           {"virtualisation": "a virtual machine (cpuinfo hypervisor flag)"})

    qemu = copy_fixture(FIXTURES, "amd-epyc", os.path.join(tmp, "qemu"))
    dmi = os.path.join(qemu, "sys", "class", "dmi", "id")
    os.makedirs(dmi)
    for name, value in (("sys_vendor", "QEMU"), ("product_name", "Standard PC (Q35 + ICH9, 2009)")):
        with open(os.path.join(dmi, name), "w") as f:
            f.write(value + "\n")
    expect("amd-epyc+DMI QEMU", qemu, "balanced", ["virtualisation"],
           {"virtualisation": "DMI: QEMU Standard PC"})

    redis = copy_fixture(FIXTURES, "amd-epyc", os.path.join(tmp, "redis"))
    add_process(redis, 4242, "redis-server")
    doc = expect("amd-epyc+redis-server", redis, "latency", ["latency"],
                 {"latency": "redis-server (pid 4242)", "guard": "port:6379"})
    text = run("--root", redis).stdout
    check(f"watt tune latency --dry-run --root {redis}" in text
          and "* latency" in text and "- battery" in text,
          "redis: the text marks the deciding line and gives the command")

    port = copy_fixture(FIXTURES, "intel-2s", os.path.join(tmp, "port"))
    add_listener(port, 11211)
    expect("intel-2s+:11211", port, "latency", ["latency"],
           {"latency": "port 11211 (memcached) listening", "guard": "port:11211"})

    ptp = copy_fixture(FIXTURES, "node_exporter", os.path.join(tmp, "ptp"))
    add_process(ptp, 77, "ptp4l")
    expect("node_exporter+ptp4l (battery too)", ptp, "latency", ["latency"],
           {"guard": "process:ptp4l", "battery": "BAT0"})

    # nginx and postgres in intel-2s are not latency-critical: looked at, not chosen
    a, b = run("--root", fx("intel-2s")), run("--root", fx("intel-2s"))
    check(a.returncode == 0 and a.stdout == b.stdout and "Recommended profile: balanced" in a.stdout,
          "intel-2s: the text is the same twice")


def live():
    p = run("--json")
    check(p.returncode == 0, f"live: exit 0 ({p.stderr.strip()[:200]})")
    doc = json.loads(p.stdout) if p.returncode == 0 else None
    if not doc:
        return
    r = reasons(doc)
    check(doc["profile"]["name"] in ("balanced", "latency", "powersave", "performance")
          and doc["profile"]["apply"] == "watt tune " + doc["profile"]["name"]
          and doc["profile"]["undo"] == "watt restore", "live: a built-in and its commands")
    with open("/proc/cpuinfo") as f:
        hv = any(line.startswith("flags") and " hypervisor" in line for line in f)
    if hv:
        check(r["virtualisation"]["found"].startswith("a virtual machine"),
              f"live: this VM is seen as one ({r['virtualisation']['found']})")
    print(run().stdout)


def usage():
    for args in (["balanced"], ["--dry-run"], ["--list"], ["--status"]):
        p = run(*args)
        check(p.returncode == 2 and p.stderr.startswith("watt tune: "),
              f"--recommend {' '.join(args)}: exit 2 with a watt tune: line ({p.stderr.strip()})")
    p = run("--root", "/nonexistent/watt-root")
    check(p.returncode == 1 and "/nonexistent/watt-root" in p.stderr,
          f"a missing root: exit 1 naming it ({p.stderr.strip()})")


def main():
    tmp = tempfile.mkdtemp(prefix="watt-recommend-")
    try:
        fixtures(tmp)
        live()
        usage()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return summary()


if __name__ == "__main__":
    sys.exit(main())
