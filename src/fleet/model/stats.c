/* Statistics for the detectors; see stats.h. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "fleet/model/stats.h"

#define STATS_STACK 64 /* histories are <= 30 values; larger inputs allocate */

/* The k-th smallest (0-based) of a[0..n), by quickselect: a is reordered
 * so that a[k] holds it and everything after k is >= it. O(n). */
static double select_kth(double *a, long n, long k)
{
    long lo = 0, hi = n - 1;
    while (hi > lo) {
        long mid = lo + (hi - lo) / 2;
        /* median of three as the pivot */
        if (a[mid] < a[lo]) {
            double t = a[mid];
            a[mid] = a[lo];
            a[lo] = t;
        }
        if (a[hi] < a[lo]) {
            double t = a[hi];
            a[hi] = a[lo];
            a[lo] = t;
        }
        if (a[hi] < a[mid]) {
            double t = a[hi];
            a[hi] = a[mid];
            a[mid] = t;
        }
        double pivot = a[mid];
        long i = lo, j = hi;
        while (i <= j) {
            while (a[i] < pivot)
                i++;
            while (a[j] > pivot)
                j--;
            if (i <= j) {
                double t = a[i];
                a[i] = a[j];
                a[j] = t;
                i++;
                j--;
            }
        }
        if (k <= j)
            hi = j;
        else if (k >= i)
            lo = i;
        else
            return a[k];
    }
    return a[k];
}

static double min_of(const double *a, long n)
{
    double m = a[0];
    for (long i = 1; i < n; i++)
        if (a[i] < m)
            m = a[i];
    return m;
}

/* Median of a (reordered), as commons-math's Percentile(50). */
static double median_inplace(double *a, long n)
{
    if (n % 2)
        return select_kth(a, n, n / 2);
    double lower = select_kth(a, n, n / 2 - 1);
    double upper = min_of(a + n / 2, n - n / 2);
    return lower + (upper - lower) / 2;
}

static double *scratch(const double *v, size_t n, double *buf, double **heap)
{
    double *s = buf;
    if (n > STATS_STACK)
        s = *heap = xmalloc(n * sizeof(double));
    memcpy(s, v, n * sizeof(double));
    return s;
}

double stats_median(const double *v, size_t n)
{
    double buf[STATS_STACK];
    _cleanup_free_ double *heap = NULL;

    if (n == 0)
        return 0;
    return median_inplace(scratch(v, n, buf, &heap), (long)n);
}

double stats_iqr(const double *v, size_t n)
{
    double buf[STATS_STACK];
    _cleanup_free_ double *heap = NULL;

    if (n == 0)
        return 0;
    double *s = scratch(v, n, buf, &heap);
    long q1 = (long)floor(0.25 * (double)(n + 1) + 0.5) - 1;
    long q3 = (long)floor(0.75 * (double)(n + 1) + 0.5) - 1;
    if (q1 < 0)
        q1 = 0;
    if (q3 > (long)n - 1)
        q3 = (long)n - 1;
    double x1 = select_kth(s, (long)n, q1);
    double x3 = q3 > q1 ? select_kth(s + q1 + 1, (long)n - q1 - 1, q3 - q1 - 1) : x1;
    return x3 - x1;
}

double stats_mad(const double *v, size_t n)
{
    double buf[STATS_STACK];
    _cleanup_free_ double *heap = NULL;

    if (n == 0)
        return 0;
    double med = stats_median(v, n);
    double *d = scratch(v, n, buf, &heap);
    for (size_t i = 0; i < n; i++)
        d[i] = fabs(v[i] - med);
    return median_inplace(d, (long)n);
}

size_t stats_trim_zero_tail(const double *v, size_t n)
{
    while (n > 0 && v[n - 1] == 0)
        n--;
    return n;
}

int stats_linear_fit(const double *y, const double *w, size_t n, double *ret_a, double *ret_b)
{
    double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;

    if (n < 2)
        return -EDOM;
    for (size_t i = 0; i < n; i++) {
        double wi = w ? w[i] : 1, x = (double)(i + 1);
        sw += wi;
        sx += wi * x;
        sy += wi * y[i];
        sxx += wi * x * x;
        sxy += wi * x * y[i];
    }
    double den = sw * sxx - sx * sx;
    if (!(fabs(den) > 1e-12) || !isfinite(sy))
        return -EDOM;
    double b = (sw * sxy - sx * sy) / den;
    *ret_a = (sy - b * sx) / sw;
    *ret_b = b;
    return 0;
}

void stats_tricube_weights(double *w, size_t n)
{
    /* Distance from the newest point (the last), scaled to just past the
     * oldest so that it keeps a small weight. */
    double span = (double)n;
    for (size_t i = 0; i < n; i++) {
        double d = (double)(n - 1 - i) / span;
        double t = 1 - d * d * d;
        w[i] = t * t * t;
    }
}

int stats_robust_fit(const double *y, size_t n, double *ret_a, double *ret_b)
{
    double w[STATS_STACK], res[STATS_STACK], a, b;
    int r;

    if (n > STATS_STACK || n < 2)
        return -EDOM;
    stats_tricube_weights(w, n);
    r = stats_linear_fit(y, w, n, &a, &b);
    if (r < 0)
        return r;
    for (size_t i = 0; i < n; i++)
        res[i] = fabs(y[i] - (a + b * (double)(i + 1)));
    double s = 6 * stats_median(res, n);
    if (s > 0) {
        for (size_t i = 0; i < n; i++) {
            double u = res[i] / s;
            double bi = u < 1 ? (1 - u * u) * (1 - u * u) : 0;
            w[i] *= bi;
        }
        r = stats_linear_fit(y, w, n, &a, &b);
        if (r < 0)
            return r;
    }
    *ret_a = a;
    *ret_b = b;
    return 0;
}

/* Solve the k x k system A x = b in place by Gaussian elimination with
 * partial pivoting. */
static int solve(double *A, double *b, size_t k)
{
    for (size_t c = 0; c < k; c++) {
        size_t p = c;
        for (size_t r = c + 1; r < k; r++)
            if (fabs(A[r * k + c]) > fabs(A[p * k + c]))
                p = r;
        if (!(fabs(A[p * k + c]) > 1e-12))
            return -EDOM;
        if (p != c) {
            for (size_t j = 0; j < k; j++) {
                double t = A[c * k + j];
                A[c * k + j] = A[p * k + j];
                A[p * k + j] = t;
            }
            double t = b[c];
            b[c] = b[p];
            b[p] = t;
        }
        for (size_t r = c + 1; r < k; r++) {
            double f = A[r * k + c] / A[c * k + c];
            for (size_t j = c; j < k; j++)
                A[r * k + j] -= f * A[c * k + j];
            b[r] -= f * b[c];
        }
    }
    for (size_t c = k; c-- > 0;) {
        for (size_t j = c + 1; j < k; j++)
            b[c] -= A[c * k + j] * b[j];
        b[c] /= A[c * k + c];
    }
    return 0;
}

int stats_r_squared_others(const double *data, size_t n, size_t m, size_t i, double *ret)
{
    size_t k = n; /* intercept + (n - 1) regressors */
    if (n < 2 || m <= n)
        return -EDOM;
    _cleanup_free_ double *A = xcalloc(k * k, sizeof(double));
    _cleanup_free_ double *b = xcalloc(k, sizeof(double));
    _cleanup_free_ double *x = xmalloc(k * sizeof(double));
    const double *y = data + i * m;

    for (size_t t = 0; t < m; t++) {
        size_t c = 0;
        x[c++] = 1;
        for (size_t j = 0; j < n; j++)
            if (j != i)
                x[c++] = data[j * m + t];
        for (size_t r = 0; r < k; r++) {
            b[r] += x[r] * y[t];
            for (size_t s = 0; s < k; s++)
                A[r * k + s] += x[r] * x[s];
        }
    }
    int r = solve(A, b, k);
    if (r < 0)
        return r;
    double mean = 0, ss_tot = 0, ss_res = 0;
    for (size_t t = 0; t < m; t++)
        mean += y[t];
    mean /= (double)m;
    for (size_t t = 0; t < m; t++) {
        double fit = b[0];
        size_t c = 1;
        for (size_t j = 0; j < n; j++)
            if (j != i)
                fit += b[c++] * data[j * m + t];
        ss_res += (y[t] - fit) * (y[t] - fit);
        ss_tot += (y[t] - mean) * (y[t] - mean);
    }
    if (!(ss_tot > 0))
        return -EDOM;
    *ret = 1 - ss_res / ss_tot;
    return 0;
}
