/* sense/gpu_fdinfo.h: DRM client usage stats in /proc/PID/fdinfo. The
 * texts follow the examples in the kernel's documentation (Documentation/
 * gpu/amdgpu/drm-usage-stats.rst, i915.rst, xe/xe-drm-usage-stats.rst);
 * the numbers are made up, the keys and their layout are the drivers'. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* cmocka.h needs stdarg, stddef, stdint and setjmp first */
#include <cmocka.h>

#include "base/util.h"
#include "sense/gpu_fdinfo.h"
#include "sense/hwmon.h"
#include "sense/sampler.h" /* sample_free() */
#include "tree.h"

static const char AMDGPU[] = "pos:\t0\n"
                             "flags:\t02100002\n"
                             "mnt_id:\t24\n"
                             "ino:\t1239\n"
                             "drm-driver:\tamdgpu\n"
                             "drm-client-id:\t4\n"
                             "drm-pdev:\t0000:03:00.0\n"
                             "drm-total-cpu:\t0\n"
                             "drm-shared-cpu:\t0\n"
                             "drm-resident-cpu:\t0\n"
                             "drm-total-gtt:\t2392 KiB\n"
                             "drm-resident-gtt:\t2392 KiB\n"
                             "drm-total-vram:\t44564 KiB\n"
                             "drm-shared-vram:\t31952 KiB\n"
                             "drm-active-vram:\t0\n"
                             "drm-resident-vram:\t44564 KiB\n"
                             "drm-purgeable-vram:\t0\n"
                             "drm-engine-compute:\t46464671 ns\n"
                             "drm-engine-gfx:\t1213 ns\n"
                             "amd-evicted-vram:\t0 KiB\n"
                             "amd-requested-vram:\t44564 KiB\n";

/* i915: engines by class, video with two engines, memory in MiB. */
static const char I915[] = "pos:\t0\n"
                           "flags:\t02100002\n"
                           "drm-driver:\ti915\n"
                           "drm-client-id:\t7\n"
                           "drm-pdev:\t0000:00:02.0\n"
                           "drm-total-system0:\t580 KiB\n"
                           "drm-resident-system0:\t580 KiB\n"
                           "drm-total-local0:\t7 MiB\n"
                           "drm-engine-render:\t9288864723 ns\n"
                           "drm-engine-copy:\t2035071108 ns\n"
                           "drm-engine-video:\t0 ns\n"
                           "drm-engine-capacity-video:\t2\n"
                           "drm-engine-video-enhance:\t0 ns\n";

/* xe: cycles instead of times (the first lines of its example). */
static const char XE[] = "drm-driver:\txe\n"
                         "drm-client-id:\t3\n"
                         "drm-pdev:\t0000:03:00.0\n"
                         "drm-total-gtt:\t192 KiB\n"
                         "drm-resident-gtt:\t192 KiB\n"
                         "drm-total-vram0:\t23992 KiB\n"
                         "drm-shared-vram0:\t16 MiB\n"
                         "drm-cycles-rcs:\t28257900\n"
                         "drm-total-cycles-rcs:\t7655183225\n"
                         "drm-cycles-vcs:\t0\n"
                         "drm-total-cycles-vcs:\t7655183225\n"
                         "drm-engine-capacity-vcs:\t2\n";

static const struct gpu_fdinfo_engine *engine(const struct gpu_fdinfo_client *c, const char *n)
{
    for (size_t i = 0; i < c->nengines; i++)
        if (strcmp(c->engines[i].name, n) == 0)
            return &c->engines[i];
    return NULL;
}

static const struct gpu_fdinfo_region *region(const struct gpu_fdinfo_client *c, const char *n)
{
    for (size_t i = 0; i < c->nregions; i++)
        if (strcmp(c->regions[i].name, n) == 0)
            return &c->regions[i];
    return NULL;
}

static void test_amdgpu(void **state)
{
    (void)state;
    struct gpu_fdinfo_client c;
    assert_int_equal(gpu_fdinfo_parse(AMDGPU, strlen(AMDGPU), &c), 0);
    assert_string_equal(c.driver, "amdgpu");
    assert_string_equal(c.pdev, "0000:03:00.0");
    assert_int_equal(c.client_id, 4);
    assert_int_equal(c.nengines, 2);
    assert_string_equal(c.engines[0].name, "compute"); /* order of the file */
    assert_int_equal(engine(&c, "compute")->busy_ns, 46464671);
    assert_int_equal(engine(&c, "gfx")->busy_ns, 1213);
    assert_true(engine(&c, "gfx")->cycles == GPU_FDINFO_NONE);
    assert_int_equal(engine(&c, "gfx")->capacity, 1);
    assert_int_equal(c.nregions, 3);
    const struct gpu_fdinfo_region *v = region(&c, "vram");
    assert_int_equal(v->total, 44564ull * 1024);
    assert_int_equal(v->shared, 31952ull * 1024);
    assert_int_equal(v->active, 0);
    assert_int_equal(v->purgeable, 0);
    assert_true(region(&c, "gtt")->active == GPU_FDINFO_NONE); /* not printed: not 0 */
    assert_int_equal(c.dropped, 0);
}

static void test_i915_xe(void **state)
{
    (void)state;
    struct gpu_fdinfo_client c;
    assert_int_equal(gpu_fdinfo_parse(I915, strlen(I915), &c), 0);
    assert_string_equal(c.driver, "i915");
    assert_int_equal(c.nengines, 4);
    assert_int_equal(engine(&c, "render")->busy_ns, 9288864723ull);
    assert_int_equal(engine(&c, "video")->capacity, 2);
    assert_non_null(engine(&c, "video-enhance")); /* a name with a dash */
    assert_null(engine(&c, "capacity-video"));
    assert_int_equal(region(&c, "local0")->total, 7ull << 20);
    assert_int_equal(region(&c, "system0")->resident, 580 * 1024);

    assert_int_equal(gpu_fdinfo_parse(XE, strlen(XE), &c), 0);
    assert_string_equal(c.driver, "xe");
    assert_int_equal(c.nengines, 2);
    const struct gpu_fdinfo_engine *rcs = engine(&c, "rcs");
    assert_int_equal(rcs->cycles, 28257900);
    assert_int_equal(rcs->total_cycles, 7655183225ull);
    assert_true(rcs->busy_ns == GPU_FDINFO_NONE);
    assert_int_equal(engine(&c, "vcs")->capacity, 2);
    assert_null(region(&c, "cycles-rcs")); /* drm-total-cycles- is no region */
    assert_int_equal(region(&c, "vram0")->shared, 16ull << 20);
}

static void test_edges(void **state)
{
    (void)state;
    struct gpu_fdinfo_client c = {.driver = "keep"};
    /* a tty's or a file's fdinfo: no drm-driver */
    const char *file = "pos:\t0\nflags:\t02\nmnt_id:\t25\nino:\t7\n";
    assert_int_equal(gpu_fdinfo_parse(file, strlen(file), &c), -EBADMSG);
    assert_string_equal(c.driver, "keep"); /* untouched on failure */
    /* the length bounds the read: drm-driver past it is not seen */
    assert_int_equal(gpu_fdinfo_parse(AMDGPU, 40, &c), -EBADMSG);

    /* the older drm-memory- is resident; drm-resident- wins over it in
     * either order; bad values are counted, not kept; no final newline */
    const char *t = "drm-driver: amdgpu\n"
                    "drm-memory-vram: 3 MiB\n"
                    "drm-resident-gtt: 5 KiB\n"
                    "drm-memory-gtt: 9 KiB\n"
                    "drm-engine-gfx: 12 KiB\n"
                    "drm-engine-dma: 18446744073709551616 ns\n"
                    "drm-total-vram: 99999999999999999 MiB\n"
                    "drm-client-id: 5 ns\n"
                    "drm bad key: 1\n"
                    "drm-engine-sdma: 10   ns  ";
    assert_int_equal(gpu_fdinfo_parse(t, strlen(t), &c), 0);
    assert_int_equal(region(&c, "vram")->resident, 3 << 20);
    assert_true(region(&c, "vram")->total == GPU_FDINFO_NONE);
    assert_int_equal(region(&c, "gtt")->resident, 5 * 1024);
    assert_int_equal(engine(&c, "sdma")->busy_ns, 10);
    assert_null(engine(&c, "gfx"));
    assert_null(engine(&c, "dma"));
    assert_true(c.client_id == GPU_FDINFO_NONE);
    assert_int_equal(c.dropped, 4);
    assert_string_equal(c.pdev, "");

    /* more engines than kept: the first ones stay, the rest are counted */
    char many[2048] = "drm-driver: x\n";
    for (int i = 0; i < GPU_FDINFO_MAX_ENGINES + 3; i++) {
        size_t l = strlen(many);
        snprintf(many + l, sizeof(many) - l, "drm-engine-e%d: %d ns\n", i, i);
    }
    assert_int_equal(gpu_fdinfo_parse(many, strlen(many), &c), 0);
    assert_int_equal(c.nengines, GPU_FDINFO_MAX_ENGINES);
    assert_int_equal(c.dropped, 3);
    assert_string_equal(c.engines[GPU_FDINFO_MAX_ENGINES - 1].name, "e15");
}

/* Process 4242 (a game): fds 5 and 9 are one amdgpu client (dup), fd 12 a
 * second client on the same GPU, fd 0 a tty, fd 3 a file. Process 77 has
 * no DRM fd. */
static void test_read_pid(void **state)
{
    (void)state;
    char *root = tree_new();
    tree_write(root, "proc/4242/fdinfo/0", "pos:\t0\nflags:\t02\nmnt_id:\t25\nino:\t4\n");
    tree_write(root, "proc/4242/fdinfo/3", "pos:\t4096\nflags:\t0100000\n");
    tree_write(root, "proc/4242/fdinfo/5", "%s", AMDGPU);
    tree_write(root, "proc/4242/fdinfo/9", "%s", AMDGPU);
    tree_write(root, "proc/4242/fdinfo/12",
               "drm-driver:\tamdgpu\ndrm-client-id:\t11\ndrm-pdev:\t0000:03:00.0\n"
               "drm-engine-gfx:\t5 ns\n");
    tree_write(root, "proc/77/fdinfo/0", "pos:\t0\nflags:\t02\n");
    struct host *h;
    assert_int_equal(host_open(root, &h), 0);

    struct gpu_fdinfo_client *c = NULL;
    size_t n = 99;
    assert_int_equal(gpu_fdinfo_read_pid(h, 4242, &c, &n), 0);
    assert_int_equal(n, 2);
    assert_int_equal(c[0].client_id, 4);
    assert_int_equal(c[1].client_id, 11);
    assert_int_equal(c[1].engines[0].busy_ns, 5);
    free(c);

    c = NULL;
    assert_int_equal(gpu_fdinfo_read_pid(h, 77, &c, &n), 0);
    assert_int_equal(n, 0);
    free(c);

    n = 99;
    assert_int_equal(gpu_fdinfo_read_pid(h, 5, &c, &n), -ENOENT); /* gone */
    assert_int_equal(n, 99);
    host_close(h);
    tree_free(root);
}

static struct host *open_gpu_fixture(void)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/gpu", getenv("WATT_FIXTURES"));
    struct host *h;
    assert_int_equal(host_open(path, &h), 0);
    return h;
}

/* The generated root (tests/fixtures/gen/mkgpu.py): the processes' clients,
 * and one second later the engine time that moved. */
static void test_fixture_fdinfo(void **state)
{
    (void)state;
    struct host *h = open_gpu_fixture();
    struct gpu_fdinfo_client *c;
    size_t n;
    assert_int_equal(gpu_fdinfo_read_pid(h, 2001, &c, &n), 0);
    assert_int_equal(n, 2); /* fds 5 and 9 are one client, 0 and 3 none */
    assert_string_equal(c[0].driver, "amdgpu");
    assert_int_equal(c[0].client_id, 4);
    assert_int_equal(region(&c[0], "vram")->resident, 44564 * 1024);
    uint64_t gfx0 = engine(&c[0], "gfx")->busy_ns;
    free(c);
    /* the second read of fd 5 is the same client one second later */
    assert_int_equal(gpu_fdinfo_read_pid(h, 2001, &c, &n), 0);
    assert_int_equal(n, 2);
    assert_int_equal(engine(&c[0], "gfx")->busy_ns - gfx0, 600000000); /* 60 % of 1 s */
    free(c);

    assert_int_equal(gpu_fdinfo_read_pid(h, 2002, &c, &n), 0);
    assert_int_equal(n, 1);
    assert_string_equal(c[0].pdev, "0000:83:00.0");
    assert_int_equal(engine(&c[0], "video")->capacity, 2);
    assert_int_equal(region(&c[0], "local0")->total, 412ull << 20);
    free(c);

    assert_int_equal(gpu_fdinfo_read_pid(h, 2003, &c, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(c[0].nengines, 5);
    assert_int_equal(engine(&c[0], "ccs")->capacity, 4);
    assert_int_equal(engine(&c[0], "rcs")->total_cycles, 7655183225ull);
    free(c);

    assert_int_equal(gpu_fdinfo_read_pid(h, 2004, &c, &n), 0);
    assert_int_equal(n, 0);
    free(c);
    host_close(h);
}

static struct sample *take_hwmon(struct host *h)
{
    struct sample *s = calloc(1, sizeof(*s));
    assert_int_equal(hwmon_sampler.collect(h, NULL, s), 0);
    return s;
}

/* The GPUs' hwmon chips as watt's hwmon sampler sees them: amdgpu's
 * average power and cap, i915's and xe's energy counters giving the watts
 * the generator put in the second sample. */
static void test_fixture_hwmon(void **state)
{
    (void)state;
    struct host *h = open_gpu_fixture();
    struct sample *a = take_hwmon(h), *b = take_hwmon(h);
    const struct hwmon_sensor *amd = hwmon_find(a->hwmon, "hwmon0", HWMON_POWER, 1);
    assert_non_null(amd);
    assert_string_equal(amd->name, "amdgpu");
    assert_string_equal(amd->label, "PPT");
    assert_int_equal(amd->average_uw, 212000000);
    assert_int_equal(amd->cap_uw, 300000000);
    const struct hwmon_sensor *xe_pkg = hwmon_find(a->hwmon, "hwmon2", HWMON_ENERGY, 2);
    assert_non_null(xe_pkg);
    assert_string_equal(xe_pkg->label, "pkg");
    assert_int_equal(hwmon_scope(xe_pkg), POWER_SCOPE_DEVICE);

    struct power_readings r = {0};
    struct diags d = {0};
    assert_true(hwmon_power(a->hwmon, b->hwmon, 1.0, &r, &d) >= 4);
    double want[][2] = {{0, 231}, {1, 81}, {2, 126}, {3, 104}};
    const char *dom[] = {"hwmon0/power1", "hwmon1/energy1", "hwmon2/energy1", "hwmon2/energy2"};
    for (size_t i = 0; i < ARRAY_SIZE(dom); i++) {
        const struct power_reading *p = NULL;
        for (size_t k = 0; k < r.n; k++)
            if (streq(r.v[k].domain, dom[i]))
                p = &r.v[k];
        assert_non_null(p);
        assert_true(p->watts > want[i][1] - 0.01 && p->watts < want[i][1] + 0.01);
    }
    power_readings_free(&r);
    diags_free(&d);
    sample_free(a);
    sample_free(b);
    host_close(h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_amdgpu),         cmocka_unit_test(test_i915_xe),
        cmocka_unit_test(test_edges),          cmocka_unit_test(test_read_pid),
        cmocka_unit_test(test_fixture_fdinfo), cmocka_unit_test(test_fixture_hwmon),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
