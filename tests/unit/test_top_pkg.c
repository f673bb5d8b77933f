/* watt top's package rows (view/top_pkg.c) and how they print
 * (cli/top_view.c, top_out.c): the cstate PMUs' package and core
 * C-states from two recorded readings, and the fallback to the mean of
 * the package's CPUs with the sampler's reason. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* cmocka.h needs stdarg, stddef, stdint and setjmp first */
#include <cmocka.h>

#include "base/util.h"
#include "cli/top_view.h"
#include "sense/cstate_pmu.h"
#include "sense/sampler.h"
#include "view/top_pkg.h"

#define assert_near(a, b, eps) assert_true(fabs((a) - (b)) <= (eps))

/* Package 0 (CPUs 0, 1) read on CPU 0, package 1 (CPUs 2, 3) on CPU 2;
 * 1 s at a 2.4 GHz TSC: package 0 12 % PC2 and 70 % PC6, package 1 in
 * PC0; core 0 of package 0 50 % CC6, core 1 30 %; package 1's core unit
 * not read in the first sample (no CC row for it). */
static struct cstate_pmu_unit pkg_units[2] = {
    {.cpu = 0, .package = 0, .core = -1},
    {.cpu = 2, .package = 1, .core = -1},
};
static struct cstate_pmu_unit core_units[3] = {
    {.cpu = 0, .package = 0, .core = 0},
    {.cpu = 1, .package = 0, .core = 1},
    {.cpu = 2, .package = 1, .core = 0},
};
static uint64_t pc0[] = {100, 200, 300, 400}, pt0[] = {5000000000ull, 5000000000ull};
static uint64_t pc1[] = {100 + 288000000, 200 + 1680000000, 300, 400};
static uint64_t pt1[] = {7400000000ull, 7400000000ull};
static uint64_t cc0[] = {0, 0, VAL_NONE}, ct0[] = {5000000000ull, 5000000000ull, 5000000000ull};
static uint64_t cc1[] = {1200000000, 720000000, 5},
                ct1[] = {7400000000ull, 7400000000ull, 7400000000ull};

static void reading(struct cstate_pmu_sample *s, uint64_t *pc, uint64_t *pt, uint64_t *cc,
                    uint64_t *ct)
{
    *s = (struct cstate_pmu_sample){0};
    s->r[CSTATE_PMU_PKG].pmu = (struct cstate_pmu){.present = true,
                                                   .name = "cstate_pkg",
                                                   .nevents = 2,
                                                   .ev = {{"c2", 2, 0}, {"c6", 6, 2}},
                                                   .nunits = 2,
                                                   .units = pkg_units};
    s->r[CSTATE_PMU_PKG].counts =
        (struct cstate_pmu_counts){.nunits = 2, .nevents = 2, .counts = pc, .tsc = pt};
    s->r[CSTATE_PMU_CORE].pmu = (struct cstate_pmu){.present = true,
                                                    .name = "cstate_core",
                                                    .nevents = 1,
                                                    .ev = {{"c6", 6, 2}},
                                                    .nunits = 3,
                                                    .units = core_units};
    s->r[CSTATE_PMU_CORE].counts =
        (struct cstate_pmu_counts){.nunits = 3, .nevents = 1, .counts = cc, .tsc = ct};
}

struct fx {
    struct sense sense;
    struct sample a, b;
    struct cstate_pmu_sample pa, pb;
    int package_ids[2];
    struct topo_cpu tcpu[4];
    struct top_cstate st[4][2];
    struct top_cpu cpus[4];
    struct top_frame f;
    struct report_ctx c;
};

/* CPU i: busy 10 * (i + 1) %, C1 5 %, C6 80 - 10 * i %. */
static void setup(struct fx *x)
{
    memset(x, 0, sizeof(*x));
    reading(&x->pa, pc0, pt0, cc0, ct0);
    reading(&x->pb, pc1, pt1, cc1, ct1);
    x->a.cstate_pmu = &x->pa;
    x->b.cstate_pmu = &x->pb;
    x->package_ids[0] = 0;
    x->package_ids[1] = 1;
    for (int i = 0; i < 4; i++) {
        x->tcpu[i] = (struct topo_cpu){.present = true, .online = true, .package = i / 2};
        snprintf(x->st[i][0].name, sizeof(x->st[i][0].name), "C1");
        x->st[i][0].residency_pct = 5;
        snprintf(x->st[i][1].name, sizeof(x->st[i][1].name), "C6");
        x->st[i][1].residency_pct = 80 - 10 * i;
        x->cpus[i] =
            (struct top_cpu){.cpu = i, .busy_pct = 10 * (i + 1), .nstates = 2, .st = x->st[i]};
    }
    x->b.topo =
        (struct topology){.ncpu = 4, .cpu = x->tcpu, .npackages = 2, .package_ids = x->package_ids};
    x->f = (struct top_frame){.ncpus_rows = 4, .cpus = x->cpus};
    for (int i = 0; i < _SAMPLER_MAX; i++)
        x->sense.usable[i] = 1;
    x->c = (struct report_ctx){
        .sense = &x->sense, .a = &x->a, .b = &x->b, .cur = &x->b, .interval_s = 1.0};
}

static const struct top_pkg_state *state(const struct top_pkg *p, const char *name)
{
    for (size_t k = 0; k < p->nstates; k++)
        if (streq(p->st[k].name, name))
            return &p->st[k];
    return NULL;
}

static void test_pmu(void **unused)
{
    (void)unused;
    struct fx x;
    setup(&x);
    top_build_pkgs(&x.f, &x.c);
    assert_int_equal(x.f.npkgs, 2);
    const struct top_pkg *p0 = &x.f.pkgs[0], *p1 = &x.f.pkgs[1];
    assert_true(p0->pmu && p1->pmu);
    assert_int_equal(p0->ncpus, 2);
    assert_near(p0->busy_pct, 15, 1e-9);
    assert_near(state(p0, "PC2")->residency_pct, 12, 1e-9);
    assert_near(state(p0, "PC6")->residency_pct, 70, 1e-9);
    assert_near(state(p0, "CC6")->residency_pct, 40, 1e-9); /* (50 + 30) / 2 */
    assert_near(state(p1, "PC6")->residency_pct, 0, 1e-9);
    assert_null(state(p1, "CC6")); /* its one core not read in both */
    assert_null(state(p0, "C6"));  /* no cpuidle mean beside the PMU */
    char cells[TOP_MAX_COLS][TOP_CELL];
    top_view_row(&x.f, TOP_VIEW_PKGS, 0, false, 80, cells);
    assert_string_equal(cells[3], "pmu");
    assert_string_equal(cells[4], "PC2 12.0  PC6 70.0  CC6 40.0");
    free(x.f.pkgs);
}

/* The PMU could not open its counters: every package is its CPUs' mean,
 * and the row and JSON say so with the reason. */
static void test_fallback(void **unused)
{
    (void)unused;
    struct fx x;
    setup(&x);
    x.pb.r[CSTATE_PMU_PKG].pmu.why =
        (char *)"cannot open the c2 counter on CPU 0: Permission denied";
    top_build_pkgs(&x.f, &x.c);
    const struct top_pkg *p1 = &x.f.pkgs[1];
    assert_false(p1->pmu);
    assert_string_equal(p1->why, "cannot open the c2 counter on CPU 0: Permission denied");
    assert_near(state(p1, "C6")->residency_pct, 55, 1e-9); /* (60 + 50) / 2 */
    assert_near(state(p1, "C1")->residency_pct, 5, 1e-9);
    assert_null(state(p1, "PC6"));
    char cells[TOP_MAX_COLS][TOP_CELL];
    top_view_row(&x.f, TOP_VIEW_PKGS, 1, false, 80, cells);
    assert_string_equal(cells[3], "cpuidle mean");
    assert_string_equal(cells[4], "C1 5.0  C6 55.0");
    free(x.f.pkgs);

    /* no PMU sample at all: the sampler's reason */
    setup(&x);
    x.b.cstate_pmu = NULL;
    x.sense.usable[SAMPLER_CSTATE_PMU] = 0;
    x.sense.why[SAMPLER_CSTATE_PMU] = (char *)"no cstate_core or cstate_pkg perf PMU";
    top_build_pkgs(&x.f, &x.c);
    assert_string_equal(x.f.pkgs[0].why, "no cstate_core or cstate_pkg perf PMU");
    assert_near(state(&x.f.pkgs[0], "C6")->residency_pct, 75, 1e-9);
    free(x.f.pkgs);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pmu),
        cmocka_unit_test(test_fallback),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
