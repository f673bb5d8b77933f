#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* cmocka.h needs stdarg, stddef, stdint and setjmp first */
#include <cmocka.h>

#include "base/json.h"
#include "base/util.h"
#include "host/host.h"
#include "sense/cpufreq.h"
#include "sense/cpuidle.h"
#include "sense/cstate_pmu.h"
#include "sense/latency.h"
#include "sense/sampler.h"
#include "tune/verify.h"

/* ---- the noise rule and the change column ---- */

static void test_noise(void **state)
{
    (void)state;
    assert_true(tune_verify_is_noise(TUNE_VERIFY_RATE, 1000, 1049));  /* 4.9 % */
    assert_false(tune_verify_is_noise(TUNE_VERIFY_RATE, 1000, 1051)); /* 5.1 % */
    assert_false(tune_verify_is_noise(TUNE_VERIFY_RATE, 1000, 940));
    assert_true(tune_verify_is_noise(TUNE_VERIFY_RATE, 0, 0.5)); /* under 1/s */
    assert_false(tune_verify_is_noise(TUNE_VERIFY_RATE, 0, 3));
    assert_true(tune_verify_is_noise(TUNE_VERIFY_PCT, 50, 50.9));
    assert_false(tune_verify_is_noise(TUNE_VERIFY_PCT, 50, 51.5));
    assert_false(tune_verify_is_noise(TUNE_VERIFY_PCT, 90, 2)); /* 5 % of 90 is not a point rule */
    assert_false(tune_verify_is_noise(TUNE_VERIFY_RATE, NAN, 3));
}

static void test_format_change(void **state)
{
    (void)state;
    char buf[64];
    tune_verify_format_change(buf, sizeof(buf), TUNE_VERIFY_RATE, 100, 150);
    assert_string_equal(buf, "+50 (+50 %)");
    tune_verify_format_change(buf, sizeof(buf), TUNE_VERIFY_RATE, 100, 103);
    assert_string_equal(buf, "+3.0 (+3 %) ~noise");
    tune_verify_format_change(buf, sizeof(buf), TUNE_VERIFY_RATE, 2000, 500);
    assert_string_equal(buf, "-1500 (-75 %)");
    tune_verify_format_change(buf, sizeof(buf), TUNE_VERIFY_RATE, 0, 20);
    assert_string_equal(buf, "+20");
    tune_verify_format_change(buf, sizeof(buf), TUNE_VERIFY_PCT, 10, 95);
    assert_string_equal(buf, "+85 pts");
    tune_verify_format_change(buf, sizeof(buf), TUNE_VERIFY_PCT, 10, 10.4);
    assert_string_equal(buf, "+0.4 pts ~noise");
    tune_verify_format_change(buf, sizeof(buf), TUNE_VERIFY_PCT, 10, 9.98);
    assert_string_equal(buf, "0.0 pts ~noise");
    tune_verify_format_change(buf, sizeof(buf), TUNE_VERIFY_PCT, 10, 10);
    assert_string_equal(buf, "same");
    tune_verify_format_change(buf, sizeof(buf), TUNE_VERIFY_RATE, NAN, 3);
    assert_string_equal(buf, "-");
}

/* ---- windows from synthetic samples ---- */

/* Two CPUs with POLL (exit 0 us) and haltpoll (exit 1 us), as on the VM. */
struct cpu_counts {
    uint64_t usage[2], time_us[2];
};

static struct sample *synth(const struct cpu_counts c[2], int64_t global_us, int disable1_cpu1)
{
    struct sample *s = xcalloc(1, sizeof(*s));
    struct cpuidle_sample *ci = xcalloc(1, sizeof(*ci));
    ci->driver = xstrdup("haltpoll");
    ci->governor = xstrdup("haltpoll");
    ci->ncpus = 2;
    ci->cpus = xcalloc(2, sizeof(*ci->cpus));
    for (int i = 0; i < 2; i++) {
        struct cpuidle_cpu *cpu = &ci->cpus[i];
        cpu->cpu = i;
        cpu->nstates = 2;
        cpu->state = xcalloc(2, sizeof(*cpu->state));
        for (int k = 0; k < 2; k++)
            cpu->state[k] = (struct cpuidle_state){
                .name = xstrdup(k ? "haltpoll" : "POLL"),
                .latency_us = (uint64_t)k,
                .residency_us = (uint64_t)k,
                .usage = c[i].usage[k],
                .time_us = c[i].time_us[k],
                .disable = k == 1 && i == 1 ? disable1_cpu1 : 0,
            };
    }
    s->cpuidle = ci;
    struct latency_sample *l = xcalloc(1, sizeof(*l));
    l->global_us = global_us;
    l->global_raw = global_us == LATENCY_NONE ? LATENCY_GLOBAL_DEFAULT : global_us;
    l->ncpus = 2;
    l->cpus = xcalloc(2, sizeof(*l->cpus));
    l->cpus[0] = (struct latency_cpu){.cpu = 0, .resume_us = LATENCY_NONE};
    l->cpus[1] = (struct latency_cpu){.cpu = 1, .resume_us = 50};
    s->latency = l;
    return s;
}

/* Before: haltpoll does the idling. After (max_latency_us = 0 or a 0 us
 * guard): entries move to POLL. Windows of 2 s. */
static const struct cpu_counts A[2] = {
    {.usage = {100, 1000}, .time_us = {1000, 0}},
    {.usage = {50, 3000}, .time_us = {0, 500000}},
};
static const struct cpu_counts B[2] = {
    {.usage = {300, 1600}, .time_us = {21000, 1800000}}, /* 1 %, 90 % of 2 s */
    {.usage = {150, 3400}, .time_us = {40000, 2100000}}, /* 2 %, 80 % */
};
static const struct cpu_counts C[2] = {
    {.usage = {30300, 1600}, .time_us = {1821000, 1800000}},
    {.usage = {20150, 3400}, .time_us = {1640000, 2100000}},
};

static void test_window_build(void **state)
{
    (void)state;
    struct sample *a = synth(A, LATENCY_NONE, 0), *b = synth(B, LATENCY_NONE, 0);
    struct tune_verify_window *w = NULL;
    assert_int_equal(tune_verify_window_build(a, b, 2.0, false, &w), 0);
    assert_int_equal(w->nstates, 2);
    assert_int_equal(w->ncpus, 2);
    assert_string_equal(w->idle_driver, "haltpoll");
    assert_string_equal(w->state[0].name, "POLL");
    assert_int_equal(w->state[1].latency_us, 1);
    /* residency: mean over CPUs of 100 * dtime / 2e6 us */
    assert_float_equal(w->state[0].residency_pct, (1.0 + 2.0) / 2, 1e-9);
    assert_float_equal(w->state[1].residency_pct, (90.0 + 80.0) / 2, 1e-9);
    assert_float_equal(w->c0_pct, 100 - (91.0 + 82.0) / 2, 1e-9);
    /* entries: (200 + 100) / 2 s and (600 + 400) / 2 s */
    assert_float_equal(w->state[0].entries_per_s, 150, 1e-9);
    assert_float_equal(w->state[0].entries_per_s_cpu, 75, 1e-9);
    assert_float_equal(w->state[1].entries_per_s, 500, 1e-9);
    assert_float_equal(w->wakeups_per_s, 650, 1e-9);
    assert_true(w->global_latency_us == LATENCY_NONE);
    assert_int_equal(w->min_resume_us, 50);
    assert_int_equal(w->state[1].nexcluded, 0);
    assert_int_equal(w->state[1].ndisabled, 0);
    assert_true(isnan(w->irq_per_s)); /* no irq sample */
    assert_true(isnan(w->watts));     /* no meter: never an estimate */
    assert_non_null(w->no_meter_why);
    assert_null(w->meter);
    assert_null(w->freq_governor);
    tune_verify_window_free(w);

    /* A 0 us constraint excludes haltpoll (1 us) on both CPUs, not POLL. */
    struct sample *c = synth(C, 0, 1);
    assert_int_equal(tune_verify_window_build(b, c, 2.0, false, &w), 0);
    assert_int_equal(w->global_latency_us, 0);
    assert_int_equal(w->state[0].nexcluded, 0);
    assert_int_equal(w->state[1].nexcluded, 2);
    assert_int_equal(w->state[1].ndisabled, 1);
    assert_float_equal(w->state[0].entries_per_s, (30000.0 + 20000.0) / 2, 1e-9);
    assert_float_equal(w->state[1].entries_per_s, 0, 1e-9);
    tune_verify_window_free(w);

    /* A counter that went backwards leaves that CPU out, never a negative rate. */
    struct sample *back = synth(C, 0, 0);
    back->cpuidle->cpus[0].state[0].usage = 0;
    assert_int_equal(tune_verify_window_build(b, back, 2.0, false, &w), 0);
    assert_float_equal(w->state[0].entries_per_s, 20000.0 / 2, 1e-9); /* cpu1 alone */
    assert_float_equal(w->state[0].entries_per_s_cpu, 20000.0 / 2, 1e-9);
    tune_verify_window_free(w);

    assert_int_equal(tune_verify_window_build(a, b, 0, false, &w), -EINVAL);
    sample_free(a);
    sample_free(b);
    sample_free(c);
    sample_free(back);
}

static char *render(const struct tune_verify_window *b, const struct tune_verify_window *a)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    tune_verify_print(f, b, a);
    fclose(f);
    return buf;
}

static void test_print_and_json(void **state)
{
    (void)state;
    struct sample *a = synth(A, LATENCY_NONE, 0), *b = synth(B, LATENCY_NONE, 0);
    struct sample *c = synth(C, 0, 1);
    struct tune_verify_window *before, *after;
    assert_int_equal(tune_verify_window_build(a, b, 2.0, false, &before), 0);
    assert_int_equal(tune_verify_window_build(b, c, 2.0, false, &after), 0);

    _cleanup_free_ char *txt = render(before, after);
    assert_non_null(strstr(txt, "measured 2.0 s before and 2.0 s after"));
    assert_non_null(strstr(txt, "POLL (exit 0 us)"));
    assert_non_null(strstr(txt, "+24850 (+16567 %)")); /* POLL entries/s 150 -> 25000 */
    assert_non_null(strstr(txt, "-500 (-100 %)"));     /* haltpoll entries/s */
    assert_non_null(strstr(txt, "cpu_dma_latency limit"));
    assert_non_null(strstr(txt, "0 us"));
    assert_non_null(strstr(txt, "changed"));
    assert_non_null(strstr(txt, "1 of 2"));
    assert_non_null(strstr(txt, "no meter"));
    assert_non_null(strstr(txt, "no cpufreq here"));
    assert_non_null(strstr(txt, "~noise: a rate that moved less than 5 %"));
    /* haltpoll governor and a disabled state: say the disable does nothing. */
    assert_non_null(strstr(txt, "haltpoll cpuidle governor ignores disabled states"));

    /* One window: no change column. */
    _cleanup_free_ char *one = render(before, NULL);
    assert_null(strstr(one, "change"));
    assert_non_null(strstr(one, "measured over 2.0 s"));

    struct json j;
    json_init(&j, false);
    tune_verify_json(&j, before, after);
    const char *s = strbuf_str(&j.out);
    assert_true(s[0] == '{');
    assert_non_null(strstr(s, "\"seconds\":2,"));
    assert_non_null(strstr(s, "\"before\":{"));
    assert_non_null(strstr(s, "\"after\":{"));
    assert_non_null(strstr(s, "\"name\":\"POLL\",\"exit_latency_us\":0"));
    assert_non_null(strstr(s, "\"entries_per_s\":25000"));
    assert_non_null(strstr(s, "\"cpu_dma_latency\":{\"constrained\":true,\"readable\":true,"
                              "\"us\":0}"));
    assert_non_null(strstr(s, "\"watts\":null"));
    assert_non_null(strstr(s, "\"notes\":[\"the haltpoll cpuidle governor ignores"));
    json_free(&j);

    tune_verify_window_free(before);
    tune_verify_window_free(after);
    tune_verify_window_free(NULL);
    sample_free(a);
    sample_free(b);
    sample_free(c);
}

/* ---- per package, from synthetic samples ---- */

/* CPU 0 in package 0, CPU 1 in package 1 (the synth() counts A -> B). */
static void two_packages(struct sample *s)
{
    struct topology *t = &s->topo;
    t->ncpu = 2;
    t->cpu = xcalloc(2, sizeof(*t->cpu));
    for (int i = 0; i < 2; i++) {
        t->cpu[i] = (struct topo_cpu){.present = true, .online = true, .package = i};
        cpuset_add(&t->online, (unsigned)i);
    }
    t->npackages = 2;
    t->ncores = 2;
    t->package_ids = xcalloc(2, sizeof(int));
    t->package_ids[1] = 1;
}

/* APERF/MPERF at a 2 GHz base clock (no TSC counter): over 2 s CPU 0
 * counts 1.5 APERF per MPERF (3000 MHz busy), CPU 1 1.0 (2000 MHz). */
static struct cpufreq_sample *freq(bool later)
{
    struct cpufreq_sample *f = xcalloc(1, sizeof(*f));
    f->ncpus = 2;
    f->cpus = xcalloc(2, sizeof(*f->cpus));
    f->msr_mono_ns = later ? 3000000000ull : 1000000000ull;
    for (int i = 0; i < 2; i++)
        f->cpus[i] = (struct cpufreq_cpu){
            .cpu = i,
            .cur_khz = VAL_NONE,
            .min_khz = VAL_NONE,
            .max_khz = VAL_NONE,
            .hw_min_khz = VAL_NONE,
            .hw_max_khz = VAL_NONE,
            .hw_cur_khz = VAL_NONE,
            .base_khz = 2000000,
            .nom_khz = VAL_NONE,
            .boost = -1,
            .aperf = later ? (i ? 1000000000ull : 1500000000ull) : 0,
            .mperf = later ? 1000000000ull : 0,
            .tsc = VAL_NONE,
        };
    return f;
}

/* The package PMU on CPUs 0 and 1 over 2 s at a 2.4 GHz TSC: package 0
 * 10 % in PC2 and 60 % in PC6, package 1 never below PC0. */
static struct cstate_pmu_unit pmu_units[2] = {
    {.cpu = 0, .package = 0, .core = -1},
    {.cpu = 1, .package = 1, .core = -1},
};
static uint64_t pmu_c0[] = {0, 0, 0, 0}, pmu_t0[] = {0, 0};
static uint64_t pmu_c1[] = {480000000, 2880000000ull, 0, 0};
static uint64_t pmu_t1[] = {4800000000ull, 4800000000ull};

static void pmu_reading(struct cstate_pmu_sample *s, uint64_t *counts, uint64_t *tsc)
{
    *s = (struct cstate_pmu_sample){0};
    s->r[CSTATE_PMU_PKG].pmu = (struct cstate_pmu){.present = true,
                                                   .name = "cstate_pkg",
                                                   .nevents = 2,
                                                   .ev = {{"c2", 2, 0}, {"c6", 6, 2}},
                                                   .nunits = 2,
                                                   .units = pmu_units};
    s->r[CSTATE_PMU_PKG].counts =
        (struct cstate_pmu_counts){.nunits = 2, .nevents = 2, .counts = counts, .tsc = tsc};
}

static void test_packages(void **state)
{
    (void)state;
    struct sample *a = synth(A, LATENCY_NONE, 0), *b = synth(B, LATENCY_NONE, 0);
    two_packages(b);
    a->cpufreq = freq(false);
    b->cpufreq = freq(true);
    struct cstate_pmu_sample pa, pb;
    pmu_reading(&pa, pmu_c0, pmu_t0);
    pmu_reading(&pb, pmu_c1, pmu_t1);
    a->cstate_pmu = &pa;
    b->cstate_pmu = &pb;
    struct tune_verify_window *w = NULL;
    assert_int_equal(tune_verify_window_build(a, b, 2.0, false, &w), 0);
    assert_int_equal(w->npackages, 2);
    /* CPU 0: POLL 1 % + haltpoll 90 % idle; CPU 1: 2 % + 80 % */
    assert_float_equal(w->pkg[0].idle_pct, 91.0, 1e-9);
    assert_float_equal(w->pkg[0].deepest_pct, 90.0, 1e-9);
    assert_float_equal(w->pkg[1].idle_pct, 82.0, 1e-9);
    assert_float_equal(w->pkg[1].deepest_pct, 80.0, 1e-9);
    assert_float_equal(w->pkg[0].busy_mhz, 3000, 1e-6);
    assert_float_equal(w->pkg[1].busy_mhz, 2000, 1e-6);
    assert_true(isnan(w->pkg[0].package_w)); /* no RAPL: never an estimate */
    assert_string_equal(w->pc_pmu, "cstate_pkg");
    assert_null(w->pc_why);
    assert_int_equal(w->pkg[0].npc, 2);
    assert_int_equal(w->pkg[0].pc_number[1], 6);
    assert_float_equal(w->pkg[0].pc_pct[0], 10.0, 1e-9);
    assert_float_equal(w->pkg[0].pc_pct[1], 60.0, 1e-9);
    assert_float_equal(w->pkg[1].pc_pct[1], 0.0, 0);

    _cleanup_free_ char *txt = render(w, w);
    assert_non_null(strstr(txt, "package 0 (1 CPUs with cpuidle)"));
    assert_non_null(strstr(txt, "PC6 % (package PMU)"));
    assert_non_null(strstr(txt, "busy MHz (APERF/MPERF)"));
    assert_null(strstr(txt, "RAPL package W")); /* no row without a meter */
    assert_null(strstr(txt, "Package C-states: not measured"));
    struct json j;
    json_init(&j, false);
    tune_verify_json(&j, w, NULL);
    assert_non_null(strstr(strbuf_str(&j.out),
                           "\"package_cstates\":[{\"state\":\"pc2\",\"residency_pct\":10},"
                           "{\"state\":\"pc6\",\"residency_pct\":60}]"));
    assert_non_null(strstr(strbuf_str(&j.out), "\"package_pmu\":\"cstate_pkg\""));
    json_free(&j);
    tune_verify_window_free(w);

    /* no PMU sample (this VM): why, never a crash */
    b->cstate_pmu = NULL;
    assert_int_equal(tune_verify_window_build(a, b, 2.0, false, &w), 0);
    assert_int_equal(w->pkg[0].npc, 0);
    assert_non_null(strstr(w->pc_why, "not read"));
    tune_verify_window_free(w);
    a->cstate_pmu = NULL; /* static readings: not the sampler's to free */
    sample_free(a);
    sample_free(b);
}

/* ---- the whole measure on a recorded root ---- */

/* Sum over CPUs of (later - first) usage of one state, from the fixture's
 * files and its watt-faults, independently of the samplers. */
static double fixture_entries(const char *root, int state_idx)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/watt-faults", root);
    FILE *f = fopen(path, "re");
    assert_non_null(f);
    char line[1024];
    double sum = 0;
    while (fgets(line, sizeof(line), f)) {
        int cpu, k;
        unsigned long long later;
        if (sscanf(line, "sys/devices/system/cpu/cpu%d/cpuidle/state%d/usage =%llu", &cpu, &k,
                   &later) != 3 ||
            k != state_idx)
            continue;
        snprintf(path, sizeof(path), "%s/sys/devices/system/cpu/cpu%d/cpuidle/state%d/usage", root,
                 cpu, k);
        FILE *g = fopen(path, "re");
        assert_non_null(g);
        unsigned long long first;
        assert_int_equal(fscanf(g, "%llu", &first), 1);
        fclose(g);
        sum += (double)(later - first);
    }
    fclose(f);
    return sum;
}

static void test_measure_fixture(void **state)
{
    (void)state;
    const char *dir = getenv("WATT_FIXTURES");
    if (!dir)
        skip();
    _cleanup_free_ char *root = xasprintf("%s/intel-2s", dir);
    struct host *h;
    assert_int_equal(host_open(root, &h), 0);
    struct tune_verify_window *w1 = NULL, *w2 = NULL;
    char *err = NULL;
    assert_int_equal(tune_verify_measure(h, 3, &w1, &err), 0);
    assert_null(err);
    assert_true(w1->recorded);
    assert_float_equal(w1->seconds, 1.0, 0); /* nominal, whatever was asked */
    assert_int_equal(w1->ncpus, 40);
    assert_int_equal(w1->nstates, 4);
    assert_string_equal(w1->state[3].name, "C6");
    assert_int_equal(w1->state[3].latency_us, 133);
    assert_string_equal(w1->idle_driver, "intel_idle");
    for (int k = 0; k < 4; k++)
        assert_float_equal(w1->state[k].entries_per_s, fixture_entries(root, k), 1e-6);
    assert_true(w1->wakeups_per_s > 1000);
    assert_true(w1->irq_per_s > 1000);
    assert_float_equal(w1->watts, 226.5, 0.01); /* the ACPI power meter */
    assert_non_null(strstr(w1->meter, "acpi_power_meter"));
    assert_string_equal(w1->freq_governor, "powersave");
    assert_string_equal(w1->epp, "balance_performance");
    assert_true(w1->global_latency_us == LATENCY_NONE);
    /* Per package: the CPUs' idle and deepest-state shares average back to
     * the whole machine's; RAPL from the powercap counters (package-1
     * wraps at max_energy_range_uj 262143328850 in the recorded second);
     * no package C-states from a recorded root, and why. */
    assert_int_equal(w1->npackages, 2);
    assert_int_equal(w1->pkg[0].package, 0);
    assert_int_equal(w1->pkg[0].ncpus, 20);
    assert_int_equal(w1->pkg[1].ncpus, 20);
    assert_float_equal((w1->pkg[0].idle_pct + w1->pkg[1].idle_pct) / 2, 100 - w1->c0_pct, 1e-9);
    assert_float_equal((w1->pkg[0].deepest_pct + w1->pkg[1].deepest_pct) / 2,
                       w1->state[3].residency_pct, 1e-9);
    assert_true(w1->pkg[0].idle_pct != w1->pkg[1].idle_pct); /* not one mean copied */
    assert_float_equal(w1->pkg[0].package_w, 69.07484, 1e-3);
    assert_float_equal(w1->pkg[0].dram_w, 10.709444, 1e-3);
    assert_float_equal(w1->pkg[1].package_w, (262143328850.0 - 262102094283 + 23140042) / 1e6,
                       2e-3);
    assert_float_equal(w1->pkg[1].dram_w, 10.098183, 1e-3);
    assert_int_equal(w1->pkg[0].npc, 0);
    assert_null(w1->pc_pmu);
    assert_non_null(strstr(w1->pc_why, "recorded root"));

    /* A second window replays the same recorded second. */
    assert_int_equal(tune_verify_measure(h, 3, &w2, &err), 0);
    for (int k = 0; k < 4; k++)
        assert_float_equal(w2->state[k].entries_per_s, w1->state[k].entries_per_s, 0);
    assert_float_equal(w2->watts, w1->watts, 0);
    _cleanup_free_ char *txt = render(w1, w2);
    assert_non_null(strstr(txt, "a recorded root"));
    assert_non_null(strstr(txt, "same"));
    assert_null(strstr(txt, "changed")); /* nothing moved between the replays */
    assert_non_null(strstr(txt, "Power measured by acpi_power_meter"));
    assert_non_null(strstr(txt, "package 1 (20 CPUs with cpuidle)"));
    assert_non_null(strstr(txt, "RAPL package W"));
    assert_non_null(strstr(txt, "Package C-states: not measured:"));
    assert_null(strstr(txt, "ignores disabled states")); /* menu honours them */
    tune_verify_window_free(w1);
    tune_verify_window_free(w2);

    assert_int_equal(tune_verify_measure(h, 0, &w1, &err), -EINVAL);
    assert_non_null(strstr(err, "out of range"));
    free(err);
    host_close(h);
}

static void replace_file(const char *path, const char *text)
{
    assert_int_equal(unlink(path), 0);
    FILE *f = fopen(path, "we");
    assert_non_null(f);
    fputs(text, f);
    assert_int_equal(fclose(f), 0);
}

/* What a tune writes into a copy of a recorded root shows in the after
 * window (disable files, resume latencies) while the replayed counters
 * stay those of the recording. */
static void test_measure_fixture_copy(void **state)
{
    (void)state;
    const char *dir = getenv("WATT_FIXTURES");
    if (!dir)
        skip();
    char tmpl[] = "/tmp/watt-verify-XXXXXX";
    assert_non_null(mkdtemp(tmpl));
    /* Hard links are quick to make; every file written below is unlinked
     * first, so the shared fixture is never written through. */
    _cleanup_free_ char *cmd = xasprintf("cp -al '%s/intel-2s' '%s/root'", dir, tmpl);
    assert_int_equal(system(cmd), 0);
    _cleanup_free_ char *root = xasprintf("%s/root", tmpl);
    struct host *h;
    assert_int_equal(host_open(root, &h), 0);
    struct tune_verify_window *before, *after;
    char *err = NULL;
    assert_int_equal(tune_verify_measure(h, 1, &before, &err), 0);
    for (int cpu = 0; cpu < 40; cpu++) {
        _cleanup_free_ char *p =
            xasprintf("%s/sys/devices/system/cpu/cpu%d/cpuidle/state3/disable", root, cpu);
        replace_file(p, "1\n");
    }
    _cleanup_free_ char *p =
        xasprintf("%s/sys/devices/system/cpu/cpu7/power/pm_qos_resume_latency_us", root);
    replace_file(p, "5\n");
    assert_int_equal(tune_verify_measure(h, 1, &after, &err), 0);
    assert_int_equal(before->state[3].ndisabled, 0);
    assert_int_equal(after->state[3].ndisabled, 40);
    assert_true(before->min_resume_us == LATENCY_NONE);
    assert_int_equal(after->min_resume_us, 5);
    /* cpu7's 5 us excludes C1E (10 us) and C6 (133 us) there only */
    assert_int_equal(after->state[2].nexcluded, 1);
    assert_int_equal(after->state[1].nexcluded, 0);
    assert_float_equal(after->state[3].entries_per_s, before->state[3].entries_per_s, 0);
    _cleanup_free_ char *txt = render(before, after);
    assert_non_null(strstr(txt, "40 of 40"));
    assert_non_null(strstr(txt, "5 us"));
    tune_verify_window_free(before);
    tune_verify_window_free(after);
    host_close(h);
    _cleanup_free_ char *rm = xasprintf("rm -rf '%s'", tmpl);
    assert_int_equal(system(rm), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_noise),
        cmocka_unit_test(test_format_change),
        cmocka_unit_test(test_window_build),
        cmocka_unit_test(test_print_and_json),
        cmocka_unit_test(test_packages),
        cmocka_unit_test(test_measure_fixture),
        cmocka_unit_test(test_measure_fixture_copy),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
