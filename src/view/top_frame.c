/* watt top's frame as data: freeing it and sorting its tables (stable,
 * by the chosen key), for every face that shows one (cli's top and
 * report, the agent's per-cgroup series). */
#include "view/top.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"

void top_frame_free(struct top_frame *f)
{
    if (!f)
        return;
    free(f->hostname);
    free(f->kernel);
    free(f->why_not_traced);
    free(f->why_not_bpf);
    for (size_t i = 0; i < f->nprocs; i++) {
        free(f->procs[i].cmdline);
        free(f->procs[i].cgroup);
    }
    free(f->procs);
    for (size_t i = 0; i < f->ncgroups; i++)
        free(f->cgroups[i].path);
    free(f->cgroups);
    free(f->sources);
    for (size_t i = 0; i < f->ncpus_rows; i++)
        free(f->cpus[i].st);
    free(f->cpus);
    free(f->pkgs);
    for (size_t i = 0; i < f->ndevices; i++) {
        struct top_device *d = &f->devices[i];
        free(d->bus);
        free(d->name);
        free(d->driver);
        free(d->product);
        free(d->why);
    }
    free(f->devices);
    free(f->gpus);
    for (size_t i = 0; i < f->nnotes; i++)
        free(f->notes[i]);
    free(f->notes);
    free(f);
}

/* ---- sorting ------------------------------------------------------------ */

typedef int (*cmp_fn)(const void *a, const void *b, enum top_sort s);

/* A stable merge sort (qsort is not stable): rows with equal keys keep
 * the collector's order, so a refresh does not shuffle them. */
static void merge_sort(void *base, size_t n, size_t size, cmp_fn cmp, enum top_sort s)
{
    if (n < 2)
        return;
    char *a = base, *tmp = xmalloc(n * size);
    for (size_t width = 1; width < n; width *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * width) {
            size_t mid = lo + width < n ? lo + width : n;
            size_t hi = lo + 2 * width < n ? lo + 2 * width : n;
            size_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi) {
                /* <= 0 takes the left one on ties: stable */
                const char *from =
                    cmp(a + i * size, a + j * size, s) <= 0 ? a + i++ * size : a + j++ * size;
                memcpy(tmp + k++ * size, from, size);
            }
            memcpy(tmp + k * size, a + i * size, (mid - i) * size);
            k += mid - i;
            memcpy(tmp + k * size, a + j * size, (hi - j) * size);
        }
        memcpy(a, tmp, n * size);
    }
    free(tmp);
}

/* Descending, NaN last. */
static int cmp_desc(double a, double b)
{
    if (isnan(a) || isnan(b))
        return isnan(a) - isnan(b);
    return a > b ? -1 : a < b ? 1 : 0;
}

static double proc_key(const struct top_proc *p, enum top_sort s)
{
    switch (s) {
    case TOP_SORT_POWER:
        return p->power_w;
    case TOP_SORT_CPU:
        return p->cpu_pct;
    case TOP_SORT_IDLE_WAKEUPS:
        return p->idle_wakeups_s;
    case TOP_SORT_GPU:
        return p->gpu_w;
    default:
        return p->wakeups_s;
    }
}

/* The key, then wake-ups (so an untraced idle sort is still useful), then pid. */
static int cmp_proc(const void *a, const void *b, enum top_sort s)
{
    const struct top_proc *x = a, *y = b;
    int r = cmp_desc(proc_key(x, s), proc_key(y, s));
    if (!r && s == TOP_SORT_GPU) /* a GPU without watts: by its busy time */
        r = cmp_desc(x->gpu_busy_pct, y->gpu_busy_pct);
    if (!r)
        r = cmp_desc(x->wakeups_s, y->wakeups_s);
    if (!r)
        r = (x->pid > y->pid) - (x->pid < y->pid);
    return r;
}

static double cgroup_key(const struct top_cgroup *c, enum top_sort s)
{
    switch (s) {
    case TOP_SORT_POWER:
        return c->power_w;
    case TOP_SORT_CPU:
        return c->cpu_pct;
    case TOP_SORT_IDLE_WAKEUPS:
        return c->idle_wakeups_s;
    case TOP_SORT_GPU:
        return c->gpu_w;
    default:
        return c->wakeups_s;
    }
}

static int cmp_cgroup(const void *a, const void *b, enum top_sort s)
{
    const struct top_cgroup *x = a, *y = b;
    int r = cmp_desc(cgroup_key(x, s), cgroup_key(y, s));
    if (!r && s == TOP_SORT_GPU)
        r = cmp_desc(x->gpu_busy_pct, y->gpu_busy_pct);
    if (!r)
        r = cmp_desc(x->wakeups_s, y->wakeups_s);
    if (!r)
        r = strcmp(x->path ? x->path : "", y->path ? y->path : "");
    return r;
}

/* Sources have no power or CPU time: those sorts order them by events. */
static int cmp_source(const void *a, const void *b, enum top_sort s)
{
    const struct top_source *x = a, *y = b;
    int r = s == TOP_SORT_IDLE_WAKEUPS ? cmp_desc(x->idle_wakeups_s, y->idle_wakeups_s) : 0;
    if (!r)
        r = cmp_desc(x->events_s, y->events_s);
    if (!r)
        r = ((int)x->kind > (int)y->kind) - ((int)x->kind < (int)y->kind);
    if (!r)
        r = (x->irq > y->irq) - (x->irq < y->irq);
    if (!r)
        r = strncmp(x->name, y->name, sizeof(x->name));
    return r;
}

void top_frame_sort(struct top_frame *f, enum top_sort s)
{
    merge_sort(f->procs, f->nprocs, sizeof(*f->procs), cmp_proc, s);
    merge_sort(f->cgroups, f->ncgroups, sizeof(*f->cgroups), cmp_cgroup, s);
    merge_sort(f->sources, f->nsources, sizeof(*f->sources), cmp_source, s);
}
