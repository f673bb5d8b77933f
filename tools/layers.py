#!/usr/bin/env python3
"""The layering lint: every #include "..." in src/ against tools/layers.txt.

    tools/layers.py [--src DIR] [--rules FILE] [--stamp FILE]
    tools/layers.py --self-test

A file in src/LAYER/ (src/fleet/ROOM/ for the fleet layer) may include its
own folder's headers, those of the folders its line in layers.txt lists,
and "config.h". Anything else is an error, printed as

    src/view/top.c:12: #include "cli/top_view.h": view may not include cli
        (view may include: base host sense model)

It also checks the one-door rule: no string literal starting "/sys/,
"/proc/ or "/dev/ outside the kernel-paths folders (src/host/), except
the files layers.txt names with a reason. Exit 0 when all holds (and
--stamp FILE written), 1 on a broken rule, 2 on a bad allow-list. Python 3
standard library only: meson runs it on every build (docs/design.md).
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
INCLUDE_RE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')
KERNEL_PREFIXES = ("/sys/", "/proc/", "/dev/")
ANYWHERE = {"config.h"}  # the build's generated configuration


class RulesError(Exception):
    pass


def load_rules(path):
    """layers.txt -> (allow: {folder: set(folders)}, kernel_dirs, exceptions)."""
    allow, kernel_dirs, exceptions = {}, None, {}
    with open(path, encoding="utf-8") as f:
        for n, raw in enumerate(f, 1):
            line = raw.split("#", 1)[0].strip()
            if not line:
                continue
            key, sep, rest = line.partition(":")
            key, rest = key.strip(), rest.split()
            if not sep or not key:
                raise RulesError(f"{path}:{n}: want 'FOLDER: FOLDERS...', got {raw.strip()!r}")
            if key == "kernel-paths":
                kernel_dirs = set(rest)
            elif key == "kernel-path-exception":
                if len(rest) < 2:
                    raise RulesError(f"{path}:{n}: an exception needs a file and a reason")
                exceptions[rest[0]] = " ".join(rest[1:])
            elif key in allow:
                raise RulesError(f"{path}:{n}: {key} listed twice")
            else:
                allow[key] = set(rest)
    for folder, below in allow.items():
        for b in below:
            if b not in allow:
                raise RulesError(f"{path}: {folder} may include {b}, which has no line of its own")
            if folder in allow[b]:
                raise RulesError(f"{path}: {folder} and {b} may include each other: a cycle")
    if kernel_dirs is None:
        raise RulesError(f"{path}: no 'kernel-paths:' line")
    return allow, kernel_dirs, exceptions


def folder_of(rel, allow):
    """The allow-list folder a path under src/ belongs to: 'view', 'fleet/engine'."""
    parts = rel.split("/")
    if len(parts) >= 3 and "/".join(parts[:2]) in allow:
        return "/".join(parts[:2])
    return parts[0] if len(parts) >= 2 else None


def effective(folder, allow):
    """What folder may include: its line, and a room its layer's line too."""
    parent = folder.split("/")[0]
    return allow[folder] | (allow.get(parent, set()) if parent != folder else set())


def allowed(folder, target, allow):
    """Whether a file of folder may include one of target."""
    if target == folder or target in effective(folder, allow):
        return True
    layer = target.split("/")[0]
    if layer == target:
        return False
    # a room of another layer: allowed wherever that layer is; of its own
    # layer: only where the room's line says so (checked above)
    return layer != folder.split("/")[0] and layer in effective(folder, allow)


def c_strings(text):
    """(line, contents) of each string literal, comments skipped."""
    out, i, n, line = [], 0, len(text), 1
    while i < n:
        c = text[i]
        if c == "\n":
            line += 1
            i += 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            line += text.count("\n", i, j)
            i = j
        elif c in "\"'":
            j, start = i + 1, line
            while j < n and text[j] != c:
                if text[j] == "\\":
                    j += 1
                if j < n and text[j] == "\n":
                    line += 1
                j += 1
            if c == '"':
                out.append((start, text[i + 1 : j]))
            i = j + 1
        else:
            i += 1
    return out


def check(src, rules_path):
    """Problems found under src (a list of strings; empty: all holds)."""
    allow, kernel_dirs, exceptions = load_rules(rules_path)
    problems, seen = [], set()
    top = os.path.basename(os.path.normpath(src))
    for dirpath, dirnames, filenames in os.walk(src):
        dirnames.sort()
        for name in sorted(filenames):
            if not name.endswith((".c", ".h")):
                continue
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, src).replace(os.sep, "/")
            shown = f"{top}/{rel}"
            folder = folder_of(rel, allow)
            if folder not in allow:
                problems.append(f"{shown}: folder {folder or '(src/ itself)'} has no line in "
                                f"{os.path.relpath(rules_path)}: add one")
                continue
            may = effective(folder, allow)
            with open(path, encoding="utf-8", errors="replace") as f:
                text = f.read()
            for n, line in enumerate(text.split("\n"), 1):
                m = INCLUDE_RE.match(line)
                if not m:
                    continue
                inc = m.group(1)
                if "/" not in inc:
                    if inc in ANYWHERE or os.path.exists(os.path.join(dirpath, inc)):
                        continue
                    problems.append(f"{shown}:{n}: #include \"{inc}\": not in {folder}'s folder; "
                                    f"name it from src/ (\"LAYER/file.h\")")
                    continue
                target = folder_of(inc, allow)
                if target is None or target not in allow:
                    problems.append(f"{shown}:{n}: #include \"{inc}\": {inc.split('/')[0]} is not "
                                    f"a folder of the allow-list")
                    continue
                if allowed(folder, target, allow):
                    continue
                listed = " ".join(sorted(may, key=list(allow).index)) or "nothing but itself"
                problems.append(f"{shown}:{n}: #include \"{inc}\": {folder} may not include "
                                f"{target} ({folder} may include: {listed})")
            if rel.split("/")[0] in kernel_dirs:
                continue
            for n, s in c_strings(text):
                if s.startswith(KERNEL_PREFIXES):
                    if rel in exceptions:
                        seen.add(rel)
                        continue
                    problems.append(f"{shown}:{n}: string \"{s[:40]}\": a kernel path outside "
                                    f"src/{', src/'.join(sorted(kernel_dirs))} (read it through "
                                    f"the host handle)")
    for rel in sorted(set(exceptions) - seen):
        problems.append(f"{os.path.relpath(rules_path)}: kernel-path-exception {rel} is stale: "
                        f"it has no kernel path (drop the line)")
    return problems


def self_test():
    """The lint on tiny trees: a wrong-way include and a kernel path fail."""
    rules = ("base:\nhost: base\ncli: base host\n"
             "fleet: base\nfleet/model:\nfleet/engine: fleet/model\nkernel-paths: host\n")
    files = {
        "src/base/util.h": "#pragma once\n",
        "src/base/util.c": '#include "util.h"\n#include "config.h"\n',
        "src/host/host.c": '#include "base/util.h"\nstatic const char *p = "/sys/x";\n',
        "src/cli/main.c": '#include "host/host.h"\n/* "/proc/ in a comment" */\n'
                          'static const char *s = "a /dev/ b";\n',
        "src/fleet/model/m.h": "#pragma once\n",
        "src/fleet/engine/e.c": '#include "fleet/model/m.h"\n#include "base/util.h"\n',
    }
    bad = {
        "src/base/util.c": '#include "util.h"\n\n#include "cli/verbs.h"\n',
        "src/fleet/model/m.h": '#pragma once\n#include "fleet/engine/e.h"\n',
        "src/cli/main.c": 'static const char *s = "/proc/stat";\n',
    }
    want = [
        'src/base/util.c:3: #include "cli/verbs.h": base may not include cli '
        "(base may include: nothing but itself)",
        'src/fleet/model/m.h:2: #include "fleet/engine/e.h": fleet/model may not include '
        "fleet/engine (fleet/model may include: base)",
        'src/cli/main.c:1: string "/proc/stat": a kernel path outside src/host',
    ]
    failures = []
    with tempfile.TemporaryDirectory(prefix="watt-layers-") as tmp:
        for name, text in files.items():
            os.makedirs(os.path.dirname(os.path.join(tmp, name)), exist_ok=True)
            with open(os.path.join(tmp, name), "w") as f:
                f.write(text)
        with open(os.path.join(tmp, "layers.txt"), "w") as f:
            f.write(rules)
        src, rules_path = os.path.join(tmp, "src"), os.path.join(tmp, "layers.txt")
        got = check(src, rules_path)
        if got:
            failures.append(f"a clean tree failed: {got}")
        for name, text in bad.items():
            with open(os.path.join(tmp, name), "w") as f:
                f.write(text)
        # through the command line, as meson runs it: exit 1 and the messages
        p = subprocess.run([sys.executable, os.path.abspath(__file__), "--src", src, "--rules",
                            rules_path, "--stamp", os.path.join(tmp, "stamp")],
                           capture_output=True, text=True)
        if p.returncode != 1:
            failures.append(f"a wrong-way tree: exit {p.returncode}, want 1")
        if os.path.exists(os.path.join(tmp, "stamp")):
            failures.append("a wrong-way tree wrote the stamp")
        for w in want:
            if not any(line.startswith(w) for line in p.stderr.splitlines()):
                failures.append(f"missing message: {w}\n  got: {p.stderr}")
        with open(os.path.join(tmp, "layers.txt"), "a") as f:
            f.write("cli: base\n")
        try:
            load_rules(rules_path)
            failures.append("a folder listed twice was accepted")
        except RulesError:
            pass
        with open(os.path.join(tmp, "layers.txt"), "w") as f:
            f.write("base: host\nhost: base\nkernel-paths: host\n")
        try:
            load_rules(rules_path)
            failures.append("a cycle was accepted")
        except RulesError:
            pass
    for f in failures:
        print(f"layers.py self-test: {f}", file=sys.stderr)
    if not failures:
        print("layers.py self-test: ok (a clean tree passes; a wrong-way include, a room "
              "included the wrong way and a kernel path fail with file:line)")
    return 1 if failures else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--src", default=os.path.join(HERE, "..", "src"))
    ap.add_argument("--rules", default=os.path.join(HERE, "layers.txt"))
    ap.add_argument("--stamp", help="write this file when all holds (meson's target)")
    ap.add_argument("--self-test", action="store_true")
    a = ap.parse_args()
    if a.self_test:
        return self_test()
    try:
        problems = check(a.src, a.rules)
    except (RulesError, OSError) as e:
        print(f"layers.py: {e}", file=sys.stderr)
        return 2
    for p in problems:
        print(p, file=sys.stderr)
    if problems:
        print(f"layers.py: {len(problems)} broken layering rule{'s' if len(problems) > 1 else ''}"
              f" (the allow-list: {os.path.relpath(a.rules)}; docs/design.md)", file=sys.stderr)
        return 1
    if a.stamp:
        with open(a.stamp, "w") as f:
            f.write("ok\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
