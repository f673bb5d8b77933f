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

#include "sense/cpuidle.h"
#include "sense/sampler.h" /* sample_free() */
#include "tree.h"

#define CPU "sys/devices/system/cpu/"

/* intel_idle on Skylake-SP: POLL, C1, C1E, C6 with the kernel's table. */
static char *make_root(const char *faults)
{
    char *root = tree_new();
    tree_write(root, CPU "possible", "0-1\n");
    tree_write(root, CPU "online", "0-1\n");
    tree_write(root, CPU "cpuidle/current_driver", "intel_idle\n");
    tree_write(root, CPU "cpuidle/current_governor", "menu\n");
    static const char *names[] = {"POLL", "C1", "C1E", "C6"};
    static const int lat[] = {0, 2, 10, 133}, res[] = {0, 2, 20, 600};
    for (int c = 0; c < 2; c++)
        for (int k = 0; k < 4; k++) {
            char d[128], p[160];
            snprintf(d, sizeof(d), CPU "cpu%d/cpuidle/state%d/", c, k);
#define W(f, ...)                         \
    snprintf(p, sizeof(p), "%s%s", d, f); \
    tree_write(root, p, __VA_ARGS__)
            W("name", "%s\n", names[k]);
            W("desc", "MWAIT 0x%02x\n", k * 16);
            W("latency", "%d\n", lat[k]);
            W("residency", "%d\n", res[k]);
            W("usage", "%d\n", 1000 * (k + 1));
            W("time", "%d\n", 100000 * (k + 1));
            W("disable", "%d\n", k == 3 && c == 1);
            W("above", "0\n");
            W("below", "0\n");
#undef W
        }
    if (faults)
        tree_write(root, "watt-faults", "%s", faults);
    return root;
}

static struct sample *take(struct host *h)
{
    struct sample *s = calloc(1, sizeof(*s));
    assert_int_equal(topology_read(h, &s->topo, &s->diags), 0);
    assert_int_equal(cpuidle_sampler.collect(h, NULL, s), 0);
    return s;
}

static void test_read_states(void **state)
{
    char *root = make_root(NULL);
    struct host *h;
    assert_int_equal(host_open(root, &h), 0);
    void *st = NULL;
    char *why = NULL;
    assert_int_equal(cpuidle_sampler.probe(h, &st, &why), 1);
    struct sample *s = take(h);
    assert_string_equal(s->cpuidle->driver, "intel_idle");
    assert_int_equal(s->cpuidle->ncpus, 2);
    const struct cpuidle_cpu *c1 = cpuidle_find_cpu(s->cpuidle, 1);
    assert_int_equal(c1->nstates, 4);
    assert_string_equal(c1->state[3].name, "C6");
    assert_int_equal(c1->state[3].latency_us, 133);
    assert_int_equal(c1->state[3].residency_us, 600);
    assert_int_equal(c1->state[3].disable, 1);
    assert_int_equal(s->diags.n, 0);
    sample_free(s);
    host_close(h);
    tree_free(root);
}

/* The states' names and latencies are read once when CPUs share a driver;
 * a CPU with a driver/ of its own (CONFIG_CPU_IDLE_MULTIPLE_DRIVERS) reads
 * its own, even when the first CPU has none. */
static void test_own_driver_not_first(void **state)
{
    char *root = make_root(NULL);
    tree_write(root, CPU "cpu1/cpuidle/driver/name", "psci_idle\n");
    tree_write(root, CPU "cpu1/cpuidle/state3/name", "cluster-sleep\n");
    tree_write(root, CPU "cpu1/cpuidle/state3/latency", "800\n");
    struct host *h;
    assert_int_equal(host_open(root, &h), 0);
    struct sample *s = take(h);
    const struct cpuidle_cpu *c0 = cpuidle_find_cpu(s->cpuidle, 0);
    const struct cpuidle_cpu *c1 = cpuidle_find_cpu(s->cpuidle, 1);
    assert_string_equal(c0->state[3].name, "C6");
    assert_string_equal(c1->state[3].name, "cluster-sleep");
    assert_int_equal(c1->state[3].latency_us, 800);
    assert_int_equal(c1->state[3].residency_us, 600);
    assert_int_equal(s->diags.n, 0);
    sample_free(s);
    host_close(h);
    tree_free(root);
}

static void test_residency(void **state)
{
    /* The second read of cpu0's C6 time and usage moves on by 0.5 s and 50
     * entries; over a 1 s interval C6 holds 50 % of the time. */
    char *root = make_root(CPU "cpu0/cpuidle/state3/time =900000 from=2\n" CPU
                               "cpu0/cpuidle/state3/usage =4050 from=2\n");
    struct host *h;
    assert_int_equal(host_open(root, &h), 0);
    struct sample *a = take(h), *b = take(h);
    double pct[4], c0, wps;
    assert_int_equal(cpuidle_residency(cpuidle_find_cpu(a->cpuidle, 0),
                                       cpuidle_find_cpu(b->cpuidle, 0), 1e6, pct, &c0, &wps),
                     0);
    assert_true(fabs(pct[3] - 50.0) < 1e-9);
    assert_true(fabs(pct[1]) < 1e-9);
    assert_true(fabs(c0 - 50.0) < 1e-9);
    assert_true(fabs(wps - 50.0) < 1e-9);
    sample_free(a);
    sample_free(b);
    host_close(h);
    tree_free(root);
}

static void test_backwards_and_offline(void **state)
{
    char *root =
        make_root(CPU "cpu0/cpuidle/state2/time =5 from=2\n" CPU "cpu1/cpuidle ENOENT from=2\n");
    struct host *h;
    assert_int_equal(host_open(root, &h), 0);
    struct sample *a = take(h), *b = take(h);
    double pct[4], c0, wps;
    assert_int_equal(cpuidle_residency(cpuidle_find_cpu(a->cpuidle, 0),
                                       cpuidle_find_cpu(b->cpuidle, 0), 1e6, pct, &c0, &wps),
                     -ERANGE);
    /* cpu1 went away between the samples: no entry, no number */
    assert_null(cpuidle_find_cpu(b->cpuidle, 1));
    assert_int_equal(cpuidle_residency(cpuidle_find_cpu(a->cpuidle, 1), NULL, 1e6, pct, &c0, &wps),
                     -ENODATA);
    sample_free(a);
    sample_free(b);
    host_close(h);
    tree_free(root);
}

static void test_unreadable_and_garbage(void **state)
{
    char *root = make_root(CPU "cpu0/cpuidle/state1/usage EACCES\n");
    /* latency belongs to the driver: read on the first CPU, shared */
    tree_write(root, CPU "cpu0/cpuidle/state2/latency", "ten\n");
    tree_write(root, CPU "cpu1/cpuidle/state2/time", "");
    struct host *h;
    assert_int_equal(host_open(root, &h), 0);
    struct sample *s = take(h);
    const struct cpuidle_cpu *c0 = cpuidle_find_cpu(s->cpuidle, 0);
    const struct cpuidle_cpu *c1 = cpuidle_find_cpu(s->cpuidle, 1);
    assert_true(c0->state[1].usage == VAL_NONE);
    assert_true(c0->state[2].latency_us == VAL_NONE);
    assert_true(c1->state[2].latency_us == VAL_NONE);
    assert_true(c1->state[2].time_us == VAL_NONE);
    assert_int_equal(c1->state[3].latency_us, 133); /* the rest is still read */
    assert_int_equal(s->diags.n, 3);
    assert_non_null(strstr(s->diags.v[0].where, "cpu0/cpuidle/state1/usage"));
    assert_int_equal(s->diags.v[0].err, EACCES);
    assert_string_equal(s->diags.v[1].what, "malformed value");
    sample_free(s);
    host_close(h);
    tree_free(root);
}

/* With per-CPU drivers (CONFIG_CPU_IDLE_MULTIPLE_DRIVERS: cpuN/cpuidle/driver
 * exists), each CPU's states are its own: a little core's C6 differs. */
static void test_multiple_drivers(void **state)
{
    char *root = make_root(NULL);
    tree_write(root, CPU "cpu0/cpuidle/driver/name", "psci_idle\n");
    tree_write(root, CPU "cpu1/cpuidle/driver/name", "psci_idle\n");
    tree_write(root, CPU "cpu1/cpuidle/state3/latency", "250\n");
    tree_write(root, CPU "cpu1/cpuidle/state3/name", "cluster-sleep\n");
    struct host *h;
    assert_int_equal(host_open(root, &h), 0);
    struct sample *s = take(h);
    assert_int_equal(cpuidle_find_cpu(s->cpuidle, 0)->state[3].latency_us, 133);
    assert_int_equal(cpuidle_find_cpu(s->cpuidle, 1)->state[3].latency_us, 250);
    assert_string_equal(cpuidle_find_cpu(s->cpuidle, 1)->state[3].name, "cluster-sleep");
    sample_free(s);
    host_close(h);
    tree_free(root);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_read_states),
        cmocka_unit_test(test_own_driver_not_first),
        cmocka_unit_test(test_residency),
        cmocka_unit_test(test_backwards_and_offline),
        cmocka_unit_test(test_unreadable_and_garbage),
        cmocka_unit_test(test_multiple_drivers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
