/* sense/memory.h: NUMA node meminfo and the EDAC DIMM tree. */
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
#include "sense/memory.h"
#include "tree.h"

/* The head of a 6.8 kernel's node1/meminfo (node_read_meminfo()). */
static const char NODE1[] = "Node 1 MemTotal:       99034520 kB\n"
                            "Node 1 MemFree:        87150380 kB\n"
                            "Node 1 MemUsed:        11884140 kB\n"
                            "Node 1 SwapCached:            0 kB\n"
                            "Node 1 Active(anon):    3565240 kB\n"
                            "Node 1 HugePages_Total:     0\n"
                            "Node 1 HugePages_Free:      0\n";

static void test_meminfo_parse(void **state)
{
    (void)state;
    struct memory_node n = {.id = 1};
    assert_int_equal(memory_meminfo_parse(NODE1, strlen(NODE1), 1, &n), 0);
    assert_int_equal(n.total_kb, 99034520);
    assert_int_equal(n.free_kb, 87150380);
    assert_int_equal(n.used_kb, 11884140);

    /* another node's lines are not this node's */
    struct memory_node o = {.total_kb = 7};
    assert_int_equal(memory_meminfo_parse(NODE1, strlen(NODE1), 0, &o), -EBADMSG);
    assert_int_equal(o.total_kb, 7); /* untouched on failure */

    /* only MemTotal: the others unknown, not 0; no newline at the end */
    const char *t = "garbage\nNode 3 MemTotal: 1024 kB";
    struct memory_node m = {0};
    assert_int_equal(memory_meminfo_parse(t, strlen(t), 3, &m), 0);
    assert_int_equal(m.total_kb, 1024);
    assert_true(m.free_kb == MEMORY_NONE && m.used_kb == MEMORY_NONE);

    /* a value without its kB unit, a negative or overlong one: ignored */
    const char *bad = "Node 0 MemTotal: 12\nNode 0 MemTotal: -5 kB\n";
    assert_int_equal(memory_meminfo_parse(bad, strlen(bad), 0, &m), -EBADMSG);
    /* the length bounds the read: the text after it is not seen */
    assert_int_equal(memory_meminfo_parse(NODE1, 10, 1, &m), -EBADMSG);
}

static void test_attr_copy(void **state)
{
    (void)state;
    char b[32];
    memory_attr_copy(b, sizeof(b), "channel 0 slot 0 \n");
    assert_string_equal(b, "channel 0 slot 0");
    memory_attr_copy(b, sizeof(b), "Registered-DDR4\nsecond line\n");
    assert_string_equal(b, "Registered-DDR4");
    memory_attr_copy(b, 6, "CPU_SrcID#0");
    assert_string_equal(b, "CPU_S");
    memory_attr_copy(b, sizeof(b), NULL);
    assert_string_equal(b, "");
}

static void write_tree(const char *r)
{
    const char *nb = "sys/devices/system/node/";
    char p[256];
    snprintf(p, sizeof(p), "%spossible", nb);
    tree_write(r, p, "0-1\n");
    snprintf(p, sizeof(p), "%snode0/cpulist", nb);
    tree_write(r, p, "0-3\n");
    snprintf(p, sizeof(p), "%snode0/meminfo", nb);
    tree_write(r, p,
               "Node 0 MemTotal: 2048 kB\nNode 0 MemFree: 1024 kB\nNode 0 MemUsed: 1024 kB\n");
    snprintf(p, sizeof(p), "%snode1/cpulist", nb); /* no CPUs, and no meminfo */
    tree_write(r, p, "\n");
    const char *mc = "sys/devices/system/edac/mc/";
    snprintf(p, sizeof(p), "%smc0/mc_name", mc);
    tree_write(r, p, "Skylake Socket#0 IMC#0\n");
    snprintf(p, sizeof(p), "%smc0/size_mb", mc);
    tree_write(r, p, "32768\n");
    for (int d = 0; d <= 4; d += 4) {
        snprintf(p, sizeof(p), "%smc0/dimm%d/size", mc, d);
        tree_write(r, p, "16384\n");
        snprintf(p, sizeof(p), "%smc0/dimm%d/dimm_label", mc, d);
        tree_write(r, p, "CPU_SrcID#0_MC#0_Chan#%d_DIMM#0\n", d / 2);
        snprintf(p, sizeof(p), "%smc0/dimm%d/dimm_location", mc, d);
        tree_write(r, p, "channel %d slot 0 \n", d / 2);
        snprintf(p, sizeof(p), "%smc0/dimm%d/dimm_mem_type", mc, d);
        tree_write(r, p, "Registered-DDR4\n");
    }
    /* the older layout: an empty chip-select row, then one of 8 GiB */
    snprintf(p, sizeof(p), "%smc1/csrow0/size_mb", mc);
    tree_write(r, p, "0\n");
    snprintf(p, sizeof(p), "%smc1/csrow1/size_mb", mc);
    tree_write(r, p, "8192\n");
    snprintf(p, sizeof(p), "%smc1/csrow1/mem_type", mc);
    tree_write(r, p, "Unbuffered-DDR3\n");
    snprintf(p, sizeof(p), "%smc1/csrow1/ch0_dimm_label", mc);
    tree_write(r, p, "DIMM_A1\n");
}

static void test_read_tree(void **state)
{
    (void)state;
    char *root = tree_new();
    write_tree(root);
    struct host *h;
    assert_int_equal(host_open(root, &h), 0);
    struct memory_info m;
    assert_int_equal(memory_read(h, &m), 0);
    assert_int_equal(m.nnodes, 2);
    assert_string_equal(m.nodes_why, "");
    assert_int_equal(m.nodes[0].id, 0);
    assert_int_equal(m.nodes[0].used_kb, 1024);
    assert_int_equal(cpuset_count(&m.nodes[0].cpus), 4);
    assert_string_equal(m.nodes[0].why, "");
    assert_int_equal(m.nodes[1].total_kb, MEMORY_NONE);
    assert_non_null(strstr(m.nodes[1].why, "node1/meminfo"));
    assert_int_equal(cpuset_count(&m.nodes[1].cpus), 0);

    assert_int_equal(m.nctls, 2);
    assert_string_equal(m.edac_why, "");
    const struct memory_ctl *c = &m.ctls[0];
    assert_string_equal(c->name, "Skylake Socket#0 IMC#0");
    assert_int_equal(c->size_mb, 32768);
    assert_false(c->csrow_layout);
    assert_int_equal(c->ndimms, 2);
    assert_int_equal(c->dimms[1].index, 4);
    assert_string_equal(c->dimms[1].label, "CPU_SrcID#0_MC#0_Chan#2_DIMM#0");
    assert_string_equal(c->dimms[1].location, "channel 2 slot 0");
    assert_string_equal(c->dimms[1].mem_type, "Registered-DDR4");
    assert_int_equal(c->dimms[1].size_mb, 16384);
    c = &m.ctls[1];
    assert_true(c->csrow_layout);
    assert_int_equal(c->size_mb, MEMORY_NONE);
    assert_int_equal(c->ndimms, 1); /* the empty row is no DIMM */
    assert_int_equal(c->dimms[0].index, 1);
    assert_string_equal(c->dimms[0].label, "DIMM_A1");
    assert_string_equal(c->dimms[0].mem_type, "Unbuffered-DDR3");
    memory_info_free(&m);
    memory_info_free(&m); /* cleared: a second free is harmless */
    host_close(h);
    tree_free(root);
}

static void test_read_nothing(void **state)
{
    (void)state;
    char *root = tree_new();
    tree_write(root, "sys/devices/system/cpu/online", "0\n");
    struct host *h;
    assert_int_equal(host_open(root, &h), 0);
    struct memory_info m;
    assert_int_equal(memory_read(h, &m), 0);
    assert_int_equal(m.nnodes, 0);
    assert_non_null(strstr(m.nodes_why, "CONFIG_NUMA"));
    assert_int_equal(m.nctls, 0);
    assert_non_null(strstr(m.edac_why, "no EDAC driver"));
    memory_info_free(&m);
    host_close(h);
    tree_free(root);
}

/* The generated intel-2s: 2 nodes, skx_edac with 4 IMCs of 3 DIMMs. */
static void test_intel_2s(void **state)
{
    (void)state;
    char path[4096];
    snprintf(path, sizeof(path), "%s/intel-2s", getenv("WATT_FIXTURES"));
    struct host *h;
    assert_int_equal(host_open(path, &h), 0);
    struct memory_info m;
    assert_int_equal(memory_read(h, &m), 0);
    assert_int_equal(m.nnodes, 2);
    for (size_t i = 0; i < 2; i++) {
        assert_string_equal(m.nodes[i].why, "");
        assert_int_equal(cpuset_count(&m.nodes[i].cpus), 20);
        assert_int_equal(m.nodes[i].used_kb + m.nodes[i].free_kb, m.nodes[i].total_kb);
    }
    assert_int_equal(m.nctls, 4);
    uint64_t mib = 0;
    for (size_t i = 0; i < m.nctls; i++) {
        assert_int_equal(m.ctls[i].ndimms, 3);
        for (size_t d = 0; d < m.ctls[i].ndimms; d++)
            mib += m.ctls[i].dimms[d].size_mb;
    }
    assert_int_equal(mib, 12 * 16384);
    memory_info_free(&m);
    host_close(h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_meminfo_parse), cmocka_unit_test(test_attr_copy),
        cmocka_unit_test(test_read_tree),     cmocka_unit_test(test_read_nothing),
        cmocka_unit_test(test_intel_2s),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
