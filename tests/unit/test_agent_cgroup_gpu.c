/* The agent's per-cgroup GPU energy (agent/attrib.c) on the gpu fixture:
 * the window's split from view/top_gpu.c (the fixture's fdinfo, one
 * second apart through watt-faults, and hand-made GPU samples where the
 * GPU sampler is not built yet), folded into the counters. */
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

#include "agent/attrib.h"
#include "agent/metrics_writer.h"
#include "base/strbuf.h"
#include "base/util.h"
#include "host/host.h"
#include "sense/gpu.h"
#include "view/top.h"
#include "view/top_gpu.h"

#define UPTIME 86400.0

static struct gpu_dev dev(const char *id, const char *pdev, const char *driver)
{
    struct gpu_dev d = {.energy_j = NAN, .power_w = NAN, .busy_pct = NAN, .pstate = -1};
    snprintf(d.id, sizeof(d.id), "%s", id);
    snprintf(d.pdev, sizeof(d.pdev), "%s", pdev);
    snprintf(d.driver, sizeof(d.driver), "%s", driver);
    snprintf(d.via, sizeof(d.via), "sysfs");
    return d;
}

/* One frame as the collector's per-cgroup mode makes it: the GPU
 * cgroups, the GPUs' split, no CPU power. */
static struct top_frame *frame(struct host *h, struct top_gpu_state *s)
{
    struct gpu_dev av[3] = {dev("card0", "0000:03:00.0", "amdgpu"),
                            dev("card1", "0000:83:00.0", "i915"),
                            dev("card2", "0000:c3:00.0", "xe")};
    struct gpu_dev bv[3];
    memcpy(bv, av, sizeof(av));
    av[0].power_w = 212, bv[0].power_w = 231, bv[0].busy_pct = 91;
    av[1].energy_j = 74 * UPTIME, bv[1].energy_j = 74 * UPTIME + 81;
    av[2].energy_j = 118 * UPTIME, bv[2].energy_j = 118 * UPTIME + 126;
    struct gpu_sample a = {.n = 3, .v = av}, b = {.n = 3, .v = bv};
    struct top_gpu_out o;
    top_gpu_collect(s, h, NULL, NULL, &a, &b, 1.0, &o);
    struct top_frame *f = xcalloc(1, sizeof(*f));
    f->interval_s = 1;
    f->idle_w = NAN;
    f->gpus = o.gpus, f->ngpus = o.ngpus, o.gpus = NULL;
    f->cgroups = o.cgroups, f->ncgroups = o.ncgroups, o.cgroups = NULL, o.ncgroups = 0;
    for (size_t i = 0; i < f->ncgroups; i++)
        f->cgroups[i].power_w = f->cgroups[i].energy_j = NAN;
    top_gpu_out_clear(&o);
    return f;
}

static const struct agent_cgroup_series *series(const struct agent_attrib *a, const char *path)
{
    for (size_t i = 0; i < a->n; i++)
        if (streq(a->v[i].path, path))
            return &a->v[i];
    return NULL;
}

static void test_fixture_cgroups(void **state)
{
    (void)state;
    char path[4096];
    snprintf(path, sizeof(path), "%s/gpu", getenv("WATT_FIXTURES"));
    struct host *h;
    assert_int_equal(host_open(path, &h), 0);
    struct top_gpu_state *s = top_gpu_state_new();
    top_gpu_baseline(s, h, NULL);

    struct agent_attrib *a = xcalloc(1, sizeof(*a));
    a->top_n = 1; /* one slot: the biggest GPU cgroup; ffmpeg's and xe's in "other" */
    a->other.path = xstrdup("other");
    agent_attrib_fold(a, frame(h, s));
    assert_true(a->have_gpu);
    assert_int_equal(a->n, 1);
    const struct agent_cgroup_series *hip = series(a, "/system.slice/hip_train.service");
    assert_non_null(hip);
    assert_true(fabs(hip->gpu_j - 231 * 0.85) < 1e-9);
    assert_true(fabs(hip->gpu_busy_s - 0.85) < 1e-12);
    assert_true(fabs(a->other.gpu_j - 81 * 0.42) < 1e-6); /* ffmpeg; xe_compute was idle */
    assert_true(fabs(a->gpu_unattributed_j - 231 * 0.06) < 1e-9);
    /* the sum rule: the cgroups' GPU joules and the two lines are the GPUs' */
    double sum = hip->gpu_j + a->other.gpu_j + a->gpu_unattributed_j + a->gpu_idle_j;
    assert_true(fabs(sum - (231 + 81 + 126)) < 1e-6);
    assert_true(fabs(a->gpu_j - (231 + 81 + 126)) < 1e-6);

    /* a second window (the fixture's second snapshot is spent: no engine
     * time moves): the counters only grow, the rule still holds */
    agent_attrib_fold(a, frame(h, s));
    sum = hip->gpu_j + a->other.gpu_j + a->gpu_unattributed_j + a->gpu_idle_j;
    assert_true(fabs(sum - a->gpu_j) < 1e-6 * a->gpu_j);
    assert_true(fabs(hip->gpu_j - 231 * 0.85) < 1e-9);

    struct strbuf out = {0};
    struct mw w = {.out = &out};
    agent_attrib_render(&w, a);
    const char *text = strbuf_str(&out);
    assert_non_null(strstr(text, "# TYPE watt_cgroup_gpu_joules_total counter"));
    assert_non_null(
        strstr(text, "watt_cgroup_gpu_joules_total{cgroup=\"/system.slice/hip_train.service\"} "));
    assert_non_null(strstr(text, "watt_cgroup_gpu_busy_seconds_total{cgroup=\"other\"} "));
    assert_non_null(strstr(text, "watt_gpu_attributed_joules_total{line=\"idle\"} "));
    /* no node power in these frames: no CPU energy series */
    assert_null(strstr(text, "watt_cgroup_energy_joules_total{"));
    strbuf_free(&out);
    agent_attrib_free(a);
    top_gpu_state_free(s);
    host_close(h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixture_cgroups),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
