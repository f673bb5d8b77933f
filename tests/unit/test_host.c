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
#include "host/host.h"
#include "host/topology.h"
#include "tree.h"

#define CPU "sys/devices/system/cpu/"

/* Two packages, 2 cores x 2 threads each, CPUs 6-7 offline (no topology
 * directory, as the kernel does), two NUMA nodes. */
static char *make_machine(void)
{
    char *root = tree_new();
    tree_write(root, CPU "possible", "0-7\n");
    tree_write(root, CPU "present", "0-7\n");
    tree_write(root, CPU "online", "0-5\n");
    tree_write(root, CPU "offline", "6-7\n");
    static const int pkg[] = {0, 0, 1, 1, 0, 0}, core[] = {0, 1, 0, 1, 0, 1};
    for (int c = 0; c < 6; c++) {
        char p[128];
        snprintf(p, sizeof(p), CPU "cpu%d/topology/physical_package_id", c);
        tree_write(root, p, "%d\n", pkg[c]);
        snprintf(p, sizeof(p), CPU "cpu%d/topology/core_id", c);
        tree_write(root, p, "%d\n", core[c]);
        snprintf(p, sizeof(p), CPU "cpu%d/topology/die_id", c);
        tree_write(root, p, "0\n");
    }
    tree_write(root, CPU "cpu6/online", "0\n");
    tree_write(root, CPU "cpu7/online", "0\n");
    tree_write(root, "sys/devices/system/node/online", "0-1\n");
    tree_write(root, "sys/devices/system/node/node0/cpulist", "0-1,4-5\n");
    tree_write(root, "sys/devices/system/node/node1/cpulist", "2-3\n");
    tree_write(root, "proc/stat", "cpu 1 2 3\n");
    return root;
}

static void test_open_errors(void **state)
{
    struct host *h;
    assert_int_equal(host_open("/nonexistent/watt", &h), -ENOENT);
    char *empty = tree_new();
    assert_int_equal(host_open(empty, &h), -ENOTDIR);
    tree_write(empty, "sys/x", "1\n");
    tree_write(empty, "watt-faults", "sys/x BOGUS\n");
    assert_int_equal(host_open(empty, &h), -EBADMSG);
    tree_free(empty);
}

static void test_reads_and_faults(void **state)
{
    char *root = make_machine();
    tree_write(root, "sys/a/garbage", "12x\n");
    tree_write(root, "sys/a/energy_uj", "100\n");
    tree_write(root, "sys/a/secret", "5\n");
    tree_write(root, "later/stat", "cpu 9 9 9\n");
    tree_write(root, "watt-faults",
               "# comment\nsys/a/secret EACCES\n"
               "sys/a/energy_uj =50 from=2\n"
               "sys/a/energy_uj EIO\n" /* a second fault for a path is ignored */
               "proc/stat @later/stat from=2\n");
    struct host *h;
    assert_int_equal(host_open(root, &h), 0);
    assert_false(h->live);
    uint64_t v;
    assert_int_equal(host_read_u64(h, HOST_SYS, "a/garbage", &v), -EINVAL);
    assert_int_equal(host_read_u64(h, HOST_SYS, "a/missing", &v), -ENOENT);
    assert_int_equal(host_read_u64(h, HOST_SYS, "a/secret", &v), -EACCES);
    assert_int_equal(host_read_u64(h, HOST_SYS, "a/energy_uj", &v), 0);
    assert_int_equal(v, 100);
    assert_int_equal(host_read_u64(h, HOST_SYS, "a/energy_uj", &v), 0);
    assert_int_equal(v, 50); /* the counter went backwards on the second read */
    char *text;
    assert_int_equal(host_read(h, HOST_PROC, "stat", &text, NULL), 0);
    assert_string_equal(text, "cpu 1 2 3\n");
    free(text);
    assert_int_equal(host_read(h, HOST_PROC, "stat", &text, NULL), 0);
    assert_string_equal(text, "cpu 9 9 9\n"); /* a later /proc/stat */
    free(text);
    char *p = host_display_path(h, HOST_SYS, "a/secret");
    assert_non_null(strstr(p, "/sys/a/secret"));
    free(p);
    host_close(h);
    tree_free(root);
}

static void test_list_natural_order(void **state)
{
    char *root = tree_new();
    for (int i = 0; i < 12; i++) {
        char p[64];
        snprintf(p, sizeof(p), "sys/d/cpu%d/x", i);
        tree_write(root, p, "1\n");
    }
    struct host *h;
    assert_int_equal(host_open(root, &h), 0);
    char **names;
    size_t n;
    assert_int_equal(host_list(h, HOST_SYS, "d", &names, &n), 0);
    assert_int_equal(n, 12);
    assert_string_equal(names[0], "cpu0");
    assert_string_equal(names[2], "cpu2");
    assert_string_equal(names[11], "cpu11");
    host_free_list(names, n);
    host_close(h);
    tree_free(root);
}

static void test_topology(void **state)
{
    char *root = make_machine();
    struct host *h;
    assert_int_equal(host_open(root, &h), 0);
    struct topology t;
    struct diags d = {0};
    assert_int_equal(topology_read(h, &t, &d), 0);
    assert_int_equal(d.n, 0);
    assert_int_equal(t.ncpu, 8);
    assert_int_equal(cpuset_count(&t.online), 6);
    assert_int_equal(t.npackages, 2);
    assert_int_equal(t.ncores, 4);
    assert_int_equal(t.nnodes, 2);
    assert_false(t.cpu[6].online);
    assert_int_equal(t.cpu[6].package, -1);
    assert_int_equal(t.cpu[4].thread, 1);
    assert_int_equal(t.cpu[2].node, 1);
    assert_int_equal(topology_package_lead(h ? &t : NULL, 1), 2);
    topology_free(&t);
    host_close(h);
    tree_free(root);
}

static void test_topology_garbage(void **state)
{
    char *root = make_machine();
    tree_write(root, CPU "cpu1/topology/physical_package_id", "zz\n");
    tree_write(root, CPU "online", "0-3,\n"); /* trailing comma: garbage */
    struct host *h;
    assert_int_equal(host_open(root, &h), 0);
    struct topology t;
    struct diags d = {0};
    assert_int_equal(topology_read(h, &t, &d), 0);
    /* online fell back to per-CPU files: cpu0-5 have none, 6-7 say 0 */
    assert_int_equal(cpuset_count(&t.online), 6);
    assert_int_equal(t.cpu[1].package, -1);
    assert_true(d.n >= 2);
    bool named = false;
    for (size_t i = 0; i < d.n; i++)
        named |= strstr(d.v[i].where, "cpu1/topology/physical_package_id") != NULL;
    assert_true(named);
    diags_free(&d);
    topology_free(&t);
    host_close(h);
    tree_free(root);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_open_errors),        cmocka_unit_test(test_reads_and_faults),
        cmocka_unit_test(test_list_natural_order), cmocka_unit_test(test_topology),
        cmocka_unit_test(test_topology_garbage),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
