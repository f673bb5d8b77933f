/* wakeups: decoding raw tracepoint records, and the pure accounting of
 * events and idle-exit cycles (the rules are in wakeups.h). The live
 * tracer that feeds it is wake_tracer.c. */
#include "sense/wakeups.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cpuset.h"
#include "base/parse.h"
#include "base/util.h"
#include "sense/irq.h"
#include "sense/sample.h"
#include "sense/tasks.h"
#include "sense/wake_internal.h"

#define ACCT_DEFAULT_MAX   16384
#define ACCT_FIRST_CAP     64
#define ACCT_MAX_TASK_TMRS 8

static const char *const kind_names[_WAKE_KIND_MAX] = {
    [WAKE_TASK] = "task",       [WAKE_IRQ] = "irq",   [WAKE_TIMER] = "timer",
    [WAKE_HRTIMER] = "hrtimer", [WAKE_WORK] = "work", [WAKE_OTHER] = "other",
};

const char *wake_kind_name(enum wake_kind k)
{
    return (unsigned)k < _WAKE_KIND_MAX ? kind_names[k] : "unknown";
}

static const char *const mode_names[_WAKE_MODE_MAX] = {
    [WAKE_MODE_AUTO] = "auto", [WAKE_MODE_BPF] = "bpf", [WAKE_MODE_TRACE] = "trace",
    [WAKE_MODE_PROC] = "proc", [WAKE_MODE_OFF] = "off",
};

const char *wake_mode_name(enum wake_mode m)
{
    return (unsigned)m < _WAKE_MODE_MAX ? mode_names[m] : "unknown";
}

int wake_mode_from_string(const char *s, enum wake_mode *ret)
{
    for (unsigned i = 0; s && i < _WAKE_MODE_MAX; i++)
        if (streq(s, mode_names[i])) {
            *ret = (enum wake_mode)i;
            return 0;
        }
    return -EINVAL;
}

const char *wake_path_name(enum wake_path p)
{
    static const char *const names[_WAKE_PATH_MAX] = {
        [WAKE_PATH_PROC] = "proc", [WAKE_PATH_TRACE] = "trace", [WAKE_PATH_BPF] = "bpf"};
    return (unsigned)p < _WAKE_PATH_MAX ? names[p] : "unknown";
}

void wake_window_clear(struct wake_window *w)
{
    if (!w)
        return;
    free(w->e);
    free(w->cpu);
    free(w->cpu_idle_wakeups);
    *w = (struct wake_window){0};
}

/* ---- decoding ---- */

static const struct {
    const char *sys, *event;
    const char *num, *str, *tcpu; /* the fields wake_slot holds */
} slot_desc[WAKE_NSLOTS] = {
    [WEV_IDLE_ENTER] = {"power", "cpu_idle", "state", NULL, NULL},
    [WEV_WAKEUP] = {"sched", "sched_wakeup", "pid", "comm", "target_cpu"},
    [WEV_IRQ] = {"irq", "irq_handler_entry", "irq", "name", NULL},
    [WEV_TIMER] = {"timer", "timer_expire_entry", "function", NULL, NULL},
    [WEV_HRTIMER] = {"timer", "hrtimer_expire_entry", "function", NULL, NULL},
    [WEV_WORK] = {"workqueue", "workqueue_execute_start", "function", NULL, NULL},
};

const char *wake_slot_system(unsigned slot)
{
    return slot < WAKE_NSLOTS ? slot_desc[slot].sys : NULL;
}

const char *wake_slot_event(unsigned slot)
{
    return slot < WAKE_NSLOTS ? slot_desc[slot].event : NULL;
}

/* A field we read as one integer must be one (1, 2, 4 or 8 bytes, not an
 * array); a string field must be an array or a __data_loc. */
static const struct tracefs_field *int_field(const struct tracefs_format *f, const char *name)
{
    const struct tracefs_field *fl = name ? tracefs_find_field(f, name) : NULL;
    if (!fl || fl->is_array || fl->dynamic)
        return NULL;
    return fl->size == 1 || fl->size == 2 || fl->size == 4 || fl->size == 8 ? fl : NULL;
}

static const struct tracefs_field *str_field(const struct tracefs_format *f, const char *name)
{
    const struct tracefs_field *fl = name ? tracefs_find_field(f, name) : NULL;
    return fl && (fl->is_array || fl->dynamic) ? fl : NULL;
}

unsigned wake_decoder_init(struct wake_decoder *dc, const struct wake_formats *f,
                           const char **ret_missing)
{
    static _Thread_local char missing[128];
    unsigned n = 0;
    *dc = (struct wake_decoder){0};
    if (ret_missing)
        *ret_missing = NULL;
    for (unsigned i = 0; i < WAKE_NSLOTS; i++) {
        const struct tracefs_format *fm = &f->fmt[i];
        struct wake_slot *s = &dc->slot[i];
        if (!slot_desc[i].event || fm->id == 0 || fm->nfields == 0)
            continue;
        s->num = int_field(fm, slot_desc[i].num);
        if (!s->num) {
            if (ret_missing && !*ret_missing) {
                snprintf(missing, sizeof(missing), "%s: no integer field %s", slot_desc[i].event,
                         slot_desc[i].num);
                *ret_missing = missing;
            }
            continue;
        }
        s->id = fm->id;
        s->type = int_field(fm, "common_type");
        s->flags = int_field(fm, "common_flags");
        s->pid = int_field(fm, "common_pid");
        s->str = str_field(fm, slot_desc[i].str);
        s->tcpu = int_field(fm, slot_desc[i].tcpu);
        n++;
    }
    return n;
}

/* The type-specific part: the event's own fields into ev. */
static int decode_body(const struct wake_slot *s, unsigned slot, const void *raw, size_t len,
                       struct wake_event *ev)
{
    uint64_t v;
    int r = tracefs_field_u64(s->num, raw, len, &v);
    if (r < 0)
        return r;
    switch (slot) {
    case WEV_IDLE_ENTER:
        ev->state = (uint32_t)v;
        ev->type = ev->state == UINT32_MAX ? WEV_IDLE_EXIT : WEV_IDLE_ENTER;
        return 0;
    case WEV_WAKEUP:
        ev->target = (int32_t)v;
        if (s->tcpu) {
            if ((r = tracefs_field_u64(s->tcpu, raw, len, &v)) < 0)
                return r;
            ev->target_cpu = (int)(int32_t)v;
        }
        break;
    case WEV_IRQ:
        ev->irq = (int)(int32_t)v;
        break;
    default:
        ev->addr = v;
        return 0;
    }
    if (s->str && (r = tracefs_field_str(s->str, raw, len, &ev->name, &ev->name_len)) < 0)
        return r;
    return 0;
}

int wake_decoder_run(const struct wake_decoder *dc, unsigned id, const void *raw, size_t len,
                     int cpu, struct wake_event *ret)
{
    unsigned i = 0;
    while (i < WAKE_NSLOTS && (dc->slot[i].id != id || id == 0))
        i++;
    if (i == WAKE_NSLOTS)
        return -ENOENT;
    const struct wake_slot *s = &dc->slot[i];
    struct wake_event ev = {
        .type = (enum wake_ev_type)i,
        .cpu = cpu,
        .pid = -1,
        .target = -1,
        .target_cpu = -1,
        .irq = -1,
    };
    uint64_t v;
    int r;
    /* common_type is the event id: a record of another event is garbage */
    if (s->type) {
        if ((r = tracefs_field_u64(s->type, raw, len, &v)) < 0)
            return r;
        if ((v & 0xffff) != (id & 0xffff))
            return -EBADMSG;
    }
    if (s->flags) {
        if ((r = tracefs_field_u64(s->flags, raw, len, &v)) < 0)
            return r;
        ev.flags = (uint8_t)v;
    }
    if (s->pid) {
        if ((r = tracefs_field_u64(s->pid, raw, len, &v)) < 0)
            return r;
        ev.pid = (int32_t)v;
    }
    if ((r = decode_body(s, i, raw, len, &ev)) < 0)
        return r;
    *ret = ev;
    return 0;
}

int wake_decode(const struct wake_formats *f, unsigned id, const void *raw, size_t len, int cpu,
                struct wake_event *ret)
{
    struct wake_decoder dc;
    wake_decoder_init(&dc, f, NULL);
    int r = wake_decoder_run(&dc, id, raw, len, cpu, ret);
    if (r != -ENOENT || id == 0)
        return r;
    /* one of our formats, unusable (a field we need is missing): garbage */
    for (unsigned i = 0; i < WAKE_NSLOTS; i++)
        if (slot_desc[i].event && f->fmt[i].id == id)
            return -EBADMSG;
    return r;
}

/* ---- accounting ---- */

enum cause_state {
    CAUSE_NONE,  /* nothing since the idle entry yet */
    CAUSE_SET,   /* blame known */
    CAUSE_TIMER, /* a task-waking timer fired: the next wake-up names the task,
                    else the timer keeps the blame */
};

struct cause {
    enum wake_kind kind;
    int32_t id;
    uint64_t addr;
    uint8_t name_len;
    char name[sizeof(((struct wake_entry *)0)->name)];
};

struct acct_cpu {
    bool listed; /* in every window from now on */
    bool open;   /* an idle entry was seen: a cycle runs until the next one */
    uint8_t state;
    struct cause c;
    uint64_t idle_wakeups; /* cycles closed in this window */
};

struct wake_acct {
    size_t max;           /* table bound */
    struct wake_entry *e; /* n used, cap allocated */
    size_t n, cap;
    uint32_t *slot; /* open addressing: 0 empty, else index + 1 */
    size_t nslots;  /* a power of 2, at least 2 * cap */
    struct wake_entry other, full;
    struct acct_cpu *cpu;
    size_t ncpu;
    uint64_t task_timer[ACCT_MAX_TASK_TMRS];
    size_t ntask_timers;
    uint64_t start_ns, lost, dropped;
};

static void alloc_table(struct wake_acct *a, size_t cap)
{
    size_t nslots = 1;
    while (nslots < 2 * cap)
        nslots <<= 1;
    a->e = xrealloc(a->e, cap * sizeof(*a->e));
    a->cap = cap;
    free(a->slot);
    a->slot = xcalloc(nslots, sizeof(*a->slot));
    a->nslots = nslots;
}

struct wake_acct *wake_acct_new(size_t max_entries)
{
    struct wake_acct *a = xcalloc(1, sizeof(*a));
    a->max = max_entries ? max_entries : ACCT_DEFAULT_MAX;
    alloc_table(a, a->max < ACCT_FIRST_CAP ? a->max : ACCT_FIRST_CAP);
    a->other = (struct wake_entry){.kind = WAKE_OTHER, .id = -1, .name = "(no cause event)"};
    a->full = (struct wake_entry){.kind = WAKE_OTHER, .id = -1, .name = "(table full)"};
    a->start_ns = now_monotonic_ns();
    return a;
}

void wake_acct_free(struct wake_acct *a)
{
    if (!a)
        return;
    free(a->e);
    free(a->slot);
    free(a->cpu);
    free(a);
}

void wake_acct_set_task_timers(struct wake_acct *a, const uint64_t *addr, size_t n)
{
    a->ntask_timers = n < ACCT_MAX_TASK_TMRS ? n : ACCT_MAX_TASK_TMRS;
    memcpy(a->task_timer, addr, a->ntask_timers * sizeof(*addr));
}

void wake_acct_set_start(struct wake_acct *a, uint64_t start_ns)
{
    a->start_ns = start_ns;
}

/* murmur3's finaliser: kernel addresses differ in their low bits, tids
 * and IRQ numbers are small; both must spread over the slots. */
static size_t key_hash(enum wake_kind k, int32_t id, uint64_t addr)
{
    uint64_t x = addr ^ ((uint64_t)(uint32_t)id << 3) ^ ((uint64_t)k << 59);
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return (size_t)x;
}

static void insert_slot(struct wake_acct *a, size_t idx)
{
    const struct wake_entry *e = &a->e[idx];
    size_t mask = a->nslots - 1;
    size_t i = key_hash(e->kind, e->id, e->addr) & mask;
    while (a->slot[i])
        i = (i + 1) & mask;
    a->slot[i] = (uint32_t)(idx + 1);
}

static void grow_table(struct wake_acct *a)
{
    size_t cap = a->cap * 2 < a->max ? a->cap * 2 : a->max;
    alloc_table(a, cap);
    for (size_t i = 0; i < a->n; i++)
        insert_slot(a, i);
}

static void set_name(struct wake_entry *e, const char *name, size_t len)
{
    if (e->kind == WAKE_TIMER || e->kind == WAKE_HRTIMER || e->kind == WAKE_WORK) {
        snprintf(e->name, sizeof(e->name), "0x%016" PRIx64, e->addr);
        return;
    }
    if (len >= sizeof(e->name))
        len = sizeof(e->name) - 1;
    if (len)
        memcpy(e->name, name, len);
    e->name[len] = '\0';
    if (!len && e->kind == WAKE_IRQ) /* a kernel without the name field */
        snprintf(e->name, sizeof(e->name), "irq%d", e->id);
}

/* The entry of a source, created (with its name) when new; NULL when the
 * table is full. */
static struct wake_entry *acct_get(struct wake_acct *a, enum wake_kind k, int32_t id, uint64_t addr,
                                   const char *name, size_t len)
{
    size_t mask = a->nslots - 1;
    for (size_t i = key_hash(k, id, addr) & mask; a->slot[i]; i = (i + 1) & mask) {
        struct wake_entry *e = &a->e[a->slot[i] - 1];
        if (e->addr == addr && e->id == id && e->kind == k)
            return e;
    }
    if (a->n >= a->max)
        return NULL;
    if (a->n == a->cap)
        grow_table(a);
    struct wake_entry *e = &a->e[a->n];
    *e = (struct wake_entry){.kind = k, .id = id, .addr = addr};
    set_name(e, name, len);
    insert_slot(a, a->n++);
    return e;
}

static void count_event(struct wake_acct *a, enum wake_kind k, int32_t id, uint64_t addr,
                        const char *name, size_t len)
{
    struct wake_entry *e = acct_get(a, k, id, addr, name, len);
    if (e) {
        e->events++;
        return;
    }
    a->full.events++;
    a->dropped++;
}

static struct acct_cpu *acct_cpu(struct wake_acct *a, int cpu)
{
    if (cpu < 0 || cpu > CPUSET_MAX_CPU)
        return NULL;
    if ((size_t)cpu >= a->ncpu) {
        size_t n = (size_t)cpu + 1 > 2 * a->ncpu ? (size_t)cpu + 1 : 2 * a->ncpu;
        a->cpu = xrealloc(a->cpu, n * sizeof(*a->cpu));
        memset(a->cpu + a->ncpu, 0, (n - a->ncpu) * sizeof(*a->cpu));
        a->ncpu = n;
    }
    struct acct_cpu *c = &a->cpu[cpu];
    c->listed = true;
    return c;
}

void wake_acct_add_cpu(struct wake_acct *a, int cpu)
{
    acct_cpu(a, cpu);
}

void wake_acct_lost(struct wake_acct *a, int cpu, uint64_t n)
{
    a->lost += n;
    struct acct_cpu *c = acct_cpu(a, cpu);
    if (c) {
        c->open = false;
        c->state = CAUSE_NONE;
    }
}

/* An idle entry: the cycle since the previous one is blamed on its first
 * cause, or on "other" when it had none. */
static void close_cycle(struct wake_acct *a, struct acct_cpu *c)
{
    if (c->open) {
        struct wake_entry *e = &a->other;
        c->idle_wakeups++;
        if (c->state != CAUSE_NONE) {
            e = acct_get(a, c->c.kind, c->c.id, c->c.addr, c->c.name, c->c.name_len);
            if (!e)
                e = &a->full;
        }
        e->idle_wakeups++;
    }
    c->open = true;
    c->state = CAUSE_NONE;
}

static void set_cause(struct acct_cpu *c, enum wake_kind k, int32_t id, uint64_t addr,
                      const struct wake_event *ev)
{
    size_t len = 0;
    if (k == WAKE_TASK || k == WAKE_IRQ) {
        len = ev->name_len < sizeof(c->c.name) ? ev->name_len : sizeof(c->c.name) - 1;
        if (len)
            memcpy(c->c.name, ev->name, len);
    }
    c->c.kind = k;
    c->c.id = id;
    c->c.addr = addr;
    c->c.name_len = (uint8_t)len;
    c->state = CAUSE_SET;
}

static bool is_task_timer(const struct wake_acct *a, uint64_t addr)
{
    for (size_t i = 0; i < a->ntask_timers; i++)
        if (a->task_timer[i] == addr)
            return true;
    return false;
}

/* The event on c's ring may be why c left idle: only the first counts. */
static void note_cause(struct wake_acct *a, struct acct_cpu *c, const struct wake_event *ev,
                       enum wake_kind k, int32_t id, uint64_t addr)
{
    if (!c->open || c->state == CAUSE_SET)
        return;
    if (c->state == CAUSE_TIMER) {
        /* hrtimer_wakeup() and friends wake their task at once, on any CPU;
         * anything else first means the timer woke nobody: it keeps it */
        if (ev->type == WEV_WAKEUP)
            set_cause(c, WAKE_TASK, ev->target, 0, ev);
        c->state = CAUSE_SET;
        return;
    }
    if (ev->type == WEV_WAKEUP && ev->target_cpu >= 0 && ev->target_cpu != ev->cpu)
        return; /* this CPU, awake already, woke a task onto another one */
    set_cause(c, k, id, addr, ev);
    if ((k == WAKE_TIMER || k == WAKE_HRTIMER) && is_task_timer(a, addr))
        c->state = CAUSE_TIMER;
}

void wake_acct_feed(struct wake_acct *a, const struct wake_event *ev)
{
    struct acct_cpu *c = acct_cpu(a, ev->cpu);
    enum wake_kind k;
    int32_t id = -1;
    uint64_t addr = 0;
    switch (ev->type) {
    case WEV_IDLE_ENTER:
        if (c)
            close_cycle(a, c);
        return;
    case WEV_IDLE_EXIT:
        return;
    case WEV_WAKEUP:
        k = WAKE_TASK;
        id = ev->target;
        break;
    case WEV_IRQ:
        k = WAKE_IRQ;
        id = ev->irq;
        break;
    case WEV_TIMER:
        k = WAKE_TIMER;
        addr = ev->addr;
        break;
    case WEV_HRTIMER:
        k = WAKE_HRTIMER;
        addr = ev->addr;
        break;
    case WEV_WORK:
        k = WAKE_WORK;
        addr = ev->addr;
        break;
    default:
        return;
    }
    count_event(a, k, id, addr, ev->name, ev->name_len);
    if (c)
        note_cause(a, c, ev, k, id, addr);
}

static void take_cpus(struct wake_acct *a, struct wake_window *w)
{
    unsigned n = 0;
    for (size_t i = 0; i < a->ncpu; i++)
        n += a->cpu[i].listed;
    w->cpu = xcalloc(n ? n : 1, sizeof(*w->cpu));
    w->cpu_idle_wakeups = xcalloc(n ? n : 1, sizeof(*w->cpu_idle_wakeups));
    for (size_t i = 0; i < a->ncpu; i++) {
        struct acct_cpu *c = &a->cpu[i];
        if (!c->listed)
            continue;
        w->cpu[w->ncpus] = (int)i;
        w->cpu_idle_wakeups[w->ncpus++] = c->idle_wakeups;
        w->total_idle_wakeups += c->idle_wakeups;
        c->idle_wakeups = 0;
    }
}

void wake_acct_take(struct wake_acct *a, uint64_t now_ns, struct wake_window *ret)
{
    struct wake_window w = {
        .start_ns = a->start_ns,
        .end_ns = now_ns,
        .seconds = now_ns > a->start_ns ? (double)(now_ns - a->start_ns) / 1e9 : 0,
        .traced = true,
        .lost = a->lost,
        .dropped = a->dropped,
    };
    w.e = xmalloc((a->n + 2) * sizeof(*w.e));
    memcpy(w.e, a->e, a->n * sizeof(*w.e));
    w.n = a->n;
    struct wake_entry *special[] = {&a->other, &a->full};
    for (size_t i = 0; i < ARRAY_SIZE(special); i++) {
        if (special[i]->events || special[i]->idle_wakeups)
            w.e[w.n++] = *special[i];
        special[i]->events = special[i]->idle_wakeups = 0;
    }
    for (size_t i = 0; i < w.n; i++)
        w.total_events += w.e[i].events;
    take_cpus(a, &w);
    /* afresh; the table keeps its size (it was needed) */
    a->n = 0;
    memset(a->slot, 0, a->nslots * sizeof(*a->slot));
    a->lost = a->dropped = 0;
    a->start_ns = now_ns;
    *ret = w;
}

/* ---- the /proc fallback ---- */

static void proc_entry(struct wake_window *w, size_t *cap, enum wake_kind k, int32_t id,
                       const char *name, uint64_t events)
{
    w->e = grow_array(w->e, sizeof(*w->e), w->n, cap);
    struct wake_entry *e = &w->e[w->n++];
    *e = (struct wake_entry){.kind = k, .id = id, .events = events};
    snprintf(e->name, sizeof(e->name), "%s", name ? name : "");
    w->total_events += events;
}

int wake_window_from_proc(const struct irq_rates *irq, const struct task_delta *td, size_t ntd,
                          double seconds, struct wake_window *ret)
{
    if (!(seconds >= 0) || (!td && ntd))
        return -EINVAL;
    struct wake_window w = {.seconds = seconds, .traced = false};
    size_t cap = 0;
    for (unsigned i = 0; irq && i < irq->nsources; i++) {
        const struct irq_rate *r = &irq->src[i];
        uint64_t num;
        if (!r->src || !r->src->numeric || parse_u64(r->src->label, &num) < 0 || num > INT32_MAX)
            continue;
        if (!isfinite(r->per_s) || r->per_s < 0)
            continue; /* a counter that went backwards: no count */
        proc_entry(&w, &cap, WAKE_IRQ, (int32_t)num, r->src->name ? r->src->name : r->src->label,
                   (uint64_t)llround(r->per_s * seconds));
    }
    for (size_t i = 0; i < ntd; i++) {
        if (!td[i].t || td[i].vol_ctxsw == VAL_NONE)
            continue;
        proc_entry(&w, &cap, WAKE_TASK, td[i].t->pid, td[i].t->comm, td[i].vol_ctxsw);
    }
    w.end_ns = now_monotonic_ns();
    uint64_t span = (uint64_t)llround(seconds * 1e9);
    w.start_ns = w.end_ns > span ? w.end_ns - span : 0;
    if (!w.e)
        w.e = xmalloc(sizeof(*w.e)); /* "owned": never NULL, as from a take */
    *ret = w;
    return 0;
}

void wake_set_why(char **ret_why, const char *fmt, ...)
{
    if (!ret_why)
        return;
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    if (vasprintf(&s, fmt, ap) < 0)
        s = NULL;
    va_end(ap);
    *ret_why = s ? s : xstrdup("out of memory");
}
