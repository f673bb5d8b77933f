/* The live wake-up tracer (sense/wakeups.h): needs root and the kernel's
 * tracepoints; skipped otherwise. A thread woken by a timerfd at a known
 * rate must show up with that rate, and the cost of reading the rings is
 * measured (printed as TAP comments). */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/util.h"
#include "host/host.h"
#include "sense/wake_internal.h"
#include "sense/wakeups.h"

struct ticker {
    long period_ns;
    double seconds;
    pid_t tid;
    uint64_t ticks;  /* expirations read */
    uint64_t sleeps; /* voluntary context switches: one wake-up each */
    volatile int started;
};

/* A thread that sleeps on a timerfd: one wake-up per period, unless it
 * was late (a busy machine) and the timer had fired already. It counts
 * its sleeps (voluntary context switches), so the test knows how many
 * wake-ups the tracer must see. */
static void *tick(void *arg)
{
    struct ticker *k = arg;
    k->tid = (pid_t)syscall(SYS_gettid);
    /* On CPU 0, where its timer fires and its wake-ups are traced: the
     * 2-vCPU test VM's CPU 1 once stopped handing tracepoint events to
     * perf at all (perf record -a missed them too), and a test of the
     * reader should not depend on which CPU the scheduler picks. */
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(0, &one);
    (void)sched_setaffinity(0, sizeof(one), &one);
    int fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
    if (fd < 0)
        return NULL;
    struct itimerspec its = {
        .it_interval = {.tv_sec = 0, .tv_nsec = k->period_ns},
        .it_value = {.tv_sec = 0, .tv_nsec = k->period_ns},
    };
    timerfd_settime(fd, 0, &its, NULL);
    __atomic_store_n(&k->started, 1, __ATOMIC_RELEASE);
    struct rusage ru0, ru1;
    getrusage(RUSAGE_THREAD, &ru0);
    uint64_t end = now_monotonic_ns() + (uint64_t)(k->seconds * 1e9);
    while (now_monotonic_ns() < end) {
        uint64_t n;
        if (read(fd, &n, sizeof(n)) == sizeof(n)) {
            k->ticks += n;
            continue;
        }
        struct pollfd p = {.fd = fd, .events = POLLIN};
        poll(&p, 1, 1000);
    }
    getrusage(RUSAGE_THREAD, &ru1);
    k->sleeps = (uint64_t)(ru1.ru_nvcsw - ru0.ru_nvcsw);
    close(fd);
    return NULL;
}

static double thread_cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

struct live {
    struct host *h;
    struct wake_tracer *t;
};

static int setup(void **state)
{
    static struct live l;
    l = (struct live){0};
    *state = &l;
    if (geteuid() != 0 || host_open("/", &l.h) < 0)
        return 0;
    char *why = NULL;
    int r = wake_tracer_open(l.h, NULL, &l.t, &why);
    if (r <= 0)
        print_message("# tracer not available: %s\n", why ? why : strerror(-r));
    else if (wake_tracer_note(l.t))
        print_message("# note: %s\n", wake_tracer_note(l.t));
    free(why);
    return 0;
}

static int teardown(void **state)
{
    struct live *l = *state;
    wake_tracer_close(l->t);
    host_close(l->h);
    return 0;
}

/* Run the ticker while the rings are drained as `watt top` would: poll()
 * wakes us when a ring is a quarter full, or after a second. */
static void run(struct live *l, struct ticker *k, double *ret_cpu_s, double *ret_take_s,
                struct wake_window *ret)
{
    struct wake_window w;
    assert_int_equal(wake_tracer_take(l->t, &w), 0); /* start afresh */
    wake_window_clear(&w);
    const int *fds;
    size_t n = wake_tracer_fds(l->t, &fds);
    assert_true(n > 0);
    struct pollfd *pfd = calloc(n, sizeof(*pfd));
    for (size_t i = 0; i < n; i++)
        pfd[i] = (struct pollfd){.fd = fds[i], .events = POLLIN};
    pthread_t th;
    double cpu0 = thread_cpu_s();
    assert_int_equal(pthread_create(&th, NULL, tick, k), 0);
    uint64_t end = now_monotonic_ns() + (uint64_t)((k->seconds + 0.05) * 1e9);
    while (now_monotonic_ns() < end) {
        if (poll(pfd, n, 100) > 0)
            wake_tracer_drain(l->t);
    }
    pthread_join(th, NULL);
    double cpu1 = thread_cpu_s();
    assert_int_equal(wake_tracer_take(l->t, ret), 0);
    *ret_cpu_s = cpu1 - cpu0;
    *ret_take_s = thread_cpu_s() - cpu1;
    free(pfd);
}

static const struct wake_entry *find(const struct wake_window *w, enum wake_kind k, int32_t id,
                                     const char *name)
{
    for (size_t i = 0; i < w->n; i++)
        if (w->e[i].kind == k && (id < 0 || w->e[i].id == id) &&
            (!name || strcmp(w->e[i].name, name) == 0))
            return &w->e[i];
    return NULL;
}

/* 200 Hz for 1 s: the thread is woken 200 times (within 10 %), the timer
 * callback is named, and the idle exits it causes are its own. A busy VM
 * drops tracepoint events before any reader sees them (perf(1) misses
 * the same ones), so a short count is tried again, up to three times. */
static bool timerfd_200hz_once(struct live *l)
{
    struct ticker k = {.period_ns = 5000000, .seconds = 1.0};
    struct wake_window w;
    double cpu, take;
    run(l, &k, &cpu, &take, &w);
    assert_true(w.traced);
    assert_true(w.seconds > 0.9 && w.seconds < 2.0);
    const struct wake_entry *e = find(&w, WAKE_TASK, k.tid, NULL);
    assert_non_null(e);
    print_message("# ticker tid %d \"%s\": %" PRIu64 " events, %" PRIu64 " idle wake-ups (%" PRIu64
                  " ticks, %" PRIu64 " sleeps); window %.3f s, %" PRIu64 " events, %" PRIu64
                  " idle exits, lost %" PRIu64 "\n",
                  k.tid, e->name, e->events, e->idle_wakeups, k.ticks, k.sleeps, w.seconds,
                  w.total_events, w.total_idle_wakeups, w.lost);
    assert_string_equal(e->name, "test_wake_trace"); /* comm, 15 bytes */
    assert_true(e->idle_wakeups <= e->events);
    /* not more wake-ups than the thread slept (a wake-up that comes while
     * it is still on its way to sleep is one without a context switch) */
    assert_true(e->events <= k.sleeps + k.sleeps / 20 + 2);
    /* without kallsyms the timer stays "0x..." and the idle exits are the timer's */
    if (!wake_tracer_note(l->t)) {
        const struct wake_entry *tm = find(&w, WAKE_HRTIMER, -1, "timerfd_tmrproc");
        /* every expiry woke the ticker: idle exits it caused are the
         * ticker's (how many depends on how idle the machine is); a cycle
         * where something else came between the timer and the wake-up
         * (seen under ASan in CI: a few in 200) keeps the timer's blame.
         * On a machine with no idle CPU (a loaded CI run) a timer that only
         * woke the ticker is blamed for nothing and has no row; under a
         * parallel build (CI on 6d098e4: 36,101 events in the window) it
         * had none while the ticker had 195 idle wake-ups, so its absence
         * is said, not judged. */
        if (tm)
            assert_true(tm->idle_wakeups * 10 <= e->idle_wakeups + 20);
        else
            print_message("# no timerfd_tmrproc row in the window (ticker: %" PRIu64
                          " idle wake-ups): its blame is not checked\n",
                          e->idle_wakeups);
    }
    uint64_t sum = 0;
    for (unsigned i = 0; i < w.ncpus; i++)
        sum += w.cpu_idle_wakeups[i];
    assert_int_equal(sum, w.total_idle_wakeups);
    bool ok = e->events >= 180 && e->events <= 220 && e->events >= k.sleeps * 9 / 10;
    wake_window_clear(&w);
    return ok;
}

static void test_timerfd_200hz(void **state)
{
    struct live *l = *state;
    if (!l->t)
        skip();
    int tries = 0;
    while (tries < 3 && !timerfd_200hz_once(l))
        tries++;
    assert_true(tries < 3);
}

/* The overhead: the reader's CPU time at 1k and 10k timerfd wake-ups/s. */
static void measure(struct live *l, long hz)
{
    struct ticker k = {.period_ns = 1000000000L / hz, .seconds = 2.0};
    struct wake_window w;
    double cpu, take;
    uint64_t ev0 = wake_tracer_events(l->t);
    run(l, &k, &cpu, &take, &w);
    uint64_t ev = wake_tracer_events(l->t) - ev0;
    const struct wake_entry *e = find(&w, WAKE_TASK, k.tid, NULL);
    print_message(
        "# %ld Hz timerfd: %.0f events/s read, ticker slept %.0f/s, woken %.0f/s, reader CPU %.3f "
        "ms/s = %.2f %% of one CPU (%.0f ns/event), take() %.1f ms, lost %" PRIu64 "\n",
        hz, (double)ev / w.seconds, (double)k.sleeps / w.seconds,
        e ? (double)e->events / w.seconds : 0.0, cpu * 1e3 / w.seconds, cpu * 100 / w.seconds,
        ev ? cpu * 1e9 / (double)ev : 0.0, take * 1e3, w.lost);
    assert_non_null(e);
    /* the cost is what matters here; the count only roughly (see above) */
    assert_true(e->events <= k.sleeps + k.sleeps / 20 + 2 && e->events >= k.sleeps / 2);
    wake_window_clear(&w);
}

static void test_overhead(void **state)
{
    struct live *l = *state;
    if (!l->t)
        skip();
    measure(l, 1000);
    measure(l, 10000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_timerfd_200hz),
        cmocka_unit_test(test_overhead),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
