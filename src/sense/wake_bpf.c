/* The BPF wake-up counters: loads wake.bpf.c (its skeleton, generated at
 * build time by bpftool), reads its two maps once per take and hands the
 * deltas (wake_bpf_acct.c) over as a struct wake_window.
 *
 * The kernel does the accounting in the tracepoints' context, so nothing
 * is copied to user space per event: a take costs one batch lookup of the
 * counts map (one bpf() call per ~thousand keys) and one lookup of the
 * per-CPU array, whatever the event rate. Keys that have not moved for
 * STALE_TAKES takes are deleted (the map is bounded, and a short-lived
 * thread's key would otherwise be read every take); an increment that
 * lands between the read and the delete of such a key is lost, which for
 * a key idle for ten takes is at most a stray event.
 *
 * libbpf makes the bpf() calls and reads the kernel's BTF itself; the
 * rest (kallsyms, the online CPUs) goes through src/host as everywhere. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cpuset.h"
#include "base/util.h"
#include "sense/kallsyms.h"
#include "sense/wake_internal.h"

#ifdef WATT_HAVE_BPF

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "sense/bpf/wake_bpf_abi.h"
#include "sense/wake.skel.h" /* bpftool gen skeleton ... name wake_skel */

#define STALE_TAKES   10
#define PASS_DEF_NS   (10 * 1000000000ull) /* as the ring's */
#define MAX_ENTRIES   16384
#define MIN_ENTRIES   1024
#define MAP_BUDGET_MB 64 /* the counts map's worst case, all CPUs' values */

_Static_assert(WAKE_BPF_TASK == (int)WAKE_TASK && WAKE_BPF_IRQ == (int)WAKE_IRQ &&
                   WAKE_BPF_TIMER == (int)WAKE_TIMER && WAKE_BPF_HRTIMER == (int)WAKE_HRTIMER &&
                   WAKE_BPF_WORK == (int)WAKE_WORK && WAKE_BPF_OTHER == (int)WAKE_OTHER,
               "wake_bpf_abi.h kinds follow enum wake_kind");
_Static_assert(sizeof(((struct wake_bpf_val *)0)->name) == sizeof(((struct wake_bpf_rec *)0)->name),
               "names fit");

static const char *const task_timer_names[] = {
    "hrtimer_wakeup", "timerfd_tmrproc", "it_real_fn", "posix_timer_fn", "process_timeout",
};

struct wake_bpf {
    struct host *h;
    struct wake_skel *skel;
    struct wake_bpf_acct *acct;
    int counts_fd, cpus_fd;
    unsigned ncpu_possible;
    size_t max_entries;
    struct cpuset online;
    size_t vstride;            /* bytes of one key's values, all CPUs */
    struct wake_bpf_key *keys; /* max_entries */
    unsigned char *vals;       /* max_entries * vstride */
    struct wake_bpf_rec *recs; /* max_entries */
    struct wake_bpf_cpu *cpuv; /* ncpu_possible */
    bool no_batch;
    struct ksym_cache syms;
    uint64_t last_pass_ns;
    uint64_t pass_interval_ns;
    char note[256];
};

/* libbpf's last complaint, for the reason we give (it prints nothing). */
static char libbpf_last[256];

static int libbpf_quiet(enum libbpf_print_level level, const char *fmt, va_list ap)
{
    if (level == LIBBPF_DEBUG)
        return 0;
    char buf[sizeof(libbpf_last)];
    vsnprintf(buf, sizeof(buf), fmt, ap);
    size_t n = strlen(buf);
    while (n && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
        buf[--n] = '\0';
    const char *m = strncmp(buf, "libbpf: ", 8) == 0 ? buf + 8 : buf;
    if (*m)
        snprintf(libbpf_last, sizeof(libbpf_last), "%s", m);
    return 0;
}

static const char *load_hint(int err)
{
    switch (err) {
    case EPERM:
    case EACCES:
        return " (needs root, or CAP_BPF and CAP_PERFMON)";
    case ESRCH:
    case ENOENT:
    case EINVAL:
    case ENOTSUP:
        return " (the kernel lacks BTF or BTF-typed tracepoints: needs 5.5 or later built with "
               "CONFIG_DEBUG_INFO_BTF)";
    default:
        return "";
    }
}

static void resolve_task_timers(struct wake_bpf *b)
{
    uint64_t addr[WAKE_BPF_TASK_TIMERS];
    char why[160];
    size_t n = ksym_lookup_names(b->h, task_timer_names, ARRAY_SIZE(task_timer_names), addr,
                                 ARRAY_SIZE(addr), why, sizeof(why));
    for (size_t i = 0; i < n; i++)
        b->skel->rodata->task_timer[i] = addr[i];
    b->skel->rodata->ntask_timers = (unsigned)n;
    if (why[0])
        b->syms.unreadable = true;
    if (n == 0)
        snprintf(b->note, sizeof(b->note),
                 "%s: timers that only wake a task (hrtimer_wakeup, timerfd) are blamed on "
                 "the timer, not the task",
                 why[0] ? why : "kallsyms names none of hrtimer_wakeup, timerfd_tmrproc, ...");
}

static size_t size_table(unsigned ncpu, size_t want)
{
    size_t per = (size_t)ncpu * ((sizeof(struct wake_bpf_val) + 7) & ~(size_t)7);
    size_t fit = ((size_t)MAP_BUDGET_MB << 20) / (per ? per : 1);
    size_t n = want ? want : MAX_ENTRIES;
    if (n > fit)
        n = fit;
    return n < MIN_ENTRIES ? MIN_ENTRIES : n;
}

int wake_bpf_open(struct host *h, size_t max_entries, struct wake_bpf **ret, char **ret_why)
{
    if (!h->live) {
        wake_set_why(ret_why, "a recorded tree has no BPF");
        return 0;
    }
    const char *env = getenv("WATT_NO_BPF");
    if (env && *env && !streq(env, "0")) {
        wake_set_why(ret_why, "WATT_NO_BPF is set");
        return 0;
    }
    if (!host_exists(h, HOST_SYS, "kernel/btf/vmlinux")) {
        wake_set_why(ret_why,
                     "the kernel has no BTF (/sys/kernel/btf/vmlinux): CO-RE cannot relocate");
        return 0;
    }
    int np = libbpf_num_possible_cpus();
    if (np <= 0) {
        wake_set_why(ret_why, "cannot count the possible CPUs: %s", errno_name(np ? -np : EINVAL));
        return 0;
    }
    struct wake_bpf *b = xcalloc(1, sizeof(*b));
    b->h = h;
    b->ncpu_possible = (unsigned)np;
    ksym_cache_init(&b->syms);
    _cleanup_free_ char *online = NULL;
    int r = host_read_str(h, HOST_SYS, "devices/system/cpu/online", &online);
    if (r == 0)
        r = cpuset_parse(online, &b->online);
    if (r < 0) {
        wake_set_why(ret_why, "cannot read the online CPUs: %s", errno_name(-r));
        wake_bpf_close(b);
        return 0;
    }
    libbpf_set_print(libbpf_quiet);
    libbpf_last[0] = '\0';
    b->skel = wake_skel__open();
    if (!b->skel) {
        wake_set_why(ret_why, "libbpf cannot open the BPF object: %s", errno_name(errno));
        wake_bpf_close(b);
        return 0;
    }
    b->max_entries = size_table(b->ncpu_possible, max_entries);
    (void)bpf_map__set_max_entries(b->skel->maps.counts, (uint32_t)b->max_entries);
    resolve_task_timers(b);
    r = wake_skel__load(b->skel);
    if (r == 0)
        r = wake_skel__attach(b->skel);
    if (r < 0) {
        int e = r == -1 ? errno : -r;
        wake_set_why(ret_why, "loading the BPF wake-up counters: %s%s%s%s", errno_name(e),
                     load_hint(e), libbpf_last[0] ? "; libbpf: " : "", libbpf_last);
        wake_bpf_close(b);
        return 0;
    }
    b->counts_fd = bpf_map__fd(b->skel->maps.counts);
    b->cpus_fd = bpf_map__fd(b->skel->maps.cpus);
    b->vstride = b->ncpu_possible * ((sizeof(struct wake_bpf_val) + 7) & ~(size_t)7);
    b->keys = xcalloc(b->max_entries, sizeof(*b->keys));
    b->vals = xcalloc(b->max_entries, b->vstride);
    b->recs = xcalloc(b->max_entries, sizeof(*b->recs));
    b->cpuv = xcalloc(b->ncpu_possible, sizeof(*b->cpuv));
    b->acct = wake_bpf_acct_new(STALE_TAKES, now_monotonic_ns());
    *ret = b;
    return 1;
}

void wake_bpf_close(struct wake_bpf *b)
{
    if (!b)
        return;
    wake_skel__destroy(b->skel);
    wake_bpf_acct_free(b->acct);
    ksym_cache_free(&b->syms);
    cpuset_free(&b->online);
    free(b->keys);
    free(b->vals);
    free(b->recs);
    free(b->cpuv);
    free(b);
}

const char *wake_bpf_note(const struct wake_bpf *b)
{
    return b && b->note[0] ? b->note : NULL;
}

void wake_bpf_set_name_interval(struct wake_bpf *b, double seconds)
{
    if (b && seconds > 0)
        b->pass_interval_ns = (uint64_t)(seconds * 1e9);
}

/* The whole counts map into keys[]/vals[]; the number of keys, or < 0. */
static long read_counts(struct wake_bpf *b)
{
    size_t total = 0;
    uint32_t in = 0, out = 0;
    bool first = true;
    while (!b->no_batch && total < b->max_entries) {
        uint32_t cnt = (uint32_t)(b->max_entries - total);
        int r = bpf_map_lookup_batch(b->counts_fd, first ? NULL : &in, &out, b->keys + total,
                                     b->vals + total * b->vstride, &cnt, NULL);
        int e = r < 0 ? (r == -1 ? errno : -r) : 0;
        if (r < 0 && e != ENOENT) {
            if (first && (e == EINVAL || e == ENOTSUP || e == EOPNOTSUPP)) {
                b->no_batch = true; /* before 5.6: one key at a time */
                break;
            }
            return -e;
        }
        total += cnt;
        if (e == ENOENT)
            return (long)total;
        in = out;
        first = false;
    }
    if (!b->no_batch)
        return (long)total;
    struct wake_bpf_key cur, next;
    bool have = false;
    total = 0;
    while (total < b->max_entries &&
           bpf_map_get_next_key(b->counts_fd, have ? &cur : NULL, &next) == 0) {
        cur = next;
        have = true;
        if (bpf_map_lookup_elem(b->counts_fd, &cur, b->vals + total * b->vstride) == 0)
            b->keys[total++] = cur;
    }
    return (long)total;
}

static void sum_cpus(const struct wake_bpf *b, size_t i, struct wake_bpf_rec *r)
{
    const struct wake_bpf_key *k = &b->keys[i];
    size_t step = (sizeof(struct wake_bpf_val) + 7) & ~(size_t)7;
    *r = (struct wake_bpf_rec){.kind = (enum wake_kind)k->kind, .id = k->id, .addr = k->addr};
    for (unsigned c = 0; c < b->ncpu_possible; c++) {
        const struct wake_bpf_val *v =
            (const struct wake_bpf_val *)(b->vals + i * b->vstride + c * step);
        r->events += v->events;
        r->idle_wakeups += v->idle_wakeups;
        if (!r->tgid && v->tgid)
            r->tgid = v->tgid;
        if (!r->cgid && v->cgid)
            r->cgid = v->cgid;
        if (!r->name[0] && v->name[0])
            memcpy(r->name, v->name, sizeof(r->name));
    }
    r->name[sizeof(r->name) - 1] = '\0';
}

static int take(struct wake_bpf *b, struct wake_window *ret)
{
    long n = read_counts(b);
    if (n < 0)
        return (int)n;
    for (long i = 0; i < n; i++)
        sum_cpus(b, (size_t)i, &b->recs[i]);
    uint32_t zero = 0;
    if (bpf_map_lookup_elem(b->cpus_fd, &zero, b->cpuv) < 0)
        return -errno;
    struct wake_bpf_cpu_rec *cr = xcalloc(b->ncpu_possible, sizeof(*cr));
    size_t ncr = 0;
    CPUSET_FOREACH (cpu, &b->online) {
        if ((unsigned)cpu >= b->ncpu_possible)
            break;
        const struct wake_bpf_cpu *v = &b->cpuv[cpu];
        cr[ncr++] = (struct wake_bpf_cpu_rec){cpu, v->idle_wakeups, v->other_idle, v->full_events,
                                              v->full_idle};
    }
    struct wake_bpf_rec *stale = NULL;
    size_t nstale = 0;
    uint64_t now = now_monotonic_ns();
    wake_bpf_acct_take(b->acct, b->recs, (size_t)n, cr, ncr, now, ret, &stale, &nstale);
    for (size_t i = 0; i < nstale; i++) {
        struct wake_bpf_key k = {
            .kind = (uint32_t)stale[i].kind, .id = stale[i].id, .addr = stale[i].addr};
        if (bpf_map_delete_elem(b->counts_fd, &k) == 0)
            wake_bpf_acct_forget(b->acct, &stale[i]);
    }
    free(stale);
    free(cr);
    return 0;
}

int wake_bpf_take(struct wake_bpf *b, struct wake_window *ret)
{
    int r = take(b, ret);
    if (r < 0)
        return r;
    wake_resolve_names(&b->syms, b->h, ret, ret->end_ns,
                       b->pass_interval_ns ? b->pass_interval_ns : PASS_DEF_NS, &b->last_pass_ns,
                       NULL, NULL);
    return 0;
}

void wake_bpf_reset(struct wake_bpf *b)
{
    struct wake_window w = {0};
    if (take(b, &w) == 0)
        wake_window_clear(&w);
}

#else /* !WATT_HAVE_BPF */

/* Built without libbpf, clang or bpftool (or -Dbpf=disabled): the ring
 * and /proc paths do the work. */
struct wake_bpf {
    int unused;
};

int wake_bpf_open(struct host *h, size_t max_entries, struct wake_bpf **ret, char **ret_why)
{
    if (ret_why)
        *ret_why = xstrdup("built without BPF (-Dbpf=disabled, or no clang, bpftool or libbpf at "
                           "build time)");
    return 0;
}

int wake_bpf_take(struct wake_bpf *b, struct wake_window *ret)
{
    return -ENODEV;
}

void wake_bpf_reset(struct wake_bpf *b)
{
}

const char *wake_bpf_note(const struct wake_bpf *b)
{
    return NULL;
}

void wake_bpf_set_name_interval(struct wake_bpf *b, double seconds)
{
}

void wake_bpf_close(struct wake_bpf *b)
{
}

#endif
