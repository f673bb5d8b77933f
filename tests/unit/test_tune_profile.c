#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* cmocka.h needs stdarg, stddef, stdint and setjmp first */
#include <cmocka.h>

#include "base/cpuset.h"
#include "base/strbuf.h"
#include "base/util.h"
#include "tree.h"
#include "tune/profile.h"

/* ---- helpers ---------------------------------------------------------- */

static char *confdir; /* a fresh CONFDIR per test */

static int setup(void **state)
{
    confdir = tree_new();
    return 0;
}

static int teardown(void **state)
{
    tree_free(confdir);
    confdir = NULL;
    return 0;
}

static void user_profile(const char *name, const char *text)
{
    char rel[256];
    snprintf(rel, sizeof(rel), "profiles.d/%s.conf", name);
    tree_write(confdir, rel, "%s", text);
}

static char *path_of(const char *name)
{
    char *p;
    if (asprintf(&p, "%s/profiles.d/%s.conf", confdir, name) < 0)
        abort();
    return p;
}

static const char *value(const struct profile *p, const char *section, const char *key)
{
    const struct profile_value *v = profile_get(p, section, key);
    return v ? v->value : NULL;
}

static const char *origin(const struct profile *p, const char *section, const char *key)
{
    const struct profile_value *v = profile_get(p, section, key);
    return v ? v->origin : NULL;
}

/* The error one file's text gives, origin "t.conf". */
static void expect_text_error(const char *text, const char *want)
{
    struct profile *p = (struct profile *)0x1;
    char *err = NULL;
    int r = profile_parse_text(text, "t.conf", &p, NULL, NULL, &err);
    if (r != -EINVAL || !err || strcmp(err, want) != 0)
        print_error("text:\n%s\nwant: %s\ngot:  %d %s\n", text, want, r, err ? err : "(none)");
    assert_int_equal(r, -EINVAL);
    assert_non_null(err);
    assert_string_equal(err, want);
    assert_ptr_equal(p, (struct profile *)0x1); /* untouched */
    free(err);
}

/* The error loading NAME gives; WANT has '@' where CONFDIR/profiles.d/ goes. */
static void expect_load_error(const char *name, int want_r, const char *want_tmpl)
{
    char *dir = path_of("");
    dir[strlen(dir) - strlen(".conf")] = '\0'; /* ".../profiles.d/" */
    struct strbuf b = {0};
    for (const char *c = want_tmpl; *c; c++) {
        if (*c == '@')
            strbuf_append(&b, dir);
        else
            strbuf_putc(&b, *c);
    }
    char *want = strbuf_steal(&b);
    struct profile *p = NULL;
    char *err = NULL;
    int r = profile_load(name, confdir, &p, &err);
    if (r != want_r || !err || strcmp(err, want) != 0)
        print_error("want: %d %s\ngot:  %d %s\n", want_r, want, r, err ? err : "(none)");
    assert_int_equal(r, want_r);
    assert_null(p);
    assert_string_equal(err, want);
    free(err);
    free(want);
    free(dir);
}

static struct profile *load_ok(const char *name)
{
    struct profile *p = NULL;
    char *err = NULL;
    int r = profile_load(name, confdir, &p, &err);
    if (r < 0)
        print_error("loading %s: %s\n", name, err);
    assert_int_equal(r, 0);
    assert_null(err);
    assert_non_null(p);
    return p;
}

/* ---- built-ins -------------------------------------------------------- */

static void test_builtins_load(void **state)
{
    size_t n = 0;
    for (; profile_builtin_names[n]; n++) {
        const char *name = profile_builtin_names[n];
        struct profile *p = load_ok(name);
        assert_string_equal(p->name, name);
        char want[64];
        snprintf(want, sizeof(want), "built-in %s", name);
        assert_string_equal(p->origin, want);
        assert_non_null(p->description);
        assert_true(p->n > 0);
        for (size_t i = 0; i < p->n; i++) {
            const struct profile_key *k = profile_key_find(p->v[i].section, p->v[i].key);
            assert_non_null(k);
            char *err = NULL;
            assert_int_equal(profile_value_check(k, p->v[i].value, &err), 0);
            assert_true(strncmp(p->v[i].origin, "built-in ", 9) == 0);
            assert_non_null(strchr(p->v[i].origin, ':'));
            /* no section but profile's own keys leak into values */
            assert_string_not_equal(p->v[i].section, "profile");
        }
        assert_false(profile_has_section(p, "latency")); /* needs a workload name */
        profile_free(p);
    }
    assert_int_equal(n, 4);
    assert_null(profile_builtin_text("nope"));
    assert_null(profile_builtin_text(NULL));
}

static void test_builtin_values(void **state)
{
    struct profile *p = load_ok("latency");
    assert_string_equal(value(p, "cpufreq", "governor"), "performance");
    assert_true(strncmp(origin(p, "cpufreq", "governor"), "built-in performance:", 21) == 0);
    assert_string_equal(value(p, "cpufreq", "epp"), "performance");
    assert_string_equal(value(p, "cpufreq", "boost"), "on");
    assert_string_equal(value(p, "cpufreq", "min_freq"), "max");
    assert_true(strncmp(origin(p, "cpufreq", "min_freq"), "built-in latency:", 17) == 0);
    assert_string_equal(value(p, "cpuidle", "max_latency_us"), "first");
    assert_string_equal(value(p, "devices", "sata_link_pm"), "max_performance");
    assert_string_equal(value(p, "devices", "pcie_aspm"), "performance");
    assert_false(profile_has_section(p, "kernel"));
    assert_null(value(p, "cpufreq", "max_freq"));
    profile_free(p);

    p = load_ok("powersave");
    assert_string_equal(value(p, "cpufreq", "governor"), "schedutil, powersave");
    assert_true(strncmp(origin(p, "cpufreq", "governor"), "built-in balanced:", 18) == 0);
    assert_string_equal(value(p, "cpufreq", "epp"), "balance_power");
    assert_true(strncmp(origin(p, "cpufreq", "epp"), "built-in powersave:", 19) == 0);
    assert_string_equal(value(p, "cpufreq", "boost"), "off");
    assert_string_equal(value(p, "cpufreq", "min_freq"), "min");
    assert_string_equal(value(p, "cpuidle", "max_latency_us"), "none");
    assert_string_equal(value(p, "devices", "runtime_pm"), "auto");
    assert_string_equal(value(p, "devices", "autosuspend_delay_ms"), "1000");
    assert_string_equal(value(p, "devices", "sata_link_pm"), "med_power_with_dipm");
    assert_string_equal(value(p, "devices", "pcie_aspm"), "powersupersave");
    assert_string_equal(value(p, "kernel", "nmi_watchdog"), "0");
    assert_string_equal(value(p, "kernel", "dirty_writeback_centisecs"), "1500");
    /* first-set order: balanced's governor comes before powersave's own keys */
    assert_string_equal(p->v[0].key, "governor");
    profile_free(p);

    p = load_ok("balanced");
    assert_string_equal(value(p, "cpufreq", "epp"), "balance_performance");
    assert_string_equal(value(p, "devices", "autosuspend_delay_ms"), "2000");
    assert_string_equal(value(p, "devices", "pcie_aspm"), "default");
    assert_string_equal(value(p, "cpufreq", "max_freq"), "max");
    profile_free(p);
}

static void test_list(void **state)
{
    char **v;
    size_t n;
    assert_int_equal(profile_list(confdir, &v, &n), 0); /* no profiles.d at all */
    assert_int_equal(n, 4);
    assert_string_equal(v[0], "balanced");
    assert_string_equal(v[1], "latency");
    assert_string_equal(v[2], "performance");
    assert_string_equal(v[3], "powersave");
    profile_names_free(v, n);

    user_profile("web", "[cpufreq]\ngovernor = performance\n");
    user_profile("balanced", "[profile]\ninclude = balanced\n");
    user_profile("Bad", "");     /* not a valid name: left out */
    user_profile(".hidden", ""); /* neither */
    tree_write(confdir, "profiles.d/notes.txt", "x");
    char *d = path_of("dir");
    tree_mkdirs(d);
    free(d);
    assert_int_equal(profile_list(confdir, &v, &n), 0);
    assert_int_equal(n, 5);
    const char *want[] = {"balanced", "latency", "performance", "powersave", "web"};
    for (size_t i = 0; i < n; i++)
        assert_string_equal(v[i], want[i]);
    profile_names_free(v, n);
}

/* ---- includes, overrides, removal, shadowing -------------------------- */

static void test_include_order(void **state)
{
    user_profile("base1", "[cpufreq]\n"
                          "governor = powersave\n"
                          "epp = power\n"
                          "boost = off\n");
    user_profile("base2", "[cpufreq]\n"
                          "governor = ondemand\n"
                          "[kernel]\n"
                          "nmi_watchdog = 1\n");
    user_profile("web", "[profile]\n"
                        "description = web front ends\n"
                        "include = base1, base2\n"
                        "[cpufreq]\n"
                        "epp =\n"
                        "boost = on\n"
                        "[latency]\n"
                        "workload = port:6379\n"
                        "latency_us = 20\n");
    struct profile *p = load_ok("web");
    _cleanup_free_ char *web = path_of("web"), *b1 = path_of("base1"), *b2 = path_of("base2");
    char want[4200];
    assert_string_equal(p->description, "web front ends");
    assert_string_equal(p->origin, web);
    /* the later include wins over the earlier one */
    assert_string_equal(value(p, "cpufreq", "governor"), "ondemand");
    snprintf(want, sizeof(want), "%s:2", b2);
    assert_string_equal(origin(p, "cpufreq", "governor"), want);
    /* the file wins over its includes */
    assert_string_equal(value(p, "cpufreq", "boost"), "on");
    snprintf(want, sizeof(want), "%s:6", web);
    assert_string_equal(origin(p, "cpufreq", "boost"), want);
    /* an empty value removes the inherited one */
    assert_null(profile_get(p, "cpufreq", "epp"));
    assert_string_equal(value(p, "kernel", "nmi_watchdog"), "1");
    assert_string_equal(value(p, "latency", "workload"), "port:6379");
    assert_true(profile_has_section(p, "latency"));
    /* first-set order: governor (base1), boost (base1), nmi_watchdog, workload, latency_us */
    assert_int_equal(p->n, 5);
    assert_string_equal(p->v[0].key, "governor");
    assert_string_equal(p->v[1].key, "boost");
    assert_string_equal(p->v[2].key, "nmi_watchdog");
    assert_string_equal(p->v[3].key, "workload");
    assert_string_equal(p->v[4].key, "latency_us");
    snprintf(want, sizeof(want), "%s:3", b1); /* boost's first set, though web's value won */
    assert_string_not_equal(origin(p, "cpufreq", "boost"), want);
    profile_free(p);

    /* a diamond is no cycle */
    user_profile("left", "[profile]\ninclude = base1\n");
    user_profile("right", "[profile]\ninclude = base1\n[cpufreq]\nboost = on\n");
    user_profile("top", "[profile]\ninclude = left, right\n");
    p = load_ok("top");
    assert_string_equal(value(p, "cpufreq", "boost"), "on");
    assert_null(p->description); /* its own only */
    profile_free(p);
}

static void test_duplicates_and_syntax(void **state)
{
    struct profile *p;
    char **inc;
    size_t ninc;
    char *err = NULL;
    const char *text = "\xEF\xBB\xBF# a comment\n"
                       "; another\n"
                       "[profile]\n"
                       "include = balanced,\n"
                       "    my-base\n"
                       "description = line one\n"
                       "  line two\n"
                       "[cpufreq]\n"
                       "governor = schedutil,\n"
                       "\tpowersave ; the fallback\n"
                       "boost = on\n"
                       "boost = off\n"
                       "  [kernel]\n" /* not indented after a header: a section */
                       "[kernel]\n"
                       "  nmi_watchdog = 0\n"
                       "dirty_writeback_centisecs=\n"
                       "[cpuidle]\r\n"
                       "max_latency_us : 20\r\n"
                       "cpus = 0-1, 3\n";
    assert_int_equal(profile_parse_text(text, "t.conf", &p, &inc, &ninc, &err), -EINVAL);
    /* "  [kernel]" right after a key is read by inih as more of 'boost' */
    assert_string_equal(err, "t.conf:13: indented line is read as more of 'boost' (line 12): "
                             "remove the indentation");
    free(err);
    err = NULL;

    char *fixed = strdup(text);
    char *at = strstr(fixed, "  [kernel]\n");
    memmove(at, at + 11, strlen(at + 11) + 1);
    assert_int_equal(profile_parse_text(fixed, "t.conf", &p, &inc, &ninc, &err), 0);
    free(fixed);
    assert_int_equal(ninc, 2);
    assert_string_equal(inc[0], "balanced");
    assert_string_equal(inc[1], "my-base");
    profile_names_free(inc, ninc);
    assert_string_equal(p->description, "line one line two");
    assert_string_equal(value(p, "cpufreq", "governor"), "schedutil, powersave");
    assert_string_equal(origin(p, "cpufreq", "governor"), "t.conf:9");
    /* the later line wins */
    assert_string_equal(value(p, "cpufreq", "boost"), "off");
    assert_string_equal(origin(p, "cpufreq", "boost"), "t.conf:12");
    assert_string_equal(value(p, "kernel", "nmi_watchdog"), "0");
    assert_string_equal(value(p, "kernel", "dirty_writeback_centisecs"), ""); /* a removal */
    assert_string_equal(value(p, "cpuidle", "max_latency_us"), "20");
    assert_string_equal(origin(p, "cpuidle", "max_latency_us"), "t.conf:17");
    assert_string_equal(value(p, "cpuidle", "cpus"), "0-1,3"); /* as the kernel writes it */
    assert_int_equal(p->n, 6);
    profile_free(p);
}

static void test_shadowing(void **state)
{
    /* a user balanced that builds on the built-in one */
    user_profile("balanced", "[profile]\n"
                             "description = ours\n"
                             "include = balanced\n"
                             "[cpufreq]\n"
                             "boost = off\n"
                             "governor = performance\n");
    struct profile *p = load_ok("balanced");
    assert_string_equal(p->description, "ours");
    assert_string_equal(value(p, "cpufreq", "boost"), "off");
    assert_string_equal(value(p, "cpufreq", "epp"), "balance_performance");
    assert_true(strncmp(origin(p, "cpufreq", "epp"), "built-in balanced:", 18) == 0);
    profile_free(p);

    /* the built-in powersave still means the built-in balanced */
    p = load_ok("powersave");
    assert_string_equal(value(p, "cpufreq", "governor"), "schedutil, powersave");
    assert_string_equal(value(p, "cpufreq", "boost"), "off");
    profile_free(p);

    /* a user file that includes the shadowed name gets the user's */
    user_profile("web", "[profile]\ninclude = balanced\n");
    p = load_ok("web");
    assert_string_equal(value(p, "cpufreq", "governor"), "performance");
    profile_free(p);

    /* shadowing without the self-include: nothing inherited */
    user_profile("latency", "[cpufreq]\ngovernor = userspace\n");
    p = load_ok("latency");
    assert_int_equal(p->n, 1);
    assert_null(p->description);
    profile_free(p);
}

/* ---- bad input: one file ---------------------------------------------- */

/* boost and nmi_watchdog take the one boolean vocabulary of every
 * config file (docs/config.md), kept as written for the plan. */
static void test_booleans(void **state)
{
    static const char *const words[] = {"yes", "No", "TRUE", "false", "on", "OFF", "1", "0"};
    for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++) {
        _cleanup_free_ char *text =
            xasprintf("[cpufreq]\nboost = %s\n[kernel]\nnmi_watchdog = %s\n", words[i], words[i]);
        struct profile *p = NULL;
        char *err = NULL;
        if (profile_parse_text(text, "t.conf", &p, NULL, NULL, &err) < 0)
            fail_msg("%s: %s", words[i], err);
        assert_string_equal(value(p, "cpufreq", "boost"), words[i]);
        assert_string_equal(value(p, "kernel", "nmi_watchdog"), words[i]);
        profile_free(p);
    }
}

static void test_text_errors(void **state)
{
    expect_text_error("[cpufreq]\ngovenor = performance\n",
                      "t.conf:2: unknown key 'govenor' in [cpufreq]: did you mean 'governor'?");
    expect_text_error("[cpufreq]\nspeed = 3\n",
                      "t.conf:2: unknown key 'speed' in [cpufreq] (want governor, epp, boost, "
                      "min_freq, max_freq or cpus)");
    expect_text_error("[devices]\ngovernor = performance\n",
                      "t.conf:2: 'governor' belongs in [cpufreq], not [devices]");
    expect_text_error("# x\n[cpufrq]\n", "t.conf:2: unknown section [cpufrq]: did you mean "
                                         "[cpufreq]?");
    expect_text_error("[main]\nsummary = x\n",
                      "t.conf:1: unknown section [main] (want profile, cpufreq, cpuidle, pm_qos, "
                      "devices, kernel, gpu, latency or pack)");
    expect_text_error("governor = performance\n",
                      "t.conf:1: 'governor' is outside a section (put it under [cpufreq])");
    expect_text_error("[cpufreq]\ngovernor = fast\n",
                      "t.conf:2: governor 'fast' is not a known value (want performance, "
                      "powersave, schedutil, ondemand, conservative or userspace)");
    expect_text_error("[cpufreq]\n\ngovernor = schedutil, perfomance\n",
                      "t.conf:3: governor 'perfomance' is not a known value: did you mean "
                      "'performance'? (want performance, powersave, schedutil, ondemand, "
                      "conservative or userspace)");
    expect_text_error("[cpufreq]\ngovernor = performance # fast\n",
                      "t.conf:2: governor 'performance # fast' is not a known value (want "
                      "performance, powersave, schedutil, ondemand, conservative or userspace)");
    expect_text_error("[cpufreq]\ngovernor = performance, performance\n",
                      "t.conf:2: governor lists 'performance' twice");
    expect_text_error("[cpufreq]\ngovernor = schedutil,,powersave\n",
                      "t.conf:2: governor 'schedutil,,powersave' has an empty item (want words "
                      "separated by commas)");
    expect_text_error("[cpufreq]\nboost = on, off\n",
                      "t.conf:2: boost 'on, off' is not a boolean (want yes/no, true/false, "
                      "on/off or 1/0)");
    expect_text_error("[kernel]\nnmi_watchdog = 2\n",
                      "t.conf:2: nmi_watchdog '2' is not a boolean (want yes/no, true/false, "
                      "on/off or 1/0)");
    expect_text_error("[devices]\nautosuspend_delay_ms = 5s\n",
                      "t.conf:2: autosuspend_delay_ms '5s' is not an integer (want 0..600000)");
    expect_text_error("[kernel]\ndirty_writeback_centisecs = -1\n",
                      "t.conf:2: dirty_writeback_centisecs -1 is out of range (want 0..360000)");
    expect_text_error("[latency]\nbusy_cpu_pct = lots\n",
                      "t.conf:2: busy_cpu_pct 'lots' is not a number (want 0..100000)");
    expect_text_error("[latency]\nidle_after_s = inf\n",
                      "t.conf:2: idle_after_s 'inf' is not a number (want 0..86400)");
    expect_text_error("[latency]\nbusy_after_s = 3600.5\n",
                      "t.conf:2: busy_after_s 3600.5 is out of range (want 0..3600)");
    expect_text_error("[cpufreq]\nmin_freq = 3 THz\n",
                      "t.conf:2: min_freq '3 THz' is not a frequency (want min, max, N kHz, N "
                      "MHz, N GHz or N%)");
    expect_text_error("[cpufreq]\nmax_freq = 0\n",
                      "t.conf:2: max_freq '0' is out of range (want 1 kHz..100 GHz, or 1..100%)");
    expect_text_error("[cpufreq]\nmax_freq = 150%\n",
                      "t.conf:2: max_freq '150%' is out of range (want 1 kHz..100 GHz, or "
                      "1..100%)");
    expect_text_error("[cpuidle]\nmax_latency_us = n/a\n",
                      "t.conf:2: max_latency_us 'n/a' is not a latency (want µs as an integer, "
                      "or none or first)");
    expect_text_error("[pm_qos]\nresume_latency_us = 0\n",
                      "t.conf:2: resume_latency_us 0 is ambiguous (the kernel file reads 0 as no "
                      "constraint): write 'none' for no constraint or 'n/a' for no latency at "
                      "all");
    expect_text_error("[pm_qos]\nresume_latency_us = first\n",
                      "t.conf:2: resume_latency_us 'first' is not a latency (want µs as an "
                      "integer, or none or n/a)");
    expect_text_error("[cpuidle]\nmax_latency_us = 2000000001\n",
                      "t.conf:2: max_latency_us 2000000001 is out of range (want 0..2000000000 "
                      "µs, or none or first)");
    expect_text_error("[cpuidle]\ncpus = 0-x\n",
                      "t.conf:2: cpus '0-x' is not a CPU list (want all, or ids like 0-3,8)");
    expect_text_error("[pm_qos]\ncpus = 3-1\n",
                      "t.conf:2: cpus '3-1' has a reversed range or an id above 8191");
    expect_text_error("[latency]\nworkload = redis\n",
                      "t.conf:2: workload 'redis': want cgroup:PATH, process:NAME or port:N");
    expect_text_error("[latency]\nworkload = process:a-very-long-name\n",
                      "t.conf:2: workload 'process:a-very-long-name': a process name (the "
                      "kernel's comm) is 1 to 15 characters without '/'");
    expect_text_error("[latency]\nworkload = port:+80\n",
                      "t.conf:2: workload 'port:+80': the port is an integer in 1..65535");
    expect_text_error("[kernel]\ndirty_writeback_centisecs = +1\n",
                      "t.conf:2: dirty_writeback_centisecs '+1' is not an integer (want "
                      "0..360000)");
    expect_text_error("[latency]\nworkload = port:65536\n",
                      "t.conf:2: workload 'port:65536': the port is an integer in 1..65535");
    expect_text_error("[latency]\nworkload = cgroup:system.slice\n",
                      "t.conf:2: workload 'cgroup:system.slice': the cgroup path starts with "
                      "'/' below the cgroup2 mount (cgroup:/system.slice/redis.service)");
    expect_text_error("[latency]\nworkload = cgroup:/a/../b\n",
                      "t.conf:2: workload 'cgroup:/a/../b': the cgroup path has an empty, '.' "
                      "or '..' component");
    expect_text_error("[profile]\ninclude = balanced, ../etc/x\n",
                      "t.conf:2: include: '../etc/x' is not a profile name (want a-z, 0-9, '_', "
                      "'.', '-', at most 64, no '/' or '..')");
    expect_text_error("[profile]\ninclude = a, b, a\n", "t.conf:2: include names 'a' twice");
    expect_text_error("[cpufreq]\nthis line has no equals sign\n",
                      "t.conf:2: 'this line has no equals sign' is not 'key = value', a "
                      "[section] or a comment");
    expect_text_error("[cpufreq\ngovernor = performance\n",
                      "t.conf:1: section header without a closing ']'");
    expect_text_error("[cpufreq]\n= performance\n", "t.conf:2: a line with no key before '='");
    expect_text_error("[cpufreq]\nboost = on\n  off\n",
                      "t.conf:3: 'boost' takes one value, and this indented line would continue "
                      "it (line 2): remove the indentation or join the lines");
    expect_text_error("[cpufreq]\ngovernor = performance\n    epp = power\n",
                      "t.conf:3: indented line is read as more of 'governor' (line 2): remove "
                      "the indentation");

    /* a 300-character line: inih would cut it in two and misnumber the rest */
    char longline[400] = "[profile]\ndescription = ";
    memset(longline + strlen(longline), 'x', 300);
    expect_text_error(longline, "t.conf:2: line is longer than 199 characters");

    /* the first error in file order is the one reported */
    expect_text_error("[cpufreq]\ngovernor = fast\nbogus = 1\n",
                      "t.conf:2: governor 'fast' is not a known value (want performance, "
                      "powersave, schedutil, ondemand, conservative or userspace)");
    expect_text_error("[cpufreq]\nbroken line\ngovernor = fast\n",
                      "t.conf:2: 'broken line' is not 'key = value', a [section] or a comment");
    /* an overridden value is checked too */
    expect_text_error("[kernel]\nnmi_watchdog = 7\nnmi_watchdog = 1\n",
                      "t.conf:2: nmi_watchdog '7' is not a boolean (want yes/no, true/false, "
                      "on/off or 1/0)");
}

/* ---- bad input: loading ----------------------------------------------- */

static void test_load_errors(void **state)
{
    expect_load_error("latncy", -ENOENT,
                      "no profile 'latncy': not built in, and no @latncy.conf (did you mean "
                      "'latency'?)");
    expect_load_error("web.conf", -ENOENT,
                      "no profile 'web.conf': not built in, and no @web.conf.conf (did you "
                      "mean 'web'?)");
    expect_load_error("../etc/passwd", -EINVAL,
                      "'../etc/passwd' is not a profile name (want a-z, 0-9, '_', '.', '-', at "
                      "most 64, no '/' or '..')");
    expect_load_error("a/b", -EINVAL,
                      "'a/b' is not a profile name (want a-z, 0-9, '_', '.', '-', at most 64, no "
                      "'/' or '..')");

    user_profile("a", "# a\n[profile]\ninclude = b\n");
    user_profile("b", "[profile]\ninclude = performance, a\n");
    expect_load_error("a", -ELOOP, "@b.conf:2: include cycle a -> b -> a");

    user_profile("self", "[profile]\ninclude = self\n");
    expect_load_error("self", -ENOENT,
                      "@self.conf:2: there is no built-in profile 'self' (an include of a "
                      "profile's own name means the built-in it shadows)");

    user_profile("missing", "[profile]\ninclude = balanced, nope\n");
    expect_load_error("missing", -ENOENT,
                      "@missing.conf:2: no profile 'nope': not built in, and no @nope.conf");

    /* p0 -> p1 -> ... -> p9: nine levels of includes below p0 */
    for (int i = 0; i < 10; i++) {
        char name[8], text[64];
        snprintf(name, sizeof(name), "p%d", i);
        snprintf(text, sizeof(text), i < 9 ? "[profile]\ninclude = p%d\n" : "[kernel]\n", i + 1);
        user_profile(name, text);
    }
    expect_load_error("p0", -ELOOP,
                      "@p8.conf:2: includes nest deeper than 8 levels (p0 -> p1 -> p2 -> p3 -> "
                      "p4 -> p5 -> p6 -> p7 -> p8 -> p9)");
    struct profile *p = load_ok("p1"); /* eight levels are fine */
    profile_free(p);

    user_profile("guard", "[profile]\ninclude = balanced\n\n[latency]\nworkload = port:6379\n");
    expect_load_error("guard", -EINVAL,
                      "@guard.conf:4: [latency] needs latency_us = the limit in µs to hold "
                      "while the workload is busy");
    user_profile("guard2", "[profile]\ninclude = web6379\n[latency]\nworkload =\n");
    user_profile("web6379", "[latency]\nworkload = port:6379\nlatency_us = 0\n");
    expect_load_error("guard2", -EINVAL,
                      "@guard2.conf:3: [latency] needs workload = cgroup:PATH, process:NAME or "
                      "port:N");

    user_profile("freq", "[profile]\ninclude = balanced\n[cpufreq]\nmin_freq = 3 GHz\n"
                         "max_freq = 2000 MHz\n");
    expect_load_error("freq", -EINVAL,
                      "@freq.conf:4: min_freq 3 GHz is above max_freq 2000 MHz (set at "
                      "@freq.conf:5)");
    user_profile("freq", "[profile]\ninclude = latency\n[cpufreq]\nmax_freq = 80%\n");
    expect_load_error("freq", -EINVAL,
                      "built-in latency:12: min_freq max is above max_freq 80% (set at "
                      "@freq.conf:4)");

    user_profile("syntax", "[profile]\ninclude = balanced\n[cpufreq]\ngovenor = x\n");
    expect_load_error("syntax", -EINVAL,
                      "@syntax.conf:4: unknown key 'govenor' in [cpufreq]: did you mean "
                      "'governor'?");
    user_profile("inner", "[profile]\ninclude = syntax\n");
    expect_load_error("inner", -EINVAL,
                      "@syntax.conf:4: unknown key 'govenor' in [cpufreq]: did you mean "
                      "'governor'?");
}

static void test_file_errors(void **state)
{
    /* a NUL byte */
    char *path = path_of("nul");
    user_profile("empty", ""); /* makes profiles.d */
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fwrite("[cpufreq]\n\0governor = x\n", 1, 25, f);
    fclose(f);
    expect_load_error("nul", -EINVAL, "@nul.conf has a NUL byte at offset 10: not a text file");
    free(path);

    /* over 1 MiB */
    path = path_of("big");
    f = fopen(path, "w");
    assert_non_null(f);
    for (int i = 0; i < (1 << 20) / 16 + 1; i++)
        fputs("# padding line\n\n", f);
    fclose(f);
    struct profile *p = NULL;
    char *err = NULL;
    assert_int_equal(profile_load("big", confdir, &p, &err), -EFBIG);
    assert_non_null(strstr(err, "big.conf is larger than 1 MiB: not a profile"));
    free(err);
    free(path);

    /* not a regular file */
    path = path_of("dir");
    tree_mkdirs(path);
    free(path);
    expect_load_error("dir", -EINVAL, "@dir.conf is not a regular file");
}

/* ---- typed values ----------------------------------------------------- */

static void test_typed(void **state)
{
    struct profile_freq f;
    assert_int_equal(profile_parse_freq("2.4 GHz", &f), 0);
    assert_int_equal(f.kind, PROFILE_FREQ_KHZ);
    assert_true(f.value == 2400000);
    assert_int_equal(profile_parse_freq("800MHz", &f), 0);
    assert_true(f.value == 800000);
    assert_int_equal(profile_parse_freq("1500000", &f), 0);
    assert_true(f.value == 1500000);
    assert_int_equal(profile_parse_freq("1500000 kHz", &f), 0);
    assert_int_equal(profile_parse_freq("50%", &f), 0);
    assert_int_equal(f.kind, PROFILE_FREQ_PCT);
    assert_true(f.value == 50);
    assert_int_equal(profile_parse_freq("max", &f), 0);
    assert_int_equal(f.kind, PROFILE_FREQ_MAX);
    f.value = 7;
    assert_int_equal(profile_parse_freq("1.5", &f), -EINVAL); /* fractional kHz */
    assert_int_equal(profile_parse_freq("-1 GHz", &f), -EINVAL);
    assert_int_equal(profile_parse_freq("1e6", &f), -EINVAL);
    assert_int_equal(profile_parse_freq("200 GHz", &f), -ERANGE);
    assert_true(f.value == 7); /* untouched */

    /* [gpu] gpus: cards, NVML indexes and PCI addresses, each once */
    char **ids = NULL;
    size_t nids = 0;
    assert_int_equal(profile_parse_gpus("all", &ids, &nids), 1);
    assert_int_equal(profile_parse_gpus("card0, nvml12 ,0000:03:00.0", &ids, &nids), 0);
    assert_int_equal(nids, 3);
    assert_string_equal(ids[1], "nvml12");
    assert_string_equal(ids[2], "0000:03:00.0");
    profile_names_free(ids, nids);
    static const char *const bad_gpus[] = {"card",
                                           "card01",
                                           "eth0",
                                           "card0,card0",
                                           "card0,,card1",
                                           "0000:03:00.8",
                                           "0000:03:00.0a",
                                           "0000:03:00",
                                           "0000:0G:00.0",
                                           "nvml-1",
                                           "",
                                           "ALL"};
    for (size_t i = 0; i < ARRAY_SIZE(bad_gpus); i++)
        if (profile_parse_gpus(bad_gpus[i], &ids, &nids) != -EINVAL)
            fail_msg("gpus '%s' accepted", bad_gpus[i]);

    struct profile_latency l;
    assert_int_equal(profile_parse_latency("20", &l), 0);
    assert_int_equal(l.kind, PROFILE_LATENCY_US);
    assert_int_equal(l.us, 20);
    assert_int_equal(profile_parse_latency("n/a", &l), 0);
    assert_int_equal(l.kind, PROFILE_LATENCY_NA);
    assert_int_equal(profile_parse_latency("first", &l), 0);
    assert_int_equal(l.kind, PROFILE_LATENCY_FIRST);
    assert_int_equal(profile_parse_latency("none", &l), 0);
    assert_int_equal(l.kind, PROFILE_LATENCY_NONE);
    assert_int_equal(profile_parse_latency("-3", &l), -ERANGE);
    assert_int_equal(profile_parse_latency("20us", &l), -EINVAL);

    struct profile_workload w;
    assert_int_equal(profile_parse_workload("port:6379", &w), 0);
    assert_int_equal(w.kind, PROFILE_WORKLOAD_PORT);
    assert_int_equal(w.port, 6379);
    assert_int_equal(profile_parse_workload("process:redis-server", &w), 0);
    assert_int_equal(w.kind, PROFILE_WORKLOAD_PROCESS);
    assert_string_equal(w.arg, "redis-server");
    assert_int_equal(profile_parse_workload("cgroup:/system.slice/redis.service", &w), 0);
    assert_int_equal(w.kind, PROFILE_WORKLOAD_CGROUP);
    assert_string_equal(w.arg, "/system.slice/redis.service");
    assert_int_equal(profile_parse_workload("port:", &w), -EINVAL);
    assert_int_equal(profile_parse_workload("process:", &w), -EINVAL);

    struct cpuset set;
    assert_int_equal(profile_parse_cpus("all", &set), 1);
    assert_int_equal(profile_parse_cpus("0-3, 8", &set), 0);
    assert_int_equal(cpuset_count(&set), 5);
    cpuset_free(&set);
    assert_int_equal(profile_parse_cpus("0,,1", &set), -EINVAL);
    assert_int_equal(profile_parse_cpus("9000", &set), -ERANGE);

    char **v;
    size_t n;
    assert_int_equal(profile_split_list(" a , b,c ", &v, &n), 0);
    assert_int_equal(n, 3);
    assert_string_equal(v[0], "a");
    assert_string_equal(v[2], "c");
    profile_names_free(v, n);
    assert_int_equal(profile_split_list("a,", &v, &n), -EINVAL);

    assert_true(profile_name_ok("web-2.v1_x"));
    assert_false(profile_name_ok("Web"));
    assert_false(profile_name_ok("-web"));
    assert_false(profile_name_ok("a..b"));
    assert_false(profile_name_ok(""));
    assert_false(profile_name_ok(NULL));
    char longname[70];
    memset(longname, 'a', 65);
    longname[65] = '\0';
    assert_false(profile_name_ok(longname));
    longname[64] = '\0';
    assert_true(profile_name_ok(longname));
}

/* The user example of docs/tune-profiles.md, as written there. */
static void test_doc_example(void **state)
{
    user_profile("redis",
                 "# /etc/watt/profiles.d/redis.conf\n"
                 "[profile]\n"
                 "description = balanced, C-states held shallow while redis has clients\n"
                 "include = balanced\n"
                 "\n"
                 "[latency]\n"
                 "workload = port:6379\n"
                 "latency_us = 20            ; hold /dev/cpu_dma_latency at 20 us while busy\n"
                 "busy_connections = 4       ; busy at 4 established connections\n"
                 "busy_after_s = 2           ; for 2 s before holding\n"
                 "idle_after_s = 30          ; released after 30 s idle\n");
    struct profile *p = load_ok("redis");
    assert_string_equal(value(p, "latency", "workload"), "port:6379");
    assert_string_equal(value(p, "latency", "latency_us"), "20");
    assert_string_equal(value(p, "latency", "idle_after_s"), "30");
    assert_string_equal(value(p, "cpuidle", "max_latency_us"), "none"); /* from balanced */
    struct profile_workload w;
    assert_int_equal(profile_parse_workload(value(p, "latency", "workload"), &w), 0);
    assert_int_equal(w.port, 6379);
    profile_free(p);

    user_profile("balanced", "# /etc/watt/profiles.d/balanced.conf\n"
                             "[profile]\n"
                             "include = balanced\n"
                             "[devices]\n"
                             "autosuspend_delay_ms = 5000\n");
    p = load_ok("balanced");
    assert_string_equal(value(p, "devices", "autosuspend_delay_ms"), "5000");
    assert_string_equal(value(p, "devices", "runtime_pm"), "auto");
    profile_free(p);
    p = load_ok("redis"); /* a user profile's include of balanced means the user's */
    assert_string_equal(value(p, "devices", "autosuspend_delay_ms"), "5000");
    profile_free(p);
}

static void test_key_table(void **state)
{
    /* every key is findable, every section key's help is there, words lists end */
    for (size_t i = 0; i < profile_nkeys; i++) {
        const struct profile_key *k = &profile_keys[i];
        assert_ptr_equal(profile_key_find(k->section, k->key), k);
        assert_non_null(k->help);
        if (k->kind == PROFILE_KEY_WORDS || k->kind == PROFILE_KEY_LATENCY)
            assert_non_null(k->words);
    }
    assert_null(profile_key_find("cpufreq", "nope"));
    assert_null(profile_key_find("nope", "governor"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_builtins_load, setup, teardown),
        cmocka_unit_test_setup_teardown(test_builtin_values, setup, teardown),
        cmocka_unit_test_setup_teardown(test_list, setup, teardown),
        cmocka_unit_test_setup_teardown(test_include_order, setup, teardown),
        cmocka_unit_test(test_duplicates_and_syntax),
        cmocka_unit_test_setup_teardown(test_shadowing, setup, teardown),
        cmocka_unit_test(test_text_errors),
        cmocka_unit_test(test_booleans),
        cmocka_unit_test_setup_teardown(test_load_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_file_errors, setup, teardown),
        cmocka_unit_test(test_typed),
        cmocka_unit_test_setup_teardown(test_doc_example, setup, teardown),
        cmocka_unit_test(test_key_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
