#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
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

static atomic_bool renaming;

static void *rename_loop(void *arg)
{
    const char *dir = arg;
    char a[4200], b[4200];
    snprintf(a, sizeof(a), "%s/a", dir);
    snprintf(b, sizeof(b), "%s/b", dir);
    while (atomic_load(&renaming))
        if (rename(a, b) < 0 || rename(b, a) < 0)
            abort();
    return NULL;
}

/* openat2(RESOLVE_BENEATH) gives EAGAIN when any rename on the system
 * races with the ".." of a link it follows; the read must retry, not fail.
 * Reads through a sysfs-style link ("../../devices/...") while another
 * thread renames a file: before the retry about 1 in 500 failed with
 * EAGAIN, and `watt tune --dry-run` printed a different plan from run to
 * run on a busy machine (tests/cli/test_tune.py, "the text diff is
 * stable"). */
static void test_reads_while_renaming(void **state)
{
    char *root = tree_new();
    tree_write(root, "sys/devices/pci0000:00/0000:00:08.2/power/control", "on\n");
    tree_symlink(root, "sys/bus/pci/devices/0000:00:08.2",
                 "../../../devices/pci0000:00/0000:00:08.2");
    char *scratch = tree_new();
    tree_write(scratch, "a", "");
    struct host *h;
    assert_int_equal(host_open(root, &h), 0);
    atomic_store(&renaming, true);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, rename_loop, scratch), 0);
    int failed = 0, first = 0;
    for (int i = 0; i < 20000; i++) {
        char *v;
        int r = host_read(h, HOST_SYS, "bus/pci/devices/0000:00:08.2/power/control", &v, NULL);
        if (r < 0) {
            failed++;
            first = first ? first : r;
            continue;
        }
        if (strcmp(v, "on\n") != 0)
            failed++;
        free(v);
    }
    atomic_store(&renaming, false);
    pthread_join(t, NULL);
    host_close(h);
    tree_free(scratch);
    tree_free(root);
    if (failed)
        fail_msg("%d of 20000 reads failed (first: %s)", failed, strerror(-first));
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

/* Writes on a recorded root: the file is replaced and reads back as sysfs
 * shows a value, with its newline; op=write faults refuse a write while
 * reads work; a write fault with a value makes no sense. */
static void test_writes_and_write_faults(void **state)
{
    char *root = tree_new();
    tree_write(root, "sys/k/gov", "powersave\n");
    tree_write(root, "sys/k/epp", "balance_power\n");
    tree_write(root, "sys/k/odd", "x\n");
    tree_write(root, "watt-faults",
               "sys/k/epp EINVAL op=write\n"
               "sys/k/epp =default\n" /* reads have a fault of their own */
               "sys/k/odd EPERM from=2 op=write\n"
               "sys/k/ro EROFS op=write\n");
    struct host *h;
    assert_int_equal(host_open(root, &h), 0);
    assert_int_equal(host_write(h, HOST_SYS, "k/gov", "performance"), 0);
    char *text;
    assert_int_equal(host_read(h, HOST_SYS, "k/gov", &text, NULL), 0);
    assert_string_equal(text, "performance\n");
    free(text);
    assert_int_equal(host_write(h, HOST_SYS, "k/gov", "ondemand\n"), 0); /* no second newline */
    assert_int_equal(host_read(h, HOST_SYS, "k/gov", &text, NULL), 0);
    assert_string_equal(text, "ondemand\n");
    free(text);
    assert_int_equal(host_write_raw(h, HOST_SYS, "k/gov", "ab", 2), 0); /* exact bytes */
    assert_int_equal(host_read(h, HOST_SYS, "k/gov", &text, NULL), 0);
    assert_string_equal(text, "ab");
    free(text);
    assert_int_equal(host_write(h, HOST_SYS, "k/epp", "performance"), -EINVAL);
    assert_int_equal(host_read_str(h, HOST_SYS, "k/epp", &text), 0);
    assert_string_equal(text, "default"); /* the read fault, not the write's */
    free(text);
    assert_int_equal(host_write(h, HOST_SYS, "k/odd", "1"), 0); /* from=2 */
    assert_int_equal(host_write(h, HOST_SYS, "k/odd", "1"), -EPERM);
    assert_int_equal(host_read_str(h, HOST_SYS, "k/odd", &text), 0); /* reads unaffected */
    free(text);
    assert_int_equal(host_write(h, HOST_SYS, "k/missing", "1"), -ENOENT);
    assert_int_equal(host_write(h, HOST_SYS, "k/ro", "1"), -EROFS);
    /* an open for writing is a write; for reading, a read */
    assert_int_equal(host_open_fd(h, HOST_SYS, "k/epp", O_WRONLY), -EINVAL);
    int fd = host_open_fd(h, HOST_SYS, "k/gov", O_RDWR);
    assert_true(fd >= 0);
    close(fd);
    fd = host_open_fd(h, HOST_SYS, "k/epp", O_RDONLY);
    assert_true(fd >= 0);
    close(fd);
    host_close(h);
    static const char *const bad[] = {
        "sys/k/gov =x op=write\n", "sys/k/gov @later op=write\n", "sys/k/gov EIO op=erase\n",
        "sys/k/gov EIO op=write op=read\n", "sys/k/gov EIO from=1 from=2\n"};
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        tree_write(root, "watt-faults", "%s", bad[i]);
        assert_int_equal(host_open(root, &h), -EBADMSG);
    }
    tree_free(root);
}

/* The tune layer's own files: parents made, never a symlink, renames. */
static void test_state_files(void **state)
{
    char *root = tree_new();
    tree_write(root, "sys/x", "1\n");
    struct host *h;
    assert_int_equal(host_open(root, &h), 0);
    assert_int_equal(host_state_open(h, "var/lib/watt/j", O_RDONLY, 0), -ENOENT);
    int fd = host_state_open(h, "var/lib/watt/j.tmp", O_WRONLY | O_CREAT | O_TRUNC, 0640);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "hello\n", 6), 6);
    struct stat st;
    assert_int_equal(fstat(fd, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0640);
    assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
    close(fd);
    assert_int_equal(host_state_rename(h, "var/lib/watt/j.tmp", "var/lib/watt/j"), 0);
    fd = host_state_open(h, "var/lib/watt/j", O_RDONLY, 0);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(host_state_rename(h, "var/lib/watt/nope", "var/lib/watt/j"), -ENOENT);
    tree_symlink(root, "var/lib/watt/link", "j");
    assert_int_equal(host_state_open(h, "var/lib/watt/link", O_RDONLY, 0), -ELOOP);
    assert_int_equal(host_state_open(h, "/etc/passwd", O_RDONLY, 0), -EINVAL);
    /* a recorded root's state never leaves the tree */
    tree_symlink(root, "var/lib/out", "/tmp");
    assert_true(host_state_open(h, "var/lib/out/x", O_WRONLY | O_CREAT, 0644) < 0);
    char *p = host_state_display_path(h, "var/lib/watt/j");
    assert_non_null(strstr(p, "/var/lib/watt/j"));
    assert_true(strncmp(p, root, strlen(root)) == 0);
    free(p);
    char *cmd;
    assert_int_equal(host_self_cmdline(&cmd), 0);
    assert_non_null(strstr(cmd, "test_host"));
    free(cmd);
    host_close(h);
    tree_free(root);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_open_errors),        cmocka_unit_test(test_reads_and_faults),
        cmocka_unit_test(test_list_natural_order), cmocka_unit_test(test_topology),
        cmocka_unit_test(test_topology_garbage),   cmocka_unit_test(test_writes_and_write_faults),
        cmocka_unit_test(test_state_files),        cmocka_unit_test(test_reads_while_renaming),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
