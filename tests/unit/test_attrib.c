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

#include "base/util.h"
#include "model/attrib.h"
#include "model/model.h"

/* The lines, summed in the order a reader would. */
static double lines_sum(const struct attrib_result *r)
{
    double s = r->idle_w + r->kernel_w + r->unaccounted_w;
    for (size_t i = 0; i < r->ntasks; i++)
        s += r->task_w[i];
    return s;
}

static void check_sums(const struct attrib_input *in, const struct attrib_result *r)
{
    assert_true(r->sum_w == in->node_w); /* to the last bit */
    assert_true(fabs(lines_sum(r) - in->node_w) <= 1e-9 * in->node_w);
    assert_true(r->idle_w >= 0 && r->kernel_w >= 0 && r->unaccounted_w >= 0);
    assert_true(fabs(r->idle_w + r->active_w - in->node_w) <= 1e-12 * in->node_w);
    double tasks = 0, cgs = 0;
    size_t procs = 0;
    for (size_t i = 0; i < r->ntasks; i++) {
        assert_true(r->task_w[i] >= 0);
        assert_true(r->task_j[i] == r->task_w[i] * in->seconds);
        tasks += r->task_w[i];
    }
    for (size_t i = 0; i < r->ncgroups; i++) {
        cgs += r->cg[i].w;
        procs += r->cg[i].nprocs;
        assert_true(fabs(r->cg[i].j - r->cg[i].w * in->seconds) <= 1e-9 * (r->cg[i].j + 1));
        if (i)
            assert_true(r->cg[i - 1].w >= r->cg[i].w);
    }
    assert_int_equal(procs, in->ntasks);
    assert_true(fabs(cgs - tasks) <= 1e-9 * (tasks + 1));
}

static void test_split(void **state)
{
    struct attrib_task t[] = {
        {.pid = 10, .cgroup = "/a", .cpu_s = 1.0, .ghz = 2.0},
        {.pid = 11, .cgroup = "/b", .cpu_s = 0.5, .ghz = 3.0}, /* a cycle costs the same */
        {.pid = 12, .cgroup = NULL, .cpu_s = 0, .ghz = 2.0},
        {.pid = 13, .cgroup = NULL, .cpu_s = NAN, .ghz = NAN},
        {.pid = 14, .cgroup = "/a", .cpu_s = -1, .ghz = 2.0},
    };
    struct attrib_input in = {.node_w = 100,
                              .measured = true,
                              .node_error_pct = NAN,
                              .idle_w = 40,
                              .seconds = 2,
                              .busy_cpu_s = 2.0,
                              .irq_cpu_s = 0.2,
                              .mean_ghz = 2.0,
                              .ntasks = ARRAY_SIZE(t),
                              .tasks = t};
    struct attrib_result r;
    assert_int_equal(attrib_compute(&in, &r), 0);
    /* weights: 1.0 + 0.75 (tasks) + 0.2 (irq) + 0.3 (busy nobody explains) */
    assert_float_equal(r.idle_w, 40, 1e-12);
    assert_float_equal(r.active_w, 60, 1e-12);
    assert_float_equal(r.task_w[0], 60 * 1.0 / 2.25, 1e-9);
    assert_float_equal(r.task_w[1], 60 * 0.75 / 2.25, 1e-9);
    assert_float_equal(r.task_w[2], 0, 0);
    assert_float_equal(r.task_w[3], 0, 0);
    assert_float_equal(r.task_w[4], 0, 0);
    assert_float_equal(r.kernel_w, 60 * 0.2 / 2.25, 1e-9);
    assert_float_equal(r.unaccounted_w, 60 * 0.3 / 2.25, 1e-9);
    assert_float_equal(r.task_j[0], 2 * 60 / 2.25, 1e-9);
    check_sums(&in, &r);
    /* cgroups by descending watts; the tasks without one together */
    assert_int_equal(r.ncgroups, 3);
    assert_string_equal(r.cg[0].path, "/a");
    assert_int_equal(r.cg[0].nprocs, 2);
    assert_float_equal(r.cg[0].w, r.task_w[0], 1e-12);
    assert_string_equal(r.cg[1].path, "/b");
    assert_string_equal(r.cg[2].path, "(unknown)");
    assert_int_equal(r.cg[2].nprocs, 2);
    assert_float_equal(r.cg[2].w, 0, 0);
    /* the error is stated */
    assert_float_equal(r.error_pct, 30, 0);
    assert_non_null(strstr(r.note, "measured"));
    assert_non_null(strstr(r.note, "effective frequency"));
    assert_non_null(strstr(r.note, "±30 %"));
    attrib_result_clear(&r);
    attrib_result_clear(&r); /* twice is fine */

    /* without frequencies, CPU time alone */
    in.mean_ghz = NAN;
    assert_int_equal(attrib_compute(&in, &r), 0);
    assert_float_equal(r.task_w[1] * 2, r.task_w[0], 1e-9);
    assert_null(strstr(r.note, "frequency"));
    check_sums(&in, &r);
    attrib_result_clear(&r);
}

static void test_estimated(void **state)
{
    struct attrib_task t[] = {{.pid = 1, .cgroup = "/x", .cpu_s = 1, .ghz = NAN}};
    struct attrib_input in = {.node_w = 80,
                              .node_error_pct = 50,
                              .idle_w = 50,
                              .seconds = 1,
                              .busy_cpu_s = 1,
                              .mean_ghz = NAN,
                              .ntasks = 1,
                              .tasks = t};
    struct attrib_result r;
    assert_int_equal(attrib_compute(&in, &r), 0);
    assert_float_equal(r.task_w[0], 30, 1e-12);
    assert_float_equal(r.unaccounted_w, 0, 0);
    assert_float_equal(r.error_pct, 80, 1e-12); /* the model's 50 plus the split's 30 */
    assert_non_null(strstr(r.note, "estimated"));
    assert_non_null(strstr(r.note, "±50 %"));
    assert_non_null(strstr(r.note, "±80 %"));
    check_sums(&in, &r);
    attrib_result_clear(&r);
    in.node_error_pct = NAN; /* a model without a stated error */
    assert_int_equal(attrib_compute(&in, &r), 0);
    assert_true(isnan(r.error_pct));
    attrib_result_clear(&r);
}

/* The idle floor: the model's at zero load when estimated; the meter's
 * watts times the model's idle share when measured. */
static void test_idle_floor(void **state)
{
    struct power_model m = {.idle_base_w = 100,
                            .idle_per_core_w = 2,
                            .active_per_core_w = 10,
                            .ref_ghz = 2,
                            .ghz_exponent = 0};
    assert_float_equal(attrib_idle_floor(&m, 4, 2, 2, NAN, false), 108, 1e-12);
    /* model: 108 idle of 128 at this load; the meter says 200 */
    assert_float_equal(attrib_idle_floor(&m, 4, 2, 2, 200, true), 200 * 108.0 / 128, 1e-9);
    assert_float_equal(attrib_idle_floor(&m, 4, 0, 2, 200, true), 200, 1e-9); /* all idle */
    assert_true(isnan(attrib_idle_floor(NULL, 4, 2, 2, 200, true)));
    assert_true(isnan(attrib_idle_floor(&m, 4, 2, 2, NAN, true)));
    struct power_model zero = {0};
    assert_float_equal(attrib_idle_floor(&zero, 4, 2, 2, 200, true), 0, 0);
    /* a frequency term changes the share, and the floor with it */
    m.ghz_exponent = 2;
    double at_ref = attrib_idle_floor(&m, 4, 2, 2, 200, true);
    double faster = attrib_idle_floor(&m, 4, 2, 4, 200, true);
    assert_true(faster < at_ref);
    assert_float_equal(faster, 200 * 108.0 / (108 + 20 * 4), 1e-9);
}

static void test_edges(void **state)
{
    struct attrib_task t[] = {{.pid = 1, .cgroup = "/x", .cpu_s = 0.5, .ghz = 2}};
    struct attrib_input base = {.node_w = 50,
                                .measured = true,
                                .idle_w = 20,
                                .seconds = 1,
                                .busy_cpu_s = 0.5,
                                .mean_ghz = 2,
                                .ntasks = 1,
                                .tasks = t};
    struct attrib_result r = {.node_w = 1234};
    /* refused, ret untouched */
    struct attrib_input in = base;
    double bad[] = {NAN, -1, INFINITY};
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        in = base, in.node_w = bad[i];
        assert_int_equal(attrib_compute(&in, &r), -EINVAL);
        in = base, in.idle_w = bad[i];
        assert_int_equal(attrib_compute(&in, &r), -EINVAL);
        in = base, in.seconds = bad[i];
        assert_int_equal(attrib_compute(&in, &r), -EINVAL);
        in = base, in.busy_cpu_s = bad[i];
        assert_int_equal(attrib_compute(&in, &r), -EINVAL);
        in = base, in.irq_cpu_s = bad[i];
        assert_int_equal(attrib_compute(&in, &r), -EINVAL);
    }
    in = base, in.tasks = NULL;
    assert_int_equal(attrib_compute(&in, &r), -EINVAL);
    struct attrib_task huge[] = {{.cpu_s = 1e308}, {.cpu_s = 1e308}};
    in = base, in.tasks = huge, in.ntasks = 2;
    assert_int_equal(attrib_compute(&in, &r), -EINVAL); /* weights overflow */
    assert_float_equal(r.node_w, 1234, 0);

    /* an idle floor above the node is clipped: everything is idle */
    in = base, in.idle_w = 70;
    assert_int_equal(attrib_compute(&in, &r), 0);
    assert_float_equal(r.idle_w, 50, 0);
    assert_float_equal(r.task_w[0], 0, 0);
    assert_non_null(strstr(r.note, "clipped"));
    check_sums(&in, &r);
    attrib_result_clear(&r);

    /* active power but no CPU time at all: unaccounted, and said so */
    struct attrib_task idle_task[] = {{.pid = 1, .cpu_s = 0}};
    in = base, in.busy_cpu_s = 0, in.tasks = idle_task;
    assert_int_equal(attrib_compute(&in, &r), 0);
    assert_float_equal(r.unaccounted_w, 30, 1e-12);
    assert_float_equal(r.kernel_w, 0, 0);
    assert_non_null(strstr(r.note, "no CPU time"));
    check_sums(&in, &r);
    attrib_result_clear(&r);

    /* a dark node: all zero, no tasks */
    in = base, in.node_w = 0, in.idle_w = 0, in.ntasks = 0, in.tasks = NULL;
    assert_int_equal(attrib_compute(&in, &r), 0);
    assert_true(r.sum_w == 0 && r.ncgroups == 0 && !r.task_w);
    attrib_result_clear(&r);

    /* all busy time is interrupts: all active power to the kernel line,
     * even when irq is reported above busy */
    in = base, in.irq_cpu_s = 0.7, in.ntasks = 0, in.tasks = NULL;
    assert_int_equal(attrib_compute(&in, &r), 0);
    assert_float_equal(r.kernel_w, 30, 1e-12);
    check_sums(&in, &r);
    attrib_result_clear(&r);
}

/* Processes' ticks can add up to more than /proc/stat's busy time: the
 * shares are normalised, nothing is unaccounted, and the note says so. */
static void test_normalise(void **state)
{
    struct attrib_task t[] = {{.pid = 1, .cgroup = "/a", .cpu_s = 0.8, .ghz = NAN},
                              {.pid = 2, .cgroup = "/b", .cpu_s = 0.6, .ghz = NAN}};
    struct attrib_input in = {.node_w = 25,
                              .measured = true,
                              .idle_w = 10,
                              .seconds = 1,
                              .busy_cpu_s = 1.0,
                              .irq_cpu_s = 0.1,
                              .mean_ghz = NAN,
                              .ntasks = 2,
                              .tasks = t};
    struct attrib_result r;
    assert_int_equal(attrib_compute(&in, &r), 0);
    assert_float_equal(r.unaccounted_w, 0, 0);
    assert_float_equal(r.kernel_w, 15 * 0.1 / 1.5, 1e-12);
    assert_float_equal(r.task_w[0], 15 * 0.8 / 1.5, 1e-12);
    assert_float_equal(r.task_w[1], 15 * 0.6 / 1.5, 1e-12);
    assert_non_null(strstr(r.note, "normalised"));
    check_sums(&in, &r);
    attrib_result_clear(&r);
    /* within tick noise (under 1 %): no word about it */
    t[1].cpu_s = 0.105;
    assert_int_equal(attrib_compute(&in, &r), 0);
    assert_null(strstr(r.note, "normalised"));
    attrib_result_clear(&r);
}

static uint64_t rng_state;

static uint64_t rng(void)
{
    uint64_t x = rng_state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return rng_state = x;
}

/* A double in [0, 1), sometimes exactly 0. */
static double unit(void)
{
    return rng() % 16 == 0 ? 0 : (double)(rng() >> 11) / 9007199254740992.0;
}

/* Many random inputs (seeded): the lines always add up to the node's
 * watts, to the last bit, and the cgroups to the processes. */
static void test_random_exact(void **state)
{
    static const char *const cgs[] = {"/system.slice/a", "/system.slice/b", "/user.slice", "/",
                                      NULL};
    struct attrib_task t[64];
    rng_state = 0x9e3779b97f4a7c15ULL;
    for (int iter = 0; iter < 20000; iter++) {
        size_t n = rng() % ARRAY_SIZE(t);
        double scale = pow(10, (double)(rng() % 12) - 3); /* 1 mW .. 100 kW */
        struct attrib_input in = {.node_w = scale * unit(),
                                  .measured = rng() % 2,
                                  .node_error_pct = rng() % 3 ? 25 : NAN,
                                  .seconds = unit() * 10,
                                  .busy_cpu_s = unit() * 8,
                                  .mean_ghz = rng() % 4 ? 1 + 3 * unit() : NAN,
                                  .ntasks = n,
                                  .tasks = n ? t : NULL};
        in.idle_w = in.node_w * unit() * 1.2; /* sometimes above the node */
        in.irq_cpu_s = in.busy_cpu_s * unit() * 0.3;
        for (size_t i = 0; i < n; i++)
            t[i] = (struct attrib_task){.pid = (int32_t)i + 1,
                                        .cgroup = cgs[rng() % ARRAY_SIZE(cgs)],
                                        .cpu_s = rng() % 8 ? unit() * in.busy_cpu_s / 4 : -unit(),
                                        .ghz = rng() % 5 ? 0.8 + 4 * unit() : NAN};
        struct attrib_result r;
        assert_int_equal(attrib_compute(&in, &r), 0);
        if (r.sum_w != in.node_w)
            fail_msg("iteration %d: sum %.17g != node %.17g", iter, r.sum_w, in.node_w);
        check_sums(&in, &r);
        attrib_result_clear(&r);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_split),      cmocka_unit_test(test_estimated),
        cmocka_unit_test(test_idle_floor), cmocka_unit_test(test_edges),
        cmocka_unit_test(test_normalise),  cmocka_unit_test(test_random_exact),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
