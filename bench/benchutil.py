"""Helpers shared by the benchmark scripts in bench/."""
import time


class Deadline:
    """Soft time budget: optional runs are skipped once it has passed."""

    def __init__(self, seconds):
        self.t0 = time.monotonic()
        self.limit = seconds

    def elapsed(self):
        return time.monotonic() - self.t0

    def passed(self):
        return self.elapsed() > self.limit
