/* sense/gpu.c: the GPU sampler on the generated `gpu` root
 * (tests/fixtures/gen/mkgpu.py) alone and with the NVML double
 * (tests/helpers/nvml_double.c), and gpu_power()'s differencing. */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* cmocka.h needs stdarg, stddef, stdint and setjmp first */
#include <cmocka.h>

#include "base/util.h"
#include "sense/gpu.h"
#include "sense/gpu_nvml.h"
#include "sense/sampler.h"

static char script_path[] = "/tmp/watt-gpu-script-XXXXXX";

static void use_script(const char *text)
{
    int fd = mkstemp(script_path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    setenv("WATT_NVML_SCRIPT", script_path, 1);
    const char *lib = getenv("WATT_NVML_DOUBLE");
    assert_non_null(lib);
    setenv(GPU_NVML_ENV_LIBRARY, lib, 1);
}

static void done_script(void)
{
    unlink(script_path);
    strcpy(script_path, "/tmp/watt-gpu-script-XXXXXX");
    unsetenv(GPU_NVML_ENV_LIBRARY);
    unsetenv("WATT_NVML_SCRIPT");
}

static struct host *open_gpu_fixture(void)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/gpu", getenv("WATT_FIXTURES"));
    struct host *h;
    assert_int_equal(host_open(path, &h), 0);
    return h;
}

static void near(double got, double want)
{
    if (!(fabs(got - want) < 0.01))
        fail_msg("got %f, want %f", got, want);
}

static const struct power_reading *reading(const struct power_readings *r, const char *dom)
{
    for (size_t i = 0; i < r->n; i++)
        if (streq(r->v[i].domain, dom))
            return &r->v[i];
    return NULL;
}

static bool has_diag(const struct diags *d, const char *needle)
{
    for (size_t i = 0; i < d->n; i++)
        if (strstr(d->v[i].what, needle) || strstr(d->v[i].where, needle))
            return true;
    return false;
}

/* Four cards, no NVML: each read from sysfs; the nvidia card has its
 * runtime PM and nothing else. */
static void test_sysfs(void **state)
{
    (void)state;
    struct host *h = open_gpu_fixture();
    struct sense *se;
    assert_int_equal(sense_open(h, &se), 0);
    assert_true(se->usable[SAMPLER_GPU]);
    struct sample *a, *b;
    assert_int_equal(sense_sample(se, &a), 0);
    assert_int_equal(sense_sample(se, &b), 0);
    const struct gpu_sample *g = a->gpu;
    assert_non_null(g);
    assert_int_equal(g->n, 4);

    const struct gpu_dev *amd = gpu_find_pdev(g, "0000:03:00.0");
    assert_non_null(amd);
    assert_string_equal(amd->id, "card0");
    assert_string_equal(amd->driver, "amdgpu");
    assert_string_equal(amd->via, "sysfs");
    assert_string_equal(amd->hwmon, "hwmon0");
    near(amd->power_w, 212);
    assert_true(isnan(amd->energy_j));
    near(amd->cap_w, 300);
    near(amd->cap_min_w, 0);
    near(amd->cap_max_w, 300);
    near(amd->busy_pct, 78);
    near(amd->mem_busy_pct, 31);
    near(amd->core_mhz, 1700);
    near(amd->mem_mhz, 1600);
    near(amd->temp_c, 47);
    assert_string_equal(amd->perf_level, "auto");
    assert_string_equal(amd->rpm_control, "auto");
    assert_string_equal(amd->rpm_status, "active");
    assert_true(amd->rpm_active_ms != VAL_NONE);

    const struct gpu_dev *i915 = gpu_find_pdev(g, "0000:83:00.0");
    assert_non_null(i915);
    assert_string_equal(i915->id, "card1");
    near(i915->cap_w, 150);
    near(i915->cap_max_w, 150); /* power1_rated_max */
    near(i915->core_mhz, 1650);
    assert_false(isnan(i915->energy_j));
    assert_true(isnan(i915->busy_pct));

    const struct gpu_dev *xe = gpu_find_pdev(g, "0000:c3:00.0");
    assert_non_null(xe);
    near(xe->cap_w, 190); /* the card channel, not the package's 150 */
    near(xe->core_mhz, 2850);

    const struct gpu_dev *nv = gpu_find_pdev(g, "0000:19:00.0");
    assert_non_null(nv);
    assert_string_equal(nv->driver, "nvidia");
    assert_string_equal(nv->rpm_control, "on");
    assert_string_equal(nv->hwmon, "");
    assert_true(isnan(nv->power_w));

    /* amdgpu: the driver's reading of the later sample; i915, xe: the
     * energy counters over the second; nvidia: no figure, no reading */
    struct power_readings r = {0};
    struct diags d = {0};
    assert_int_equal(gpu_power(a->gpu, b->gpu, 1.0, &r, &d), 3);
    assert_int_equal(d.n, 0);
    const struct power_reading *p = reading(&r, "card0");
    assert_non_null(p);
    near(p->watts, 231);
    assert_true(isnan(p->delta_j));
    assert_string_equal(p->source, "gpu");
    assert_string_equal(p->via, "sysfs");
    assert_int_equal(p->scope, POWER_SCOPE_DEVICE);
    near(reading(&r, "card1")->watts, 81);
    near(reading(&r, "card1")->delta_j, 81);
    near(reading(&r, "card2")->watts, 126);
    assert_null(reading(&r, "card3"));
    near(gpu_watts(a->gpu, b->gpu, 1.0, "0000:c3:00.0"), 126);
    assert_true(isnan(gpu_watts(a->gpu, b->gpu, 1.0, "0000:19:00.0")));
    assert_true(isnan(gpu_watts(a->gpu, b->gpu, 1.0, "0000:99:00.0")));
    power_readings_free(&r);
    diags_free(&d);
    sample_free(a);
    sample_free(b);
    sense_close(se);
    host_close(h);
}

/* A recorded root without $WATT_NVML_LIBRARY never loads the driver's NVML;
 * an empty root says why there is no GPU at all. */
static void test_probe_reason(void **state)
{
    (void)state;
    char dir[] = "/tmp/watt-gpu-empty-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char sys[64];
    snprintf(sys, sizeof(sys), "%s/sys", dir);
    assert_int_equal(mkdir(sys, 0755), 0);
    unsetenv(GPU_NVML_ENV_LIBRARY);
    struct host *h;
    assert_int_equal(host_open(dir, &h), 0);
    void *st = NULL;
    char *why = NULL;
    assert_int_equal(gpu_sampler.probe(h, &st, &why), 0);
    assert_null(st);
    assert_non_null(why);
    assert_non_null(strstr(why, "no DRM card with a GPU driver and no NVML: "));
    assert_non_null(strstr(why, "recorded root"));
    free(why);

    /* with the library named, NVML's own reason */
    setenv(GPU_NVML_ENV_LIBRARY, "/nonexistent/libnvidia-ml.so.1", 1);
    why = NULL;
    assert_int_equal(gpu_sampler.probe(h, &st, &why), 0);
    assert_non_null(strstr(why, "/nonexistent/libnvidia-ml.so.1 not found"));
    free(why);
    unsetenv(GPU_NVML_ENV_LIBRARY);
    host_close(h);
    rmdir(sys);
    rmdir(dir);
}

/* NVML's H100 at 00000000:19:00.0 is the nvidia card of sysfs: listed
 * once, as nvml0, with the card's runtime PM. A second GPU falls off the
 * bus at the second sample: lost, a problem line, no reading, and the
 * first still reads. */
#define H100                         \
    "count 2\n"                      \
    "name 0 NVIDIA H100 80GB HBM3\n" \
    "bus 0 00000000:19:00.0\n"       \
    "power 0 305000 298000\n"        \
    "energy 0 5000000 5300000\n"     \
    "limit 0 700000\n"               \
    "limit_range 0 200000/700000\n"  \
    "util 0 97/41\n"                 \
    "clock_sm 0 1980\n"              \
    "clock_mem 0 2619\n"             \
    "pstate 0 0\n"                   \
    "temp 0 61\n"                    \
    "procs 0 4242:1073741824\n"      \
    "name 1 NVIDIA H100 80GB HBM3\n" \
    "bus 1 00000000:1A:00.0\n"       \
    "power 1 71000 GPU_IS_LOST\n"    \
    "energy 1 900000 GPU_IS_LOST\n"  \
    "temp 1 33 GPU_IS_LOST\n"

static void test_nvml_merge(void **state)
{
    (void)state;
    use_script(H100);
    struct host *h = open_gpu_fixture();
    struct sense *se;
    assert_int_equal(sense_open(h, &se), 0);
    assert_true(se->usable[SAMPLER_GPU]);
    struct sample *a, *b;
    assert_int_equal(sense_sample(se, &a), 0);
    assert_int_equal(sense_sample(se, &b), 0);
    assert_int_equal(a->gpu->n, 5); /* three DRM cards, two NVML GPUs */
    assert_string_equal(a->gpu->v[3].id, "nvml0");
    const struct gpu_dev *nv = gpu_find_pdev(a->gpu, "0000:19:00.0");
    assert_ptr_equal(nv, &a->gpu->v[3]);
    assert_string_equal(nv->via, "nvml");
    assert_string_equal(nv->driver, "nvidia");
    assert_string_equal(nv->name, "NVIDIA H100 80GB HBM3");
    assert_string_equal(nv->rpm_control, "on"); /* merged from sysfs */
    assert_string_equal(nv->rpm_status, "active");
    near(nv->power_w, 305);
    near(nv->energy_j, 5000);
    near(nv->cap_w, 700);
    near(nv->cap_min_w, 200);
    near(nv->busy_pct, 97);
    near(nv->core_mhz, 1980);
    near(nv->mem_mhz, 2619);
    assert_int_equal(nv->pstate, 0);
    near(nv->temp_c, 61);
    assert_int_equal(nv->nprocs, 1);
    assert_int_equal(nv->procs[0].pid, 4242);
    const struct gpu_dev *second = gpu_find_pdev(a->gpu, "0000:1a:00.0");
    assert_non_null(second);
    assert_false(second->lost);
    assert_true(gpu_find_pdev(b->gpu, "0000:1a:00.0")->lost);
    assert_true(has_diag(&b->diags, "fell off the bus"));
    assert_false(has_diag(&a->diags, "fell off the bus"));

    struct power_readings r = {0};
    struct diags d = {0};
    gpu_power(a->gpu, b->gpu, 1.0, &r, &d);
    const struct power_reading *p = reading(&r, "nvml0");
    assert_non_null(p);
    near(p->watts, 300); /* 300 J over 1 s, not the 298 W reading */
    assert_string_equal(p->via, "nvml");
    assert_string_equal(p->label, "NVIDIA H100 80GB HBM3");
    assert_null(reading(&r, "nvml1")); /* lost */
    power_readings_free(&r);
    diags_free(&d);
    sample_free(a);
    sample_free(b);
    sense_close(se);
    host_close(h);
    done_script();
}

/* A driver reload restarts the energy counter: no figure over that
 * interval, with the reason, rather than a negative or a guessed one. */
static void test_counter_backwards(void **state)
{
    (void)state;
    use_script("bus 0 00000000:19:00.0\npower 0 120000\nenergy 0 5000000 1000\n");
    struct host *h = open_gpu_fixture();
    struct sense *se;
    assert_int_equal(sense_open(h, &se), 0);
    struct sample *a, *b;
    assert_int_equal(sense_sample(se, &a), 0);
    assert_int_equal(sense_sample(se, &b), 0);
    struct power_readings r = {0};
    struct diags d = {0};
    gpu_power(a->gpu, b->gpu, 1.0, &r, &d);
    const struct power_reading *p = reading(&r, "nvml0");
    assert_non_null(p);
    assert_true(isnan(p->watts));
    assert_true(isnan(p->delta_j));
    assert_true(has_diag(&d, "went backwards"));
    assert_true(isnan(gpu_watts(a->gpu, b->gpu, 1.0, "0000:19:00.0")));
    /* one sample: the driver's reading */
    near(gpu_watts(b->gpu, NULL, 0, "0000:19:00.0"), 120);
    power_readings_free(&r);
    diags_free(&d);
    sample_free(a);
    sample_free(b);
    sense_close(se);
    host_close(h);
    done_script();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sysfs),
        cmocka_unit_test(test_probe_reason),
        cmocka_unit_test(test_nvml_merge),
        cmocka_unit_test(test_counter_backwards),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
