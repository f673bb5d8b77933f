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

#include "agent/fleet_doc.h"
#include "agent/metrics.h"
#include "agent/metrics_cstate.h"
#include "agent/metrics_memory.h"
#include "base/util.h"
#include "config.h"
#include "host/host.h"
#include "model/model.h"
#include "sense/cstate_pmu.h"
#include "sense/devpolicy.h"
#include "sense/irq.h"
#include "sense/latency.h"
#include "sense/rapl.h"
#include "sense/sampler.h"
#include "view/report_power.h"

/* ---- a validator for both exposition formats ---- */

static bool name_char(char c, bool first, bool colon)
{
    bool alpha = ((c | 32) >= 'a' && (c | 32) <= 'z') || c == '_' || (colon && c == ':');
    return alpha || (!first && c >= '0' && c <= '9');
}

static bool is_name(const char *s, size_t n, bool colon)
{
    if (!n)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!name_char(s[i], i == 0, colon))
            return false;
    return true;
}

static bool is_value(const char *s)
{
    if (streq(s, "NaN") || streq(s, "+Inf") || streq(s, "-Inf"))
        return true;
    char *end;
    errno = 0;
    strtod(s, &end);
    return *s && !*end && errno == 0;
}

/* The labels of "{a="x",b="y\""}" up to the closing brace; returns the
 * position after it or NULL. Label names must not repeat. */
static const char *check_labels(const char *p)
{
    char seen[16][64];
    unsigned n = 0;
    if (*p++ != '{')
        return NULL;
    while (*p != '}') {
        const char *k = p;
        while (*p && *p != '=')
            p++;
        if (!*p || !is_name(k, (size_t)(p - k), false) || (size_t)(p - k) >= 64 || n >= 16)
            return NULL;
        snprintf(seen[n], 64, "%.*s", (int)(p - k), k);
        for (unsigned i = 0; i < n; i++)
            if (streq(seen[i], seen[n]))
                return NULL;
        n++;
        if (*++p != '"')
            return NULL;
        for (p++; *p != '"'; p++) {
            if (!*p || *p == '\n')
                return NULL;
            if (*p == '\\' && !(p[1] == '\\' || p[1] == '"' || p[1] == 'n'))
                return NULL;
            if (*p == '\\')
                p++;
        }
        p++;
        if (*p == ',')
            p++;
        else if (*p != '}')
            return NULL;
    }
    return p + 1;
}

struct fams {
    char name[16][96];
    unsigned n;
};

/* Whether a sample name belongs to the family whose TYPE is `type`. */
static bool sample_of(bool om, const char *fam, const char *type, const char *name)
{
    if (!om || streq(type, "gauge"))
        return streq(name, fam);
    size_t n = strlen(fam);
    return strncmp(name, fam, n) == 0 && streq(name + n, "_total");
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Checks every line and returns the number of samples; fails the test with
 * the offending line otherwise. */
static size_t validate(const char *text, bool om)
{
    char fam[128] = "", type[256] = "", help_of[128] = "";
    char **seen = NULL;
    size_t nseen = 0, cap = 0;
    char **families = NULL;
    size_t nfam = 0, famcap = 0;
    bool eof = false;
    _cleanup_free_ char *copy = xstrdup(text);
    assert_true(strlen(text) > 0 && text[strlen(text) - 1] == '\n');
    for (char *line = strtok(copy, "\n"); line; line = strtok(NULL, "\n")) {
        if (eof)
            fail_msg("text after # EOF: %s", line);
        if (streq(line, "# EOF")) {
            if (!om)
                fail_msg("# EOF in text format 0.0.4");
            eof = true;
            continue;
        }
        char kw[8], name[128], rest[256];
        if (line[0] == '#') {
            if (sscanf(line, "# %7s %127s %255[^\n]", kw, name, rest) != 3)
                fail_msg("bad comment: %s", line);
            if (!is_name(name, strlen(name), true))
                fail_msg("bad family name: %s", line);
            if (streq(kw, "HELP")) {
                snprintf(help_of, sizeof(help_of), "%s", name);
                for (size_t i = 0; i < nfam; i++)
                    if (streq(families[i], name))
                        fail_msg("family %s twice", name);
                families = grow_array(families, sizeof(*families), nfam, &famcap);
                families[nfam++] = xstrdup(name);
            } else if (streq(kw, "TYPE")) {
                if (!streq(help_of, name))
                    fail_msg("TYPE without HELP first: %s", line);
                if (!streq(rest, "counter") && !streq(rest, "gauge"))
                    fail_msg("bad type: %s", line);
                snprintf(fam, sizeof(fam), "%s", name);
                snprintf(type, sizeof(type), "%s", rest);
            } else if (streq(kw, "UNIT")) {
                size_t nl = strlen(name), ul = strlen(rest);
                if (!om || !streq(fam, name) || nl <= ul || strcmp(name + nl - ul, rest) != 0 ||
                    name[nl - ul - 1] != '_')
                    fail_msg("bad UNIT: %s", line);
            } else {
                fail_msg("unknown comment: %s", line);
            }
            continue;
        }
        char *sp = strrchr(line, ' ');
        if (!sp || !is_value(sp + 1))
            fail_msg("bad value: %s", line);
        size_t nl = strcspn(line, "{ ");
        snprintf(name, sizeof(name), "%.*s", (int)nl, line);
        if (!is_name(name, nl, true))
            fail_msg("bad sample name: %s", line);
        if (line[nl] == '{' && check_labels(line + nl) != sp)
            fail_msg("bad labels: %s", line);
        if (!fam[0] || !sample_of(om, fam, type, name))
            fail_msg("sample outside its family (%s %s): %s", fam, type, line);
        if (streq(type, "counter") && sp[1] == '-')
            fail_msg("negative counter: %s", line);
        seen = grow_array(seen, sizeof(*seen), nseen, &cap);
        seen[nseen++] = strndup(line, (size_t)(sp - line));
    }
    if (om && !eof)
        fail_msg("OpenMetrics without # EOF");
    qsort(seen, nseen, sizeof(*seen), cmp_str);
    for (size_t i = 1; i < nseen; i++)
        if (streq(seen[i - 1], seen[i]))
            fail_msg("duplicate series %s", seen[i]);
    for (size_t i = 0; i < nseen; i++)
        free(seen[i]);
    for (size_t i = 0; i < nfam; i++)
        free(families[i]);
    free(seen);
    free(families);
    return nseen;
}

/* The value of the series that starts with `prefix` (name and labels up to
 * the space), or NULL. Static buffer. */
static const char *value_of(const char *text, const char *series)
{
    static char buf[64];
    size_t n = strlen(series);
    for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
        if (strncmp(p, series, n) == 0 && p[n] == ' ') {
            snprintf(buf, sizeof(buf), "%.*s", (int)strcspn(p + n + 1, "\n"), p + n + 1);
            return buf;
        }
    return NULL;
}

static double num_of(const char *text, const char *series)
{
    const char *v = value_of(text, series);
    if (!v)
        fail_msg("no series %s", series);
    return strtod(v, NULL);
}

static void want_value(const char *text, const char *series, const char *want)
{
    const char *v = value_of(text, series);
    if (!v)
        fail_msg("no series %s", series);
    if (!streq(v, want))
        fail_msg("%s is %s, want %s", series, v, want);
}

/* ---- fixture roots: two samples through sense, like the agent ---- */

struct run {
    struct host *h;
    struct sense *sense;
    struct sample *a, *b;
    struct power_model model;
    struct power_summary ps;
    struct diags diags;
    struct report_ctx c;
    struct agent_energy *e;
};

static void run_open(struct run *r, const char *fixture, bool two)
{
    char root[4096];
    memset(r, 0, sizeof(*r));
    snprintf(root, sizeof(root), "%s/%s", getenv("WATT_FIXTURES"), fixture);
    assert_int_equal(host_open(root, &r->h), 0);
    assert_int_equal(sense_open(r->h, &r->sense), 0);
    assert_int_equal(sense_sample(r->sense, &r->a), 0);
    if (two)
        assert_int_equal(sense_sample(r->sense, &r->b), 0);
    model_default(&r->model);
    r->c = (struct report_ctx){.h = r->h,
                               .sense = r->sense,
                               .a = r->a,
                               .b = r->b,
                               .cur = two ? r->b : r->a,
                               .interval_s = two ? 1.0 : 0, /* the fixtures' nominal second */
                               .diags = &r->diags};
    report_power_build(&r->c, &r->model, &r->ps);
    r->c.power = &r->ps;
    assert_int_equal(agent_energy_new(&r->e), 0);
    agent_energy_update(r->e, NULL, r->a);
    if (two)
        agent_energy_update(r->e, r->a, r->b);
}

static char *run_render(struct run *r, enum agent_rapl_mode mode, bool om)
{
    struct agent_self self = {.cpu_s = 0.25,
                              .wakeups = 12,
                              .rss_bytes = 3 << 20,
                              .sample_s = 0.00042,
                              .samples = 2,
                              .scrapes = 1,
                              .start_time_s = 1700000000.5};
    struct strbuf out = {0};
    agent_metrics_render(&r->c, r->e, &self, mode, 1.5, om, &out);
    return strbuf_steal(&out);
}

static void run_close(struct run *r)
{
    agent_energy_free(r->e);
    power_summary_free(&r->ps);
    diags_free(&r->diags);
    sample_free(r->a);
    sample_free(r->b);
    sense_close(r->sense);
    host_close(r->h);
}

#define PKG0  "watt_energy_joules_total{source=\"rapl\",domain=\"package-0\",via=\"powercap\"}"
#define CORE0 "watt_energy_joules_total{source=\"rapl\",domain=\"core-0\",via=\"powercap\"}"
#define PKG1  "watt_energy_joules_total{source=\"rapl\",domain=\"package-1\",via=\"powercap\"}"

/* node_exporter's e2e output for the same tree: node_rapl_package_joules_total
 * 240422.366267 and node_rapl_core_joules_total 118821.284256. */
static void test_node_exporter(void **state)
{
    (void)state;
    struct run r;
    run_open(&r, "node_exporter", false);
    _cleanup_free_ char *t = run_render(&r, AGENT_RAPL_EXACT, false);
    size_t n = validate(t, false);
    assert_true(n > 50);
    want_value(t, PKG0, "240422.366267");
    want_value(t, CORE0, "118821.284256");
    /* node_cpu_seconds_total{cpu="0",mode="user"} 444.9 there */
    want_value(t, "watt_cpu_seconds_total{cpu=\"0\",mode=\"user\"}", "444.9");
    want_value(t, "watt_build_info{version=\"" WATT_VERSION "\"}", "1");
    /* one sample: no rates */
    assert_null(strstr(t, "watt_cpu_utilisation_ratio"));
    assert_null(strstr(t, "watt_cpu_effective_frequency_hertz"));
    _cleanup_free_ char *om = run_render(&r, AGENT_RAPL_EXACT, true);
    assert_int_equal(validate(om, true), n);
    assert_non_null(strstr(om, "# TYPE watt_energy_joules counter\n# UNIT watt_energy_joules "
                               "joules\n" PKG0 " 240422.366267\n"));
    assert_non_null(strstr(t, "# TYPE watt_energy_joules_total counter\n" PKG0));
    assert_null(strstr(t, "# UNIT"));
    assert_non_null(strstr(om, "# TYPE watt_build_info gauge\n"));
    assert_non_null(strstr(t, "# TYPE watt_build_info gauge\n"));
    run_close(&r);
}

/* node_exporter's tree read twice: its energy counters do not move and no
 * /proc/stat tick passes. A still counter is not 0 W: no power series for
 * it and no measured node figure (the model's estimate stands in); the
 * energy totals are the counters as read. */
static void test_stuck_counter(void **state)
{
    (void)state;
    struct run r;
    run_open(&r, "node_exporter", true);
    _cleanup_free_ char *t = run_render(&r, AGENT_RAPL_EXACT, false);
    validate(t, false);
    assert_null(strstr(t, "watt_power_watts{source=\"rapl\""));
    assert_null(strstr(t, "basis=\"measured\""));
    want_value(t, PKG0, "240422.366267");
    want_value(t, CORE0, "118821.284256");
    assert_true(r.ps.readings.n == 2 && r.ps.readings.v[0].stuck && r.ps.readings.v[1].stuck);
    run_close(&r);
}

/* intel-2s: two samples one nominal second apart; package-1 wraps from
 * 262102094283 to 23140042 µJ with max_energy_range_uj 262143328850. */
/* Turbo headroom per package (agent/metrics_turbo.c): intel_pstate gives
 * base, non-turbo and turbo; acpi-cpufreq on Rome hides the turbo maximum,
 * so that series is left out. Nothing blocks turbo on either fixture. */
static void test_turbo(void **state)
{
    (void)state;
    struct run r;
    run_open(&r, "intel-2s", true);
    _cleanup_free_ char *t = run_render(&r, AGENT_RAPL_EXACT, false);
    validate(t, false);
    want_value(t, "watt_cpu_base_frequency_hertz{package=\"1\"}", "2400000000");
    want_value(t, "watt_cpu_max_nonturbo_frequency_hertz{package=\"0\"}", "2400000000");
    want_value(t, "watt_cpu_max_turbo_frequency_hertz{package=\"0\"}", "3200000000");
    want_value(t, "watt_cpu_turbo_enabled{package=\"0\"}", "1");
    want_value(t, "watt_cpu_turbo_reached{package=\"0\"}", "1");
    assert_non_null(
        strstr(t, "watt_cpu_package_busy_frequency_hertz{package=\"1\",stat=\"max\"} "));
    assert_null(strstr(t, "watt_cpu_turbo_blocked{"));
    run_close(&r);
    run_open(&r, "amd-epyc", true);
    _cleanup_free_ char *a = run_render(&r, AGENT_RAPL_EXACT, true);
    validate(a, true);
    want_value(a, "watt_cpu_base_frequency_hertz{package=\"0\"}", "2500000000");
    assert_null(strstr(a, "watt_cpu_max_turbo_frequency_hertz{"));
    want_value(a, "watt_cpu_turbo_enabled{package=\"0\"}", "1");
    run_close(&r);
}

static void test_intel_2s(void **state)
{
    (void)state;
    struct run r;
    run_open(&r, "intel-2s", true);
    _cleanup_free_ char *t = run_render(&r, AGENT_RAPL_EXACT, false);
    validate(t, false);
    want_value(t, PKG0, "130727.779501");
    /* 262102094283 + 23140042 + (262143328850 - 262102094283) µJ */
    want_value(t, PKG1, "262166.468892");
    /* every family the issue asks for, with two samples */
    static const char *const need[] = {
        "watt_power_watts{source=\"rapl\",domain=\"package-0\",via=\"powercap\"} ",
        "watt_node_power_watts{basis=\"measured\",source=\"acpi_power_meter\"} ",
        "watt_facility_power_watts ",
        "watt_cpu_idle_state_residency_seconds_total{cpu=\"0\",state=\"",
        "watt_cpu_idle_state_entries_total{cpu=\"0\",state=\"",
        "watt_cpu_idle_state_exit_latency_seconds{state=\"",
        "watt_cpu_scaling_frequency_hertz{cpu=\"0\"} ",
        "watt_cpu_seconds_total{cpu=\"0\",mode=\"idle\"} ",
        "watt_cpu_utilisation_ratio{cpu=\"0\"} ",
        "watt_interrupts_total{irq=\"LOC\",name=\"Local timer interrupts\"} ",
        "watt_device_runtime_active{bus=\"pci\",device=\"",
        "watt_agent_cpu_seconds_total 0.25\n",
        "watt_agent_sample_duration_seconds 0.00042\n",
        "watt_agent_resident_memory_bytes 3145728\n",
        "watt_agent_start_time_seconds 1700000000.5\n",
    };
    for (size_t i = 0; i < sizeof(need) / sizeof(need[0]); i++)
        if (!strstr(t, need[i]))
            fail_msg("missing %s", need[i]);
    /* package-0 over one second: (130727779501 - 130658704661) µJ */
    want_value(t, "watt_power_watts{source=\"rapl\",domain=\"package-0\",via=\"powercap\"}",
               "69.07484");
    /* facility = node x 1.5 */
    double node =
        num_of(t, "watt_node_power_watts{basis=\"measured\",source=\"acpi_power_meter\"}");
    double fac = num_of(t, "watt_facility_power_watts");
    assert_true(node > 0 && fabs(fac - 1.5 * node) < 1e-9 * fac);
    unsigned nutil = 0;
    for (const char *p = strstr(t, "watt_cpu_utilisation_ratio{"); p && *p == 'w';
         p = strchr(p, '\n') + 1, nutil++) {
        double u = strtod(p + strcspn(p, " "), NULL);
        assert_true(u >= 0 && u <= 1);
    }
    assert_true(nutil >= 2);
    _cleanup_free_ char *om = run_render(&r, AGENT_RAPL_EXACT, true);
    validate(om, true);

    _cleanup_free_ char *off = run_render(&r, AGENT_RAPL_OFF, false);
    validate(off, false);
    assert_null(strstr(off, "source=\"rapl"));
    /* the node figure comes from the ACPI power meter, not RAPL: it stays */
    assert_non_null(
        strstr(off, "watt_node_power_watts{basis=\"measured\",source=\"acpi_power_meter\"}"));
    _cleanup_free_ char *coarse = run_render(&r, AGENT_RAPL_COARSE, false);
    validate(coarse, false);
    want_value(coarse, PKG0, "130000");
    want_value(coarse, PKG1, "262000");
    want_value(coarse, "watt_power_watts{source=\"rapl\",domain=\"package-0\",via=\"powercap\"}",
               "69");
    run_close(&r);
}

/* The number of series of watt_device_autosuspend_safe at 1. */
static unsigned count_safe(const char *t)
{
    unsigned n = 0;
    for (const char *p = strstr(t, "\nwatt_device_autosuspend_safe{"); p;
         p = strstr(p + 1, "\nwatt_device_autosuspend_safe{"))
        n += strncmp(p + strcspn(p, "}"), "} 1\n", 4) == 0;
    return n;
}

/* devices.conf rules decide the safe devices, as in watt report: a deny
 * of the USB stick's interface driver takes it out; the printer (usblp
 * on interface 1 of 4) is never safe. */
static void test_device_policy(void **state)
{
    (void)state;
    struct run r;
    run_open(&r, "intel-2s", true);
    const char *stick = "watt_device_autosuspend_safe{bus=\"usb\",device=\"2-1\"}";
    const char *printer = "watt_device_autosuspend_safe{bus=\"usb\",device=\"1-2\"}";
    _cleanup_free_ char *t = run_render(&r, AGENT_RAPL_EXACT, false);
    want_value(t, stick, "1");
    want_value(t, printer, "0");
    assert_int_equal(count_safe(t), 1);

    const char *conf = "deny driver=usb-storage\n";
    struct devpolicy *p = NULL;
    char *err = NULL;
    assert_int_equal(devpolicy_parse(conf, strlen(conf), "devices.conf", &p, &err), 0);
    r.c.devpolicy = p;
    _cleanup_free_ char *denied = run_render(&r, AGENT_RAPL_EXACT, false);
    validate(denied, false);
    want_value(denied, stick, "0");
    assert_int_equal(count_safe(denied), 0);
    devpolicy_free(p);

    /* allow lifts nothing but wakeup: the printer stays denied */
    conf = "allow 03f0:*\n";
    assert_int_equal(devpolicy_parse(conf, strlen(conf), "devices.conf", &p, &err), 0);
    r.c.devpolicy = p;
    _cleanup_free_ char *allowed = run_render(&r, AGENT_RAPL_EXACT, true);
    validate(allowed, true);
    want_value(allowed, printer, "0");
    want_value(allowed, stick, "1");
    devpolicy_free(p);
    r.c.devpolicy = NULL;
    run_close(&r);
}

/* ---- energy totals on synthetic samples ---- */

struct fake {
    struct sample s;
    struct rapl_sample rapl;
    struct rapl_domain d;
};

static struct sample *fake(struct fake *f, uint64_t raw, uint64_t max_range)
{
    memset(f, 0, sizeof(*f));
    snprintf(f->d.name, sizeof(f->d.name), "package-0");
    f->d.via = RAPL_VIA_POWERCAP;
    f->d.scale = 1e-6;
    f->d.max_range = max_range;
    f->d.raw = raw;
    f->rapl = (struct rapl_sample){.n = 1, .v = &f->d};
    f->s.rapl = &f->rapl;
    return &f->s;
}

static char *render_energy(const struct agent_energy *e, const struct sample *cur,
                           enum agent_rapl_mode mode, bool om)
{
    struct report_ctx c = {.a = cur, .cur = cur};
    struct strbuf out = {0};
    agent_metrics_render(&c, e, NULL, mode, 1.5, om, &out);
    char *t = strbuf_steal(&out);
    validate(t, om);
    return t;
}

static void want_total(const struct agent_energy *e, const struct sample *cur, const char *want)
{
    _cleanup_free_ char *t = render_energy(e, cur, AGENT_RAPL_EXACT, false);
    if (!want)
        assert_null(value_of(t, PKG0));
    else
        want_value(t, PKG0, want);
}

static void test_wrap(void **state)
{
    (void)state;
    const uint64_t range = 262143328850ULL;
    struct agent_energy *e;
    assert_int_equal(agent_energy_new(&e), 0);
    struct fake f1, f2, f3;
    struct sample *a = fake(&f1, 262143000000ULL, range);
    agent_energy_update(e, NULL, a);
    want_total(e, a, "262143");
    /* wraps: + (range - last) + new = 328850 + 1000000 µJ */
    struct sample *b = fake(&f2, 1000000, range);
    agent_energy_update(e, a, b);
    want_total(e, b, "262144.32885");
    _cleanup_free_ char *coarse = render_energy(e, b, AGENT_RAPL_COARSE, false);
    want_value(coarse, PKG0, "262000");
    _cleanup_free_ char *off = render_energy(e, b, AGENT_RAPL_OFF, true);
    assert_null(strstr(off, "watt_energy"));
    /* unreadable: the series disappears, the total stays */
    struct sample *c = fake(&f3, VAL_NONE, range);
    agent_energy_update(e, b, c);
    want_total(e, c, NULL);
    c = fake(&f3, 3000000, range);
    agent_energy_update(e, b, c);
    want_total(e, c, "262146.32885");
    /* a vanished domain keeps its total and comes back counting on */
    struct fake none;
    struct sample *gone = fake(&none, 0, range);
    none.rapl.n = 0;
    agent_energy_update(e, c, gone);
    want_total(e, gone, NULL);
    b = fake(&f2, 4000000, range);
    agent_energy_update(e, gone, b);
    want_total(e, b, "262147.32885");
    agent_energy_free(e);
}

/* Backwards without a known range: the delta is skipped, never negative. */
static void test_backwards(void **state)
{
    (void)state;
    struct agent_energy *e;
    assert_int_equal(agent_energy_new(&e), 0);
    struct fake f1, f2, f3;
    struct sample *a = fake(&f1, 5000000, VAL_NONE);
    agent_energy_update(e, NULL, a);
    want_total(e, a, "5");
    struct sample *b = fake(&f2, 1000000, VAL_NONE);
    agent_energy_update(e, a, b);
    want_total(e, b, "5");
    struct sample *c = fake(&f3, 2500000, VAL_NONE);
    agent_energy_update(e, b, c);
    want_total(e, c, "6.5");
    /* above its own range: skipped as well */
    a = fake(&f1, 9000000, 8000000);
    agent_energy_update(e, c, a);
    want_total(e, a, "6.5");
    agent_energy_free(e);
}

/* Label values with a quote, a backslash and a newline. */
static void test_escaping(void **state)
{
    (void)state;
    uint64_t count[1] = {7};
    struct irq_source src = {.label = (char *)"24",
                             .name = (char *)"a\"b\\c\nd",
                             .numeric = true,
                             .count = count,
                             .total = 7};
    int cpu[1] = {0};
    struct irq_sample irq = {.ncpus = 1, .cpu = cpu, .nsources = 1, .src = &src};
    struct sample s = {.irq = &irq};
    struct report_ctx c = {.a = &s, .cur = &s};
    for (int om = 0; om < 2; om++) {
        struct strbuf out = {0};
        agent_metrics_render(&c, NULL, NULL, AGENT_RAPL_EXACT, 1.5, om, &out);
        validate(strbuf_str(&out), om);
        want_value(strbuf_str(&out), "watt_interrupts_total{irq=\"24\",name=\"a\\\"b\\\\c\\nd\"}",
                   "7");
        strbuf_free(&out);
    }
}

/* The constraint in force; absent when there is none. */
static void test_latency(void **state)
{
    (void)state;
    struct latency_cpu cpus[3] = {{.cpu = 0, .resume_us = LATENCY_NONE},
                                  {.cpu = 1, .resume_us = 0},
                                  {.cpu = 2, .resume_us = LATENCY_UNKNOWN}};
    struct latency_sample l = {.global_us = 20, .global_raw = 20, .ncpus = 3, .cpus = cpus};
    struct sample s = {.latency = &l};
    struct report_ctx c = {.a = &s, .cur = &s};
    struct strbuf out = {0};
    agent_metrics_render(&c, NULL, NULL, AGENT_RAPL_EXACT, 1.5, false, &out);
    const char *t = strbuf_str(&out);
    assert_int_equal(validate(t, false), 3); /* build_info, global, cpu1 */
    want_value(t, "watt_latency_constraint_seconds", "0.00002");
    want_value(t, "watt_cpu_resume_latency_constraint_seconds{cpu=\"1\"}", "0");
    strbuf_reset(&out);
    l.global_us = LATENCY_NONE;
    cpus[1].resume_us = 1500;
    agent_metrics_render(&c, NULL, NULL, AGENT_RAPL_EXACT, 1.5, true, &out);
    t = strbuf_str(&out);
    assert_int_equal(validate(t, true), 2);
    assert_null(strstr(t, "watt_latency_constraint_seconds"));
    want_value(t, "watt_cpu_resume_latency_constraint_seconds{cpu=\"1\"}", "0.0015");
    strbuf_free(&out);
}

/* Power gauges and the node figure from a hand-made summary. */
static void test_power_modes(void **state)
{
    (void)state;
    struct power_summary ps = {
        .measured = true, .it_w = 12.5, .estimated_w = 40.25, .facility_w = 18.75};
    snprintf(ps.source, sizeof(ps.source), "rapl package");
    model_default(&ps.model);
    struct power_reading *p = power_readings_add(&ps.readings);
    *p = (struct power_reading){.watts = 12.5, .joules = NAN, .delta_j = 12.5};
    snprintf(p->source, sizeof(p->source), "rapl");
    snprintf(p->via, sizeof(p->via), "powercap");
    snprintf(p->domain, sizeof(p->domain), "package-0");
    p = power_readings_add(&ps.readings);
    *p = (struct power_reading){.watts = 3.25, .joules = NAN, .delta_j = NAN};
    snprintf(p->source, sizeof(p->source), "hwmon");
    snprintf(p->via, sizeof(p->via), "sysfs");
    snprintf(p->domain, sizeof(p->domain), "hwmon2/power1");
    struct sample s = {0};
    struct report_ctx c = {.a = &s, .cur = &s, .power = &ps};
    const char *rapl_w = "watt_power_watts{source=\"rapl\",domain=\"package-0\",via=\"powercap\"}";
    const char *hw_w = "watt_power_watts{source=\"hwmon\",domain=\"hwmon2/power1\",via=\"sysfs\"}";
    char model_w[160];
    snprintf(model_w, sizeof(model_w),
             "watt_power_watts{source=\"model\",domain=\"node\",via=\"model\",model=\"%s\"}",
             ps.model.name);
    for (int mode = AGENT_RAPL_EXACT; mode <= AGENT_RAPL_OFF; mode++) {
        struct strbuf out = {0};
        agent_metrics_render(&c, NULL, NULL, (enum agent_rapl_mode)mode, 2, false, &out);
        const char *t = strbuf_str(&out);
        validate(t, false);
        want_value(t, hw_w, "3.25");
        want_value(t, model_w, "40.25");
        want_value(t, "watt_pue_ratio", "2");
        if (mode == AGENT_RAPL_EXACT) {
            want_value(t, rapl_w, "12.5");
            want_value(t, "watt_node_power_watts{basis=\"measured\",source=\"rapl package\"}",
                       "12.5");
            want_value(t, "watt_facility_power_watts", "25");
        } else if (mode == AGENT_RAPL_COARSE) {
            want_value(t, rapl_w, "13");
            want_value(t, "watt_facility_power_watts", "26");
        } else {
            assert_null(value_of(t, rapl_w));
            assert_null(strstr(t, "basis=\"measured\""));
            want_value(t, "watt_facility_power_watts", "80.5");
            char node_w[160];
            snprintf(node_w, sizeof(node_w),
                     "watt_node_power_watts{basis=\"estimated\",source=\"model\",model=\"%s\"}",
                     ps.model.name);
            want_value(t, node_w, "40.25");
        }
        strbuf_free(&out);
    }
    power_summary_free(&ps);
}

/* The fleet controller's file in both formats, after the agent's own
 * families and before # EOF; a malformed one leaves only the up gauge. */
static void test_fleet(void **state)
{
    (void)state;
    static const char file[] = "# HELP watt_fleet_migrations_total Live migrations.\n"
                               "# TYPE watt_fleet_migrations_total counter\n"
                               "watt_fleet_migrations_total{result=\"ok\"} 2\n"
                               "# HELP watt_fleet_hosts Hosts by state.\n"
                               "# TYPE watt_fleet_hosts gauge\n"
                               "watt_fleet_hosts{state=\"on\"} 3\n";
    struct agent_fleet fl = {0};
    _cleanup_free_ char *err = NULL;
    assert_int_equal(fleet_doc_convert(file, strlen(file), &fl.text, &fl.om, &err), 0);
    fl.ok = true;
    struct agent_costs costs = {.n = 3};
    costs.v[0] = (struct agent_cost){.sampler = "rapl", .path = "open", .up = 1};
    costs.v[1] = (struct agent_cost){.sampler = "hwmon", .path = "open", .up = 0};
    costs.v[2] = (struct agent_cost){.sampler = "render", .path = "snapshot", .up = -1};
    struct agent_self self = {.fleet = &fl, .costs = &costs};
    for (int om = 0; om < 2; om++) {
        struct strbuf out = {0};
        agent_metrics_render(NULL, NULL, &self, AGENT_RAPL_EXACT, 1, om, &out);
        const char *t = strbuf_str(&out);
        validate(t, om);
        want_value(t, "watt_fleet_migrations_total{result=\"ok\"}", "2");
        want_value(t, "watt_fleet_hosts{state=\"on\"}", "3");
        want_value(t, "watt_agent_fleet_metrics_up", "1");
        want_value(t, "watt_sampler_up{sampler=\"rapl\"}", "1");
        want_value(t, "watt_sampler_up{sampler=\"hwmon\"}", "0");
        assert_null(value_of(t, "watt_sampler_up{sampler=\"render\"}"));
        assert_non_null(strstr(t, om ? "# TYPE watt_fleet_migrations counter\n"
                                     : "# TYPE watt_fleet_migrations_total counter\n"));
        strbuf_free(&out);
    }
    free(fl.text);
    free(fl.om);
    struct agent_fleet broken = {.ok = false};
    self.fleet = &broken;
    for (int om = 0; om < 2; om++) {
        struct strbuf out = {0};
        agent_metrics_render(NULL, NULL, &self, AGENT_RAPL_EXACT, 1, om, &out);
        validate(strbuf_str(&out), om);
        want_value(strbuf_str(&out), "watt_agent_fleet_metrics_up", "0");
        assert_null(strstr(strbuf_str(&out), "watt_fleet_"));
        strbuf_free(&out);
    }
}

/* ---- package and core C-states, memory (metrics_cstate.c, metrics_memory.c) ---- */

/* Three recorded PMU readings one second apart at a 2.4 GHz TSC, as the
 * report's test has them: package 0 spends 12 % in PC2 and 70 % in PC6
 * each second, package 1 stays in PC0; core 0 of package 0 50 % in CC6. */
static struct cstate_pmu_unit pkg_units[2] = {
    {.cpu = 0, .package = 0, .core = -1},
    {.cpu = 10, .package = 1, .core = -1},
};
static struct cstate_pmu_unit core_units[1] = {{.cpu = 0, .package = 0, .core = 0}};

#define TSC_HZ 2400000000ull

static void pmu_reading(struct cstate_pmu_sample *s, uint64_t *pc, uint64_t *ptsc, uint64_t *cc,
                        uint64_t *ctsc)
{
    *s = (struct cstate_pmu_sample){0};
    s->r[CSTATE_PMU_PKG].pmu = (struct cstate_pmu){.present = true,
                                                   .name = "cstate_pkg",
                                                   .nevents = 2,
                                                   .ev = {{"c2", 2, 0}, {"c6", 6, 2}},
                                                   .nunits = 2,
                                                   .units = pkg_units};
    s->r[CSTATE_PMU_PKG].counts =
        (struct cstate_pmu_counts){.nunits = 2, .nevents = 2, .counts = pc, .tsc = ptsc};
    s->r[CSTATE_PMU_CORE].pmu = (struct cstate_pmu){.present = true,
                                                    .name = "cstate_core",
                                                    .nevents = 1,
                                                    .ev = {{"c6", 6, 2}},
                                                    .nunits = 1,
                                                    .units = core_units};
    s->r[CSTATE_PMU_CORE].counts =
        (struct cstate_pmu_counts){.nunits = 1, .nevents = 1, .counts = cc, .tsc = ctsc};
}

static char *render_with(const struct report_ctx *c, const struct agent_cstate *cs,
                         const struct agent_memory *mem, bool om)
{
    struct agent_self self = {.cstate = cs, .memory = mem};
    struct strbuf out = {0};
    agent_metrics_render(c, NULL, &self, AGENT_RAPL_EXACT, 1, om, &out);
    return strbuf_steal(&out);
}

/* The PMU's shares become seconds that add up over intervals: 0.7 s of
 * PC6 per second, 1.4 after two; package 1's PC6 series is there at 0
 * (measured, not absent); both packages say source pmu. */
static void test_cstate_pmu_seconds(void **state)
{
    (void)state;
    uint64_t pc[3][4], ptsc[3][2], cc[3][1], ctsc[3][1];
    struct cstate_pmu_sample ps[3];
    struct sample smp[3];
    for (int i = 0; i < 3; i++) {
        uint64_t t = 5000000000ull + (uint64_t)i * TSC_HZ;
        pc[i][0] = 100 + (uint64_t)i * 288000000;  /* 12 % of 2.4e9 */
        pc[i][1] = 200 + (uint64_t)i * 1680000000; /* 70 % */
        pc[i][2] = 300;
        pc[i][3] = 400;
        ptsc[i][0] = t;
        ptsc[i][1] = t + 200;
        cc[i][0] = (uint64_t)i * (TSC_HZ / 2);
        ctsc[i][0] = t;
        pmu_reading(&ps[i], pc[i], ptsc[i], cc[i], ctsc[i]);
        smp[i] = (struct sample){.cstate_pmu = &ps[i]};
    }
    int ids[2] = {0, 1};
    struct sense sense = {0};
    for (int i = 0; i < _SAMPLER_MAX; i++)
        sense.usable[i] = 1;
    struct agent_cstate *cs;
    assert_int_equal(agent_cstate_new(&cs), 0);
    for (int i = 1; i < 3; i++) {
        smp[i].topo.npackages = 2;
        smp[i].topo.package_ids = ids;
        struct report_ctx c = {
            .sense = &sense, .a = &smp[i - 1], .b = &smp[i], .cur = &smp[i], .interval_s = 1.0};
        agent_cstate_update(cs, &c);
        for (int om = 0; om < 2; om++) {
            _cleanup_free_ char *t = render_with(&c, cs, NULL, om);
            validate(t, om);
            double want = 0.7 * i;
            assert_true(fabs(num_of(t, "watt_cpu_package_cstate_seconds_total{package=\"0\","
                                       "state=\"pc6\"}") -
                             want) < 1e-9);
            assert_true(fabs(num_of(t, "watt_cpu_package_cstate_seconds_total{package=\"0\","
                                       "state=\"pc2\"}") -
                             0.12 * i) < 1e-9);
            want_value(t, "watt_cpu_package_cstate_seconds_total{package=\"1\",state=\"pc6\"}",
                       "0");
            assert_true(fabs(num_of(t, "watt_cpu_core_cstate_seconds_total{package=\"0\","
                                       "core=\"0\",state=\"cc6\"}") -
                             0.5 * i) < 1e-9);
            want_value(t, "watt_cpu_package_cstate_source{package=\"1\",source=\"pmu\"}", "1");
            assert_null(strstr(t, "watt_cpu_cstate_pmu_unavailable{"));
            assert_null(strstr(t, "watt_cpu_package_idle_state_mean_seconds_total{"));
            if (om)
                assert_non_null(strstr(t, "# TYPE watt_cpu_package_cstate_seconds counter\n"
                                          "# UNIT watt_cpu_package_cstate_seconds seconds\n"));
        }
    }
    /* a counter that went backwards adds nothing: the total stays */
    pc[2][1] = 100;
    struct report_ctx c = {
        .sense = &sense, .a = &smp[1], .b = &smp[2], .cur = &smp[2], .interval_s = 1.0};
    agent_cstate_update(cs, &c);
    _cleanup_free_ char *t = render_with(&c, cs, NULL, false);
    assert_null(value_of(t, "watt_cpu_package_cstate_seconds_total{package=\"0\",state=\"pc6\"}"));
    assert_true(fabs(num_of(t, "watt_cpu_package_cstate_seconds_total{package=\"0\","
                               "state=\"pc2\"}") -
                     0.36) < 1e-9);
    agent_cstate_free(cs);
}

/* intel-2s has both PMUs in sysfs, but a recorded root opens no counter:
 * each PMU says why, each package falls back to the mean of its CPUs'
 * cpuidle time (never zeros under the PMU's name). Memory: the nodes'
 * meminfo and the four skx_edac controllers of three 16 GiB DIMMs. */
static void test_cstate_memory_intel_2s(void **state)
{
    (void)state;
    struct run r;
    run_open(&r, "intel-2s", true);
    struct agent_cstate *cs;
    struct agent_memory *mem;
    assert_int_equal(agent_cstate_new(&cs), 0);
    assert_int_equal(agent_memory_new(r.h, &mem), 0);
    agent_cstate_update(cs, &r.c);
    agent_memory_update(mem, r.h, &r.c);
    for (int om = 0; om < 2; om++) {
        _cleanup_free_ char *t = render_with(&r.c, cs, mem, om);
        validate(t, om);
        assert_null(strstr(t, "watt_cpu_package_cstate_seconds_total{"));
        assert_null(strstr(t, "watt_cpu_core_cstate_seconds_total{"));
        const char *why = value_of(t, "watt_cpu_cstate_pmu_unavailable{pmu=\"cstate_pkg\","
                                      "reason=\"needs the live kernel: perf counters cannot be "
                                      "read from a recorded root\"}");
        assert_non_null(why);
        want_value(t, "watt_cpu_package_cstate_source{package=\"0\",source=\"cpuidle_mean\"}", "1");
        /* the mean of a package's CPUs over one nominal second: at most 1 s in all states */
        double sum = 0;
        unsigned n = 0;
        for (const char *p = strstr(t, "\nwatt_cpu_package_idle_state_mean_seconds_total{"
                                       "package=\"1\"");
             p; p = strstr(p + 1, "\nwatt_cpu_package_idle_state_mean_seconds_total{"
                                  "package=\"1\"")) {
            sum += strtod(strchr(p, '}') + 1, NULL);
            n++;
        }
        assert_true(n >= 2 && sum > 0 && sum <= 1.0 + 1e-6);
        want_value(t, "watt_memory_node_total_bytes{node=\"0\"}", "100275523584");
        /* int(97925316 * 0.31) // 4 * 4 kB */
        want_value(t, "watt_memory_node_used_bytes{node=\"0\"}", "31085408256");
        assert_non_null(value_of(t, "watt_memory_node_cpus_idle_seconds_total{node=\"1\"}"));
        want_value(t,
                   "watt_memory_controller_dimms{controller=\"3\",name=\"Skylake Socket#1 "
                   "IMC#1\"}",
                   "3");
        want_value(t,
                   "watt_memory_controller_size_bytes{controller=\"0\",name=\"Skylake "
                   "Socket#0 IMC#0\"}",
                   "51539607552");
        assert_null(strstr(t, "watt_memory_unavailable{what=\"edac\""));
    }
    /* SIGHUP: nodes and EDAC read anew, the idle totals kept */
    _cleanup_free_ char *before = render_with(&r.c, cs, mem, false);
    char idle[64];
    snprintf(idle, sizeof(idle), "%s",
             value_of(before, "watt_memory_node_cpus_idle_seconds_total{node=\"0\"}"));
    agent_memory_reload(mem, r.h);
    _cleanup_free_ char *after = render_with(&r.c, cs, mem, false);
    want_value(after, "watt_memory_node_cpus_idle_seconds_total{node=\"0\"}", idle);
    want_value(after,
               "watt_memory_controller_dimms{controller=\"0\",name=\"Skylake Socket#0 "
               "IMC#0\"}",
               "3");
    assert_int_equal(agent_memory_info(mem)->nnodes, 2);
    agent_memory_free(mem);
    agent_cstate_free(cs);
    run_close(&r);
}

/* amd-epyc: no cstate PMU at all (AMD has none; a VM neither) and no RAPL
 * dram domain: the reasons are there, no C-state or share series. */
static void test_cstate_memory_absent(void **state)
{
    (void)state;
    struct run r;
    run_open(&r, "amd-epyc", true);
    struct agent_cstate *cs;
    struct agent_memory *mem;
    assert_int_equal(agent_cstate_new(&cs), 0);
    assert_int_equal(agent_memory_new(r.h, &mem), 0);
    agent_cstate_update(cs, &r.c);
    agent_memory_update(mem, r.h, &r.c);
    _cleanup_free_ char *t = render_with(&r.c, cs, mem, true);
    validate(t, true);
    assert_non_null(strstr(t, "watt_cpu_cstate_pmu_unavailable{pmu=\"cstate_pkg\",reason=\"no "
                              "cstate_core or cstate_pkg perf PMU"));
    assert_non_null(strstr(t, "watt_cpu_cstate_pmu_unavailable{pmu=\"cstate_core\",reason=\""));
    assert_null(strstr(t, "watt_cpu_package_cstate_seconds_total{"));
    assert_null(strstr(t, "watt_memory_dram_share_ratio{"));
    assert_null(strstr(t, "\nwatt_memory_dram_share_ratio "));
    assert_non_null(strstr(t, "watt_memory_unavailable{what=\"dram_share\",reason=\"no RAPL dram"));
    agent_memory_free(mem);
    agent_cstate_free(cs);
    run_close(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_node_exporter),
        cmocka_unit_test(test_intel_2s),
        cmocka_unit_test(test_turbo),
        cmocka_unit_test(test_stuck_counter),
        cmocka_unit_test(test_wrap),
        cmocka_unit_test(test_backwards),
        cmocka_unit_test(test_escaping),
        cmocka_unit_test(test_latency),
        cmocka_unit_test(test_power_modes),
        cmocka_unit_test(test_device_policy),
        cmocka_unit_test(test_fleet),
        cmocka_unit_test(test_cstate_pmu_seconds),
        cmocka_unit_test(test_cstate_memory_intel_2s),
        cmocka_unit_test(test_cstate_memory_absent),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
