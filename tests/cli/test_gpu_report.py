#!/usr/bin/env python3
"""watt report's GPU section and the GPUs in its power section, on the
generated `gpu` root (tests/fixtures/gen/mkgpu.py): alone (four DRM cards,
the nvidia one without NVML) and with the NVML double
(tests/helpers/nvml_double.c) answering for the nvidia card. Each GPU is
counted once in the power channels, as source "gpu"; the JSON follows
schema/watt-report.json."""
import json
import os
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checks import check, summary  # noqa: E402

WATT = os.environ["WATT"]
FIX = os.environ["WATT_FIXTURES"]
SCHEMA = os.path.join(os.environ["WATT_SRCDIR"], "schema", "watt-report.json")

H100 = """count 1
name 0 NVIDIA H100 80GB HBM3
bus 0 00000000:19:00.0
power 0 305000 298000
energy 0 5000000 5300000
limit 0 700000
limit_range 0 200000/700000
util 0 0/0
clock_sm 0 345
clock_mem 0 2619
pstate 0 8
temp 0 33
procs 0 -
"""


def report(env=None, fmt="json"):
    args = [WATT, "report", "--root", "gpu", "--interval", "1"] + (["--json"] if fmt == "json"
                                                                     else [])
    p = subprocess.run(args, capture_output=True, text=True, cwd=FIX,
                       env=dict(os.environ, **(env or {})))
    check(p.returncode == 0, f"{' '.join(args[1:])}: exit 0 ({p.stderr.strip()[:200]})")
    return json.loads(p.stdout) if fmt == "json" and p.returncode == 0 else p.stdout


def validate(doc, what):
    try:
        import jsonschema
    except ImportError:
        print(f"# {what}: python3-jsonschema missing, schema not checked")
        return
    errs = list(jsonschema.Draft7Validator(json.load(open(SCHEMA))).iter_errors(doc))
    check(not errs, f"{what}: follows the schema ({[e.message for e in errs[:2]]})")


def gpu(doc, pdev):
    return next((d for d in doc["gpus"]["devices"] if d["pdev"] == pdev), None)


def channels(doc):
    return {(c["source"], c["domain"]): c for c in doc["power"]["channels"]}


def test_sysfs():
    env = {"WATT_NVML_LIBRARY": ""}
    doc = report(env)
    if not doc:
        return
    validate(doc, "report --root gpu")
    ch = channels(doc)
    check(not [k for k in ch if k[0] == "hwmon"],
          f"no hwmon channel of a GPU chip is left: {sorted(ch)}")
    want = {"card0": (231, "driver_reading"), "card1": (81, "energy_counter"),
            "card2": (126, "energy_counter")}
    for dom, (w, how) in want.items():
        c = ch.get(("gpu", dom))
        check(c is not None and abs(c["watts"] - w) < 0.01 and c["scope"] == "device",
              f"power channel gpu/{dom}: {w} W ({c})")
        d = next(d for d in doc["gpus"]["devices"] if d["id"] == dom)
        check(abs(d["watts"] - w) < 0.01 and d["watts_from"] == how,
              f"gpus {dom}: {w} W from the {how}")
    amd = gpu(doc, "0000:03:00.0")
    check(amd["busy_pct"] == 91 and amd["perf_level"] == "auto" and amd["limit_w"] == 300 and
          amd["core_mhz"] == 1700 and amd["runtime_pm"]["control"] == "auto",
          f"amdgpu: busy, perf level, limit, clock, runtime PM ({amd})")
    nv = gpu(doc, "0000:19:00.0")
    check(nv and nv["id"] == "card3" and nv["watts"] is None and "NVML" in nv["watts_absent"],
          f"the nvidia card without NVML: no watts, and why ({nv})")
    gpu_adv = [a for a in doc["advice"] if "GPU" in a["action"]]
    check(not gpu_adv, f"no GPU advice: the held GPUs are busy, the nvidia card's holders "
          f"unknown without NVML ({gpu_adv})")
    text = report(env, "text")
    check("GPUs\n  card0  amdgpu" in text and "231.0 W (driver's reading)" in text,
          "text: the GPUs section")


def test_nvml():
    with tempfile.NamedTemporaryFile("w", suffix=".nvml", delete=False) as f:
        f.write(H100)
    try:
        doc = report({"WATT_NVML_LIBRARY": os.environ["WATT_NVML_DOUBLE"],
                      "WATT_NVML_SCRIPT": f.name})
    finally:
        os.unlink(f.name)
    if not doc:
        return
    validate(doc, "report --root gpu with NVML")
    devs = doc["gpus"]["devices"]
    check([d["id"] for d in devs] == ["card0", "card1", "card2", "nvml0"],
          f"the nvidia card listed once, by NVML ({[d['id'] for d in devs]})")
    nv = gpu(doc, "0000:19:00.0")
    check(nv["name"] == "NVIDIA H100 80GB HBM3" and nv["via"] == "nvml" and
          nv["runtime_pm"]["control"] == "on" and nv["pstate"] == 8,
          f"nvml0: NVML's readings and the card's runtime PM ({nv})")
    check(abs(nv["watts"] - 300) < 0.01 and nv["watts_from"] == "energy_counter",
          f"nvml0: 300 J over the second is 300 W ({nv['watts']})")
    adv = [a for a in doc["advice"] if "GPU nvml0" in a["action"]]
    check(len(adv) == 1 and abs(adv[0]["saving_w"] - 300) < 0.01 and
          "0000:19:00.0/power/control" in adv[0]["how"],
          f"advice: let the idle, unheld H100 runtime-suspend, saving its measured 300 W ({adv})")
    c = channels(doc).get(("gpu", "nvml0"))
    check(c is not None and c["via"] == "nvml", f"power channel gpu/nvml0 via nvml ({c})")


def main():
    test_sysfs()
    if os.environ.get("WATT_NVML_DOUBLE"):
        test_nvml()
    else:
        print("# WATT_NVML_DOUBLE not set: NVML part not run")
    return summary()


if __name__ == "__main__":
    sys.exit(main())
