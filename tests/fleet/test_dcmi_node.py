#!/usr/bin/env python3
"""The BMC's wall power as the node's source (src/sense/dcmi.c) and the
report's reconciliation, end to end through `watt` against ipmi_sim on
127.0.0.1 (the kit in tests/fleet/ipmi_sim, test_dcmi_power.py's harness):

- without a BMC device and without --bmc: the "dcmi" sampler is unavailable
  with the in-band reason (skipped where /dev/ipmi0 exists); with
  libfreeipmi absent (WATT_FREEIPMI_LIBRARY names a missing file), the
  library's reason;
- `watt report --json --bmc HOST:PORT` (password from a 0600 file): the node
  figure from "dcmi" over "lan", the BMC's current watts and period, and
  the reconciliation against the wall on the live root;
- on the intel-2s root, which has an ACPI power meter: that one is chosen
  over the BMC's, and the coverage says so and why;
- on the gpu fixture root (three GPUs' hwmon chips, 438 W): parts under the
  wall (600 W: 162 W unmeasured) and over it (300 W: said, not negative);
- `watt top --once --json --bmc`: the node figure from "dcmi";
- a password file open to others refused; a wrong password: the sampler
  unavailable with the BMC's refusal;
- the agent (bmc = in its ini) on the gpu root with amdgpu's sensor only:
  watt_node_power_watts{source="dcmi"}, the GPUs' part, the remainder
  watt_node_unmeasured_watts{source="dcmi"}, and the sampler up across
  reads (a fresh LAN session per read).

Exit 77 (skip) without ipmi_sim or ipmitool, after the checks that need
neither. Stdlib only."""
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("WATT_DCMI_READ", "")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_dcmi_power as kit  # noqa: E402

WATT = os.environ["WATT"]
FIX = os.environ["WATT_FIXTURES"]
GPU_PARTS_W = 231 + 81 + 126  # amdgpu PPT, i915 energy1, xe energy1 "card"


def report(*args, env=None):
    p = subprocess.run([WATT, "report", "--json", *args], capture_output=True, text=True,
                       timeout=120, env=env)
    assert p.returncode == 0, (args, p.returncode, p.stderr)
    return json.loads(p.stdout)


def dcmi_reason(doc):
    why = [u["reason"] for u in doc["unavailable"] if u["sampler"] == "dcmi"]
    return why[0] if why else None


def check_without_bmc():
    if os.path.exists("/dev/ipmi0"):
        print("# in-band: /dev/ipmi0 exists here; its failure reason is not checked")
    else:
        why = dcmi_reason(report("--interval", "0"))
        assert why and why.startswith("no /dev/ipmi0 (load ipmi_si or ipmi_ssif"), why
        print("ok - report without a BMC device: dcmi unavailable:", why)
    env = dict(os.environ, WATT_FREEIPMI_LIBRARY="/nonexistent/libfreeipmi.so.17")
    why = dcmi_reason(report("--interval", "0", env=env))
    assert why == "/nonexistent/libfreeipmi.so.17 not found: install libfreeipmi17", why
    print("ok - report with libfreeipmi absent:", why)


def lan_args(port, pwfile):
    return ["--bmc", f"127.0.0.1:{port}", "--bmc-user", "admin", "--bmc-password-file", pwfile]


def channel(doc, source):
    return [c for c in doc["power"]["channels"] if c["source"] == source]


def near(a, b):
    return a is not None and abs(a - b) < 1e-6


def check_live(port, pwfile):
    doc = report("--interval", "1", *lan_args(port, pwfile))
    assert dcmi_reason(doc) is None, doc["unavailable"]
    pw = doc["power"]
    (ch,) = channel(doc, "dcmi")
    assert ch["via"] == "lan" and ch["scope"] == "platform" and ch["domain"] == "bmc", ch
    assert near(ch["watts"], 230) and near(ch["period_s"], 1.0), ch
    assert "average" in ch["label"], ch
    if len([c for c in pw["channels"] if c["scope"] == "platform"]) == 1:
        assert pw["measured"] and pw["source"] == "dcmi" and near(pw["it_w"], 230), pw
    rc = doc["reconcile"]
    assert rc["wall_source"] == "dcmi" and rc["wall_via"] == "lan", rc
    assert near(rc["wall_w"], 230), rc
    if rc["parts_complete"] and not rc["parts_exceed_wall"]:
        assert near(rc["parts_w"] + rc["unmeasured_w"], 230), rc
    print(f"ok - live report: node {pw['it_w']} W from {pw['source']}, wall {rc['wall_w']} W, "
          f"parts {rc['parts_w']} W")


def check_fixture(work, port, pwfile):
    root = os.path.join(FIX, "gpu")
    kit.set_watts(work, "600")
    doc = report("--interval", "1", "--root", root, "--pue", "1.2", *lan_args(port, pwfile))
    rc = doc["reconcile"]
    gpus = [p for p in rc["parts"] if p["part"] == "gpus"]
    assert gpus and near(gpus[0]["watts"], GPU_PARTS_W) and gpus[0]["channels"] == 3, rc
    assert near(rc["wall_w"], 600) and near(rc["unmeasured_w"], 600 - GPU_PARTS_W), rc
    assert not rc["parts_exceed_wall"] and near(rc["facility_w"], 720), rc
    assert doc["power"]["source"] == "dcmi", doc["power"]
    print(f"ok - gpu root, 600 W wall: GPUs {GPU_PARTS_W} W, unmeasured {rc['unmeasured_w']} W")
    kit.set_watts(work, "300")
    rc = report("--interval", "1", "--root", root, *lan_args(port, pwfile))["reconcile"]
    assert rc["parts_exceed_wall"] and rc["unmeasured_w"] is None, rc
    assert near(rc["excess_w"], GPU_PARTS_W - 300) and "disagree" in rc["note"], rc
    print("ok - gpu root, 300 W wall: the parts exceed it:", rc["note"])
    # Two wall meters: the ACPI power meter is chosen, and the coverage says
    # over what and why; the BMC's reading is listed, not added.
    doc = report("--interval", "1", "--root", os.path.join(FIX, "intel-2s"),
                 *lan_args(port, pwfile))
    pw = doc["power"]
    assert pw["source"] == "acpi_power_meter", pw
    assert "chosen over the other wall meter: sysfs, no BMC round trip" in pw["coverage"], pw
    assert near(channel(doc, "dcmi")[0]["watts"], 300), pw["channels"]
    assert doc["reconcile"]["wall_source"] == "acpi_power_meter", doc["reconcile"]
    print("ok - two wall meters:", pw["coverage"])
    # watt top: the node figure it splits comes from the BMC too.
    kit.set_watts(work, "250")
    p = subprocess.run([WATT, "top", "--once", "--json", "--interval", "1", "--root", root,
                        *lan_args(port, pwfile)], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    top = json.loads(p.stdout)["power"]
    assert top["source"] == "dcmi" and near(top["node_w"], 250) and top["measured"], top
    print("ok - watt top --once: node", top["node_w"], "W from", top["source"])
    p = subprocess.run([WATT, "report", "--interval", "0", "--root", root, "--bmc-user", "x"],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 2 and "go with --bmc" in p.stderr, (p.returncode, p.stderr)


def check_refusals(work, port, pwfile):
    open_file = os.path.join(work, "open.password")
    with open(open_file, "w") as f:
        f.write("secret\n")
    os.chmod(open_file, 0o644)
    p = subprocess.run([WATT, "report", "--interval", "0", *lan_args(port, open_file)],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 2 and "chmod 600" in p.stderr, (p.returncode, p.stderr)
    env = dict(os.environ, WATT_BMC_PASSWORD="wrong")
    doc = report("--interval", "0", "--bmc", f"127.0.0.1:{port}", "--bmc-user", "admin",
                 env=env)
    why = dcmi_reason(doc)
    assert why and "cannot open an IPMI 2.0 session" in why, doc["unavailable"]
    print("ok - refused: a password file open to others; a wrong password:", why)


def scrape(port):
    with socket.create_connection(("127.0.0.1", port), timeout=10) as c:
        c.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        data = b""
        while chunk := c.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return head.split(b" ")[1:2] == [b"200"], body.decode(errors="replace")


def check_agent(work, port, pwfile):
    kit.set_watts(work, "600")
    root = os.path.join(work, "root")
    shutil.copytree(os.path.join(FIX, "gpu"), root, symlinks=True)
    # The agent reads a recorded root again and again: the i915 and xe
    # energy counters do not move after the second read (a stuck counter
    # gives no rate, so no remainder). Keep amdgpu's power sensor alone.
    # The GPU sampler finds them through their DRM cards: drop those too.
    for chip in ("hwmon1", "hwmon2"):
        os.unlink(os.path.join(root, "sys", "class", "hwmon", chip))
    for card in ("card1", "card2", "renderD129", "renderD130"):
        os.unlink(os.path.join(root, "sys", "class", "drm", card))
    ini = os.path.join(work, "agent.ini")
    with open(ini, "w") as f:
        f.write(f"[agent]\nbmc = 127.0.0.1:{port}\nbmc_user = admin\n"
                f"bmc_password_file = {pwfile}\nwakeups = off\n")
    aport = kit.free_udp_port()  # a free number; TCP is bound by the agent
    p = subprocess.Popen([WATT, "agent", "--config", ini, "--root", root, "--listen",
                          f"127.0.0.1:{aport}", "--interval", "1",
                          "--control", os.path.join(work, "agent.sock")],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    want = ('watt_node_power_watts{basis="measured",source="dcmi"} 600',
            'watt_node_measured_parts_watts{part="gpus"} 231',
            'watt_node_unmeasured_watts{source="dcmi"} 369',
            'watt_sampler_up{sampler="dcmi"} 1')
    text = ""
    try:
        time.sleep(3.5)  # past the BMC's 1 s period: reads after the first
        for _ in range(150):
            if p.poll() is not None:
                break
            try:
                ok, text = scrape(aport)
                if ok and all(w in text for w in want):
                    break
            except OSError:
                pass
            time.sleep(0.1)
    finally:
        p.terminate()
        _, err = p.communicate(timeout=30)
    lines = [ln for ln in text.splitlines() if "dcmi" in ln or "unmeasured" in ln]
    assert all(w in text for w in want), (lines, err)
    print("ok - agent: " + "; ".join(want))


def main():
    check_without_bmc()
    missing = [t for t in ("ipmi_sim", "ipmitool") if not shutil.which(t)]
    if missing:
        print("SKIP: missing " + ", ".join(missing))
        return 77
    with tempfile.TemporaryDirectory(prefix="watt-dcmi-node-") as work:
        port = kit.free_udp_port()
        p = subprocess.run(["sh", kit.RUN, "start", str(port), work],
                           capture_output=True, text=True, timeout=30)
        assert p.returncode == 0, p.stderr
        try:
            subprocess.run(["ipmitool", "-I", "lanplus", "-C", "3", "-H", "127.0.0.1", "-p",
                            str(port), "-U", "admin", "-P", "secret", "chassis", "power", "on"],
                           check=True, capture_output=True, timeout=30)
            kit.set_watts(work, "230")
            pwfile = os.path.join(work, "bmc.password")
            with open(pwfile, "w") as f:
                f.write("secret\n")
            os.chmod(pwfile, 0o600)
            check_live(port, pwfile)
            check_fixture(work, port, pwfile)
            check_refusals(work, port, pwfile)
            check_agent(work, port, pwfile)
        finally:
            subprocess.run(["sh", kit.RUN, "stop", str(port), work], capture_output=True,
                           timeout=30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
