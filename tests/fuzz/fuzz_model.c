/* Fuzz target: model/model.h, model_parse() of a power model INI file.
 *
 * Accepted: every coefficient finite and in its documented range, strings
 * terminated, the estimate finite, non-negative and not falling with load.
 * Refused: -EINVAL with a message that names the file, and *ret untouched. */
#include <errno.h>
#include <math.h>
#include <stdbool.h>

#include "fuzz.h"
#include "model/model.h"

#define ORIGIN "fuzz.ini"

static bool terminated(const char *s, size_t size)
{
    return memchr(s, '\0', size) != NULL;
}

static void check_model(const struct power_model *m)
{
    FUZZ_CHECK(terminated(m->name, sizeof(m->name)) && m->name[0]);
    FUZZ_CHECK(terminated(m->description, sizeof(m->description)));
    FUZZ_CHECK(strcmp(m->source, ORIGIN) == 0);
    FUZZ_CHECK(isfinite(m->idle_base_w) && m->idle_base_w >= 0 && m->idle_base_w <= 100000);
    FUZZ_CHECK(isfinite(m->idle_per_core_w) && m->idle_per_core_w >= 0);
    FUZZ_CHECK(isfinite(m->active_per_core_w) && m->active_per_core_w >= 0);
    FUZZ_CHECK(m->idle_per_core_w <= 1000 && m->active_per_core_w <= 1000);
    FUZZ_CHECK(m->ref_ghz >= 0.1 && m->ref_ghz <= 10);
    FUZZ_CHECK(m->ghz_exponent >= 0 && m->ghz_exponent <= 4);
    FUZZ_CHECK(m->error_pct >= 0 && m->error_pct <= 1000);
    FUZZ_CHECK(m->pue >= 1 && m->pue <= 10);
    FUZZ_CHECK(terminated(m->fit.time, sizeof(m->fit.time)));
    FUZZ_CHECK(m->fit.rmse_w >= 0 && m->fit.rmse_w <= 100000);
    FUZZ_CHECK(m->fit.mape_pct >= 0 && m->fit.busy_min >= 0 && m->fit.busy_max >= 0);
    FUZZ_CHECK(isnan(m->fit.r2) || m->fit.r2 <= 1);

    static const unsigned cores[] = {0, 1, 2, 48, 384, 8192};
    static const double ghz[] = {-1, 0, 0.8, 2.4, 5.0};
    for (size_t i = 0; i < sizeof(cores) / sizeof(cores[0]); i++) {
        for (size_t j = 0; j < sizeof(ghz) / sizeof(ghz[0]); j++) {
            double idle = model_estimate(m, cores[i], 0, ghz[j]);
            double half = model_estimate(m, cores[i], cores[i] / 2.0, ghz[j]);
            double busy = model_estimate(m, cores[i], cores[i], ghz[j]);
            double over = model_estimate(m, cores[i], cores[i] * 2.0 + 1, ghz[j]);
            FUZZ_CHECK(isfinite(idle) && isfinite(busy) && idle >= 0);
            FUZZ_CHECK(idle <= half && half <= busy);
            FUZZ_CHECK(over == busy); /* busy_cores is clamped to cores */
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = fuzz_strndup(data, size);
    struct power_model m, untouched;
    memset(&m, 0xa5, sizeof(m));
    memcpy(&untouched, &m, sizeof(m));
    char *err = NULL;
    int r = model_parse(s, ORIGIN, &m, &err);
    if (r == 0) {
        FUZZ_CHECK(err == NULL);
        check_model(&m);
    } else {
        FUZZ_CHECK(r == -EINVAL);
        FUZZ_CHECK(err != NULL && strncmp(err, ORIGIN ":", strlen(ORIGIN) + 1) == 0);
        FUZZ_CHECK(memcmp(&m, &untouched, sizeof(m)) == 0);
    }
    free(err);
    free(s);
    return 0;
}
