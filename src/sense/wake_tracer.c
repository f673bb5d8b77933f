/* The live wake-up tracer: six tracepoints per CPU through perf_event_open(2)
 * into one mmap'ed ring per CPU, decoded and accounted by wakeups.c.
 *
 * The ring protocol (include/uapi/linux/perf_event.h, struct
 * perf_event_mmap_page; tools/lib/perf/mmap.c): the kernel writes records
 * at data_head and never past data_tail, which only we move. data_head is
 * read with acquire semantics (the records before it are then visible);
 * data_tail is written with release semantics once the records are read,
 * so the kernel cannot overwrite what we are still reading. Records are
 * 8-byte aligned, so a header never wraps around the ring's end, but the
 * record behind it may: that one is copied out whole. */
#include <errno.h>
#include <inttypes.h>
#include <linux/perf_event.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include "base/cpuset.h"
#include "base/util.h"
#include "sense/kallsyms.h"
#include "sense/wake_internal.h"

#define TRACER_EVENTS         6 /* slots of wake_formats in use */
#define TRACER_DEF_PAGES      16
#define TRACER_DEF_PCT        25
#define TRACER_MAX_PAGES      (1u << 16)
#define RECORD_MAX            65536 /* perf_event_header.size is a u16 */
#define KSYM_PASS_INTERVAL_NS (10 * 1000000000ull)
/* cpu_idle records of exits (state (u32)-1) are not needed: an entry
 * alone closes a cycle. Filtered in the kernel, they cost no record. */
#define IDLE_EXIT_FILTER "state != 4294967295"

/* The callbacks whose only job is to wake a task: a cycle they start is
 * the task's (kernel/time/hrtimer.c, fs/timerfd.c, kernel/time/itimer.c,
 * kernel/time/posix-timers.c, kernel/time/sleep_timeout.c). */
static const char *const task_timer_names[] = {
    "hrtimer_wakeup", "timerfd_tmrproc", "it_real_fn", "posix_timer_fn", "process_timeout",
};

struct ring {
    int cpu;
    int fd; /* the event that owns the mmap */
    /* The check that the kernel delivered what it counted (see
     * check_delivery()): each slot's event fd, whose read() counts every
     * event that happened, sampled or not. */
    int slot_fd[WAKE_NSLOTS];
    uint64_t counted;      /* events the kernel counted, all slots, since open */
    uint64_t samples;      /* samples read since open */
    uint64_t lost_records; /* events PERF_RECORD_LOST reported since open */
    int64_t reported;      /* the shortfall already put in a window */
    struct perf_event_mmap_page *meta;
    unsigned char *data;
    uint64_t size, mask; /* data area, a power of 2 */
};

struct wake_tracer {
    struct host *h;
    struct wake_formats formats;
    struct wake_decoder dc;
    struct tracefs_field type_field; /* common_type: the event id of a record */
    struct wake_acct *acct;
    struct ring *ring;
    size_t nring;
    int *ring_fd; /* what wake_tracer_fds() hands out */
    int *fd;      /* every event, for close */
    size_t nfd;
    size_t map_len;
    unsigned char *scratch; /* a record that wraps, put together */
    uint64_t events, garbage;
    struct ksym_cache syms;
    uint64_t last_pass_ns; /* CLOCK_MONOTONIC of the last kallsyms pass; 0: none yet */
    uint64_t pass_interval_ns;
    char note[256];
};

/* ---- formats ---- */

static int read_format(struct host *h, const char *dir, unsigned slot, struct tracefs_format *ret,
                       char **ret_why)
{
    const char *sys = wake_slot_system(slot), *ev = wake_slot_event(slot);
    _cleanup_free_ char *path = xasprintf("%s/%s/%s/format", dir, sys, ev);
    _cleanup_free_ char *text = NULL;
    size_t len;
    int r = host_read(h, HOST_ROOTDIR, path, &text, &len);
    if (r < 0) {
        wake_set_why(ret_why, "tracepoint %s:%s: cannot read its format: %s", sys, ev,
                     errno_name(-r));
        return r;
    }
    struct diags d = {0};
    r = tracefs_parse_format(text, len, ret, &d);
    diags_free(&d);
    if (r < 0) {
        wake_set_why(ret_why, "tracepoint %s:%s: its format has no field", sys, ev);
        return r;
    }
    if (ret->id == 0) { /* every kernel prints ID:, but the id file is the reference */
        uint64_t id;
        if (host_read_u64f(h, HOST_ROOTDIR, &id, "%s/%s/%s/id", dir, sys, ev) == 0 && id <= 0xffff)
            ret->id = (unsigned)id;
    }
    return 0;
}

static int read_formats(struct wake_tracer *t, char **ret_why)
{
    _cleanup_free_ char *dir = NULL;
    bool mounted;
    int r = host_tracefs_events(t->h, &dir, &mounted);
    if (r == -EACCES) {
        wake_set_why(ret_why, "tracefs cannot be read: EACCES (needs root)");
        return r;
    }
    if (r < 0) {
        wake_set_why(ret_why,
                     "tracefs is not mounted (neither tracefs nor debugfs in the mount table) "
                     "and mount(2) was refused: %s",
                     errno_name(-r));
        return r;
    }
    for (unsigned i = 0; i < WAKE_NSLOTS && r >= 0; i++)
        if (wake_slot_event(i))
            r = read_format(t->h, dir, i, &t->formats.fmt[i], ret_why);
    if (mounted)
        host_tracefs_unmount(t->h); /* perf keeps the ids; nobody needs the mount */
    if (r < 0)
        return r;
    const char *missing;
    if (wake_decoder_init(&t->dc, &t->formats, &missing) < TRACER_EVENTS) {
        wake_set_why(ret_why, "tracepoint format not understood: %s", missing ? missing : "no id");
        return -EBADMSG;
    }
    const struct tracefs_field *ty = tracefs_find_field(&t->formats.fmt[0], "common_type");
    if (!ty || ty->size != 2 || ty->is_array || ty->dynamic) {
        wake_set_why(ret_why, "tracepoint format not understood: cpu_idle: no common_type");
        return -EBADMSG;
    }
    t->type_field = *ty;
    return 0;
}

/* ---- rings ---- */

static const char *perf_hint(int err)
{
    switch (err) {
    case -EACCES:
    case -EPERM:
        return " (needs root or CAP_PERFMON, or kernel.perf_event_paranoid = -1)";
    case -EMFILE:
        return " (six file descriptors per CPU: raise the open-files limit)";
    case -ENOENT:
    case -ENODEV:
        return " (the kernel has no such tracepoint, or the CPU went offline)";
    default:
        return "";
    }
}

/* Six events per CPU need six fds per CPU: past 170 CPUs the usual soft
 * limit of 1024 is too low. Raise it towards the hard limit (watt polls
 * with poll()/epoll, never select(), so high fds are fine). */
static void raise_nofile(size_t need)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur == RLIM_INFINITY ||
        rl.rlim_cur >= need + 256)
        return;
    rlim_t want = need + 256;
    rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > want ? want : rl.rlim_max;
    (void)setrlimit(RLIMIT_NOFILE, &rl);
}

static int open_event(struct wake_tracer *t, unsigned slot, int cpu, uint32_t watermark,
                      char **ret_why)
{
    struct perf_event_attr attr = {
        .type = PERF_TYPE_TRACEPOINT,
        .size = sizeof(attr),
        .config = t->formats.fmt[slot].id,
        .sample_period = 1,
        .sample_type = PERF_SAMPLE_RAW,
        .disabled = 1,
        .watermark = 1,
        .wakeup_watermark = watermark,
    };
    int fd = host_perf_open(t->h, &attr, -1, cpu, -1);
    if (fd < 0) {
        wake_set_why(ret_why, "perf_event_open %s:%s on CPU %d: %s%s", wake_slot_system(slot),
                     wake_slot_event(slot), cpu, errno_name(-fd), perf_hint(fd));
        return fd;
    }
    t->fd[t->nfd++] = fd;
    return fd;
}

static int map_ring(struct wake_tracer *t, struct ring *r, int fd, size_t page, char **ret_why)
{
    void *p = mmap(NULL, t->map_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        int err = -errno;
        wake_set_why(ret_why, "mmap of the perf ring of CPU %d (%zu KiB): %s%s", r->cpu,
                     t->map_len / 1024, errno_name(-err),
                     err == -EPERM ? " (kernel.perf_event_mlock_kb is too small)" : "");
        return err;
    }
    r->fd = fd;
    r->meta = p;
    /* data_offset/data_size since 4.1; before, the data follows the first page */
    uint64_t off = r->meta->data_offset ? r->meta->data_offset : page;
    r->size = r->meta->data_size ? r->meta->data_size : t->map_len - page;
    r->mask = r->size - 1;
    r->data = (unsigned char *)p + off;
    return 0;
}

/* All six events of one CPU, into one ring. */
static int open_cpu(struct wake_tracer *t, int cpu, uint32_t watermark, size_t page, char **ret_why)
{
    struct ring *r = &t->ring[t->nring];
    *r = (struct ring){.cpu = cpu, .fd = -1};
    for (unsigned slot = 0; slot < WAKE_NSLOTS; slot++) {
        r->slot_fd[slot] = -1;
        if (!wake_slot_event(slot))
            continue;
        int fd = open_event(t, slot, cpu, watermark, ret_why);
        if (fd < 0)
            return fd;
        r->slot_fd[slot] = fd;
        int rr = 0;
        if (r->fd < 0)
            rr = map_ring(t, r, fd, page, ret_why);
        else if (ioctl(fd, PERF_EVENT_IOC_SET_OUTPUT, r->fd) < 0) {
            rr = -errno;
            wake_set_why(ret_why, "perf ioctl SET_OUTPUT on CPU %d: %s", cpu, errno_name(errno));
        }
        if (rr < 0)
            return rr;
        /* old kernels or a locked-down filter: keep the exits, they are ignored */
        if (slot == WEV_IDLE_ENTER)
            (void)ioctl(fd, PERF_EVENT_IOC_SET_FILTER, IDLE_EXIT_FILTER);
    }
    t->ring_fd[t->nring++] = r->fd;
    return 0;
}

static int open_rings(struct wake_tracer *t, const struct wake_tracer_opts *o, char **ret_why)
{
    _cleanup_free_ char *online = NULL;
    struct cpuset cpus = {0};
    int r = host_read_str(t->h, HOST_SYS, "devices/system/cpu/online", &online);
    if (r == 0)
        r = cpuset_parse(online, &cpus);
    if (r < 0) {
        wake_set_why(ret_why, "cannot read the online CPUs: %s", errno_name(-r));
        return r;
    }
    size_t n = cpuset_count(&cpus), page = (size_t)sysconf(_SC_PAGESIZE);
    unsigned pages = o && o->ring_pages ? o->ring_pages : TRACER_DEF_PAGES;
    unsigned pct = o && o->watermark_pct ? o->watermark_pct : TRACER_DEF_PCT;
    t->map_len = (1 + (size_t)pages) * page;
    uint32_t watermark = (uint32_t)((uint64_t)pages * page * pct / 100);
    raise_nofile(n * TRACER_EVENTS);
    t->ring = xcalloc(n + 1, sizeof(*t->ring));
    t->ring_fd = xcalloc(n + 1, sizeof(*t->ring_fd));
    t->fd = xcalloc(n * TRACER_EVENTS + 1, sizeof(*t->fd));
    CPUSET_FOREACH (cpu, &cpus) {
        if ((r = open_cpu(t, cpu, watermark, page, ret_why)) < 0)
            break;
        wake_acct_add_cpu(t->acct, cpu);
    }
    if (r == 0 && t->nring == 0) {
        wake_set_why(ret_why, "no online CPU");
        r = -ENODEV;
    }
    cpuset_free(&cpus);
    return r;
}

static int enable_all(struct wake_tracer *t, char **ret_why)
{
    for (size_t i = 0; i < t->nfd; i++)
        if (ioctl(t->fd[i], PERF_EVENT_IOC_ENABLE, 0) < 0) {
            int e = errno; /* wake_set_why() may change errno */
            wake_set_why(ret_why, "perf ioctl ENABLE: %s", errno_name(e));
            return -e;
        }
    return 0;
}

/* ---- open, close ---- */

static void resolve_task_timers(struct wake_tracer *t)
{
    uint64_t addr[8];
    char why[160];
    size_t n = ksym_lookup_names(t->h, task_timer_names, ARRAY_SIZE(task_timer_names), addr,
                                 ARRAY_SIZE(addr), why, sizeof(why));
    wake_acct_set_task_timers(t->acct, addr, n);
    if (why[0]) /* no use reading it again for callback names */
        t->syms.unreadable = true;
    if (n == 0)
        snprintf(t->note, sizeof(t->note),
                 "%s: timers that only wake a task (hrtimer_wakeup, timerfd) are blamed on "
                 "the timer, not the task",
                 why[0] ? why : "kallsyms names none of hrtimer_wakeup, timerfd_tmrproc, ...");
}

int wake_tracer_open(struct host *h, const struct wake_tracer_opts *o, struct wake_tracer **ret,
                     char **ret_why)
{
    if (o && ((o->ring_pages & (o->ring_pages - 1)) || o->ring_pages > TRACER_MAX_PAGES ||
              o->watermark_pct > 100))
        return -EINVAL;
    if (!h->live) {
        wake_set_why(ret_why, "a recorded tree has no tracepoints");
        return 0;
    }
    struct wake_tracer *t = xcalloc(1, sizeof(*t));
    t->h = h;
    t->acct = wake_acct_new(o ? o->max_entries : 0);
    t->scratch = xmalloc(RECORD_MAX);
    ksym_cache_init(&t->syms);
    int r = read_formats(t, ret_why);
    if (r >= 0) {
        resolve_task_timers(t);
        r = open_rings(t, o, ret_why);
    }
    if (r >= 0)
        r = enable_all(t, ret_why);
    if (r < 0) {
        wake_tracer_close(t);
        return 0;
    }
    wake_acct_set_start(t->acct, now_monotonic_ns());
    *ret = t;
    return 1;
}

void wake_tracer_close(struct wake_tracer *t)
{
    if (!t)
        return;
    for (size_t i = 0; i < t->nfd; i++)
        (void)ioctl(t->fd[i], PERF_EVENT_IOC_DISABLE, 0);
    for (size_t i = 0; i < t->nring; i++)
        munmap(t->ring[i].meta, t->map_len);
    if (t->ring && t->ring[t->nring].meta) /* a ring mapped, then its CPU failed */
        munmap(t->ring[t->nring].meta, t->map_len);
    for (size_t i = 0; i < t->nfd; i++)
        close(t->fd[i]);
    for (unsigned i = 0; i < WAKE_NSLOTS; i++)
        tracefs_format_clear(&t->formats.fmt[i]);
    wake_acct_free(t->acct);
    ksym_cache_free(&t->syms);
    free(t->ring);
    free(t->ring_fd);
    free(t->fd);
    free(t->scratch);
    free(t);
}

size_t wake_tracer_fds(const struct wake_tracer *t, const int **ret)
{
    *ret = t->ring_fd;
    return t->nring;
}

uint64_t wake_tracer_events(const struct wake_tracer *t)
{
    return t->events;
}

void wake_tracer_set_name_interval(struct wake_tracer *t, double seconds)
{
    if (t && seconds > 0)
        t->pass_interval_ns = (uint64_t)(seconds * 1e9);
}

const char *wake_tracer_note(const struct wake_tracer *t)
{
    return t->note[0] ? t->note : NULL;
}

/* ---- reading ---- */

static void handle_sample(struct wake_tracer *t, struct ring *rg, const unsigned char *rec,
                          size_t len)
{
    int cpu = rg->cpu;
    uint32_t size;
    if (len < sizeof(struct perf_event_header) + sizeof(size))
        return;
    memcpy(&size, rec + sizeof(struct perf_event_header), sizeof(size));
    const unsigned char *raw = rec + sizeof(struct perf_event_header) + sizeof(size);
    if (size > len - sizeof(struct perf_event_header) - sizeof(size)) {
        t->garbage++;
        return;
    }
    uint64_t id;
    struct wake_event ev;
    if (tracefs_field_u64(&t->type_field, raw, size, &id) < 0 ||
        wake_decoder_run(&t->dc, (unsigned)id, raw, size, cpu, &ev) < 0) {
        t->garbage++;
        return;
    }
    t->events++;
    rg->samples++;
    wake_acct_feed(t->acct, &ev);
}

static void handle_record(struct wake_tracer *t, struct ring *rg, const unsigned char *rec,
                          size_t len, uint32_t type)
{
    int cpu = rg->cpu;
    if (type == PERF_RECORD_SAMPLE) {
        handle_sample(t, rg, rec, len);
    } else if (type == PERF_RECORD_LOST) {
        /* struct { header; u64 id; u64 lost; } */
        uint64_t lost;
        if (len >= sizeof(struct perf_event_header) + 2 * sizeof(uint64_t)) {
            memcpy(&lost, rec + sizeof(struct perf_event_header) + sizeof(uint64_t), sizeof(lost));
            wake_acct_lost(t->acct, cpu, lost);
            rg->lost_records += lost; /* counted too: not "undelivered" */
        }
    }
    /* THROTTLE and the like carry nothing we count */
}

static void drain_ring(struct wake_tracer *t, struct ring *r)
{
    uint64_t head = __atomic_load_n(&r->meta->data_head, __ATOMIC_ACQUIRE);
    uint64_t tail = r->meta->data_tail; /* only we write it */
    while (head - tail >= sizeof(struct perf_event_header)) {
        size_t off = (size_t)(tail & r->mask);
        struct perf_event_header hdr;
        memcpy(&hdr, r->data + off, sizeof(hdr));
        if (hdr.size < sizeof(hdr) || hdr.size > head - tail) {
            t->garbage++; /* cannot happen with a sane kernel: skip it all */
            tail = head;
            break;
        }
        const unsigned char *rec = r->data + off;
        if (off + hdr.size > r->size) {
            size_t first = r->size - off;
            memcpy(t->scratch, rec, first);
            memcpy(t->scratch + first, r->data, hdr.size - first);
            rec = t->scratch;
        }
        handle_record(t, r, rec, hdr.size, hdr.type);
        tail += hdr.size;
    }
    __atomic_store_n(&r->meta->data_tail, tail, __ATOMIC_RELEASE);
}

int wake_tracer_drain(struct wake_tracer *t)
{
    for (size_t i = 0; i < t->nring; i++)
        drain_ring(t, &t->ring[i]);
    return 0;
}

static bool has_addr(const struct wake_entry *e)
{
    return e->kind == WAKE_TIMER || e->kind == WAKE_HRTIMER || e->kind == WAKE_WORK;
}

static void drain_tick(void *ud)
{
    wake_tracer_drain(ud);
}

/* Callback names from kallsyms: one pass for the addresses not seen
 * before, then from the cache. A pass costs ~50 ms of CPU (the kernel
 * formats 5 MB), and a machine keeps showing new callbacks for minutes
 * (a work item that runs every 30 s): passes are at least
 * KSYM_PASS_INTERVAL_NS apart, new callbacks read "0x..." until then.
 * The tracer's rings are drained during a pass (tick), or a busy machine
 * overflows them. */
void wake_resolve_names(struct ksym_cache *syms, struct host *h, struct wake_window *w,
                        uint64_t now_ns, uint64_t interval_ns, uint64_t *last_pass_ns,
                        void (*tick)(void *), void *ud)
{
    size_t n = 0;
    uint64_t *todo = NULL;
    bool may = !*last_pass_ns || now_ns - *last_pass_ns >= interval_ns;
    for (size_t i = 0; may && i < w->n; i++)
        if (has_addr(&w->e[i]) && !ksym_known(syms, w->e[i].addr)) {
            if (!todo)
                todo = xmalloc(w->n * sizeof(*todo));
            todo[n++] = w->e[i].addr;
        }
    if (n && !syms->unreadable) {
        /* unresolved: "0x..." stays */
        (void)ksym_resolve(syms, h, todo, n, tick, ud);
        *last_pass_ns = now_ns;
    }
    free(todo);
    for (size_t i = 0; i < w->n; i++) {
        const char *name = has_addr(&w->e[i]) ? ksym_name(syms, w->e[i].addr) : NULL;
        if (name)
            snprintf(w->e[i].name, sizeof(w->e[i].name), "%s", name);
    }
}

/* Events the kernel counted but never delivered as samples, nor reported
 * lost (PERF_RECORD_LOST): some virtual machines' kernels drop a CPU's
 * samples while counting them. Per ring, cumulatively since open: counted
 * (read(2) of each event's fd counts every event, sampled or not) minus
 * samples read minus events reported lost. The counts are read before
 * the rings are drained, so an event in flight at the read shows as a
 * surplus sample, never as a loss; what the window adds to the shortfall
 * already reported goes into it, the worst CPU named. */
static void read_counts(struct wake_tracer *t)
{
    for (size_t i = 0; i < t->nring; i++) {
        struct ring *r = &t->ring[i];
        uint64_t total = 0;
        for (unsigned slot = 0; slot < WAKE_NSLOTS; slot++) {
            uint64_t c;
            if (r->slot_fd[slot] >= 0 && read(r->slot_fd[slot], &c, sizeof(c)) == sizeof(c))
                total += c;
        }
        if (total > r->counted)
            r->counted = total;
    }
}

static int64_t shortfall(const struct ring *r)
{
    return (int64_t)(r->counted - r->samples - r->lost_records);
}

static void check_delivery(struct wake_tracer *t, struct wake_window *w)
{
    uint64_t worst = 0;
    int worst_cpu = -1;
    for (size_t i = 0; i < t->nring; i++) {
        struct ring *r = &t->ring[i];
        int64_t now = shortfall(r);
        if (now <= r->reported)
            continue; /* in-flight samples arrived: nothing new is missing */
        uint64_t add = (uint64_t)(now - r->reported);
        r->reported = now;
        w->undelivered += add;
        if (add > worst) {
            worst = add;
            worst_cpu = r->cpu;
        }
    }
    if (worst_cpu >= 0)
        snprintf(w->note, sizeof(w->note),
                 "the kernel counted %" PRIu64 " trace events on CPU %d in this window that it "
                 "never delivered: wake-ups there are missing from the counts",
                 worst, worst_cpu);
}

void wake_tracer_reset(struct wake_tracer *t)
{
    read_counts(t);
    wake_tracer_drain(t);
    struct wake_window w;
    wake_acct_take(t->acct, now_monotonic_ns(), &w);
    for (size_t i = 0; i < t->nring; i++) /* what went missing before is not this window's */
        t->ring[i].reported = shortfall(&t->ring[i]);
    wake_window_clear(&w);
}

int wake_tracer_take(struct wake_tracer *t, struct wake_window *ret)
{
    read_counts(t);
    wake_tracer_drain(t);
    struct wake_window w;
    uint64_t now = now_monotonic_ns();
    wake_acct_take(t->acct, now, &w);
    check_delivery(t, &w);
    wake_resolve_names(&t->syms, t->h, &w, now,
                       t->pass_interval_ns ? t->pass_interval_ns : KSYM_PASS_INTERVAL_NS,
                       &t->last_pass_ns, drain_tick, t);
    *ret = w;
    return 0;
}
