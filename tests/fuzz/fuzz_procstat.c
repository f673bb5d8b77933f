/* Fuzz target: sense/procstat.h, procstat_parse() of /proc/stat.
 *
 * The input is passed with its exact length and no NUL (ASan catches a
 * read past the end). Accepted: CPU ids unique and findable, and
 * utilisation between the sample and a copy one tick later in every
 * column is a set of shares in 0..100 % that add up. Refused: only
 * -EBADMSG, with *ret untouched. */
#include <errno.h>
#include <math.h>
#include <stdbool.h>

#include "fuzz.h"
#include "sense/procstat.h"

static bool pct_ok(double v)
{
    return isnan(v) || (v >= 0 && v <= 100.0 + 1e-9);
}

/* b = a with one more tick in every present column (unless it would reach
 * VAL_NONE); util(a, b) is then defined and its shares are sane. */
static void check_util(const struct procstat_cpu *a)
{
    struct procstat_cpu b = *a;
    bool any = false;
    for (int m = 0; m < _PROCSTAT_NMODES; m++) {
        if (a->ticks[m] < VAL_NONE - 1) {
            b.ticks[m]++;
            any = true;
        }
        double s = procstat_seconds(a, (enum procstat_mode)m);
        FUZZ_CHECK(a->ticks[m] == VAL_NONE ? isnan(s) : s >= 0);
    }
    struct procstat_util u;
    FUZZ_CHECK(procstat_util(a, a, &u) == -ENODATA); /* no tick passed */
    FUZZ_CHECK(procstat_util(NULL, a, &u) == -ENODATA);
    if (!any)
        return;
    int r = procstat_util(a, &b, &u);
    if (r == -ENODATA) /* only guest columns moved: no tick of CPU time */
        return;
    FUZZ_CHECK(r == 0);
    FUZZ_CHECK(pct_ok(u.busy_pct) && pct_ok(u.user_pct) && pct_ok(u.system_pct));
    FUZZ_CHECK(pct_ok(u.irq_pct) && pct_ok(u.iowait_pct) && pct_ok(u.steal_pct));
    FUZZ_CHECK(pct_ok(u.guest_pct) && pct_ok(u.idle_pct));
    FUZZ_CHECK(!isnan(u.busy_pct) && fabs(u.busy_cpus * 100 - u.busy_pct) < 1e-6);
    double whole = u.busy_pct + (isnan(u.idle_pct) ? 0 : u.idle_pct) +
                   (isnan(u.iowait_pct) ? 0 : u.iowait_pct) +
                   (isnan(u.steal_pct) ? 0 : u.steal_pct);
    FUZZ_CHECK(fabs(whole - 100) < 1e-6);
    /* b behind a: a counter went backwards, or only idle/iowait moved,
     * which may go back and count as no time */
    r = procstat_util(&b, a, &u);
    FUZZ_CHECK(r == -ERANGE || r == -ENODATA);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct procstat_sample s;
    memset(&s, 0xa5, sizeof(s));
    struct procstat_sample untouched = s;
    struct diags d = {0};
    int r = procstat_parse((const char *)data, size, &s, &d);
    if (r < 0) {
        FUZZ_CHECK(r == -EBADMSG);
        FUZZ_CHECK(memcmp(&s, &untouched, sizeof(s)) == 0);
        diags_free(&d);
        return 0;
    }
    FUZZ_CHECK(r == 0);
    FUZZ_CHECK(s.has_total || s.ncpus > 0);
    FUZZ_CHECK(s.ncpus == 0 || s.cpus != NULL);
    if (s.has_total) {
        FUZZ_CHECK(s.total.cpu == -1);
        check_util(&s.total);
    }
    for (unsigned i = 0; i < s.ncpus; i++) {
        FUZZ_CHECK(s.cpus[i].cpu >= 0);
        FUZZ_CHECK(procstat_find_cpu(&s, s.cpus[i].cpu) == &s.cpus[i]); /* unique */
        check_util(&s.cpus[i]);
    }
    double busy = procstat_busy_cpus(&s, &s);
    FUZZ_CHECK(isnan(busy) || busy == 0);
    FUZZ_CHECK(isnan(procstat_busy_cpus(&s, NULL)));
    procstat_sample_clear(&s);
    diags_free(&d);
    return 0;
}
