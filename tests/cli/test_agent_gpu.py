#!/usr/bin/env python3
"""The agent's GPU metrics (src/agent/metrics_gpu.c, docs/agent-metrics.md
"GPUs") on the generated `gpu` root (tests/fixtures/gen/mkgpu.py), alone
and with the NVML double (tests/helpers/nvml_double.c) answering for the
nvidia card; the text passes `promtool check metrics` where promtool is
installed."""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checks import check, free_port, stop, summary  # noqa: E402

WATT = os.environ["WATT"]
FIX = os.environ["WATT_FIXTURES"]

H100 = """count 1
name 0 NVIDIA H100 80GB HBM3
bus 0 00000000:19:00.0
power 0 71000
energy 0 5000000 5071000 5142000 5213000 5284000 5355000 5426000 5497000 5568000 5639000
limit 0 700000
limit_range 0 200000/700000
util 0 0/0
clock_sm 0 345
clock_mem 0 2619
pstate 0 8
temp 0 33
procs 0 -
"""


def series(text, name):
    """{labels-string: value} of one family."""
    out = {}
    for line in text.splitlines():
        m = re.match(r"^%s\{(.*)\} (\S+)$" % re.escape(name), line)
        if m:
            out[m.group(1)] = float(m.group(2))
    return out


def find(s, **labels):
    for k, v in s.items():
        if all(f'{a}="{b}"' in k for a, b in labels.items()):
            return v
    return None


def scrape(env, want, timeout=8.0):
    port = free_port()
    p = subprocess.Popen([WATT, "agent", "--root", os.path.join(FIX, "gpu"), "--interval", "0.5",
                          "--control", "", "--listen", f"127.0.0.1:{port}"], env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    text = ""
    try:
        end = time.time() + timeout
        while time.time() < end:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
                    text = r.read().decode()
                if want(text):
                    break
            except OSError:
                pass
            time.sleep(0.25)
    finally:
        stop(p)
    return text


def promtool(text, what):
    tool = shutil.which("promtool")
    if not tool:
        print(f"# {what}: no promtool, not checked")
        return
    r = subprocess.run([tool, "check", "metrics"], input=text, capture_output=True, text=True)
    check(r.returncode == 0, f"promtool check metrics, {what}: {(r.stdout + r.stderr)[-300:]}")


def test_sysfs():
    env = dict(os.environ, WATT_NVML_LIBRARY="")
    text = scrape(env, lambda t: 'watt_gpu_power_watts{gpu="card1"' in t)
    info = series(text, "watt_gpu_info")
    check(len(info) == 4 and find(info, gpu="card3", driver="nvidia", pdev="0000:19:00.0"),
          f"watt_gpu_info: four GPUs, the nvidia card among them ({list(info)})")
    check(find(info, gpu="card0", perf_level="auto") == 1, "watt_gpu_info: amdgpu's perf level")
    pw = series(text, "watt_gpu_power_watts")
    check(find(pw, gpu="card0", via="driver_reading") == 231,
          f"watt_gpu_power_watts card0: amdgpu's power1_average ({pw})")
    w = find(pw, gpu="card1", via="energy_counter")
    check(w is not None and 70 < w < 210,
          f"watt_gpu_power_watts card1: i915's energy counter, 81 J over the agent's ~0.5-s "
          f"interval ({pw})")
    check(find(pw, gpu="card3") is None, "no power series for the nvidia card without NVML")
    en = series(text, "watt_gpu_energy_joules_total")
    check(find(en, gpu="card1") and find(en, gpu="card0") is None,
          f"watt_gpu_energy_joules_total: i915's counter, none for amdgpu ({en})")
    check(find(series(text, "watt_gpu_busy_ratio"), gpu="card0") == 0.91, "busy ratio 0.91")
    check(find(series(text, "watt_gpu_power_limit_watts"), gpu="card0") == 300, "limit 300 W")
    check(find(series(text, "watt_gpu_power_limit_max_watts"), gpu="card2") == 190,
          "xe: the card's rated max")
    check(find(series(text, "watt_gpu_clock_hertz"), gpu="card0", clock="core") == 1.7e9,
          "amdgpu core clock 1.7 GHz")
    check(find(series(text, "watt_gpu_temperature_celsius"), gpu="card0") == 47, "47 °C")
    rpm = series(text, "watt_gpu_runtime_suspended")
    check(len(rpm) == 4 and set(rpm.values()) == {0}, f"runtime_suspended: 4 GPUs awake ({rpm})")
    promtool(text, "gpu root")


def test_nvml():
    with tempfile.NamedTemporaryFile("w", suffix=".nvml", delete=False) as f:
        f.write(H100)
    try:
        env = dict(os.environ, WATT_NVML_LIBRARY=os.environ["WATT_NVML_DOUBLE"],
                   WATT_NVML_SCRIPT=f.name)
        text = scrape(env, lambda t: 'watt_gpu_power_watts{gpu="nvml0"' in t)
    finally:
        os.unlink(f.name)
    info = series(text, "watt_gpu_info")
    check(find(info, gpu="nvml0", name="NVIDIA H100 80GB HBM3", perf_level="P8") == 1 and
          find(info, gpu="card3") is None,
          f"watt_gpu_info: the nvidia card once, as nvml0, P8 ({list(info)})")
    pw = find(series(text, "watt_gpu_power_watts"), gpu="nvml0")
    check(pw is not None and 60 < pw < 300,
          f"watt_gpu_power_watts nvml0: 71 J a sample over the agent's interval ({pw})")
    check(find(series(text, "watt_gpu_energy_joules_total"), gpu="nvml0") is not None,
          "watt_gpu_energy_joules_total nvml0")
    check(find(series(text, "watt_gpu_power_limit_min_watts"), gpu="nvml0") == 200,
          "NVML limit range: 200 W")
    promtool(text, "gpu root with NVML")


def main():
    test_sysfs()
    if os.environ.get("WATT_NVML_DOUBLE"):
        test_nvml()
    return summary()


if __name__ == "__main__":
    sys.exit(main())
