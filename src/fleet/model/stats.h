/* Statistics behind the overload detectors and selection policies, with
 * the exact estimators CloudSim uses (MathUtil, commons-math), so compat
 * runs decide the same way. Pure; no allocation except where noted. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* Median as commons-math Percentile(50): the mean of the two middle values
 * when n is even. Sorts a copy; n == 0 gives 0. */
double stats_median(const double *v, size_t n);
/* CloudSim MathUtil.iqr: quartile indices round(0.25(n+1))-1 and
 * round(0.75(n+1))-1 of the sorted data. */
double stats_iqr(const double *v, size_t n);
/* Median absolute deviation from the median. */
double stats_mad(const double *v, size_t n);
/* Length of V without its trailing zeros (MathUtil.countNonZeroBeginning). */
size_t stats_trim_zero_tail(const double *v, size_t n);
/* Weighted least squares y = a + b x with x = 1..n; W NULL = ordinary.
 * Returns -EDOM when the fit is degenerate. */
int stats_linear_fit(const double *y, const double *w, size_t n, double *ret_a, double *ret_b);
/* Tricube weights for n points, the most recent (last) weighted most. */
void stats_tricube_weights(double *w, size_t n);
/* Robust fit: tricube-weighted fit, then one bisquare reweighting of the
 * residuals with scale 6 x median |residual| (Cleveland's loess step). */
int stats_robust_fit(const double *y, size_t n, double *ret_a, double *ret_b);
/* R^2 of regressing row I of DATA (n rows x m columns, row-major) on the
 * other rows with an intercept (OLS). -EDOM when m <= n or singular. */
int stats_r_squared_others(const double *data, size_t n, size_t m, size_t i, double *ret);
