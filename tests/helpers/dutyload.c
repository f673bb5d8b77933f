/* dutyload: a duty-cycled CPU load that reports its own throughput, for
 * the packer's live test and bench (tests/cli/test_pack_live.py,
 * bench/pack_live.py).
 *
 *   dutyload --threads T --duty D [--period-ms P] [--rise-threads T2]
 *            [--rise-duty D2] [--report-ms R] [--seconds S] [--name NAME]
 *
 * Starts max(T, T2) threads at once (so all of them are in the cgroup the
 * caller moves the process into). Each active thread busy-loops D * P ms
 * of every P ms period (CLOCK_MONOTONIC, absolute deadlines, so a late
 * period does not shift the next ones), counting loops of a fixed small
 * work item; the others sleep on a condition variable. SIGUSR1 is "the
 * rise": from then on T2 threads run at D2. Throughput is loops per
 * second: a thread that does not get the CPU for its whole busy share
 * counts fewer loops, so loops/s measures the CPU time the load really
 * got, which is what packing must not take away.
 *
 * stdout, flushed: "pid=PID" at the start, then every R ms (default 100)
 * one line "t=SECONDS loops=TOTAL rise=0|1 rise_t=SECONDS" (monotonic
 * clock seconds, loops summed over the threads, cumulative; rise_t is
 * the monotonic time SIGUSR1 was seen, 0 before). Ends after S seconds
 * (default: until SIGTERM/SIGINT). Usage errors exit 2. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#define NSEC_PER_SEC 1000000000LL
#define MAX_THREADS  64

struct options {
    long threads, rise_threads;
    double duty, rise_duty;
    double period_ms, report_ms, seconds;
    const char *name;
};

struct worker {
    pthread_t thread;
    long index;
    _Atomic uint64_t loops;
};

static struct options opt;
static atomic_bool rise;
static atomic_bool stopping;
static pthread_mutex_t rise_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t rise_cond = PTHREAD_COND_INITIALIZER;

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * NSEC_PER_SEC + ts.tv_nsec;
}

static void sleep_until(int64_t t)
{
    struct timespec ts = {t / NSEC_PER_SEC, t % NSEC_PER_SEC};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
        ;
}

/* A fixed piece of work: about 100 ns, not folded away by the compiler. */
static uint64_t work(uint64_t x)
{
    for (int i = 0; i < 64; i++)
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    return x;
}

static bool active(long index)
{
    return atomic_load(&rise) ? index < opt.rise_threads : index < opt.threads;
}

static void *worker_run(void *arg)
{
    struct worker *w = arg;
    volatile uint64_t sink = (uint64_t)w->index;
    int64_t period = (int64_t)(opt.period_ms * 1e6);
    int64_t next = now_ns();
    while (!atomic_load(&stopping)) {
        if (!active(w->index)) {
            pthread_mutex_lock(&rise_lock);
            while (!atomic_load(&stopping) && !active(w->index))
                pthread_cond_wait(&rise_cond, &rise_lock);
            pthread_mutex_unlock(&rise_lock);
            next = now_ns();
            continue;
        }
        double duty = atomic_load(&rise) ? opt.rise_duty : opt.duty;
        int64_t busy_until = next + (int64_t)(duty * (double)period);
        uint64_t n = 0;
        while (now_ns() < busy_until) {
            sink = work(sink);
            n++;
        }
        atomic_fetch_add(&w->loops, n);
        next += period;
        int64_t t = now_ns();
        if (next < t) /* overran (no CPU): start the next period now */
            next = t;
        else
            sleep_until(next);
    }
    return NULL;
}

static bool parse(const char *s, double lo, double hi, double *ret)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v >= lo && v <= hi))
        return false;
    *ret = v;
    return true;
}

static int usage(const char *what)
{
    fprintf(stderr,
            "dutyload: %s\nusage: dutyload --threads T --duty D [--period-ms P] "
            "[--rise-threads T2] [--rise-duty D2] [--report-ms R] [--seconds S] "
            "[--name NAME]\n",
            what);
    return 2;
}

static int parse_options(int argc, char **argv)
{
    opt = (struct options){.threads = 1, .duty = 0.3, .period_ms = 10, .report_ms = 100};
    opt.rise_threads = -1;
    opt.rise_duty = -1;
    for (int i = 1; i < argc; i += 2) {
        const char *o = argv[i];
        if (i + 1 >= argc)
            return usage("an option without its value");
        const char *v = argv[i + 1];
        double d;
        if (!strcmp(o, "--name")) {
            opt.name = v;
            continue;
        }
        struct {
            const char *name;
            double lo, hi;
        } const r[] = {{"--threads", 1, MAX_THREADS}, {"--duty", 0.001, 1},
                       {"--period-ms", 1, 1000},      {"--rise-threads", 1, MAX_THREADS},
                       {"--rise-duty", 0.001, 1},     {"--report-ms", 1, 10000},
                       {"--seconds", 0.001, 86400}};
        size_t k = 0;
        while (k < sizeof(r) / sizeof(r[0]) && strcmp(o, r[k].name))
            k++;
        if (k == sizeof(r) / sizeof(r[0]))
            return usage("unknown option");
        if (!parse(v, r[k].lo, r[k].hi, &d))
            return usage("a value out of range");
        switch (k) {
        case 0:
            opt.threads = (long)d;
            break;
        case 1:
            opt.duty = d;
            break;
        case 2:
            opt.period_ms = d;
            break;
        case 3:
            opt.rise_threads = (long)d;
            break;
        case 4:
            opt.rise_duty = d;
            break;
        case 5:
            opt.report_ms = d;
            break;
        default:
            opt.seconds = d;
            break;
        }
    }
    if (opt.rise_threads < 0)
        opt.rise_threads = opt.threads;
    if (opt.rise_duty < 0)
        opt.rise_duty = opt.duty;
    return 0;
}

int main(int argc, char **argv)
{
    int rc = parse_options(argc, argv);
    if (rc)
        return rc;
    if (opt.name)
        prctl(PR_SET_NAME, opt.name, 0, 0, 0);
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGUSR1);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL); /* the workers inherit it */

    long n = opt.threads > opt.rise_threads ? opt.threads : opt.rise_threads;
    static struct worker ws[MAX_THREADS];
    for (long i = 0; i < n; i++) {
        ws[i].index = i;
        int e = pthread_create(&ws[i].thread, NULL, worker_run, &ws[i]);
        if (e) {
            fprintf(stderr, "dutyload: cannot start thread %ld: %s\n", i, strerror(e));
            return 1;
        }
    }
    printf("pid=%d\n", (int)getpid());
    fflush(stdout);

    int64_t t0 = now_ns(), rise_t = 0;
    int64_t end = opt.seconds > 0 ? t0 + (int64_t)(opt.seconds * 1e9) : INT64_MAX;
    int64_t step = (int64_t)(opt.report_ms * 1e6), next = t0 + step;
    for (;;) {
        int64_t t = now_ns();
        if (t >= end)
            break;
        int64_t wait = (next < end ? next : end) - t;
        struct timespec ts = {wait / NSEC_PER_SEC, wait % NSEC_PER_SEC};
        int sig = wait > 0 ? sigtimedwait(&sigs, NULL, &ts) : -1;
        if (sig == SIGTERM || sig == SIGINT)
            break;
        if (sig == SIGUSR1 && !atomic_load(&rise)) {
            rise_t = now_ns();
            pthread_mutex_lock(&rise_lock);
            atomic_store(&rise, true);
            pthread_cond_broadcast(&rise_cond);
            pthread_mutex_unlock(&rise_lock);
        }
        t = now_ns();
        if (t >= next) {
            uint64_t loops = 0;
            for (long i = 0; i < n; i++)
                loops += atomic_load(&ws[i].loops);
            printf("t=%.6f loops=%llu rise=%d rise_t=%.6f\n", (double)t / 1e9,
                   (unsigned long long)loops, atomic_load(&rise) ? 1 : 0, (double)rise_t / 1e9);
            fflush(stdout);
            while (next <= t)
                next += step;
        }
    }
    pthread_mutex_lock(&rise_lock);
    atomic_store(&stopping, true);
    pthread_cond_broadcast(&rise_cond);
    pthread_mutex_unlock(&rise_lock);
    for (long i = 0; i < n; i++)
        pthread_join(ws[i].thread, NULL);
    return 0;
}
