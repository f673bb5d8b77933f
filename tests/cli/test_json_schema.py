#!/usr/bin/env python3
"""Every --json document of watt against its JSON Schema (schema/, draft-07,
python3-jsonschema): report, top, tune (dry run, apply, status, list, show),
restore and fleet sim|compare on the fixture roots; report and one top frame
live on this machine; the agent's /status and `watt ctl status` (an agent on a
fixture root, 127.0.0.1 and a temporary socket); fleet run|plan|host on a
fleet made of files (tests/fleet/fake_fleet.sh) when watt-fleet is built.

Each document also starts with "schema" and "time" (docs/json.md), and with
WATT_TIME_NOW set its time is that one. The schemas bite: broken copies of
real documents (a member missing, a wrong type, a value outside an enum, an
old marker) must fail, and a bad WATT_TIME_NOW is refused.
Prints one line per check, exits 1 on any failure."""
import copy
import glob
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

try:
    import jsonschema
except ImportError:
    print("FAIL python3-jsonschema is not installed (tools/setup.sh --test installs it)")
    sys.exit(1)

WATT = os.environ.get("WATT") or "build/watt"
FIXTURES = os.environ.get("WATT_FIXTURES", "build/tests/fixtures")
SRC = os.environ.get("WATT_SRCDIR", os.path.join(os.path.dirname(__file__), "..", ".."))
SCHEMAS = os.path.join(SRC, "schema")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checks import check, copy_fixture, free_port, stop, summary  # noqa: E402

TIME_NOW = "1796406600"
TIME_TEXT = "2026-12-04T17:50:00Z"
ENV = dict(os.environ, WATT_TIME_NOW=TIME_NOW, WATT_FLEET_CHECK="1")
ENV.pop("WATT_ROOT", None)
MACHINES = ["intel-2s", "amd-epyc", "big-384", "node_exporter"]


def load_schemas():
    out = {}
    for path in sorted(glob.glob(os.path.join(SCHEMAS, "watt-*.json"))):
        with open(path) as f:
            s = json.load(f)
        jsonschema.Draft7Validator.check_schema(s)
        name = os.path.basename(path)[:-len(".json")]
        marker = s["properties"]["schema"]["const"]
        check(marker.split("/")[0] == name and s["required"][:2] == ["schema", "time"],
              f"schema/{name}.json: names {marker}, requires schema and time")
        out[marker] = jsonschema.Draft7Validator(s)
    return out


SCHEMA = load_schemas()


def errors(doc):
    """The validation errors of DOC against the schema its marker names."""
    v = SCHEMA.get(doc.get("schema") if isinstance(doc, dict) else None)
    if v is None:
        return [f"no schema file for {doc.get('schema') if isinstance(doc, dict) else doc!r}"]
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message[:160]}"
            for e in v.iter_errors(doc)]


def valid(what, doc, marker, fixed_time=True):
    errs = errors(doc) if isinstance(doc, dict) else ["not a JSON object"]
    head = list(doc)[:2] if isinstance(doc, dict) else []
    if isinstance(doc, dict) and doc.get("schema") != marker:
        errs.insert(0, f"schema {doc.get('schema')!r}, want {marker!r}")
    if head != ["schema", "time"]:
        errs.insert(0, f"first members {head}, want ['schema', 'time']")
    if fixed_time and isinstance(doc, dict) and doc.get("time") != TIME_TEXT:
        errs.insert(0, f"time {doc.get('time')!r}, want WATT_TIME_NOW's {TIME_TEXT}")
    check(not errs, f"{what}: valid {marker}" + (f": {errs[:3]}" if errs else ""))
    return doc


def run_json(what, args, marker, cwd=None, fixed_time=True, env=ENV):
    p = subprocess.run([WATT, *args], capture_output=True, text=True, cwd=cwd, env=env,
                       timeout=300)
    try:
        doc = json.loads(p.stdout)
    except ValueError as e:
        check(False, f"{what}: exit {p.returncode}, not JSON ({e}): {p.stderr.strip()[:300]}")
        return None
    if p.returncode != 0:  # a sanitizer's report, say, after a whole document
        check(False, f"{what}: exit {p.returncode}: {p.stderr.strip()[-300:]}")
    return valid(what, doc, marker, fixed_time)


def bites(what, doc, breakage):
    """A broken copy of a valid DOC must not validate."""
    if doc is None:
        check(False, f"{what}: no document to break")
        return
    bad = copy.deepcopy(doc)
    breakage(bad)
    errs = errors(bad)
    check(bool(errs), f"the schema bites: {what} is refused ({errs[:1]})")


# ---- fixture roots -----------------------------------------------------------------


def test_report_top():
    docs = {}
    for m in MACHINES:
        for interval in ("0", "1"):
            docs[m, interval] = run_json(f"report --root {m} --interval {interval}",
                                         ["report", "--root", m, "--interval", interval,
                                          "--json"], "watt-report/2", cwd=FIXTURES)
        run_json(f"top --once --root {m}", ["top", "--once", "--json", "--interval", "1",
                                            "--root", m], "watt-top/2", cwd=FIXTURES)
    rep = docs["intel-2s", "1"]
    bites("a report without its time", rep, lambda d: d.pop("time"))
    bites("a report marked watt-report/1", rep, lambda d: d.update(schema="watt-report/1"))
    bites("a report whose time is not RFC 3339 UTC", rep,
          lambda d: d.update(time="2026-12-04 17:50:00"))
    bites("a power channel of an unknown scope", rep,
          lambda d: d["power"]["channels"][0].update(scope="kitchen"))
    bites("a C-state latency as a string", rep,
          lambda d: d["cstates"]["states"][0].update(latency_us="2"))
    bites("a problem without its reason", rep, lambda d: d["problems"].append({"where": "x"}))
    bites("a report without its host section", rep, lambda d: d.pop("host"))
    packing = [a for a in (rep or {}).get("advice") or [] if "pack" in a]
    check(len(packing) == 1 and packing[0]["pack"]["idle_packages"] == 1,
          "report intel-2s: one packing advice, one package left idle")
    bites("a packing advice without its low estimate", rep,
          lambda d: [a for a in d["advice"] if "pack" in a][0]["pack"].pop("saving_low_w"))
    top = run_json("top --once --root intel-2s (again)", ["top", "--once", "--json", "--root",
                                                          "intel-2s", "--interval", "1"],
                   "watt-top/2", cwd=FIXTURES)
    bites("a top frame counted by 'magic'", top,
          lambda d: d["wakeups"].update(counted_by="magic"))
    bites("a process without its pid", top, lambda d: d["processes"][0].pop("pid"))
    bites("an empty object", {"schema": "watt-top/2"}, lambda d: None)


def test_tune(tmp):
    root = copy_fixture(FIXTURES, "intel-2s", tmp)
    journal = os.path.join(tmp, "journal")
    common = ["--root", root, "--journal", journal]
    plan = run_json("tune latency --dry-run", ["tune", "latency", "--dry-run", "--json", *common],
                    "watt-tune/2")
    check(plan is not None and len(plan["changes"]) > 0, "tune latency --dry-run: changes")
    bites("a change without its new value", plan, lambda d: d["changes"][0].pop("new"))
    run_json("tune latency (applied)", ["tune", "latency", "--json", *common], "watt-tune/2")
    st = run_json("tune --status", ["tune", "--status", "--json", *common], "watt-tune-status/2")
    bites("a journal row by 'someone'", st, lambda d: d["changed"][0].update(by="someone"))
    run_json("restore --dry-run", ["restore", "--dry-run", "--json", *common], "watt-restore/2")
    rs = run_json("restore", ["restore", "--json", *common], "watt-restore/2")
    bites("a restore count below zero", rs, lambda d: d.update(restored=-1))
    ver = run_json("tune latency --verify", ["tune", "latency", "--verify=1", "--json", *common],
                   "watt-tune/2")
    pk = ver["verify"]["after"]["packages"] if ver else []
    check(len(pk) == 2 and all(p["rapl_package_w"] > 0 and p["cpus"] == 20 for p in pk),
          "tune --verify: a row per package with its CPUs and RAPL package watts")
    bites("a verify package without its RAPL watts", ver,
          lambda d: d["verify"]["before"]["packages"][0].pop("rapl_package_w"))
    bites("a package C-state named 'kitchen'", ver,
          lambda d: d["verify"]["after"]["packages"][0]["package_cstates"].append(
              {"state": "kitchen", "residency_pct": 1}))
    run_json("restore after --verify", ["restore", "--json", *common], "watt-restore/2")
    ls = run_json("tune --list", ["tune", "--list", "--json"], "watt-tune-list/1")
    bites("a profile of kind 'magic'", ls, lambda d: d["profiles"][0].update(kind="magic"))
    run_json("tune --show latency", ["tune", "--show", "latency", "--json"], "watt-tune-show/1")
    rec = run_json("tune --recommend (fixture)", ["tune", "--recommend", "--json", "--root", root],
                   "watt-tune-recommend/1")
    bites("a recommendation that no reason decides", rec,
          lambda d: [r.update(decides=False) for r in d["reasons"]])
    run_json("tune --recommend (live)", ["tune", "--recommend", "--json"], "watt-tune-recommend/1")


def test_fleet_sim():
    syn = ["--synthetic", "60", "--seed", "3", "-q", "--json"]
    sim = run_json("fleet sim --synthetic", ["fleet", "sim", *syn], "watt-fleet-sim/2")
    check(sim is not None and len(sim["runs"]) == 1 and "series" in sim["runs"][0],
          "fleet sim: one run, with its series")
    cmp = run_json("fleet compare --synthetic",
                   ["fleet", "compare", *syn, "--policies", "watt,iqr-mmt-1.5"],
                   "watt-fleet-compare/2")
    bites("a run whose SLATAH is a percentage", cmp, lambda d: d["runs"][0].update(slatah=5.04))
    bites("a run in mode 'fast'", cmp, lambda d: d["runs"][0].update(mode="fast"))
    bites("a compare with no run", cmp, lambda d: d.update(runs=[]))
    bites("a document of the old shape (an array)", cmp, lambda d: d.update(schema=None))
    # the two files say the same of a run
    with open(os.path.join(SCHEMAS, "watt-fleet-sim.json")) as f:
        a = json.load(f)
    with open(os.path.join(SCHEMAS, "watt-fleet-compare.json")) as f:
        b = json.load(f)
    check(a["properties"]["runs"] == b["properties"]["runs"],
          "watt-fleet-sim.json and watt-fleet-compare.json describe the same run object")


# ---- live ----------------------------------------------------------------------------


def test_live():
    run_json("report on this machine", ["report", "--interval", "0.2", "--json"],
             "watt-report/2")
    env = {k: v for k, v in ENV.items() if k != "WATT_TIME_NOW"}
    t0 = time.time()
    doc = run_json("report on this machine, the clock's time", ["report", "--interval", "0",
                                                                "--json"],
                   "watt-report/2", fixed_time=False, env=env)
    if doc:
        t = time.mktime(time.strptime(doc["time"], "%Y-%m-%dT%H:%M:%SZ")) - time.timezone
        check(t0 - 2 <= t <= time.time() + 1, f"without WATT_TIME_NOW, time is now ({doc['time']})")
    run_json("top, one frame on this machine", ["top", "--once", "--json", "--interval", "1",
                                                "--limit", "20"], "watt-top/2")


def test_time_env():
    for bad in ("", "soon", "-1", "1.5", "99999999999999"):
        p = subprocess.run([WATT, "report", "--json", "--root", "intel-2s"], cwd=FIXTURES,
                           capture_output=True, text=True, env=dict(ENV, WATT_TIME_NOW=bad))
        check(p.returncode == 2 and p.stdout == "" and
              f"$WATT_TIME_NOW='{bad}'" in p.stderr,
              f"WATT_TIME_NOW={bad!r}: exit 2 naming it ({p.returncode}: {p.stderr.strip()[:120]})")


# ---- the agent -----------------------------------------------------------------------


def http_get(port, path):
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return head.split(b" ")[1] if head else b"", body


def test_agent(tmp):
    root = copy_fixture(FIXTURES, "intel-2s", tmp)
    sock = os.path.join(tmp, "ctl.sock")
    port = free_port()
    p = subprocess.Popen([WATT, "agent", "--root", root, "--listen", f"127.0.0.1:{port}",
                          "--interval", "60", "--control", sock], env=ENV,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        body = None
        for _ in range(200):
            if p.poll() is not None:
                break
            try:
                code, body = http_get(port, "/status")
                if code == b"200":
                    break
            except OSError:
                pass
            time.sleep(0.05)
        try:
            doc = json.loads(body) if body else None
        except ValueError:
            doc = None
        if doc is None:
            check(False, f"agent /status: no document (exit {p.poll()})")
        else:
            valid("agent /status", doc, "watt-report/2")
            check("agent" in doc, "agent /status: the report with its agent member")
        if os.geteuid() == 0:
            r = subprocess.run([WATT, "ctl", "--socket", sock, "status"], capture_output=True,
                               text=True, env=ENV, timeout=10)
            try:
                st = json.loads(r.stdout)
            except ValueError:
                st = None
            if st is None:
                check(False, f"ctl status: not JSON: {r.stderr.strip()[:200]}")
            else:
                valid("watt ctl status", st, "watt-ctl-status/1")
                bites("a ctl status without its port", st, lambda d: d.pop("port"))
        else:
            print("skip: watt ctl status (the control socket answers root only)")
    finally:
        stop(p)


# ---- a fleet made of files -----------------------------------------------------------

FLEET_INI = """[controller]
interval_s = 1
state_dir = {d}/state
vm_engine = exec
power = exec
migrations_per_vm_day = 1000
policy = window=1
[exec]
list = {cmd} list {{host}}
migrate = {cmd} migrate {{vm}} {{src}} {{dst}}
power_on = {cmd} power {{host}} on
power_off = {cmd} power {{host}} off
power_status = {cmd} power {{host}} status
timeout_s = 30
[type small]
cores = 4
mips_per_core = 1000
ram_mb = 8192
power_w = 100,110,120,130,140,150,160,170,180,190,200
boot_s = 1
"""


def fake_fleet(d):
    """Three hosts on; six busy VMs on h1 (overloaded), nothing elsewhere."""
    f = os.path.join(d, "fleet")
    for sub in ("hosts/h1", "hosts/h2", "hosts/h3", "power", "locks", "lost"):
        os.makedirs(os.path.join(f, sub))
    shutil.copy(os.path.join(SRC, "tests", "fleet", "fake_fleet.sh"), d)
    with open(os.path.join(f, "migrate_s"), "w") as out:
        out.write("0.05\n")
    for h in ("h1", "h2", "h3"):
        with open(os.path.join(f, "power", h), "w") as out:
            out.write("on\n")
    for i in range(6):
        with open(os.path.join(f, "hosts", "h1", f"vm{i}"), "w") as out:
            out.write("100 262144 1\n")
    ini = os.path.join(d, "fleet.ini")
    with open(ini, "w") as out:
        out.write(FLEET_INI.format(d=d, cmd=f"/bin/sh {d}/fake_fleet.sh {f}"))
        for h in ("h1", "h2", "h3"):
            out.write(f"[host {h}]\ntype = small\n")
    return ini


def test_fleet_real(tmp):
    if os.environ.get("WATT_FLEET_ENGINES") == "0":
        print("skip: fleet run|plan|host (built without the fleet engines)")
        return
    ini = fake_fleet(tmp)
    cfg = ["--config", ini]
    plan = run_json("fleet plan (fake fleet)", ["fleet", "plan", *cfg, "--json", "--sample", "1"],
                    "watt-fleet-plan/1")
    prom = os.path.join(tmp, "fleet.prom")
    p = subprocess.run([WATT, "fleet", "run", *cfg, "--ticks", "2", "--json", "--metrics", prom],
                       capture_output=True, text=True, env=ENV, timeout=120)
    lines = [ln for ln in p.stdout.splitlines() if ln.strip()]
    check(p.returncode == 0 and len(lines) == 2,
          f"fleet run --ticks 2 --json: exit 0, one document a line ({p.returncode}, "
          f"{len(lines)} lines: {p.stderr.strip()[:200]})")
    ticks = []
    for i, ln in enumerate(lines):
        try:
            ticks.append(valid(f"fleet run tick {i + 1}", json.loads(ln), "watt-fleet-run/2"))
        except ValueError as e:
            check(False, f"fleet run tick {i + 1}: not JSON ({e})")
    acts = [a for t in ticks for a in t.get("actions", [])]
    check(any(a.get("action") == "migrate" for a in acts),
          f"fleet run: the overloaded host's VMs are planned away ({len(acts)} actions)")
    if acts:
        bites("a migration without its destination", ticks[0] if ticks[0]["actions"] else
              ticks[-1], lambda d: d["actions"][0].pop("dst", None) or d["actions"][0].pop("host"))
    bites("a host in state 'napping'", plan, lambda d: d["hosts"][0].update(state="napping"))
    run_json("fleet host h1 status", ["fleet", "host", *cfg, "h1", "status", "--json"],
             "watt-fleet-host-status/1")
    ls = run_json("fleet host h2 list", ["fleet", "host", *cfg, "h2", "list", "--json"],
                  "watt-fleet-host-list/1")
    check(ls is not None and len(ls["domains"]) > 0,
          f"fleet host h2 list: the VMs migrated there ({ls and len(ls['domains'])})")
    agent_serves_fleet_metrics(tmp, prom)


def agent_serves_fleet_metrics(tmp, prom):
    """The metrics file the real controller wrote, as the agent serves it:
    checked and kept (watt_agent_fleet_metrics_up 1) in OpenMetrics, whose
    rules are stricter than the text format's (docs/agent-metrics.md)."""
    if not os.path.exists(prom):
        check(False, f"fleet run --metrics: {prom} was not written")
        return
    root = copy_fixture(FIXTURES, "intel-2s", os.path.join(tmp, "agent-root"))
    ini = os.path.join(tmp, "agent.ini")
    with open(ini, "w") as f:
        f.write(f"[agent]\nfleet_metrics = {prom}\nwakeups = off\n")
    port = free_port()
    p = subprocess.Popen([WATT, "agent", "--config", ini, "--root", root, "--listen",
                          f"127.0.0.1:{port}", "--interval", "60",
                          "--control", os.path.join(tmp, "fm.sock")], env=ENV,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    body = b""
    try:
        for _ in range(200):
            if p.poll() is not None:
                break
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=10) as c:
                    c.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                              b"Accept: application/openmetrics-text; version=1.0.0\r\n\r\n")
                    data = b""
                    while chunk := c.recv(65536):
                        data += chunk
                head, _, body = data.partition(b"\r\n\r\n")
                if head.split(b" ")[1:2] == [b"200"]:
                    break
            except OSError:
                pass
            time.sleep(0.05)
    finally:
        stop(p)
    text = body.decode(errors="replace")
    lines = text.rstrip("\n").splitlines()
    check("watt_agent_fleet_metrics_up 1" in lines and lines[-1:] == ["# EOF"] and
          any(ln.startswith("watt_fleet_hosts{") for ln in lines),
          "the controller's --metrics file is served by the agent in OpenMetrics "
          f"(fleet_metrics_up 1, watt_fleet_hosts, # EOF last; "
          f"{sum(ln.startswith('watt_fleet_') for ln in lines)} watt_fleet_ samples)")


# ---- the source: every marker has its schema -------------------------------------------


def test_markers():
    seen = set()
    for path in glob.glob(os.path.join(SRC, "src", "**", "*.c"), recursive=True):
        with open(path, encoding="utf-8", errors="replace") as f:
            seen |= set(re.findall(r'"(watt-[a-z-]+/[0-9]+)"', f.read()))
    missing = sorted(m for m in seen if m not in SCHEMA)
    check(seen and not missing, f"every marker in src/ has a schema file ({len(seen)} markers; "
                                f"missing {missing})")
    unused = sorted(m for m in SCHEMA if m not in seen)
    check(not unused, f"every schema file names a marker watt writes (unused {unused})")
    with open(os.path.join(SCHEMAS, "meson.build")) as f:
        listed = set(re.findall(r"'(watt-[a-z-]+\.json)'", f.read()))
    files = {os.path.basename(p) for p in glob.glob(os.path.join(SCHEMAS, "watt-*.json"))}
    check(listed == files, f"schema/meson.build installs every schema file "
                           f"(not listed {sorted(files - listed)}, absent {sorted(listed - files)})")


def main():
    test_markers()
    test_report_top()
    test_time_env()
    with tempfile.TemporaryDirectory(prefix="watt-schema-") as tmp:
        test_tune(tmp)
    test_fleet_sim()
    with tempfile.TemporaryDirectory(prefix="watt-schema-") as tmp:
        test_agent(tmp)
    with tempfile.TemporaryDirectory(prefix="watt-schema-") as tmp:
        test_fleet_real(tmp)
    test_live()
    return summary()


if __name__ == "__main__":
    sys.exit(main())
