/* Least-squares fit of the power model: see fit.h. */
#include "model/fit.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/parse.h"
#include "base/util.h"

#define REF_GHZ_DEFAULT 2.4
#define NCOEF_MAX       3

static bool usable(const struct fit_point *p)
{
    return p->cpus > 0 && isfinite(p->watts) && p->watts > 0 && isfinite(p->busy) && p->busy >= 0 &&
           p->busy <= (double)p->cpus + 1e-6;
}

static bool ghz_known(const struct fit_point *p)
{
    return isfinite(p->ghz) && p->ghz > 0;
}

/* The active regressor: busy x (ghz/ref)^e, frequency term 1 when unknown. */
static double active_x(const struct fit_point *p, double ref, double e)
{
    return e > 0 && ghz_known(p) ? p->busy * pow(p->ghz / ref, e) : p->busy;
}

/* Solve the k x k system A x = b by Gaussian elimination with partial
 * pivoting; -EDOM when a pivot is negligible beside its column's scale. */
static int solve(double A[NCOEF_MAX][NCOEF_MAX], double b[NCOEF_MAX], int k, double x[NCOEF_MAX])
{
    double scale[NCOEF_MAX];
    for (int i = 0; i < k; i++)
        scale[i] = fabs(A[i][i]) > 0 ? fabs(A[i][i]) : 1;
    for (int c = 0; c < k; c++) {
        int piv = c;
        for (int r = c + 1; r < k; r++)
            if (fabs(A[r][c]) > fabs(A[piv][c]))
                piv = r;
        if (fabs(A[piv][c]) < 1e-9 * scale[c])
            return -EDOM;
        if (piv != c) {
            for (int j = 0; j < k; j++) {
                double t = A[c][j];
                A[c][j] = A[piv][j];
                A[piv][j] = t;
            }
            double t = b[c];
            b[c] = b[piv];
            b[piv] = t;
        }
        for (int r = c + 1; r < k; r++) {
            double f = A[r][c] / A[c][c];
            for (int j = c; j < k; j++)
                A[r][j] -= f * A[c][j];
            b[r] -= f * b[c];
        }
    }
    for (int c = k - 1; c >= 0; c--) {
        double s = b[c];
        for (int j = c + 1; j < k; j++)
            s -= A[c][j] * x[j];
        x[c] = s / A[c][c];
    }
    return 0;
}

struct trial {
    double coef[NCOEF_MAX]; /* base, [per-CPU,] active */
    double sse;
};

/* Least squares for one exponent. The regressors are 1, [cpus,] active_x. */
static int fit_one(const struct fit_point *p, size_t n, bool cpus_fixed, double ref, double e,
                   struct trial *ret)
{
    int k = cpus_fixed ? 2 : 3;
    double A[NCOEF_MAX][NCOEF_MAX] = {{0}}, b[NCOEF_MAX] = {0}, x[NCOEF_MAX] = {0};
    for (size_t i = 0; i < n; i++) {
        if (!usable(&p[i]))
            continue;
        double v[NCOEF_MAX] = {1, (double)p[i].cpus, active_x(&p[i], ref, e)};
        if (cpus_fixed)
            v[1] = v[2];
        for (int r = 0; r < k; r++) {
            for (int c = 0; c < k; c++)
                A[r][c] += v[r] * v[c];
            b[r] += v[r] * p[i].watts;
        }
    }
    int r = solve(A, b, k, x);
    if (r < 0)
        return r;
    struct trial t = {.coef = {x[0], cpus_fixed ? 0 : x[1], cpus_fixed ? x[1] : x[2]}};
    for (size_t i = 0; i < n; i++) {
        if (!usable(&p[i]))
            continue;
        double est = t.coef[0] + t.coef[1] * p[i].cpus + t.coef[2] * active_x(&p[i], ref, e);
        t.sse += (p[i].watts - est) * (p[i].watts - est);
    }
    *ret = t;
    return 0;
}

/* The span of the usable points: count, busy and CPU ranges, known GHz. */
struct span {
    size_t n, n_ghz;
    double busy_min, busy_max, ghz_min, ghz_max, ghz_sum, watts_sum;
    unsigned cpus_min, cpus_max;
};

static void span_of(const struct fit_point *p, size_t n, struct span *s)
{
    *s = (struct span){.busy_min = INFINITY,
                       .busy_max = -INFINITY,
                       .ghz_min = INFINITY,
                       .ghz_max = -INFINITY,
                       .cpus_min = UINT32_MAX};
    for (size_t i = 0; i < n; i++) {
        if (!usable(&p[i]))
            continue;
        s->n++;
        s->busy_min = fmin(s->busy_min, p[i].busy);
        s->busy_max = fmax(s->busy_max, p[i].busy);
        s->cpus_min = p[i].cpus < s->cpus_min ? p[i].cpus : s->cpus_min;
        s->cpus_max = p[i].cpus > s->cpus_max ? p[i].cpus : s->cpus_max;
        s->watts_sum += p[i].watts;
        if (ghz_known(&p[i])) {
            s->n_ghz++;
            s->ghz_min = fmin(s->ghz_min, p[i].ghz);
            s->ghz_max = fmax(s->ghz_max, p[i].ghz);
            s->ghz_sum += p[i].ghz;
        }
    }
}

/* Error figures of the chosen coefficients over the usable points. */
static void score(const struct fit_point *p, size_t n, const struct span *s, struct fit_result *f)
{
    double mean = s->watts_sum / (double)s->n, sse = 0, sst = 0, ape = 0;
    for (size_t i = 0; i < n; i++) {
        if (!usable(&p[i]))
            continue;
        double est = f->idle_base_w + f->idle_per_core_w * p[i].cpus +
                     f->active_per_core_w * active_x(&p[i], f->ref_ghz, f->ghz_exponent);
        double res = p[i].watts - est;
        sse += res * res;
        sst += (p[i].watts - mean) * (p[i].watts - mean);
        ape += fabs(res) / p[i].watts;
    }
    f->rmse_w = sqrt(sse / (double)s->n);
    f->mape_pct = 100.0 * ape / (double)s->n;
    f->r2 = sst > 0 ? 1.0 - sse / sst : NAN;
    f->error_pct = fmax(1.0, ceil(200.0 * f->rmse_w / mean));
}

int fit_power(const struct fit_point *p, size_t n, struct fit_result *ret, char **ret_why)
{
    struct span s;
    span_of(p, n, &s);
    if (s.n < FIT_MIN_POINTS) {
        *ret_why = xasprintf("too few points: %zu usable, want at least %d", s.n, FIT_MIN_POINTS);
        return -EDOM;
    }
    if (s.busy_max - s.busy_min < FIT_MIN_BUSY_RANGE) {
        *ret_why = xasprintf("busy CPUs span only %.2f..%.2f: want a range of at least %.1f CPUs "
                             "to tell idle from active power",
                             s.busy_min, s.busy_max, FIT_MIN_BUSY_RANGE);
        return -EDOM;
    }
    struct fit_result f = {
        .cpus_fixed = s.cpus_min == s.cpus_max,
        .ref_ghz = s.n_ghz ? s.ghz_sum / (double)s.n_ghz : REF_GHZ_DEFAULT,
        .n = s.n,
        .busy_min = s.busy_min,
        .busy_max = s.busy_max,
        .cpus_min = s.cpus_min,
        .cpus_max = s.cpus_max,
    };
    /* varied: more than 2 % between the lowest and highest known GHz */
    f.ghz_varied = s.n_ghz >= 2 && s.ghz_max > s.ghz_min * 1.02;
    struct trial best = {.sse = INFINITY};
    for (int g = 0; g <= (f.ghz_varied ? 12 : 0); g++) {
        struct trial t;
        double e = g * 0.25;
        if (fit_one(p, n, f.cpus_fixed, f.ref_ghz, e, &t) < 0)
            continue;
        if (t.sse < best.sse) {
            best = t;
            f.ghz_exponent = e;
        }
    }
    if (!isfinite(best.sse)) {
        *ret_why = xstrdup("singular: the CPU count changed only together with the load, so "
                           "idle and active power cannot be told apart");
        return -EDOM;
    }
    f.idle_base_w = best.coef[0];
    f.idle_per_core_w = best.coef[1];
    f.active_per_core_w = best.coef[2];
    static const char *const names[] = {"idle_base_w", "idle_per_core_w", "active_per_core_w"};
    for (int i = 0; i < 3; i++)
        if (best.coef[i] < 0 || !isfinite(best.coef[i])) {
            *ret_why = xasprintf("%s came out %.3g W: the points do not follow the model "
                                 "(power falling with load or CPUs)",
                                 names[i], best.coef[i]);
            return -EDOM;
        }
    score(p, n, &s, &f);
    *ret = f;
    return 0;
}

void fit_to_model(const struct fit_result *f, double pue, const char *when, struct power_model *ret)
{
    struct power_model m;
    model_default(&m);
    snprintf(m.name, sizeof(m.name), "fitted");
    snprintf(m.source, sizeof(m.source), "fit");
    snprintf(m.description, sizeof(m.description),
             "fitted on this machine against its meter: %zu points, %.2f..%.2f busy CPUs%s", f->n,
             f->busy_min, f->busy_max,
             f->cpus_fixed ? " at one CPU count (idle_base_w holds the per-CPU idle)" : "");
    m.idle_base_w = f->idle_base_w;
    m.idle_per_core_w = f->idle_per_core_w;
    m.active_per_core_w = f->active_per_core_w;
    m.ref_ghz = fmin(10, fmax(0.1, f->ref_ghz));
    m.ghz_exponent = f->ghz_exponent;
    m.error_pct = fmin(1000, f->error_pct);
    if (pue >= 1 && pue <= 10)
        m.pue = pue;
    m.fit = (struct power_model_fit){
        .n = f->n,
        .rmse_w = f->rmse_w,
        .mape_pct = f->mape_pct,
        .r2 = f->r2,
        .busy_min = f->busy_min,
        .busy_max = f->busy_max,
        .cpus = f->cpus_fixed ? f->cpus_min : 0,
    };
    if (when)
        snprintf(m.fit.time, sizeof(m.fit.time), "%s", when);
    *ret = m;
}

static const struct cpuidle_state *poll_state(const struct cpuidle_cpu *c)
{
    for (unsigned k = 0; k < c->nstates; k++)
        if (c->state[k].name && streq(c->state[k].name, "POLL"))
            return &c->state[k];
    return NULL;
}

double fit_poll_cpus(const struct cpuidle_sample *a, const struct cpuidle_sample *b,
                     double interval_s)
{
    if (!a || !b || !(interval_s > 0))
        return NAN;
    double us = 0;
    for (unsigned i = 0; i < b->ncpus; i++) {
        const struct cpuidle_cpu *cb = &b->cpus[i], *ca = cpuidle_find_cpu(a, cb->cpu);
        const struct cpuidle_state *pb = poll_state(cb), *pa = ca ? poll_state(ca) : NULL;
        if (!pa || !pb || pa->time_us == VAL_NONE || pb->time_us == VAL_NONE ||
            pb->time_us < pa->time_us)
            continue;
        us += (double)(pb->time_us - pa->time_us);
    }
    return us / (interval_s * 1e6);
}

double fit_busy_cpus(double busy, double poll, unsigned cpus)
{
    if (isnan(busy))
        return NAN;
    double v = busy + (isnan(poll) ? 0 : poll);
    return v > (double)cpus ? (double)cpus : v;
}

/* One line's point (comment already cut): 0, 1 when blank, -EINVAL with
 * *ret_why. */
static int parse_point(char *line, struct fit_point *ret, char **ret_why)
{
    char *tok[5], *save = NULL;
    int n = 0;
    for (char *s = strtok_r(line, " \t,\r", &save); s && n < 5; s = strtok_r(NULL, " \t,\r", &save))
        tok[n++] = s;
    if (n == 0)
        return 1;
    if (n != 4) {
        *ret_why = xasprintf("want 4 fields (CPUS BUSY_CPUS GHZ WATTS), found %s%d",
                             n > 4 ? "more than " : "", n > 4 ? 4 : n);
        return -EINVAL;
    }
    double cpus, busy, ghz = NAN, watts;
    if (parse_double(tok[0], &cpus) < 0 || !(cpus >= 1 && cpus <= 65535) || cpus != floor(cpus) ||
        parse_double(tok[1], &busy) < 0 || !(busy >= 0 && busy <= cpus) ||
        (!streq(tok[2], "-") && (parse_double(tok[2], &ghz) < 0 || !(ghz > 0 && ghz <= 10))) ||
        parse_double(tok[3], &watts) < 0 || !(watts > 0 && watts <= 1e6)) {
        *ret_why = xstrdup("want whole CPUs 1..65535, busy CPUs 0..CPUS, GHz 0..10 or '-', "
                           "watts 0..1000000");
        return -EINVAL;
    }
    *ret = (struct fit_point){(unsigned)cpus, busy, ghz, watts};
    return 0;
}

int fit_points_parse(const char *text, size_t len, const char *origin, struct fit_point **ret,
                     size_t *ret_n, char **ret_err)
{
    if (memchr(text, '\0', len)) {
        *ret_err = xasprintf("%s: binary content", origin);
        return -EINVAL;
    }
    struct fit_point *v = NULL;
    size_t n = 0, cap = 0;
    unsigned no = 1;
    for (size_t off = 0; off < len; no++) {
        const char *nl = memchr(text + off, '\n', len - off);
        size_t end = nl ? (size_t)(nl - text) : len;
        _cleanup_free_ char *line = xstrndup(text + off, end - off);
        off = end + 1;
        char *hash = strchr(line, '#');
        if (hash)
            *hash = '\0';
        struct fit_point p;
        _cleanup_free_ char *why = NULL;
        int r = parse_point(line, &p, &why);
        if (r == 1)
            continue;
        if (r == 0 && n == FIT_POINTS_MAX) {
            why = xasprintf("more than %d points", FIT_POINTS_MAX);
            r = -EFBIG;
        }
        if (r < 0) {
            *ret_err = xasprintf("%s:%u: %s", origin, no, why);
            free(v);
            return r;
        }
        if (n == cap) {
            cap = cap ? 2 * cap : 256;
            v = xrealloc(v, cap * sizeof(*v));
        }
        v[n++] = p;
    }
    *ret = v;
    *ret_n = n;
    return 0;
}
