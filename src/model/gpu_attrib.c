/* gpu_attrib: each GPU's power split over its processes (gpu_attrib.h).
 *
 * As in attrib.c, the lines are computed as shares of the GPU's watts,
 * then one line, the largest, takes the GPU's watts minus the others, so
 * that they add up to the GPU's figure exactly. */
#include "model/gpu_attrib.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"

#define GPU_ATTRIB_UNKNOWN_CGROUP "(unknown)"

/* ---- engine time ---- */

static bool same_client(const struct gpu_fdinfo_client *a, const struct gpu_fdinfo_client *b)
{
    return a->client_id != GPU_FDINFO_NONE && a->client_id == b->client_id &&
           streq(a->driver, b->driver) && streq(a->pdev, b->pdev);
}

static const struct gpu_attrib_proc *find_proc(const struct gpu_attrib_proc *v, size_t n,
                                               int32_t pid)
{
    for (size_t i = 0; i < n; i++)
        if (v[i].pid == pid)
            return &v[i];
    return NULL;
}

static const struct gpu_fdinfo_client *find_client(const struct gpu_attrib_proc *p,
                                                   const struct gpu_fdinfo_client *c)
{
    for (size_t i = 0; p && i < p->nclients; i++)
        if (same_client(&p->clients[i], c))
            return &p->clients[i];
    return NULL;
}

static const struct gpu_fdinfo_engine *find_engine(const struct gpu_fdinfo_client *c,
                                                   const char *name)
{
    for (size_t i = 0; i < c->nengines; i++)
        if (streq(c->engines[i].name, name))
            return &c->engines[i];
    return NULL;
}

static bool have(uint64_t v)
{
    return v != GPU_FDINFO_NONE;
}

/* One engine class's seconds between two reads: busy ns where printed,
 * else busy cycles over all cycles times the window; each over the
 * class's engine count. 0 for a counter that went backwards (counted). */
static double engine_s(const struct gpu_fdinfo_engine *a, const struct gpu_fdinfo_engine *b,
                       double seconds, unsigned *backwards)
{
    double cap = b->capacity ? (double)b->capacity : 1;
    if (have(a->busy_ns) && have(b->busy_ns)) {
        if (b->busy_ns < a->busy_ns) {
            (*backwards)++;
            return 0;
        }
        return (double)(b->busy_ns - a->busy_ns) * 1e-9 / cap;
    }
    if (have(a->cycles) && have(b->cycles) && have(a->total_cycles) && have(b->total_cycles)) {
        if (b->cycles < a->cycles || b->total_cycles < a->total_cycles) {
            (*backwards)++;
            return 0;
        }
        uint64_t all = b->total_cycles - a->total_cycles;
        if (!all)
            return 0;
        double frac = (double)(b->cycles - a->cycles) / (double)all;
        /* the class's cycles count all its engines (xe_drm_client.c) */
        return fmin(frac / cap, 1.0) * seconds;
    }
    return 0;
}

static struct gpu_attrib_use *use_for(struct gpu_attrib_use **v, size_t *n, size_t first,
                                      const struct gpu_attrib_proc *p, const char *pdev)
{
    for (size_t i = first; i < *n; i++)
        if (streq((*v)[i].pdev, pdev))
            return &(*v)[i];
    *v = xrealloc(*v, (*n + 1) * sizeof(**v));
    struct gpu_attrib_use *u = &(*v)[(*n)++];
    *u = (struct gpu_attrib_use){.pid = p->pid, .cgroup = p->cgroup};
    snprintf(u->pdev, sizeof(u->pdev), "%s", pdev);
    return u;
}

int gpu_attrib_busy(const struct gpu_attrib_proc *prev, size_t nprev,
                    const struct gpu_attrib_proc *cur, size_t ncur, double seconds,
                    struct gpu_attrib_use **ret, size_t *ret_n,
                    struct gpu_attrib_busy_stats *ret_stats)
{
    if (!isfinite(seconds) || seconds <= 0 || (nprev && !prev) || (ncur && !cur))
        return -EINVAL;
    struct gpu_attrib_busy_stats st = {0};
    struct gpu_attrib_use *v = NULL;
    size_t n = 0;
    for (size_t i = 0; i < ncur; i++) {
        const struct gpu_attrib_proc *p = &cur[i], *q = find_proc(prev, nprev, p->pid);
        size_t first = n;
        for (size_t k = 0; k < p->nclients; k++) {
            const struct gpu_fdinfo_client *b = &p->clients[k], *a = find_client(q, b);
            if (!b->pdev[0]) {
                st.no_pdev++;
                continue;
            }
            if (!a) {
                st.fresh++;
                continue;
            }
            double s = 0;
            for (size_t e = 0; e < b->nengines; e++) {
                const struct gpu_fdinfo_engine *ea = find_engine(a, b->engines[e].name);
                if (ea)
                    s += engine_s(ea, &b->engines[e], seconds, &st.backwards);
            }
            use_for(&v, &n, first, p, b->pdev)->busy_s += s;
        }
    }
    *ret = v;
    *ret_n = n;
    if (ret_stats)
        *ret_stats = st;
    return 0;
}

void gpu_attrib_nvml_uses(const char *pdev, double util, const int32_t *pids, const double *sm_pct,
                          size_t n, double seconds, struct gpu_attrib_use **uses, size_t *nuses,
                          bool *ret_equal)
{
    bool any = false;
    for (size_t i = 0; i < n; i++)
        any |= sm_pct && isfinite(sm_pct[i]) && sm_pct[i] >= 0;
    *ret_equal = !any && n > 0;
    if (!n || (!any && !(isfinite(util) && util >= 0)))
        return;
    for (size_t i = 0; i < n; i++) {
        double busy = any ? (isfinite(sm_pct[i]) && sm_pct[i] >= 0 ? sm_pct[i] / 100.0 : 0)
                          : fmin(util, 1.0) / (double)n;
        *uses = xrealloc(*uses, (*nuses + 1) * sizeof(**uses));
        struct gpu_attrib_use *u = &(*uses)[(*nuses)++];
        *u = (struct gpu_attrib_use){.pid = pids[i], .busy_s = busy * seconds};
        snprintf(u->pdev, sizeof(u->pdev), "%s", pdev);
    }
}

/* ---- the split ---- */

/* The value V >= 0 for which S + V rounds to exactly W, near W - S (see
 * attrib.c's fit(): one correction by the observed error, then ulps). */
static bool fit(double s, double w, double *v)
{
    double x = w - s;
    for (int i = 0; i < 8 && x >= 0; i++) {
        double got = s + x;
        if (got == w) {
            *v = x;
            return true;
        }
        double nx = i == 0 ? x - (got - w) : x;
        x = nx != x ? nx : nextafter(x, got < w ? INFINITY : -INFINITY);
    }
    return false;
}

/* The lines of one GPU in summing order: its uses' w, then unattributed,
 * then idle. */
struct lines {
    double **p;
    size_t n;
};

static double sum_except(const struct lines *l, const double *sink)
{
    double s = 0;
    for (size_t i = 0; i < l->n; i++)
        if (l->p[i] != sink)
            s += *l->p[i];
    return s;
}

/* Make the lines sum to W exactly: one line, the sink, becomes W minus
 * the others. The largest line is tried first, then the largest below
 * W / 2 (whose ulp is at most half of W's, so no tie can defeat fit()).
 * Returns the sum as computed: the others in order, the sink last. */
static double exact_sum(struct lines *l, double w)
{
    double *cand[2] = {l->p[0], NULL};
    for (size_t i = 0; i < l->n; i++) {
        double *p = l->p[i];
        if (*p > *cand[0])
            cand[0] = p;
        if (*p > 0 && *p < w / 2 && (!cand[1] || *p > *cand[1]))
            cand[1] = p;
    }
    for (size_t k = 0; k < ARRAY_SIZE(cand); k++) {
        double v;
        if (!cand[k] || !fit(sum_except(l, cand[k]), w, &v))
            continue;
        *cand[k] = v;
        return sum_except(l, cand[k]) + v;
    }
    double s = sum_except(l, cand[0]);
    *cand[0] = fmax(w - s, 0);
    return s + *cand[0];
}

static int cg_cmp(const void *a, const void *b)
{
    return strcmp(((const struct gpu_attrib_cgroup *)a)->path,
                  ((const struct gpu_attrib_cgroup *)b)->path);
}

static void by_cgroup(const struct gpu_attrib_input *in, struct gpu_attrib_result *r)
{
    for (size_t i = 0; i < in->nuses; i++) {
        const char *path = in->uses[i].cgroup ? in->uses[i].cgroup : GPU_ATTRIB_UNKNOWN_CGROUP;
        struct gpu_attrib_cgroup key = {.path = (char *)path}, *g = NULL;
        if (r->ncgroups)
            g = bsearch(&key, r->cg, r->ncgroups, sizeof(*r->cg), cg_cmp);
        if (!g) {
            r->cg = xrealloc(r->cg, (r->ncgroups + 1) * sizeof(*r->cg));
            r->cg[r->ncgroups++] = (struct gpu_attrib_cgroup){.path = xstrdup(path)};
            qsort(r->cg, r->ncgroups, sizeof(*r->cg), cg_cmp);
            g = bsearch(&key, r->cg, r->ncgroups, sizeof(*r->cg), cg_cmp);
        }
        g->busy_s += in->uses[i].busy_s;
        if (isfinite(r->use_w[i])) {
            g->w += r->use_w[i];
            g->j += r->use_j[i];
        }
    }
}

static size_t gpu_index(const struct gpu_attrib_input *in, const char *pdev)
{
    for (size_t g = 0; g < in->ngpus; g++)
        if (in->gpus[g].pdev && streq(in->gpus[g].pdev, pdev))
            return g;
    return SIZE_MAX;
}

/* One GPU's lines: shares of its watts by busy time, the remainder split
 * into unattributed (the GPU's own utilisation above its processes') and
 * idle, then made to sum exactly. */
static void split_gpu(const struct gpu_attrib_input *in, size_t g, const size_t *which,
                      struct gpu_attrib_result *r)
{
    struct gpu_attrib_gpu_result *o = &r->gpu[g];
    double w = in->gpus[g].watts, util = in->gpus[g].util;
    struct lines l = {.p = xcalloc(o->nprocs + 2, sizeof(double *))};
    for (size_t i = 0; i < in->nuses; i++)
        if (which[i] == g)
            l.p[l.n++] = &r->use_w[i];
    l.p[l.n++] = &o->unattributed_w;
    l.p[l.n++] = &o->idle_w;
    o->normalised = o->busy > 1;
    double scale = o->normalised ? 1 / o->busy : 1;
    double filled = fmin(o->busy, 1);
    double unatt = isfinite(util) && util > filled ? fmin(util, 1) - filled : 0;
    for (size_t i = 0; i < in->nuses; i++)
        if (which[i] == g)
            r->use_w[i] = w * r->use_gpu_share[i] * scale;
    o->unattributed_w = w * unatt;
    o->idle_w = w * fmax(1 - filled - unatt, 0);
    o->sum_w = w > 0 ? exact_sum(&l, w) : sum_except(&l, NULL);
    o->procs_w = 0;
    for (size_t i = 0; i + 2 < l.n; i++)
        o->procs_w += *l.p[i];
    free(l.p);
}

int gpu_attrib_compute(const struct gpu_attrib_input *in, struct gpu_attrib_result *ret)
{
    if (!isfinite(in->seconds) || in->seconds <= 0 || (in->nuses && !in->uses) ||
        (in->ngpus && !in->gpus))
        return -EINVAL;
    for (size_t i = 0; i < in->nuses; i++)
        if (!isfinite(in->uses[i].busy_s) || in->uses[i].busy_s < 0)
            return -EINVAL;
    struct gpu_attrib_result r = {.ngpus = in->ngpus, .nuses = in->nuses};
    r.gpu = xcalloc(in->ngpus ? in->ngpus : 1, sizeof(*r.gpu));
    size_t nu = in->nuses ? in->nuses : 1;
    r.use_gpu_share = xcalloc(nu, sizeof(double));
    r.use_w = xcalloc(nu, sizeof(double));
    r.use_j = xcalloc(nu, sizeof(double));
    size_t *which = xcalloc(nu, sizeof(*which));
    for (size_t i = 0; i < in->nuses; i++) {
        which[i] = gpu_index(in, in->uses[i].pdev);
        r.use_gpu_share[i] = in->uses[i].busy_s / in->seconds;
        r.use_w[i] = NAN;
        if (which[i] != SIZE_MAX) {
            r.gpu[which[i]].busy += r.use_gpu_share[i];
            r.gpu[which[i]].nprocs++;
        }
    }
    for (size_t g = 0; g < in->ngpus; g++) {
        struct gpu_attrib_gpu_result *o = &r.gpu[g];
        o->watts = in->gpus[g].watts;
        if (!isfinite(o->watts) || o->watts < 0) {
            o->watts = o->procs_w = o->unattributed_w = o->idle_w = o->sum_w = NAN;
            o->normalised = o->busy > 1;
            continue;
        }
        split_gpu(in, g, which, &r);
    }
    for (size_t i = 0; i < in->nuses; i++)
        r.use_j[i] = r.use_w[i] * in->seconds;
    free(which);
    by_cgroup(in, &r);
    *ret = r;
    return 0;
}

void gpu_attrib_result_clear(struct gpu_attrib_result *r)
{
    if (!r)
        return;
    free(r->gpu);
    free(r->use_gpu_share);
    free(r->use_w);
    free(r->use_j);
    for (size_t i = 0; i < r->ncgroups; i++)
        free(r->cg[i].path);
    free(r->cg);
    *r = (struct gpu_attrib_result){0};
}
