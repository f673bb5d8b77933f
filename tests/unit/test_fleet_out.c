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
#include "base/strbuf.h"
#include "cli/fleet_out.h"

#define DAY_POINTS 288 /* 24 h at 300 s */

static struct fleet_point day_a[DAY_POINTS], day_b[DAY_POINTS];

/* A day of points at k x 300 + 0.1 s (CloudSim's ticks), hosts falling
 * from START by one every 4 intervals. */
static void fill_day(struct fleet_point *p, unsigned start, double watts_per_host)
{
    for (size_t k = 0; k < DAY_POINTS; k++) {
        unsigned hosts = start - (unsigned)(k / 4);
        p[k] = (struct fleet_point){
            .t_s = (double)(k + 1) * 300 + 0.1,
            .active_hosts = hosts,
            .vms = 1052 - (unsigned)k,
            .power_w = hosts * watts_per_host,
            .sla_violation = (k % 12) / 100.0,
            .migrations = (unsigned)(k % 7),
        };
    }
}

/* IQR-MMT-1.5 on 20110303, roughly: 174.07 kWh, SLATAH 5.04 %. */
static struct fleet_result result_iqr(void)
{
    fill_day(day_a, 120, 95.5);
    struct fleet_result r = {
        .policy = "iqr-mmt-1.5",
        .compat = true,
        .energy_kwh = 174.0749,
        .slatah = 0.050412,
        .pdm = 0.000634,
        .slav = 3.1961e-5,
        .esv = 5.5636e-3,
        .unserved = 0,
        .migrations = 24864,
        .power_ons = 1234,
        .power_offs = 1200,
        .max_active_hosts = 120,
        .mean_active_hosts = 84.25,
        .vms_end = 520,
        .lower_bound_kwh = 150,
        .series = day_a,
        .n_series = DAY_POINTS,
    };
    return r;
}

static struct fleet_result result_watt(void)
{
    fill_day(day_b, 100, 101.25);
    struct fleet_result r = {
        .policy = "watt",
        .compat = false,
        .energy_kwh = 125,
        .slatah = 0.01,
        .pdm = 0.0005,
        .slav = 5e-6,
        .esv = 6.3e-4,
        .unserved = 0.00125,
        .migrations = 812,
        .power_ons = 40,
        .power_offs = 38,
        .max_active_hosts = 100,
        .mean_active_hosts = 70.5,
        .vms_end = 1052,
        .lower_bound_kwh = 100,
        .series = day_b,
        .n_series = DAY_POINTS,
    };
    return r;
}

/* ---- a strict little JSON reader: does the text parse? ---------------- */

static const char *json_value(const char *p);

static const char *skip_ws(const char *p)
{
    while (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r')
        p++;
    return p;
}

static const char *json_str(const char *p)
{
    if (*p++ != '"')
        return NULL;
    for (; *p != '"'; p++) {
        if ((unsigned char)*p < 0x20)
            return NULL;
        if (*p == '\\' && !strchr("\"\\/bfnrtu", *++p))
            return NULL;
    }
    return p + 1;
}

static const char *json_num(const char *p)
{
    char *end;
    if (!(*p == '-' || (*p >= '0' && *p <= '9')))
        return NULL;
    strtod(p, &end);
    return end;
}

static const char *json_seq(const char *p, char close, bool object)
{
    p = skip_ws(p + 1);
    if (*p == close)
        return p + 1;
    for (;;) {
        if (object) {
            if (!(p = json_str(skip_ws(p))) || *(p = skip_ws(p)) != ':')
                return NULL;
            p++;
        }
        if (!(p = json_value(p)))
            return NULL;
        p = skip_ws(p);
        if (*p == close)
            return p + 1;
        if (*p++ != ',')
            return NULL;
    }
}

static const char *json_value(const char *p)
{
    p = skip_ws(p);
    if (*p == '{')
        return json_seq(p, '}', true);
    if (*p == '[')
        return json_seq(p, ']', false);
    if (*p == '"')
        return json_str(p);
    for (const char *const *w = (const char *const[]){"true", "false", "null", NULL}; *w; w++)
        if (!strncmp(p, *w, strlen(*w)))
            return p + strlen(*w);
    return json_num(p);
}

static void assert_json_parses(const char *text)
{
    const char *end = json_value(text);
    if (!end || *skip_ws(end))
        fail_msg("not JSON near offset %td: %.60s", end ? end - text : (ptrdiff_t)-1,
                 end ? end : text);
}

static void assert_has(const char *hay, const char *needle)
{
    if (!hay || !strstr(hay, needle))
        fail_msg("'%s' not in output:\n%.2000s", needle, hay ? hay : "(none)");
}

static void assert_lacks(const char *hay, const char *needle)
{
    if (strstr(hay, needle))
        fail_msg("'%s' unexpectedly in output", needle);
}

static size_t count(const char *hay, const char *needle)
{
    size_t n = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
        n++;
    return n;
}

/* ---- JSON -------------------------------------------------------------- */

static void test_json(void **state)
{
    struct fleet_result r = result_iqr();
    struct json j;
    json_init(&j, false);
    fleet_out_json(&j, &r, "planetlab/20110303", true);
    const char *s = strbuf_str(&j.out);
    assert_json_parses(s);
    assert_has(s, "{\"policy\":\"iqr-mmt-1.5\",\"mode\":\"compat\","
                  "\"trace\":\"planetlab/20110303\",\"energy_kwh\":174.0749,");
    /* shares stay fractions, not percent */
    assert_has(s, "\"slatah\":0.050412,\"pdm\":0.000634,\"slav\":3.1961e-05,\"esv\":0.0055636,");
    assert_has(s, "\"migrations\":24864,\"power_ons\":1234,\"power_offs\":1200,\"unserved\":0,");
    assert_has(s, "\"max_active_hosts\":120,\"mean_active_hosts\":84.25,\"vms_end\":520,");
    /* 174.0749 / 150 - 1 */
    assert_has(s, "\"lower_bound_kwh\":150,\"above_lower_bound\":0.1604993");
    assert_has(s, "\"series\":[{\"t_s\":300.1,\"active_hosts\":120,\"vms\":1052,"
                  "\"power_w\":11460,\"sla_violation\":0,\"migrations\":0},");
    assert_int_equal(count(s, "\"t_s\""), DAY_POINTS);
    json_free(&j);

    /* a run without a bound, no series, no trace name, pretty-printed, in
     * the document: the schema and time first, then the runs */
    r.lower_bound_kwh = 0;
    r.compat = false;
    json_init(&j, true);
    const struct fleet_result *two[] = {&r, &r};
    char *origins[] = {NULL, "x\"y"};
    fleet_out_json_doc(&j, "watt-fleet-compare/2", 1796406600, two, origins, 2, false);
    s = strbuf_str(&j.out);
    assert_json_parses(s);
    assert_has(s,
               "{\n  \"schema\": \"watt-fleet-compare/2\",\n  \"time\": \"2026-12-04T17:50:00Z\",\n"
               "  \"runs\": [\n    {\n      \"policy\": \"iqr-mmt-1.5\",");
    assert_int_equal(count(s, "\"policy\""), 2);
    assert_has(s, "\"above_lower_bound\": null");
    assert_has(s, "\"trace\": null");
    assert_has(s, "\"trace\": \"x\\\"y\"");
    assert_has(s, "\"mode\": \"realistic\"");
    assert_lacks(s, "series");
    json_free(&j);
}

static void test_json_checker_fails(void **state)
{
    /* the reader above must reject what is not JSON, or test_json proves nothing */
    assert_null(json_value("{\"a\":1,}"));
    assert_null(json_value("{\"a\" 1}"));
    assert_null(json_value("[nan]"));
    const char *end = json_value("{\"a\":[1,2]}}");
    assert_non_null(end);
    assert_string_equal(end, "}");
}

/* ---- tables ------------------------------------------------------------ */

static void test_table(void **state)
{
    struct fleet_result a = result_iqr(), b = result_watt();
    const struct fleet_result *runs[] = {&a, &b};
    const char *labels[] = {"20110303", "20110306"};
    struct strbuf out = {0};
    fleet_out_table(&out, runs, 2, labels);
    const char *s = strbuf_str(&out);
    assert_has(s, "label     policy       energy kWh  SLATAH %  PDM %  SLAV x1e-5  ESV x1e-3  "
                  "migrations  hosts on/off  vs bound %\n");
    /* 174.0749 -> 174.07, 5.0412 % -> 5.04, 0.0634 % -> 0.063, 3.1961 -> 3.20,
     * 5.5636 -> 5.56, 16.05 % above the bound -> +16.0 */
    assert_has(s, "20110303  iqr-mmt-1.5      174.07      5.04  0.063        3.20       5.56  "
                  "     24864     1234/1200       +16.0\n");
    assert_has(s, "20110306  watt             125.00      1.00  0.050        0.50       0.63  "
                  "       812         40/38       +25.0\n");
    /* every line stays under 120 columns with these labels and policies */
    for (const char *line = s; *line;) {
        const char *nl = strchr(line, '\n');
        assert_non_null(nl);
        assert_true(nl - line <= 120);
        line = nl + 1;
    }
    strbuf_free(&out);

    /* no labels: no label column; no bound: "-" */
    a.lower_bound_kwh = 0;
    fleet_out_table(&out, runs, 1, NULL);
    s = strbuf_str(&out);
    assert_true(!strncmp(s, "  policy       energy kWh", 25));
    assert_has(s, "  iqr-mmt-1.5      174.07");
    assert_true(s[strlen(s) - 2] == '-');
    strbuf_free(&out);
}

static void test_markdown(void **state)
{
    struct fleet_result a = result_iqr(), b = result_watt();
    const struct fleet_result *runs[] = {&a, &b};
    const char *labels[] = {"a|b", "20110306"};
    struct strbuf out = {0};
    fleet_out_markdown(&out, runs, 2, labels);
    const char *s = strbuf_str(&out);
    assert_string_equal(s, "| label | policy | energy kWh | SLATAH % | PDM % | SLAV x1e-5 | "
                           "ESV x1e-3 | migrations | hosts on/off | vs bound % |\n"
                           "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n"
                           "| a\\|b | iqr-mmt-1.5 | 174.07 | 5.04 | 0.063 | 3.20 | 5.56 | 24864 | "
                           "1234/1200 | +16.0 |\n"
                           "| 20110306 | watt | 125.00 | 1.00 | 0.050 | 0.50 | 0.63 | 812 | "
                           "40/38 | +25.0 |\n");
    strbuf_free(&out);
    fleet_out_markdown(&out, runs, 1, NULL);
    assert_true(!strncmp(strbuf_str(&out), "| policy | energy kWh |", 23));
    assert_has(strbuf_str(&out), "\n|---|---:|");
    strbuf_free(&out);
}

/* ---- CSV --------------------------------------------------------------- */

/* The whole of F, from its start. */
static char *slurp(FILE *f)
{
    rewind(f);
    struct strbuf b = {0};
    char buf[4096];
    size_t got;
    while ((got = fread(buf, 1, sizeof(buf), f)) > 0)
        strbuf_append_n(&b, buf, got);
    strbuf_putc(&b, '\0');
    return strbuf_steal(&b);
}

static void test_csv(void **state)
{
    struct fleet_result a = result_iqr(), b = result_watt();
    b.n_series = 10;
    const struct fleet_result *runs[] = {&a, &b};
    const char *labels[] = {"day,\"1\"", "20110306"};
    FILE *f = tmpfile();
    assert_non_null(f);
    assert_int_equal(fleet_out_series_csv(f, runs, 2, labels), 0);
    char *s = slurp(f);
    fclose(f);
    assert_true(
        !strncmp(s, "run,policy,t_s,active_hosts,vms,power_w,sla_violation,migrations\n", 65));
    assert_int_equal(count(s, "\n"), 1 + DAY_POINTS + 10);
    /* the label quoted (RFC 4180), 120 hosts x 95.5 W, 0.1 s kept */
    assert_has(s, "\n\"day,\"\"1\"\"\",iqr-mmt-1.5,300.1,120,1052,11460.0,0.000000,0\n");
    assert_has(s, "\n\"day,\"\"1\"\"\",iqr-mmt-1.5,3900.1,117,1040,11173.5,0.000000,5\n");
    assert_has(s, "\n20110306,watt,3000.1,98,1043,9922.5,0.090000,2\n");
    assert_int_equal(count(s, "\n20110306,watt,"), 10);
    free(s);

    /* without labels, runs are numbered from 1 */
    f = tmpfile();
    assert_non_null(f);
    assert_int_equal(fleet_out_series_csv(f, runs + 1, 1, NULL), 0);
    s = slurp(f);
    fclose(f);
    assert_has(s, "\n1,watt,300.1,100,1052,10125.0,0.000000,0\n");
    free(s);
}

static void test_write_error(void **state)
{
    FILE *f = fopen("/dev/full", "we");
    if (!f)
        skip();
    struct fleet_result a = result_iqr();
    const struct fleet_result *runs[] = {&a};
    assert_int_equal(fleet_out_series_csv(f, runs, 1, NULL), -ENOSPC);
    clearerr(f);
    assert_int_equal(fleet_out_svg(f, runs, 1, NULL, "t"), -ENOSPC);
    fclose(f);
}

/* ---- SVG --------------------------------------------------------------- */

/* Tags balance and nest, attribute values are quoted, '&' starts one of
 * the five entities, no stray '<' or '>' in text. Returns NULL or why not. */
static const char *xml_check(const char *s)
{
    static char why[160];
    char stack[64][32];
    int depth = 0, roots = 0;
    if (!strncmp(s, "<?xml", 5)) {
        if (!(s = strstr(s, "?>")))
            return "unterminated XML declaration";
        s += 2;
    }
    while (*s) {
        if (*s == '&') {
            static const char *const ent[] = {"&amp;", "&lt;", "&gt;", "&quot;", "&#39;"};
            size_t k = 0;
            while (k < 5 && strncmp(s, ent[k], strlen(ent[k])))
                k++;
            if (k == 5)
                return "bare '&'";
            s += strlen(ent[k]);
            continue;
        }
        if (*s == '>')
            return "stray '>' in text";
        if (*s != '<') {
            s++;
            continue;
        }
        bool close = s[1] == '/';
        const char *name = s + 1 + close;
        size_t nl = strcspn(name, " \n/>");
        if (nl == 0 || nl >= 32)
            return "bad tag name";
        const char *p = name + nl;
        while (*p && *p != '>' && *p != '/') { /* attributes: name="value" */
            p += strspn(p, " \n");
            if (*p == '>' || *p == '/')
                break;
            p += strcspn(p, "=\"<> \n");
            if (p[0] != '=' || p[1] != '"')
                return "unquoted attribute";
            const char *v = strchr(p + 2, '"');
            if (!v || memchr(p + 2, '<', (size_t)(v - p - 2)))
                return "bad attribute value";
            p = v + 1;
        }
        bool empty = *p == '/';
        if (empty)
            p++;
        if (*p != '>')
            return "unterminated tag";
        if (close) {
            if (depth == 0 || strlen(stack[depth - 1]) != nl ||
                strncmp(stack[depth - 1], name, nl)) {
                snprintf(why, sizeof(why), "mismatched </%.*s>", (int)nl, name);
                return why;
            }
            depth--;
        } else if (!empty) {
            if (depth == 0 && ++roots > 1)
                return "two root elements";
            if (depth == 64)
                return "too deep";
            snprintf(stack[depth++], 32, "%.*s", (int)nl, name);
        }
        s = p + 1;
    }
    return depth ? "unclosed element" : NULL;
}

static void test_xml_checker_fails(void **state)
{
    assert_null(xml_check("<?xml?>\n<a><b x=\"1\"/>t &amp; u</a>"));
    assert_non_null(xml_check("<?xml?>\n<a><b></a>"));
    assert_non_null(xml_check("<?xml?>\n<a>x & y</a>"));
    assert_non_null(xml_check("<?xml?>\n<a>x > y</a>"));
    assert_non_null(xml_check("<?xml?>\n<a x=1></a>"));
    assert_non_null(xml_check("<?xml?>\n<a x=\"<\"></a>"));
}

static char *svg_of(const struct fleet_result *const *runs, size_t n, const char *const *labels,
                    const char *title)
{
    FILE *f = tmpfile();
    assert_non_null(f);
    assert_int_equal(fleet_out_svg(f, runs, n, labels, title), 0);
    char *s = slurp(f);
    fclose(f);
    const char *why = xml_check(s);
    if (why)
        fail_msg("SVG not well-formed: %s", why);
    return s;
}

/* xmllint, when installed, as a second opinion. */
static void xmllint(const char *svg)
{
    if (access("/usr/bin/xmllint", X_OK) != 0)
        return;
    char path[] = "/tmp/test_fleet_out_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, svg, strlen(svg)), (ssize_t)strlen(svg));
    close(fd);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "/usr/bin/xmllint --noout %s", path);
    int rc = system(cmd);
    unlink(path);
    assert_int_equal(rc, 0);
}

static void test_svg(void **state)
{
    struct fleet_result a = result_iqr(), b = result_watt();
    const struct fleet_result *runs[] = {&a, &b};
    const char *labels[] = {"<&> \"day\"", "bad \xff utf-8 \x01"};
    char *s = svg_of(runs, 2, labels, "IQR & watt <20110303>");
    xmllint(s);
    assert_true(!strncmp(s, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg ", 44));
    assert_has(s, "width=\"900\"");
    assert_lacks(s, "<script");
    assert_lacks(s, "href");
    /* every text escaped; invalid bytes replaced */
    assert_has(s, "<title>IQR &amp; watt &lt;20110303&gt;</title>");
    assert_has(s, ">&lt;&amp;&gt; &quot;day&quot; iqr-mmt-1.5</text>");
    assert_has(s, ">bad ? utf-8 ? watt</text>");
    assert_lacks(s, "<&>");
    /* three panels, one line per run in each, two palette colours */
    assert_int_equal(count(s, "<polyline"), 6);
    assert_int_equal(count(s, "stroke=\"#0072B2\""), 4); /* 3 lines + legend */
    assert_int_equal(count(s, "stroke=\"#D55E00\""), 4);
    assert_has(s, ">active hosts</text>");
    assert_has(s, ">power (kW)</text>");
    assert_has(s, ">SLA violation (% of active host-time)</text>");
    /* a day: time ticks 0..24 every 3 h (not 27 for the 0.1 s offset);
     * hosts up to 120 and power up to 11.46 kW on round axes */
    assert_has(s, ">21</text>");
    assert_has(s, ">24</text>");
    assert_lacks(s, ">27</text>");
    assert_has(s, ">125</text>");
    assert_has(s, ">12.5</text>");
    assert_has(s, ">time (h)</text>");
    /* same input, same bytes */
    char *again = svg_of(runs, 2, labels, "IQR & watt <20110303>");
    assert_string_equal(s, again);
    free(again);
    free(s);
}

static void test_svg_many_and_empty(void **state)
{
    struct fleet_result r[9];
    const struct fleet_result *runs[9];
    for (size_t i = 0; i < 9; i++) {
        r[i] = result_iqr();
        r[i].series = NULL;
        r[i].n_series = 0;
        runs[i] = &r[i];
    }
    r[8] = result_watt();
    char *s = svg_of(runs, 9, NULL, NULL);
    xmllint(s);
    assert_lacks(s, "<title>");
    assert_int_equal(count(s, "<polyline"), 3);           /* runs without a series: legend only */
    assert_int_equal(count(s, "stroke-dasharray"), 4);    /* the ninth run, dashed */
    assert_int_equal(count(s, " iqr-mmt-1.5</text>"), 0); /* no label prefix */
    assert_int_equal(count(s, ">iqr-mmt-1.5</text>"), 8);
    free(s);

    s = svg_of(runs, 0, NULL, "");
    xmllint(s);
    assert_lacks(s, "<polyline");
    free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_json_checker_fails),
        cmocka_unit_test(test_json),
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_markdown),
        cmocka_unit_test(test_csv),
        cmocka_unit_test(test_write_error),
        cmocka_unit_test(test_xml_checker_fails),
        cmocka_unit_test(test_svg),
        cmocka_unit_test(test_svg_many_and_empty),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
