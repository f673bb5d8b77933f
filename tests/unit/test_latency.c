#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* cmocka.h needs stdarg, stddef, stdint and setjmp first */
#include <cmocka.h>

#include "sense/latency.h"
#include "sense/sampler.h" /* sample_free() */
#include "tree.h"

#define CPU "sys/devices/system/cpu/"

static void test_parse_global(void **state)
{
    int64_t us, raw;
    int32_t v = 2000000000;
    assert_int_equal(latency_parse_global(&v, 4, &us, &raw), 0);
    assert_true(us == LATENCY_NONE);
    assert_int_equal(raw, 2000000000);
    v = 20;
    assert_int_equal(latency_parse_global(&v, 4, &us, &raw), 0);
    assert_int_equal(us, 20);
    v = 0; /* C-states off: no latency tolerated */
    assert_int_equal(latency_parse_global(&v, 4, &us, &raw), 0);
    assert_int_equal(us, 0);
    v = INT32_MAX; /* a request above the default is no constraint either */
    assert_int_equal(latency_parse_global(&v, 4, &us, &raw), 0);
    assert_true(us == LATENCY_NONE);
    us = 77;
    v = -5;
    assert_int_equal(latency_parse_global(&v, 4, &us, &raw), -EINVAL);
    assert_int_equal(us, 77); /* untouched on failure */
    assert_int_equal(latency_parse_global(&v, 3, &us, &raw), -EIO);
    assert_int_equal(latency_parse_global(&v, 8, &us, &raw), -EIO);
}

static void test_parse_resume(void **state)
{
    int64_t v;
    assert_int_equal(latency_parse_resume("0\n", 2, &v), 0);
    assert_true(v == LATENCY_NONE);
    assert_int_equal(latency_parse_resume("n/a\n", 4, &v), 0);
    assert_int_equal(v, 0);
    assert_int_equal(latency_parse_resume("20\n", 3, &v), 0);
    assert_int_equal(v, 20);
    v = 5;
    assert_int_equal(latency_parse_resume("", 0, &v), -EINVAL);
    assert_int_equal(latency_parse_resume("abc\n", 4, &v), -EINVAL);
    assert_int_equal(latency_parse_resume("-1\n", 3, &v), -EINVAL);
    assert_int_equal(latency_parse_resume("2\0 3", 4, &v), -EINVAL);
    assert_int_equal(latency_parse_resume("99999999999\n", 12, &v), -ERANGE);
    assert_int_equal(v, 5);
}

/* Four CPUs; the global limit written as the kernel returns it: 4 bytes. */
static char *make_root(const int32_t *global, size_t global_len, const char *faults)
{
    char *root = tree_new();
    tree_write(root, CPU "possible", "0-3\n");
    tree_write(root, CPU "online", "0-3\n");
    tree_write(root, CPU "cpu0/power/pm_qos_resume_latency_us", "0\n");
    tree_write(root, CPU "cpu1/power/pm_qos_resume_latency_us", "n/a\n");
    tree_write(root, CPU "cpu2/power/pm_qos_resume_latency_us", "20\n");
    tree_write(root, CPU "cpu3/power/pm_qos_resume_latency_us", "twenty\n");
    if (global) {
        char path[4200];
        tree_write(root, "dev/.keep", "");
        snprintf(path, sizeof(path), "%s/dev/cpu_dma_latency", root);
        FILE *f = fopen(path, "wb");
        assert_non_null(f);
        assert_int_equal(fwrite(global, 1, global_len, f), global_len);
        fclose(f);
    }
    if (faults)
        tree_write(root, "watt-faults", "%s", faults);
    return root;
}

static struct sample *take(struct host *h)
{
    struct sample *s = calloc(1, sizeof(*s));
    assert_int_equal(topology_read(h, &s->topo, &s->diags), 0);
    assert_int_equal(latency_sampler.collect(h, NULL, s), 0);
    return s;
}

static void test_collect(void **state)
{
    int32_t g = 100;
    char *root = make_root(&g, 4, NULL);
    struct host *h;
    assert_int_equal(host_open(root, &h), 0);
    void *st = NULL;
    char *why = NULL;
    assert_int_equal(latency_sampler.probe(h, &st, &why), 1);
    struct sample *s = take(h);
    const struct latency_sample *l = s->latency;
    assert_int_equal(l->global_us, 100);
    assert_int_equal(l->ncpus, 4);
    assert_true(latency_find_cpu(l, 0)->resume_us == LATENCY_NONE);
    assert_int_equal(latency_find_cpu(l, 1)->resume_us, 0);
    assert_int_equal(latency_find_cpu(l, 2)->resume_us, 20);
    assert_true(latency_find_cpu(l, 3)->resume_us == LATENCY_UNKNOWN);
    /* the garbage value of cpu3 is the one problem */
    assert_int_equal(s->diags.n, 1);
    assert_non_null(strstr(s->diags.v[0].where, "cpu3/power/pm_qos_resume_latency_us"));
    assert_string_equal(s->diags.v[0].what, "malformed value");

    /* in force: the smaller of global (100) and the CPU's own */
    assert_int_equal(latency_in_force_us(l, 0), 100);
    assert_int_equal(latency_in_force_us(l, 1), 0);
    assert_int_equal(latency_in_force_us(l, 2), 20);
    assert_int_equal(latency_in_force_us(l, 3), 100); /* per-CPU unknown: the global */
    /* Skylake-SP states: C1 2 us, C1E 10 us, C6 133 us */
    assert_true(latency_excludes_state(l, 0, 133));
    assert_false(latency_excludes_state(l, 0, 10));
    assert_false(latency_excludes_state(l, 0, 100)); /* equal is allowed */
    assert_true(latency_excludes_state(l, 1, 2));    /* n/a: only POLL */
    assert_false(latency_excludes_state(l, 1, 0));
    assert_true(latency_excludes_state(l, 2, 133));
    assert_false(latency_excludes_state(l, 2, 10));
    assert_false(latency_excludes_state(l, 2, VAL_NONE));
    /* a CPU without its own file: the global limit still applies */
    assert_null(latency_find_cpu(l, 9));
    assert_true(latency_excludes_state(l, 9, 133));
    sample_free(s);
    host_close(h);
    tree_free(root);
}

/* With a global constraint in force the processes holding the device open
 * are listed: each open file is one request. */
static void test_holders(void **state)
{
    int32_t g = 10;
    char *root = make_root(&g, 4, NULL);
    tree_write(root, "proc/4242/comm", "tuned\n");
    tree_symlink(root, "proc/4242/fd/3", "/dev/null");
    tree_symlink(root, "proc/4242/fd/5", "/dev/cpu_dma_latency");
    tree_write(root, "proc/77/comm", "sshd\n");
    tree_symlink(root, "proc/77/fd/0", "/dev/null");
    tree_write(root, "proc/self/comm", "watt\n"); /* not a pid: skipped */
    tree_write(root, "proc/900/comm", "gone\n");  /* no fd/: exited, or not ours */
    struct host *h;
    assert_int_equal(host_open(root, &h), 0);
    struct sample *s = take(h);
    const struct latency_sample *l = s->latency;
    assert_true(l->holders_scanned);
    assert_int_equal(l->nholders, 1);
    assert_int_equal(l->holders[0].pid, 4242);
    assert_string_equal(l->holders[0].comm, "tuned");
    assert_int_equal(l->holders_unreadable, 1);
    sample_free(s);
    host_close(h);
    tree_free(root);

    /* no constraint: no scan at all */
    g = 2000000000;
    root = make_root(&g, 4, NULL);
    assert_int_equal(host_open(root, &h), 0);
    s = take(h);
    assert_false(s->latency->holders_scanned);
    sample_free(s);
    host_close(h);
    tree_free(root);
}

static void test_default_excludes_nothing(void **state)
{
    int32_t g = LATENCY_GLOBAL_DEFAULT;
    char *root = make_root(&g, 4, NULL);
    struct host *h;
    assert_int_equal(host_open(root, &h), 0);
    struct sample *s = take(h);
    assert_true(s->latency->global_us == LATENCY_NONE);
    assert_int_equal(s->latency->global_raw, LATENCY_GLOBAL_DEFAULT);
    assert_true(latency_in_force_us(s->latency, 0) == LATENCY_NONE);
    assert_false(latency_excludes_state(s->latency, 0, 1000000));
    assert_true(latency_excludes_state(s->latency, 2, 133)); /* its own 20 us */
    sample_free(s);
    host_close(h);
    tree_free(root);
}

static void test_short_and_denied(void **state)
{
    /* a recorded device file shorter than 4 bytes */
    int32_t g = 100;
    char *root = make_root(&g, 2, NULL);
    struct host *h;
    assert_int_equal(host_open(root, &h), 0);
    struct sample *s = take(h);
    assert_true(s->latency->global_us == LATENCY_UNKNOWN);
    assert_int_equal(s->diags.n, 2);
    assert_non_null(strstr(s->diags.v[0].where, "dev/cpu_dma_latency"));
    assert_int_equal(s->diags.v[0].err, EIO);
    assert_non_null(strstr(s->diags.v[0].what, "4-byte"));
    /* the per-CPU values still count */
    assert_int_equal(latency_in_force_us(s->latency, 2), 20);
    assert_true(latency_in_force_us(s->latency, 0) == LATENCY_NONE);
    assert_true(latency_in_force_us(s->latency, 3) == LATENCY_UNKNOWN);
    assert_false(latency_excludes_state(s->latency, 3, 133));
    sample_free(s);
    host_close(h);
    tree_free(root);

    /* crw------- root-only: EACCES for everyone else */
    root = make_root(&g, 4, "dev/cpu_dma_latency EACCES\n");
    assert_int_equal(host_open(root, &h), 0);
    s = take(h);
    assert_true(s->latency->global_us == LATENCY_UNKNOWN);
    assert_int_equal(s->diags.v[0].err, EACCES);
    assert_non_null(strstr(s->diags.v[0].what, "permission denied"));
    assert_true(latency_excludes_state(s->latency, 1, 2));
    sample_free(s);
    host_close(h);
    tree_free(root);
}

static void test_probe_absent(void **state)
{
    char *root = tree_new();
    tree_write(root, CPU "possible", "0\n");
    tree_write(root, CPU "online", "0\n");
    struct host *h;
    assert_int_equal(host_open(root, &h), 0);
    void *st = NULL;
    char *why = NULL;
    assert_int_equal(latency_sampler.probe(h, &st, &why), 0);
    assert_non_null(strstr(why, "PM QoS"));
    free(why);
    host_close(h);
    tree_free(root);
}

/* No device, and cpu0 without the file (a recorded tree, an arm64 machine
 * whose cpu0 is gone): the other CPUs' files still make the sampler. */
static void test_probe_not_cpu0(void **state)
{
    char *root = make_root(NULL, 0, NULL);
    char p[4200];
    snprintf(p, sizeof(p), "%s/" CPU "cpu0/power/pm_qos_resume_latency_us", root);
    assert_int_equal(unlink(p), 0);
    struct host *h;
    assert_int_equal(host_open(root, &h), 0);
    void *st = NULL;
    char *why = NULL;
    assert_int_equal(latency_sampler.probe(h, &st, &why), 1);
    assert_null(why);
    struct sample *s = take(h);
    assert_int_equal(latency_find_cpu(s->latency, 2)->resume_us, 20);
    assert_true(latency_find_cpu(s->latency, 0)->resume_us == LATENCY_UNKNOWN);
    sample_free(s);
    host_close(h);
    tree_free(root);
}

/* The running kernel, when we may read the device (root): reading must not
 * fail, and with nobody asking for a limit it says 2000000000. */
static void test_live(void **state)
{
    struct host *h;
    assert_int_equal(host_open("/", &h), 0);
    if (!host_exists(h, HOST_DEV, "cpu_dma_latency") || geteuid() != 0) {
        host_close(h);
        skip();
    }
    unsigned char buf[4];
    assert_int_equal(host_pread(h, HOST_DEV, "cpu_dma_latency", buf, 4, 0), 0);
    int64_t us, raw;
    assert_int_equal(latency_parse_global(buf, 4, &us, &raw), 0);
    print_message("# live cpu_dma_latency: %lld\n", (long long)raw);
    assert_true(raw > 0);
    /* reading did not change it */
    unsigned char again[4];
    assert_int_equal(host_pread(h, HOST_DEV, "cpu_dma_latency", again, 4, 0), 0);
    assert_memory_equal(buf, again, 4);
    host_close(h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_global),   cmocka_unit_test(test_parse_resume),
        cmocka_unit_test(test_collect),        cmocka_unit_test(test_default_excludes_nothing),
        cmocka_unit_test(test_holders),        cmocka_unit_test(test_short_and_denied),
        cmocka_unit_test(test_probe_absent),   cmocka_unit_test(test_live),
        cmocka_unit_test(test_probe_not_cpu0),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
