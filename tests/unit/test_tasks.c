#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

/* cmocka.h needs stdarg, stddef, stdint and setjmp first */
#include <cmocka.h>

#include "base/util.h"
#include "sense/cgroup_cpu.h"
#include "sense/sample.h"
#include "sense/tasks.h"
#include "tree.h"

/* Real lines from a 6.18 VM (kthreadd, a workqueue worker whose name is
 * longer than comm[], and a python whose name was set with
 * prctl(PR_SET_NAME, "a) b (c")). */
#define STAT_KTHREADD                                                                             \
    "2 (kthreadd) S 0 0 0 0 -1 2129984 0 0 0 0 0 1 0 0 20 0 1 0 25 0 0 18446744073709551615 0 0 " \
    "0 0 0 0 0 2147483647 0 1 0 0 0 1 0 0 0 0 0 0 0 0 0 0 0 0 0\n"
#define STAT_KWORKER                                                                            \
    "27905 (kworker/u8:2-ext4-rsv-conversion) I 2 0 0 0 -1 69238880 0 0 0 0 0 9 0 0 20 0 1 0 "  \
    "2699710 0 0 18446744073709551615 0 0 0 0 0 0 0 2147483647 0 1 0 0 17 0 0 0 0 0 0 0 0 0 0 " \
    "0 0 0 0\n"
#define STAT_PARENS                                                                             \
    "6098 (a) b (c) R 5936 5936 1336 0 -1 4194304 2912 6658 2 0 2 1 3 1 20 0 1 0 2759207 "      \
    "17145856 3415 18446744073709551615 94205503115264 94205503115605 140737229862528 0 0 0 0 " \
    "16781312 2 0 0 0 17 1 0 0 0 0 0 94205503126960 94205503127576 94205524996096 "             \
    "140737229871075 140737229871118 140737229871118 140737229873103 0\n"
/* The lines of /proc/PID/status that matter, as the same VM prints them. */
#define STATUS_PY                                                                \
    "Name:\ta) b (c\nUmask:\t0022\nState:\tR (running)\nTgid:\t6098\nNgid:\t0\n" \
    "Pid:\t6098\nPPid:\t5936\nThreads:\t1\nCpus_allowed_list:\t0-1\n"            \
    "voluntary_ctxt_switches:\t20\nnonvoluntary_ctxt_switches:\t5\n"
/* The same VM's hybrid layout: v1 controllers and the v2 line. */
#define CGROUP_HYBRID                                                                       \
    "9:name=systemd:/\n8:pids:/\n7:blkio:/\n6:freezer:/\n5:devices:/\n"                     \
    "4:memory:/process_api/41faabef3a0e0c9edd1d80d06c64d862\n3:cpuset:/\n2:cpuacct:/acct\n" \
    "1:cpu:/\n0::/\n"

static int parse_stat(const char *s, struct task_info *t)
{
    return tasks_parse_stat(s, strlen(s), t);
}

static void test_parse_stat_real(void **state)
{
    struct task_info t = {0};
    assert_int_equal(parse_stat(STAT_KTHREADD, &t), 0);
    assert_int_equal(t.pid, 2);
    assert_string_equal(t.comm, "kthreadd");
    assert_true(t.kthread);
    assert_int_equal(t.state, 'S');
    assert_int_equal(t.utime, 0);
    assert_int_equal(t.stime, 1);
    assert_int_equal(t.nthreads, 1);
    assert_int_equal(t.start_ticks, 25);
    assert_int_equal(t.last_cpu, 1);

    assert_int_equal(parse_stat(STAT_KWORKER, &t), 0);
    assert_int_equal(t.pid, 27905);
    assert_string_equal(t.comm, "kworker/u8:2-ext4-rsv-conversio"); /* 31 bytes kept */
    assert_true(t.kthread);
    assert_int_equal(t.state, 'I');
    assert_int_equal(t.stime, 9);
    assert_int_equal(t.start_ticks, 2699710);
    assert_int_equal(t.last_cpu, 0);

    assert_int_equal(parse_stat(STAT_PARENS, &t), 0);
    assert_int_equal(t.pid, 6098);
    assert_string_equal(t.comm, "a) b (c");
    assert_false(t.kthread);
    assert_int_equal(t.state, 'R');
    assert_int_equal(t.utime, 2);
    assert_int_equal(t.stime, 1);
    assert_int_equal(t.start_ticks, 2759207);
    assert_int_equal(t.last_cpu, 1);
}

static void test_parse_stat_edges(void **state)
{
    struct task_info t = {0};
    /* a comm of ")" and "((" and one of control bytes */
    assert_int_equal(parse_stat("7 ()) S 0 0 0 0 -1 0 0 0 0 0 5 6 0 0 20 0 3 0 99", &t), 0);
    assert_string_equal(t.comm, ")");
    assert_int_equal(t.utime, 5);
    assert_int_equal(t.nthreads, 3);
    assert_int_equal(t.start_ticks, 99);
    assert_int_equal(t.last_cpu, -1); /* no field 39 */
    assert_int_equal(parse_stat("8 (\x1b[2J\n) S 0 0 0 0 -1 0 0 0 0 0 5 6 0 0 20 0 3 0 9\n", &t),
                     0);
    assert_string_equal(t.comm, "?[2J?");
    /* a cut never splits a UTF-8 sequence: 30 ASCII bytes and a 2-byte é */
    assert_int_equal(parse_stat("9 (abcdefghijklmnopqrstuvwxyz0123\xc3\xa9) S 0 0 0 0 -1 0 0 0 0 "
                                "0 5 6 0 0 20 0 3 0 9\n",
                                &t),
                     0);
    assert_string_equal(t.comm, "abcdefghijklmnopqrstuvwxyz0123");
    assert_int_equal(parse_stat("9 (abcdefghijklmnopqrstuvwxyz01\xc3\xa9) S 0 0 0 0 -1 0 0 0 0 "
                                "0 5 6 0 0 20 0 3 0 9\n",
                                &t),
                     0);
    assert_string_equal(t.comm, "abcdefghijklmnopqrstuvwxyz01\xc3\xa9");

    /* refused, and t untouched */
    static const char *const bad[] = {
        "",
        "2 (kthreadd",                                              /* no ')' */
        "2 kthreadd) S 0 0 0 0 -1 0 0 0 0 0 0 1 0 0 20 0 1 0 25",   /* no '(' */
        "(x) S 0 0 0 0 -1 0 0 0 0 0 0 1 0 0 20 0 1 0 25",           /* no pid */
        "0 (x) S 0 0 0 0 -1 0 0 0 0 0 0 1 0 0 20 0 1 0 25",         /* pid 0 */
        "2147483648 (x) S 0 0 0 0 -1 0 0 0 0 0 0 1 0 0 20 0 1 0 1", /* above pid_max */
        "2(x) S 0 0 0 0 -1 0 0 0 0 0 0 1 0 0 20 0 1 0 25",          /* no space */
        "2 (x) S 0 0 0 0 -1 0 0 0 0 0 0 1 0 0 20 0 1 0",            /* 21 fields */
        "2 (x) S 0 0 0 0 -1 0 0 0 0 0 -1 1 0 0 20 0 1 0 25",        /* negative utime */
        "2 (x) SS 0 0 0 0 -1 0 0 0 0 0 0 1 0 0 20 0 1 0 25",        /* state */
        "2 (x) 5 0 0 0 0 -1 0 0 0 0 0 0 1 0 0 20 0 1 0 25",
        "2 (x) S 0 0 0 0 -1 0 0 0 0 0 18446744073709551615 1 0 0 20 0 1 0 25", /* sum overflows */
        "2 (x) S 0 0 0 0 -1 0 0 0 0 0 0 1 0 0 20 0 1 0 2x",
        "2 (x) S 0 0 0 0 -1 0 0 0 0 0 0 1 0 0 20 0 1 0 25 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 -1",
        "2 (x) S 0 0 0 0 -1 0 0 0 0 0 0 1 0 0 20 0 1 0 25 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 2x",
    };
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        struct task_info u = {.pid = 77, .comm = "keep"};
        if (parse_stat(bad[i], &u) != -EINVAL)
            fail_msg("accepted: \"%s\"", bad[i]);
        assert_int_equal(u.pid, 77);
        assert_string_equal(u.comm, "keep");
    }
    /* only len bytes are read: the number is cut at "2" */
    size_t cut = (size_t)(strstr(STAT_KTHREADD, " 25 ") + 2 - STAT_KTHREADD);
    assert_int_equal(tasks_parse_stat(STAT_KTHREADD, cut, &t), 0);
    assert_int_equal(t.start_ticks, 2);
}

static void test_parse_status(void **state)
{
    uint64_t v = 1, iv = 1;
    int32_t tgid = 1;
    assert_int_equal(tasks_parse_status(STATUS_PY, strlen(STATUS_PY), &v, &iv, &tgid), 0);
    assert_int_equal(v, 20);
    assert_int_equal(iv, 5);
    assert_int_equal(tgid, 6098);
    /* a thread's status names its process; NULL outputs are skipped */
    const char *thr = "Name:\tworker\nTgid:\t100\nPid:\t101\n";
    assert_int_equal(tasks_parse_status(thr, strlen(thr), &v, NULL, &tgid), 0);
    assert_int_equal(tgid, 100);
    assert_true(v == VAL_NONE); /* absent */
    assert_int_equal(tasks_parse_status("", 0, &v, &iv, &tgid), 0);
    assert_int_equal(tgid, -1);
    assert_true(iv == VAL_NONE);
    /* the key must be the whole key, at a line start */
    const char *near = "xvoluntary_ctxt_switches:\t3\nnonvoluntary_ctxt_switches: 4 \n";
    assert_int_equal(tasks_parse_status(near, strlen(near), &v, &iv, NULL), 0);
    assert_true(v == VAL_NONE);
    assert_int_equal(iv, 4);
    /* garbage values are refused and leave the outputs alone */
    static const char *const bad[] = {"Tgid:\t0\n",
                                      "Tgid:\t-1\n",
                                      "Tgid:\t2147483648\n",
                                      "voluntary_ctxt_switches:\t\n",
                                      "voluntary_ctxt_switches:\t1 2\n",
                                      "nonvoluntary_ctxt_switches:\t99999999999999999999999\n"};
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        v = 42;
        tgid = 42;
        assert_int_equal(tasks_parse_status(bad[i], strlen(bad[i]), &v, &iv, &tgid), -EINVAL);
        assert_int_equal(v, 42);
        assert_int_equal(tgid, 42);
    }
}

static void check_cgroup(const char *text, const char *want)
{
    char *cg = tasks_parse_cgroup(text, strlen(text));
    if (!want) {
        assert_null(cg);
    } else {
        assert_non_null(cg);
        assert_string_equal(cg, want);
    }
    free(cg);
}

static void test_parse_cgroup(void **state)
{
    check_cgroup("0::/system.slice/ssh.service\n", "/system.slice/ssh.service");
    check_cgroup("0::/\n", "/");      /* a kernel thread */
    check_cgroup(CGROUP_HYBRID, "/"); /* the v2 line wins */
    /* v1 only: the cpu or cpuacct hierarchy, wherever it is listed */
    check_cgroup("4:memory:/m\n3:cpu,cpuacct:/user.slice/user-0.slice\n2:pids:/p\n",
                 "/user.slice/user-0.slice");
    check_cgroup("12:cpuacct:/a\n11:cpu:/b\n", "/a"); /* the first one listed */
    check_cgroup("3:cpuset:/s\n2:name=systemd:/n\n1:net_cls,cpuset:/x\n", NULL);
    check_cgroup("0::/a:b/c (deleted)\n", "/a:b/c (deleted)"); /* ':' in a path */
    check_cgroup("1:cpu:/x", "/x");                            /* no final newline */
    check_cgroup("", NULL);
    check_cgroup("0::\n", NULL); /* empty path */
    check_cgroup("garbage\n", NULL);
    check_cgroup("10::/not-v2\n", NULL);
    char *cg = tasks_parse_cgroup("0::/ab\n", 5); /* only len bytes */
    assert_string_equal(cg, "/a");
    free(cg);
}

/* A stat line for the fixture tree. */
static void put_stat(const char *root, int pid, const char *comm, char state, unsigned flags,
                     unsigned long utime, unsigned long stime, unsigned threads,
                     unsigned long start)
{
    char rel[64];
    snprintf(rel, sizeof(rel), "proc/%d/stat", pid);
    tree_write(root, rel,
               "%d (%s) %c 1 %d %d 0 -1 %u 0 0 0 0 %lu %lu 0 0 20 0 %u 0 %lu 1000 10 "
               "18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n",
               pid, comm, state, pid, pid, flags, utime, stime, threads, start);
}

static void put_status(const char *root, const char *rel, int tgid, unsigned vol, unsigned invol)
{
    tree_write(root, rel,
               "Name:\tx\nTgid:\t%d\nvoluntary_ctxt_switches:\t%u\n"
               "nonvoluntary_ctxt_switches:\t%u\n",
               tgid, vol, invol);
}

static void put_bytes(const char *root, const char *rel, const char *data, size_t len)
{
    char path[4200];
    tree_write(root, rel, "");
    snprintf(path, sizeof(path), "%s/%s", root, rel);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, len, f), len);
    fclose(f);
}

/* Five processes (a kernel thread, two single-threaded ones, one with two
 * threads, a zombie), one listed but gone, one garbage, and entries that
 * are not processes. */
static char *make_root(void)
{
    char *root = tree_new();
    put_stat(root, 2, "kthreadd", 'S', 0x208040, 0, 1, 1, 25);
    tree_write(root, "proc/2/cgroup", "0::/\n");
    put_status(root, "proc/2/status", 2, 50, 1);
    put_stat(root, 1, "systemd", 'S', 0x400100, 120, 80, 1, 1);
    put_bytes(root, "proc/1/cmdline", "/sbin/init\0splash\0", 18);
    tree_write(root, "proc/1/cgroup", "0::/init.scope\n");
    put_status(root, "proc/1/status", 1, 1000, 20);
    put_stat(root, 10, "a) b (c", 'R', 0x400000, 7, 3, 1, 500);
    put_bytes(root, "proc/10/cmdline", "python3\0-c\0x\0\0", 14);
    tree_write(root, "proc/10/cgroup", "1:cpu,cpuacct:/user.slice\n0::/user.slice/s.scope\n");
    put_status(root, "proc/10/status", 10, 20, 5);
    put_stat(root, 100, "worker", 'S', 0x400040, 1000, 500, 2, 600);
    /* 318 bytes: cut at 255 without splitting an é, the escape shown as '?' */
    char argv[320] = "/usr/bin/worker\0-\x1b";
    for (size_t i = 18; i < 318; i += 2)
        memcpy(argv + i, "\xc3\xa9", 2);
    put_bytes(root, "proc/100/cmdline", argv, 318);
    tree_write(root, "proc/100/cgroup", "3:cpu:/w\n");
    put_status(root, "proc/100/task/100/status", 100, 7, 1);
    put_status(root, "proc/100/task/101/status", 100, 30, 2);
    /* a thread is not listed in /proc, but /proc/TID can be opened */
    tree_write(root, "watt-faults", "proc/101/status @proc/100/task/101/status\n");
    put_stat(root, 200, "zombie", 'Z', 0x400000, 3, 3, 1, 700);
    put_bytes(root, "proc/200/cmdline", "", 0);
    tree_write(root, "proc/300/.keep", "");              /* gone before its stat was read */
    tree_write(root, "proc/400/stat", "400 (garbage\n"); /* named in the diags */
    tree_write(root, "proc/0123/stat", /* a leading zero: not a process directory */
               "123 (leading) S 0 0 0 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 1\n");
    tree_write(root, "proc/stat", "cpu 0 0 0 0\n");
    tree_symlink(root, "proc/self", "1");
    return root;
}

static void scan(struct host *h, const struct tasks_opts *o, const struct tasks_snapshot *prev,
                 struct tasks_snapshot *s, struct diags *d)
{
    assert_int_equal(tasks_scan(h, o, prev, s, d), 0);
    for (size_t i = 1; i < s->n; i++)
        assert_true(s->t[i - 1].pid < s->t[i].pid);
}

static void test_scan_tree(void **state)
{
    char *root = make_root();
    struct host *h;
    assert_int_equal(host_open(root, &h), 0);
    struct tasks_opts o = {.ctxsw = true, .cgroups = true, .cmdline = true};
    struct tasks_snapshot s;
    struct diags d = {0};
    scan(h, &o, NULL, &s, &d);
    assert_int_equal(s.n, 5);
    assert_int_equal(s.vanished, 1);
    assert_false(s.truncated);
    assert_true(s.mono_ns > 0);
    /* the garbage stat is named, and nothing else is a problem */
    assert_int_equal(d.n, 1);
    assert_non_null(strstr(d.v[0].where, "proc/400/stat"));

    const struct task_info *t = tasks_find(&s, 1);
    assert_non_null(t);
    assert_string_equal(t->cmdline, "/sbin/init splash");
    assert_string_equal(t->cgroup, "/init.scope");
    assert_int_equal(t->utime + t->stime, 200);
    assert_int_equal(t->vol_ctxsw, 1000);
    assert_int_equal(t->invol_ctxsw, 20);
    t = tasks_find(&s, 2);
    assert_true(t->kthread);
    assert_null(t->cmdline);
    assert_string_equal(t->cgroup, "/");
    t = tasks_find(&s, 10);
    assert_string_equal(t->comm, "a) b (c");
    assert_string_equal(t->cmdline, "python3 -c x"); /* trailing NULs gone */
    assert_string_equal(t->cgroup, "/user.slice/s.scope");
    t = tasks_find(&s, 100);
    assert_int_equal(strlen(t->cmdline), 254);
    assert_memory_equal(t->cmdline, "/usr/bin/worker -?\xc3\xa9\xc3\xa9", 22);
    assert_memory_equal(t->cmdline + 252, "\xc3\xa9", 2);
    assert_int_equal(t->nthreads, 2);
    assert_int_equal(t->vol_ctxsw, 37); /* summed over task/100 and task/101 */
    assert_int_equal(t->invol_ctxsw, 3);
    assert_string_equal(t->cgroup, "/w");
    t = tasks_find(&s, 200);
    assert_int_equal(t->state, 'Z');
    assert_null(t->cmdline);
    assert_true(t->vol_ctxsw == VAL_NONE); /* no status in the tree */
    assert_null(tasks_find(&s, 300));
    assert_null(tasks_find(&s, 123));

    /* tgid of a thread, of a process, of one that is gone */
    int32_t tgid = 0;
    assert_int_equal(tasks_tgid_of(h, 101, &tgid), 0);
    assert_int_equal(tgid, 100);
    assert_int_equal(tasks_tgid_of(h, 10, &tgid), 0);
    assert_int_equal(tgid, 10);
    tgid = 5;
    assert_int_equal(tasks_tgid_of(h, 300, &tgid), -ENOENT);
    assert_int_equal(tasks_tgid_of(h, 0, &tgid), -EINVAL);
    assert_int_equal(tgid, 5);

    /* nothing optional asked: no cmdline, cgroup or switches */
    struct tasks_snapshot s2;
    struct tasks_opts none = {0};
    scan(h, &none, NULL, &s2, NULL);
    assert_int_equal(s2.n, 5);
    for (size_t i = 0; i < s2.n; i++) {
        assert_null(s2.t[i].cmdline);
        assert_null(s2.t[i].cgroup);
        assert_true(s2.t[i].vol_ctxsw == VAL_NONE && s2.t[i].invol_ctxsw == VAL_NONE);
    }
    tasks_snapshot_clear(&s2);
    tasks_snapshot_clear(&s);
    tasks_snapshot_clear(NULL);
    diags_free(&d);
    host_close(h);
    tree_free(root);
}

static void test_truncated(void **state)
{
    char *root = make_root();
    struct host *h;
    assert_int_equal(host_open(root, &h), 0);
    struct tasks_opts o = {.max_tasks = 3};
    struct tasks_snapshot s;
    scan(h, &o, NULL, &s, NULL);
    assert_int_equal(s.n, 3);
    assert_true(s.truncated);
    assert_int_equal(s.t[0].pid, 1);
    assert_int_equal(s.t[2].pid, 10);
    tasks_snapshot_clear(&s);
    /* the limit met with PIDs left to read: truncated, though 300 and 400
     * would have failed (they are not read to know) */
    o.max_tasks = 5;
    scan(h, &o, NULL, &s, NULL);
    assert_int_equal(s.n, 5);
    assert_true(s.truncated);
    tasks_snapshot_clear(&s);
    o.max_tasks = 6;
    scan(h, &o, NULL, &s, NULL);
    assert_int_equal(s.n, 5);
    assert_false(s.truncated);
    tasks_snapshot_clear(&s);
    host_close(h);
    tree_free(root);
}

/* cmdline and cgroup come from the previous scan for the same process
 * (same pid, start time and comm), and are read again otherwise. */
static void test_cache_and_reuse(void **state)
{
    char *root = make_root();
    struct host *h;
    assert_int_equal(host_open(root, &h), 0);
    struct tasks_opts o = {.cgroups = true, .cmdline = true};
    struct tasks_snapshot a, b, c;
    scan(h, &o, NULL, &a, NULL);
    uint64_t reads = h->nreads;
    /* new text on disk, same identities: the cache is used */
    put_bytes(root, "proc/1/cmdline", "changed\0", 8);
    tree_write(root, "proc/1/cgroup", "0::/moved\n");
    put_bytes(root, "proc/10/cmdline", "bash\0", 5);
    put_bytes(root, "proc/100/cmdline", "new\0", 4);
    tree_write(root, "proc/100/cgroup", "0::/new\n");
    scan(h, &o, &a, &b, NULL);
    /* the stat files (400's garbage one too) and the zombie's cmdline,
     * which was empty: nothing else */
    assert_int_equal(h->nreads - reads, 7);
    assert_string_equal(tasks_find(&b, 1)->cmdline, "/sbin/init splash");
    assert_string_equal(tasks_find(&b, 1)->cgroup, "/init.scope");
    assert_ptr_not_equal(tasks_find(&b, 1)->cmdline, tasks_find(&a, 1)->cmdline); /* copies */
    /* pid 10 exec()s (new comm), pid 100 is reused (new start time) */
    put_stat(root, 10, "bash", 'S', 0x400000, 8, 3, 1, 500);
    put_stat(root, 100, "new", 'S', 0x400000, 1, 0, 1, 9000);
    tasks_snapshot_clear(&a);
    scan(h, &o, &b, &c, NULL);
    assert_string_equal(tasks_find(&c, 1)->cmdline, "/sbin/init splash");
    assert_string_equal(tasks_find(&c, 10)->cmdline, "bash");
    assert_string_equal(tasks_find(&c, 10)->cgroup, "/user.slice/s.scope");
    assert_string_equal(tasks_find(&c, 100)->cmdline, "new");
    assert_string_equal(tasks_find(&c, 100)->cgroup, "/new");

    /* the difference: 10 is the same process, 100 a new one */
    struct task_delta *dl;
    size_t n;
    struct tasks_diff_stats st;
    assert_int_equal(tasks_diff(&b, &c, &dl, &n, &st, NULL), 0);
    assert_int_equal(n, c.n);
    for (size_t i = 0; i < n; i++) {
        assert_ptr_equal(dl[i].t, &c.t[i]);
        if (dl[i].t->pid == 10) {
            assert_false(dl[i].is_new);
            assert_float_equal(dl[i].cpu_s, 0.01, 1e-12);
        } else if (dl[i].t->pid == 100) {
            assert_true(dl[i].is_new);
            assert_float_equal(dl[i].cpu_s, 0.01, 1e-12);
        } else {
            assert_false(dl[i].is_new);
            assert_float_equal(dl[i].cpu_s, 0, 0);
        }
    }
    assert_int_equal(st.reused, 1);
    assert_int_equal(st.born, 1);
    assert_int_equal(st.exited, 1);
    assert_int_equal(st.backwards, 0);
    free(dl);
    tasks_snapshot_clear(&b);
    tasks_snapshot_clear(&c);
    host_close(h);
    tree_free(root);
}

/* A process whose directory is listed but whose files are gone (faults
 * play the kernel's ENOENT and ESRCH), and a root without proc. */
static void test_vanished_and_unlistable(void **state)
{
    char *root = make_root();
    tree_write(root, "watt-faults",
               "proc/10/stat ENOENT\nproc/100/stat EACCES\n"
               "proc/101/status @proc/100/task/101/status\n");
    struct host *h;
    assert_int_equal(host_open(root, &h), 0);
    struct tasks_opts o = {.cmdline = true};
    struct tasks_snapshot s;
    struct diags d = {0};
    scan(h, &o, NULL, &s, &d);
    assert_int_equal(s.n, 3);
    assert_int_equal(s.vanished, 2); /* 10 and 300 */
    assert_null(tasks_find(&s, 10));
    /* the garbage, and the unreadable one with its errno */
    assert_int_equal(d.n, 2);
    assert_int_equal(d.v[1].err, EACCES);
    assert_non_null(strstr(d.v[1].where, "proc/100/stat"));
    assert_non_null(strstr(d.v[1].what, "1 process left out"));
    tasks_snapshot_clear(&s);
    diags_free(&d);
    host_close(h);
    tree_free(root);

    root = tree_new();
    tree_write(root, "sys/.keep", "");
    assert_int_equal(host_open(root, &h), 0);
    s.n = 99;
    assert_true(tasks_scan(h, &o, NULL, &s, &d) < 0);
    assert_int_equal(s.n, 99); /* untouched */
    assert_int_equal(d.n, 1);
    diags_free(&d);
    host_close(h);
    tree_free(root);
}

static struct task_info ti(int32_t pid, uint64_t start, uint64_t ticks, uint64_t vol)
{
    return (struct task_info){.pid = pid,
                              .start_ticks = start,
                              .utime = ticks,
                              .stime = 0,
                              .vol_ctxsw = vol,
                              .invol_ctxsw = VAL_NONE};
}

static void test_diff(void **state)
{
    /* a: 1, 5 (exits), 7 (reused in b), 9 (goes backwards), 11 (threads exit)
     * b: 1, 3 (born), 7', 9, 11, 20 (born) */
    struct task_info at[] = {ti(1, 1, 100, 10), ti(5, 50, 10, 1), ti(7, 70, 500, 3),
                             ti(9, 90, 300, 4), ti(11, 110, 40, 100)};
    struct task_info bt[] = {ti(1, 1, 250, 15), ti(3, 300, 30, 6),   ti(7, 700, 20, 2),
                             ti(9, 90, 299, 5), ti(11, 110, 41, 60), ti(20, 900, 0, VAL_NONE)};
    struct tasks_snapshot a = {.mono_ns = 1000, .n = ARRAY_SIZE(at), .t = at};
    struct tasks_snapshot b = {.mono_ns = 2000, .n = ARRAY_SIZE(bt), .t = bt};
    struct task_delta *dl;
    size_t n;
    struct tasks_diff_stats st;
    struct diags d = {0};
    assert_int_equal(tasks_diff(&a, &b, &dl, &n, &st, &d), 0);
    assert_int_equal(n, 6);
    assert_float_equal(dl[0].cpu_s, 1.5, 1e-12);
    assert_int_equal(dl[0].vol_ctxsw, 5);
    assert_false(dl[0].is_new);
    assert_true(dl[1].is_new); /* born: all its time */
    assert_float_equal(dl[1].cpu_s, 0.3, 1e-12);
    assert_int_equal(dl[1].vol_ctxsw, 6);
    assert_true(dl[2].is_new); /* reused pid: the new process's own time */
    assert_float_equal(dl[2].cpu_s, 0.2, 1e-12);
    assert_false(dl[3].is_new); /* backwards: no CPU time, named */
    assert_float_equal(dl[3].cpu_s, 0, 0);
    assert_true(dl[3].vol_ctxsw == VAL_NONE);
    assert_float_equal(dl[4].cpu_s, 0.01, 1e-12);
    assert_true(dl[4].vol_ctxsw == VAL_NONE); /* the sum fell: threads exited */
    assert_true(dl[5].is_new);
    assert_float_equal(dl[5].cpu_s, 0, 0);
    assert_int_equal(st.born, 3);
    assert_int_equal(st.reused, 1);
    assert_int_equal(st.exited, 2); /* 5, and 7's old process */
    assert_int_equal(st.backwards, 1);
    assert_int_equal(d.n, 1);
    assert_non_null(strstr(d.v[0].where, "process 9"));
    assert_non_null(strstr(d.v[0].what, "backwards"));
    free(dl);
    diags_free(&d);

    /* a truncated at pid 7: 9, 11 and 20 are not known to be new; a
     * truncated b at 7 does not make 9 and 11 exits */
    a.n = 3;
    a.truncated = true;
    assert_int_equal(tasks_diff(&a, &b, &dl, &n, &st, &d), 0);
    assert_false(dl[3].is_new || dl[4].is_new || dl[5].is_new);
    assert_float_equal(dl[4].cpu_s, 0, 0);
    assert_int_equal(st.born, 2);
    assert_int_equal(d.n, 1);
    assert_non_null(strstr(d.v[0].what, "3 processes were not read"));
    free(dl);
    diags_free(&d);
    a = (struct tasks_snapshot){.mono_ns = 1000, .n = ARRAY_SIZE(at), .t = at};
    b.n = 3;
    b.truncated = true;
    assert_int_equal(tasks_diff(&a, &b, &dl, &n, &st, NULL), 0);
    assert_int_equal(st.exited, 2); /* 5 and the old 7 only */
    free(dl);

    /* empty b; and swapped snapshots are refused */
    struct tasks_snapshot e = {.mono_ns = 3000};
    assert_int_equal(tasks_diff(&a, &e, &dl, &n, &st, NULL), 0);
    assert_int_equal(n, 0);
    assert_int_equal(st.exited, 5);
    free(dl);
    assert_int_equal(tasks_diff(&e, &a, &dl, &n, &st, NULL), -EINVAL);
}

static int go[2], done[2];

static void *blocked_thread(void *arg)
{
    pid_t *tid = arg;
    *tid = gettid();
    char c;
    if (write(go[1], "x", 1) != 1 || read(done[0], &c, 1) < 0)
        return NULL;
    return NULL;
}

/* The running kernel: this process, named like a trap, with a second
 * thread. */
static void test_live(void **state)
{
    struct host *h;
    assert_int_equal(host_open("/", &h), 0);
    if (!host_exists(h, HOST_PROC, "self/stat")) {
        host_close(h);
        skip();
    }
    char old[17] = {0};
    prctl(PR_GET_NAME, old);
    prctl(PR_SET_NAME, "a) b (c");
    assert_int_equal(pipe(go), 0);
    assert_int_equal(pipe(done), 0);
    pthread_t th;
    pid_t tid = 0;
    assert_int_equal(pthread_create(&th, NULL, blocked_thread, &tid), 0);
    char c;
    assert_int_equal(read(go[0], &c, 1), 1); /* the thread runs */

    struct tasks_opts o = {.ctxsw = true, .cgroups = true, .cmdline = true};
    struct tasks_snapshot a, b;
    struct diags d = {0};
    scan(h, &o, NULL, &a, &d);
    uint64_t t0 = now_monotonic_ns();
    scan(h, &o, &a, &b, &d);
    uint64_t t1 = now_monotonic_ns();
    print_message("# live: %zu processes, %zu vanished; cached scan with thread walk %.1f µs per "
                  "process\n",
                  b.n, b.vanished, (double)(t1 - t0) / 1e3 / (double)(b.n ? b.n : 1));
    const struct task_info *me = tasks_find(&b, getpid());
    assert_non_null(me);
    assert_string_equal(me->comm, "a) b (c");
    assert_false(me->kthread);
    assert_int_equal(me->nthreads, 2);
    assert_true(me->vol_ctxsw != VAL_NONE && me->vol_ctxsw > 0);
    assert_non_null(me->cmdline);
    assert_non_null(strstr(me->cmdline, "test_tasks"));
    assert_non_null(me->cgroup);
    assert_int_equal(me->cgroup[0], '/');
    assert_int_equal(me->start_ticks, tasks_find(&a, getpid())->start_ticks);
    assert_false(a.truncated);
    int32_t tgid;
    assert_int_equal(tasks_tgid_of(h, tid, &tgid), 0);
    assert_int_equal(tgid, getpid());
    /* a kernel thread has no cmdline */
    const struct task_info *k = tasks_find(&b, 2);
    if (k && k->kthread)
        assert_null(k->cmdline);

    struct task_delta *dl;
    size_t n;
    struct tasks_diff_stats st;
    assert_int_equal(tasks_diff(&a, &b, &dl, &n, &st, &d), 0);
    assert_int_equal(st.backwards, 0);
    for (size_t i = 0; i < n; i++)
        assert_true(dl[i].cpu_s >= 0);
    free(dl);
    for (size_t i = 0; i < d.n; i++)
        print_message("# diag: %s: %s\n", d.v[i].where, d.v[i].what);

    assert_int_equal(write(done[1], "x", 1), 1);
    pthread_join(th, NULL);
    for (int i = 0; i < 2; i++)
        close(go[i]), close(done[i]);
    prctl(PR_SET_NAME, old);
    tasks_snapshot_clear(&a);
    tasks_snapshot_clear(&b);
    diags_free(&d);
    host_close(h);
}

/* ---- each cgroup's CPU from cpu.stat (the agent's, no /proc scan) ---- */

static void cg_write(const char *root, const char *dir, unsigned long long us)
{
    tree_write(root, dir, "usage_usec %llu\nuser_usec 1\nsystem_usec 2\n", us);
}

static void test_cgroup_cpu_scan(void **state)
{
    char *root = tree_new();
    /* hybrid: the v2 tree under fs/cgroup/unified; a v1 hierarchy beside it */
    tree_write(root, "sys/fs/cgroup/cpuacct/cgroup.clone_children", "0\n");
    tree_write(root, "sys/fs/cgroup/cpuacct/cgroup.procs", "1\n");
    tree_write(root, "sys/fs/cgroup/unified/cgroup.procs", "1\n");
    cg_write(root, "sys/fs/cgroup/unified/cpu.stat", 10000000);
    cg_write(root, "sys/fs/cgroup/unified/system.slice/cpu.stat", 4000000);
    cg_write(root, "sys/fs/cgroup/unified/system.slice/ssh.service/cpu.stat", 1000000);
    cg_write(root, "sys/fs/cgroup/unified/user.slice/cpu.stat", 2000000);
    struct host *h;
    assert_int_equal(host_open(root, &h), 0);
    struct cgroup_cpu_snapshot a, b;
    assert_int_equal(cgroup_cpu_scan(h, NULL, true, 0, &a), 0);
    assert_string_equal(a.root, "fs/cgroup/unified");
    assert_int_equal(a.n, 4);
    assert_string_equal(a.v[0].path, "/");
    assert_non_null(cgroup_cpu_find(&a, "/system.slice/ssh.service"));
    assert_int_equal(cgroup_cpu_find(&a, "/user.slice")->usage_ns, 2000000000ull);
    assert_true(cgroup_cpu_find(&a, "/user.slice")->id != 0); /* the directory's inode */
    assert_ptr_equal(cgroup_cpu_find_id(&a, cgroup_cpu_find(&a, "/user.slice")->id),
                     cgroup_cpu_find(&a, "/user.slice"));
    /* one second later: root +1.0 s, system.slice +0.5 (ssh +0.2), user.slice
     * gone (its last growth stays with the root), a new one with 0.1 s */
    cg_write(root, "sys/fs/cgroup/unified/cpu.stat", 11000000);
    cg_write(root, "sys/fs/cgroup/unified/system.slice/cpu.stat", 4500000);
    cg_write(root, "sys/fs/cgroup/unified/system.slice/ssh.service/cpu.stat", 1200000);
    tree_write(root, "sys/fs/cgroup/unified/user.slice/cpu.stat", "%s", "");
    cg_write(root, "sys/fs/cgroup/unified/new.scope/cpu.stat", 100000);
    assert_int_equal(cgroup_cpu_scan(h, &a, false, 0, &b), 0);
    assert_int_equal(b.n, 4); /* user.slice has no usable cpu.stat now */
    double own[4];
    cgroup_cpu_own_delta(&a, &b, own);
    assert_true(fabs(own[cgroup_cpu_find(&b, "/") - b.v] - 0.4) < 1e-9);
    assert_true(fabs(own[cgroup_cpu_find(&b, "/system.slice") - b.v] - 0.3) < 1e-9);
    assert_true(fabs(own[cgroup_cpu_find(&b, "/system.slice/ssh.service") - b.v] - 0.2) < 1e-9);
    assert_true(fabs(own[cgroup_cpu_find(&b, "/new.scope") - b.v] - 0.1) < 1e-9);
    /* the own times add up to the root's growth: nothing counted twice */
    double sum = 0;
    for (size_t i = 0; i < b.n; i++)
        sum += own[i];
    assert_true(fabs(sum - 1.0) < 1e-9);
    /* ids come from the previous snapshot unless asked again */
    assert_int_equal(cgroup_cpu_find(&b, "/system.slice")->id,
                     cgroup_cpu_find(&a, "/system.slice")->id);
    cgroup_cpu_snapshot_clear(&a);
    cgroup_cpu_snapshot_clear(&b);
    /* the guard's reader, the same parser */
    uint64_t ns;
    const char *src;
    assert_int_equal(cgroup_cpu_read(h, "system.slice", &ns, &src), 0);
    assert_int_equal(ns, 4500000000ull);
    assert_string_equal(src, "cgroup v2 cpu.stat");
    uint64_t us;
    assert_int_equal(cgroup_cpu_parse_stat("user_usec 5\n", &us), -EINVAL);
    assert_int_equal(cgroup_cpu_parse_stat("usage_usec -5\n", &us), -EINVAL);
    host_close(h);
    /* no v2 hierarchy: said */
    char *v1 = tree_new();
    tree_write(v1, "sys/fs/cgroup/cpuacct/cgroup.clone_children", "0\n");
    assert_int_equal(host_open(v1, &h), 0);
    assert_int_equal(cgroup_cpu_scan(h, NULL, true, 0, &a), -ENOENT);
    host_close(h);
    tree_free(v1);
    tree_free(root);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_stat_real),
        cmocka_unit_test(test_cgroup_cpu_scan),
        cmocka_unit_test(test_parse_stat_edges),
        cmocka_unit_test(test_parse_status),
        cmocka_unit_test(test_parse_cgroup),
        cmocka_unit_test(test_scan_tree),
        cmocka_unit_test(test_truncated),
        cmocka_unit_test(test_cache_and_reuse),
        cmocka_unit_test(test_vanished_and_unlistable),
        cmocka_unit_test(test_diff),
        cmocka_unit_test(test_live),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
