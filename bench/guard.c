/* bench_guard: what one tick of the latency guard's workload probe costs.
 *
 *   bench_guard [--text] [--ticks N] [--seconds S] SPEC
 *
 * Probes SPEC (port:N, process:NAME, cgroup:PATH) on this machine's
 * kernel N times (default 200, or until S seconds, default 5, have passed)
 * after one untimed probe (it opens the netlink socket and reads every
 * process once), and prints one JSON line: the median and mean wall and
 * thread-CPU time per probe (µs; the CPU time includes the kernel's work
 * in the probe's system calls) and what the last probe saw. --text reads
 * the port from the text tables net/tcp and tcp6 instead of netlink.
 * bench/guard.py drives it; it is built only when asked
 * (ninja -C build bench/bench_guard). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/util.h"
#include "host/host.h"
#include "tune/guard.h"

static double now_us(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, size_t n)
{
    qsort(v, n, sizeof(*v), cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static double mean(const double *v, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += v[i];
    return s / (double)n;
}

static int usage(void)
{
    fprintf(stderr, "usage: bench_guard [--text] [--ticks N] [--seconds S] SPEC\n");
    return 2;
}

int main(int argc, char **argv)
{
    bool text = false;
    size_t ticks = 200;
    double seconds = 5;
    int i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        if (streq(argv[i], "--text"))
            text = true;
        else if (streq(argv[i], "--ticks") && i + 1 < argc)
            ticks = strtoul(argv[++i], NULL, 10);
        else if (streq(argv[i], "--seconds") && i + 1 < argc)
            seconds = strtod(argv[++i], NULL);
        else
            return usage();
    }
    if (i != argc - 1 || ticks < 1)
        return usage();

    struct guard_workload w;
    char *err = NULL;
    if (guard_workload_parse(argv[i], &w, &err) < 0) {
        fprintf(stderr, "bench_guard: %s\n", err);
        return 2;
    }
    struct host *h;
    int r = host_open("/", &h);
    if (r < 0) {
        fprintf(stderr, "bench_guard: cannot open /: %s\n", strerror(-r));
        return 1;
    }
    struct guard_probe p;
    struct guard_reading rd;
    guard_probe_init(&p, &w);
    if (text)
        p.nl_err = -ENOTSUP;
    r = guard_probe_read(h, &p, &rd);
    double *wall = xcalloc(ticks, sizeof(double)), *cpu = xcalloc(ticks, sizeof(double));
    double end = now_us(CLOCK_MONOTONIC) + seconds * 1e6;
    size_t n = 0;
    while (r == 0 && n < ticks && (n < 5 || now_us(CLOCK_MONOTONIC) < end)) {
        double w0 = now_us(CLOCK_MONOTONIC), c0 = now_us(CLOCK_THREAD_CPUTIME_ID);
        r = guard_probe_read(h, &p, &rd);
        cpu[n] = now_us(CLOCK_THREAD_CPUTIME_ID) - c0;
        wall[n] = now_us(CLOCK_MONOTONIC) - w0;
        n++;
    }
    if (r < 0) {
        fprintf(stderr, "bench_guard: %s: %s\n", w.spec, strerror(-r));
        return 1;
    }
    double wall_mean = mean(wall, n), cpu_mean = mean(cpu, n);
    printf("{\"spec\": \"%s\", \"source\": \"%s\", \"ticks\": %zu, \"wall_us\": %.1f, "
           "\"wall_us_mean\": %.1f, \"cpu_us\": %.1f, \"cpu_us_mean\": %.1f, "
           "\"present\": %s, \"connections\": %u, \"listening\": %s, \"processes\": %u, "
           "\"netlink_sockets\": %u}\n",
           w.spec, rd.source, n, median(wall, n), wall_mean, median(cpu, n), cpu_mean,
           rd.present ? "true" : "false", rd.connections, rd.listening ? "true" : "false",
           rd.nprocs, p.nl_msgs);
    free(wall);
    free(cpu);
    guard_probe_clear(&p);
    guard_workload_clear(&w);
    host_close(h);
    return 0;
}
