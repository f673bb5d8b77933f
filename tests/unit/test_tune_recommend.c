/* recommend_pick(): the rules of `watt tune --recommend` on facts made by
 * hand, one fact changed at a time; which line decided; the same facts
 * giving the same lines. recommend_facts_read() on real trees is
 * tests/cli/test_tune_recommend.py. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* cmocka.h needs stdarg, stddef, stdint and setjmp first */
#include <cmocka.h>

#include "base/util.h"
#include "tune/recommend.h"

/* A bare-metal two-socket server on mains, nothing latency-critical. */
static struct recommend_facts server(void)
{
    return (struct recommend_facts){
        .have_cpuinfo = true,
        .dmi_vendor = xstrdup("Dell Inc."),
        .dmi_product = xstrdup("PowerEdge R650"),
        .cpufreq_driver = xstrdup("intel_pstate"),
        .cpuidle_driver = xstrdup("intel_idle"),
        .ncstates = 4,
        .rapl = true,
        .rapl_via = "powercap",
        .npackages = 2,
        .ncpus = 64,
        .ndaemons_looked = 300,
    };
}

static const struct recommend_reason *find(const struct recommendation *r, const char *check)
{
    for (size_t i = 0; i < r->n; i++)
        if (streq(r->v[i].check, check))
            return &r->v[i];
    return NULL;
}

/* The profile, and that exactly DECIDER's line decided. */
static void expect(const struct recommend_facts *f, const char *profile, const char *decider)
{
    struct recommendation r;
    recommend_pick(f, &r);
    assert_string_equal(r.profile, profile);
    size_t decided = 0;
    for (size_t i = 0; i < r.n; i++) {
        assert_non_null(r.v[i].found);
        assert_non_null(r.v[i].means);
        decided += r.v[i].decides;
    }
    assert_int_equal(decided, 1);
    const struct recommend_reason *d = find(&r, decider);
    assert_non_null(d);
    assert_true(d->decides);
    recommendation_free(&r);
}

static void add_latency(struct recommend_facts *f, const char *what, const char *workload)
{
    f->latency = xrealloc(f->latency, (f->nlatency + 1) * sizeof(*f->latency));
    f->latency[f->nlatency++] = xstrdup(what);
    if (!f->guard_workload)
        f->guard_workload = xstrdup(workload);
}

static void test_server(void **state)
{
    (void)state;
    struct recommend_facts f = server();
    expect(&f, "balanced", "battery");
    struct recommendation r;
    recommend_pick(&f, &r);
    assert_non_null(strstr(find(&r, "virtualisation")->found, "bare metal"));
    assert_non_null(strstr(find(&r, "virtualisation")->found, "DMI: Dell Inc. PowerEdge R650"));
    assert_non_null(strstr(find(&r, "cpufreq")->means, "EPP"));
    assert_non_null(strstr(find(&r, "packages")->found, "2 packages, 64 CPUs"));
    assert_non_null(strstr(find(&r, "latency")->found, "looked at 300 processes"));
    assert_null(find(&r, "guard"));
    /* the same facts, the same lines */
    struct recommendation again;
    recommend_pick(&f, &again);
    assert_int_equal(r.n, again.n);
    for (size_t i = 0; i < r.n; i++) {
        assert_string_equal(r.v[i].found, again.v[i].found);
        assert_string_equal(r.v[i].means, again.v[i].means);
    }
    recommendation_free(&again);
    recommendation_free(&r);
    recommend_facts_free(&f);
}

static void test_vm(void **state)
{
    (void)state;
    struct recommend_facts f = server();
    f.hypervisor_flag = true; /* the flag alone */
    expect(&f, "balanced", "virtualisation");
    f.hypervisor_flag = false;
    free(f.dmi_vendor);
    free(f.dmi_product);
    f.dmi_vendor = xstrdup("Microsoft Corporation");
    f.dmi_product = xstrdup("Virtual Machine");
    f.dmi_vm = true; /* DMI alone (arm64 has no flag) */
    expect(&f, "balanced", "virtualisation");
    free(f.cpufreq_driver);
    free(f.cpuidle_driver);
    f.cpufreq_driver = f.cpuidle_driver = NULL;
    f.rapl = false;
    struct recommendation r;
    recommend_pick(&f, &r);
    assert_non_null(strstr(find(&r, "virtualisation")->found, "DMI: Microsoft Corporation"));
    assert_string_equal(find(&r, "cpufreq")->found, "no driver");
    assert_string_equal(find(&r, "cpuidle")->found, "no driver");
    assert_string_equal(find(&r, "rapl")->found, "absent");
    recommendation_free(&r);
    recommend_facts_free(&f);
}

static void test_battery(void **state)
{
    (void)state;
    struct recommend_facts f = server();
    f.nbatteries = 1;
    f.battery = xstrdup("BAT0");
    expect(&f, "powersave", "battery");
    f.hypervisor_flag = true; /* a VM with a (virtual) battery: still battery first */
    expect(&f, "powersave", "battery");
    recommend_facts_free(&f);
}

static void test_latency(void **state)
{
    (void)state;
    struct recommend_facts f = server();
    add_latency(&f, "redis-server (pid 812)", "port:6379");
    expect(&f, "latency", "latency");
    f.nbatteries = 1; /* latency wins over a battery and a VM */
    f.battery = xstrdup("BAT1");
    f.hypervisor_flag = true;
    expect(&f, "latency", "latency");
    struct recommendation r;
    recommend_pick(&f, &r);
    assert_string_equal(find(&r, "latency")->found, "redis-server (pid 812)");
    assert_non_null(strstr(find(&r, "latency")->means, "in a VM"));
    assert_non_null(strstr(find(&r, "guard")->means, "workload = port:6379"));
    assert_false(find(&r, "battery")->decides);
    recommendation_free(&r);
    recommend_facts_free(&f);
}

static void test_daemon_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < recommend_ndaemons; i++) {
        assert_true(strlen(recommend_daemons[i].comm) <= 15); /* a comm's length */
        assert_true(recommend_daemons[i].port <= 65535);
        assert_non_null(recommend_daemons[i].label);
    }
    recommend_facts_free(NULL);
    recommendation_free(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_server),       cmocka_unit_test(test_vm),
        cmocka_unit_test(test_battery),      cmocka_unit_test(test_latency),
        cmocka_unit_test(test_daemon_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
