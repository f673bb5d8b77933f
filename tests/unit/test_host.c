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
#include "host/beneath.h"
#include "host/host.h"
#include "host/mountinfo.h"
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

static void rm_file(const char *root, const char *rel)
{
    char p[512];
    snprintf(p, sizeof(p), "%s/%s", root, rel);
    assert_int_equal(unlink(p), 0);
}

static unsigned online_count(const char *root, struct cpuset *ret_online)
{
    struct host *h;
    assert_int_equal(host_open(root, &h), 0);
    struct topology t;
    struct diags d = {0};
    assert_int_equal(topology_read(h, &t, &d), 0);
    unsigned n = cpuset_count(&t.online);
    *ret_online = t.online;
    t.online = (struct cpuset){0};
    for (unsigned i = 0; i < t.ncpu; i++)
        assert_int_equal(t.cpu[i].online, cpuset_has(ret_online, i));
    diags_free(&d);
    topology_free(&t);
    host_close(h);
    return n;
}

/* A CPU the kernel lists in "offline" is offline, whether or not the
 * "online" list or per-CPU online files exist; a CPU without a cpuN
 * directory, or not present, is not online either. */
static void test_topology_offline_list(void **state)
{
    char *root = make_machine();
    rm_file(root, CPU "online");
    rm_file(root, CPU "cpu6/online");
    rm_file(root, CPU "cpu7/online");
    struct cpuset on;
    assert_int_equal(online_count(root, &on), 6); /* 6-7: in "offline", no online file */
    assert_false(cpuset_has(&on, 6));
    assert_false(cpuset_has(&on, 7));
    cpuset_free(&on);
    /* the per-CPU files say online, "offline" says not: offline wins */
    tree_write(root, CPU "cpu6/online", "1\n");
    assert_int_equal(online_count(root, &on), 6);
    cpuset_free(&on);
    /* no "offline" either: possible 0-7, present 0-5, no cpu6/cpu7 at all */
    rm_file(root, CPU "offline");
    rm_file(root, CPU "cpu6/online");
    tree_write(root, CPU "present", "0-5\n");
    assert_int_equal(online_count(root, &on), 6);
    cpuset_free(&on);
    /* present but without a directory: not online */
    tree_write(root, CPU "present", "0-7\n");
    char p[512];
    snprintf(p, sizeof(p), "%s/" CPU "cpu7", root);
    assert_int_equal(rmdir(p), 0);
    assert_int_equal(online_count(root, &on), 7); /* cpu6 has a directory and no file */
    assert_true(cpuset_has(&on, 6));
    assert_false(cpuset_has(&on, 7));
    cpuset_free(&on);
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

/* The open beneath a directory (src/host/beneath.c), by openat2 and by
 * the hand-made walk: links that stay below resolve, links and ".." that
 * leave are refused, a loop ends. */
static void check_beneath(int dfd, const char *root, bool walk)
{
    struct {
        const char *path;
        int flags;
        int want; /* 0: an fd */
    } cases[] = {
        {"b/file", O_RDONLY, 0},
        {"link_rel/file", O_RDONLY, 0},
        {"b/../b/file", O_RDONLY, 0},
        {"b//file", O_RDONLY, 0},
        {"b/", O_PATH | O_DIRECTORY, 0},
        {"up/x", O_RDONLY, -EXDEV},
        {"abs/passwd", O_RDONLY, -EXDEV},
        {"../a/b/file", O_RDONLY, -EXDEV},
        {"/etc/passwd", O_RDONLY, -EXDEV},
        {"b/loop", O_RDONLY, -ELOOP},
        {"link_rel", O_PATH | O_NOFOLLOW, 0}, /* the link itself */
        {"file_link", O_RDONLY | O_NOFOLLOW, -ELOOP},
        {"b/missing", O_RDONLY, -ENOENT},
        {"b/file/x", O_RDONLY, -ENOTDIR},
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        int fd = walk ? beneath_walk(dfd, cases[i].path, cases[i].flags, 0, BENEATH_STRICT)
                      : beneath_open(dfd, cases[i].path, cases[i].flags, 0, BENEATH_STRICT);
        int got = fd >= 0 ? 0 : fd;
        if (fd >= 0)
            close(fd);
        if (got != cases[i].want)
            fail_msg("%s %s: got %d, want %d", walk ? "walk" : "openat2", cases[i].path, got,
                     cases[i].want);
    }
    /* O_CREAT makes the file where the path says, below DFD */
    int fd = walk ? beneath_walk(dfd, "link_rel/new", O_WRONLY | O_CREAT, 0600, BENEATH_STRICT)
                  : beneath_open(dfd, "link_rel/new", O_WRONLY | O_CREAT, 0600, BENEATH_STRICT);
    assert_true(fd >= 0);
    close(fd);
    char *p = xasprintf("%s/a/b/new", root);
    assert_int_equal(unlink(p), 0);
    free(p);
    /* IN_ROOT: an absolute link starts again at DFD ("abs" -> "/etc":
     * DFD/etc, which is not there), ".." stops at it */
    fd = walk ? beneath_walk(dfd, "abs/passwd", O_RDONLY, 0, BENEATH_IN_ROOT)
              : beneath_open(dfd, "abs/passwd", O_RDONLY, 0, BENEATH_IN_ROOT);
    assert_int_equal(fd, -ENOENT);
    fd = walk ? beneath_walk(dfd, "../../b/file", O_RDONLY, 0, BENEATH_IN_ROOT)
              : beneath_open(dfd, "../../b/file", O_RDONLY, 0, BENEATH_IN_ROOT);
    assert_true(fd >= 0);
    close(fd);
}

static void test_beneath(void **state)
{
    char *root = tree_new();
    tree_write(root, "a/b/file", "x\n");
    tree_symlink(root, "a/link_rel", "b");
    tree_symlink(root, "a/up", "../..");
    tree_symlink(root, "a/abs", "/etc");
    tree_symlink(root, "a/b/loop", "loop");
    tree_symlink(root, "a/file_link", "b/file");
    char *a = xasprintf("%s/a", root);
    int dfd = open(a, O_PATH | O_DIRECTORY | O_CLOEXEC);
    assert_true(dfd >= 0);
    if (beneath_have_openat2())
        check_beneath(dfd, root, false);
    check_beneath(dfd, root, true);
    close(dfd);
    free(a);
    tree_free(root);
}

/* On a live root a magic link of /proc ("self/root" -> "/") never takes
 * a write out of /proc, by openat2 or by the walk. */
static void test_magic_links(void **state)
{
    char canary[] = "/tmp/watt-canary-XXXXXX";
    int cfd = mkstemp(canary);
    assert_true(cfd >= 0);
    assert_int_equal(write(cfd, "canary\n", 7), 7);
    close(cfd);
    char *rel = xasprintf("self/root%s", canary);
    int proc = open("/proc", O_PATH | O_DIRECTORY | O_CLOEXEC);
    assert_true(proc >= 0);
    int fd = beneath_walk(proc, rel, O_WRONLY, 0, BENEATH_STRICT);
    assert_true(fd == -EXDEV);
    fd = beneath_walk(proc, "self/fd/0", O_RDONLY, 0, BENEATH_STRICT);
    assert_true(fd < 0); /* "/dev/..." or "pipe:[N]": never followed */
    if (beneath_have_openat2()) {
        fd = beneath_open(proc, rel, O_WRONLY, 0, BENEATH_STRICT);
        assert_int_equal(fd, -ELOOP);
    }
    close(proc);
    struct host *h;
    assert_int_equal(host_open("/", &h), 0);
    assert_true(h->live);
    assert_true(host_write(h, HOST_PROC, rel, "pwned") < 0);
    host_close(h);
    char buf[16] = {0};
    cfd = open(canary, O_RDONLY);
    assert_int_equal(read(cfd, buf, sizeof(buf) - 1), 7);
    close(cfd);
    assert_string_equal(buf, "canary\n");
    unlink(canary);
    free(rel);
}

/* A recorded root whose sys, proc, dev or var is a link is refused:
 * reads would mix in the live machine, writes would land on it. */
static void test_root_links(void **state)
{
    static const char *const names[] = {"sys", "proc", "dev", "var"};
    for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
        char *root = tree_new();
        tree_write(root, "sys/x", "1\n");
        tree_write(root, "proc/x", "1\n");
        char *outside = tree_new();
        char *link = xasprintf("%s/%s", root, names[i]);
        char cmd[8192];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", link);
        assert_int_equal(system(cmd), 0);
        assert_int_equal(symlink(outside, link), 0);
        struct host *h;
        char *err = NULL;
        assert_int_equal(host_open_err(root, &h, &err), -ELOOP);
        assert_non_null(strstr(err, "is a symbolic link"));
        free(err);
        free(link);
        tree_free(outside);
        tree_free(root);
    }
    /* state directories are made inside the root, one at a time: a link
     * further down that leaves the tree is refused */
    char *root = tree_new();
    tree_write(root, "sys/x", "1\n");
    char *outside = tree_new();
    tree_mkdirs(root); /* root/var/lib -> outside */
    char *var = xasprintf("%s/var", root);
    mkdir(var, 0755);
    char *lib = xasprintf("%s/var/lib", root);
    assert_int_equal(symlink(outside, lib), 0);
    struct host *h;
    assert_int_equal(host_open(root, &h), 0);
    assert_int_equal(host_state_open(h, "var/lib/watt/journal", O_RDWR | O_CREAT, 0644), -EXDEV);
    char *made = xasprintf("%s/watt", outside);
    assert_int_not_equal(access(made, F_OK), 0);
    host_close(h);
    free(made);
    free(lib);
    free(var);
    tree_free(outside);
    tree_free(root);
}

/* The agent's slow reads (device runtime PM): the last content while it is
 * younger than the slow age, read anew after it, after a write of the
 * host's own, and at once when the age is 0; a file gone is news. */
static void test_cache_slow(void **state)
{
    char *root = tree_new();
    tree_write(root, "sys/d/power/runtime_status", "active\n");
    struct host *h;
    assert_int_equal(host_open(root, &h), 0);
    host_cache_enable(h, 16);
    host_cache_slow(h, 3600ull * 1000000000ull);
    host_cache_mode(h, HOST_CACHE_SLOW);
    char *text;
    assert_int_equal(host_read_str(h, HOST_SYS, "d/power/runtime_status", &text), 0);
    assert_string_equal(text, "active");
    free(text);
    tree_write(root, "sys/d/power/runtime_status", "suspended\n");
    assert_int_equal(host_read_str(h, HOST_SYS, "d/power/runtime_status", &text), 0);
    assert_string_equal(text, "active"); /* younger than the age: kept */
    free(text);
    assert_int_equal(host_write(h, HOST_SYS, "d/power/runtime_status", "suspended"), 0);
    assert_int_equal(host_read_str(h, HOST_SYS, "d/power/runtime_status", &text), 0);
    assert_string_equal(text, "suspended"); /* our own write: read anew */
    free(text);
    tree_write(root, "sys/d/power/runtime_status", "active\n");
    host_cache_slow(h, 0); /* as DYNAMIC */
    assert_int_equal(host_read_str(h, HOST_SYS, "d/power/runtime_status", &text), 0);
    assert_string_equal(text, "active");
    free(text);
    host_cache_mode(h, HOST_CACHE_OFF);
    host_close(h);
    tree_free(root);
    (void)state;
}

/* ---- where tracefs is: real mountinfo lines ---- */

/* Debian 12, booted by systemd (sys-kernel-tracing.mount and
 * sys-kernel-debug.mount): tracefs at its canonical place. */
static const char mi_debian12[] =
    "22 28 0:21 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw\n"
    "23 28 0:22 / /proc rw,nosuid,nodev,noexec,relatime shared:12 - proc proc rw\n"
    "28 1 254:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw,errors=remount-ro\n"
    "34 22 0:7 / /sys/kernel/debug rw,nosuid,nodev,noexec,relatime shared:15 - debugfs debugfs "
    "rw\n"
    "35 22 0:12 / /sys/kernel/tracing rw,nosuid,nodev,noexec,relatime shared:16 - tracefs "
    "tracefs rw\n";

/* This project's CI VM (no systemd as PID 1): debugfs mounted, and the
 * kernel's automount of tracefs in its tracing/; /sys/kernel/tracing is
 * an empty mount point. */
static const char mi_ci_vm[] =
    "21 26 0:20 / /proc rw,relatime - proc proc rw\n"
    "22 26 0:21 / /sys rw,relatime - sysfs sysfs rw\n"
    "26 1 254:0 / / rw,relatime - ext4 /dev/vda rw,discard\n"
    "44 22 0:8 / /sys/kernel/debug rw,relatime - debugfs debugfs rw\n"
    "45 44 0:13 / /sys/kernel/debug/tracing rw,relatime - tracefs tracefs rw\n";

/* debugfs alone (tracing/ not looked in yet), at a path with a space. */
static const char mi_debugfs_only[] =
    "22 28 0:21 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw\n"
    "40 28 0:7 / /mnt/debug\\040fs rw,relatime shared:20 - debugfs none rw\n";

/* A container: sysfs read-only, no tracing file system; and a bind mount
 * of tracefs's events/ somewhere, which has no events/ at its top. */
static const char mi_container[] =
    "612 534 0:52 / / rw,relatime master:1 - overlay overlay "
    "rw,lowerdir=/var/lib/docker/overlay2/l/A:/var/lib/docker/overlay2/l/B\n"
    "613 612 0:56 / /proc rw,nosuid,nodev,noexec,relatime - proc proc rw\n"
    "617 612 0:60 / /sys ro,nosuid,nodev,noexec,relatime - sysfs sysfs ro\n"
    "640 612 0:12 /events /srv/events rw,relatime - tracefs tracefs rw\n";

/* tracefs mounted by hand elsewhere as well as debugfs: tracefs wins. */
static const char mi_elsewhere[] =
    "34 22 0:7 / /sys/kernel/debug rw,nosuid,nodev,noexec,relatime shared:15 - debugfs debugfs "
    "rw\n"
    "90 28 0:12 / /mnt/trace rw,relatime shared:40 - tracefs nodev rw\n"
    "91 28 0:12 / /mnt/trace2 rw,relatime shared:40 - tracefs nodev rw\n";

static void test_mountinfo_tracing(void **state)
{
    char *path = NULL;
    unsigned line = 0;
    assert_int_equal(mountinfo_find_tracing(mi_debian12, strlen(mi_debian12), &path, &line),
                     MOUNTINFO_TRACE_CANONICAL);
    assert_string_equal(path, "/sys/kernel/tracing");
    free(path);
    assert_int_equal(mountinfo_find_tracing(mi_ci_vm, strlen(mi_ci_vm), &path, &line),
                     MOUNTINFO_TRACE_TRACEFS);
    assert_string_equal(path, "/sys/kernel/debug/tracing");
    free(path);
    assert_int_equal(mountinfo_find_tracing(mi_debugfs_only, strlen(mi_debugfs_only), &path, &line),
                     MOUNTINFO_TRACE_DEBUGFS);
    assert_string_equal(path, "/mnt/debug fs/tracing");
    free(path);
    assert_int_equal(mountinfo_find_tracing(mi_elsewhere, strlen(mi_elsewhere), &path, &line),
                     MOUNTINFO_TRACE_TRACEFS);
    assert_string_equal(path, "/mnt/trace"); /* the first of a kind */
    free(path);
    path = NULL;
    assert_int_equal(mountinfo_find_tracing(mi_container, strlen(mi_container), &path, &line),
                     MOUNTINFO_TRACE_NONE);
    assert_null(path);
    assert_int_equal(mountinfo_find_tracing("", 0, &path, &line), MOUNTINFO_TRACE_NONE);
    /* the length bounds the text: the canonical line cut off is not read */
    size_t cut = strstr(mi_debian12, "35 22") - mi_debian12;
    assert_int_equal(mountinfo_find_tracing(mi_debian12, cut, &path, &line),
                     MOUNTINFO_TRACE_DEBUGFS);
    assert_string_equal(path, "/sys/kernel/debug/tracing");
    free(path);
    path = NULL;

    /* not mountinfo: says which line */
    static const char *const bad[] = {
        "22 28 0:21 / /sys rw - sysfs sysfs rw\n/proc/mounts style\n",
        "22 28 0:21 / /sys rw shared:7 sysfs sysfs rw\n", /* no "-" */
        "22 28 0:21 / /sys\\09 rw - sysfs sysfs rw\n",    /* broken escape */
        "22 28 0:21 / sys rw - sysfs sysfs rw\n",         /* relative point */
        "22 28 0:21 / /sys rw -\n",                       /* no fstype */
    };
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        line = 0;
        assert_int_equal(mountinfo_find_tracing(bad[i], strlen(bad[i]), &path, &line), -EBADMSG);
        assert_int_equal(line, i == 0 ? 2 : 1);
        assert_null(path);
    }
    (void)state;
}

/* A live root finds tracefs where this machine's mount table says, without
 * mounting anything (the table is what it reads first). */
static void test_tracefs_live(void **state)
{
    struct host *h;
    assert_int_equal(host_open("/", &h), 0);
    char *text = NULL, *want = NULL;
    size_t len;
    assert_int_equal(host_read(h, HOST_PROC, "self/mountinfo", &text, &len), 0);
    int kind = mountinfo_find_tracing(text, len, &want, NULL);
    assert_true(kind >= 0);
    char *dir = NULL;
    bool mounted = true;
    int r = host_tracefs_events(h, &dir, &mounted);
    if (kind > 0 && r == 0) {
        assert_false(mounted);
        char *expect = xasprintf("%s/events", want + 1);
        assert_string_equal(dir, expect);
        free(expect);
    } else {
        printf("# tracefs here: mount table kind %d, host_tracefs_events %d (%s)\n", kind, r,
               r == 0 ? dir : strerror(-r));
    }
    host_tracefs_unmount(h);
    free(dir);
    free(want);
    free(text);
    host_close(h);
    (void)state;
}

/* the scheduling policy: live through sched_getscheduler(2), recorded
 * through /proc/TID/stat's field 41, whatever the comm holds */
static void test_sched_policy(void **state)
{
    (void)state;
    struct host *h;
    assert_int_equal(host_open("/", &h), 0);
    assert_int_equal(host_sched_policy(h, getpid()), 0); /* SCHED_OTHER */
    assert_int_equal(host_sched_policy(h, 0), -EINVAL);
    host_close(h);

    char *root = tree_new();
    char stat[512] = "77 (a) b) (c) S";
    for (int f = 4; f <= 40; f++)
        strcat(stat, " 9");
    strcat(stat, " 2 0 0\n"); /* policy (41): SCHED_RR */
    tree_write(root, "proc/77/stat", "%s", stat);
    tree_write(root, "proc/78/stat", "78 (short) S 1 2 3\n");
    assert_int_equal(host_open(root, &h), 0);
    assert_int_equal(host_sched_policy(h, 77), 2);
    assert_int_equal(host_sched_policy(h, 78), -EBADMSG);
    assert_int_equal(host_sched_policy(h, 79), -ENOENT);
    host_close(h);
    tree_free(root);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_open_errors),
        cmocka_unit_test(test_reads_and_faults),
        cmocka_unit_test(test_list_natural_order),
        cmocka_unit_test(test_topology),
        cmocka_unit_test(test_topology_garbage),
        cmocka_unit_test(test_topology_offline_list),
        cmocka_unit_test(test_writes_and_write_faults),
        cmocka_unit_test(test_state_files),
        cmocka_unit_test(test_beneath),
        cmocka_unit_test(test_magic_links),
        cmocka_unit_test(test_root_links),
        cmocka_unit_test(test_reads_while_renaming),
        cmocka_unit_test(test_cache_slow),
        cmocka_unit_test(test_mountinfo_tracing),
        cmocka_unit_test(test_tracefs_live),
        cmocka_unit_test(test_sched_policy),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
