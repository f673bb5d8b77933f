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
#include "sense/rapl.h"
#include "sense/sampler.h" /* sample_free() */
#include "tree.h"

#define PC  "sys/class/powercap/"
#define PMU "sys/bus/event_source/devices/power/"

/* A powercap zone as intel_rapl_common.c lays it out. */
static void zone(const char *root, const char *id, const char *name, const char *energy,
                 const char *max)
{
    char p[160];
    snprintf(p, sizeof(p), PC "%s/name", id);
    tree_write(root, p, "%s\n", name);
    snprintf(p, sizeof(p), PC "%s/energy_uj", id);
    tree_write(root, p, "%s", energy);
    if (max) {
        snprintf(p, sizeof(p), PC "%s/max_energy_range_uj", id);
        tree_write(root, p, "%s\n", max);
    }
    snprintf(p, sizeof(p), PC "%s/enabled", id);
    tree_write(root, p, "1\n");
}

static void pmu(const char *root, const char *cpumask)
{
    tree_write(root, PMU "type", "13\n");
    tree_write(root, PMU "cpumask", "%s\n", cpumask);
    tree_write(root, PMU "events/energy-pkg", "event=0x02\n");
    tree_write(root, PMU "events/energy-pkg.scale", "2.3283064365386962890625e-10\n");
    tree_write(root, PMU "events/energy-pkg.unit", "Joules\n");
    tree_write(root, PMU "events/energy-ram", "event=0x03\n");
    tree_write(root, PMU "events/energy-ram.scale", "2.3283064365386962890625e-10\n");
    tree_write(root, PMU "events/energy-ram.unit", "Joules\n");
}

static void cpu_pkg(const char *root, int cpu, int pkg, int die)
{
    char p[160];
    snprintf(p, sizeof(p), "sys/devices/system/cpu/cpu%d/topology/physical_package_id", cpu);
    tree_write(root, p, "%d\n", pkg);
    snprintf(p, sizeof(p), "sys/devices/system/cpu/cpu%d/topology/die_id", cpu);
    tree_write(root, p, "%d\n", die);
}

struct ctx {
    struct host *h;
    void *st;
};

static int open_root(const char *root, struct ctx *c, char **why)
{
    assert_int_equal(host_open(root, &c->h), 0);
    c->st = NULL;
    *why = NULL;
    return rapl_sampler.probe(c->h, &c->st, why);
}

static struct sample *take(struct ctx *c)
{
    struct sample *s = calloc(1, sizeof(*s));
    rapl_sampler.collect(c->h, c->st, s);
    assert_non_null(s->rapl);
    return s;
}

static void close_ctx(struct ctx *c)
{
    rapl_sampler.free_state(c->st);
    host_close(c->h);
}

static const struct diag *find_diag(const struct diags *d, const char *where_tail)
{
    for (size_t i = 0; i < d->n; i++) {
        size_t a = strlen(d->v[i].where), b = strlen(where_tail);
        if (a >= b && streq(d->v[i].where + a - b, where_tail))
            return &d->v[i];
    }
    return NULL;
}

/* ---- parsers ---- */

static void test_parse_perf_event(void **state)
{
    uint64_t c = 99;
    assert_int_equal(rapl_parse_perf_event("event=0x02\n", 11, &c), 0);
    assert_int_equal(c, 2);
    assert_int_equal(rapl_parse_perf_event("event=5", 7, &c), 0);
    assert_int_equal(c, 5);
    c = 99;
    assert_int_equal(rapl_parse_perf_event("", 0, &c), -EINVAL);
    assert_int_equal(rapl_parse_perf_event("event=", 6, &c), -EINVAL);
    assert_int_equal(rapl_parse_perf_event("event=0xzz", 10, &c), -EINVAL);
    assert_int_equal(rapl_parse_perf_event("event=1,event=2", 15, &c), -EINVAL);
    assert_int_equal(rapl_parse_perf_event("event=0x02,umask=0x1", 20, &c), -EOPNOTSUPP);
    assert_int_equal(rapl_parse_perf_event("event=0\0x", 9, &c), -EINVAL);
    /* not NUL-terminated: only len bytes count */
    assert_int_equal(rapl_parse_perf_event("event=0x021234", 10, &c), 0);
    assert_int_equal(c, 2);
}

static void test_parse_scale(void **state)
{
    double v = 0;
    const char *k = "2.3283064365386962890625e-10\n";
    assert_int_equal(rapl_parse_scale(k, strlen(k), &v), 0);
    assert_true(v == 1.0 / 4294967296.0); /* 2^-32 exactly */
    v = 7;
    assert_int_equal(rapl_parse_scale("0", 1, &v), -ERANGE);
    assert_int_equal(rapl_parse_scale("-1e-6", 5, &v), -ERANGE);
    assert_int_equal(rapl_parse_scale("nan", 3, &v), -EINVAL);
    assert_int_equal(rapl_parse_scale("inf", 3, &v), -EINVAL);
    assert_int_equal(rapl_parse_scale("abc", 3, &v), -EINVAL);
    assert_int_equal(rapl_parse_scale("", 0, &v), -EINVAL);
    assert_true(v == 7);
}

static void test_parse_zone_id(void **state)
{
    bool mmio;
    int z, s;
#define ID(t) rapl_parse_zone_id(t, strlen(t), &mmio, &z, &s)
    assert_int_equal(ID("intel-rapl"), -ENOENT);
    assert_int_equal(ID("intel-rapl-mmio"), -ENOENT);
    assert_int_equal(ID("intel-rapl:0"), 0);
    assert_false(mmio);
    assert_int_equal(z, 0);
    assert_int_equal(s, -1);
    assert_int_equal(ID("intel-rapl:1:2"), 0);
    assert_int_equal(z, 1);
    assert_int_equal(s, 2);
    assert_int_equal(ID("intel-rapl-mmio:0"), 0);
    assert_true(mmio);
    assert_int_equal(ID("intel-rapl:"), -EINVAL);
    assert_int_equal(ID("intel-rapl-:0"), -EINVAL);
    assert_int_equal(ID("intel-rapl:0:"), -EINVAL);
    assert_int_equal(ID("intel-rapl:a"), -EINVAL);
    assert_int_equal(ID("intel-rapl:0:1:2"), -EINVAL);
    assert_int_equal(ID("intel-rapl:99999999999"), -EINVAL);
    assert_int_equal(ID("dtpm"), -EINVAL);
#undef ID
}

static void test_parse_zone_name(void **state)
{
    enum power_scope sc;
    int p, d;
#define NM(t) rapl_parse_zone_name(t, strlen(t), &sc, &p, &d)
    assert_int_equal(NM("package-0\n"), 0);
    assert_int_equal(sc, POWER_SCOPE_PACKAGE);
    assert_int_equal(p, 0);
    assert_int_equal(d, -1);
    assert_int_equal(NM("package-1-die-3"), 0);
    assert_int_equal(p, 1);
    assert_int_equal(d, 3);
    assert_int_equal(NM("dram"), 0);
    assert_int_equal(sc, POWER_SCOPE_DRAM);
    assert_int_equal(p, -1);
    assert_int_equal(NM("uncore"), 0);
    assert_int_equal(sc, POWER_SCOPE_UNCORE);
    assert_int_equal(NM("psys"), 0);
    assert_int_equal(sc, POWER_SCOPE_PSYS);
    assert_int_equal(NM("package-"), -EINVAL);
    assert_int_equal(NM("package-0x"), -EINVAL);
    assert_int_equal(NM("package-0-die-"), -EINVAL);
    assert_int_equal(NM("cpu"), -EINVAL);
    assert_int_equal(NM(""), -EINVAL);
#undef NM
}

static void test_delta(void **state)
{
    uint64_t d = 0;
    assert_int_equal(rapl_delta(10, 25, 100, &d), 0);
    assert_int_equal(d, 15);
    assert_int_equal(rapl_delta(90, 5, 100, &d), 1);
    assert_int_equal(d, 15);
    assert_int_equal(rapl_delta(90, 5, VAL_NONE, &d), -ERANGE);
    assert_int_equal(rapl_delta(90, 101, 100, &d), -ERANGE);
    assert_int_equal(rapl_delta(5, 5, VAL_NONE, &d), 0);
    assert_int_equal(d, 0);
}

/* ---- node_exporter's fixture: the numbers node_exporter prints ---- */

/* node_rapl_<kind>_joules_total{index="N",...} VALUE from its e2e output. */
static int expected_rapl(const char *kind, int index, double *ret)
{
    char path[4096], key[96], line[512];
    snprintf(path, sizeof(path), "%s/fixtures/node_exporter/e2e-output.txt",
             getenv("WATT_TESTDIR"));
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    snprintf(key, sizeof(key), "node_rapl_%s_joules_total{index=\"%d\"", kind, index);
    int found = -ENOENT;
    while (fgets(line, sizeof(line), f))
        if (strncmp(line, key, strlen(key)) == 0) {
            *ret = strtod(strrchr(line, ' ') + 1, NULL);
            found = 0;
        }
    fclose(f);
    return found;
}

static void test_node_exporter(void **state)
{
    char root[4096];
    snprintf(root, sizeof(root), "%s/node_exporter", getenv("WATT_FIXTURES"));
    struct ctx c;
    char *why;
    assert_int_equal(open_root(root, &c, &why), 1);
    struct sample *s = take(&c);
    assert_int_equal(s->rapl->n, 2);
    const struct rapl_domain *pkg = rapl_find(s->rapl, "package-0");
    const struct rapl_domain *core = rapl_find(s->rapl, "core-0");
    assert_non_null(pkg);
    assert_non_null(core);
    assert_int_equal(pkg->via, RAPL_VIA_POWERCAP);
    assert_string_equal(pkg->zone, "intel-rapl:0");
    assert_string_equal(core->zone, "intel-rapl:0:0");
    assert_int_equal(pkg->raw, 240422366267ULL);
    assert_int_equal(pkg->max_range, 262143328850ULL);
    assert_int_equal(pkg->enabled, 1);
    assert_int_equal(core->enabled, 0); /* power limiting off, metering still on */
    assert_int_equal(core->package, 0);
    assert_int_equal(core->scope, POWER_SCOPE_CORE);

    double want;
    assert_int_equal(expected_rapl("package", 0, &want), 0);
    assert_true(fabs(want - 240422.366267) < 1e-9);
    struct power_readings r = {0};
    struct diags d = {0};
    assert_int_equal(rapl_power(s->rapl, NULL, 0, &r, &d), 2);
    assert_int_equal(r.n, 2);
    assert_string_equal(r.v[0].domain, "package-0");
    assert_string_equal(r.v[0].source, "rapl");
    assert_string_equal(r.v[0].via, "powercap");
    assert_int_equal(r.v[0].scope, POWER_SCOPE_PACKAGE);
    assert_int_equal(r.v[0].package, 0);
    assert_true(fabs(r.v[0].joules - want) < 1e-6);
    assert_true(isnan(r.v[0].delta_j) && isnan(r.v[0].watts));
    assert_int_equal(expected_rapl("core", 0, &want), 0);
    assert_true(fabs(want - 118821.284256) < 1e-9);
    assert_string_equal(r.v[1].domain, "core-0");
    assert_true(fabs(r.v[1].joules - want) < 1e-6);
    assert_int_equal(d.n, 0);

    /* A second sample of the same tree: nothing moved, 0 J and 0 W. */
    struct sample *s2 = take(&c);
    power_readings_free(&r);
    assert_int_equal(rapl_power(s->rapl, s2->rapl, 2.0, &r, &d), 2);
    assert_true(r.v[0].delta_j == 0 && r.v[0].watts == 0);
    assert_int_equal(d.n, 0);
    power_readings_free(&r);
    diags_free(&d);
    sample_free(s);
    sample_free(s2);
    close_ctx(&c);
}

/* ---- wrap, faults and bad values ---- */

static void test_wrap(void **state)
{
    char *root = tree_new();
    zone(root, "intel-rapl:0", "package-0", "262143000000\n", "262143328850");
    tree_write(root, "watt-faults", PC "intel-rapl:0/energy_uj =1000000 from=2\n");
    struct ctx c;
    char *why;
    assert_int_equal(open_root(root, &c, &why), 1);
    struct sample *a = take(&c), *b = take(&c);
    const struct rapl_domain *y = rapl_find(b->rapl, "package-0");
    assert_int_equal(y->raw, 1000000);
    assert_true(y->wrapped);
    assert_int_equal(y->acc, 262143000000ULL + 1328850ULL);
    assert_true(fabs(y->joules - 262144.32885) < 1e-6);

    struct power_readings r = {0};
    struct diags d = {0};
    assert_int_equal(rapl_power(a->rapl, b->rapl, 0.5, &r, &d), 1);
    assert_true(fabs(r.v[0].delta_j - 1.32885) < 1e-9);
    assert_true(fabs(r.v[0].watts - 2.6577) < 1e-9);
    assert_int_equal(d.n, 0);
    power_readings_free(&r);
    sample_free(a);
    sample_free(b);
    close_ctx(&c);
    tree_free(root);
}

static void test_eacces(void **state)
{
    char *root = tree_new();
    zone(root, "intel-rapl:0", "package-0", "5000000\n", "262143328850");
    tree_write(root, "watt-faults", PC "intel-rapl:0/energy_uj EACCES\n");
    struct ctx c;
    char *why;
    assert_int_equal(open_root(root, &c, &why), 1);
    struct sample *s = take(&c);
    const struct rapl_domain *y = rapl_find(s->rapl, "package-0");
    assert_int_equal(y->raw, VAL_NONE);
    assert_true(isnan(y->joules));
    assert_string_equal(
        y->why, "permission denied: energy_uj is root-only since CVE-2020-8694 (run as root)");
    const struct diag *dg = find_diag(&s->diags, "intel-rapl:0/energy_uj");
    assert_non_null(dg);
    assert_int_equal(dg->err, EACCES);
    assert_non_null(strstr(dg->what, "CVE-2020-8694"));

    struct power_readings r = {0};
    struct diags d = {0};
    rapl_power(s->rapl, NULL, 0, &r, &d);
    assert_int_equal(r.n, 1);
    assert_true(isnan(r.v[0].joules));
    power_readings_free(&r);
    sample_free(s);
    close_ctx(&c);
    tree_free(root);
}

static void test_garbage(void **state)
{
    static const char *bad[] = {"abc\n", "", "-5\n", "12 34\n", "99999999999999999999999\n"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char *root = tree_new();
        zone(root, "intel-rapl:0", "package-0", bad[i], "262143328850");
        struct ctx c;
        char *why;
        assert_int_equal(open_root(root, &c, &why), 1);
        struct sample *s = take(&c);
        const struct rapl_domain *y = rapl_find(s->rapl, "package-0");
        assert_int_equal(y->raw, VAL_NONE);
        assert_true(isnan(y->joules));
        assert_non_null(y->why);
        assert_non_null(find_diag(&s->diags, "intel-rapl:0/energy_uj"));
        sample_free(s);
        close_ctx(&c);
        tree_free(root);
    }
}

/* Without max_energy_range_uj a counter going backwards cannot be told
 * from a wrap: the delta is absent, with a reason, and the total goes on. */
static void test_backwards_unknown_range(void **state)
{
    char *root = tree_new();
    zone(root, "intel-rapl:0", "package-0", "9000000\n", NULL);
    tree_write(root, "watt-faults", PC "intel-rapl:0/energy_uj =4000000 from=2\n");
    struct ctx c;
    char *why;
    assert_int_equal(open_root(root, &c, &why), 1);
    struct sample *a = take(&c), *b = take(&c), *x = take(&c);
    /* the missing wrap point is reported in every sample */
    assert_non_null(find_diag(&a->diags, "intel-rapl:0/max_energy_range_uj"));
    const struct rapl_domain *y = rapl_find(b->rapl, "package-0");
    assert_non_null(y->break_why);
    assert_non_null(strstr(y->break_why, "backwards"));

    struct power_readings r = {0};
    struct diags d = {0};
    rapl_power(a->rapl, b->rapl, 1.0, &r, &d);
    assert_true(isnan(r.v[0].delta_j) && isnan(r.v[0].watts));
    assert_int_equal(d.n, 1);
    assert_non_null(strstr(d.v[0].what, "backwards"));
    assert_true(r.v[0].joules == 9.0); /* the total did not move */
    /* from b on the counter is continuous again */
    power_readings_free(&r);
    diags_free(&d);
    rapl_power(b->rapl, x->rapl, 1.0, &r, &d);
    assert_true(r.v[0].delta_j == 0 && r.v[0].watts == 0);
    assert_int_equal(d.n, 0);
    /* a to x spans the break */
    power_readings_free(&r);
    rapl_power(a->rapl, x->rapl, 2.0, &r, &d);
    assert_true(isnan(r.v[0].delta_j));
    assert_int_equal(d.n, 1);
    power_readings_free(&r);
    diags_free(&d);
    sample_free(a);
    sample_free(b);
    sample_free(x);
    close_ctx(&c);
    tree_free(root);
}

/* A value above the wrap point is impossible: the delta is absent. */
static void test_above_range(void **state)
{
    char *root = tree_new();
    zone(root, "intel-rapl:0", "package-0", "100\n", "1000");
    tree_write(root, "watt-faults", PC "intel-rapl:0/energy_uj =5000 from=2\n");
    struct ctx c;
    char *why;
    assert_int_equal(open_root(root, &c, &why), 1);
    struct sample *a = take(&c), *b = take(&c);
    struct power_readings r = {0};
    struct diags d = {0};
    rapl_power(a->rapl, b->rapl, 1.0, &r, &d);
    assert_true(isnan(r.v[0].delta_j));
    assert_int_equal(d.n, 1);
    assert_non_null(strstr(d.v[0].what, "above its wrap point"));
    power_readings_free(&r);
    diags_free(&d);
    sample_free(a);
    sample_free(b);
    close_ctx(&c);
    tree_free(root);
}

/* Two packages with DRAM subzones, psys, a die-named package, an mmio
 * duplicate and the bare control type directory. */
static void test_zones(void **state)
{
    char *root = tree_new();
    tree_write(root, PC "intel-rapl/enabled", "1\n");
    zone(root, "intel-rapl:0", "package-0", "1000000\n", "262143328850");
    zone(root, "intel-rapl:0:0", "dram", "2000000\n", "65712999613");
    zone(root, "intel-rapl:1", "package-1-die-0", "3000000\n", "262143328850");
    zone(root, "intel-rapl:1:0", "dram", "4000000\n", "65712999613");
    zone(root, "intel-rapl:1:1", "uncore", "5000000\n", "262143328850");
    zone(root, "intel-rapl:2", "psys", "6000000\n", "262143328850");
    zone(root, "intel-rapl-mmio:0", "package-0", "7000000\n", "262143328850");
    zone(root, "intel-rapl:3", "gpu", "1\n", "2");
    struct ctx c;
    char *why;
    assert_int_equal(open_root(root, &c, &why), 1);
    struct sample *s = take(&c);
    assert_int_equal(s->rapl->n, 6);
    static const char *names[] = {"package-0",    "dram-0",         "package-1-die-0",
                                  "dram-1-die-0", "uncore-1-die-0", "psys"};
    static const int pkgs[] = {0, 0, 1, 1, 1, -1};
    for (int i = 0; i < 6; i++) {
        assert_string_equal(s->rapl->v[i].name, names[i]);
        assert_int_equal(s->rapl->v[i].package, pkgs[i]);
    }
    assert_int_equal(s->rapl->v[5].scope, POWER_SCOPE_PSYS);
    /* the MSR zone wins over its mmio twin */
    assert_true(s->rapl->v[0].joules == 1.0);
    /* the unknown name is reported */
    assert_non_null(find_diag(&s->diags, "intel-rapl:3/name"));
    sample_free(s);
    close_ctx(&c);
    tree_free(root);
}

static const struct diag *find_diag_what(const struct diags *d, const char *where_tail,
                                         const char *what)
{
    for (size_t i = 0; i < d->n; i++) {
        size_t a = strlen(d->v[i].where), b = strlen(where_tail);
        if (a >= b && streq(d->v[i].where + a - b, where_tail) && strstr(d->v[i].what, what))
            return &d->v[i];
    }
    return NULL;
}

/* Every powercap zone that cannot be used is named with the file at fault
 * and why, in every sample; none is dropped silently. Other control types
 * (dtpm) and the bare "intel-rapl" directory are not zones. */
static void test_zone_skips(void **state)
{
    char *root = tree_new();
    tree_write(root, PC "intel-rapl/enabled", "1\n");
    tree_write(root, PC "dtpm/enabled", "0\n");
    zone(root, "intel-rapl:0", "package-0", "1000000\n", "262143328850");
    zone(root, "intel-rapl:x", "package-7", "1\n", "2");        /* id unparsable */
    zone(root, "intel-rapl:0:0:0", "dram", "1\n", "2");         /* too deep */
    zone(root, "intel-rapl:1", "pkg$%", "1\n", "2");            /* garbage name */
    zone(root, "intel-rapl:1:0", "dram", "1\n", "2");           /* under the garbage parent */
    zone(root, "intel-rapl:2", "package-0", "1\n", "2");        /* package-0 again */
    zone(root, "intel-rapl:3", "core", "1\n", "2");             /* a subzone kind at the top */
    zone(root, "intel-rapl:4:0", "dram", "1\n", "2");           /* no intel-rapl:4 */
    zone(root, "intel-rapl:5", "package-5", "3000000\n", NULL); /* no wrap point: kept */
    zone(root, "intel-rapl:6", "package-6", "3000000\n", "zz"); /* garbage wrap point: kept */
    struct ctx c;
    char *why;
    assert_int_equal(open_root(root, &c, &why), 1);
    struct sample *s = take(&c);
    assert_int_equal(s->rapl->n, 3);
    assert_string_equal(s->rapl->v[0].name, "package-0");
    assert_string_equal(s->rapl->v[1].name, "package-5");
    assert_string_equal(s->rapl->v[2].name, "package-6");
    assert_true(s->rapl->v[1].max_range == VAL_NONE);
    assert_non_null(find_diag_what(&s->diags, "powercap/intel-rapl:x", "zone skipped"));
    assert_non_null(find_diag_what(&s->diags, "powercap/intel-rapl:0:0:0", "zone skipped"));
    assert_non_null(find_diag_what(&s->diags, "intel-rapl:1/name", "not a RAPL domain name"));
    assert_non_null(find_diag_what(&s->diags, "intel-rapl:1/name", "subzone skipped"));
    assert_non_null(find_diag_what(&s->diags, "intel-rapl:2/name", "same domain as intel-rapl:0"));
    assert_non_null(find_diag_what(&s->diags, "intel-rapl:3/name", "on a top-level zone"));
    assert_non_null(find_diag_what(&s->diags, "intel-rapl:4/name", "parent zone is missing"));
    assert_non_null(find_diag_what(&s->diags, "intel-rapl:5/max_energy_range_uj", "missing"));
    assert_non_null(
        find_diag_what(&s->diags, "intel-rapl:6/max_energy_range_uj", "not a positive number"));
    assert_null(find_diag(&s->diags, "powercap/dtpm"));
    assert_null(find_diag(&s->diags, "powercap/intel-rapl"));
    assert_int_equal(s->diags.n, 9);
    /* again in the next sample: a report of two samples names them once */
    struct sample *s2 = take(&c);
    assert_int_equal(s2->diags.n, 9);
    sample_free(s);
    sample_free(s2);
    close_ctx(&c);
    tree_free(root);
}

/* On a recorded root the perf PMU is described, its counters absent. */
static void test_perf_recorded(void **state)
{
    char *root = tree_new();
    pmu(root, "0,10");
    cpu_pkg(root, 0, 0, 0);
    cpu_pkg(root, 10, 1, 0);
    struct ctx c;
    char *why;
    assert_int_equal(open_root(root, &c, &why), 1);
    struct sample *s = take(&c);
    assert_int_equal(s->rapl->n, 4);
    const struct rapl_domain *p1 = rapl_find(s->rapl, "package-1");
    assert_non_null(p1);
    assert_int_equal(p1->via, RAPL_VIA_PERF);
    assert_string_equal(p1->zone, "energy-pkg");
    assert_int_equal(p1->package, 1);
    assert_true(p1->scale == 1.0 / 4294967296.0);
    assert_int_equal(p1->raw, VAL_NONE);
    assert_non_null(strstr(p1->why, "needs the live kernel"));
    const struct rapl_domain *d1 = rapl_find(s->rapl, "dram-1");
    assert_non_null(d1);
    assert_int_equal(d1->scope, POWER_SCOPE_DRAM);
    const struct diag *dg = find_diag(&s->diags, "events/energy-ram");
    assert_non_null(dg);
    assert_int_equal(dg->err, ENOTSUP);

    struct power_readings r = {0};
    struct diags d = {0};
    assert_int_equal(rapl_power(s->rapl, NULL, 0, &r, &d), 4);
    assert_string_equal(r.v[0].via, "perf");
    assert_true(isnan(r.v[0].joules));
    power_readings_free(&r);
    sample_free(s);
    close_ctx(&c);
    tree_free(root);
}

/* Both paths: powercap is preferred; perf adds what powercap lacks. */
static void test_prefer_powercap(void **state)
{
    char *root = tree_new();
    zone(root, "intel-rapl:0", "package-0", "1000000\n", "262143328850");
    pmu(root, "0");
    cpu_pkg(root, 0, 0, 0);
    tree_write(root, PMU "events/energy-gpu", "event=0x04,umask=1\n");
    tree_write(root, PMU "events/energy-gpu.scale", "1e-6\n");
    struct ctx c;
    char *why;
    assert_int_equal(open_root(root, &c, &why), 1);
    struct sample *s = take(&c);
    assert_int_equal(s->rapl->n, 2);
    assert_int_equal(rapl_find(s->rapl, "package-0")->via, RAPL_VIA_POWERCAP);
    assert_int_equal(rapl_find(s->rapl, "dram-0")->via, RAPL_VIA_PERF);
    /* an event watt cannot program is skipped with a reason */
    assert_null(rapl_find(s->rapl, "uncore-0"));
    assert_non_null(find_diag(&s->diags, "events/energy-gpu"));
    sample_free(s);
    close_ctx(&c);
    tree_free(root);
}

/* A per-die PMU (two CPUs of one package in cpumask) names dies. */
static void test_perf_dies(void **state)
{
    char *root = tree_new();
    pmu(root, "0,8");
    cpu_pkg(root, 0, 0, 0);
    cpu_pkg(root, 8, 0, 1);
    struct ctx c;
    char *why;
    assert_int_equal(open_root(root, &c, &why), 1);
    struct sample *s = take(&c);
    assert_non_null(rapl_find(s->rapl, "package-0-die-0"));
    assert_non_null(rapl_find(s->rapl, "package-0-die-1"));
    assert_non_null(rapl_find(s->rapl, "dram-0-die-1"));
    sample_free(s);
    close_ctx(&c);
    tree_free(root);
}

static void test_nothing(void **state)
{
    char *root = tree_new();
    tree_write(root, "sys/devices/system/cpu/online", "0\n");
    struct ctx c;
    char *why;
    assert_int_equal(open_root(root, &c, &why), 0);
    assert_null(c.st);
    assert_non_null(strstr(why, "no RAPL"));
    free(why);
    host_close(c.h);
    /* zones that cannot be used: the reason names the first */
    zone(root, "intel-rapl:0", "gpu", "1\n", "2");
    assert_int_equal(open_root(root, &c, &why), 0);
    assert_non_null(strstr(why, "no RAPL domain usable"));
    assert_non_null(strstr(why, "intel-rapl:0/name"));
    free(why);
    host_close(c.h);
    tree_free(root);
}

/* A domain that appears between samples (perf took over, a module loaded)
 * has joules but no delta, with a reason. */
static void test_domain_missing_earlier(void **state)
{
    struct rapl_domain da = {.name = "package-0", .acc = 10, .scale = 1, .joules = 10};
    struct rapl_domain db[2] = {da, {.name = "dram-0", .acc = 5, .scale = 1, .joules = 5}};
    db[0].acc = 20;
    db[0].joules = 20;
    struct rapl_sample a = {.n = 1, .v = &da}, b = {.n = 2, .v = db};
    struct power_readings r = {0};
    struct diags d = {0};
    assert_int_equal(rapl_power(&a, &b, 2.0, &r, &d), 2);
    assert_true(r.v[0].delta_j == 10 && r.v[0].watts == 5);
    assert_true(r.v[1].joules == 5 && isnan(r.v[1].delta_j));
    assert_int_equal(d.n, 1);
    assert_string_equal(d.v[0].where, "rapl dram-0");
    power_readings_free(&r);
    diags_free(&d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_perf_event),
        cmocka_unit_test(test_parse_scale),
        cmocka_unit_test(test_parse_zone_id),
        cmocka_unit_test(test_parse_zone_name),
        cmocka_unit_test(test_delta),
        cmocka_unit_test(test_node_exporter),
        cmocka_unit_test(test_wrap),
        cmocka_unit_test(test_eacces),
        cmocka_unit_test(test_garbage),
        cmocka_unit_test(test_backwards_unknown_range),
        cmocka_unit_test(test_above_range),
        cmocka_unit_test(test_zones),
        cmocka_unit_test(test_zone_skips),
        cmocka_unit_test(test_perf_recorded),
        cmocka_unit_test(test_prefer_powercap),
        cmocka_unit_test(test_perf_dies),
        cmocka_unit_test(test_nothing),
        cmocka_unit_test(test_domain_missing_earlier),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
