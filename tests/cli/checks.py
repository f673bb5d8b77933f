"""Small helpers shared by the CLI tests written in Python."""
import os
import shutil
import signal
import socket
import subprocess

failures = []


def check(ok, what):
    """Print one line per check; remember the failures."""
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def copy_fixture(fixtures, name, d):
    """A private copy of fixture NAME under D (links kept): its path, or
    None (said) when the fixture is missing."""
    src = os.path.join(fixtures, name)
    if not os.path.isdir(src):
        print(f"FAIL no fixture {src}")
        return None
    root = os.path.join(d, "root")
    shutil.copytree(src, root, symlinks=True)
    return root


def free_port():
    """A TCP port free on 127.0.0.1 now (tests never listen elsewhere)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop(p, timeout=5):
    """SIGTERM, then SIGKILL after TIMEOUT; the exit status (None if killed)."""
    p.send_signal(signal.SIGTERM)
    try:
        return p.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
        return None


def summary():
    # the failures again, last: CI keeps only the tail of a test's output
    for what in failures:
        print("FAIL " + what)
    print(f"{'FAILED' if failures else 'passed'}: {len(failures)} failures")
    return 1 if failures else 0
