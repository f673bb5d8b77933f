#!/usr/bin/env python3
"""The journal kill test (issue 5, "Done when"): SIGKILL `watt tune` at
every crash point and at random instants, run `watt restore`, and the
tree must be the original one, byte for byte.

For each fixture (intel-2s, amd-epyc, each copied once into a temporary
directory and reused, so a wrong restore also spoils every later run) and
each profile (powersave, latency):
  1. run the profile to completion with $WATT_TUNE_CRASH_COUNT_FILE to
     learn its number of crash points P (src/tune/journal.c: before and
     after every append, after every fdatasync, before and after every
     write), restore, compare;
  2. for the crash points N (all of powersave's; latency's first and last
     two records whole and every STRIDE-th point between; WATT_KILL_ALL=1
     takes every point) run with WATT_TUNE_CRASH_AT=N, which must die of
     SIGKILL, restore, compare;
  3. kill a plain run after a seeded random delay (one in five in
     start-up, the others in a window that adapts to where the apply
     is), restore, compare.
"Compare": the journal is its header again, and every file the profile
writes equals the original (contents and mode) after every run; the whole
tree (file set, kinds, modes, link targets, contents; var/lib/watt
excepted) every COMPARE_EVERY runs and at the end of each loop.
Then: a restore killed at each of its own crash points and run again; a
journal with a flipped byte in one middle line and another line cut in
half (restore names both lines, restores the rest, exits non-zero, and
writes no garbage); a torn last line (ignored); a rejected write (op=write
fault: the apply is rolled back, and killing it anywhere is restored
too); the lock (a second tuner refuses, naming the holder).

Prints one line per check and the counts; exits 1 on any failure.
Usage: test_tune_journal.py [WATT] (default: $WATT); fixtures from
$WATT_FIXTURES. Knobs: WATT_KILL_ALL=1, WATT_KILL_STRIDE, WATT_KILL_RANDOM
(random kills per fixture and profile), WATT_KILL_SEED."""
import fcntl
import os
import random
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checks import check, summary  # noqa: E402

WATT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.environ["WATT"])
FIXTURES = os.environ.get("WATT_FIXTURES") or os.path.join(
    os.path.dirname(WATT), "tests", "fixtures")
STATE = "var/lib/watt"
JOURNAL = STATE + "/journal"
HEADER = "watt-journal 1\n"
PROFILES = ("powersave", "latency")
FIXTURE_NAMES = ("intel-2s", "amd-epyc")
SEED = int(os.environ.get("WATT_KILL_SEED", "5"))
ALL = os.environ.get("WATT_KILL_ALL") == "1"
STRIDE = 1 if ALL else int(os.environ.get("WATT_KILL_STRIDE", "6"))
RANDOM_KILLS = int(os.environ.get("WATT_KILL_RANDOM", "25"))
COMPARE_EVERY = 50  # runs between whole-tree compares (0.2 s each)
PER_POINT = 5  # crash points per record: before/after append, after fdatasync, before/after write

lock = threading.Lock()
counts = {"runs": 0, "killed at a point": 0, "random kills": 0, "random kills mid-apply": 0,
          "restores": 0, "full compares": 0, "restore kills": 0}
points_seen = {}


def count(key, n=1):
    with lock:
        counts[key] += n


def say(ok, what):
    with lock:
        check(ok, what)


def unescape(s):
    out, i = bytearray(), 0
    while i < len(s):
        if s[i] == "%":
            out.append(int(s[i + 1:i + 3], 16))
            i += 3
        else:
            out += s[i].encode()
            i += 1
    return out.decode("latin-1")


def records(text):
    """The W records of a journal: dicts of their fields (values unescaped).
    Only whole lines: a kill during an append leaves a torn last line,
    which watt cuts off when it next opens the journal."""
    out = []
    for line in text.split("\n")[1:-1]:
        toks = line.split(" ")[1:]
        if line.startswith("W ") and all("=" in t for t in toks) and toks[-1].startswith("crc="):
            f = dict(t.split("=", 1) for t in toks)
            out.append({k: unescape(v) for k, v in f.items()})
    return out


class Tree:
    """A fixture copy and what it was: rel -> (kind, mode, mtime, size, data)."""

    def __init__(self, name, tmp):
        self.name = name
        self.root = os.path.join(tmp, name)
        shutil.copytree(os.path.join(FIXTURES, name), self.root, symlinks=True)
        self.pristine = self.scan(read=True)
        self.knobs = set()  # root-relative files the profiles write

    @staticmethod
    def ignored(rel):
        return rel in ("var", "var/lib", STATE) or rel.startswith(STATE + "/")

    def scan(self, read=False, known=None):
        """Walk the tree; file contents only when READ, or when size or
        mtime differ from KNOWN (a write changes the mtime)."""
        out = {}
        for dirpath, dirnames, filenames in os.walk(self.root):
            for name in dirnames + filenames:
                p = os.path.join(dirpath, name)
                rel = os.path.relpath(p, self.root)
                if self.ignored(rel):
                    continue
                st = os.lstat(p)
                if stat.S_ISLNK(st.st_mode):
                    out[rel] = ("l", st.st_mode, 0, 0, os.readlink(p))
                elif stat.S_ISDIR(st.st_mode):
                    out[rel] = ("d", st.st_mode, 0, 0, None)
                elif stat.S_ISREG(st.st_mode):
                    k = known.get(rel) if known else None
                    same = k and k[0] == "f" and k[2] == st.st_mtime_ns and k[3] == st.st_size
                    data = k[4] if same and not read else self.read(rel)
                    out[rel] = ("f", st.st_mode, st.st_mtime_ns, st.st_size, data)
                else:
                    out[rel] = ("o", st.st_mode, 0, 0, None)
        return out

    def real(self, rel):
        """Where a path through symlinks (sys/class/...) really is."""
        return os.path.relpath(os.path.realpath(os.path.join(self.root, rel)),
                               os.path.realpath(self.root))

    def read(self, rel):
        with open(os.path.join(self.root, rel), "rb") as f:
            return f.read()

    def diff_full(self):
        count("full compares")
        now = self.scan(known=self.pristine)
        d = [f"missing {r}" for r in sorted(set(self.pristine) - set(now))]
        d += [f"extra {r}" for r in sorted(set(now) - set(self.pristine))]
        for r in sorted(set(now) & set(self.pristine)):
            a, b = self.pristine[r], now[r]
            if (a[0], a[1], a[4]) != (b[0], b[1], b[4]):
                d.append(f"{r}: {a[4]!r:.60} -> {b[4]!r:.60}" if a[0] == b[0] == "f"
                         else f"{r}: kind/mode/target changed")
        return d

    def diff_knobs(self):
        d = []
        for r in sorted(self.knobs):
            p = os.path.join(self.root, r)
            a = self.pristine[r]
            try:
                data, mode = self.read(r), os.lstat(p).st_mode
            except OSError as e:
                d.append(f"{r}: {e}")
                continue
            if (data, mode) != (a[4], a[1]):
                d.append(f"{r}: {a[4]!r:.60} -> {data!r:.60}")
        return d

    def repair(self):
        """After a failure: put the original files back, so one bug is
        reported once and not again by every later run."""
        for r, a in self.pristine.items():
            p = os.path.join(self.root, r)
            if a[0] == "f" and (not os.path.exists(p) or self.read(r) != a[4]):
                with open(p, "wb") as f:
                    f.write(a[4])
        j = os.path.join(self.root, JOURNAL)
        if os.path.exists(j):
            os.unlink(j)

    def journal(self):
        try:
            with open(os.path.join(self.root, JOURNAL), encoding="latin-1") as f:
                return f.read()
        except FileNotFoundError:
            return ""

    def write_journal(self, text):
        with open(os.path.join(self.root, JOURNAL), "w", encoding="latin-1") as f:
            f.write(text)


def env(extra=None):
    e = {k: v for k, v in os.environ.items()
         if k not in ("WATT_ROOT", "WATT_TUNE_CRASH_AT", "WATT_TUNE_CRASH_COUNT_FILE")}
    e["WATT_CONFIG_DIR"] = CONFDIR
    e.update(extra or {})
    return e


def watt(args, extra=None):
    count("runs")
    return subprocess.run([WATT] + args, env=env(extra), capture_output=True, text=True,
                          timeout=60)


class Runner:
    """One fixture's loops, run in its own thread."""

    def __init__(self, tree, tmp):
        self.t = tree
        self.tmp = tmp
        self.failures = 0
        self.first = 0.0  # seconds to the first crash point

    def fail(self, what):
        self.failures += 1
        if self.failures <= 8:
            say(False, f"{self.t.name}: {what}")

    def restore_and_compare(self, label, full=False):
        count("restores")
        r = watt(["restore", "--root", self.t.root])
        diffs = [] if r.returncode == 0 else [
            f"watt restore exited {r.returncode}: {(r.stderr or r.stdout).strip()[:300]}"]
        if self.t.journal() not in ("", HEADER):
            diffs.append("the journal is not empty after the restore")
        diffs += self.t.diff_knobs()
        if full and not diffs:
            diffs += self.t.diff_full()
        if diffs:
            self.fail(f"{label}: " + "; ".join(diffs[:4]))
            self.t.repair()
            return False
        return True

    def count_points(self, profile, extra=None, verb="tune"):
        cf = os.path.join(self.tmp, f"count-{self.t.name}")
        if os.path.exists(cf):
            os.unlink(cf)
        args = [verb, profile] if verb == "tune" else [verb]
        r = watt(args + ["--root", self.t.root], dict(extra or {}, WATT_TUNE_CRASH_COUNT_FILE=cf))
        n = int(open(cf).read()) if os.path.exists(cf) else 0
        return r, n

    def full_run(self, profile):
        t0 = time.monotonic()
        r, points = self.count_points(profile)
        took = time.monotonic() - t0
        recs = records(self.t.journal())
        say(r.returncode == 0 and points == PER_POINT * len(recs) and recs,
            f"{self.t.name} {profile}: a full run applies {len(recs)} changes, "
            f"{points} crash points ({took * 1000:.0f} ms)"
            + ("" if r.returncode == 0 else f": exit {r.returncode}: {r.stderr.strip()[:200]}"))
        for rec in recs:
            self.t.knobs.add(self.t.real(f"{rec['dir']}/{rec['path']}"))
        changed = sum(1 for k in self.t.knobs if self.t.read(k) != self.t.pristine[k][4])
        say(changed > 0, f"{self.t.name} {profile}: the run changed {changed} files")
        self.restore_and_compare(f"{profile} full run", full=True)
        return points, recs, took

    def selection(self, profile, points):
        if profile == "powersave" or STRIDE == 1:
            return list(range(1, points + 1))
        ends = 2 * PER_POINT
        pick = set(range(1, min(points, ends) + 1)) | set(range(max(1, points - ends + 1),
                                                                points + 1))
        pick |= set(range(1 + SEED % STRIDE, points + 1, STRIDE))
        return sorted(pick)

    def kill_points(self, profile, points):
        sel = self.selection(profile, points)
        ok = 0
        for i, n in enumerate(sel):
            t0 = time.monotonic()
            r = watt(["tune", profile, "--root", self.t.root], {"WATT_TUNE_CRASH_AT": str(n)})
            if n == 1:  # start-up and planning: the apply begins about here
                self.first = time.monotonic() - t0
            if r.returncode != -signal.SIGKILL:
                self.fail(f"{profile}: crash point {n} of {points}: watt tune exited "
                          f"{r.returncode}, not killed: {r.stderr.strip()[:200]}")
                self.t.repair()
                continue
            count("killed at a point")
            full = (i + 1) % COMPARE_EVERY == 0 or i == len(sel) - 1
            ok += self.restore_and_compare(f"{profile}, killed at crash point {n} of {points}",
                                           full)
        with lock:
            points_seen[(self.t.name, profile)] = (points, len(sel))
        say(ok == len(sel), f"{self.t.name} {profile}: killed at {len(sel)} of {points} crash "
            f"points, restored to the original tree {ok} times")

    def random_kills(self, profile, took):
        """SIGKILL at seeded random instants. The apply is a few ms of a
        run of tens, so the window [lo, hi] adapts: a kill before the
        first record raises lo, a run that ended first lowers hi. One kill
        in five stays in start-up and planning."""
        rng = random.Random(f"{SEED}-{self.t.name}-{profile}")
        ok = mid = 0
        lo, hi = 0.5 * min(self.first, took), 1.2 * took
        for i in range(RANDOM_KILLS):
            early = i % 5 == 0
            delay = rng.uniform(0, lo) if early else rng.uniform(lo, hi)
            count("runs")
            p = subprocess.Popen([WATT, "tune", profile, "--root", self.t.root], env=env(),
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(delay)
            p.send_signal(signal.SIGKILL)
            rc = p.wait()
            count("random kills")
            n = len(records(self.t.journal()))
            if rc == -signal.SIGKILL and n:
                mid += 1
            elif not early and rc == -signal.SIGKILL:
                lo += 0.5 * (delay - lo)
            elif not early:
                hi -= 0.5 * (hi - delay)
            if hi - lo < 0.002:
                lo, hi = max(0.0, lo - 0.002), hi + 0.002
            full = (i + 1) % COMPARE_EVERY == 0 or i == RANDOM_KILLS - 1
            ok += self.restore_and_compare(f"{profile}, killed after {delay * 1000:.1f} ms "
                                           f"({n} records)", full)
        count("random kills mid-apply", mid)
        say(ok == RANDOM_KILLS, f"{self.t.name} {profile}: {RANDOM_KILLS} kills at random "
            f"instants ({mid} during the apply), restored {ok} times")

    def restore_kills(self):
        """A restore killed at each of its points, then run again."""
        self.t.write_journal(HEADER)
        r = watt(["tune", "powersave", "--root", self.t.root])
        _, points = self.count_points(None, verb="restore")
        self.restore_and_compare("restore counted")
        sel = list(range(1, points + 1)) if points <= 40 or ALL else sorted(
            set(range(1, points + 1, 5)) | {points - 1, points})
        ok = 0
        for n in sel:
            r = watt(["tune", "powersave", "--root", self.t.root])
            r = watt(["restore", "--root", self.t.root], {"WATT_TUNE_CRASH_AT": str(n)})
            count("restore kills")
            if r.returncode != -signal.SIGKILL:
                self.fail(f"restore crash point {n} of {points}: exited {r.returncode}")
                continue
            ok += self.restore_and_compare(f"restore killed at its point {n} of {points}")
        say(points > 2 and ok == len(sel), f"{self.t.name}: restore killed at {len(sel)} of its "
            f"{points} crash points, a second restore gave the original tree {ok} times")

    def run(self):
        for profile in PROFILES:
            points, recs, took = self.full_run(profile)
            if not points:
                continue
            self.kill_points(profile, points)
            self.random_kills(profile, took)
        self.restore_kills()
        d = self.t.diff_full()
        say(not d, f"{self.t.name}: after every run the copy is still the original tree"
            + (": " + "; ".join(d[:4]) if d else ""))


def corrupt(tree):
    """One flipped byte in a middle line, another line cut in half: restore
    names both, restores the rest, exits non-zero, writes no garbage."""
    r = watt(["tune", "powersave", "--root", tree.root])
    text = tree.journal()
    lines = text.split("\n")
    recs = records(text)
    paths = [tree.real(f"{x['dir']}/{x['path']}") for x in recs]
    unique = [i for i, p in enumerate(paths) if paths.count(p) == 1]
    if r.returncode != 0 or len(unique) < 4:
        say(False, f"{tree.name}: corrupt journal: no run to corrupt ({r.returncode})")
        return
    a, b = unique[len(unique) // 3], unique[2 * len(unique) // 3]
    la, lb = a + 2, b + 2  # line numbers: the header is line 1
    s = lines[la - 1]
    lines[la - 1] = s[:len(s) // 2] + chr(ord(s[len(s) // 2]) ^ 0x01) + s[len(s) // 2 + 1:]
    lines[lb - 1] = lines[lb - 1][:len(lines[lb - 1]) // 2]
    tree.write_journal("\n".join(lines))
    r = watt(["restore", "--root", tree.root])
    out = r.stdout + r.stderr
    say(r.returncode != 0, f"{tree.name}: a corrupt journal: restore exits non-zero "
        f"({r.returncode})")
    say(f"journal line {la}: checksum mismatch; not restored" in out,
        f"{tree.name}: the flipped line is named: journal line {la}")
    say(f"journal line {lb}: " in out, f"{tree.name}: the cut line is named: journal line {lb}")
    d = set(tree.diff_full())
    want = {paths[a], paths[b]}
    left = {x.split(":")[0] for x in d}
    say(left == want, f"{tree.name}: every other value restored, the two skipped keep "
        f"the profile's value ({sorted(left)[:4]})")
    for i in (a, b):
        got = tree.read(paths[i]).decode("latin-1")
        say(got.rstrip("\n") == recs[i]["new"].rstrip("\n"),
            f"{tree.name}: {paths[i]} holds {got.strip()!r}, the profile's value, not garbage")
    say(tree.journal() == HEADER, f"{tree.name}: the journal is its header again (no garbage "
        "line written back)")
    tree.repair()


def torn_tail(tree, points):
    """A power cut during an append leaves a torn last line: ignored."""
    r = watt(["tune", "powersave", "--root", tree.root],
             {"WATT_TUNE_CRASH_AT": str(min(points, 2 * PER_POINT + 3))})
    gov = "devices/system/cpu/cpufreq/policy0/scaling_governor"
    tree.write_journal(tree.journal() + f"W seq=99 tx=9 t=1 pid=1 owner=cli dir=sys path={gov} "
                       "old=garbage%0A new=x crc=0")
    r = watt(["restore", "--root", tree.root])
    d = tree.diff_full()
    say(r.returncode == 0 and not d and tree.journal() == HEADER,
        f"{tree.name}: a torn last line is ignored, the rest restored (exit {r.returncode})"
        + (": " + "; ".join(d[:3]) if d else ""))
    if d:
        tree.repair()


def write_fault(tree):
    """A write the kernel refuses: the apply is rolled back; killed at any
    point of that run (rollback included), restore still gives the tree."""
    tree.write_journal(HEADER)
    r = watt(["tune", "powersave", "--root", tree.root])
    recs = records(tree.journal())
    watt(["restore", "--root", tree.root])
    if not recs:
        say(False, f"{tree.name}: write fault: no records")
        return
    victim = recs[len(recs) // 2]
    path = f"{victim['dir']}/{victim['path']}"
    faults = os.path.join(tree.root, "watt-faults")
    orig = open(faults).read() if os.path.exists(faults) else None

    def set_fault(on):
        with open(faults, "w") as f:
            f.write((orig or "") + (f"{path} EINVAL op=write\n" if on else ""))
        if not on and orig is None:
            os.unlink(faults)

    set_fault(True)
    cf = os.path.join(os.path.dirname(tree.root), f"count-fault-{tree.name}")
    r = watt(["tune", "powersave", "--root", tree.root], {"WATT_TUNE_CRASH_COUNT_FILE": cf})
    points = int(open(cf).read()) if os.path.exists(cf) else 0
    set_fault(False)
    d = tree.diff_full()
    say(r.returncode != 0 and victim["path"] in r.stderr and not d and
        tree.journal() == HEADER,
        f"{tree.name}: a refused write ({path}) rolls the apply back: exit {r.returncode}, "
        f"{r.stderr.strip()[:160]!r}" + (": " + "; ".join(d[:3]) if d else ""))
    ok = 0
    for n in range(1, points + 1):
        set_fault(True)
        r = watt(["tune", "powersave", "--root", tree.root], {"WATT_TUNE_CRASH_AT": str(n)})
        set_fault(False)  # the restore writes old values: a kernel takes them
        rr = watt(["restore", "--root", tree.root])
        d = tree.diff_knobs() or ([] if n < points else tree.diff_full())
        if r.returncode == -signal.SIGKILL and rr.returncode == 0 and not d:
            ok += 1
        else:
            say(False, f"{tree.name}: fault run killed at {n}: {r.returncode} {rr.returncode} "
                f"{d[:3]}")
            tree.repair()
    count("killed at a point", points)
    say(points > len(recs) and ok == points, f"{tree.name}: the rolled-back run killed at each "
        f"of its {points} crash points (rollback included), restored {ok} times")


def lock_test(tree):
    """A second tuner refuses at once, naming the holder, changing nothing."""
    lp = os.path.join(tree.root, JOURNAL + ".lock")
    os.makedirs(os.path.dirname(lp), exist_ok=True)
    before = tree.journal()
    fd = os.open(lp, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()} python3 test_tune_journal.py\n".encode())
        for verb in (["tune", "powersave"], ["restore"]):
            t0 = time.monotonic()
            r = watt(verb + ["--root", tree.root])
            took = time.monotonic() - t0
            want = (f"another tuner is running: pid {os.getpid()} "
                    "(python3 test_tune_journal.py); try again when it ends")
            say(r.returncode != 0 and want in r.stderr and took < 5,
                f"{tree.name}: watt {verb[0]} refuses while the lock is held: "
                f"exit {r.returncode}, {r.stderr.strip()[:160]!r}")
        d = tree.diff_full()
        say(not d and tree.journal() == before,
            f"{tree.name}: the refused tuner changed nothing" + (f": {d[:3]}" if d else ""))
    finally:
        os.close(fd)
    r = watt(["tune", "powersave", "--root", tree.root])
    say(r.returncode == 0, f"{tree.name}: once the lock is free, watt tune runs")
    watt(["restore", "--root", tree.root])


def guarded(runner):
    """A thread's exception is a failure, not a trace the summary misses."""
    try:
        runner.run()
    except Exception as e:  # noqa: BLE001
        import traceback
        say(False, f"{runner.t.name}: the test itself failed: {e!r}\n"
            + "".join(traceback.format_exception(e)))


def scratch_dir():
    """tmpfs when there is one: copying 10,000 fixture files to a VM's disk
    takes seconds. A SIGKILL keeps the page cache, so the file system does
    not change what this test sees ($WATT_KILL_TMPDIR chooses)."""
    d = os.environ.get("WATT_KILL_TMPDIR")
    if d:
        return d
    try:
        st = os.statvfs("/dev/shm")
        if os.access("/dev/shm", os.W_OK) and st.f_bavail * st.f_frsize > 512 << 20:
            return "/dev/shm"
    except OSError:
        pass
    return None


def main():
    global CONFDIR
    for name in FIXTURE_NAMES:
        if not os.path.isdir(os.path.join(FIXTURES, name)):
            print(f"SKIP: no fixture {name} in {FIXTURES}")
            return 77
    if subprocess.run([WATT, "tune", "--help"], capture_output=True).returncode != 0:
        print("SKIP: this watt has no tune verb")
        return 77
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="watt-kill-", dir=scratch_dir()) as tmp:
        CONFDIR = os.path.join(tmp, "conf")  # empty: no /etc/watt
        os.mkdir(CONFDIR)
        trees = [Tree(n, tmp) for n in FIXTURE_NAMES]
        runners = [Runner(t, tmp) for t in trees]
        threads = [threading.Thread(target=guarded, args=(r,)) for r in runners]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        intel = trees[0]
        corrupt(intel)
        torn_tail(intel, points_seen.get((intel.name, "powersave"), (0, 0))[0])
        write_fault(trees[1])
        lock_test(intel)
        for t in trees:
            d = t.diff_full()
            say(not d, f"{t.name}: the copy is the original tree at the end"
                + (": " + "; ".join(d[:4]) if d else ""))
    took = time.monotonic() - t0
    for (fx, prof), (p, n) in sorted(points_seen.items()):
        print(f"  {fx} {prof}: {p} crash points, killed at {n}")
    print("  " + ", ".join(f"{k}: {v}" for k, v in counts.items()) + f"; {took:.1f} s")
    say(counts["killed at a point"] + counts["random kills"] >= 200,
        f"at least 200 kills ({counts['killed at a point'] + counts['random kills']})")
    return summary()


if __name__ == "__main__":
    sys.exit(main())
