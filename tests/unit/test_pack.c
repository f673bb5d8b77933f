/* The packer's plan (model/pack.c) on the fixture machines' real
 * topologies, read by topology_read() from the generated roots, and the
 * reading of isolcpus/nohz_full (host/isolation.c). */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* cmocka.h needs stdarg, stddef, stdint and setjmp first */
#include <cmocka.h>

#include "host/isolation.h"
#include "host/topology.h"
#include "model/pack.h"
#include "tree.h"

static void read_fixture(const char *name, struct topology *ret)
{
    const char *dir = getenv("WATT_FIXTURES");
    assert_non_null(dir);
    char root[4096];
    snprintf(root, sizeof(root), "%s/%s", dir, name);
    struct host *h;
    assert_int_equal(host_open(root, &h), 0);
    struct diags d = {0};
    assert_int_equal(topology_read(h, ret, &d), 0);
    assert_int_equal(d.n, 0);
    host_close(h);
}

static void set_offline(struct topology *t, unsigned cpu)
{
    t->cpu[cpu].online = false;
    cpuset_del(&t->online, cpu);
}

static struct cpuset list(const char *s)
{
    struct cpuset set;
    assert_int_equal(cpuset_parse(s, &set), 0);
    return set;
}

static void assert_set(const struct cpuset *set, const char *want)
{
    char *got = cpuset_format(set);
    assert_string_equal(got, want);
    free(got);
}

static struct pack_plan plan(const struct topology *t, const struct cpuset *excl, double demand,
                             double headroom, unsigned min)
{
    struct pack_input in = {
        .topo = t, .excluded = excl, .demand_cpus = demand, .headroom = headroom, .min_cpus = min};
    struct pack_plan p;
    assert_int_equal(pack_plan_build(&in, &p), 0);
    /* invariants of every plan: a core-boundary prefix of the order,
     * never an excluded or offline CPU, nothing twice */
    assert_int_equal(cpuset_count(&p.cpus), p.ncpus);
    bool boundary = false;
    for (unsigned k = 0; k < p.ncore_steps; k++)
        boundary |= p.core_end[k] == p.ncpus;
    assert_true(boundary);
    struct cpuset seen = {0};
    for (unsigned i = 0; i < p.norder; i++) {
        unsigned c = (unsigned)p.order[i];
        assert_true(t->cpu[c].online);
        assert_false(excl && cpuset_has(excl, c));
        assert_false(cpuset_has(&seen, c));
        cpuset_add(&seen, c);
        assert_int_equal(cpuset_has(&p.cpus, c), i < p.ncpus);
        assert_false(cpuset_has(&p.idle_cores, c) && cpuset_has(&p.cpus, c));
    }
    cpuset_free(&seen);
    return p;
}

static void assert_order_head(const struct pack_plan *p, const int *want, unsigned n)
{
    assert_true(p->norder >= n);
    for (unsigned i = 0; i < n; i++)
        assert_int_equal(p->order[i], want[i]);
}

/* intel-2s: 2 × 10 cores, cpuN ↔ cpuN+20, core_ids 0-4 and 8-12. */
static void test_intel_2s(void **state)
{
    (void)state;
    struct topology t;
    read_fixture("intel-2s", &t);
    struct pack_plan p = plan(&t, NULL, 3.0, 0.25, 1); /* 3.75 CPUs: 2 cores */
    assert_set(&p.cpus, "0-1,20-21");
    assert_int_equal(p.ncpus, 4);
    assert_false(p.saturated);
    const int head[] = {0,  20, 1,  21, 2,  22, 3,  23, 4,  24, 5,
                        25, 6,  26, 7,  27, 8,  28, 9,  29, 10, 30};
    assert_order_head(&p, head, sizeof(head) / sizeof(head[0]));
    assert_int_equal(p.norder, 40);
    assert_int_equal(p.ncore_steps, 20);
    assert_int_equal(p.nidle_packages, 1);
    assert_int_equal(p.idle_packages[0], 1);
    assert_int_equal(p.nidle_cores, 18);
    assert_set(&p.idle_cores, "2-19,22-39");
    pack_plan_free(&p);

    /* 10.5 CPUs with 20 % headroom: 12.6, so 7 cores of package 0 */
    p = plan(&t, NULL, 10.5, 0.2, 1);
    assert_set(&p.cpus, "0-6,20-26");
    pack_plan_free(&p);
    /* 19 CPUs: 24 with headroom, past package 0's 20: package 1's first 2 cores */
    p = plan(&t, NULL, 19.0, 0.25, 1);
    assert_set(&p.cpus, "0-11,20-31");
    assert_int_equal(p.nidle_packages, 0);
    pack_plan_free(&p);
    topology_free(&t);
}

/* Isolated CPUs on package 1: that package is filled first (it cannot
 * reach a package C-state anyway), package 0 is left wholly idle. */
static void test_intel_2s_isolated(void **state)
{
    (void)state;
    struct topology t;
    read_fixture("intel-2s", &t);
    struct cpuset iso = list("12-13,32-33");
    struct pack_plan p = plan(&t, &iso, 1.0, 0.25, 1); /* 1.25: one core */
    assert_set(&p.cpus, "10,30");
    assert_int_equal(p.norder, 36);
    assert_int_equal(p.nidle_packages, 1);
    assert_int_equal(p.idle_packages[0], 0);
    /* the isolated cores are not "idle": their work is not ours to know */
    assert_false(cpuset_has(&p.idle_cores, 12) || cpuset_has(&p.idle_cores, 32));
    assert_int_equal(p.nidle_cores, 10 + 7);
    const int head[] = {10, 30, 11, 31, 14, 34, 15, 35};
    assert_order_head(&p, head, 8);
    pack_plan_free(&p);
    cpuset_free(&iso);

    /* only cpu3 isolated, not its sibling 23: core 3 is packed last of
     * package 0, with 23 alone, so the isolated thread is shared only
     * when package 0 is otherwise full */
    iso = list("3");
    p = plan(&t, &iso, 0.0, 0.25, 1);
    assert_set(&p.cpus, "0,20");
    assert_int_equal(p.norder, 39);
    assert_int_equal(p.order[16], 9);
    assert_int_equal(p.order[17], 29);
    assert_int_equal(p.order[18], 23);
    assert_int_equal(p.order[19], 10);
    pack_plan_free(&p);
    p = plan(&t, &iso, 17.5, 0.0, 1); /* 18: package 0's 9 clean cores */
    assert_set(&p.cpus, "0-2,4-9,20-22,24-29");
    pack_plan_free(&p);
    p = plan(&t, &iso, 18.5, 0.0, 1); /* 19: the tainted core's free thread */
    assert_set(&p.cpus, "0-2,4-9,20-29");
    pack_plan_free(&p);
    cpuset_free(&iso);
    topology_free(&t);
}

/* amd-epyc: one package of 32 cores, cpuN ↔ cpuN+32, core_ids with gaps. */
static void test_amd_epyc(void **state)
{
    (void)state;
    struct topology t;
    read_fixture("amd-epyc", &t);
    /* the fixture's 5.1 % busy of 64 CPUs, 3.26, × 1.25 = 4.08: 3 cores */
    struct pack_plan p = plan(&t, NULL, 0.051 * 64, 0.25, 1);
    assert_set(&p.cpus, "0-2,32-34");
    assert_int_equal(p.nidle_packages, 0); /* one package, and it is in use */
    assert_int_equal(p.nidle_cores, 29);
    const int head[] = {0, 32, 1, 33, 2, 34, 3, 35};
    assert_order_head(&p, head, 8);
    pack_plan_free(&p);
    /* cpu7 is where the latency guard's workload runs: never packed */
    struct cpuset guard = list("7");
    p = plan(&t, &guard, 20.0, 0.25, 1);
    /* 25 CPUs: 13 clean cores; 39, the guarded CPU's sibling, waits */
    assert_set(&p.cpus, "0-6,8-13,32-38,40-45");
    assert_false(cpuset_has(&p.cpus, 7));
    pack_plan_free(&p);
    cpuset_free(&guard);
    topology_free(&t);
}

/* big-384: 2 × 96 cores, cpuN ↔ cpuN+192, 376-383 offline (maxcpus=376),
 * so cores 88-95 of package 1 (cpu184-191) have one thread. */
static void test_big_384(void **state)
{
    (void)state;
    struct topology t;
    read_fixture("big-384", &t);
    /* the fixture's 151.5 busy CPUs × 1.25 = 189.4: 95 cores of package 0 */
    struct pack_plan p = plan(&t, NULL, 151.5, 0.25, 1);
    assert_set(&p.cpus, "0-94,192-286");
    assert_int_equal(p.norder, 376);
    assert_int_equal(p.ncore_steps, 192);
    assert_int_equal(p.nidle_packages, 1);
    assert_int_equal(p.idle_packages[0], 1);
    assert_int_equal(p.nidle_cores, 1 + 96);
    pack_plan_free(&p);
    /* 200 × 1.25 = 250: package 0 and 29 cores of package 1 */
    p = plan(&t, NULL, 200.0, 0.25, 1);
    assert_set(&p.cpus, "0-124,192-316");
    pack_plan_free(&p);
    /* the single-thread cores come last, one CPU each */
    p = plan(&t, NULL, 369.0, 0.0, 1);
    assert_set(&p.cpus, "0-184,192-375");
    assert_int_equal(p.core_end[p.ncore_steps - 1] - p.core_end[p.ncore_steps - 2], 1);
    assert_int_equal(p.order[375], 191);
    pack_plan_free(&p);
    /* demand above the machine: every online CPU, flagged */
    p = plan(&t, NULL, 1000.0, 0.25, 1);
    assert_true(p.saturated);
    assert_int_equal(p.ncpus, 376);
    assert_set(&p.cpus, "0-375");
    assert_int_equal(p.nidle_cores, 0);
    assert_int_equal(p.nidle_packages, 0);
    pack_plan_free(&p);
    topology_free(&t);
}

/* SMT off (smt/control=off offlines the siblings) and a CPU taken
 * offline: one CPU per core, offline CPUs never planned. */
static void test_smt_off_offline(void **state)
{
    (void)state;
    struct topology t;
    read_fixture("intel-2s", &t);
    for (unsigned c = 20; c < 40; c++)
        set_offline(&t, c);
    set_offline(&t, 1);
    struct pack_plan p = plan(&t, NULL, 3.0, 0.0, 1);
    assert_set(&p.cpus, "0,2-3");
    assert_int_equal(p.norder, 19);
    assert_int_equal(p.ncore_steps, 19);
    assert_int_equal(p.nidle_cores, 16);
    pack_plan_free(&p);
    topology_free(&t);
}

/* Demand 0 still packs the minimum, in whole cores. */
static void test_demand_zero_and_min(void **state)
{
    (void)state;
    struct topology t;
    read_fixture("intel-2s", &t);
    struct pack_plan p = plan(&t, NULL, 0.0, 0.25, 0);
    assert_set(&p.cpus, "0,20");
    assert_false(p.saturated);
    pack_plan_free(&p);
    p = plan(&t, NULL, 0.0, 0.25, 3);
    assert_set(&p.cpus, "0-1,20-21");
    pack_plan_free(&p);
    /* 0.1 × 3 must not round up past 3 CPUs (floating point) */
    p = plan(&t, NULL, 0.1 * 3 * 10, 0.0, 1);
    assert_set(&p.cpus, "0-1,20-21");
    pack_plan_free(&p);
    p = plan(&t, NULL, 2.0, 0.0, 41); /* a minimum above the machine */
    assert_true(p.saturated);
    assert_int_equal(p.ncpus, 40);
    pack_plan_free(&p);
    topology_free(&t);
}

static void test_bad_input(void **state)
{
    (void)state;
    struct topology t;
    read_fixture("intel-2s", &t);
    struct pack_plan p = {.ncpus = 77};
    struct pack_input in = {.topo = &t, .demand_cpus = -1.0};
    assert_int_equal(pack_plan_build(&in, &p), -EINVAL);
    in.demand_cpus = NAN;
    assert_int_equal(pack_plan_build(&in, &p), -EINVAL);
    in.demand_cpus = INFINITY;
    assert_int_equal(pack_plan_build(&in, &p), -EINVAL);
    in.demand_cpus = 1.0;
    in.headroom = -0.5;
    assert_int_equal(pack_plan_build(&in, &p), -EINVAL);
    in.headroom = 0.25;
    struct cpuset all = list("0-39");
    in.excluded = &all;
    assert_int_equal(pack_plan_build(&in, &p), -ENOSPC);
    in.topo = NULL;
    assert_int_equal(pack_plan_build(&in, &p), -EINVAL);
    assert_int_equal(pack_plan_build(NULL, &p), -EINVAL);
    assert_int_equal(p.ncpus, 77); /* untouched on failure */
    cpuset_free(&all);
    topology_free(&t);
}

static enum pack_action decide(const struct topology *t, const struct cpuset *excl,
                               const char *current, double demand, const char *want_next)
{
    struct pack_input in = {.topo = t,
                            .excluded = excl,
                            .demand_cpus = demand,
                            .headroom = PACK_DEFAULT_HEADROOM,
                            .min_cpus = 1};
    struct cpuset cur = list(current);
    enum pack_action a;
    struct pack_plan next;
    assert_int_equal(pack_decide(&in, &cur, PACK_DEFAULT_SHRINK_SLACK, &a, &next), 0);
    assert_set(&next.cpus, want_next);
    pack_plan_free(&next);
    cpuset_free(&cur);
    return a;
}

/* Grow at once, shrink only below the lower threshold. On intel-2s one
 * core is 2 CPUs: from 2 cores (4 CPUs) a shrink to 1 core needs
 * demand × 1.25 × 1.25 <= 2 (demand <= 1.28); a grow from 1 core needs
 * demand × 1.25 > 2 (demand > 1.6). Between them the set is kept. */
static void test_hysteresis(void **state)
{
    (void)state;
    struct topology t;
    read_fixture("intel-2s", &t);
    assert_int_equal(decide(&t, NULL, "", 0.5, "0,20"), PACK_GROW);
    assert_int_equal(decide(&t, NULL, "0,20", 1.5, "0,20"), PACK_KEEP);
    assert_int_equal(decide(&t, NULL, "0,20", 1.7, "0-1,20-21"), PACK_GROW);
    assert_int_equal(decide(&t, NULL, "0,20", 6.0, "0-3,20-23"),
                     PACK_GROW); /* 7.5: 4 cores at once */
    assert_int_equal(decide(&t, NULL, "0-1,20-21", 1.5, "0-1,20-21"), PACK_KEEP);
    assert_int_equal(decide(&t, NULL, "0-1,20-21", 1.3, "0-1,20-21"), PACK_KEEP);
    assert_int_equal(decide(&t, NULL, "0-1,20-21", 1.2, "0,20"), PACK_SHRINK);
    /* from 5 cores at demand 3: the target with slack (4.7) needs 3 cores */
    assert_int_equal(decide(&t, NULL, "0-4,20-24", 3.0, "0-2,20-22"), PACK_SHRINK);
    /* not a plan of this machine any more: replan */
    assert_int_equal(decide(&t, NULL, "5,25", 0.5, "0,20"), PACK_REPLAN);
    assert_int_equal(decide(&t, NULL, "0-1,20", 0.5, "0-1,20-21"),
                     PACK_REPLAN); /* half a core: 3 usable, 2 cores */
    struct cpuset iso = list("0");
    /* cpu0 isolated since: its sibling 20 now waits behind the clean cores */
    assert_int_equal(decide(&t, &iso, "0,20", 0.5, "1,21"), PACK_REPLAN);
    cpuset_free(&iso);
    set_offline(&t, 21); /* a CPU of the packed set went offline */
    assert_int_equal(decide(&t, NULL, "0-1,20-21", 1.5, "0-1,20"), PACK_REPLAN);
    assert_string_equal(pack_action_name(PACK_SHRINK), "shrink");

    struct pack_input in = {.topo = &t, .demand_cpus = 1.0};
    enum pack_action a = PACK_KEEP;
    struct pack_plan next = {.ncpus = 77};
    assert_int_equal(pack_decide(&in, NULL, -1.0, &a, &next), -EINVAL);
    assert_int_equal(pack_decide(&in, NULL, 0.25, &a, &next), 0);
    assert_int_equal(a, PACK_GROW);
    pack_plan_free(&next);
    topology_free(&t);
}

/* Seeded random exclusions and demands on big-384: every plan keeps the
 * invariants plan() checks, a larger demand's set contains a smaller
 * one's (growth only adds CPUs), and no package counted idle holds a
 * packed or excluded CPU. */
static void test_random_invariants(void **state)
{
    (void)state;
    struct topology t;
    read_fixture("big-384", &t);
    uint64_t x = 0x9e3779b97f4a7c15u;
    for (int round = 0; round < 100; round++) {
        struct cpuset excl = {0};
        for (int k = 0; k < round % 20; k++) {
            x = x * 6364136223846793005u + 1442695040888963407u;
            cpuset_add(&excl, (unsigned)((x >> 33) % 384));
        }
        x = x * 6364136223846793005u + 1442695040888963407u;
        double d1 = (double)((x >> 33) % 40000) / 100.0, d2 = d1 * 0.5;
        struct pack_plan big = plan(&t, &excl, d1, 0.25, 1);
        struct pack_plan small = plan(&t, &excl, d2, 0.25, 1);
        CPUSET_FOREACH (cpu, &small.cpus)
            assert_true(cpuset_has(&big.cpus, (unsigned)cpu));
        for (unsigned k = 0; k < big.nidle_packages; k++)
            for (unsigned c = 0; c < t.ncpu; c++)
                if (t.cpu[c].online && t.cpu[c].package == big.idle_packages[k])
                    assert_false(cpuset_has(&big.cpus, c) || cpuset_has(&excl, c));
        assert_int_equal(big.norder + cpuset_count(&excl) -
                             (cpuset_has(&excl, 376) + cpuset_has(&excl, 377) +
                              cpuset_has(&excl, 378) + cpuset_has(&excl, 379) +
                              cpuset_has(&excl, 380) + cpuset_has(&excl, 381) +
                              cpuset_has(&excl, 382) + cpuset_has(&excl, 383)),
                         376);
        pack_plan_free(&big);
        pack_plan_free(&small);
        cpuset_free(&excl);
    }
    topology_free(&t);
}

/* ---- host/isolation.c ---- */

static void test_cpulist_grammar(void **state)
{
    (void)state;
    struct cpuset s;
#define OK(text, n, want)                                                        \
    do {                                                                         \
        assert_int_equal(isolation_parse_cpulist(text, strlen(text), n, &s), 0); \
        assert_set(&s, want);                                                    \
        cpuset_free(&s);                                                         \
    } while (0)
    OK("2-5", 8, "2-5");
    OK("1,3,N", 8, "1,3,7");
    OK("N-N", 8, "7");
    OK("0-15:2/8", 16, "0-1,8-9");
    OK("all", 4, "0-3");
    OK("ALL:1/2", 8, "0,2,4,6");
    OK("", 8, "");
    assert_int_equal(isolation_parse_cpulist("3-1", 3, 8, &s), -EINVAL);
    assert_int_equal(isolation_parse_cpulist("8", 1, 8, &s), -ERANGE);
    assert_int_equal(isolation_parse_cpulist("1,", 2, 8, &s), -EINVAL);
    assert_int_equal(isolation_parse_cpulist("0-3:3/2", 7, 8, &s), -EINVAL);
    assert_int_equal(isolation_parse_cpulist("0-3:0/2", 7, 8, &s), -EINVAL);
    assert_int_equal(isolation_parse_cpulist("x", 1, 8, &s), -EINVAL);
    assert_int_equal(isolation_parse_cpulist("1", 1, 0, &s), -EINVAL);
#undef OK
}

static void test_cmdline(void **state)
{
    (void)state;
    struct cpuset s;
    assert_int_equal(isolation_parse_cmdline("BOOT_IMAGE=/vmlinuz root=UUID=x ro quiet", 8, &s), 0);
    assert_set(&s, "");
    cpuset_free(&s);
    assert_int_equal(isolation_parse_cmdline("ro isolcpus=nohz,domain,managed_irq,2-3 "
                                             "nohz_full=4,N rcu_nocbs=1 -- isolcpus=0",
                                             8, &s),
                     0);
    assert_set(&s, "2-4,7");
    cpuset_free(&s);
    /* no flags; an unknown flag is skipped, as the kernel does; quotes */
    assert_int_equal(isolation_parse_cmdline("isolcpus=1 isolcpus=future_flag,5 "
                                             "nohz_full=\"6\"\n",
                                             8, &s),
                     0);
    assert_set(&s, "1,5-6");
    cpuset_free(&s);
    /* malformed or out of range: skipped and counted (the kernel ignores it) */
    assert_int_equal(isolation_parse_cmdline("isolcpus=9 nohz_full=1-x isolcpus=2", 8, &s), 2);
    assert_set(&s, "2");
    cpuset_free(&s);
    /* a parameter that only starts like ours */
    assert_int_equal(isolation_parse_cmdline("isolcpusx=1 xnohz_full=2 isolcpus", 8, &s), 0);
    assert_set(&s, "");
    cpuset_free(&s);
}

static void test_isolation_read(void **state)
{
    (void)state;
    char *root = tree_new();
    tree_write(root, "sys/devices/system/cpu/isolated", "2-3\n");
    tree_write(root, "sys/devices/system/cpu/nohz_full", "(null)\n");
    tree_write(root, "proc/cmdline", "BOOT_IMAGE=/vmlinuz ro isolcpus=nohz,5 nohz_full=6-7\n");
    tree_mkdirs(root);
    struct host *h;
    assert_int_equal(host_open(root, &h), 0);
    struct cpu_isolation iso;
    struct diags d = {0};
    assert_int_equal(isolation_read(h, 8, &iso, &d), 0);
    assert_int_equal(d.n, 0);
    assert_set(&iso.isolated, "2-3");
    assert_set(&iso.nohz_full, "");
    assert_set(&iso.cmdline, "5-7");
    assert_set(&iso.all, "2-3,5-7");
    isolation_free(&iso);
    host_close(h);

    /* garbage in the sysfs file and a bad boot parameter: diags, nothing added */
    tree_write(root, "sys/devices/system/cpu/isolated", "2-\n");
    tree_write(root, "sys/devices/system/cpu/nohz_full", "6-7\n");
    tree_write(root, "proc/cmdline", "isolcpus=99\n");
    assert_int_equal(host_open(root, &h), 0);
    assert_int_equal(isolation_read(h, 8, &iso, &d), 0);
    assert_int_equal(d.n, 2);
    assert_non_null(strstr(d.v[0].where, "isolated"));
    assert_non_null(strstr(d.v[1].where, "cmdline"));
    assert_set(&iso.all, "6-7");
    isolation_free(&iso);
    diags_free(&d);
    host_close(h);
    tree_free(root);

    /* the fixtures: nothing isolated, nohz_full "(null)" */
    const char *names[] = {"intel-2s", "amd-epyc", "big-384"};
    for (unsigned i = 0; i < 3; i++) {
        char path[4096];
        snprintf(path, sizeof(path), "%s/%s", getenv("WATT_FIXTURES"), names[i]);
        assert_int_equal(host_open(path, &h), 0);
        assert_int_equal(isolation_read(h, 384, &iso, &d), 0);
        assert_int_equal(d.n, 0);
        assert_int_equal(cpuset_count(&iso.all), 0);
        isolation_free(&iso);
        host_close(h);
    }
}

int main(void)
{
    // clang-format off
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_intel_2s),
        cmocka_unit_test(test_intel_2s_isolated),
        cmocka_unit_test(test_amd_epyc),
        cmocka_unit_test(test_big_384),
        cmocka_unit_test(test_smt_off_offline),
        cmocka_unit_test(test_demand_zero_and_min),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_hysteresis),
        cmocka_unit_test(test_random_invariants),
        cmocka_unit_test(test_cpulist_grammar),
        cmocka_unit_test(test_cmdline),
        cmocka_unit_test(test_isolation_read),
    };
    // clang-format on
    return cmocka_run_group_tests(tests, NULL, NULL);
}
