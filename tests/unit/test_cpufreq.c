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

#include "base/util.h"
#include "sense/cpufreq.h"
#include "sense/sampler.h" /* sample_free() */
#include "tree.h"

#define CPU        "sys/devices/system/cpu/"
#define NEAR(a, b) assert_true(fabs((a) - (b)) < 1e-6)

/* intel_pstate active with HWP on a 2-CPU Cascade Lake: cpuN/cpufreq is a
 * symlink to ../cpufreq/policyN, as on kernels since 4.x. */
static char *make_root(const char *faults)
{
    char *root = tree_new();
    tree_write(root, CPU "possible", "0-1\n");
    tree_write(root, CPU "online", "0-1\n");
    tree_write(root, CPU "intel_pstate/status", "active\n");
    tree_write(root, CPU "intel_pstate/no_turbo", "0\n");
    tree_write(root, CPU "intel_pstate/max_perf_pct", "100\n");
    tree_write(root, CPU "intel_pstate/min_perf_pct", "31\n");
    for (int c = 0; c < 2; c++) {
        char d[128], p[192], link[64], target[64];
        snprintf(d, sizeof(d), CPU "cpufreq/policy%d/", c);
#define W(f, ...)                         \
    snprintf(p, sizeof(p), "%s%s", d, f); \
    tree_write(root, p, __VA_ARGS__)
        W("scaling_driver", "intel_pstate\n");
        W("scaling_governor", "%s\n", c ? "performance" : "powersave");
        W("scaling_cur_freq", "%d\n", 1200000 + c * 1000000);
        W("scaling_min_freq", "1000000\n");
        W("scaling_max_freq", "3200000\n");
        W("cpuinfo_min_freq", "1000000\n");
        W("cpuinfo_max_freq", "3200000\n");
        W("base_frequency", "2400000\n");
        W("energy_performance_preference", "balance_performance\n");
        W("energy_performance_available_preferences",
          "default performance balance_performance balance_power power \n");
#undef W
        snprintf(link, sizeof(link), CPU "cpu%d/cpufreq", c);
        snprintf(target, sizeof(target), "../cpufreq/policy%d", c);
        tree_symlink(root, link, target);
    }
    tree_write(root, "proc/cpuinfo",
               "processor\t: 0\nmodel name\t: Intel(R) Xeon(R) Silver 4210R\ncpu MHz\t\t: "
               "1200.512\nflags\t\t: fpu aperfmperf\n\nprocessor\t: 1\ncpu MHz\t\t: 2199.998\n\n");
    if (faults)
        tree_write(root, "watt-faults", "%s", faults);
    return root;
}

struct fixture {
    char *root;
    struct host *h;
    void *state;
};

static void open_root(struct fixture *f, const char *faults)
{
    f->root = make_root(faults);
    assert_int_equal(host_open(f->root, &f->h), 0);
    char *why = NULL;
    f->state = NULL;
    assert_int_equal(cpufreq_sampler.probe(f->h, &f->state, &why), 1);
    assert_null(why);
}

static void close_root(struct fixture *f)
{
    cpufreq_sampler.free_state(f->state);
    host_close(f->h);
    tree_free(f->root);
}

static struct sample *take(struct fixture *f)
{
    struct sample *s = calloc(1, sizeof(*s));
    assert_int_equal(topology_read(f->h, &s->topo, &s->diags), 0);
    assert_int_equal(cpufreq_sampler.collect(f->h, f->state, s), 0);
    return s;
}

static void test_read(void **state)
{
    struct fixture f;
    open_root(&f, NULL);
    struct sample *s = take(&f);
    const struct cpufreq_sample *cf = s->cpufreq;
    assert_int_equal(cf->ncpus, 2);
    const struct cpufreq_cpu *c1 = cpufreq_find_cpu(cf, 1);
    assert_non_null(c1);
    assert_string_equal(c1->driver, "intel_pstate");
    assert_string_equal(c1->governor, "performance");
    assert_int_equal(c1->cur_khz, 2200000);
    assert_int_equal(c1->min_khz, 1000000);
    assert_int_equal(c1->hw_max_khz, 3200000);
    assert_int_equal(c1->base_khz, 2400000);
    assert_true(c1->hw_cur_khz == VAL_NONE); /* intel_pstate has none: not a problem */
    assert_string_equal(c1->epp, "balance_performance");
    assert_non_null(strstr(c1->epp_available, "balance_power"));
    assert_true(c1->aperf == VAL_NONE);
    assert_null(cpufreq_find_cpu(cf, 2));
    assert_string_equal(cf->intel_pstate_status, "active");
    assert_int_equal(cf->no_turbo, 0);
    assert_int_equal(cf->min_perf_pct, 31);
    assert_int_equal(cf->boost, -1);
    assert_null(cf->amd_pstate_status);
    assert_int_equal(cf->nmhz, 2);
    assert_int_equal(cf->mhz[1].cpu, 1);
    NEAR(cf->mhz[1].mhz, 2199.998);
    /* no counters on a recorded root: one reason, said once */
    assert_null(cf->msr_source);
    assert_non_null(strstr(cf->msr_why, "recorded root"));
    assert_int_equal(s->diags.n, 1);
    assert_non_null(strstr(s->diags.v[0].where, "APERF/MPERF"));
    struct sample *s2 = take(&f);
    assert_int_equal(s2->diags.n, 0);
    assert_non_null(s2->cpufreq->msr_why);
    /* no APERF/MPERF: the mean falls back to scaling_cur_freq */
    NEAR(cpufreq_mean_busy_ghz(s->cpufreq, s2->cpufreq), 1.7);
    sample_free(s);
    sample_free(s2);
    close_root(&f);
}

static void test_not_here(void **state)
{
    char *root = tree_new();
    tree_write(root, CPU "online", "0\n");
    tree_write(root, CPU "cpu0/topology/core_id", "0\n");
    struct host *h;
    assert_int_equal(host_open(root, &h), 0);
    void *st = NULL;
    char *why = NULL;
    assert_int_equal(cpufreq_sampler.probe(h, &st, &why), 0);
    assert_string_equal(why, "no cpufreq driver (VM or driver not loaded)");
    assert_null(st);
    free(why);
    host_close(h);
    tree_free(root);
}

static void test_bad_files(void **state)
{
    struct fixture f;
    open_root(&f, CPU
              "cpu0/cpufreq/cpuinfo_cur_freq EACCES\n" CPU
              "cpu1/cpufreq/cpuinfo_cur_freq EACCES\n" CPU "cpu1/cpufreq/scaling_governor EIO\n" CPU
              "cpu0/cpufreq/scaling_cur_freq =1.2GHz\n" CPU "intel_pstate/no_turbo EACCES\n");
    tree_write(f.root, CPU "cpufreq/policy1/scaling_max_freq", "");
    tree_write(f.root, CPU "cpufreq/policy1/scaling_min_freq", "10000");
    struct sample *s = take(&f);
    const struct cpufreq_cpu *c0 = cpufreq_find_cpu(s->cpufreq, 0);
    const struct cpufreq_cpu *c1 = cpufreq_find_cpu(s->cpufreq, 1);
    assert_true(c0->cur_khz == VAL_NONE);
    assert_true(c0->hw_cur_khz == VAL_NONE);
    assert_null(c1->governor);
    assert_true(c1->max_khz == VAL_NONE);
    assert_int_equal(c1->min_khz, 10000); /* no newline: still a value */
    assert_int_equal(c1->cur_khz, 2200000);
    assert_int_equal(s->cpufreq->no_turbo, -1);
    /* cur (garbage), no_turbo (EACCES), governor (EIO), max (empty), the
     * two cpuinfo_cur_freq EACCES as one line, APERF/MPERF */
    bool denied_once = false;
    for (size_t i = 0; i < s->diags.n; i++)
        if (strstr(s->diags.v[i].where, "cpu*/cpufreq/cpuinfo_cur_freq")) {
            assert_false(denied_once);
            denied_once = true;
            assert_int_equal(s->diags.v[i].err, EACCES);
            assert_non_null(strstr(s->diags.v[i].what, "2 CPUs"));
        }
    assert_true(denied_once);
    assert_int_equal(s->diags.n, 6);
    /* only cpu1 has scaling_cur_freq now */
    NEAR(cpufreq_mean_busy_ghz(NULL, s->cpufreq), 2.2);
    sample_free(s);
    close_root(&f);
}

static void rm_policy_file(const char *root, int policy, const char *name)
{
    char p[512];
    snprintf(p, sizeof(p), "%s/" CPU "cpufreq/policy%d/%s", root, policy, name);
    assert_int_equal(unlink(p), 0);
}

/* An optional file missing on the first CPU is still read on the others,
 * and one present only on a later CPU is found there. */
static void test_optional_per_cpu(void **state)
{
    struct fixture f;
    open_root(&f, NULL);
    rm_policy_file(f.root, 0, "base_frequency");
    rm_policy_file(f.root, 0, "cpuinfo_max_freq");
    rm_policy_file(f.root, 0, "energy_performance_preference");
    tree_write(f.root, CPU "cpufreq/policy1/cpuinfo_cur_freq", "2199000\n");
    struct sample *s = take(&f);
    const struct cpufreq_cpu *c0 = cpufreq_find_cpu(s->cpufreq, 0);
    const struct cpufreq_cpu *c1 = cpufreq_find_cpu(s->cpufreq, 1);
    assert_true(c0->base_khz == VAL_NONE);
    assert_true(c0->hw_max_khz == VAL_NONE);
    assert_null(c0->epp);
    assert_int_equal(c1->base_khz, 2400000);
    assert_int_equal(c1->hw_max_khz, 3200000);
    assert_string_equal(c1->epp, "balance_performance");
    assert_int_equal(c1->hw_cur_khz, 2199000);
    assert_int_equal(s->diags.n, 1); /* APERF/MPERF only: a missing optional file is none */
    sample_free(s);
    close_root(&f);
}

static void test_offline(void **state)
{
    /* cpu1 goes offline between the two samples */
    struct fixture f;
    open_root(&f, CPU "online =0 from=2\n");
    struct sample *a = take(&f), *b = take(&f);
    assert_int_equal(a->cpufreq->ncpus, 2);
    assert_int_equal(b->cpufreq->ncpus, 1);
    assert_null(cpufreq_find_cpu(b->cpufreq, 1));
    struct cpufreq_eff e;
    assert_int_equal(cpufreq_effective(a->cpufreq, b->cpufreq, 1, &e), -ENODATA);
    NEAR(cpufreq_mean_busy_ghz(a->cpufreq, b->cpufreq), 1.2);
    sample_free(a);
    sample_free(b);
    close_root(&f);
}

/* Two hand-made samples one second apart, as the perf msr PMU gives them. */
static struct cpufreq_cpu cpu_a[2], cpu_b[2];
static struct cpufreq_sample sa = {.ncpus = 2, .cpus = cpu_a, .msr_mono_ns = 1000000000ull};
static struct cpufreq_sample sb = {.ncpus = 2, .cpus = cpu_b, .msr_mono_ns = 2000000000ull};

static void counters(void)
{
    for (int c = 0; c < 2; c++) {
        cpu_a[c] = (struct cpufreq_cpu){
            .cpu = c, .cur_khz = 1000000, .base_khz = 2000000, .hw_max_khz = 3000000, .msr_gen = 1};
        cpu_a[c].aperf = 5000;
        cpu_a[c].mperf = 7000;
        cpu_a[c].tsc = VAL_NONE;
        cpu_b[c] = cpu_a[c];
        cpu_b[c].cur_khz = 3000000;
    }
    /* cpu0 carries the TSC counter: 2.1 GHz measured */
    cpu_a[0].tsc = 100;
    cpu_b[0].tsc = 100 + 2100000000ull;
    /* cpu0: 50 % in C0 at 1.5x the TSC rate */
    cpu_b[0].aperf = cpu_a[0].aperf + 1575000000ull;
    cpu_b[0].mperf = cpu_a[0].mperf + 1050000000ull;
    /* cpu1: 10 % in C0 at 0.5x */
    cpu_b[1].aperf = cpu_a[1].aperf + 105000000ull;
    cpu_b[1].mperf = cpu_a[1].mperf + 210000000ull;
}

static void test_effective(void **state)
{
    counters();
    struct cpufreq_eff e;
    assert_int_equal(cpufreq_effective(&sa, &sb, 0, &e), 0);
    NEAR(e.tsc_mhz, 2100.0);
    NEAR(e.busy_mhz, 3150.0);
    NEAR(e.avg_mhz, 1575.0);
    NEAR(e.c0_pct, 50.0);
    /* cpu1 has no TSC counter of its own: cpu0's rate is used */
    assert_int_equal(cpufreq_effective(&sa, &sb, 1, &e), 0);
    NEAR(e.busy_mhz, 1050.0);
    NEAR(e.avg_mhz, 105.0);
    NEAR(e.c0_pct, 10.0);
    NEAR(cpufreq_mean_busy_ghz(&sa, &sb), (3.15 + 1.05) / 2);

    /* no TSC counter at all: base_frequency stands in */
    cpu_b[0].tsc = cpu_a[0].tsc = VAL_NONE;
    assert_int_equal(cpufreq_effective(&sa, &sb, 0, &e), 0);
    NEAR(e.tsc_mhz, 2000.0);
    NEAR(e.busy_mhz, 3000.0);
    assert_true(isnan(e.c0_pct));
    /* ... then cpuinfo_max_freq */
    cpu_b[0].base_khz = VAL_NONE;
    assert_int_equal(cpufreq_effective(&sa, &sb, 0, &e), 0);
    NEAR(e.busy_mhz, 4500.0);

    /* a CPU that never left idle: avg 0, busy undefined */
    counters();
    cpu_b[1].aperf = cpu_a[1].aperf;
    cpu_b[1].mperf = cpu_a[1].mperf;
    assert_int_equal(cpufreq_effective(&sa, &sb, 1, &e), 0);
    assert_true(isnan(e.busy_mhz));
    NEAR(e.avg_mhz, 0.0);
    NEAR(cpufreq_mean_busy_ghz(&sa, &sb), 3.15);
}

static void test_effective_bad(void **state)
{
    struct cpufreq_eff e;
    counters();
    cpu_b[1].mperf = cpu_a[1].mperf - 1; /* backwards */
    assert_int_equal(cpufreq_effective(&sa, &sb, 1, &e), -ERANGE);
    counters();
    cpu_b[1].msr_gen = 2; /* reopened: counts restarted */
    assert_int_equal(cpufreq_effective(&sa, &sb, 1, &e), -ESTALE);
    counters();
    cpu_b[1].aperf = VAL_NONE; /* a failed read */
    assert_int_equal(cpufreq_effective(&sa, &sb, 1, &e), -ENODATA);
    assert_int_equal(cpufreq_effective(&sa, &sb, 7, &e), -ENODATA);
    assert_int_equal(cpufreq_effective(NULL, &sb, 0, &e), -ENODATA);
    /* nothing usable: NaN; one sample: its scaling_cur_freq */
    counters();
    cpu_b[0].aperf = cpu_b[1].aperf = VAL_NONE;
    NEAR(cpufreq_mean_busy_ghz(&sa, &sb), 3.0);
    NEAR(cpufreq_mean_busy_ghz(&sa, NULL), 1.0);
    assert_true(isnan(cpufreq_mean_busy_ghz(NULL, NULL)));
    cpu_b[0].cur_khz = cpu_b[1].cur_khz = VAL_NONE;
    assert_true(isnan(cpufreq_mean_busy_ghz(&sa, &sb)));
}

static void test_cpuinfo_parse(void **state)
{
    struct cpufreq_mhz *v = NULL;
    size_t n = 0;
    static const char text[] = "processor\t: 0\ncpu MHz\t\t: 799.998\n\n"
                               "processor\t: 1\ncpu MHz\t\t: 3400.000\n\n"
                               "processor\t: 2\nmodel name\t: no MHz line\n";
    assert_int_equal(cpufreq_parse_cpuinfo_mhz(text, strlen(text), &v, &n), 2);
    assert_int_equal(n, 2);
    assert_int_equal(v[1].cpu, 1);
    NEAR(v[0].mhz, 799.998);
    free(v);
    /* arm64: no MHz anywhere */
    static const char arm[] = "processor\t: 0\nBogoMIPS\t: 50.00\nCPU part\t: 0xd0c\n";
    assert_int_equal(cpufreq_parse_cpuinfo_mhz(arm, strlen(arm), &v, &n), 0);
    free(v);
    /* garbage and MHz without a processor: errors, ret untouched */
    struct cpufreq_mhz *keep = (struct cpufreq_mhz *)&n;
    v = keep;
    static const char *const bad[] = {
        "processor\t: 0\ncpu MHz\t\t: fast\n",
        "processor\t: 0\ncpu MHz\t\t: nan\n",
        "processor\t: 0\ncpu MHz\t\t: -5\n",
        "processor\t: x\n",
        "cpu MHz\t\t: 800\n",
    };
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
        assert_int_equal(cpufreq_parse_cpuinfo_mhz(bad[i], strlen(bad[i]), &v, &n), -EINVAL);
    assert_ptr_equal(v, keep);
    /* truncated in the middle of a value: the buffer is not NUL-terminated */
    static const char cut[] = "processor\t: 0\ncpu MHz\t\t: 1234.5678\n";
    assert_int_equal(cpufreq_parse_cpuinfo_mhz(cut, strlen(cut) - 4, &v, &n), 1);
    NEAR(v[0].mhz, 1234.5);
    free(v);
}

/* node_exporter's fixture: scaling frequencies and governors, and the
 * /proc/cpuinfo MHz, against its expected output. */
static void test_node_exporter(void **state)
{
    const char *fx = getenv("WATT_FIXTURES"), *src = getenv("WATT_SRCDIR");
    if (!fx || !src) {
        skip();
        return;
    }
    char path[4096];
    snprintf(path, sizeof(path), "%s/node_exporter", fx);
    struct fixture f = {0};
    assert_int_equal(host_open(path, &f.h), 0);
    char *why = NULL;
    assert_int_equal(cpufreq_sampler.probe(f.h, &f.state, &why), 1);
    struct sample *s = take(&f);
    const struct cpufreq_sample *cf = s->cpufreq;
    assert_int_equal(cf->ncpus, 4);
    assert_int_equal(cf->nmhz, 8);
    snprintf(path, sizeof(path), "%s/tests/fixtures/node_exporter/e2e-output.txt", src);
    FILE *e2e = fopen(path, "r");
    assert_non_null(e2e);
    char line[512], gov[32];
    unsigned checked = 0;
    int cpu, core, pkg;
    double want;
    while (fgets(line, sizeof(line), e2e)) {
        const struct cpufreq_cpu *c = NULL;
        double got = NAN;
        if (sscanf(line, "node_cpu_scaling_frequency_hertz{cpu=\"%d\"} %lf", &cpu, &want) == 2)
            got = (double)(c = cpufreq_find_cpu(cf, cpu))->cur_khz * 1000;
        else if (sscanf(line, "node_cpu_scaling_frequency_min_hertz{cpu=\"%d\"} %lf", &cpu,
                        &want) == 2)
            got = (double)(c = cpufreq_find_cpu(cf, cpu))->min_khz * 1000;
        else if (sscanf(line, "node_cpu_scaling_frequency_max_hertz{cpu=\"%d\"} %lf", &cpu,
                        &want) == 2)
            got = (double)(c = cpufreq_find_cpu(cf, cpu))->max_khz * 1000;
        else if (sscanf(line, "node_cpu_scaling_governor{cpu=\"%d\",governor=\"%31[a-z]\"} %lf",
                        &cpu, gov, &want) == 3)
            got = streq(cpufreq_find_cpu(cf, cpu)->governor, gov);
        else if (sscanf(line, "node_cpu_frequency_hertz{core=\"%d\",cpu=\"%d\",package=\"%d\"} %lf",
                        &core, &cpu, &pkg, &want) == 4) {
            for (size_t i = 0; i < cf->nmhz; i++)
                if (cf->mhz[i].cpu == cpu)
                    got = cf->mhz[i].mhz * 1e6;
        } else
            continue;
        /* the exposition format prints %g-style shortest values */
        if (fabs(got - want) > 1e-6 * fabs(want) + 1e-9)
            fail_msg("%s: got %.17g", line, got);
        checked++;
    }
    fclose(e2e);
    assert_int_equal(checked, 4 * 3 + 4 * 2 + 8);
    sample_free(s);
    cpufreq_sampler.free_state(f.state);
    host_close(f.h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_read),
        cmocka_unit_test(test_not_here),
        cmocka_unit_test(test_bad_files),
        cmocka_unit_test(test_offline),
        cmocka_unit_test(test_optional_per_cpu),
        cmocka_unit_test(test_effective),
        cmocka_unit_test(test_effective_bad),
        cmocka_unit_test(test_cpuinfo_parse),
        cmocka_unit_test(test_node_exporter),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
