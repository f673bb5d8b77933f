/* watt top's GPU columns (top_gpu.h). */
#include "view/top_gpu.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/strbuf.h"
#include "base/util.h"
#include "host/drm_fd.h"
#include "model/gpu_attrib.h"
#include "sense/gpu_fdinfo.h"
#include "sense/sample.h"

/* One process's DRM clients at one read. */
struct gproc {
    int32_t pid;
    char *cgroup; /* owned */
    size_t n;
    struct gpu_fdinfo_client *c; /* owned */
};

struct gread {
    size_t n;
    struct gproc *v; /* ascending pid */
    size_t checked;
    unsigned unreadable; /* fd folders we may not list (other users' processes) */
};

struct top_gpu_state {
    struct gread prev;
    bool have_prev;
};

static void gread_clear(struct gread *r)
{
    for (size_t i = 0; i < r->n; i++) {
        free(r->v[i].cgroup);
        free(r->v[i].c);
    }
    free(r->v);
    *r = (struct gread){0};
}

struct top_gpu_state *top_gpu_state_new(void)
{
    return xcalloc(1, sizeof(struct top_gpu_state));
}

void top_gpu_state_free(struct top_gpu_state *s)
{
    if (!s)
        return;
    gread_clear(&s->prev);
    free(s);
}

static double mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static bool same_client(const struct gpu_fdinfo_client *a, const struct gpu_fdinfo_client *b)
{
    return a->client_id != GPU_FDINFO_NONE && a->client_id == b->client_id &&
           streq(a->driver, b->driver) && streq(a->pdev, b->pdev);
}

/* The DRM clients behind PID's DRM fds, one per client (dup'ed fds and
 * forked ones are one, as gpu_fdinfo_read_pid() does). */
static int read_clients(struct host *h, int32_t pid, struct gpu_fdinfo_client **ret, size_t *ret_n)
{
    _cleanup_free_ int *fds = NULL;
    size_t nfds = 0;
    int r = host_drm_fds(h, pid, &fds, &nfds);
    if (r < 0)
        return r;
    struct gpu_fdinfo_client *out = NULL;
    size_t n = 0;
    for (size_t i = 0; i < nfds; i++) {
        char path[64];
        _cleanup_free_ char *text = NULL;
        size_t len;
        snprintf(path, sizeof(path), "%d/fdinfo/%d", (int)pid, fds[i]);
        if (host_read(h, HOST_PROC, path, &text, &len) < 0)
            continue; /* closed since the listing */
        struct gpu_fdinfo_client c;
        if (gpu_fdinfo_parse(text, len, &c) < 0)
            continue;
        bool dup = false;
        for (size_t j = 0; j < n && !dup; j++)
            dup = same_client(&out[j], &c);
        if (dup)
            continue;
        out = xrealloc(out, (n + 1) * sizeof(*out));
        out[n++] = c;
    }
    *ret = out;
    *ret_n = n;
    return 0;
}

static char *read_cgroup(struct host *h, int32_t pid)
{
    char path[32];
    snprintf(path, sizeof(path), "%d/cgroup", (int)pid);
    _cleanup_free_ char *text = NULL;
    size_t len;
    if (host_read(h, HOST_PROC, path, &text, &len) < 0)
        return NULL;
    return tasks_parse_cgroup(text, len);
}

static void take_pid(struct gread *r, struct host *h, int32_t pid, const char *cgroup, bool scan)
{
    struct gpu_fdinfo_client *c = NULL;
    size_t n = 0;
    r->checked++;
    int e = read_clients(h, pid, &c, &n);
    if (e == -EACCES || e == -EPERM)
        r->unreadable++;
    if (e < 0 || !n) {
        free(c);
        return;
    }
    r->v = xrealloc(r->v, (r->n + 1) * sizeof(*r->v));
    r->v[r->n++] = (struct gproc){.pid = pid,
                                  .cgroup = scan     ? read_cgroup(h, pid)
                                            : cgroup ? xstrdup(cgroup)
                                                     : NULL,
                                  .n = n,
                                  .c = c};
}

static int cmp_i32(const void *x, const void *y)
{
    int32_t a = *(const int32_t *)x, b = *(const int32_t *)y;
    return (a > b) - (a < b);
}

static const struct gproc *find_gproc(const struct gread *r, int32_t pid);

/* Whether to check PID: all without ACTIVE; else active in the window, or
 * a DRM holder at the previous read. */
static bool wanted(const struct top_gpu_active *active, const struct gread *prev, int32_t pid)
{
    if (!active)
        return true;
    if (active->n && bsearch(&pid, active->pids, active->n, sizeof(pid), cmp_i32))
        return true;
    return prev && find_gproc(prev, pid);
}

static void read_all(struct host *h, const struct tasks_snapshot *tasks,
                     const struct top_gpu_active *active, const struct gread *prev,
                     struct gread *ret)
{
    *ret = (struct gread){0};
    if (tasks) {
        for (size_t i = 0; i < tasks->n; i++)
            if (!tasks->t[i].kthread && wanted(active, prev, tasks->t[i].pid))
                take_pid(ret, h, tasks->t[i].pid, tasks->t[i].cgroup, false);
        return;
    }
    _cleanup_free_ int32_t *pids = NULL;
    size_t n = 0;
    if (host_pids(h, &pids, &n) < 0)
        return;
    for (size_t i = 0; i < n; i++)
        take_pid(ret, h, pids[i], NULL, true);
}

void top_gpu_baseline(struct top_gpu_state *s, struct host *h, const struct tasks_snapshot *tasks)
{
    gread_clear(&s->prev);
    read_all(h, tasks, NULL, NULL, &s->prev);
    s->have_prev = true;
}

static const struct gpu_dev *find_dev(const struct gpu_sample *s, const char *pdev)
{
    for (size_t i = 0; s && i < s->n; i++)
        if (streq(s->v[i].pdev, pdev))
            return &s->v[i];
    return NULL;
}

static const struct gproc *find_gproc(const struct gread *r, int32_t pid)
{
    for (size_t i = 0; i < r->n; i++)
        if (r->v[i].pid == pid)
            return &r->v[i];
    return NULL;
}

/* The uses: DRM fdinfo deltas for the GPUs NVML does not list, NVML's
 * processes for its own. */
static void gather_uses(const struct gread *prev, const struct gread *cur,
                        const struct gpu_sample *b, const struct tasks_snapshot *tasks,
                        struct host *h, double secs, struct gpu_attrib_use **ret, size_t *ret_n,
                        struct gpu_attrib_busy_stats *st, bool *equal, char ***owned,
                        size_t *nowned)
{
    struct gpu_attrib_proc *pa = xcalloc(prev->n + 1, sizeof(*pa));
    struct gpu_attrib_proc *pb = xcalloc(cur->n + 1, sizeof(*pb));
    for (size_t i = 0; i < prev->n; i++)
        pa[i] = (struct gpu_attrib_proc){.pid = prev->v[i].pid,
                                         .cgroup = prev->v[i].cgroup,
                                         .nclients = prev->v[i].n,
                                         .clients = prev->v[i].c};
    for (size_t i = 0; i < cur->n; i++)
        pb[i] = (struct gpu_attrib_proc){.pid = cur->v[i].pid,
                                         .cgroup = cur->v[i].cgroup,
                                         .nclients = cur->v[i].n,
                                         .clients = cur->v[i].c};
    struct gpu_attrib_use *u = NULL;
    size_t n = 0;
    if (gpu_attrib_busy(pa, prev->n, pb, cur->n, secs, &u, &n, st) < 0)
        n = 0;
    /* a GPU NVML lists is NVML's to attribute */
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        const struct gpu_dev *d = find_dev(b, u[i].pdev);
        if (!d || !streq(d->via, "nvml"))
            u[k++] = u[i];
    }
    n = k;
    for (size_t g = 0; g < b->n; g++) {
        const struct gpu_dev *d = &b->v[g];
        if (!streq(d->via, "nvml") || !d->nprocs)
            continue;
        int32_t *pids = xcalloc(d->nprocs, sizeof(*pids));
        double *sm = xcalloc(d->nprocs, sizeof(*sm));
        for (size_t i = 0; i < d->nprocs; i++) {
            pids[i] = (int32_t)d->procs[i].pid;
            sm[i] = d->procs[i].sm_util_pct;
        }
        size_t first = n;
        bool eq = false;
        gpu_attrib_nvml_uses(d->pdev, d->busy_pct / 100.0, pids, sm, d->nprocs, secs, &u, &n, &eq);
        equal[g] = eq;
        for (size_t i = first; i < n; i++) {
            const struct task_info *t = tasks ? tasks_find(tasks, u[i].pid) : NULL;
            const struct gproc *p = find_gproc(cur, u[i].pid);
            char *cg = t && t->cgroup   ? xstrdup(t->cgroup)
                       : p && p->cgroup ? xstrdup(p->cgroup)
                                        : read_cgroup(h, u[i].pid);
            if (cg) {
                *owned = xrealloc(*owned, (*nowned + 1) * sizeof(**owned));
                (*owned)[(*nowned)++] = cg;
            }
            u[i].cgroup = cg;
        }
        free(pids);
        free(sm);
    }
    free(pa);
    free(pb);
    *ret = u;
    *ret_n = n;
}

static int cmp_proc(const void *x, const void *y)
{
    int32_t a = ((const struct top_gpu_proc *)x)->pid, b = ((const struct top_gpu_proc *)y)->pid;
    return (a > b) - (a < b);
}

/* Per process over all GPUs: busy % summed, watts summed over the GPUs
 * that state them. */
static void fold_procs(const struct gpu_attrib_use *u, size_t n, const struct gpu_attrib_result *r,
                       struct top_gpu_out *o)
{
    for (size_t i = 0; i < n; i++) {
        struct top_gpu_proc *p = NULL;
        for (size_t k = 0; k < o->nprocs && !p; k++)
            if (o->procs[k].pid == u[i].pid)
                p = &o->procs[k];
        if (!p) {
            o->procs = xrealloc(o->procs, (o->nprocs + 1) * sizeof(*o->procs));
            p = &o->procs[o->nprocs++];
            *p = (struct top_gpu_proc){.pid = u[i].pid,
                                       .cgroup = u[i].cgroup ? xstrdup(u[i].cgroup) : NULL,
                                       .w = NAN,
                                       .j = NAN};
        }
        p->busy_pct += 100.0 * r->use_gpu_share[i];
        if (isfinite(r->use_w[i])) {
            p->w = (isnan(p->w) ? 0 : p->w) + r->use_w[i];
            p->j = (isnan(p->j) ? 0 : p->j) + r->use_j[i];
        }
    }
    if (o->nprocs)
        qsort(o->procs, o->nprocs, sizeof(*o->procs), cmp_proc);
}

static void fold_cgroups(const struct gpu_attrib_result *r, const struct top_gpu_out *o,
                         struct top_gpu_out *out, double secs)
{
    out->cgroups = xcalloc(r->ncgroups ? r->ncgroups : 1, sizeof(*out->cgroups));
    for (size_t i = 0; i < r->ncgroups; i++) {
        size_t members = 0;
        bool watts = false;
        for (size_t k = 0; k < o->nprocs; k++) {
            const char *p = o->procs[k].cgroup ? o->procs[k].cgroup : "(unknown)";
            if (streq(p, r->cg[i].path)) {
                members++;
                watts |= isfinite(o->procs[k].w);
            }
        }
        out->cgroups[out->ncgroups++] = (struct top_cgroup){
            .path = xstrdup(r->cg[i].path),
            .nprocs = members,
            .gpu_busy_pct = 100.0 * r->cg[i].busy_s / secs,
            .gpu_w = watts ? r->cg[i].w : NAN,
            .gpu_j = watts ? r->cg[i].j : NAN,
        };
    }
}

static void gpu_rows(const struct gpu_sample *a, const struct gpu_sample *b, double secs,
                     const struct gpu_attrib_result *r, const bool *equal, struct top_gpu_out *o)
{
    o->ngpus = b->n;
    o->gpus = xcalloc(b->n ? b->n : 1, sizeof(*o->gpus));
    for (size_t g = 0; g < b->n; g++) {
        const struct gpu_dev *d = &b->v[g];
        const struct gpu_attrib_gpu_result *x = &r->gpu[g];
        struct top_gpu *t = &o->gpus[g];
        snprintf(t->id, sizeof(t->id), "%s", d->id);
        snprintf(t->pdev, sizeof(t->pdev), "%s", d->pdev);
        snprintf(t->driver, sizeof(t->driver), "%s", d->driver);
        snprintf(t->via, sizeof(t->via), "%s", d->via);
        t->watts = gpu_watts(a, b, secs, d->pdev);
        t->util_pct = d->busy_pct;
        t->procs_busy_pct = 100.0 * x->busy;
        t->procs_w = x->procs_w;
        t->unattributed_w = x->unattributed_w;
        t->idle_w = x->idle_w;
        t->nprocs = x->nprocs;
        t->normalised = x->normalised;
        t->equal_shares = equal[g];
    }
}

static char *make_note(const struct gpu_attrib_busy_stats *st, const struct gread *cur, bool first,
                       const bool *equal, const struct gpu_sample *b)
{
    struct strbuf sb = {0};
    if (first)
        strbuf_append(&sb, "GPU engine time per process from the next refresh on (no earlier "
                           "read of the DRM clients)");
    else if (st->fresh)
        strbuf_appendf(&sb, "%u DRM client(s) opened in the window: counted from the next",
                       st->fresh);
    if (st->backwards)
        strbuf_appendf(&sb, "%s%u GPU engine counter(s) went backwards: their window not counted",
                       sb.len ? "; " : "", st->backwards);
    if (cur->unreadable)
        strbuf_appendf(&sb,
                       "%s%u processes' fds could not be read (another user's): their GPU time "
                       "is in the GPUs' unattributed line",
                       sb.len ? "; " : "", cur->unreadable);
    for (size_t g = 0; g < b->n; g++)
        if (equal[g])
            strbuf_appendf(&sb,
                           "%s%s: NVML gave no per-process utilisation: its processes share its "
                           "utilisation equally",
                           sb.len ? "; " : "", b->v[g].id);
    if (!sb.len) {
        strbuf_free(&sb);
        return NULL;
    }
    char *s = xstrdup(strbuf_str(&sb));
    strbuf_free(&sb);
    return s;
}

void top_gpu_collect(struct top_gpu_state *s, struct host *h, const struct tasks_snapshot *tasks,
                     const struct top_gpu_active *active, const struct gpu_sample *a,
                     const struct gpu_sample *b, double secs, struct top_gpu_out *ret)
{
    *ret = (struct top_gpu_out){0};
    if (!b || !b->n || !(secs > 0))
        return;
    double t0 = mono_us();
    struct gread cur;
    read_all(h, tasks, s->have_prev ? active : NULL, &s->prev, &cur);
    bool first = !s->have_prev;
    struct gpu_attrib_use *u = NULL;
    size_t n = 0;
    struct gpu_attrib_busy_stats st = {0};
    bool *equal = xcalloc(b->n, sizeof(*equal));
    char **owned = NULL;
    size_t nowned = 0;
    gather_uses(&s->prev, &cur, b, tasks, h, secs, &u, &n, &st, equal, &owned, &nowned);
    struct gpu_attrib_gpu *gg = xcalloc(b->n, sizeof(*gg));
    for (size_t g = 0; g < b->n; g++) {
        const struct gpu_dev *d = &b->v[g];
        gg[g] = (struct gpu_attrib_gpu){
            .pdev = d->pdev, .watts = gpu_watts(a, b, secs, d->pdev), .util = d->busy_pct / 100.0};
    }
    struct gpu_attrib_input in = {
        .seconds = secs, .ngpus = b->n, .gpus = gg, .nuses = n, .uses = u};
    struct gpu_attrib_result r;
    if (gpu_attrib_compute(&in, &r) == 0) {
        gpu_rows(a, b, secs, &r, equal, ret);
        fold_procs(u, n, &r, ret);
        fold_cgroups(&r, ret, ret, secs);
        gpu_attrib_result_clear(&r);
    }
    ret->note = make_note(&st, &cur, first, equal, b);
    ret->checked = cur.checked;
    ret->drm = cur.n;
    for (size_t i = 0; i < nowned; i++)
        free(owned[i]);
    free(owned);
    free(gg);
    free(u);
    free(equal);
    gread_clear(&s->prev);
    s->prev = cur;
    s->have_prev = true;
    ret->scan_us = mono_us() - t0;
}

void top_gpu_out_clear(struct top_gpu_out *o)
{
    if (!o)
        return;
    free(o->gpus);
    for (size_t i = 0; i < o->nprocs; i++)
        free(o->procs[i].cgroup);
    free(o->procs);
    for (size_t i = 0; i < o->ncgroups; i++)
        free(o->cgroups[i].path);
    free(o->cgroups);
    free(o->note);
    *o = (struct top_gpu_out){0};
}
