/* Fuzz target: model/fit.h, fit_points_parse() of a file of points
 * (`watt model fit FILE`), then fit_power() of what it accepted.
 *
 * Accepted: every point in its documented range. Refused: -EINVAL or
 * -EFBIG with "fuzz.txt:LINE: ..." (or "fuzz.txt: binary content").
 * The fit then either succeeds with finite, non-negative coefficients and
 * error figures, or is refused (-EDOM) with a reason. */
#include <errno.h>
#include <math.h>

#include "fuzz.h"
#include "model/fit.h"

#define ORIGIN "fuzz.txt"

static void check_fit(const struct fit_point *p, size_t n)
{
    struct fit_result f;
    char *why = NULL;
    int r = fit_power(p, n, &f, &why);
    if (r < 0) {
        FUZZ_CHECK(r == -EDOM && why && *why);
        free(why);
        return;
    }
    FUZZ_CHECK(why == NULL);
    FUZZ_CHECK(f.n >= FIT_MIN_POINTS && f.n <= n);
    FUZZ_CHECK(isfinite(f.idle_base_w) && f.idle_base_w >= 0);
    FUZZ_CHECK(isfinite(f.idle_per_core_w) && f.idle_per_core_w >= 0);
    FUZZ_CHECK(isfinite(f.active_per_core_w) && f.active_per_core_w >= 0);
    FUZZ_CHECK(f.ghz_exponent >= 0 && f.ghz_exponent <= 3);
    FUZZ_CHECK(isfinite(f.rmse_w) && f.rmse_w >= 0 && isfinite(f.mape_pct));
    FUZZ_CHECK(isnan(f.r2) || f.r2 <= 1 + 1e-9);
    FUZZ_CHECK(f.busy_max - f.busy_min >= FIT_MIN_BUSY_RANGE);
    FUZZ_CHECK(f.error_pct >= 1);
    struct power_model m;
    fit_to_model(&f, 1.5, NULL, &m);
    FUZZ_CHECK(isfinite(model_estimate(&m, f.cpus_max, f.busy_max, NAN)));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fit_point *p = (struct fit_point *)(uintptr_t)1, *untouched = p;
    size_t n = 12345;
    char *err = NULL;
    int r = fit_points_parse((const char *)data, size, ORIGIN, &p, &n, &err);
    if (r == 0) {
        FUZZ_CHECK(err == NULL);
        for (size_t i = 0; i < n; i++) {
            FUZZ_CHECK(p[i].cpus >= 1 && p[i].cpus <= 65535);
            FUZZ_CHECK(p[i].busy >= 0 && p[i].busy <= p[i].cpus);
            FUZZ_CHECK(isnan(p[i].ghz) || (p[i].ghz > 0 && p[i].ghz <= 10));
            FUZZ_CHECK(p[i].watts > 0 && p[i].watts <= 1e6);
        }
        check_fit(p, n);
        free(p);
    } else {
        FUZZ_CHECK(r == -EINVAL || r == -EFBIG);
        FUZZ_CHECK(err != NULL && strncmp(err, ORIGIN ":", strlen(ORIGIN) + 1) == 0);
        FUZZ_CHECK(p == untouched && n == 12345);
        free(err);
    }
    return 0;
}
