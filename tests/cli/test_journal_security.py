#!/usr/bin/env python3
"""The undo journal can only undo, and only what watt did (issue 13, parts
1 and 2), checked with the watt binary:

On a copy of the intel-2s fixture (a recorded root):
  - forged records with valid checksums naming a block device,
    sysrq-trigger, core_pattern, uevent_helper, /proc/self/root/..., a
    knob's file with a value no knob takes: `watt restore` (and --force)
    writes none, names each, keeps the journal byte for byte, exits 1;
  - knob files that are symlinks out of the tree (absolute, and "../.."
    past the root): never written through;
  - a journal (or its directory) writable by others, or owned by another
    user: refused before anything is written, by restore, tune and
    tune --status;
  - --root whose sys or var is a symlink: refused, nothing created outside;
  - a value changed since watt wrote it: left, reported, kept (exit 1);
    `tune --status` does not attribute it to watt; --force puts it back;
  - records of an earlier boot (boot_id changed): not written, moved to
    journal.earlier-boot, exit 0; --force on that file writes them;
  - a line that fails its checksum: moved to journal.corrupt, named, exit 1.
On a live root ("/") inside a private mount namespace whose /sys is a
tmpfs holding knob files that are symlinks out of /sys (absolute and
relative), with and without openat2 (WATT_HOST_NO_OPENAT2=1: the
component-by-component walk): no forged record writes anything.

Usage: test_journal_security.py [WATT]; fixtures from $WATT_FIXTURES."""
import os
import shutil
import subprocess
import sys
import tempfile
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checks import check, summary  # noqa: E402

WATT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.environ["WATT"])
FIXTURES = os.environ.get("WATT_FIXTURES") or os.path.join(
    os.path.dirname(WATT), "tests", "fixtures")
JOURNAL = "var/lib/watt/journal"
GOV = "devices/system/cpu/cpufreq/policy%d/scaling_governor"
BOOT = "proc/sys/kernel/random/boot_id"


def record(seq, body):
    line = f"W seq={seq} tx=1 t=1 pid=1 owner=cli {body}"
    return f"{line} crc={zlib.crc32(line.encode()):08x}\n"


def forge(root, bodies, journal=JOURNAL):
    path = os.path.join(root, journal)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write("watt-journal 1\n")
        for i, b in enumerate(bodies):
            f.write(record(i + 1, b))
    return path


def run(*args, env=None):
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run([WATT, *args], capture_output=True, text=True, timeout=60, env=e)


def read(path):
    with open(path) as f:
        return f.read()


def fresh(tmp, name="root"):
    root = os.path.join(tmp, name)
    shutil.copytree(os.path.join(FIXTURES, "intel-2s"), root, symlinks=True)
    os.remove(os.path.join(root, "watt-faults"))  # a steady machine
    return root


def test_forged(tmp):
    root = fresh(tmp, "forged")
    targets = {"dev/sda": "disk\n", "proc/sysrq-trigger": "\n",
               "proc/sys/kernel/core_pattern": "core\n",
               "sys/kernel/uevent_helper": "\n", "etc/passwd": "root:x:0:0\n"}
    for rel, text in targets.items():
        os.makedirs(os.path.dirname(os.path.join(root, rel)), exist_ok=True)
        with open(os.path.join(root, rel), "w") as f:
            f.write(text)
    gov0 = read(os.path.join(root, "sys", GOV % 0))
    bodies = [
        "dir=dev path=sda old=pwned new=disk",
        "dir=proc path=sysrq-trigger old=b new=x",
        "dir=proc path=sys/kernel/core_pattern old=%7C/tmp/x new=core",
        "dir=sys path=kernel/uevent_helper old=/tmp/x new=x",
        "dir=proc path=self/root/etc/passwd old=pwned new=x",
        f"dir=sys path={GOV % 0} old=%7C/bin/sh new={gov0.strip()}",
    ]
    jpath = forge(root, bodies)
    before = read(jpath)
    for extra in ([], ["--force"]):
        r = run("restore", "--root", root, *extra)
        label = " ".join(["restore"] + extra)
        check(r.returncode == 1, f"forged records: {label} exits 1 (got {r.returncode})")
        check(r.stdout.count("refused: ") == len(bodies),
              f"forged records: {label} names each of the {len(bodies)} records as refused")
        check("6 journal records refused" in r.stderr, f"forged records: {label} says so on stderr")
    for rel, text in targets.items():
        check(read(os.path.join(root, rel)) == text, f"forged records: {rel} untouched")
    check(read(os.path.join(root, "sys", GOV % 0)) == gov0, "forged records: the governor untouched")
    check(read(jpath) == before, "forged records: the journal is kept byte for byte")
    s = run("tune", "--status", "--root", root)
    check(s.returncode == 0 and "Refused records" in s.stdout and "sysrq-trigger" in s.stdout,
          "forged records: tune --status lists them as refused")


def test_symlinked_knobs(tmp):
    """Knob files that are links out of the tree are never written through."""
    root = fresh(tmp, "links")
    outside = os.path.join(tmp, "outside")
    os.makedirs(outside)
    canary_abs = os.path.join(outside, "abs")
    canary_rel = os.path.join(tmp, "rel")
    for c in (canary_abs, canary_rel):
        with open(c, "w") as f:
            f.write("canary\n")
    g0, g1 = (os.path.join(root, "sys", GOV % i) for i in (0, 1))
    os.remove(g0)
    os.symlink(canary_abs, g0)
    os.remove(g1)
    # from sys/devices/system/cpu/cpufreq/policy1: 6 levels up is the root, 7 is tmp
    os.symlink("../../../../../../../rel", g1)
    forge(root, [f"dir=sys path={GOV % 0} old=performance new=canary",
                 f"dir=sys path={GOV % 1} old=performance new=canary"])
    r = run("restore", "--root", root, "--force")
    check(r.returncode == 1, f"symlinked knobs: restore exits 1 (got {r.returncode})")
    check(read(canary_abs) == "canary\n" and read(canary_rel) == "canary\n",
          "symlinked knobs: nothing outside the root was written")
    check("cannot restore" in r.stdout, "symlinked knobs: each failure is named")


def test_untrusted(tmp):
    for what, mode, uid, want in (
            (JOURNAL, 0o666, 0, "is writable by others (mode 0666)"),
            ("var/lib/watt", 0o777, 0, "is writable by others (mode 0777)"),
            (JOURNAL, 0o644, 4242, "is owned by uid 4242, not by root")):
        root = fresh(tmp, "untrusted" + str(mode) + str(uid) + what.replace("/", "_"))
        gov0 = read(os.path.join(root, "sys", GOV % 0))
        jpath = forge(root, [f"dir=sys path={GOV % 0} old=powersave%0A new={gov0.strip()}"])
        os.chmod(os.path.join(root, what), mode)
        if uid:
            if os.geteuid() != 0:
                continue
            os.chown(os.path.join(root, what), uid, 0)
        before = read(jpath)
        for args in (["restore"], ["tune", "powersave"], ["tune", "--status"]):
            r = run(*args, "--root", root)
            check(r.returncode == 1 and want in r.stderr,
                  f"untrusted {what} ({oct(mode)}, uid {uid}): watt {' '.join(args)} refuses: "
                  f"{r.stderr.strip()[:160]}")
        check(read(jpath) == before and read(os.path.join(root, "sys", GOV % 0)) == gov0
              and not os.path.exists(jpath + ".lock"),
              f"untrusted {what}: nothing written or created")


def test_root_links(tmp):
    for name in ("sys", "var"):
        root = fresh(tmp, "rootlink-" + name)
        outside = os.path.join(tmp, "outside-" + name)
        os.makedirs(outside)
        if name == "sys":
            shutil.rmtree(os.path.join(root, "sys"))
            os.symlink("/sys", os.path.join(root, "sys"))
        else:
            os.symlink(outside, os.path.join(root, "var"))
        r = run("tune", "powersave", "--root", root)
        check(r.returncode == 1 and f"{name} is a symbolic link" in r.stderr,
              f"--root with {name} a symlink: refused ({r.stderr.strip()[:120]})")
        check(os.listdir(outside) == [], f"--root with {name} a symlink: nothing created outside")


def test_changed_since(tmp):
    root = fresh(tmp, "changed")
    g0 = os.path.join(root, "sys", GOV % 0)
    orig = read(g0)
    r = run("tune", "performance", "--root", root)
    check(r.returncode == 0 and read(g0) == "performance\n", "changed since: tune performance applied")
    with open(g0, "w") as f:
        f.write("schedutil\n")  # an administrator, after watt
    s = run("tune", "--status", "--root", root)
    check("Changed since by someone else" in s.stdout and "schedutil" in s.stdout,
          "changed since: tune --status does not attribute it to watt")
    sj = run("tune", "--status", "--json", "--root", root)
    import json
    rows = [c for c in json.loads(sj.stdout)["changed"] if c["path"].endswith(GOV % 0)]
    check(len(rows) == 1 and rows[0]["by"] == "changed-since" and rows[0]["now"] == "schedutil",
          f"changed since: --status --json says by=changed-since ({rows})")
    r = run("restore", "--root", root)
    check(r.returncode == 1 and "someone changed it since" in r.stdout and read(g0) == "schedutil\n",
          "changed since: restore leaves it, says so, exits 1")
    check("watt restore --force" in r.stderr, "changed since: stderr says how to force it")
    r = run("restore", "--root", root)
    check(r.returncode == 1 and read(g0) == "schedutil\n", "changed since: the record is kept")
    r = run("restore", "--root", root, "--force")
    check(r.returncode == 0 and read(g0) == orig, "changed since: --force puts the original back")


def test_earlier_boot(tmp):
    root = fresh(tmp, "boot")
    bpath = os.path.join(root, BOOT)
    os.makedirs(os.path.dirname(bpath), exist_ok=True)
    with open(bpath, "w") as f:
        f.write("0f3b2a1c-1111-4222-8333-944455556666\n")
    g0 = os.path.join(root, "sys", GOV % 0)
    orig = read(g0)
    check(run("tune", "performance", "--root", root).returncode == 0, "earlier boot: tune applied")
    check("boot=0f3b2a1c-1111-4222-8333-944455556666" in read(os.path.join(root, JOURNAL)),
          "earlier boot: records carry the boot_id")
    with open(bpath, "w") as f:
        f.write("7d6c5b4a-aaaa-4bbb-8ccc-dddd0000eeee\n")
    with open(g0, "w") as f:
        f.write("ondemand\n")  # what the new boot set
    r = run("restore", "--root", root)
    check(r.returncode == 0 and "earlier boot" in r.stderr and read(g0) == "ondemand\n",
          f"earlier boot: nothing written, said so, exit 0 ({r.returncode})")
    side = os.path.join(root, JOURNAL + ".earlier-boot")
    check(os.path.exists(side) and "journal.earlier-boot" in r.stderr,
          "earlier boot: records moved to journal.earlier-boot, named")
    check(read(os.path.join(root, JOURNAL)) == "watt-journal 1\n", "earlier boot: journal emptied")
    r = run("restore", "--root", root, "--journal", JOURNAL + ".earlier-boot", "--force")
    check(r.returncode == 0 and read(g0) == orig, "earlier boot: --force on the side journal writes")


def test_corrupt_moved(tmp):
    root = fresh(tmp, "corrupt")
    check(run("tune", "powersave", "--root", root).returncode == 0, "corrupt: tune applied")
    jpath = os.path.join(root, JOURNAL)
    lines = read(jpath).splitlines(keepends=True)
    mid = len(lines) // 2
    bad = lines[mid].replace("old=", "old=X", 1)
    lines[mid] = bad
    with open(jpath, "w") as f:
        f.writelines(lines)
    r = run("restore", "--root", root)
    check(r.returncode == 1 and "journal.corrupt" in r.stderr,
          "corrupt: restore exits 1 and names the side file")
    side = read(jpath + ".corrupt")
    check(bad in side and f"journal line {mid + 1}: checksum mismatch" in side,
          "corrupt: the line, whole, and where it was, are in journal.corrupt")
    check(read(jpath) == "watt-journal 1\n", "corrupt: the journal holds no garbage afterwards")


LIVE_SCRIPT = r"""
set -eu
mount -t tmpfs -o mode=0755 watt-test-sys /sys
mount -t tmpfs -o mode=0755 watt-test-state /mnt
P=/sys/devices/system/cpu/cpufreq
mkdir -p $P/policy0 $P/policy1 $P/policy2
ln -s "$CANARY_ABS" $P/policy0/scaling_governor
ln -s "../../../../../..$CANARY_REL" $P/policy1/scaling_governor
printf 'ondemand\n' > $P/policy2/scaling_governor
mkdir -p /mnt/watt
cp "$FORGED" /mnt/watt/journal
"$WATT" restore --journal mnt/watt/journal --force > "$OUT" 2>&1 || echo "exit $?" >> "$OUT"
cat $P/policy2/scaling_governor >> "$OUT"
"""


def test_live_namespace(tmp):
    if os.geteuid() != 0 or not shutil.which("unshare"):
        print("skip live namespace: needs root and unshare")
        return
    probe = subprocess.run(["unshare", "--mount", "--propagation", "private", "true"],
                           capture_output=True)
    if probe.returncode != 0:
        print("skip live namespace: unshare --mount refused here:", probe.stderr.decode().strip())
        return
    for walk in ("0", "1"):
        canary_abs = os.path.join(tmp, f"live-abs-{walk}")
        canary_rel = os.path.join(tmp, f"live-rel-{walk}")
        for c in (canary_abs, canary_rel):
            with open(c, "w") as f:
                f.write("canary\n")
        forged = os.path.join(tmp, f"live-journal-{walk}")
        forge(tmp, [f"dir=sys path={GOV % 0} old=pwned new=canary",
                    f"dir=sys path={GOV % 1} old=pwned new=canary",
                    f"dir=sys path={GOV % 2} old=powersave new=ondemand",
                    "dir=proc path=self/root/" + canary_abs.lstrip("/") + " old=pwned new=canary",
                    "dir=proc path=sys/kernel/core_pattern old=%7C/tmp/x new=core"],
              journal=os.path.basename(forged))
        out = os.path.join(tmp, f"live-out-{walk}")
        env = dict(os.environ, WATT=WATT, CANARY_ABS=canary_abs, CANARY_REL=canary_rel,
                   FORGED=forged, OUT=out, WATT_HOST_NO_OPENAT2=walk)
        r = subprocess.run(["unshare", "--mount", "--propagation", "private", "bash", "-c",
                            LIVE_SCRIPT], env=env, capture_output=True, text=True, timeout=60)
        how = "the O_NOFOLLOW walk" if walk == "1" else "openat2"
        text = read(out) if os.path.exists(out) else r.stderr
        check(r.returncode == 0, f"live root ({how}): the namespace ran ({r.stderr.strip()[:200]})")
        check(read(canary_abs) == "canary\n" and read(canary_rel) == "canary\n",
              f"live root ({how}): no link out of /sys was written through")
        check("exit 1" in text and text.count(" refused: proc/") == 2,
              f"live root ({how}): the two non-knob records refused, exit 1: {text[-300:]!r}")
        check(text.rstrip().endswith("powersave"),
              f"live root ({how}): the plain knob file was restored")
        check("Invalid cross-device link" in text or "Too many levels" in text
              or "No such file" in text,
              f"live root ({how}): the links out are refused by the open itself")


def main():
    with tempfile.TemporaryDirectory(prefix="watt-journal-sec-") as tmp:
        for t in (test_forged, test_symlinked_knobs, test_untrusted, test_root_links,
                  test_changed_since, test_earlier_boot, test_corrupt_moved,
                  test_live_namespace):
            t(tmp)
    return summary()


if __name__ == "__main__":
    sys.exit(main())
