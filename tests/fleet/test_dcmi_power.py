#!/usr/bin/env python3
"""src/sense/dcmi_power.c through its test face (dcmi_read.c):

- libfreeipmi absent (WATT_FREEIPMI_LIBRARY names a missing file): the
  reason "... not found: install libfreeipmi17", in-band and LAN;
- in-band, on a machine without an IPMI device: the open fails with the
  reason "no /dev/ipmi0 (load ipmi_si or ipmi_ssif ...)"; skipped where
  /dev/ipmi0 exists;
- over the LAN (IPMI 2.0) against ipmi_sim on 127.0.0.1 (tests/fleet/
  ipmi_sim): current, min, max, average, period and the "active" state as
  the simulated BMC computes them, and refused credentials as an error.

Exit 77 (skip) when ipmi_sim, ipmitool or a C compiler is missing, after the
in-band check. Stdlib only."""
import os
import shutil
import socket
import subprocess
import sys
import tempfile

KIT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ipmi_sim")
RUN = os.path.join(KIT, "run.sh")
READ = os.environ["WATT_DCMI_READ"]


def dcmi_read(*args, env=None):
    p = subprocess.run([READ, *args], capture_output=True, text=True, timeout=60, env=env)
    vals = dict(line.split("=", 1) for line in p.stdout.splitlines() if "=" in line)
    return p.returncode, vals, p.stderr


def check_inband():
    if os.path.exists("/dev/ipmi0"):
        print("# in-band: /dev/ipmi0 exists here; its failure reason is not checked")
        return
    rc, vals, err = dcmi_read("inband")
    assert rc == 1 and not vals, (rc, vals, err)
    assert "in-band: no /dev/ipmi0 (load ipmi_si or ipmi_ssif" in err, err
    print("ok - in-band open without /dev/ipmi0:", err.strip())


def check_library_absent():
    """libfreeipmi is dlopen()ed: a machine without it gets the reason."""
    env = dict(os.environ, WATT_FREEIPMI_LIBRARY="/nonexistent/libfreeipmi.so.17")
    for args in (["inband"], ["lan", "127.0.0.1:9", "admin", "secret"]):
        rc, vals, err = dcmi_read(*args, env=env)
        assert rc == 1 and not vals, (rc, vals, err)
        assert ("/nonexistent/libfreeipmi.so.17 not found: install libfreeipmi17"
                in err), err
    print("ok - libfreeipmi absent:", err.strip())


def free_udp_port():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def set_watts(work, text):
    with open(os.path.join(work, "watts"), "w") as f:
        f.write(text + "\n")


def check_lan(work, port):
    bmc = f"127.0.0.1:{port}"
    subprocess.run(["ipmitool", "-I", "lanplus", "-C", "3", "-H", "127.0.0.1", "-p", str(port),
                    "-U", "admin", "-P", "secret", "chassis", "power", "on"],
                   check=True, capture_output=True, timeout=30)
    set_watts(work, "230")
    rc, v, err = dcmi_read("lan", bmc, "admin", "secret")
    assert rc == 0, err
    assert v["source"] == f"lan {bmc}", v
    assert (v["current_w"], v["min_w"], v["max_w"], v["average_w"]) == ("230",) * 4, v
    assert v["period_ms"] == "1000" and v["active"] == "1", v
    assert int(v["timestamp"]) > 1_600_000_000, v
    # The simulated BMC's statistics run over its life: min 180, max 230,
    # average (230 + 180) / 2.
    set_watts(work, "180")
    rc, v, err = dcmi_read("lan", bmc, "admin", "secret")
    assert rc == 0, err
    assert (v["current_w"], v["min_w"], v["max_w"], v["average_w"]) == (
        "180", "180", "230", "205"), v
    # No measurement: the BMC says so, and so does the reading.
    set_watts(work, "none")
    rc, v, err = dcmi_read("lan", bmc, "admin", "secret")
    assert rc == 0 and v["active"] == "0", (v, err)
    print("ok - LAN reading from ipmi_sim: current, min, max, average, period, active")
    rc, v, err = dcmi_read("lan", bmc, "admin", "wrong")
    assert rc == 1 and not v, (rc, v, err)
    assert f"lan {bmc}: cannot open an IPMI 2.0 session" in err, err
    print("ok - LAN refused password:", err.strip())


def main():
    check_library_absent()
    check_inband()
    missing = [t for t in ("ipmi_sim", "ipmitool") if not shutil.which(t)]
    if not shutil.which(os.environ.get("CC", "gcc")):
        missing.append("gcc")
    if missing:
        print("SKIP: missing " + ", ".join(missing))
        return 77
    with tempfile.TemporaryDirectory(prefix="watt-dcmi-") as work:
        port = free_udp_port()
        p = subprocess.run(["sh", RUN, "start", str(port), work],
                           capture_output=True, text=True, timeout=30)
        assert p.returncode == 0, p.stderr
        try:
            check_lan(work, port)
        finally:
            subprocess.run(["sh", RUN, "stop", str(port), work], capture_output=True, timeout=30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
