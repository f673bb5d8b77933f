#include "pack.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"

/* One online CPU with a known package, and the keys it is sorted by. */
struct slot {
    int cpu, package, die, core;
    unsigned pkg_rank; /* packages holding an excluded CPU first */
    bool tainted;      /* its core has an excluded sibling */
    bool excluded;
};

static bool is_excluded(const struct pack_input *in, unsigned cpu)
{
    return in->excluded && cpuset_has(in->excluded, cpu);
}

static bool same_core(const struct slot *a, const struct slot *b)
{
    return a->package == b->package && a->die == b->die && a->core == b->core;
}

static int cmp_int(int a, int b)
{
    return (a > b) - (a < b);
}

static int cmp_int_p(const void *a, const void *b)
{
    return cmp_int(*(const int *)a, *(const int *)b);
}

/* Growth order: package rank, clean cores before tainted ones, die, core,
 * then CPU id (a core's siblings end up next to each other). */
static int cmp_growth(const void *pa, const void *pb)
{
    const struct slot *a = pa, *b = pb;
    int r = cmp_int((int)a->pkg_rank, (int)b->pkg_rank);
    if (!r)
        r = cmp_int(a->tainted, b->tainted);
    if (!r)
        r = cmp_int(a->die, b->die);
    if (!r)
        r = cmp_int(a->core, b->core);
    return r ? r : cmp_int(a->cpu, b->cpu);
}

/* Physical order: package, die, core, CPU id; a core's CPUs, and a
 * package's, are then next to each other. */
static int cmp_physical(const void *pa, const void *pb)
{
    const struct slot *a = pa, *b = pb;
    int r = cmp_int(a->package, b->package);
    if (!r)
        r = cmp_int(a->die, b->die);
    if (!r)
        r = cmp_int(a->core, b->core);
    return r ? r : cmp_int(a->cpu, b->cpu);
}

/* Ranks packages and marks tainted cores over the physical order: each
 * core and package is one run of slots, so this is linear after a sort. */
static void mark_runs(const struct topology *t, struct slot *s, unsigned n)
{
    qsort(s, n, sizeof(*s), cmp_physical);
    for (unsigned i = 0, pkg_end; i < n; i = pkg_end) {
        bool pkg_excl = false;
        for (pkg_end = i; pkg_end < n && s[pkg_end].package == s[i].package; pkg_end++)
            pkg_excl |= s[pkg_end].excluded;
        int idx = topology_package_index(t, s[i].package);
        unsigned rank = idx < 0 ? t->npackages : (unsigned)idx;
        for (unsigned j = i, core_end; j < pkg_end; j = core_end) {
            bool tainted = false;
            for (core_end = j; core_end < pkg_end && same_core(&s[core_end], &s[j]); core_end++)
                tainted |= s[core_end].excluded;
            for (unsigned k = j; k < core_end; k++) {
                s[k].tainted = tainted;
                s[k].pkg_rank = pkg_excl ? rank : t->npackages + 1 + rank;
            }
        }
    }
}

/* Every online CPU with a known package, keys filled in. */
static struct slot *collect(const struct pack_input *in, unsigned *ret_n)
{
    const struct topology *t = in->topo;
    struct slot *s = xcalloc(t->ncpu ? t->ncpu : 1, sizeof(*s));
    unsigned n = 0;
    for (unsigned i = 0; i < t->ncpu; i++) {
        const struct topo_cpu *c = &t->cpu[i];
        if (!c->online || c->package < 0)
            continue;
        s[n++] = (struct slot){.cpu = (int)i,
                               .package = c->package,
                               .die = c->die,
                               .core = c->core,
                               .excluded = is_excluded(in, i)};
    }
    mark_runs(t, s, n);
    *ret_n = n;
    return s;
}

/* The growth order of the packable slots and its core boundaries. */
static void growth_order(struct slot *s, unsigned n, struct pack_plan *p)
{
    qsort(s, n, sizeof(*s), cmp_growth);
    p->order = xcalloc(n ? n : 1, sizeof(int));
    p->core_end = xcalloc(n ? n : 1, sizeof(unsigned));
    const struct slot *prev = NULL;
    for (unsigned i = 0; i < n; i++) {
        if (s[i].excluded)
            continue;
        if (prev && !same_core(prev, &s[i]))
            p->core_end[p->ncore_steps++] = p->norder;
        p->order[p->norder++] = s[i].cpu;
        prev = &s[i];
    }
    if (p->norder)
        p->core_end[p->ncore_steps++] = p->norder;
}

/* Cores and packages with no packed and no excluded CPU, over the slots in
 * growth order (a core's and a package's slots are still runs there). */
static void idle_units(const struct topology *t, const struct slot *s, unsigned n,
                       struct pack_plan *p)
{
    p->idle_packages = xcalloc(t->npackages ? t->npackages : 1, sizeof(int));
    for (unsigned i = 0, pkg_end; i < n; i = pkg_end) {
        bool pkg_busy = false;
        for (pkg_end = i; pkg_end < n && s[pkg_end].package == s[i].package; pkg_end++)
            ;
        for (unsigned j = i, core_end; j < pkg_end; j = core_end) {
            bool busy = false;
            for (core_end = j; core_end < pkg_end && same_core(&s[core_end], &s[j]); core_end++)
                busy |= s[core_end].excluded || cpuset_has(&p->cpus, (unsigned)s[core_end].cpu);
            pkg_busy |= busy;
            if (busy)
                continue;
            for (unsigned k = j; k < core_end; k++)
                cpuset_add(&p->idle_cores, (unsigned)s[k].cpu);
            p->nidle_cores++;
        }
        if (!pkg_busy && p->nidle_packages < t->npackages)
            p->idle_packages[p->nidle_packages++] = s[i].package;
    }
    /* growth order ranks packages; the list is by rising id */
    qsort(p->idle_packages, p->nidle_packages, sizeof(int), cmp_int_p);
}

static unsigned umax(unsigned a, unsigned b)
{
    return a > b ? a : b;
}

static bool bad_number(double v)
{
    return !isfinite(v) || v < 0;
}

/* The plan for TARGET CPUs, and at least AT_LEAST of them. */
static int build(const struct pack_input *in, double target, unsigned at_least,
                 struct pack_plan *ret)
{
    if (!in || !in->topo || bad_number(in->demand_cpus) || bad_number(in->headroom) ||
        bad_number(target))
        return -EINVAL;
    struct pack_plan p = {.target = in->demand_cpus * (1.0 + in->headroom)};
    unsigned n;
    struct slot *s = collect(in, &n);
    growth_order(s, n, &p);
    if (p.norder == 0) {
        free(s);
        pack_plan_free(&p);
        return -ENOSPC;
    }
    /* 1e-9: 0.1 × 3 × 1.0 must not round up to a fourth CPU */
    double want = ceil(target - 1e-9);
    unsigned need = want > (double)p.norder ? p.norder + 1 : (unsigned)(want < 0 ? 0 : want);
    need = umax(need, umax(in->min_cpus, umax(at_least, 1u)));
    p.saturated = need > p.norder;
    for (unsigned k = 0; k < p.ncore_steps; k++) {
        p.ncpus = p.core_end[k];
        if (p.ncpus >= need)
            break;
    }
    for (unsigned i = 0; i < p.ncpus; i++)
        cpuset_add(&p.cpus, (unsigned)p.order[i]);
    idle_units(in->topo, s, n, &p);
    free(s);
    *ret = p;
    return 0;
}

int pack_plan_build(const struct pack_input *in, struct pack_plan *ret)
{
    if (!in)
        return -EINVAL;
    return build(in, in->demand_cpus * (1.0 + in->headroom), 0, ret);
}

void pack_plan_free(struct pack_plan *p)
{
    if (!p)
        return;
    cpuset_free(&p->cpus);
    cpuset_free(&p->idle_cores);
    free(p->order);
    free(p->core_end);
    free(p->idle_packages);
    *p = (struct pack_plan){0};
}

/* Whether CURRENT is a plan of this order: a prefix ending on a core. */
static bool is_prefix(const struct pack_plan *p, const struct cpuset *current)
{
    unsigned c = cpuset_count(current);
    bool boundary = false;
    for (unsigned k = 0; k < p->ncore_steps; k++)
        boundary |= p->core_end[k] == c;
    if (!boundary)
        return false;
    for (unsigned i = 0; i < c; i++)
        if (!cpuset_has(current, (unsigned)p->order[i]))
            return false;
    return true;
}

int pack_decide(const struct pack_input *in, const struct cpuset *current, double shrink_slack,
                enum pack_action *ret_action, struct pack_plan *ret_next)
{
    if (bad_number(shrink_slack))
        return -EINVAL;
    struct pack_plan want;
    int r = pack_plan_build(in, &want);
    if (r < 0)
        return r;
    unsigned c = current ? cpuset_count(current) : 0;
    enum pack_action a = PACK_KEEP;
    if (c == 0)
        a = PACK_GROW;
    else if (!is_prefix(&want, current))
        a = PACK_REPLAN;
    else if (want.ncpus > c)
        a = PACK_GROW;
    if (a == PACK_GROW) {
        *ret_action = a;
        *ret_next = want;
        return 0;
    }
    if (a == PACK_REPLAN) {
        /* no shrink hidden in a replan: at least as many CPUs as the
         * current set still has usable */
        unsigned usable = 0;
        for (unsigned i = 0; i < want.norder; i++)
            usable += cpuset_has(current, (unsigned)want.order[i]);
        pack_plan_free(&want);
        if ((r = build(in, in->demand_cpus * (1.0 + in->headroom), usable, &want)) < 0)
            return r;
        *ret_action = a;
        *ret_next = want;
        return 0;
    }
    pack_plan_free(&want);
    /* fits: shrink only if the target with slack fits in fewer cores */
    struct pack_plan slack;
    r = build(in, in->demand_cpus * (1.0 + in->headroom) * (1.0 + shrink_slack), 0, &slack);
    if (r < 0)
        return r;
    if (slack.ncpus < c) {
        *ret_action = PACK_SHRINK;
        *ret_next = slack;
        return 0;
    }
    pack_plan_free(&slack);
    struct pack_plan keep;
    if ((r = build(in, in->demand_cpus * (1.0 + in->headroom), c, &keep)) < 0)
        return r;
    *ret_action = PACK_KEEP;
    *ret_next = keep;
    return 0;
}

const char *pack_action_name(enum pack_action a)
{
    switch (a) {
    case PACK_KEEP:
        return "keep";
    case PACK_GROW:
        return "grow";
    case PACK_SHRINK:
        return "shrink";
    case PACK_REPLAN:
        return "replan";
    }
    return "?";
}
