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

#include "host/drm_fd.h"
#include "host/host.h"
#include "sense/gpu.h"
#include "view/top_gpu.h"

#define UPTIME 86400.0

static struct host *open_gpu_fixture(void)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/gpu", getenv("WATT_FIXTURES"));
    struct host *h;
    assert_int_equal(host_open(path, &h), 0);
    return h;
}

static struct gpu_dev dev(const char *id, const char *pdev, const char *driver, const char *via)
{
    struct gpu_dev d = {.energy_j = NAN,
                        .power_w = NAN,
                        .busy_pct = NAN,
                        .pstate = -1,
                        .rpm_suspended_ms = UINT64_MAX,
                        .rpm_active_ms = UINT64_MAX};
    snprintf(d.id, sizeof(d.id), "%s", id);
    snprintf(d.pdev, sizeof(d.pdev), "%s", pdev);
    snprintf(d.driver, sizeof(d.driver), "%s", driver);
    snprintf(d.via, sizeof(d.via), "%s", via);
    return d;
}

/* The gpu fixture's three GPUs as the sampler would give them (the
 * generator's watts: mkgpu.py AMD_W, I915_W, XE_CARD_W and their _LATER),
 * and an NVIDIA GPU whose NVML lists processes without their utilisation. */
static void samples(struct gpu_sample *a, struct gpu_sample *b, struct gpu_proc *nv)
{
    a->n = b->n = 4;
    a->v = calloc(4, sizeof(*a->v));
    b->v = calloc(4, sizeof(*b->v));
    a->v[0] = b->v[0] = dev("card0", "0000:03:00.0", "amdgpu", "sysfs");
    a->v[0].power_w = 212, b->v[0].power_w = 231;
    a->v[0].busy_pct = 78, b->v[0].busy_pct = 91;
    a->v[1] = b->v[1] = dev("card1", "0000:83:00.0", "i915", "sysfs");
    a->v[1].energy_j = 74 * UPTIME, b->v[1].energy_j = 74 * UPTIME + 81;
    a->v[2] = b->v[2] = dev("card2", "0000:c3:00.0", "xe", "sysfs");
    a->v[2].energy_j = 118 * UPTIME, b->v[2].energy_j = 118 * UPTIME + 126;
    a->v[3] = b->v[3] = dev("nvml0", "0000:17:00.0", "nvidia", "nvml");
    b->v[3].power_w = 300, b->v[3].busy_pct = 50;
    nv[0] = (struct gpu_proc){.pid = 2004, .used_bytes = UINT64_MAX, .sm_util_pct = NAN};
    nv[1] = (struct gpu_proc){.pid = 2003, .used_bytes = UINT64_MAX, .sm_util_pct = NAN};
    b->v[3].nprocs = 2, b->v[3].procs = nv;
}

static const struct top_gpu_proc *proc(const struct top_gpu_out *o, int32_t pid)
{
    for (size_t i = 0; i < o->nprocs; i++)
        if (o->procs[i].pid == pid)
            return &o->procs[i];
    return NULL;
}

static void sum_rule(const struct top_gpu *g)
{
    double s = g->procs_w + g->unattributed_w + g->idle_w;
    assert_true(fabs(s - g->watts) <= 1e-12 * g->watts);
}

/* The DRM check: only the render-node fds are DRM, whatever else is open. */
static void test_drm_fds(void **state)
{
    (void)state;
    struct host *h = open_gpu_fixture();
    int *fds;
    size_t n;
    assert_int_equal(host_drm_fds(h, 2001, &fds, &n), 0);
    assert_int_equal(n, 3); /* 5, 9 and 12; not the tty 0 nor the file 3 */
    int sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += fds[i];
    assert_int_equal(sum, 5 + 9 + 12);
    free(fds);
    assert_int_equal(host_drm_fds(h, 2004, &fds, &n), 0);
    assert_int_equal(n, 0);
    free(fds);
    assert_true(host_drm_fds(h, 999999, &fds, &n) < 0);
    int32_t *pids;
    assert_int_equal(host_pids(h, &pids, &n), 0);
    assert_int_equal(n, 4);
    assert_int_equal(pids[0], 2001);
    free(pids);
    host_close(h);
}

/* One window of the fixture (watt-faults: one second later): hip_train's
 * gfx 600 ms + compute 250 ms, ffmpeg's render 420 ms, xe_compute idle. */
static void test_fixture_window(void **state)
{
    (void)state;
    struct host *h = open_gpu_fixture();
    struct gpu_sample a, b;
    struct gpu_proc nv[2];
    samples(&a, &b, nv);
    struct top_gpu_state *s = top_gpu_state_new();
    top_gpu_baseline(s, h, NULL);
    struct top_gpu_out o;
    top_gpu_collect(s, h, NULL, NULL, &a, &b, 1.0, &o);
    assert_int_equal(o.checked, 4);
    assert_int_equal(o.drm, 3); /* sshd holds no DRM fd: its fdinfo is never read */
    assert_int_equal(o.ngpus, 4);

    const struct top_gpu *amd = &o.gpus[0], *i915 = &o.gpus[1], *xe = &o.gpus[2];
    const struct top_gpu *nvg = &o.gpus[3];
    assert_true(fabs(amd->watts - 231) < 1e-9);
    assert_true(fabs(amd->procs_busy_pct - 85) < 1e-9);
    assert_true(fabs(amd->procs_w - 231 * 0.85) < 1e-9);
    /* the GPU says 91 %: 6 % busy no process explains, 9 % idle */
    assert_true(fabs(amd->unattributed_w - 231 * 0.06) < 1e-9);
    assert_true(fabs(amd->idle_w - 231 * 0.09) < 1e-9);
    sum_rule(amd);
    assert_true(fabs(i915->watts - 81) < 1e-6); /* the energy counter's delta */
    assert_true(fabs(i915->procs_w - 81 * 0.42) < 1e-6);
    assert_true(i915->unattributed_w == 0); /* no utilisation from i915 */
    sum_rule(i915);
    assert_true(fabs(xe->watts - 126) < 1e-6);
    assert_true(xe->procs_w == 0 && fabs(xe->idle_w - 126) < 1e-6);
    sum_rule(xe);
    assert_true(nvg->equal_shares);
    assert_true(fabs(nvg->procs_w - 150) < 1e-9 && fabs(nvg->idle_w - 150) < 1e-9);
    sum_rule(nvg);

    const struct top_gpu_proc *p = proc(&o, 2001);
    assert_non_null(p);
    assert_true(fabs(p->busy_pct - 85) < 1e-9);
    assert_true(fabs(p->w - 231 * 0.85) < 1e-9);
    assert_true(fabs(p->j - 231 * 0.85) < 1e-9);
    assert_string_equal(p->cgroup, "/system.slice/hip_train.service");
    p = proc(&o, 2003); /* xe idle, plus its equal NVML share */
    assert_true(fabs(p->busy_pct - 25) < 1e-9 && fabs(p->w - 75) < 1e-9);
    p = proc(&o, 2004); /* no DRM fd, but NVML lists it */
    assert_true(fabs(p->w - 75) < 1e-9);

    /* cgroups: every process's watts in exactly one */
    double cg = 0, procs = 0;
    for (size_t i = 0; i < o.ncgroups; i++)
        cg += o.cgroups[i].gpu_w;
    for (size_t g = 0; g < o.ngpus; g++)
        procs += o.gpus[g].procs_w;
    assert_true(fabs(cg - procs) < 1e-9);
    assert_int_equal(o.ncgroups, 4);
    assert_string_equal(o.cgroups[1].path, "/system.slice/hip_train.service");
    assert_non_null(o.note);
    assert_non_null(strstr(o.note, "share its utilisation equally"));
    top_gpu_out_clear(&o);

    /* no GPU: nothing read, nothing shown */
    struct gpu_sample none = {0};
    top_gpu_collect(s, h, NULL, NULL, &none, &none, 1.0, &o);
    assert_int_equal(o.ngpus, 0);
    assert_int_equal(o.checked, 0);
    top_gpu_out_clear(&o);
    top_gpu_state_free(s);
    free(a.v);
    free(b.v);
    host_close(h);
}

/* The first window (no baseline): no engine time yet, and said so. */
static void test_first_window(void **state)
{
    (void)state;
    struct host *h = open_gpu_fixture();
    struct gpu_sample a, b;
    struct gpu_proc nv[2];
    samples(&a, &b, nv);
    struct top_gpu_state *s = top_gpu_state_new();
    struct top_gpu_out o;
    top_gpu_collect(s, h, NULL, NULL, &a, &b, 1.0, &o);
    assert_int_equal(o.ngpus, 4);
    assert_true(o.gpus[0].procs_w == 0);
    assert_true(fabs(o.gpus[0].unattributed_w - 231 * 0.91) < 1e-9);
    assert_non_null(strstr(o.note, "from the next refresh"));
    top_gpu_out_clear(&o);
    top_gpu_state_free(s);
    free(a.v);
    free(b.v);
    host_close(h);
}

/* Only the processes that ran in the window, and the DRM holders of the
 * previous read, are checked: an idle process costs nothing. */
static void test_active_only(void **state)
{
    (void)state;
    struct host *h = open_gpu_fixture();
    struct gpu_sample a, b;
    struct gpu_proc nv[2];
    samples(&a, &b, nv);
    a.n = b.n = 3; /* no NVML GPU here */
    struct task_info t[4] = {{.pid = 2001}, {.pid = 2002}, {.pid = 2003}, {.pid = 2004}};
    struct tasks_snapshot all = {.n = 4, .t = t}, without_ffmpeg = {.n = 1, .t = t};
    struct top_gpu_state *s = top_gpu_state_new();
    /* the first read saw hip_train only (ffmpeg not yet started, say) */
    top_gpu_baseline(s, h, &without_ffmpeg);
    int32_t none[1];
    struct top_gpu_active idle = {.pids = none, .n = 0};
    struct top_gpu_out o;
    top_gpu_collect(s, h, &all, &idle, &a, &b, 1.0, &o);
    assert_int_equal(o.checked, 1); /* hip_train, a DRM holder; the rest idle */
    assert_int_equal(o.nprocs, 1);
    assert_int_equal(o.procs[0].pid, 2001);
    top_gpu_out_clear(&o);
    /* ffmpeg ran: checked, its client new (counted from the next window) */
    int32_t ran[] = {2002};
    struct top_gpu_active act = {.pids = ran, .n = 1};
    top_gpu_collect(s, h, &all, &act, &a, &b, 1.0, &o);
    assert_int_equal(o.checked, 2);
    assert_int_equal(o.drm, 2);
    assert_non_null(strstr(o.note, "opened in the window"));
    top_gpu_out_clear(&o);
    top_gpu_state_free(s);
    free(a.v);
    free(b.v);
    host_close(h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_drm_fds),
        cmocka_unit_test(test_fixture_window),
        cmocka_unit_test(test_first_window),
        cmocka_unit_test(test_active_only),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
