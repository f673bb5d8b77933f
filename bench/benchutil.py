"""Helpers shared by the benchmark scripts in bench/."""
import re
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


_SERIES = re.compile(r'^([A-Za-z_:][\w:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+\S+)?$')
_LABEL = re.compile(r'\s*([A-Za-z_]\w*)="((?:[^"\\]|\\.)*)"\s*,?')


def _unescape(v):
    return re.sub(r'\\(.)', lambda m: "\n" if m.group(1) == "n" else m.group(1), v)


def parse_prometheus(text):
    """Prometheus text 0.0.4 -> {family: {((label, value), ...): float}}.

    Comment lines are skipped; labels are kept in the order given."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = _SERIES.match(line)
        if not m:
            continue
        name, labels, value = m.groups()
        lab = tuple((k, _unescape(v)) for k, v in _LABEL.findall(labels or ""))
        try:
            out.setdefault(name, {})[lab] = float(value)
        except ValueError:
            pass
    return out


def sum_series(metrics, name):
    """Sum of every series of one family (0 when absent)."""
    return sum((metrics or {}).get(name, {}).values())


def fit_line(points):
    """Least squares y = a + b x over (x, y) points: (a, b, R^2)."""
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    sxy = sum((x - mx) * (y - my) for x, y in points)
    b = sxy / sxx if sxx else 0.0
    a = my - b * mx
    ss_tot = sum((y - my) ** 2 for _, y in points)
    ss_res = sum((y - a - b * x) ** 2 for x, y in points)
    return a, b, 1 - ss_res / ss_tot if ss_tot else 1.0


def loadavg():
    """The 1-minute load average."""
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def proc_ctxt():
    """(monotonic time, context switches since boot from /proc/stat)."""
    t = time.monotonic()
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith("ctxt "):
                return t, int(line.split()[1])
    return t, 0


def verdict(goal, figure, ok):
    """One goal line: the goal, the figure, met or MISSED."""
    return f"{goal}: {figure}: {'met' if ok else 'MISSED'}"


def cpu_jiffies():
    """(busy, steal, total) jiffies of all CPUs from /proc/stat's first line;
    busy is everything but idle, iowait and steal."""
    try:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:9]]
    except (OSError, ValueError):
        return 0, 0, 0
    v += [0] * (8 - len(v))
    total = sum(v)
    return total - v[3] - v[4] - v[7], v[7], total


def shares(j0, j1):
    """(busy %, steal %) of all CPU time between two cpu_jiffies()."""
    dt = j1[2] - j0[2]
    if dt <= 0:
        return 0.0, 0.0
    return 100 * (j1[0] - j0[0]) / dt, 100 * (j1[1] - j0[1]) / dt
