/* The BPF counters' deltas: wake.bpf.c counts cumulatively per key and per
 * CPU; each take turns the map's contents into the window since the
 * previous take, the same struct wake_window the ring path fills. Pure:
 * wake_bpf.c reads the maps, the unit tests hand in fake contents. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "sense/wake_internal.h"

struct prev_key {
    enum wake_kind kind;
    int32_t id;
    uint64_t addr;
    uint64_t events, idle_wakeups; /* cumulative at the last take */
    unsigned still;                /* takes in a row without a change */
    bool gone;                     /* deleted from the map */
};

struct prev_cpu {
    int cpu;
    uint64_t idle_wakeups, other_idle, full_events, full_idle;
};

struct wake_bpf_acct {
    unsigned stale_after;
    struct prev_key *k; /* sorted by key */
    size_t nk;
    struct prev_cpu *c; /* sorted by cpu */
    size_t nc;
    uint64_t start_ns;
};

struct wake_bpf_acct *wake_bpf_acct_new(unsigned stale_after, uint64_t start_ns)
{
    struct wake_bpf_acct *a = xcalloc(1, sizeof(*a));
    a->stale_after = stale_after;
    a->start_ns = start_ns;
    return a;
}

void wake_bpf_acct_free(struct wake_bpf_acct *a)
{
    if (!a)
        return;
    free(a->k);
    free(a->c);
    free(a);
}

static int cmp3(enum wake_kind ka, int32_t ia, uint64_t aa, enum wake_kind kb, int32_t ib,
                uint64_t ab)
{
    if (ka != kb)
        return ka < kb ? -1 : 1;
    if (ia != ib)
        return ia < ib ? -1 : 1;
    return (aa > ab) - (aa < ab);
}

static int cmp_rec(const void *x, const void *y)
{
    const struct wake_bpf_rec *a = x, *b = y;
    return cmp3(a->kind, a->id, a->addr, b->kind, b->id, b->addr);
}

static int cmp_cpu_rec(const void *x, const void *y)
{
    int a = ((const struct wake_bpf_cpu_rec *)x)->cpu,
        b = ((const struct wake_bpf_cpu_rec *)y)->cpu;
    return (a > b) - (a < b);
}

static struct prev_key *find_prev(struct wake_bpf_acct *a, enum wake_kind k, int32_t id,
                                  uint64_t addr)
{
    size_t lo = 0, hi = a->nk;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = cmp3(a->k[mid].kind, a->k[mid].id, a->k[mid].addr, k, id, addr);
        if (c == 0)
            return &a->k[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

static const struct prev_cpu *find_prev_cpu(const struct wake_bpf_acct *a, int cpu)
{
    for (size_t i = 0; i < a->nc; i++)
        if (a->c[i].cpu == cpu)
            return &a->c[i];
    return NULL;
}

/* cur - prev, or cur when the counter went back (the key was deleted and
 * came again, or the CPU's slot was reset). */
static uint64_t delta(uint64_t cur, uint64_t prev)
{
    return cur >= prev ? cur - prev : cur;
}

static void add_entry(struct wake_window *w, size_t *cap, const struct wake_entry *e)
{
    w->e = grow_array(w->e, sizeof(*w->e), w->n, cap);
    w->e[w->n++] = *e;
    w->total_events += e->events;
}

static void set_name(struct wake_entry *e, const struct wake_bpf_rec *r)
{
    switch (e->kind) {
    case WAKE_TIMER:
    case WAKE_HRTIMER:
    case WAKE_WORK: /* wake_resolve_names() turns them into symbols */
        snprintf(e->name, sizeof(e->name), "0x%016llx", (unsigned long long)e->addr);
        break;
    case WAKE_IRQ:
        if (r->name[0])
            snprintf(e->name, sizeof(e->name), "%.*s", (int)sizeof(r->name), r->name);
        else
            snprintf(e->name, sizeof(e->name), "irq%d", e->id);
        break;
    default:
        snprintf(e->name, sizeof(e->name), "%.*s", (int)sizeof(r->name), r->name);
    }
}

static void take_cpus(struct wake_bpf_acct *a, const struct wake_bpf_cpu_rec *cpu, size_t ncpu,
                      struct wake_window *w, struct wake_entry *other, struct wake_entry *full)
{
    struct wake_bpf_cpu_rec *s = xcalloc(ncpu ? ncpu : 1, sizeof(*s));
    if (ncpu)
        memcpy(s, cpu, ncpu * sizeof(*s));
    qsort(s, ncpu, sizeof(*s), cmp_cpu_rec);
    w->cpu = xcalloc(ncpu ? ncpu : 1, sizeof(*w->cpu));
    w->cpu_idle_wakeups = xcalloc(ncpu ? ncpu : 1, sizeof(*w->cpu_idle_wakeups));
    struct prev_cpu *next = xcalloc(ncpu ? ncpu : 1, sizeof(*next));
    for (size_t i = 0; i < ncpu; i++) {
        const struct prev_cpu *p = find_prev_cpu(a, s[i].cpu);
        struct prev_cpu z = {0}, *q = p ? (struct prev_cpu *)p : &z;
        uint64_t idle = delta(s[i].idle_wakeups, q->idle_wakeups);
        w->cpu[w->ncpus] = s[i].cpu;
        w->cpu_idle_wakeups[w->ncpus++] = idle;
        w->total_idle_wakeups += idle;
        other->idle_wakeups += delta(s[i].other_idle, q->other_idle);
        full->events += delta(s[i].full_events, q->full_events);
        full->idle_wakeups += delta(s[i].full_idle, q->full_idle);
        next[i] = (struct prev_cpu){s[i].cpu, s[i].idle_wakeups, s[i].other_idle, s[i].full_events,
                                    s[i].full_idle};
    }
    free(a->c);
    a->c = next;
    a->nc = ncpu;
    free(s);
}

void wake_bpf_acct_take(struct wake_bpf_acct *a, struct wake_bpf_rec *rec, size_t n,
                        const struct wake_bpf_cpu_rec *cpu, size_t ncpu, uint64_t now_ns,
                        struct wake_window *ret, struct wake_bpf_rec **ret_stale,
                        size_t *ret_nstale)
{
    struct wake_window w = {
        .start_ns = a->start_ns,
        .end_ns = now_ns,
        .seconds = now_ns > a->start_ns ? (double)(now_ns - a->start_ns) / 1e9 : 0,
        .traced = true,
        .bpf = true,
    };
    size_t cap = 0, nstale = 0, scap = 0;
    struct wake_bpf_rec *stale = NULL;
    struct prev_key *next = xcalloc(n ? n : 1, sizeof(*next));
    size_t nnext = 0;
    if (n)
        qsort(rec, n, sizeof(*rec), cmp_rec);
    for (size_t i = 0; i < n; i++) {
        const struct wake_bpf_rec *r = &rec[i];
        if (i && cmp_rec(&rec[i - 1], r) == 0)
            continue; /* a map never has a key twice; fake contents might */
        struct prev_key *p = find_prev(a, r->kind, r->id, r->addr);
        struct prev_key z = {0};
        if (!p || p->gone)
            p = &z;
        struct wake_entry e = {
            .kind = r->kind,
            .id = r->id,
            .addr = r->addr,
            .events = delta(r->events, p->events),
            .idle_wakeups = delta(r->idle_wakeups, p->idle_wakeups),
            .tgid = r->kind == WAKE_TASK ? r->tgid : 0,
            .cgroup_id = r->kind == WAKE_TASK ? r->cgid : 0,
        };
        unsigned still = e.events || e.idle_wakeups ? 0 : p->still + 1;
        next[nnext++] = (struct prev_key){.kind = r->kind,
                                          .id = r->id,
                                          .addr = r->addr,
                                          .events = r->events,
                                          .idle_wakeups = r->idle_wakeups,
                                          .still = still};
        if (a->stale_after && still >= a->stale_after) {
            stale = grow_array(stale, sizeof(*stale), nstale, &scap);
            stale[nstale++] = *r;
        }
        if (!e.events && !e.idle_wakeups)
            continue;
        set_name(&e, r);
        add_entry(&w, &cap, &e);
    }
    free(a->k);
    a->k = next;
    a->nk = nnext;

    struct wake_entry other = {.kind = WAKE_OTHER, .id = -1, .name = "(no cause event)"};
    struct wake_entry full = {.kind = WAKE_OTHER, .id = -1, .name = "(table full)"};
    take_cpus(a, cpu, ncpu, &w, &other, &full);
    if (other.idle_wakeups)
        add_entry(&w, &cap, &other);
    if (full.events || full.idle_wakeups)
        add_entry(&w, &cap, &full);
    w.dropped = full.events;
    if (!w.e)
        w.e = xmalloc(sizeof(*w.e)); /* "owned": never NULL, as from a take */
    a->start_ns = now_ns;
    *ret = w;
    if (ret_stale)
        *ret_stale = stale;
    else
        free(stale);
    if (ret_nstale)
        *ret_nstale = ret_stale ? nstale : 0;
}

void wake_bpf_acct_forget(struct wake_bpf_acct *a, const struct wake_bpf_rec *key)
{
    struct prev_key *p = find_prev(a, key->kind, key->id, key->addr);
    if (p)
        p->gone = true;
}
