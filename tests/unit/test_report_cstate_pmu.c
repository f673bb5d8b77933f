/* The report's package C-states (view/report_cstate_pmu.c) from two
 * recorded readings of the cstate PMUs: the "pmu" source, its numbers and
 * text, and each reason a package falls back to the mean of its CPUs. */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* cmocka.h needs stdarg, stddef, stdint and setjmp first */
#include <cmocka.h>

#include "base/strbuf.h"
#include "base/util.h"
#include "sense/cstate_pmu.h"
#include "sense/sampler.h"
#include "view/report_cstate_pmu.h"

#define assert_near(a, b, eps) assert_true(fabs((a) - (b)) <= (eps))

/* Two packages read on CPUs 0 and 10, events pc2 and pc6, 1 s at a
 * 2.4 GHz TSC between the readings: package 0 spent 12 % in PC2 and 70 %
 * in PC6; package 1 stayed in PC0. */
static struct cstate_pmu_unit units[2] = {
    {.cpu = 0, .package = 0, .core = -1},
    {.cpu = 10, .package = 1, .core = -1},
};
static uint64_t c0[] = {100, 200, 300, 400}, t0[] = {5000000000ull, 5000000200ull};
static uint64_t c1[] = {100 + 288000000, 200 + 1680000000, 300, 400};
static uint64_t t1[] = {5000000000ull + 2400000000ull, 5000000200ull + 2400000000ull};

static void reading(struct cstate_pmu_sample *s, uint64_t *counts, uint64_t *tsc)
{
    *s = (struct cstate_pmu_sample){0};
    struct cstate_pmu *p = &s->r[CSTATE_PMU_PKG].pmu;
    *p = (struct cstate_pmu){.present = true,
                             .name = "cstate_pkg",
                             .nevents = 2,
                             .ev = {{"c2", 2, 0}, {"c6", 6, 2}},
                             .nunits = 2,
                             .units = units};
    s->r[CSTATE_PMU_PKG].counts =
        (struct cstate_pmu_counts){.nunits = 2, .nevents = 2, .counts = counts, .tsc = tsc};
}

struct fx {
    struct sense sense;
    struct sample a, b;
    struct cstate_pmu_sample pa, pb;
    int package_ids[2];
    struct report_ctx c;
};

static void setup_fx(struct fx *f)
{
    memset(f, 0, sizeof(*f));
    reading(&f->pa, c0, t0);
    reading(&f->pb, c1, t1);
    f->a.cstate_pmu = &f->pa;
    f->b.cstate_pmu = &f->pb;
    f->package_ids[0] = 0;
    f->package_ids[1] = 1;
    f->b.topo.npackages = 2;
    f->b.topo.package_ids = f->package_ids;
    for (int i = 0; i < _SAMPLER_MAX; i++)
        f->sense.usable[i] = 1;
    f->c = (struct report_ctx){
        .sense = &f->sense, .a = &f->a, .b = &f->b, .cur = &f->b, .interval_s = 1.0};
}

static void test_measured(void **unused)
{
    (void)unused;
    struct fx f;
    setup_fx(&f);
    double pct[CSTATE_PMU_MAX_EVENTS];
    const struct cstate_pmu *p = NULL;
    const char *why = NULL;
    assert_int_equal(report_pkg_pmu(&f.c, 0, pct, &p, &why), 2);
    assert_near(pct[0], 12.0, 1e-9);
    assert_near(pct[1], 70.0, 1e-9);
    assert_string_equal(p->ev[1].state, "c6");
    assert_int_equal(report_pkg_pmu(&f.c, 1, pct, &p, &why), 2);
    assert_near(pct[0], 0.0, 0);
    assert_near(pct[1], 0.0, 0);
    /* a package the PMU has no CPU for */
    assert_int_equal(report_pkg_pmu(&f.c, 7, pct, &p, &why), 0);
    assert_string_equal(why, "no CPU of this package in the PMU's cpumask");

    struct strbuf out = {0};
    report_cstate_pmu_text(&f.c, &out);
    assert_string_equal(out.s, "  package C-states (cstate_pkg PMU, % of the interval):\n"
                               "    pkg0  PC2  12.0  PC6  70.0\n"
                               "    pkg1  PC2   0.0  PC6   0.0\n");
    strbuf_free(&out);
}

static void test_fallbacks(void **unused)
{
    (void)unused;
    struct fx f;
    double pct[CSTATE_PMU_MAX_EVENTS];
    const struct cstate_pmu *p = NULL;
    const char *why = NULL;

    /* one snapshot */
    setup_fx(&f);
    f.c.b = NULL;
    f.c.cur = &f.a;
    f.a.topo = f.b.topo;
    assert_int_equal(report_pkg_pmu(&f.c, 0, pct, &p, &why), 0);
    assert_non_null(strstr(why, "one snapshot"));

    /* a recorded root: the PMU is described but its counters are not read */
    setup_fx(&f);
    f.pb.r[CSTATE_PMU_PKG].pmu.why = (char *)"needs the live kernel";
    assert_int_equal(report_pkg_pmu(&f.c, 0, pct, &p, &why), 0);
    assert_string_equal(why, "needs the live kernel");

    /* a counter that went backwards */
    setup_fx(&f);
    uint64_t back[] = {99, 200 + 1680000000, 300, 400};
    f.pb.r[CSTATE_PMU_PKG].counts.counts = back;
    assert_int_equal(report_pkg_pmu(&f.c, 0, pct, &p, &why), 0);
    assert_non_null(strstr(why, "went backwards"));
    assert_int_equal(report_pkg_pmu(&f.c, 1, pct, &p, &why), 2); /* the other is fine */

    /* cstate_die: two dies of package 0, each its own residency */
    setup_fx(&f);
    struct cstate_pmu_unit dies[2] = {{.cpu = 0, .package = 0, .core = -1},
                                      {.cpu = 5, .package = 0, .core = -1}};
    f.pb.r[CSTATE_PMU_PKG].pmu.units = dies;
    assert_int_equal(report_pkg_pmu(&f.c, 0, pct, &p, &why), 0);
    assert_non_null(strstr(why, "counted per die"));

    /* no package PMU, only the core one */
    setup_fx(&f);
    f.pb.r[CSTATE_PMU_PKG].pmu.present = false;
    assert_int_equal(report_pkg_pmu(&f.c, 0, pct, &p, &why), 0);
    assert_string_equal(why, "no cstate_pkg perf PMU on this machine");

    /* the sampler not usable: its reason, short in the text */
    setup_fx(&f);
    f.b.cstate_pmu = NULL;
    f.sense.usable[SAMPLER_CSTATE_PMU] = 0;
    f.sense.why[SAMPLER_CSTATE_PMU] = (char *)"no cstate_core or cstate_pkg perf PMU";
    assert_int_equal(report_pkg_pmu(&f.c, 0, pct, &p, &why), 0);
    assert_string_equal(why, "no cstate_core or cstate_pkg perf PMU");
    struct strbuf out = {0};
    report_cstate_pmu_text(&f.c, &out);
    assert_string_equal(out.s, "  package C-states: not measured: no cstate_pkg perf PMU (see "
                               "\"Not measured here\")\n");
    strbuf_free(&out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_measured),
        cmocka_unit_test(test_fallbacks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
