/* waker: a load with a known wake-up rate, for `watt top`'s live tests and
 * bench/top.py.
 *
 *   waker --hz N --seconds D [--threads T] [--name NAME] [--spin-us U]
 *       T threads (default 1), each blocked in read() on its own timerfd
 *       (CLOCK_MONOTONIC, period T/N s), so the process is woken N times a
 *       second in all; each wake-up optionally busy-loops U µs (CPU load
 *       for power attribution).
 *   waker --fork-storm N --seconds D [--child-us U] [--name NAME]
 *       forks N short-lived children a second (each sleeps U µs, default
 *       0, then _exit(0)s) and reaps them: a stream of PIDs that come and
 *       go between two scans of /proc.
 *
 * Prints "pid=PID" (flushed) when the load starts, and one JSON line with
 * its own counts when it ends: after D seconds, or at SIGINT/SIGTERM.
 * Nothing else on stdout; usage errors exit 2, failures 1. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NSEC_PER_SEC 1000000000LL
#define MAX_HZ       1e6 /* above this the timer interval is under 1 µs */
#define MAX_THREADS  1024
#define MAX_SECONDS  86400.0
#define MAX_SPIN_US  1000000.0
/* After a stall (the VM descheduled us), fork at most this many children
 * for the missed expirations of one tick, not all of them at once. */
#define MAX_FORKS_PER_TICK 1000

struct options {
    double hz;
    double fork_hz;
    double seconds;
    long threads;
    double spin_us;
    double child_us;
    const char *name;
};

struct worker {
    pthread_t thread;
    int tfd;
    int64_t period_ns;
    int64_t spin_ns;
    uint64_t expirations; /* sum of the counts read(): timer periods */
    uint64_t wakeups;     /* read()s that returned: times woken (at most: a read that
                             found an expiration pending did not sleep) */
    int err;              /* errno of a failed read, 0 if none */
};

static atomic_bool stop_requested;

static const char usage_text[] =
    "usage: waker --hz N --seconds D [--threads T] [--name NAME] [--spin-us U]\n"
    "       waker --fork-storm N --seconds D [--child-us U] [--name NAME]\n"
    "  --hz N          wake-ups per second of the whole process (0 < N <= 1e6)\n"
    "  --threads T     split them over T threads, N/T each (1..1024, default 1)\n"
    "  --spin-us U     busy-loop U microseconds per wake-up (below the period)\n"
    "  --fork-storm N  fork N children per second, each exits at once\n"
    "  --child-us U    each child sleeps U microseconds before it exits\n"
    "  --seconds D     run for D seconds (0 < D <= 86400)\n"
    "  --name NAME     the process name (prctl PR_SET_NAME, 15 bytes)\n"
    "Prints pid=PID at the start and one JSON line of counts at the end.\n";

__attribute__((format(printf, 1, 2))) static int usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("waker: ", stderr);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputs(" (waker --help for the options)\n", stderr);
    return 2;
}

static int64_t now_ns(clockid_t clk)
{
    struct timespec ts;
    clock_gettime(clk, &ts);
    return (int64_t)ts.tv_sec * NSEC_PER_SEC + ts.tv_nsec;
}

/* A finite number in [lo, hi] (lo excluded when open_lo), the whole text. */
static bool parse_num(const char *s, double lo, bool open_lo, double hi, double *ret)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(v) || v > hi || v < lo || (open_lo && v == lo))
        return false;
    *ret = v;
    return true;
}

struct numeric_option {
    const char *name;
    double lo, hi;
    bool open_lo; /* lo itself is out of range */
    size_t field; /* offsetof the double in struct options; THREADS_FIELD: .threads */
};

#define THREADS_FIELD SIZE_MAX

static const struct numeric_option numeric_options[] = {
    {"--hz", 0, MAX_HZ, true, offsetof(struct options, hz)},
    {"--fork-storm", 0, MAX_HZ, true, offsetof(struct options, fork_hz)},
    {"--seconds", 0, MAX_SECONDS, true, offsetof(struct options, seconds)},
    {"--spin-us", 0, MAX_SPIN_US, false, offsetof(struct options, spin_us)},
    {"--child-us", 0, MAX_SPIN_US, false, offsetof(struct options, child_us)},
    {"--threads", 1, MAX_THREADS, false, THREADS_FIELD},
};

static int parse_numeric(struct options *o, const struct numeric_option *no, const char *val)
{
    bool integer = no->field == THREADS_FIELD;
    double v;
    if (!parse_num(val, no->lo, no->open_lo, no->hi, &v) || (integer && v != floor(v)))
        return usage_error("%s %s: want %s in %c%g, %g]", no->name, val,
                           integer ? "an integer" : "a number", no->open_lo ? '(' : '[', no->lo,
                           no->hi);
    if (integer)
        o->threads = (long)v;
    else
        *(double *)((char *)o + no->field) = v;
    return 0;
}

static int parse_options(int argc, char **argv, struct options *o)
{
    *o = (struct options){.threads = 1};
    for (int i = 1; i < argc; i++) {
        const char *opt = argv[i];
        if (!strcmp(opt, "-h") || !strcmp(opt, "--help")) {
            fputs(usage_text, stdout);
            return 1;
        }
        const struct numeric_option *no = NULL;
        for (size_t k = 0; k < sizeof(numeric_options) / sizeof(numeric_options[0]); k++)
            if (!strcmp(opt, numeric_options[k].name))
                no = &numeric_options[k];
        if (!no && strcmp(opt, "--name"))
            return usage_error("unknown option %s", opt);
        if (i + 1 >= argc)
            return usage_error("%s: the value is missing", opt);
        const char *val = argv[++i];
        if (!no) {
            o->name = val;
            continue;
        }
        int rc = parse_numeric(o, no, val);
        if (rc)
            return rc;
    }
    return 0;
}

static int check_options(const struct options *o)
{
    if ((o->hz > 0) == (o->fork_hz > 0))
        return usage_error("give one of --hz and --fork-storm");
    if (o->seconds <= 0)
        return usage_error("--seconds D is required");
    if (o->fork_hz > 0 && (o->threads != 1 || o->spin_us > 0))
        return usage_error("--threads and --spin-us go with --hz, not --fork-storm");
    if (o->hz > 0 && o->child_us > 0)
        return usage_error("--child-us goes with --fork-storm, not --hz");
    double period_us = 1e6 * (double)o->threads / (o->hz > 0 ? o->hz : 1);
    if (o->hz > 0 && o->spin_us >= period_us) {
        fprintf(stderr,
                "waker: --spin-us %.0f is not below the period of %.1f us (%ld threads at %g Hz)\n",
                o->spin_us, period_us, o->threads, o->hz);
        return 2;
    }
    if (o->hz > 0 && period_us < 1.0) {
        fprintf(stderr, "waker: %g Hz over %ld threads is a period under 1 us\n", o->hz,
                o->threads);
        return 2;
    }
    return 0;
}

static int timer_open(int64_t period_ns)
{
    int fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
    if (fd < 0)
        return -errno;
    struct itimerspec its = {
        .it_interval = {period_ns / NSEC_PER_SEC, period_ns % NSEC_PER_SEC},
        .it_value = {period_ns / NSEC_PER_SEC, period_ns % NSEC_PER_SEC},
    };
    if (timerfd_settime(fd, 0, &its, NULL) < 0) {
        int e = -errno;
        close(fd);
        return e;
    }
    return fd;
}

static void spin(int64_t ns)
{
    int64_t until = now_ns(CLOCK_MONOTONIC) + ns;
    while (now_ns(CLOCK_MONOTONIC) < until)
        ;
}

static void *worker_run(void *arg)
{
    struct worker *w = arg;
    for (;;) {
        uint64_t n;
        ssize_t r = read(w->tfd, &n, sizeof(n));
        if (r < 0 && errno == EINTR)
            continue;
        if (r != (ssize_t)sizeof(n)) {
            w->err = r < 0 ? errno : EIO;
            break;
        }
        if (atomic_load(&stop_requested))
            break;
        w->expirations += n;
        w->wakeups++;
        if (w->spin_ns > 0)
            spin(w->spin_ns);
    }
    return NULL;
}

/* Until D seconds have passed or SIGINT/SIGTERM came (both blocked in every
 * thread, so only this wait sees them). */
static void wait_deadline(double seconds, const sigset_t *sigs)
{
    int64_t end = now_ns(CLOCK_MONOTONIC) + (int64_t)(seconds * 1e9);
    for (;;) {
        int64_t left = end - now_ns(CLOCK_MONOTONIC);
        if (left <= 0)
            return;
        struct timespec ts = {left / NSEC_PER_SEC, left % NSEC_PER_SEC};
        int sig = sigtimedwait(sigs, NULL, &ts);
        if (sig > 0)
            return;
    }
}

/* A blocked read() returns at the next expiration: make that one now, so
 * stopping does not wait for a long period. */
static void worker_kick(struct worker *w)
{
    struct itimerspec its = {.it_value = {0, 1}};
    timerfd_settime(w->tfd, 0, &its, NULL);
}

static void print_report(const char *mode, const struct options *o, double elapsed,
                         uint64_t expirations, uint64_t wakeups, uint64_t forks,
                         uint64_t fork_failures)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double cpu = (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
                 (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
    printf("{\"pid\":%d,\"mode\":\"%s\",\"hz\":%g,\"threads\":%ld,\"seconds\":%g,"
           "\"elapsed_s\":%.6f,\"expirations\":%" PRIu64 ",\"wakeups\":%" PRIu64
           ",\"wakeups_per_s\":%.3f,\"forks\":%" PRIu64 ",\"fork_failures\":%" PRIu64
           ",\"cpu_s\":%.6f,\"max_rss_kb\":%ld}\n",
           (int)getpid(), mode, o->hz > 0 ? o->hz : o->fork_hz, o->threads, o->seconds, elapsed,
           expirations, wakeups, elapsed > 0 ? (double)wakeups / elapsed : 0.0, forks,
           fork_failures, cpu, ru.ru_maxrss);
    fflush(stdout);
}

static int run_timers(const struct options *o, const sigset_t *sigs)
{
    struct worker *ws = calloc((size_t)o->threads, sizeof(*ws));
    if (!ws) {
        fprintf(stderr, "waker: out of memory for %ld threads\n", o->threads);
        return 1;
    }
    int64_t period = (int64_t)llround(1e9 * (double)o->threads / o->hz);
    int rc = 0;
    long started = 0;
    int64_t t0 = now_ns(CLOCK_MONOTONIC);
    for (; started < o->threads; started++) {
        struct worker *w = &ws[started];
        w->period_ns = period;
        w->spin_ns = (int64_t)(o->spin_us * 1e3);
        w->tfd = timer_open(period);
        if (w->tfd < 0) {
            fprintf(stderr, "waker: timerfd for thread %ld: %s\n", started, strerror(-w->tfd));
            rc = 1;
            break;
        }
        int e = pthread_create(&w->thread, NULL, worker_run, w);
        if (e) {
            fprintf(stderr, "waker: cannot start thread %ld: %s\n", started, strerror(e));
            close(w->tfd);
            rc = 1;
            break;
        }
    }
    if (rc == 0) {
        printf("pid=%d\n", (int)getpid());
        fflush(stdout);
        wait_deadline(o->seconds, sigs);
    }
    double elapsed = (double)(now_ns(CLOCK_MONOTONIC) - t0) / 1e9;
    atomic_store(&stop_requested, true);
    uint64_t exp = 0, wake = 0;
    for (long i = 0; i < started; i++) {
        worker_kick(&ws[i]);
        pthread_join(ws[i].thread, NULL);
        close(ws[i].tfd);
        exp += ws[i].expirations;
        wake += ws[i].wakeups;
        if (ws[i].err) {
            fprintf(stderr, "waker: thread %ld: read timerfd: %s\n", i, strerror(ws[i].err));
            rc = 1;
        }
    }
    free(ws);
    if (rc == 0)
        print_report("timer", o, elapsed, exp, wake, 0, 0);
    return rc;
}

static void child(double child_us)
{
    if (child_us > 0) {
        int64_t ns = (int64_t)(child_us * 1e3);
        struct timespec ts = {ns / NSEC_PER_SEC, ns % NSEC_PER_SEC};
        nanosleep(&ts, NULL);
    }
    _exit(0);
}

static void reap(bool block, uint64_t *live)
{
    while (*live > 0) {
        pid_t p = waitpid(-1, NULL, block ? 0 : WNOHANG);
        if (p <= 0) {
            if (p < 0 && errno == EINTR)
                continue;
            if (p < 0)
                *live = 0; /* ECHILD: nothing left to wait for */
            return;
        }
        (*live)--;
    }
}

static int run_fork_storm(const struct options *o, const sigset_t *sigs)
{
    int64_t period = (int64_t)llround(1e9 / o->fork_hz);
    int tfd = timer_open(period);
    if (tfd < 0) {
        fprintf(stderr, "waker: timerfd: %s\n", strerror(-tfd));
        return 1;
    }
    printf("pid=%d\n", (int)getpid());
    fflush(stdout);
    int64_t t0 = now_ns(CLOCK_MONOTONIC);
    int64_t end = t0 + (int64_t)(o->seconds * 1e9);
    uint64_t exp = 0, wake = 0, forks = 0, failed = 0, live = 0;
    struct timespec zero = {0, 0};
    while (now_ns(CLOCK_MONOTONIC) < end && sigtimedwait(sigs, NULL, &zero) < 0) {
        uint64_t n;
        ssize_t r = read(tfd, &n, sizeof(n));
        if (r < 0 && errno == EINTR)
            continue;
        if (r != (ssize_t)sizeof(n)) {
            fprintf(stderr, "waker: read timerfd: %s\n", r < 0 ? strerror(errno) : "short read");
            close(tfd);
            reap(true, &live);
            return 1;
        }
        exp += n;
        wake++;
        for (uint64_t k = 0; k < n && k < MAX_FORKS_PER_TICK; k++) {
            pid_t p = fork();
            if (p == 0)
                child(o->child_us);
            if (p < 0) {
                failed++; /* EAGAIN at a process limit: count it, go on */
                break;
            }
            forks++;
            live++;
        }
        reap(false, &live);
    }
    double elapsed = (double)(now_ns(CLOCK_MONOTONIC) - t0) / 1e9;
    close(tfd);
    reap(true, &live);
    print_report("fork-storm", o, elapsed, exp, wake, forks, failed);
    return 0;
}

int main(int argc, char **argv)
{
    struct options o;
    int rc = parse_options(argc, argv, &o);
    if (rc)
        return rc == 1 ? 0 : rc;
    rc = check_options(&o);
    if (rc)
        return rc;
    if (o.name && prctl(PR_SET_NAME, o.name, 0, 0, 0) < 0) {
        fprintf(stderr, "waker: prctl(PR_SET_NAME, %s): %s\n", o.name, strerror(errno));
        return 1;
    }
    /* Threads inherit the mask: only the main thread's wait sees these. */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    return o.hz > 0 ? run_timers(&o, &sigs) : run_fork_storm(&o, &sigs);
}
