/* The packer acting (tune/packer.c) on fixture trees in a temporary
 * directory: the cpu-list knob, the [pack] section and its errors, the
 * journalled cpuset writes on v1 and v2 trees put back byte for byte, a
 * write the kernel refuses (rolled back), a CPU going offline while
 * packed (replanned), and growth on CPU pressure. Nothing here touches
 * the live machine: the live test is tests/cli (helper packlive's). */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/util.h"
#include "host/host.h"
#include "tree.h"
#include "tune/journal.h"
#include "tune/knob.h"
#include "tune/packer.h"
#include "tune/profile.h"

#define S 1000000000ull

static char *slurp(const char *root, const char *rel)
{
    char path[4200];
    snprintf(path, sizeof(path), "%s/%s", root, rel);
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = calloc(1, 4096);
    size_t n = fread(buf, 1, 4095, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static void assert_file(const char *root, const char *rel, const char *want)
{
    char *got = slurp(root, rel);
    if (!got || strcmp(got, want) != 0)
        fail_msg("%s: got '%s', want '%s'", rel, got ? got : "(none)", want);
    free(got);
}

/* 4 CPUs, one package, a core each; online as ONLINE ("0-3", "1-3") */
static void topo(const char *root, const char *online)
{
    tree_write(root, "sys/devices/system/cpu/possible", "0-3\n");
    tree_write(root, "sys/devices/system/cpu/present", "0-3\n");
    tree_write(root, "sys/devices/system/cpu/online", "%s\n", online);
    int first = online[0] - '0';
    for (int c = 0; c < 4; c++) {
        char rel[128];
        snprintf(rel, sizeof(rel), "sys/devices/system/cpu/cpu%d/online", c);
        tree_write(root, rel, "%d\n", c >= first);
        snprintf(rel, sizeof(rel), "sys/devices/system/cpu/cpu%d/topology/physical_package_id", c);
        tree_write(root, rel, "0\n");
        snprintf(rel, sizeof(rel), "sys/devices/system/cpu/cpu%d/topology/core_id", c);
        tree_write(root, rel, "%d\n", c);
        snprintf(rel, sizeof(rel), "sys/devices/system/cpu/cpu%d/topology/die_id", c);
        tree_write(root, rel, "0\n");
    }
}

/* /proc/stat with BUSY of TOTAL ticks (all CPUs together) */
static void set_stat(const char *root, unsigned busy, unsigned total)
{
    tree_write(root, "proc/stat", "cpu  %u 0 0 %u 0 0 0 0 0 0\ncpu0 0 0 0 0 0 0 0 0 0 0\n", busy,
               total - busy);
}

#define V1 "sys/fs/cgroup/cpuset"

/* A v1 hybrid: the cpuset hierarchy, cgroup2 at unified/ without
 * controllers (like this VM). work/ has a child following it, pinned/
 * is narrower than the root. */
static char *make_v1(void)
{
    char *root = tree_new();
    topo(root, "0-3");
    set_stat(root, 0, 100);
    tree_write(root, "proc/self/mountinfo",
               "30 22 0:27 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
               "33 30 0:30 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset\n"
               "40 30 0:37 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n");
    tree_write(root, "sys/fs/cgroup/unified/cgroup.controllers", "\n");
    tree_write(root, V1 "/cpuset.cpus", "0-3\n");
    tree_write(root, V1 "/cpuset.effective_cpus", "0-3\n");
    tree_write(root, V1 "/tasks", "1\n");
    tree_write(root, V1 "/work/cpuset.cpus", "0-3\n");
    tree_write(root, V1 "/work/cpuset.effective_cpus", "0-3\n");
    tree_write(root, V1 "/work/tasks", "");
    tree_write(root, V1 "/work/a/cpuset.cpus", "0-3\n");
    tree_write(root, V1 "/work/a/tasks", "");
    tree_write(root, V1 "/other/cpuset.cpus", "0-3\n");
    tree_write(root, V1 "/other/tasks", "");
    tree_write(root, V1 "/pinned/cpuset.cpus", "3\n");
    tree_write(root, V1 "/pinned/tasks", "");
    tree_write(root, "proc/pressure/cpu",
               "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
               "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n");
    return root;
}

static struct host *open_root(const char *root)
{
    struct host *h;
    assert_int_equal(host_open(root, &h), 0);
    return h;
}

static struct profile *parse(const char *text)
{
    struct profile *p;
    char *err = NULL;
    int r = profile_parse_text(text, "t.conf", &p, NULL, NULL, &err);
    if (r < 0)
        fail_msg("%s", err);
    return p;
}

static int config(struct host *h, const char *text, struct pack_config *c, char **err)
{
    struct profile *p = parse(text);
    *err = NULL;
    int r = pack_config_from_profile(h, p, c, err);
    profile_free(p);
    return r;
}

static void test_knob(void **state)
{
    (void)state;
    const struct knob *k = knob_find(HOST_SYS, "fs/cgroup/cpuset/work/cpuset.cpus");
    assert_non_null(k);
    assert_string_equal(k->name, "cgroup.cpuset_cpus");
    assert_non_null(knob_find(HOST_SYS, "fs/cgroup/system.slice/cpuset.cpus"));
    assert_null(knob_find(HOST_SYS, "fs/cgroup/../cpuset.cpus"));
    assert_null(knob_find(HOST_SYS, "fs/cgroup/work/cpuset.mems"));
    assert_null(knob_find(HOST_SYS, "fs/cgroup/work/cgroup.procs"));
    const char *good[] = {"0", "0-3", "0-3,8,10-11", "0-3\n", "", "\n", "8191"};
    const char *bad[] = {"3-0",  "0-",  ",1", "1,",      "1,,2",  "a",
                         "8192", "0 1", "-1", "0-3\n\n", "0:1/2", "all"};
    for (size_t i = 0; i < ARRAY_SIZE(good); i++)
        if (!knob_value_ok(k, good[i]))
            fail_msg("refused '%s'", good[i]);
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
        if (knob_value_ok(k, bad[i]))
            fail_msg("took '%s'", bad[i]);
}

static void test_config(void **state)
{
    (void)state;
    char *root = make_v1();
    struct host *h = open_root(root);
    struct pack_config c;
    char *err;
    assert_int_equal(config(h, "[cpufreq]\ngovernor = performance\n", &c, &err), -ENOENT);

    assert_int_equal(config(h, "[pack]\ncgroups = work other\nheadroom = 0.5\n", &c, &err), 0);
    assert_int_equal(c.ncgroups, 2);
    assert_string_equal(c.cgroups[1], "other");
    assert_true(c.headroom == 0.5 && c.shrink_slack == 0.25 && c.min_cpus == 1);
    assert_true(c.window_s == 10 && c.interval_s == 1);
    assert_int_equal(c.stall_us, 10000);
    assert_int_equal(c.psi_window_us, 500000);
    pack_config_clear(&c);

    /* a cgroup that does not exist: named, with the profile line */
    assert_int_equal(config(h, "[pack]\nheadroom = 0.3\ncgroups = work nosuch\n", &c, &err),
                     -EINVAL);
    assert_non_null(strstr(err, "t.conf:3"));
    assert_non_null(strstr(err, "'nosuch' does not exist"));
    free(err);
    /* the default cgroups are not on this tree */
    assert_int_equal(config(h, "[pack]\nheadroom = 0.25\n", &c, &err), -EINVAL);
    if (!strstr(err, "'system.slice' does not exist"))
        fail_msg("%s", err);
    free(err);
    /* ... unless missing = skip */
    assert_int_equal(config(h, "[pack]\nmissing = skip\n", &c, &err), 0);
    pack_config_clear(&c);

    /* bad values: the profile's checks, then the packer's own */
    struct profile *p;
    err = NULL;
    assert_int_equal(
        profile_parse_text("[pack]\nheadroom = lots\n", "t.conf", &p, NULL, NULL, &err), -EINVAL);
    assert_non_null(strstr(err, "t.conf:2"));
    free(err);
    err = NULL;
    assert_int_equal(
        profile_parse_text("[pack]\npressure_window_us = 100\n", "t.conf", &p, NULL, NULL, &err),
        -EINVAL);
    free(err);
    assert_int_equal(config(h, "[pack]\ncgroups = work\npressure_stall_us = 600000\n", &c, &err),
                     -EINVAL);
    assert_non_null(strstr(err, "more than pressure_window_us"));
    free(err);
    assert_int_equal(config(h, "[pack]\ncgroups = work/../x\n", &c, &err), -EINVAL);
    assert_non_null(strstr(err, "not a cgroup path"));
    free(err);
    err = NULL;
    assert_int_equal(profile_parse_text("[pack]\ncgroups = work\nmissing = maybe\n", "t.conf", &p,
                                        NULL, NULL, &err),
                     -EINVAL);
    assert_non_null(strstr(err, "t.conf:3"));
    free(err);
    host_close(h);
    free(root);
}

static struct packer *start(struct host *h, const char *cgroups)
{
    char text[256];
    snprintf(text, sizeof(text), "[pack]\ncgroups = %s\nwindow_s = 10\n", cgroups);
    struct pack_config c;
    char *err;
    if (config(h, text, &c, &err) < 0)
        fail_msg("%s", err);
    struct packer *p;
    assert_int_equal(packer_new(h, &c, NULL, &p), 0);
    pack_config_clear(&c);
    return p;
}

static int tick(struct packer *p, uint64_t t)
{
    char *msg = NULL;
    int r = packer_tick(p, t, &msg);
    free(msg);
    return r;
}

/* v1: shrink to one CPU (the child with it), restore byte for byte */
static void test_v1_round_trip(void **state)
{
    (void)state;
    char *root = make_v1();
    struct host *h = open_root(root);
    struct packer *p = start(h, "work pinned");
    struct pack_status st;
    assert_int_equal(tick(p, 1 * S), 0); /* measuring */
    packer_get_status(p, &st);
    assert_string_equal(st.state, "measuring");
    set_stat(root, 50, 500); /* 50 of 400 ticks busy on 4 CPUs: 0.5 CPUs */
    assert_int_equal(tick(p, 2 * S), 1);
    assert_file(root, V1 "/work/cpuset.cpus", "0\n");
    assert_file(root, V1 "/work/a/cpuset.cpus", "0\n");
    assert_file(root, V1 "/pinned/cpuset.cpus", "3\n");
    packer_get_status(p, &st);
    assert_string_equal(st.state, "packed");
    assert_string_equal(st.cpus, "0");
    assert_true(fabs(st.demand_cpus - 0.5) < 1e-9);
    assert_int_equal(st.actions[PACK_GROW], 1);
    assert_int_equal(st.ncgroups, 2);
    assert_true(st.cgroups[0].packed);
    assert_false(st.cgroups[1].packed);
    assert_non_null(strstr(st.cgroups[1].note, "pinned to CPUs 3"));
    /* the journal holds owner pack's records */
    char *j = slurp(root, "var/lib/watt/journal");
    assert_non_null(strstr(j, "owner=pack"));
    assert_non_null(strstr(j, "old=0-3%0A"));
    free(j);

    /* demand rises to 2.2 CPUs: grow, parent first, to 3 CPUs (3 is pinned) */
    set_stat(root, 930, 1300); /* 930 of 1200 on 4: 3.1 CPUs */
    assert_int_equal(tick(p, 3 * S), 1);
    assert_file(root, V1 "/work/cpuset.cpus", "0-2\n");
    assert_file(root, V1 "/work/a/cpuset.cpus", "0-2\n");

    /* release: every file as it was, byte for byte */
    char *err = NULL;
    assert_int_equal(packer_release(p, &err), 0);
    assert_file(root, V1 "/work/cpuset.cpus", "0-3\n");
    assert_file(root, V1 "/work/a/cpuset.cpus", "0-3\n");
    assert_file(root, V1 "/pinned/cpuset.cpus", "3\n");
    packer_free(p);
    host_close(h);
    free(root);
}

/* a packer dropped without release (the SIGKILL case) leaves records the
 * next start's restore (owner pack) puts back */
static void test_restore_after_kill(void **state)
{
    (void)state;
    char *root = make_v1();
    struct host *h = open_root(root);
    struct packer *p = start(h, "work");
    tick(p, 1 * S);
    set_stat(root, 10, 500);
    assert_int_equal(tick(p, 2 * S), 1);
    assert_file(root, V1 "/work/cpuset.cpus", "0\n");
    /* what the next start does (agent/tuning.c recover()) */
    struct journal *jn;
    char *err = NULL;
    assert_int_equal(journal_open(h, NULL, "agent", &jn, &err), 0);
    struct journal_restore_report rep = {0};
    assert_int_equal(journal_restore(jn, PACK_JOURNAL_OWNER, 0, &rep), 0);
    assert_int_equal(rep.restored, 2);
    journal_restore_report_free(&rep);
    journal_close(jn);
    assert_file(root, V1 "/work/cpuset.cpus", "0-3\n");
    assert_file(root, V1 "/work/a/cpuset.cpus", "0-3\n");
    /* the packer's own release then has nothing left to do */
    assert_int_equal(packer_release(p, &err), 0);
    packer_free(p);
    host_close(h);
    free(root);
}

/* the kernel refuses other/'s cpuset: work/'s write of the same tick is
 * rolled back, nothing half-applied */
static void test_refused_rolls_back(void **state)
{
    (void)state;
    char *root = make_v1();
    tree_write(root, "watt-faults", V1 "/other/cpuset.cpus EINVAL op=write\n");
    struct host *h = open_root(root);
    struct packer *p = start(h, "work other");
    tick(p, 1 * S);
    set_stat(root, 10, 500);
    char *msg = NULL;
    assert_int_equal(packer_tick(p, 2 * S, &msg), -EINVAL);
    assert_non_null(strstr(msg, "cgroup other"));
    assert_non_null(strstr(msg, "refused"));
    assert_non_null(strstr(msg, "rolled back"));
    free(msg);
    assert_file(root, V1 "/work/cpuset.cpus", "0-3\n");
    assert_file(root, V1 "/work/a/cpuset.cpus", "0-3\n");
    assert_file(root, V1 "/other/cpuset.cpus", "0-3\n");
    struct pack_status st;
    packer_get_status(p, &st);
    assert_string_equal(st.state, "failing");
    assert_int_equal(st.failures, 1);
    assert_int_equal(st.ncpus, 0);
    packer_free(p);
    host_close(h);
    free(root);
}

/* CPU 0 goes offline while packed on it: replan, never a set with it */
static void test_offline_replan(void **state)
{
    (void)state;
    char *root = make_v1();
    struct host *h = open_root(root);
    struct packer *p = start(h, "work");
    tick(p, 1 * S);
    set_stat(root, 10, 500);
    assert_int_equal(tick(p, 2 * S), 1);
    assert_file(root, V1 "/work/cpuset.cpus", "0\n");
    topo(root, "1-3");
    set_stat(root, 12, 600);
    assert_int_equal(tick(p, 3 * S), 1);
    assert_file(root, V1 "/work/cpuset.cpus", "1\n");
    struct pack_status st;
    packer_get_status(p, &st);
    assert_int_equal(st.actions[PACK_REPLAN], 1);
    char *err = NULL;
    assert_int_equal(packer_release(p, &err), 0);
    assert_file(root, V1 "/work/cpuset.cpus", "0-3\n");
    packer_free(p);
    host_close(h);
    free(root);
}

/* CPU pressure (the PSI total, read at the tick on a recorded tree)
 * grows the set by a core at once, and holds off a shrink */
static void test_pressure_grows(void **state)
{
    (void)state;
    char *root = make_v1();
    struct host *h = open_root(root);
    struct packer *p = start(h, "work");
    tick(p, 1 * S);
    set_stat(root, 10, 500);
    assert_int_equal(tick(p, 2 * S), 1);
    assert_file(root, V1 "/work/cpuset.cpus", "0\n");
    /* 100 ms of stall in one second: over 10000 per 500000 */
    tree_write(root, "proc/pressure/cpu",
               "some avg10=10.00 avg60=1.00 avg300=0.00 total=100000\n"
               "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n");
    set_stat(root, 20, 900);
    assert_int_equal(tick(p, 3 * S), 1);
    assert_file(root, V1 "/work/cpuset.cpus", "0-1\n");
    struct pack_status st;
    packer_get_status(p, &st);
    assert_int_equal(st.pressure_events, 1);
    assert_int_equal(st.grow_latency_count, 1);
    assert_true(st.last_grow_latency_s >= 0);
    assert_true(strstr(st.pressure_source, "pressure/cpu") != NULL);
    /* low demand, no new stall: the shrink waits for the window */
    set_stat(root, 21, 1300);
    assert_int_equal(tick(p, 4 * S), 0);
    assert_file(root, V1 "/work/cpuset.cpus", "0-1\n");
    packer_get_status(p, &st);
    assert_true(st.shrink_hold_s == 10);
    /* after the hold (10 s, the window), the shrink */
    set_stat(root, 22, 1400);
    assert_int_equal(tick(p, 14 * S), 1);
    assert_file(root, V1 "/work/cpuset.cpus", "0\n");
    /* pressure again right after it: the shrink was wrong, the hold doubles */
    tree_write(root, "proc/pressure/cpu",
               "some avg10=10.00 avg60=1.00 avg300=0.00 total=300000\n"
               "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n");
    set_stat(root, 23, 1500);
    assert_int_equal(tick(p, 15 * S), 1);
    assert_file(root, V1 "/work/cpuset.cpus", "0-1\n");
    packer_get_status(p, &st);
    assert_true(st.shrink_hold_s == 20);
    assert_int_equal(st.actions[PACK_SHRINK], 1);
    assert_int_equal(st.pressure_events, 2);
    char *err = NULL;
    assert_int_equal(packer_release(p, &err), 0);
    assert_file(root, V1 "/work/cpuset.cpus", "0-3\n");
    packer_free(p);
    host_close(h);
    free(root);
}

static void pressure(const char *root, unsigned total)
{
    tree_write(root, "proc/pressure/cpu",
               "some avg10=0.00 avg60=0.00 avg300=0.00 total=%u\n"
               "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n",
               total);
}

/* polled pressure is judged as the kernel judges a trigger: the stall
 * within the last window against the threshold, not one tick's rate */
static void test_pressure_window(void **state)
{
    (void)state;
    char *root = make_v1();
    struct host *h = open_root(root);
    struct packer *p = start(h, "work");
    tick(p, 1 * S);
    set_stat(root, 10, 500);
    assert_int_equal(tick(p, 2 * S), 1);
    assert_file(root, V1 "/work/cpuset.cpus", "0\n");
    const uint64_t T = S / 10; /* 100-ms ticks */
    /* a lone 3-ms stall in one tick: 3 % of it, but 3 of the 10 ms per
     * 500 ms the trigger asks for: no growth */
    pressure(root, 3000);
    assert_int_equal(tick(p, 2 * S + T), 0);
    for (int i = 2; i <= 6; i++)
        assert_int_equal(tick(p, 2 * S + i * T), 0);
    assert_file(root, V1 "/work/cpuset.cpus", "0\n");
    /* 3 ms a tick, sustained: 10 ms within 500 ms by the fourth tick */
    unsigned total = 3000;
    int grew_at = 0;
    for (int i = 7; i <= 12 && !grew_at; i++) {
        total += 3000;
        pressure(root, total);
        if (tick(p, 2 * S + i * T) == 1)
            grew_at = i;
    }
    assert_int_equal(grew_at, 10);
    assert_file(root, V1 "/work/cpuset.cpus", "0-1\n");
    char *err = NULL;
    assert_int_equal(packer_release(p, &err), 0);
    packer_free(p);
    host_close(h);
    free(root);
}

/* v2: cgroup.controllers has cpuset; other.slice did not enable it for
 * its children, so other.slice/inner is left alone with a message, never
 * enabled silently */
static char *make_v2(void)
{
    char *root = tree_new();
    topo(root, "0-3");
    set_stat(root, 0, 100);
    tree_write(root, "proc/self/mountinfo",
               "25 22 0:27 / /sys/fs/cgroup rw,relatime - cgroup2 cgroup2 rw\n");
    tree_write(root, "sys/fs/cgroup/cgroup.controllers", "cpuset cpu io memory pids\n");
    tree_write(root, "sys/fs/cgroup/cgroup.subtree_control", "cpuset cpu\n");
    tree_write(root, "sys/fs/cgroup/cpuset.cpus.effective", "0-3\n");
    tree_write(root, "sys/fs/cgroup/system.slice/cpuset.cpus", "\n");
    tree_write(root, "sys/fs/cgroup/system.slice/cgroup.threads", "");
    tree_write(root, "sys/fs/cgroup/system.slice/cpu.pressure",
               "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\n");
    tree_write(root, "sys/fs/cgroup/other.slice/cpuset.cpus", "\n");
    tree_write(root, "sys/fs/cgroup/other.slice/cgroup.subtree_control", "cpu\n");
    tree_write(root, "sys/fs/cgroup/other.slice/inner/cgroup.threads", ""); /* no cpuset.cpus */
    return root;
}

static void test_v2(void **state)
{
    (void)state;
    char *root = make_v2();
    struct host *h = open_root(root);
    struct packer *p = start(h, "system.slice other.slice/inner");
    tick(p, 1 * S);
    set_stat(root, 10, 500);
    assert_int_equal(tick(p, 2 * S), 1);
    assert_file(root, "sys/fs/cgroup/system.slice/cpuset.cpus", "0\n");
    struct pack_status st;
    packer_get_status(p, &st);
    assert_non_null(strstr(st.hierarchy, "cgroup v2 cpuset"));
    assert_non_null(strstr(st.pressure_source, "system.slice/cpu.pressure"));
    assert_false(st.cgroups[1].packed);
    assert_non_null(st.cgroups[1].note);
    if (!strstr(st.cgroups[1].note, "not enabled in") ||
        !strstr(st.cgroups[1].note, "other.slice/cgroup.subtree_control") ||
        !strstr(st.cgroups[1].note, "enable_controller = yes"))
        fail_msg("%s", st.cgroups[1].note);
    assert_file(root, "sys/fs/cgroup/other.slice/cgroup.subtree_control", "cpu\n");
    char *err = NULL;
    assert_int_equal(packer_release(p, &err), 0);
    assert_file(root, "sys/fs/cgroup/system.slice/cpuset.cpus", "\n"); /* empty, as it was */
    packer_free(p);
    host_close(h);
    free(root);
}

/* enable_controller = yes: "+cpuset" journalled into other.slice's
 * subtree_control (the fixture's inner/cpuset.cpus stands in for the file
 * the kernel would then show), put back byte for byte */
static void test_v2_enable(void **state)
{
    (void)state;
    char *root = make_v2();
    tree_write(root, "sys/fs/cgroup/other.slice/inner/cpuset.cpus", "\n");
    struct host *h = open_root(root);
    struct pack_config c;
    char *err;
    if (config(h, "[pack]\ncgroups = other.slice/inner\nenable_controller = yes\n", &c, &err) < 0)
        fail_msg("%s", err);
    assert_true(c.enable_controller);
    struct packer *p;
    assert_int_equal(packer_new(h, &c, NULL, &p), 0);
    pack_config_clear(&c);
    tick(p, 1 * S);
    set_stat(root, 10, 500);
    assert_int_equal(tick(p, 2 * S), 1);
    assert_file(root, "sys/fs/cgroup/other.slice/cgroup.subtree_control", "+cpuset\n");
    assert_file(root, "sys/fs/cgroup/other.slice/inner/cpuset.cpus", "0\n");
    assert_file(root, "sys/fs/cgroup/cgroup.subtree_control", "cpuset cpu\n"); /* had it */
    char *j = slurp(root, "var/lib/watt/journal");
    assert_non_null(strstr(j, "old=cpu%0A new=+cpuset"));
    free(j);
    err = NULL;
    assert_int_equal(packer_release(p, &err), 0);
    assert_file(root, "sys/fs/cgroup/other.slice/inner/cpuset.cpus", "\n");
    assert_file(root, "sys/fs/cgroup/other.slice/cgroup.subtree_control", "cpu\n");
    packer_free(p);
    host_close(h);
    free(root);
}

/* v2: CPUs of an isolated partition (the root's cpuset.cpus.isolated)
 * are never packed */
static void test_v2_partition(void **state)
{
    (void)state;
    char *root = make_v2();
    tree_write(root, "sys/fs/cgroup/cpuset.cpus.isolated", "0\n");
    struct host *h = open_root(root);
    struct packer *p = start(h, "system.slice");
    tick(p, 1 * S);
    set_stat(root, 10, 500);
    assert_int_equal(tick(p, 2 * S), 1);
    assert_file(root, "sys/fs/cgroup/system.slice/cpuset.cpus", "1\n");
    packer_free(p);
    assert_file(root, "sys/fs/cgroup/system.slice/cpuset.cpus", "\n");
    host_close(h);
    free(root);
}

/* the subtree_control values: the knob, the live undo, what is in force */
static void test_controllers(void **state)
{
    (void)state;
    const struct knob *k = knob_find(HOST_SYS, "fs/cgroup/cgroup.subtree_control");
    assert_non_null(k);
    assert_string_equal(k->name, "cgroup.subtree_control");
    assert_non_null(knob_find(HOST_SYS, "fs/cgroup/unified/a.slice/cgroup.subtree_control"));
    assert_true(knob_value_ok(k, "cpu memory\n") && knob_value_ok(k, "+cpuset") &&
                knob_value_ok(k, "") && knob_value_ok(k, "-cpuset +cpu"));
    assert_false(knob_value_ok(k, "cpu  memory") || knob_value_ok(k, "+") ||
                 knob_value_ok(k, "cpu;rm") || knob_value_ok(k, "+cpuset "));
    char *u = journal_controllers_undo("cpu memory\n", "cpuset cpu memory\n");
    assert_string_equal(u, "-cpuset");
    free(u);
    u = journal_controllers_undo("cpu\n", "cpu\n");
    assert_string_equal(u, "");
    free(u);
    u = journal_controllers_undo("cpu io", "cpuset");
    assert_string_equal(u, "-cpuset +cpu +io");
    free(u);
}

/* demand = cgroups: the packed cgroups' cpu.stat usage over the window,
 * whatever the rest of the machine does */
static void test_demand_cgroups(void **state)
{
    (void)state;
    char *root = make_v1();
    /* the unified hierarchy of the hybrid has the same cgroup, with cpu.stat */
    tree_write(root, "sys/fs/cgroup/unified/work/cpu.stat", "usage_usec 1000\nuser_usec 0\n");
    struct host *h = open_root(root);
    struct pack_config c;
    char *err;
    if (config(h, "[pack]\ncgroups = work\ndemand = cgroups\n", &c, &err) < 0)
        fail_msg("%s", err);
    assert_true(c.demand_cgroups);
    struct packer *p;
    assert_int_equal(packer_new(h, &c, NULL, &p), 0);
    pack_config_clear(&c);
    set_stat(root, 0, 100);
    tick(p, 1 * S);
    /* the machine is saturated, the cgroup uses 0.3 CPUs */
    set_stat(root, 400, 500);
    tree_write(root, "sys/fs/cgroup/unified/work/cpu.stat", "usage_usec 301000\nuser_usec 0\n");
    assert_int_equal(tick(p, 2 * S), 1);
    assert_file(root, V1 "/work/cpuset.cpus", "0\n");
    struct pack_status st;
    packer_get_status(p, &st);
    assert_true(fabs(st.demand_cpus - 0.3) < 1e-9);
    assert_non_null(strstr(st.demand_source, "usage_usec"));
    assert_int_equal(config(h, "[pack]\ncgroups = work\ndemand = cgroups\n", &c, &err), 0);
    pack_config_clear(&c);
    packer_free(p); /* releases */
    assert_file(root, V1 "/work/cpuset.cpus", "0-3\n");
    host_close(h);
    free(root);
}

/* a real-time task below a cgroup (its child's tasks): left alone, said;
 * one that comes after packing gives the cgroup back */
static void test_realtime(void **state)
{
    (void)state;
    char *root = make_v1();
    char stat[512] = "4242 (rt worker) S";
    for (int f = 4; f <= 40; f++)
        strcat(stat, " 0");
    strcat(stat, " 1 0 0\n"); /* policy (41): SCHED_FIFO */
    tree_write(root, "proc/4242/stat", "%s", stat);
    struct host *h = open_root(root);
    struct packer *p = start(h, "work other");
    tick(p, 1 * S);
    set_stat(root, 10, 500);
    assert_int_equal(tick(p, 2 * S), 1);
    assert_file(root, V1 "/other/cpuset.cpus", "0\n");
    /* a FIFO task comes into other/ */
    tree_write(root, V1 "/other/tasks", "4242\n");
    set_stat(root, 12, 600);
    tick(p, 4 * S);
    assert_file(root, V1 "/other/cpuset.cpus", "0-3\n"); /* given back */
    assert_file(root, V1 "/work/cpuset.cpus", "0\n");    /* the other stays packed */
    struct pack_status st;
    packer_get_status(p, &st);
    assert_non_null(st.cgroups[1].note);
    assert_non_null(strstr(st.cgroups[1].note, "real-time task (tid 4242)"));
    assert_false(st.cgroups[1].packed);
    assert_true(st.cgroups[0].packed);
    /* and in a child of work/: work is left alone too */
    tree_write(root, V1 "/work/a/tasks", "4242\n");
    set_stat(root, 14, 700);
    tick(p, 6 * S);
    assert_file(root, V1 "/work/cpuset.cpus", "0-3\n");
    assert_file(root, V1 "/work/a/cpuset.cpus", "0-3\n");
    packer_get_status(p, &st);
    assert_non_null(st.cgroups[0].note);
    packer_free(p);
    host_close(h);
    free(root);
}

static void test_parsers(void **state)
{
    (void)state;
    uint64_t b, t;
    assert_int_equal(pack_parse_proc_stat("intr 1\ncpu  1 2 3 4 5 6 7 8 9 10\n", &b, &t), 0);
    assert_int_equal(b, 1 + 2 + 3 + 6 + 7 + 8);
    assert_int_equal(t, b + 4 + 5);
    assert_int_equal(pack_parse_proc_stat("cpu0 1 2 3 4\n", &b, &t), -EINVAL);
    assert_int_equal(pack_parse_proc_stat("cpu  1 2 3 4\n", &b, &t), 0); /* 2.4's four */
    assert_int_equal(b, 6);
    uint64_t us;
    assert_int_equal(pack_parse_pressure_total("some avg10=0.00 avg60=0.00 avg300=0.00 "
                                               "total=16106498404\nfull total=0\n",
                                               &us),
                     0);
    assert_int_equal(us, 16106498404ull);
    assert_int_equal(pack_parse_pressure_total("full avg10=0 total=1\n", &us), -EINVAL);
    assert_int_equal(pack_parse_pressure_total("some avg10=0\nfull total=1\n", &us), -EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_knob),
        cmocka_unit_test(test_config),
        cmocka_unit_test(test_v1_round_trip),
        cmocka_unit_test(test_restore_after_kill),
        cmocka_unit_test(test_refused_rolls_back),
        cmocka_unit_test(test_offline_replan),
        cmocka_unit_test(test_pressure_grows),
        cmocka_unit_test(test_pressure_window),
        cmocka_unit_test(test_v2),
        cmocka_unit_test(test_v2_enable),
        cmocka_unit_test(test_v2_partition),
        cmocka_unit_test(test_controllers),
        cmocka_unit_test(test_demand_cgroups),
        cmocka_unit_test(test_realtime),
        cmocka_unit_test(test_parsers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
