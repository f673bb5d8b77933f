/* bench_wakeload: a machine that wakes up RATE times a second.
 *
 *   bench_wakeload [RATE [SECONDS]]          (defaults 10000 and 10)
 *
 * Two threads share the wake-ups: a timer thread sleeps to the next
 * deadline with clock_nanosleep (TIMER_ABSTIME, CLOCK_MONOTONIC; the
 * hrtimer path) every 2/RATE s, and each time it wakes it writes one byte
 * to a pipe on which the second thread blocks in read() (the sched_wakeup
 * path, one task waking another). The timer thread runs with 1 ns of
 * timer slack (the default 50 us would leave many deadlines already past
 * when the next sleep starts, and a sleep to a past deadline is no
 * wake-up). A timer that falls more than one period behind starts again
 * from now instead of catching up in a burst, and every quarter second
 * the period is steered by both threads' voluntary switches (it shrinks where
 * the machine gives fewer than asked, and stays within 1/4 and 4x of
 * 2/RATE s, so that a starved machine is not made to spin), so a machine
 * that can reach RATE does.
 *
 * It counts what really happened, not what it asked for: each thread's
 * voluntary context switches (getrusage RUSAGE_THREAD, ru_nvcsw: every
 * time it blocked, so every time it was woken) and the process's own CPU
 * time, and prints one line of key=value pairs:
 *
 *   wakeload target=10000 seconds=10.00 timer=4980.1 pipe=4975.3
 *   total=9955.4 cpu_ms_per_s=182.4 period_us=170.8
 *
 * (rates per second; period_us: the timer's last period). bench/agent.py
 * drives it; it is built only when asked (ninja -C build
 * bench/bench_wakeload). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static atomic_bool stop;
static atomic_long pipe_nvcsw; /* the reader's voluntary switches so far, every 16 reads */
static int pipefd[2];
static double rate;
static int64_t period_ns;

struct counts {
    long nvcsw; /* voluntary switches of the thread while it ran the load */
};

static int64_t now_ns(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static struct timespec to_ts(int64_t ns)
{
    return (struct timespec){.tv_sec = ns / 1000000000, .tv_nsec = ns % 1000000000};
}

static long thread_nvcsw(void)
{
    struct rusage ru;
    getrusage(RUSAGE_THREAD, &ru);
    return ru.ru_nvcsw;
}

static void *timer_thread(void *arg)
{
    struct counts *c = arg;
    /* the default 50-us slack would make a 200-us period late often
     * enough that the next deadline has passed and no sleep happens */
    prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
    long v0 = thread_nvcsw();
    int64_t next = now_ns(CLOCK_MONOTONIC) + period_ns;
    /* where the machine gives fewer wake-ups than asked (a deadline already
     * past when the sleep starts sleeps not at all), the period shrinks
     * until the wake-ups counted reach RATE; it never grows past 4x */
    const int64_t max_period = 4 * period_ns, min_period = period_ns / 4;
    int64_t q_t = now_ns(CLOCK_MONOTONIC);
    long q_timer = v0, q_pipe = 0;
    while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
        struct timespec ts = to_ts(next);
        int r = clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
        if (r == EINTR)
            continue;
        if (write(pipefd[1], "w", 1) < 0 && errno != EAGAIN)
            break;
        next += period_ns;
        int64_t now = now_ns(CLOCK_MONOTONIC);
        if (now > next + period_ns)
            next = now + period_ns;
        if (now - q_t >= 250000000) { /* a quarter second: steer the period */
            long t = thread_nvcsw(), pr = atomic_load(&pipe_nvcsw);
            double got = (double)(t - q_timer + pr - q_pipe) * 1e9 / (double)(now - q_t);
            double f = got / rate;
            f = f < 0.5 ? 0.5 : f > 2 ? 2 : f;
            period_ns = (int64_t)((double)period_ns * f);
            if (period_ns < min_period)
                period_ns = min_period;
            if (period_ns > max_period)
                period_ns = max_period;
            q_t = now, q_timer = t, q_pipe = pr;
        }
    }
    c->nvcsw = thread_nvcsw() - v0;
    (void)!write(pipefd[1], "q", 1); /* wake the reader for its last time */
    return NULL;
}

static void *pipe_thread(void *arg)
{
    struct counts *c = arg;
    long v0 = thread_nvcsw(), reads = 0;
    char buf[256];
    for (;;) {
        ssize_t n = read(pipefd[0], buf, sizeof(buf));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0 || buf[n - 1] == 'q')
            break;
        if (++reads % 16 == 0)
            atomic_store_explicit(&pipe_nvcsw, thread_nvcsw() - v0, memory_order_relaxed);
    }
    c->nvcsw = thread_nvcsw() - v0;
    return NULL;
}

int main(int argc, char **argv)
{
    rate = argc > 1 ? strtod(argv[1], NULL) : 10000;
    double seconds = argc > 2 ? strtod(argv[2], NULL) : 10;
    if (argc > 3 || !(rate >= 2 && rate <= 1e6) || !(seconds > 0 && seconds <= 86400)) {
        fprintf(stderr, "usage: bench_wakeload [RATE 2..1000000 [SECONDS]]\n");
        return 2;
    }
    period_ns = (int64_t)(2e9 / rate);
    if (pipe(pipefd) < 0) {
        perror("bench_wakeload: pipe");
        return 1;
    }
    struct counts ct = {0}, cp = {0};
    pthread_t tt, tp;
    int64_t t0 = now_ns(CLOCK_MONOTONIC), c0 = now_ns(CLOCK_PROCESS_CPUTIME_ID);
    if (pthread_create(&tp, NULL, pipe_thread, &cp) != 0 ||
        pthread_create(&tt, NULL, timer_thread, &ct) != 0) {
        fprintf(stderr, "bench_wakeload: cannot start threads\n");
        return 1;
    }
    struct timespec end = to_ts(t0 + (int64_t)(seconds * 1e9));
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &end, NULL) == EINTR)
        ;
    atomic_store(&stop, true);
    pthread_join(tt, NULL);
    pthread_join(tp, NULL);
    double wall = (double)(now_ns(CLOCK_MONOTONIC) - t0) / 1e9;
    double cpu = (double)(now_ns(CLOCK_PROCESS_CPUTIME_ID) - c0) / 1e9;
    printf("wakeload target=%.0f seconds=%.2f timer=%.1f pipe=%.1f total=%.1f "
           "cpu_ms_per_s=%.1f period_us=%.1f\n",
           rate, wall, (double)ct.nvcsw / wall, (double)cp.nvcsw / wall,
           (double)(ct.nvcsw + cp.nvcsw) / wall, cpu * 1e3 / wall, (double)period_ns / 1e3);
    return 0;
}
