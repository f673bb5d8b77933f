/* attrib: the node's power split over processes and cgroups (attrib.h).
 *
 * The lines are computed as fractions of the active watts, then one line,
 * the largest, takes node_w minus the sum of the others, so the lines add
 * up to node_w exactly: a table whose rows do not add up to its total
 * reads as a bug, however small the gap. The largest line absorbs a
 * rounding of a few ulps without changing its value in any digit shown. */
#include "model/attrib.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "model/model.h"

/* Equal energy per cycle is the split's assumption: memory-bound and
 * vector-heavy code differ from the mean by up to this much. */
#define ATTRIB_SPLIT_ERROR_PCT 30.0
/* Processes' CPU time above /proc/stat's busy time by more than this
 * share is worth a word in the note (below, it is tick sampling). */
#define ATTRIB_NORMALISE_NOTE 0.01
#define ATTRIB_UNKNOWN_CGROUP "(unknown)"

static bool bad_amount(double x)
{
    return !isfinite(x) || x < 0;
}

static bool known_ghz(double g)
{
    return isfinite(g) && g > 0;
}

/* CPU seconds weighted by the frequency they ran at; 0 for none. */
static double task_weight(const struct attrib_task *t, double mean_ghz)
{
    if (!isfinite(t->cpu_s) || t->cpu_s <= 0)
        return 0;
    if (known_ghz(t->ghz) && known_ghz(mean_ghz))
        return t->cpu_s * (t->ghz / mean_ghz);
    return t->cpu_s;
}

static int validate(const struct attrib_input *in)
{
    if (bad_amount(in->node_w) || bad_amount(in->idle_w) || bad_amount(in->seconds) ||
        bad_amount(in->busy_cpu_s) || bad_amount(in->irq_cpu_s) || (in->ntasks && !in->tasks))
        return -EINVAL;
    return 0;
}

/* The lines other than SINK, summed in order (idle, kernel, unaccounted,
 * processes). */
static double sum_others(const struct attrib_result *r, const double *sink)
{
    const double *fixed[] = {&r->idle_w, &r->kernel_w, &r->unaccounted_w};
    double s = 0;
    for (size_t i = 0; i < ARRAY_SIZE(fixed); i++)
        if (fixed[i] != sink)
            s += *fixed[i];
    for (size_t i = 0; i < r->ntasks; i++)
        if (&r->task_w[i] != sink)
            s += r->task_w[i];
    return s;
}

/* The value V >= 0 for which S + V rounds to exactly NODE, near NODE - S.
 * That difference is within half an ulp of V, so S + V is within an ulp
 * of NODE; one correction by the observed error, then ulps of V, close
 * it. It can fail: when V has NODE's exponent and S has a half-ulp
 * remainder, every S + V is a tie that rounds to the even neighbour. */
static bool fit(double s, double node, double *v)
{
    double x = node - s;
    for (int i = 0; i < 8 && x >= 0; i++) {
        double got = s + x;
        if (got == node) {
            *v = x;
            return true;
        }
        double nx = i == 0 ? x - (got - node) : x;
        x = nx != x ? nx : nextafter(x, got < node ? INFINITY : -INFINITY);
    }
    return false;
}

/* Make the lines sum to node_w exactly: one line, the sink, becomes
 * node_w minus the others. The largest line is tried first (its value
 * moves the least, relatively), then the largest below node_w / 2, whose
 * ulp is at most half of node_w's, so the tie above cannot happen.
 * Returns the sum as computed: the others in order, the sink last. */
static double exact_sum(struct attrib_result *r)
{
    double *cand[2] = {&r->idle_w, NULL};
    double *all[] = {&r->idle_w, &r->kernel_w, &r->unaccounted_w};
    for (size_t i = 0; i < ARRAY_SIZE(all) + r->ntasks; i++) {
        double *p = i < ARRAY_SIZE(all) ? all[i] : &r->task_w[i - ARRAY_SIZE(all)];
        if (*p > *cand[0])
            cand[0] = p;
        if (*p > 0 && *p < r->node_w / 2 && (!cand[1] || *p > *cand[1]))
            cand[1] = p;
    }
    for (size_t k = 0; k < ARRAY_SIZE(cand); k++) {
        double v;
        if (!cand[k] || !fit(sum_others(r, cand[k]), r->node_w, &v))
            continue;
        *cand[k] = v;
        return sum_others(r, cand[k]) + v;
    }
    /* within an ulp or two: the largest line takes the plain difference */
    double s = sum_others(r, cand[0]);
    *cand[0] = fmax(r->node_w - s, 0);
    return s + *cand[0];
}

struct cg_key {
    const char *path;
    size_t task;
};

static int cg_key_cmp(const void *a, const void *b)
{
    const struct cg_key *x = a, *y = b;
    int c = strcmp(x->path, y->path);
    return c ? c : (x->task > y->task) - (x->task < y->task);
}

static int cg_w_cmp(const void *a, const void *b)
{
    const struct attrib_cgroup *x = a, *y = b;
    if (x->w != y->w)
        return x->w < y->w ? 1 : -1;
    return strcmp(x->path, y->path);
}

/* Sum the tasks' lines per cgroup (tasks sorted by path, then grouped). */
static void by_cgroup(const struct attrib_input *in, struct attrib_result *r)
{
    if (!in->ntasks)
        return;
    struct cg_key *k = xmalloc(in->ntasks * sizeof(*k));
    for (size_t i = 0; i < in->ntasks; i++) {
        const char *p = in->tasks[i].cgroup;
        k[i] = (struct cg_key){.path = p ? p : ATTRIB_UNKNOWN_CGROUP, .task = i};
    }
    qsort(k, in->ntasks, sizeof(*k), cg_key_cmp);
    r->cg = xcalloc(in->ntasks, sizeof(*r->cg));
    for (size_t i = 0; i < in->ntasks; i++) {
        if (i == 0 || strcmp(k[i].path, k[i - 1].path) != 0)
            r->cg[r->ncgroups++].path = xstrdup(k[i].path);
        struct attrib_cgroup *c = &r->cg[r->ncgroups - 1];
        c->w += r->task_w[k[i].task];
        c->j += r->task_j[k[i].task];
        c->nprocs++;
    }
    free(k);
    qsort(r->cg, r->ncgroups, sizeof(*r->cg), cg_w_cmp);
}

struct split {
    double task_cpu;  /* unweighted CPU seconds of the processes */
    double irq;       /* irq + softirq seconds, at most busy */
    double unacc_cpu; /* busy seconds no process explains */
    double weight;    /* the denominator */
    bool by_freq;     /* some process's frequency was used */
};

static void split_lines(const struct attrib_input *in, struct attrib_result *r, struct split *sp)
{
    double wsum = 0;
    for (size_t i = 0; i < in->ntasks; i++) {
        const struct attrib_task *t = &in->tasks[i];
        r->task_w[i] = task_weight(t, in->mean_ghz);
        wsum += r->task_w[i];
        if (r->task_w[i] > 0) {
            sp->task_cpu += t->cpu_s;
            sp->by_freq |= known_ghz(t->ghz) && known_ghz(in->mean_ghz);
        }
    }
    sp->irq = fmin(in->irq_cpu_s, in->busy_cpu_s);
    /* processes explaining more than the busy time: normalised, none left */
    sp->unacc_cpu = fmax(in->busy_cpu_s - sp->irq - sp->task_cpu, 0);
    sp->weight = wsum + sp->irq + sp->unacc_cpu;
    if (!(sp->weight > 0)) {
        r->unaccounted_w = r->active_w; /* no CPU time to split by (the tasks' are all 0) */
        return;
    }
    double per = r->active_w / sp->weight;
    r->kernel_w = sp->irq * per;
    r->unaccounted_w = sp->unacc_cpu * per;
    for (size_t i = 0; i < in->ntasks; i++)
        r->task_w[i] *= per;
}

static void write_note(const struct attrib_input *in, struct attrib_result *r,
                       const struct split *sp)
{
    size_t cap = sizeof(r->note), n = 0;
    const char *how = sp->by_freq ? "CPU time × effective frequency" : "CPU time";
    if (in->measured)
        n += (size_t)snprintf(r->note, cap, "measured node power split by %s; ±%g %% per line", how,
                              r->error_pct);
    else if (isfinite(r->error_pct))
        n += (size_t)snprintf(r->note, cap,
                              "estimated by the model (±%g %%), split by %s; ±%g %% per line",
                              in->node_error_pct, how, r->error_pct);
    else
        n += (size_t)snprintf(r->note, cap, "estimated by a model of unknown error, split by %s",
                              how);
    if (in->idle_w > in->node_w && n < cap)
        n += (size_t)snprintf(r->note + n, cap - n, "; idle floor %.1f W clipped to the node's",
                              in->idle_w);
    if (!(sp->weight > 0) && r->active_w > 0 && n < cap)
        n += (size_t)snprintf(r->note + n, cap - n,
                              "; no CPU time in the window: the active %.1f W is unaccounted",
                              r->active_w);
    double excess = sp->task_cpu + sp->irq - in->busy_cpu_s;
    if (excess > ATTRIB_NORMALISE_NOTE * in->busy_cpu_s && sp->weight > 0 && n < cap)
        snprintf(r->note + n, cap - n,
                 "; processes ran %.2f CPU s more than /proc/stat's busy time: shares normalised",
                 excess);
}

int attrib_compute(const struct attrib_input *in, struct attrib_result *ret)
{
    if (validate(in) < 0)
        return -EINVAL;
    struct attrib_result r = {.node_w = in->node_w, .ntasks = in->ntasks};
    r.idle_w = fmin(in->idle_w, in->node_w);
    r.active_w = in->node_w - r.idle_w;
    if (in->ntasks) {
        r.task_w = xcalloc(in->ntasks, sizeof(*r.task_w));
        r.task_j = xcalloc(in->ntasks, sizeof(*r.task_j));
    }
    struct split sp = {0};
    split_lines(in, &r, &sp);
    if (!isfinite(sp.weight)) { /* CPU seconds so large their sum overflows */
        attrib_result_clear(&r);
        return -EINVAL;
    }
    r.sum_w = exact_sum(&r);
    for (size_t i = 0; i < in->ntasks; i++)
        r.task_j[i] = r.task_w[i] * in->seconds;
    by_cgroup(in, &r);
    if (in->measured)
        r.error_pct = ATTRIB_SPLIT_ERROR_PCT;
    else
        r.error_pct = isfinite(in->node_error_pct) && in->node_error_pct >= 0
                          ? in->node_error_pct + ATTRIB_SPLIT_ERROR_PCT
                          : NAN;
    write_note(in, &r, &sp);
    *ret = r;
    return 0;
}

void attrib_result_clear(struct attrib_result *r)
{
    if (!r)
        return;
    free(r->task_w);
    free(r->task_j);
    for (size_t i = 0; i < r->ncgroups; i++)
        free(r->cg[i].path);
    free(r->cg);
    *r = (struct attrib_result){0};
}

double attrib_idle_floor(const struct power_model *m, unsigned cores, double busy_cores, double ghz,
                         double node_w, bool measured)
{
    if (!m)
        return NAN;
    double idle = model_estimate(m, cores, 0, ghz);
    if (!measured)
        return idle;
    if (!isfinite(busy_cores)) /* no utilisation: the floor takes it all */
        busy_cores = 0;
    double total = model_estimate(m, cores, busy_cores, ghz);
    if (!isfinite(node_w) || node_w < 0 || !isfinite(total))
        return NAN;
    if (!(total > 0))
        return 0;
    double share = idle / total;
    return node_w * (share < 0 ? 0 : share > 1 ? 1 : share);
}
