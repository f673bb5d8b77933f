/* The tuning plan (tune/plan.h, tune/knobs.h): value helpers, the knob
 * planners on a small tree, switching reverts, and the apply with its
 * rollback and read-back. */
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
#include "tree.h"
#include "tune/journal.h"
#include "tune/knobs.h"
#include "tune/plan.h"
#include "tune/profile.h"

#define CPU "sys/devices/system/cpu/"

static void test_freq(void **state)
{
    uint64_t k = 7;
    assert_int_equal(knobs_freq_khz("min", 1000000, 3200000, &k), 0);
    assert_int_equal(k, 1000000);
    assert_int_equal(knobs_freq_khz("max", 1000000, 3200000, &k), 0);
    assert_int_equal(k, 3200000);
    assert_int_equal(knobs_freq_khz("2400000", 1000000, 3200000, &k), 0);
    assert_int_equal(k, 2400000);
    assert_int_equal(knobs_freq_khz("2.4 GHz", 1000000, 3200000, &k), 0);
    assert_int_equal(k, 2400000);
    assert_int_equal(knobs_freq_khz("1800 MHz", 1000000, 3200000, &k), 0);
    assert_int_equal(k, 1800000);
    assert_int_equal(knobs_freq_khz("75%", 1000000, 3200000, &k), 0);
    assert_int_equal(k, 2400000);
    k = 7;
    assert_int_equal(knobs_freq_khz("fast", 1000000, 3200000, &k), -EINVAL);
    assert_int_equal(knobs_freq_khz("-1 GHz", 1000000, 3200000, &k), -EINVAL);
    assert_int_equal(knobs_freq_khz("150%", 1000000, 3200000, &k), -ERANGE);
    assert_int_equal(knobs_freq_khz("3 THz", 1000000, 3200000, &k), -EINVAL);
    assert_int_equal(k, 7); /* untouched on failure */
}

static void test_words(void **state)
{
    char *w = knobs_first_offered("schedutil, powersave", "performance powersave\n");
    assert_string_equal(w, "powersave");
    free(w);
    w = knobs_first_offered("powersupersave", "[default] performance powersave powersupersave \n");
    assert_string_equal(w, "powersupersave");
    free(w);
    w = knobs_first_offered("default", "[default] performance");
    assert_string_equal(w, "default");
    free(w);
    assert_null(knobs_first_offered("ondemand", "performance powersave"));
    assert_null(knobs_first_offered("power", "powersave")); /* whole words only */
    bool on = false;
    assert_int_equal(knobs_bool("on", &on), 0);
    assert_true(on);
    assert_int_equal(knobs_bool("0", &on), 0);
    assert_false(on);
    assert_int_equal(knobs_bool("maybe", &on), -EINVAL);
    assert_int_equal(knobs_bool("True", &on), 0); /* parse_bool(): any case */
    assert_true(on);

    char *a = tune_value_active("[default] performance powersave powersupersave \n");
    assert_string_equal(a, "default");
    free(a);
    a = tune_value_active("performance powersave [powersupersave]");
    assert_string_equal(a, "powersupersave");
    free(a);
    a = tune_value_active("balance_performance\n");
    assert_string_equal(a, "balance_performance");
    free(a);
    a = tune_value_active("[]");
    assert_string_equal(a, "[]");
    free(a);
}

static void test_knob_for_path(void **state)
{
    assert_string_equal(tune_knob_for_path(HOST_SYS, CPU "cpufreq/policy3/scaling_governor" + 4),
                        "cpufreq.governor");
    assert_string_equal(tune_knob_for_path(HOST_SYS, "devices/system/cpu/cpufreq/boost"),
                        "cpufreq.boost");
    assert_string_equal(tune_knob_for_path(HOST_SYS, "devices/system/cpu/intel_pstate/no_turbo"),
                        "cpufreq.boost");
    assert_string_equal(
        tune_knob_for_path(HOST_SYS, "devices/system/cpu/cpu7/cpuidle/state3/disable"),
        "cpuidle.max_latency_us");
    assert_string_equal(
        tune_knob_for_path(HOST_SYS, "devices/system/cpu/cpu7/power/pm_qos_resume_latency_us"),
        "pm_qos.resume_latency_us");
    assert_string_equal(
        tune_knob_for_path(HOST_SYS, "devices/pci0000:00/0000:00:14.0/power/control"),
        "devices.runtime_pm");
    assert_string_equal(tune_knob_for_path(HOST_PROC, "sys/kernel/nmi_watchdog"),
                        "kernel.nmi_watchdog");
    assert_null(tune_knob_for_path(HOST_PROC, "sys/kernel/nmi_watchdog_thresh"));
    assert_null(tune_knob_for_path(HOST_SYS, "devices/system/cpu/cpufreq/boost2"));
}

/* Two CPUs, one intel_pstate-like policy each, POLL/C1/C6. */
static char *small_tree(void)
{
    char *r = tree_new();
    tree_write(r, CPU "online", "0-1\n");
    for (int c = 0; c < 2; c++) {
        char p[128];
        snprintf(p, sizeof(p), CPU "cpufreq/policy%d/", c);
        const char *kv[][2] = {
            {"affected_cpus", c ? "1\n" : "0\n"},
            {"scaling_available_governors", "performance powersave\n"},
            {"scaling_governor", "powersave\n"},
            {"energy_performance_available_preferences",
             "default performance balance_performance balance_power power \n"},
            {"energy_performance_preference", "balance_performance\n"},
            {"cpuinfo_min_freq", "1000000\n"},
            {"cpuinfo_max_freq", "3200000\n"},
            {"scaling_min_freq", "1000000\n"},
            {"scaling_max_freq", "3200000\n"},
        };
        for (size_t i = 0; i < ARRAY_SIZE(kv); i++) {
            char path[256];
            snprintf(path, sizeof(path), "%s%s", p, kv[i][0]);
            tree_write(r, path, "%s", kv[i][1]);
        }
        const char *names[] = {"POLL", "C1", "C6"};
        const int lat[] = {0, 2, 133};
        for (int k = 0; k < 3; k++) {
            char path[256];
            snprintf(path, sizeof(path), CPU "cpu%d/cpuidle/state%d/name", c, k);
            tree_write(r, path, "%s\n", names[k]);
            snprintf(path, sizeof(path), CPU "cpu%d/cpuidle/state%d/latency", c, k);
            tree_write(r, path, "%d\n", lat[k]);
            snprintf(path, sizeof(path), CPU "cpu%d/cpuidle/state%d/disable", c, k);
            tree_write(r, path, "0\n");
        }
        char path[256];
        snprintf(path, sizeof(path), CPU "cpu%d/power/pm_qos_resume_latency_us", c);
        tree_write(r, path, "0\n");
    }
    tree_write(r, CPU "intel_pstate/no_turbo", "0\n");
    tree_write(r, "proc/sys/vm/dirty_writeback_centisecs", "500\n");
    return r;
}

static struct profile *parse(const char *text)
{
    struct profile *p = NULL;
    char **inc = NULL, *err = NULL;
    size_t ninc = 0;
    int r = profile_parse_text(text, "t.conf", &p, &inc, &ninc, &err);
    if (r < 0)
        fail_msg("profile: %s", err);
    for (size_t i = 0; i < ninc; i++)
        free(inc[i]);
    free(inc);
    return p;
}

static int plan_text(struct host *h, const char *text, struct tune_plan *plan, char **err)
{
    struct profile *p = parse(text);
    int r = tune_plan_build(h, p, NULL, plan, err);
    profile_free(p);
    return r;
}

static const struct tune_change *find(const struct tune_plan *p, const char *suffix, size_t *idx)
{
    for (size_t i = 0; i < p->n; i++) {
        size_t n = strlen(p->v[i].path), m = strlen(suffix);
        if (n >= m && streq(p->v[i].path + n - m, suffix)) {
            if (idx)
                *idx = i;
            return &p->v[i];
        }
    }
    return NULL;
}

static void test_plan(void **state)
{
    char *root = small_tree();
    struct host *h;
    assert_int_equal(host_open(root, &h), 0);
    struct tune_plan plan = {0};
    char *err = NULL;
    assert_int_equal(plan_text(h,
                               "[cpufreq]\ngovernor = performance\nepp = performance\n"
                               "boost = off\nmin_freq = 2 GHz\n"
                               "[cpuidle]\nmax_latency_us = 10\ncpus = 1\n"
                               "[pm_qos]\nresume_latency_us = 7\n"
                               "[kernel]\nnmi_watchdog = 0\ndirty_writeback_centisecs = 500\n",
                               &plan, &err),
                     0);
    size_t gov, epp;
    assert_non_null(find(&plan, "policy0/scaling_governor", &gov));
    assert_non_null(find(&plan, "policy0/energy_performance_preference", &epp));
    assert_true(gov < epp); /* the governor first: EPP is written under it */
    const struct tune_change *c = find(&plan, "intel_pstate/no_turbo", NULL);
    assert_non_null(c);
    assert_string_equal(c->new_value, "1");
    c = find(&plan, "policy1/scaling_min_freq", NULL);
    assert_string_equal(c->new_value, "2000000");
    assert_string_equal(c->origin, "t.conf:5");
    assert_null(find(&plan, "cpu0/cpuidle/state2/disable", NULL)); /* cpus = 1 only */
    c = find(&plan, "cpu1/cpuidle/state2/disable", NULL);
    assert_string_equal(c->new_value, "1");
    assert_non_null(strstr(c->why, "C6: exit latency 133 us is above the 10 us limit"));
    assert_null(find(&plan, "cpu1/cpuidle/state1/disable", NULL)); /* C1 stays enabled */
    c = find(&plan, "cpu0/power/pm_qos_resume_latency_us", NULL);
    assert_string_equal(c->new_value, "7");
    assert_null(find(&plan, "dirty_writeback_centisecs", NULL)); /* already 500 */
    bool noted = false;
    for (size_t i = 0; i < plan.nnotes; i++)
        noted |= strstr(plan.notes[i], "kernel.nmi_watchdog: skipped, this kernel has no NMI "
                                       "watchdog (t.conf:12)") != NULL;
    assert_true(noted);
    assert_int_equal(plan.n, 2 + 2 + 1 + 2 + 1 + 2);
    tune_plan_free(&plan);

    /* Governor under performance: an EPP other than performance is a note. */
    assert_int_equal(plan_text(h, "[cpufreq]\ngovernor = performance\nepp = power\n", &plan, &err),
                     0);
    assert_null(find(&plan, "energy_performance_preference", NULL));
    assert_int_equal(plan.n, 2);
    tune_plan_free(&plan);

    /* What the machine lacks is an error naming the line and the offer. */
    assert_int_equal(plan_text(h, "[cpufreq]\n\ngovernor = ondemand\n", &plan, &err), -EINVAL);
    assert_string_equal(err, "t.conf:3: cpufreq.governor: none of 'ondemand' is offered by "
                             "policy0 (it offers: performance powersave)");
    free(err);
    err = NULL;
    assert_int_equal(plan_text(h, "[cpufreq]\nmax_freq = 4 GHz\n", &plan, &err), -EINVAL);
    assert_string_equal(err, "t.conf:2: cpufreq.max_freq '4 GHz' is outside what policy0 allows: "
                             "cpuinfo_min_freq 1000000 to cpuinfo_max_freq 3200000 kHz");
    free(err);
    host_close(h);
    free(root);
}

/* pm_qos_resume_latency_us reads 0 as "no constraint" and "n/a" as 0 µs
 * (drivers/base/power/sysfs.c): the profile words map to those. */
static void test_pm_qos_words(void **state)
{
    char *root = small_tree();
    tree_write(root, CPU "cpu1/power/pm_qos_resume_latency_us", "20\n");
    struct host *h;
    assert_int_equal(host_open(root, &h), 0);
    struct tune_plan plan = {0};
    char *err = NULL;
    assert_int_equal(plan_text(h, "[pm_qos]\nresume_latency_us = n/a\n", &plan, &err), 0);
    assert_int_equal(plan.n, 2);
    assert_string_equal(plan.v[0].new_value, "n/a");
    tune_plan_free(&plan);
    assert_int_equal(plan_text(h, "[pm_qos]\nresume_latency_us = none\n", &plan, &err), 0);
    assert_int_equal(plan.n, 1); /* cpu0 has no constraint already */
    assert_string_equal(plan.v[0].new_value, "0");
    assert_string_equal(plan.v[0].old_value, "20");
    tune_plan_free(&plan);
    host_close(h);
    free(root);
}

static void entry(struct journal_entry *e, const char *path, const char *old, const char *new)
{
    *e = (struct journal_entry){.kind = 'W',
                                .owner = (char *)"cli",
                                .dir = HOST_SYS,
                                .path = (char *)path,
                                .old_value = (char *)old,
                                .new_value = (char *)new,
                                .line = 2};
}

static void test_reverts(void **state)
{
    char *root = small_tree();
    tree_write(root, CPU "cpufreq/policy0/scaling_governor", "performance\n");
    tree_write(root, CPU "cpu0/cpuidle/state2/disable", "1\n");
    tree_write(root, CPU "cpufreq/policy1/scaling_governor", "ondemand\n");
    struct host *h;
    assert_int_equal(host_open(root, &h), 0);
    struct journal_entry v[5];
    entry(&v[0], CPU "cpufreq/policy0/scaling_governor" + 4, "powersave\n", "performance");
    entry(&v[1], CPU "cpu0/cpuidle/state2/disable" + 4, "0\n", "1");
    entry(&v[2], CPU "cpu1/power/pm_qos_resume_latency_us" + 4, "0\n", "5"); /* unchanged now */
    /* someone else set policy1's governor since watt did: not put back */
    entry(&v[3], CPU "cpufreq/policy1/scaling_governor" + 4, "powersave\n", "performance");
    /* a forged record: no knob of watt's */
    entry(&v[4], "kernel/uevent_helper", "/tmp/x\n", "");
    struct journal_log log = {.v = v, .n = 5};
    struct tune_plan plan = {0};
    char *err = NULL;
    /* The profile sets cpuidle (covering state2 of cpu0 even though it
     * needs no change there) and pm_qos, not the governor. */
    assert_int_equal(plan_text(h,
                               "[cpuidle]\nmax_latency_us = 10\n"
                               "[pm_qos]\nresume_latency_us = 50\n",
                               &plan, &err),
                     0);
    size_t before = plan.n;
    assert_int_equal(tune_plan_add_reverts(h, &plan, &log, "cli", "web", "/j"), 1);
    assert_int_equal(plan.n, before + 1);
    assert_string_equal(plan.v[0].path, CPU "cpufreq/policy0/scaling_governor" + 4);
    assert_string_equal(plan.v[0].old_value, "performance");
    assert_string_equal(plan.v[0].new_value, "powersave");
    assert_string_equal(plan.v[0].why, "not set by web: back to its original value");
    assert_string_equal(plan.v[0].origin, "/j:2");
    bool changed_note = false, refused_note = false;
    for (size_t i = 0; i < plan.nnotes; i++) {
        changed_note |= strstr(plan.notes[i], "policy1/scaling_governor shows 'ondemand', not "
                                              "what watt wrote (/j:2): changed since") != NULL;
        refused_note |=
            strstr(plan.notes[i], "/j:2 refused: it names no file watt changes") != NULL;
    }
    assert_true(changed_note);
    assert_true(refused_note);
    tune_plan_free(&plan);
    host_close(h);
    free(root);
}

static void test_apply(void **state)
{
    char *root = small_tree();
    /* The kernel refuses policy1's governor; and clamps max_freq. */
    tree_write(root, "watt-faults",
               "sys/devices/system/cpu/cpufreq/policy1/scaling_governor EINVAL op=write\n");
    struct host *h;
    assert_int_equal(host_open(root, &h), 0);
    struct tune_plan plan = {0};
    char *err = NULL;
    assert_int_equal(plan_text(h, "[cpufreq]\ngovernor = performance\n", &plan, &err), 0);
    assert_int_equal(plan.n, 2);
    struct journal *j;
    assert_int_equal(journal_open(h, NULL, "cli", &j, &err), 0);
    assert_int_equal(tune_plan_apply(j, &plan, &err), -EINVAL);
    assert_string_equal(err, "cpufreq.governor: the kernel refused 'performance' for "
                             "/sys/devices/system/cpu/cpufreq/policy1/scaling_governor: Invalid "
                             "argument (EINVAL); nothing was changed (1 value rolled back)");
    free(err);
    err = NULL;
    char *gov;
    assert_int_equal(host_read_str(h, HOST_SYS, CPU "cpufreq/policy0/scaling_governor" + 4, &gov),
                     0);
    assert_string_equal(gov, "powersave");
    free(gov);
    tune_plan_free(&plan);

    /* A clamped value is a note after the write, not an error; the
     * journal records what the kernel showed (an R record), so that a
     * restore knows the value is still watt's. */
    journal_close(j);
    host_close(h);
    tree_write(root, "watt-faults",
               "sys/devices/system/cpu/cpufreq/policy0/scaling_max_freq =2900000 from=2\n");
    assert_int_equal(host_open(root, &h), 0);
    assert_int_equal(journal_open(h, NULL, "cli", &j, &err), 0);
    assert_int_equal(tune_plan_add(&plan, HOST_SYS, CPU "cpufreq/policy0/scaling_max_freq" + 4,
                                   "3200000", "3000000", "cpufreq.max_freq", "w", "o"),
                     0);
    char **notes = NULL;
    size_t nnotes = 0;
    assert_int_equal(tune_plan_apply_checked(j, h, &plan, &notes, &nnotes, &err), 0);
    assert_int_equal(nnotes, 1);
    assert_string_equal(notes[0], "cpufreq.max_freq: wrote '3000000' to "
                                  "/sys/devices/system/cpu/cpufreq/policy0/scaling_max_freq, the "
                                  "kernel shows '2900000'");
    struct journal_log log;
    assert_int_equal(journal_read(h, NULL, &log), 0);
    assert_int_equal(log.n, 1);
    assert_string_equal(log.v[0].shown, "2900000");
    assert_string_equal(journal_entry_written(&log.v[0]), "2900000");
    journal_log_free(&log);
    free(notes[0]);
    free(notes);
    tune_plan_free(&plan);
    journal_close(j);
    host_close(h);
    free(root);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_freq),          cmocka_unit_test(test_words),
        cmocka_unit_test(test_knob_for_path), cmocka_unit_test(test_plan),
        cmocka_unit_test(test_pm_qos_words),  cmocka_unit_test(test_reverts),
        cmocka_unit_test(test_apply),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
