#include <errno.h>
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
#include "model/gpu_attrib.h"

#define AMD  "0000:03:00.0"
#define I915 "0000:83:00.0"

/* A client with one or two engines' busy ns (GPU_FDINFO_NONE: absent). */
static struct gpu_fdinfo_client client(const char *drv, const char *pdev, uint64_t id,
                                       uint64_t gfx_ns, uint64_t compute_ns, uint64_t cap)
{
    struct gpu_fdinfo_client c = {.client_id = id};
    snprintf(c.driver, sizeof(c.driver), "%s", drv);
    snprintf(c.pdev, sizeof(c.pdev), "%s", pdev);
    const char *names[2] = {"gfx", "compute"};
    uint64_t v[2] = {gfx_ns, compute_ns};
    for (size_t i = 0; i < 2; i++) {
        if (v[i] == GPU_FDINFO_NONE)
            continue;
        struct gpu_fdinfo_engine *e = &c.engines[c.nengines++];
        snprintf(e->name, sizeof(e->name), "%s", names[i]);
        e->busy_ns = v[i];
        e->cycles = e->total_cycles = GPU_FDINFO_NONE;
        e->capacity = cap;
    }
    return c;
}

/* The lines of GPU G, in order, as a reader adds them. */
static double lines_sum(const struct gpu_attrib_input *in, const struct gpu_attrib_result *r,
                        size_t g)
{
    double s = 0;
    for (size_t i = 0; i < in->nuses; i++)
        if (strcmp(in->uses[i].pdev, in->gpus[g].pdev) == 0)
            s += r->use_w[i];
    return s + r->gpu[g].unattributed_w + r->gpu[g].idle_w;
}

static void check_sum_rule(const struct gpu_attrib_input *in, const struct gpu_attrib_result *r)
{
    for (size_t g = 0; g < in->ngpus; g++) {
        const struct gpu_attrib_gpu_result *o = &r->gpu[g];
        if (!isfinite(in->gpus[g].watts)) {
            assert_true(isnan(o->sum_w) && isnan(o->idle_w) && isnan(o->unattributed_w));
            continue;
        }
        assert_true(o->sum_w == in->gpus[g].watts); /* to the last bit */
        assert_true(fabs(lines_sum(in, r, g) - in->gpus[g].watts) <=
                    1e-12 * in->gpus[g].watts + 1e-300);
        assert_true(o->idle_w >= 0 && o->unattributed_w >= 0);
    }
    for (size_t i = 0; i < in->nuses; i++)
        if (isfinite(r->use_w[i])) {
            assert_true(r->use_w[i] >= 0);
            assert_true(r->use_j[i] == r->use_w[i] * in->seconds);
        }
}

/* The sum rule on random inputs: GPUs of any size, any number of
 * processes, busy below and above the window, utilisation known or not. */
static void test_random_sum_rule(void **state)
{
    (void)state;
    srand(18);
    char pdevs[4][32];
    for (int g = 0; g < 4; g++)
        snprintf(pdevs[g], sizeof(pdevs[g]), "0000:%02x:00.0", g + 1);
    for (int round = 0; round < 20000; round++) {
        struct gpu_attrib_gpu gpus[4];
        struct gpu_attrib_use uses[40];
        size_t ngpus = 1 + (size_t)(rand() % 4), nuses = (size_t)(rand() % 40);
        double secs = 0.05 + (double)rand() / RAND_MAX * 20;
        for (size_t g = 0; g < ngpus; g++) {
            double mag = pow(10, rand() % 6 - 2);
            gpus[g] = (struct gpu_attrib_gpu){
                .pdev = pdevs[g],
                .watts = rand() % 17 == 0 ? NAN : (double)rand() / RAND_MAX * 700 * mag,
                .util = rand() % 3 == 0 ? NAN : (double)rand() / RAND_MAX,
            };
        }
        for (size_t i = 0; i < nuses; i++) {
            uses[i] =
                (struct gpu_attrib_use){.pid = (int32_t)(100 + i), .cgroup = i % 3 ? "/a" : NULL};
            snprintf(uses[i].pdev, sizeof(uses[i].pdev), "%s", pdevs[(size_t)rand() % ngpus]);
            uses[i].busy_s = rand() % 5 == 0 ? 0 : (double)rand() / RAND_MAX * secs / 3;
        }
        struct gpu_attrib_input in = {
            .seconds = secs, .ngpus = ngpus, .gpus = gpus, .nuses = nuses, .uses = uses};
        struct gpu_attrib_result r;
        assert_int_equal(gpu_attrib_compute(&in, &r), 0);
        check_sum_rule(&in, &r);
        /* the cgroups hold every process's watts */
        double cg = 0, procs = 0;
        for (size_t i = 0; i < r.ncgroups; i++)
            cg += r.cg[i].w;
        for (size_t g = 0; g < ngpus; g++)
            if (isfinite(r.gpu[g].procs_w))
                procs += r.gpu[g].procs_w;
        assert_true(fabs(cg - procs) <= 1e-9 * (procs + 1));
        gpu_attrib_result_clear(&r);
    }
}

/* 300 W, one process busy 40 % of the window, another 20 %, the GPU says
 * 75 %: 120 + 60 W to them, 15 % (45 W) unattributed, 25 % (75 W) idle. */
static void test_split(void **state)
{
    (void)state;
    struct gpu_attrib_gpu gpus[] = {{.pdev = AMD, .watts = 300, .util = 0.75}};
    struct gpu_attrib_use uses[] = {
        {.pid = 1, .cgroup = "/a", .pdev = AMD, .busy_s = 0.8},
        {.pid = 2, .cgroup = "/b", .pdev = AMD, .busy_s = 0.4},
    };
    struct gpu_attrib_input in = {.seconds = 2, .ngpus = 1, .gpus = gpus, .nuses = 2, .uses = uses};
    struct gpu_attrib_result r;
    assert_int_equal(gpu_attrib_compute(&in, &r), 0);
    check_sum_rule(&in, &r);
    assert_true(fabs(r.use_w[0] - 120) < 1e-9 && fabs(r.use_w[1] - 60) < 1e-9);
    assert_true(fabs(r.use_j[0] - 240) < 1e-9);
    assert_true(fabs(r.use_gpu_share[0] - 0.4) < 1e-12);
    assert_true(fabs(r.gpu[0].unattributed_w - 45) < 1e-9);
    assert_true(fabs(r.gpu[0].idle_w - 75) < 1e-9);
    assert_false(r.gpu[0].normalised);
    assert_int_equal(r.ncgroups, 2);
    assert_string_equal(r.cg[0].path, "/a");
    assert_true(fabs(r.cg[0].w - 120) < 1e-9);
    gpu_attrib_result_clear(&r);

    /* no utilisation from the GPU: the remainder is all idle */
    gpus[0].util = NAN;
    assert_int_equal(gpu_attrib_compute(&in, &r), 0);
    check_sum_rule(&in, &r);
    assert_true(r.gpu[0].unattributed_w == 0 && fabs(r.gpu[0].idle_w - 120) < 1e-9);
    gpu_attrib_result_clear(&r);

    /* busier than the window (two engine classes at once): normalised */
    uses[0].busy_s = 3;
    assert_int_equal(gpu_attrib_compute(&in, &r), 0);
    check_sum_rule(&in, &r);
    assert_true(r.gpu[0].normalised);
    assert_true(r.gpu[0].idle_w == 0 && r.gpu[0].unattributed_w == 0);
    assert_true(fabs(r.use_w[0] - 300 * 3 / 3.4) < 1e-9);
    gpu_attrib_result_clear(&r);
}

/* A GPU whose watts are unknown: the busy shares stand, no watts. */
static void test_unknown_watts(void **state)
{
    (void)state;
    struct gpu_attrib_gpu gpus[] = {{.pdev = AMD, .watts = NAN, .util = 0.5},
                                    {.pdev = I915, .watts = 80, .util = NAN}};
    struct gpu_attrib_use uses[] = {{.pid = 1, .pdev = AMD, .busy_s = 0.5},
                                    {.pid = 2, .pdev = I915, .busy_s = 0.25},
                                    {.pid = 3, .pdev = "0000:99:00.0", .busy_s = 1}};
    struct gpu_attrib_input in = {.seconds = 1, .ngpus = 2, .gpus = gpus, .nuses = 3, .uses = uses};
    struct gpu_attrib_result r;
    assert_int_equal(gpu_attrib_compute(&in, &r), 0);
    check_sum_rule(&in, &r);
    assert_true(isnan(r.use_w[0]) && isnan(r.use_j[0]));
    assert_true(fabs(r.use_gpu_share[0] - 0.5) < 1e-12);
    assert_true(isnan(r.gpu[0].idle_w));
    assert_true(fabs(r.use_w[1] - 20) < 1e-9);
    assert_true(isnan(r.use_w[2])); /* a GPU not in the list */
    assert_int_equal(r.gpu[0].nprocs, 1);
    gpu_attrib_result_clear(&r);
    /* bad input */
    in.seconds = 0;
    assert_int_equal(gpu_attrib_compute(&in, &r), -EINVAL);
    in.seconds = 1;
    uses[0].busy_s = -1;
    assert_int_equal(gpu_attrib_compute(&in, &r), -EINVAL);
}

/* Engine time from two reads: one process on two GPUs, a client dup'ed
 * into two processes' lists, one that exited, one opened in the window. */
static void test_busy_two_gpus(void **state)
{
    (void)state;
    struct gpu_fdinfo_client a1[] = {client("amdgpu", AMD, 4, 1000000000, 500000000, 1),
                                     client("i915", I915, 7, 0, GPU_FDINFO_NONE, 2)};
    struct gpu_fdinfo_client b1[] = {client("amdgpu", AMD, 4, 1600000000, 750000000, 1),
                                     client("i915", I915, 7, 800000000, GPU_FDINFO_NONE, 2),
                                     client("amdgpu", AMD, 11, 5000, 0, 1)};
    struct gpu_fdinfo_client a2[] = {client("amdgpu", AMD, 9, 0, 0, 1)};
    struct gpu_attrib_proc prev[] = {{.pid = 10, .cgroup = "/x", .nclients = 2, .clients = a1},
                                     {.pid = 20, .nclients = 1, .clients = a2}};
    struct gpu_attrib_proc cur[] = {{.pid = 10, .cgroup = "/x", .nclients = 3, .clients = b1}};
    struct gpu_attrib_use *u;
    size_t n;
    struct gpu_attrib_busy_stats st;
    assert_int_equal(gpu_attrib_busy(prev, 2, cur, 1, 1.0, &u, &n, &st), 0);
    assert_int_equal(n, 2); /* one use per (process, GPU) */
    assert_string_equal(u[0].pdev, AMD);
    assert_true(fabs(u[0].busy_s - 0.85) < 1e-12); /* gfx 0.6 + compute 0.25 */
    assert_string_equal(u[1].pdev, I915);
    assert_true(fabs(u[1].busy_s - 0.4) < 1e-12); /* 0.8 s over 2 engines */
    assert_string_equal(u[0].cgroup, "/x");
    assert_int_equal(st.fresh, 1); /* client 11: no earlier read */
    assert_int_equal(st.backwards, 0);

    /* pid 20 exited: not among the uses; the AMD GPU says 95 % busy, so
     * its share shows as unattributed, the sum rule holding */
    struct gpu_attrib_gpu gpus[] = {{.pdev = AMD, .watts = 231, .util = 0.95},
                                    {.pdev = I915, .watts = 81, .util = NAN}};
    struct gpu_attrib_input in = {.seconds = 1, .ngpus = 2, .gpus = gpus, .nuses = n, .uses = u};
    struct gpu_attrib_result r;
    assert_int_equal(gpu_attrib_compute(&in, &r), 0);
    check_sum_rule(&in, &r);
    assert_true(fabs(r.use_w[0] - 231 * 0.85) < 1e-9);
    assert_true(fabs(r.gpu[0].unattributed_w - 231 * 0.10) < 1e-9);
    assert_true(fabs(r.gpu[0].idle_w - 231 * 0.05) < 1e-9);
    assert_true(fabs(r.use_w[1] - 81 * 0.4) < 1e-9);
    assert_int_equal(r.ncgroups, 1);
    assert_true(fabs(r.cg[0].w - (231 * 0.85 + 81 * 0.4)) < 1e-9);
    assert_true(fabs(r.cg[0].busy_s - 1.25) < 1e-12);
    gpu_attrib_result_clear(&r);
    free(u);
}

/* A counter that went backwards (the driver reset the client's stats):
 * that engine's window is dropped and counted, the others stand. */
static void test_backwards(void **state)
{
    (void)state;
    struct gpu_fdinfo_client a[] = {client("amdgpu", AMD, 4, 9000000000, 100000000, 1)};
    struct gpu_fdinfo_client b[] = {client("amdgpu", AMD, 4, 2000000, 400000000, 1)};
    struct gpu_attrib_proc prev[] = {{.pid = 10, .nclients = 1, .clients = a}};
    struct gpu_attrib_proc cur[] = {{.pid = 10, .nclients = 1, .clients = b}};
    struct gpu_attrib_use *u;
    size_t n;
    struct gpu_attrib_busy_stats st;
    assert_int_equal(gpu_attrib_busy(prev, 1, cur, 1, 1.0, &u, &n, &st), 0);
    assert_int_equal(n, 1);
    assert_int_equal(st.backwards, 1);
    assert_true(fabs(u[0].busy_s - 0.3) < 1e-12);
    free(u);
    /* a reused pid whose client id is new: no earlier read, no window */
    b[0].client_id = 5;
    assert_int_equal(gpu_attrib_busy(prev, 1, cur, 1, 1.0, &u, &n, &st), 0);
    assert_int_equal(n, 0);
    assert_int_equal(st.fresh, 1);
    free(u);
}

/* xe: cycles over total cycles, times the window, over the capacity. */
static void test_cycles(void **state)
{
    (void)state;
    struct gpu_fdinfo_client a = {.client_id = 3, .nengines = 1}, b;
    snprintf(a.driver, sizeof(a.driver), "xe");
    snprintf(a.pdev, sizeof(a.pdev), "0000:c3:00.0");
    a.engines[0] = (struct gpu_fdinfo_engine){.name = "ccs",
                                              .busy_ns = GPU_FDINFO_NONE,
                                              .cycles = 1000,
                                              .total_cycles = 100000,
                                              .capacity = 4};
    b = a;
    b.engines[0].cycles += 20000; /* 2 of 4 engines busy all the window */
    b.engines[0].total_cycles += 10000;
    struct gpu_attrib_proc prev = {.pid = 1, .nclients = 1, .clients = &a};
    struct gpu_attrib_proc cur = {.pid = 1, .nclients = 1, .clients = &b};
    struct gpu_attrib_use *u;
    size_t n;
    assert_int_equal(gpu_attrib_busy(&prev, 1, &cur, 1, 2.0, &u, &n, NULL), 0);
    assert_int_equal(n, 1);
    /* 20000 cycles over 10000: two engines' worth, of 4: 0.5 × 2 s */
    assert_true(fabs(u[0].busy_s - 1.0) < 1e-12);
    free(u);
    b.engines[0].cycles = a.engines[0].cycles + 5000;
    assert_int_equal(gpu_attrib_busy(&prev, 1, &cur, 1, 2.0, &u, &n, NULL), 0);
    assert_true(fabs(u[0].busy_s - 0.25) < 1e-12); /* 0.5 / 4 × 2 */
    free(u);
}

/* NVML: by SM share where known, else the GPU's utilisation equally. */
static void test_nvml_uses(void **state)
{
    (void)state;
    int32_t pids[] = {5, 6, 7};
    double sm[] = {60, NAN, 10};
    struct gpu_attrib_use *u = NULL;
    size_t n = 0;
    bool equal;
    gpu_attrib_nvml_uses("0000:17:00.0", 0.9, pids, sm, 3, 2.0, &u, &n, &equal);
    assert_false(equal);
    assert_int_equal(n, 3);
    assert_true(fabs(u[0].busy_s - 1.2) < 1e-12 && u[1].busy_s == 0);
    double none[] = {NAN, NAN, NAN};
    gpu_attrib_nvml_uses("0000:18:00.0", 0.9, pids, none, 3, 2.0, &u, &n, &equal);
    assert_true(equal);
    assert_int_equal(n, 6);
    assert_true(fabs(u[3].busy_s - 0.6) < 1e-12);
    assert_string_equal(u[5].pdev, "0000:18:00.0");
    gpu_attrib_nvml_uses("0000:19:00.0", NAN, pids, none, 3, 2.0, &u, &n, &equal);
    assert_int_equal(n, 6); /* nothing to share */
    free(u);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_sum_rule), cmocka_unit_test(test_split),
        cmocka_unit_test(test_unknown_watts),   cmocka_unit_test(test_busy_two_gpus),
        cmocka_unit_test(test_backwards),       cmocka_unit_test(test_cycles),
        cmocka_unit_test(test_nvml_uses),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
