#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* cmocka.h needs stdarg, stddef, stdint and setjmp first */
#include <cmocka.h>

#include "sense/gpu_nvml.h"
#include "sense/nvml_abi.h"

static char script_path[] = "/tmp/watt-nvml-script-XXXXXX";

/* Points the double at a script holding text; loads it as NVML. */
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
    strcpy(script_path, "/tmp/watt-nvml-script-XXXXXX");
}

/* Two H200s as nvidia-smi shows them on an idle machine. */
#define TWO_GPUS                                        \
    "name 0 NVIDIA H200\n"                              \
    "uuid 0 GPU-1b2c3d4e-0000-1111-2222-333344445555\n" \
    "bus 0 00000000:19:00.0\n"                          \
    "power 0 112345 498000\n"                           \
    "energy 0 1000000 1050000\n"                        \
    "limit 0 700000\n"                                  \
    "limit_range 0 200000/700000\n"                     \
    "util 0 0/0 97/41\n"                                \
    "clock_sm 0 345 1980\n"                             \
    "clock_mem 0 3201\n"                                \
    "pstate 0 0\n"                                      \
    "temp 0 31 58\n"                                    \
    "procs 0 - 4242:8589934592,4243:1048576\n"          \
    "procutil 0 - 4242:40,4242:60,4244:10\n"            \
    "name 1 NVIDIA H200\n"                              \
    "uuid 1 GPU-99999999-0000-1111-2222-333344445555\n" \
    "bus 1 00000000:3B:00.0\n"                          \
    "power 1 98000\n"                                   \
    "energy 1 2000000\n"                                \
    "limit 1 700000\n"                                  \
    "limit_range 1 200000/700000\n"                     \
    "util 1 0/0\n"                                      \
    "clock_sm 1 345\n"                                  \
    "clock_mem 1 3201\n"                                \
    "pstate 1 0\n"                                      \
    "temp 1 29\n"                                       \
    "procs 1 -\n"                                       \
    "procutil 1 -\n"

static void test_no_library(void **state)
{
    setenv(GPU_NVML_ENV_LIBRARY, "/nonexistent/libnvidia-ml.so.1", 1);
    struct gpu_nvml *n = NULL;
    char why[512] = "";
    assert_int_equal(gpu_nvml_open(&n, why, sizeof(why)), -ENOENT);
    assert_null(n);
    assert_non_null(strstr(why, "libnvidia-ml.so.1 not found"));
}

static void test_not_nvml(void **state)
{
    /* a library that is not NVML: the double's directory holds no other, so
     * take libc, which every test program has loaded */
    setenv(GPU_NVML_ENV_LIBRARY, "libc.so.6", 1);
    struct gpu_nvml *n = NULL;
    char why[512] = "";
    assert_int_equal(gpu_nvml_open(&n, why, sizeof(why)), -ENOSYS);
    assert_null(n);
    assert_string_equal(why, "libc.so.6 has no nvmlInit_v2");
}

static void test_default_library_absent(void **state)
{
    unsetenv(GPU_NVML_ENV_LIBRARY);
    struct gpu_nvml *n = NULL;
    char why[512] = "";
    int r = gpu_nvml_open(&n, why, sizeof(why));
    if (r == 0 || r == -ENODEV) { /* a machine with the driver's library */
        gpu_nvml_close(n);
        skip();
    }
    assert_int_equal(r, -ENOENT);
    assert_true(strncmp(why, "libnvidia-ml.so.1 not found", 27) == 0);
}

static void test_two_gpus(void **state)
{
    use_script(TWO_GPUS);
    struct gpu_nvml *n = NULL;
    char why[256] = "";
    assert_int_equal(gpu_nvml_open(&n, why, sizeof(why)), 0);
    struct gpu_reading g[4];
    size_t k = 0;
    assert_int_equal(gpu_nvml_read(n, g, 4, &k, why, sizeof(why)), 0);
    assert_int_equal(k, 2);
    for (int f = 0; f < GPU_F_COUNT; f++) {
        assert_int_equal(g[0].state[f], GPU_FIELD_OK);
        assert_int_equal(g[1].state[f], GPU_FIELD_OK);
    }
    assert_string_equal(g[0].name, "NVIDIA H200");
    assert_string_equal(g[0].uuid, "GPU-1b2c3d4e-0000-1111-2222-333344445555");
    assert_string_equal(g[1].bus_id, "00000000:3B:00.0");
    assert_int_equal(g[0].pci_device_id, 0x233510de);
    assert_int_equal(g[0].power_mw, 112345);
    assert_int_equal(g[0].energy_mj, 1000000);
    assert_int_equal(g[0].limit_mw, 700000);
    assert_int_equal(g[0].limit_min_mw, 200000);
    assert_int_equal(g[0].limit_max_mw, 700000);
    assert_int_equal(g[0].sm_mhz, 345);
    assert_int_equal(g[0].mem_mhz, 3201);
    assert_int_equal(g[0].pstate, 0);
    assert_int_equal(g[0].temp_c, 31);
    assert_int_equal(g[0].nprocs, 0);
    assert_false(g[0].lost);

    /* the second call of each takes the second token */
    assert_int_equal(gpu_nvml_read(n, g, 4, &k, why, sizeof(why)), 0);
    assert_int_equal(g[0].power_mw, 498000);
    assert_int_equal(g[0].energy_mj, 1050000);
    assert_int_equal(g[0].util_gpu_pct, 97);
    assert_int_equal(g[0].util_mem_pct, 41);
    assert_int_equal(g[0].sm_mhz, 1980);
    assert_int_equal(g[0].temp_c, 58);
    /* the two compute processes, then 4244 with samples only (graphics) */
    assert_int_equal(g[0].nprocs, 3);
    assert_int_equal(g[0].procs[0].pid, 4242);
    assert_int_equal(g[0].procs[0].used_bytes, 8589934592ULL);
    assert_int_equal(g[0].procs[1].pid, 4243);
    /* per-process utilisation: the mean of each process's samples */
    assert_int_equal(g[0].state[GPU_F_PROCUTIL], GPU_FIELD_OK);
    assert_true(g[0].procs[0].sm_util_pct == 50);
    assert_true(isnan(g[0].procs[1].sm_util_pct)); /* no sample: unknown, not 0 */
    assert_int_equal(g[0].procs[2].pid, 4244);
    assert_true(g[0].procs[2].used_bytes == UINT64_MAX);
    assert_true(g[0].procs[2].sm_util_pct == 10);
    assert_int_equal(g[1].state[GPU_F_PROCUTIL], GPU_FIELD_OK); /* none since: NOT_FOUND */
    assert_int_equal(g[1].nprocs, 0);
    assert_int_equal(g[1].power_mw, 98000); /* the last token repeats */

    /* max smaller than the count: the first max GPUs */
    assert_int_equal(gpu_nvml_read(n, g, 1, &k, why, sizeof(why)), 0);
    assert_int_equal(k, 1);
    gpu_nvml_close(n);
    done_script();
}

static void test_not_supported(void **state)
{
    /* A GPU with no energy counter and no memory clock (older boards):
     * not supported is an answer, not an error, and not lost. */
    use_script("name 0 Tesla T4\n"
               "power 0 27000\n"
               "energy 0 NOT_SUPPORTED\n"
               "clock_mem 0 NOT_SUPPORTED\n");
    struct gpu_nvml *n = NULL;
    assert_int_equal(gpu_nvml_open(&n, NULL, 0), 0);
    struct gpu_reading g[1];
    size_t k = 0;
    assert_int_equal(gpu_nvml_read(n, g, 1, &k, NULL, 0), 0);
    assert_int_equal(k, 1);
    assert_int_equal(g[0].state[GPU_F_POWER], GPU_FIELD_OK);
    assert_int_equal(g[0].power_mw, 27000);
    assert_int_equal(g[0].state[GPU_F_ENERGY], GPU_FIELD_UNSUPPORTED);
    assert_int_equal(g[0].nvml_rc[GPU_F_ENERGY], NVML_ERROR_NOT_SUPPORTED);
    assert_int_equal(g[0].state[GPU_F_CLOCK_MEM], GPU_FIELD_UNSUPPORTED);
    assert_int_equal(g[0].state[GPU_F_TEMP], GPU_FIELD_UNSUPPORTED); /* no line */
    assert_false(g[0].lost);
    assert_string_equal(gpu_field_state_name(g[0].state[GPU_F_ENERGY]), "not supported");
    assert_string_equal(gpu_nvml_strerror(n, g[0].nvml_rc[GPU_F_ENERGY]), "Not Supported");
    gpu_nvml_close(n);
    done_script();
}

static void test_gpu_lost_on_nth_call(void **state)
{
    /* GPU 1 falls off the bus at the third power read; GPU 0 answers on. */
    use_script("power 0 100000\n"
               "power 1 200000 210000 GPU_IS_LOST\n"
               "temp 1 40 41 GPU_IS_LOST\n"
               "limit 1 NO_PERMISSION\n");
    struct gpu_nvml *n = NULL;
    assert_int_equal(gpu_nvml_open(&n, NULL, 0), 0);
    struct gpu_reading g[2];
    size_t k = 0;
    for (int call = 1; call <= 3; call++) {
        assert_int_equal(gpu_nvml_read(n, g, 2, &k, NULL, 0), 0);
        assert_int_equal(k, 2);
        assert_false(g[0].lost);
        assert_int_equal(g[0].power_mw, 100000);
        assert_int_equal(g[1].state[GPU_F_LIMIT], GPU_FIELD_ERROR);
        assert_int_equal(g[1].nvml_rc[GPU_F_LIMIT], NVML_ERROR_NO_PERMISSION);
        if (call < 3) {
            assert_false(g[1].lost);
            assert_int_equal(g[1].state[GPU_F_POWER], GPU_FIELD_OK);
        } else {
            assert_true(g[1].lost);
            assert_int_equal(g[1].state[GPU_F_POWER], GPU_FIELD_LOST);
            assert_int_equal(g[1].state[GPU_F_TEMP], GPU_FIELD_LOST);
        }
    }
    assert_int_equal(g[1].power_mw, 0); /* no stale value */
    gpu_nvml_close(n);
    done_script();
}

static void test_handle_lost(void **state)
{
    use_script("power 0 100000\nhandle 1 GPU_IS_LOST\n");
    struct gpu_nvml *n = NULL;
    assert_int_equal(gpu_nvml_open(&n, NULL, 0), 0);
    struct gpu_reading g[2];
    size_t k = 0;
    assert_int_equal(gpu_nvml_read(n, g, 2, &k, NULL, 0), 0);
    assert_int_equal(k, 2);
    assert_true(g[1].lost);
    for (int f = 0; f < GPU_F_COUNT; f++)
        assert_int_equal(g[1].state[f], GPU_FIELD_LOST);
    assert_false(g[0].lost);
    gpu_nvml_close(n);
    done_script();
}

static void test_init_fails(void **state)
{
    use_script("init DRIVER_NOT_LOADED\npower 0 1\n");
    struct gpu_nvml *n = NULL;
    char why[256] = "";
    assert_int_equal(gpu_nvml_open(&n, why, sizeof(why)), -ENODEV);
    assert_null(n);
    assert_non_null(strstr(why, "nvmlInit_v2: Driver Not Loaded"));
    done_script();
}

/* The setter: by UUID, range checked before NVML is asked, NVML's
 * refusals as -errno, and the double's state file carrying a set limit
 * to the next nvmlInit (the next process). */
static void test_limit_set(void **state)
{
    (void)state;
    char state_path[] = "/tmp/watt-nvml-state-XXXXXX";
    int fd = mkstemp(state_path);
    assert_true(fd >= 0);
    close(fd);
    unlink(state_path);
    setenv("WATT_NVML_STATE", state_path, 1);
    use_script(TWO_GPUS "set_limit 1 NO_PERMISSION\n");
    struct gpu_nvml *n = NULL;
    assert_int_equal(gpu_nvml_open(&n, NULL, 0), 0);
    const char *u0 = "GPU-1b2c3d4e-0000-1111-2222-333344445555";
    const char *u1 = "GPU-99999999-0000-1111-2222-333344445555";
    uint32_t mw = 0, lo = 0, hi = 0;
    assert_int_equal(gpu_nvml_limit_get(n, u0, &mw, &lo, &hi), 0);
    assert_int_equal(mw, 700000);
    assert_int_equal(lo, 200000);
    assert_int_equal(hi, 700000);
    char why[128] = "";
    assert_int_equal(gpu_nvml_limit_set(n, u0, 199999, why, sizeof(why)), -ERANGE);
    assert_non_null(strstr(why, "200000..700000 mW"));
    assert_int_equal(gpu_nvml_limit_set(n, u0, 630000, why, sizeof(why)), 0);
    assert_int_equal(gpu_nvml_limit_get(n, u0, &mw, &lo, &hi), 0);
    assert_int_equal(mw, 630000);
    assert_int_equal(gpu_nvml_limit_set(n, u1, 630000, why, sizeof(why)), -EPERM);
    assert_non_null(strstr(why, "Insufficient Permissions"));
    assert_int_equal(gpu_nvml_limit_get(n, "GPU-nope", &mw, &lo, &hi), -ENOENT);
    gpu_nvml_close(n);
    /* another "process": the limit set above is what it sees */
    assert_int_equal(gpu_nvml_open(&n, NULL, 0), 0);
    assert_int_equal(gpu_nvml_limit_get(n, u0, &mw, &lo, &hi), 0);
    assert_int_equal(mw, 630000);
    assert_int_equal(gpu_nvml_limit_get(n, u1, &mw, &lo, &hi), 0);
    assert_int_equal(mw, 700000);
    gpu_nvml_close(n);
    unlink(state_path);
    unsetenv("WATT_NVML_STATE");
    done_script();
}

static void test_names(void **state)
{
    assert_string_equal(gpu_field_name(GPU_F_ENERGY), "energy");
    assert_string_equal(gpu_field_name(GPU_F_PROCS), "procs");
    assert_string_equal(gpu_field_state_name(GPU_FIELD_LOST), "GPU lost");
    assert_string_equal(gpu_nvml_strerror(NULL, NVML_ERROR_GPU_IS_LOST), "GPU is lost");
    /* the ABI's sizes as nvml.h lays them out on LP64 */
    assert_int_equal(sizeof(nvml_pci_info_t), 16 + 5 * 4 + 32);
    assert_int_equal(sizeof(nvml_process_info_t), 24);
    assert_int_equal(offsetof(nvml_process_info_t, used_gpu_memory), 8);
    assert_int_equal(sizeof(nvml_process_utilization_sample_t), 32);
    assert_int_equal(offsetof(nvml_process_utilization_sample_t, sm_util), 16);
    assert_string_equal(gpu_field_name(GPU_F_PROCUTIL), "procutil");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_library),
        cmocka_unit_test(test_not_nvml),
        cmocka_unit_test(test_default_library_absent),
        cmocka_unit_test(test_two_gpus),
        cmocka_unit_test(test_not_supported),
        cmocka_unit_test(test_gpu_lost_on_nth_call),
        cmocka_unit_test(test_handle_lost),
        cmocka_unit_test(test_init_fails),
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_limit_set),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
