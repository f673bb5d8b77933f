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
#include "sense/procstat.h"
#include "sense/sampler.h" /* sample_free() */
#include "tree.h"

#define NEAR(a, b) assert_true(fabs((a) - (b)) < 1e-9)

/* A 2-CPU 6.x kernel: all ten columns, guest time inside user. */
static const char STAT_A[] = "cpu  2000 100 1000 16000 400 0 300 200 50 10\n"
                             "cpu0 1000 50 500 8000 200 0 150 100 50 10\n"
                             "cpu1 1000 50 500 8000 200 0 150 100 0 0\n"
                             "intr 5000 17 0 0 3\n"
                             "ctxt 90000\n"
                             "btime 1700000000\n"
                             "processes 1234\n"
                             "procs_running 3\n"
                             "procs_blocked 1\n"
                             "softirq 100 1 2 3\n";

/* One second later: cpu0 did 60 ticks user (20 of them guest), 10 system,
 * 10 steal, 20 idle; cpu1 was idle but for 10 ticks of iowait. */
static const char STAT_B[] = "cpu  2060 100 1010 16110 410 0 300 210 70 10\n"
                             "cpu0 1060 50 510 8020 200 0 150 110 70 10\n"
                             "cpu1 1000 50 500 8090 210 0 150 100 0 0\n"
                             "intr 5600 17 0 0 3\n"
                             "ctxt 92000\n"
                             "processes 1240\n";

static void parse_ok(const char *text, struct procstat_sample *s, struct diags *d)
{
    assert_int_equal(procstat_parse(text, strlen(text), s, d), 0);
}

static void test_parse(void **state)
{
    struct procstat_sample s;
    struct diags d = {0};
    parse_ok(STAT_A, &s, &d);
    assert_int_equal(d.n, 0);
    assert_true(s.has_total);
    assert_int_equal(s.total.cpu, -1);
    assert_int_equal(s.total.ticks[PROCSTAT_IDLE], 16000);
    assert_int_equal(s.ncpus, 2);
    const struct procstat_cpu *c1 = procstat_find_cpu(&s, 1);
    assert_non_null(c1);
    assert_int_equal(c1->ticks[PROCSTAT_STEAL], 100);
    assert_int_equal(s.cpus[0].ticks[PROCSTAT_GUEST_NICE], 10);
    assert_int_equal(s.intr, 5000); /* the total, not the per-IRQ list */
    assert_int_equal(s.ctxt, 90000);
    assert_int_equal(s.btime, 1700000000);
    assert_int_equal(s.processes, 1234);
    assert_int_equal(s.procs_running, 3);
    assert_int_equal(s.procs_blocked, 1);
    NEAR(procstat_seconds(&s.cpus[0], PROCSTAT_USER), 10.0);
    NEAR(procstat_seconds(&s.cpus[0], PROCSTAT_SOFTIRQ), 1.5);
    assert_null(procstat_find_cpu(&s, 2));
    assert_string_equal(procstat_mode_name(PROCSTAT_GUEST_NICE), "guest_nice");
    procstat_sample_clear(&s);
}

static void test_old_kernel(void **state)
{
    /* 2.6.9: seven columns (no steal, guest, guest_nice); 2.4: four */
    static const char a[] = "cpu  100 0 50 800 10 0 5\ncpu0 100 0 50 800 10 0 5\n";
    static const char b[] = "cpu  150 0 50 850 10 0 5\ncpu0 150 0 50 850 10 0 5\n";
    struct procstat_sample x, y;
    parse_ok(a, &x, NULL);
    parse_ok(b, &y, NULL);
    assert_true(x.cpus[0].ticks[PROCSTAT_STEAL] == VAL_NONE);
    assert_true(x.ctxt == VAL_NONE);
    assert_true(isnan(procstat_seconds(&x.cpus[0], PROCSTAT_GUEST)));
    struct procstat_util u;
    assert_int_equal(procstat_util(&x.cpus[0], &y.cpus[0], &u), 0);
    NEAR(u.busy_pct, 50.0);
    NEAR(u.iowait_pct, 0.0);
    assert_true(isnan(u.steal_pct));
    procstat_sample_clear(&x);
    procstat_sample_clear(&y);

    struct procstat_sample z;
    parse_ok("cpu 1 2 3 4\ncpu0 1 2 3 4\n", &z, NULL);
    assert_int_equal(z.cpus[0].ticks[PROCSTAT_IDLE], 4);
    assert_true(z.cpus[0].ticks[PROCSTAT_IOWAIT] == VAL_NONE);
    procstat_sample_clear(&z);
}

static void test_utilisation(void **state)
{
    struct procstat_sample a, b;
    parse_ok(STAT_A, &a, NULL);
    parse_ok(STAT_B, &b, NULL);
    struct procstat_util u;
    /* cpu0: 100 ticks passed, 70 busy (60 user incl. 20 guest, 10 sys); the
     * 10 of steal ran another guest: not busy, shown apart */
    assert_int_equal(procstat_util(procstat_find_cpu(&a, 0), procstat_find_cpu(&b, 0), &u), 0);
    NEAR(u.busy_pct, 70.0);
    NEAR(u.user_pct, 60.0);
    NEAR(u.system_pct, 10.0);
    NEAR(u.steal_pct, 10.0);
    NEAR(u.guest_pct, 20.0); /* inside user, not added to busy */
    NEAR(u.idle_pct, 20.0);
    NEAR(u.busy_cpus, 0.7);
    /* cpu1: 100 ticks, 90 idle + 10 iowait: not busy */
    assert_int_equal(procstat_util(procstat_find_cpu(&a, 1), procstat_find_cpu(&b, 1), &u), 0);
    NEAR(u.busy_pct, 0.0);
    NEAR(u.iowait_pct, 10.0);
    /* total: 200 ticks, 70 busy */
    assert_int_equal(procstat_util(&a.total, &b.total, &u), 0);
    NEAR(u.busy_pct, 35.0);
    NEAR(procstat_busy_cpus(&a, &b), 0.7);
    assert_true(isnan(procstat_busy_cpus(&a, NULL)));
    assert_true(isnan(procstat_busy_cpus(NULL, &b)));
    /* the same sample twice: no tick passed */
    assert_int_equal(procstat_util(&a.cpus[0], &a.cpus[0], &u), -ENODATA);
    assert_true(isnan(procstat_busy_cpus(&a, &a)));
    procstat_sample_clear(&a);
    procstat_sample_clear(&b);
}

static void test_backwards_and_offline(void **state)
{
    /* cpu0's iowait went backwards (proc.rst: it can); cpu1 went offline */
    static const char later[] = "cpu  2100 100 1010 16200 390 0 300 210 70 10\n"
                                "cpu0 1060 50 510 8020 190 0 150 110 70 10\n";
    struct procstat_sample a, b;
    parse_ok(STAT_A, &a, NULL);
    parse_ok(later, &b, NULL);
    struct procstat_util u;
    assert_int_equal(procstat_util(&a.cpus[0], &b.cpus[0], &u), 0);
    NEAR(u.iowait_pct, 0.0); /* counted as no iowait, the CPU is kept */
    /* a column that must not go back (user) does discard the CPU */
    assert_int_equal(procstat_util(&b.cpus[0], &a.cpus[0], &u), -ERANGE);
    assert_null(procstat_find_cpu(&b, 1));
    assert_int_equal(procstat_util(&a.cpus[1], procstat_find_cpu(&b, 1), &u), -ENODATA);
    assert_false(isnan(procstat_busy_cpus(&a, &b))); /* cpu0 still counts */
    /* a CPU that came online: only in the later sample, still no delta */
    assert_int_equal(procstat_util(procstat_find_cpu(&b, 1), &a.cpus[1], &u), -ENODATA);
    procstat_sample_clear(&a);
    procstat_sample_clear(&b);
}

static void test_garbage(void **state)
{
    static const char text[] = "cpu  10 0 10 100\n"
                               "cpu0 1 x 3 4 5\n"     /* malformed */
                               "cpu1 1 2 3\n"         /* too few columns */
                               "cpuX 1 2 3 4\n"       /* not a number */
                               "cpu2 1 2 3 4\n"       /* good */
                               "cpu2 1 2 3 4\n"       /* twice */
                               "cpu99999 1 2 3 4\n"   /* beyond NR_CPUS */
                               "cpu3 -1 2 3 4\n"      /* negative */
                               "ctxt 12 13\n"         /* two values */
                               "procs_running lots\n" /* garbage */
                               "cpu4 18446744073709551616 0 0 0\n";
    struct procstat_sample s;
    struct diags d = {0};
    parse_ok(text, &s, &d);
    assert_int_equal(s.ncpus, 1);
    assert_int_equal(s.cpus[0].cpu, 2);
    assert_true(s.ctxt == VAL_NONE);
    assert_true(s.procs_running == VAL_NONE);
    assert_int_equal(d.n, 9);
    assert_non_null(strstr(d.v[0].where, "line 2 (cpu0)"));
    assert_string_equal(d.v[0].what, "malformed time value");
    assert_string_equal(d.v[1].what, "fewer than 4 time columns");
    assert_string_equal(d.v[2].what, "not a CPU number");
    assert_string_equal(d.v[3].what, "CPU listed twice");
    assert_string_equal(d.v[4].what, "not a CPU number"); /* cpu99999 */
    assert_string_equal(d.v[5].what, "malformed time value");
    assert_string_equal(d.v[8].what, "malformed time value"); /* 2^64 */
    diags_free(&d);
    procstat_sample_clear(&s);

    /* nothing usable: an error, and ret untouched */
    struct procstat_sample untouched = {.ncpus = 77};
    assert_int_equal(procstat_parse("intr 1\nctxt 2\n", 14, &untouched, NULL), -EBADMSG);
    assert_int_equal(procstat_parse("", 0, &untouched, NULL), -EBADMSG);
    assert_int_equal(untouched.ncpus, 77);

    /* truncated read: the length ends mid-line and there is no NUL there */
    static const char cut[] = "cpu  1 2 3 4\ncpu0 1 2 3 4\ncpu1 5 6 7 8 9 9 9\n";
    size_t len = strlen("cpu  1 2 3 4\ncpu0 1 2 3 4\ncpu1 5 6");
    assert_int_equal(procstat_parse(cut, len, &s, &d), 0);
    assert_int_equal(s.ncpus, 1);
    assert_int_equal(d.n, 1);
    assert_non_null(strstr(d.v[0].where, "(cpu1)"));
    diags_free(&d);
    procstat_sample_clear(&s);
}

static struct sample *take(struct host *h, int *ret)
{
    struct sample *s = calloc(1, sizeof(*s));
    *ret = procstat_sampler.collect(h, NULL, s);
    return s;
}

static void test_sampler(void **state)
{
    char *root = tree_new();
    tree_write(root, "proc/stat", "%s", STAT_A);
    tree_write(root, "watt-faults", "proc/stat EACCES from=2\n");
    struct host *h;
    assert_int_equal(host_open(root, &h), 0);
    void *st = NULL;
    char *why = NULL;
    assert_int_equal(procstat_sampler.probe(h, &st, &why), 1);
    int r;
    struct sample *a = take(h, &r);
    assert_int_equal(r, 0);
    assert_int_equal(a->procstat->ncpus, 2);
    assert_int_equal(a->diags.n, 0);
    /* second read: permission denied, so no procstat and a reason */
    struct sample *b = take(h, &r);
    assert_int_equal(r, -EACCES);
    assert_null(b->procstat);
    assert_int_equal(b->diags.n, 1);
    assert_int_equal(b->diags.v[0].err, EACCES);
    assert_non_null(strstr(b->diags.v[0].where, "proc/stat"));
    assert_true(isnan(procstat_busy_cpus(a->procstat, b->procstat)));
    sample_free(a);
    sample_free(b);
    host_close(h);
    tree_free(root);

    /* no /proc/stat at all: not usable, with a reason */
    root = tree_new();
    tree_write(root, "sys/devices/system/cpu/online", "0\n");
    assert_int_equal(host_open(root, &h), 0);
    assert_int_equal(procstat_sampler.probe(h, &st, &why), 0);
    assert_non_null(strstr(why, "procfs"));
    free(why);
    host_close(h);
    tree_free(root);
}

/* node_exporter's fixture and its expected output: every
 * node_cpu_seconds_total and node_cpu_guest_seconds_total must be ticks/100
 * of our parse. */
static void test_node_exporter(void **state)
{
    const char *fx = getenv("WATT_FIXTURES"), *src = getenv("WATT_SRCDIR");
    if (!fx || !src) {
        skip();
        return;
    }
    char path[4096];
    snprintf(path, sizeof(path), "%s/node_exporter/proc/stat", fx);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    static char text[1 << 16];
    size_t len = fread(text, 1, sizeof(text), f);
    fclose(f);
    struct procstat_sample s;
    assert_int_equal(procstat_parse(text, len, &s, NULL), 0);
    assert_int_equal(s.ncpus, 8);
    snprintf(path, sizeof(path), "%s/tests/fixtures/node_exporter/e2e-output.txt", src);
    f = fopen(path, "r");
    assert_non_null(f);
    char line[512];
    unsigned checked = 0;
    while (fgets(line, sizeof(line), f)) {
        int cpu;
        char mode[32];
        double want;
        bool guest = sscanf(line, "node_cpu_guest_seconds_total{cpu=\"%d\",mode=\"%31[a-z]\"} %lf",
                            &cpu, mode, &want) == 3;
        if (!guest && sscanf(line, "node_cpu_seconds_total{cpu=\"%d\",mode=\"%31[a-z]\"} %lf", &cpu,
                             mode, &want) != 3)
            continue;
        if (guest)
            snprintf(mode, sizeof(mode), "%s", streq(mode, "user") ? "guest" : "guest_nice");
        int m = 0;
        while (m < _PROCSTAT_NMODES && !streq(procstat_mode_name(m), mode))
            m++;
        assert_true(m < _PROCSTAT_NMODES);
        double got = procstat_seconds(procstat_find_cpu(&s, cpu), m);
        if (fabs(got - want) > 1e-9)
            fail_msg("cpu%d %s: %.17g, node_exporter %.17g", cpu, mode, got, want);
        checked++;
    }
    fclose(f);
    assert_int_equal(checked, 8 * 8 + 8 * 2);
    procstat_sample_clear(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse),         cmocka_unit_test(test_old_kernel),
        cmocka_unit_test(test_utilisation),   cmocka_unit_test(test_backwards_and_offline),
        cmocka_unit_test(test_garbage),       cmocka_unit_test(test_sampler),
        cmocka_unit_test(test_node_exporter),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
