/* fleet.ini's grammar (docs/config.md): one inih pass over every section,
 * errors naming file:line and the key, booleans through parse_bool(),
 * inih's inline comments, lines of any length, indentation ignored. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* cmocka.h needs stdarg, stddef, stdint and setjmp first */
#include <cmocka.h>

#include "base/strbuf.h"
#include "base/util.h"
#include "fleet/control/site.h"

/* A fleet.ini that needs nothing from outside: the libvirt engine with a
 * URI per host, no power engine. */
#define CONTROLLER "[controller]\npower = none\n"
#define HOST_A     "[host a]\ntype = g5\nuri = qemu:///system\n"

static void parse_ok(const char *text, struct site *s)
{
    struct fleet_error err = {{0}};
    if (site_parse(text, strlen(text), "f.ini", s, &err) < 0)
        fail_msg("refused: %s\n--- text:\n%s", err.msg, text);
}

/* TEXT is refused with exactly WANT. */
static void parse_bad(const char *text, const char *want)
{
    struct site s;
    struct fleet_error err = {{0}};
    int r = site_parse(text, strlen(text), "f.ini", &s, &err);
    if (r != -EINVAL || strcmp(err.msg, want) != 0)
        fail_msg("--- text:\n%s--- want: %s\n--- got:  %d %s", text, want, r, err.msg);
}

/* destroy_stale_copy takes the one boolean vocabulary. */
static void test_booleans(void **state)
{
    static const struct {
        const char *word;
        bool value;
    } words[] = {{"yes", true}, {"No", false},  {"TRUE", true}, {"false", false},
                 {"on", true},  {"OFF", false}, {"1", true},    {"0", false}};
    (void)state;
    for (size_t i = 0; i < ARRAY_SIZE(words); i++) {
        _cleanup_free_ char *text =
            xasprintf(CONTROLLER "destroy_stale_copy = %s\n" HOST_A, words[i].word);
        struct site s;
        parse_ok(text, &s);
        assert_int_equal(s.destroy_stale_copy, words[i].value);
        site_free(&s);
    }
    parse_bad(CONTROLLER "destroy_stale_copy = maybe\n" HOST_A,
              "f.ini line 3: destroy_stale_copy = 'maybe': want yes/no, true/false, on/off or 1/0");
}

/* Every section's errors name the file, the line and the key. */
static void test_errors_name_line(void **state)
{
    static const struct {
        const char *text, *want;
    } bad[] = {
        {CONTROLLER "interval_s = soon\n" HOST_A,
         "f.ini line 3: interval_s = 'soon': want a number 1..86400"},
        {CONTROLLER "bogus = 1\n" HOST_A, NULL}, /* the long list of keys: checked by prefix */
        {CONTROLLER "[type big]\ncores = 2\nmips_per_core = fast\n" HOST_A,
         "f.ini line 5: mips_per_core = 'fast': want a number 0.001..1e+09"},
        {CONTROLLER "[type big]\nbase = g5\nwatts = 3\n" HOST_A,
         "f.ini line 5: unknown key 'watts' in [type big] (want base, cores, mips_per_core, "
         "ram_mb, bw_mbit, power_w, off_w, boot_s, boot_j)"},
        {CONTROLLER "[type big]\ncores = 2\n" HOST_A,
         "f.ini line 3: [type big] needs cores, mips_per_core, ram_mb and power_w (or base = "
         "g4|g5)"},
        {CONTROLLER "[type t]\nbase = g4\n[type T]\nbase = g5\n" HOST_A,
         "f.ini line 5: type 'T' is already defined on line 3"},
        {CONTROLLER "[type a-name-longer-than-forty-characters-is-refused]\n" HOST_A,
         "f.ini line 3: type name 'a-name-longer-than-forty-characters-is-refused' must be "
         "1..40 letters, digits, '_', '-' or '.'"},
        {CONTROLLER HOST_A "bmc_cipher = 99\n", NULL},
        {CONTROLLER HOST_A "colour = blue\n", NULL},
        {CONTROLLER HOST_A "[pin]\nvm1 = h9\n", "f.ini line 7: [pin] vm1 = h9: no [host h9]"},
        {CONTROLLER HOST_A "[anti-affinity]\nweb = web1\n",
         "f.ini line 7: [anti-affinity] web = web1: want two VMs or more (a group of one keeps "
         "nothing apart)"},
        {CONTROLLER HOST_A "[nowhere]\n", NULL},
        {"interval_s = 3\n" CONTROLLER HOST_A, "f.ini line 1: 'interval_s' before any section"},
        {CONTROLLER "just words\n" HOST_A, "f.ini line 3: want key = value or [section]"},
        {CONTROLLER "[host b\n", "f.ini line 3: section header without ']'"},
        {CONTROLLER "= 3\n" HOST_A, "f.ini line 3: a key is missing before '='"},
        /* the first error in the file wins, inih's own among them */
        {CONTROLLER "just words\ninterval_s = soon\n" HOST_A,
         "f.ini line 3: want key = value or [section]"},
        {CONTROLLER "interval_s = soon\njust words\n" HOST_A,
         "f.ini line 3: interval_s = 'soon': want a number 1..86400"},
    };
    static const char *const prefix[] = {
        [1] = "f.ini line 3: unknown key 'bogus' in [controller] (want interval_s, ",
        [7] = "f.ini line 6: ",
        [8] = "f.ini line 6: unknown key 'colour' in [host a] (want type, uri, ",
        [11] = "f.ini line 6: unknown section [nowhere] (want [controller], ",
    };
    (void)state;
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        if (bad[i].want) {
            parse_bad(bad[i].text, bad[i].want);
            continue;
        }
        struct site s;
        struct fleet_error err = {{0}};
        assert_int_equal(site_parse(bad[i].text, strlen(bad[i].text), "f.ini", &s, &err), -EINVAL);
        if (strncmp(err.msg, prefix[i], strlen(prefix[i])) != 0)
            fail_msg("--- text:\n%s--- want: %s...\n--- got:  %s", bad[i].text, prefix[i], err.msg);
    }
}

/* inih's inline comment, " ;", in every section, a header's too; a '#'
 * not after a blank is part of the value; " #" is refused, not cut. */
static void test_comments(void **state)
{
    (void)state;
    struct site s;
    parse_ok("; top\n# top\n[controller]   ; the loop\npower = none ; no BMC\n"
             "interval_s = 60 ; a minute\nvms = v1, v2 ; two\n"
             "[type big] ; ours\ncores = 4 ; four\nmips_per_core = 1000\nram_mb = 8192\n"
             "power_w = 10,20,30,40,50,60,70,80,90,100,110 ; watts\n"
             "[host a] ; the first\ntype = big ; ours\nuri = qemu+ssh://a/system#x ; kept\n",
             &s);
    assert_true(s.limits.interval_s == 60);
    assert_int_equal(s.n_vms, 2);
    assert_string_equal(s.vms[1].name, "v2");
    assert_int_equal(s.types.types[s.hosts[0].type].cores, 4);
    assert_true(s.types.types[s.hosts[0].type].power_w[10] == 110);
    assert_string_equal(s.hosts[0].uri, "qemu+ssh://a/system#x");
    site_free(&s);
    parse_bad(CONTROLLER "interval_s = 60 # a minute\n" HOST_A,
              "f.ini line 3: interval_s = '60 # a minute': ' #' does not start a comment after a "
              "value (only ' ;' does): write ' ;' there, or leave the '#' out");
    parse_bad(CONTROLLER HOST_A "bmc = 10.0.0.1 # the BMC\n",
              "f.ini line 6: bmc = '10.0.0.1 # the BMC': ' #' does not start a comment after a "
              "value (only ' ;' does): write ' ;' there, or leave the '#' out");
}

/* Lines longer than inih's buffer (a long vms = list), a host name inih
 * would have cut, indented keys, a byte order mark. */
static void test_long_lines_and_layout(void **state)
{
    (void)state;
    struct strbuf b = {0};
    strbuf_append(&b, "\xEF\xBB\xBF[controller]\n  power = none\nvms = ");
    for (int i = 0; i < 2000; i++)
        strbuf_appendf(&b, "%svm%04d", i ? ", " : "", i);
    strbuf_append(&b, "   ; two thousand\n");
    const char *name = "h-a-host-name-of-forty-seven-characters-0123456";
    assert_int_equal(strlen(name), FLEET_NAME_MAX - 1);
    strbuf_appendf(&b, "[host %s]\n    type = g4\n    uri = qemu:///system\n[pin]\n", name);
    strbuf_appendf(&b, "vm1999 = %s\n", name);
    struct site s;
    parse_ok(strbuf_str(&b), &s);
    assert_int_equal(s.n_vms, 2000);
    assert_string_equal(s.vms[1999].name, "vm1999");
    assert_int_equal(s.vms[0].line, 3);
    assert_int_equal(s.n_hosts, 1);
    assert_string_equal(s.hosts[0].name, name);
    assert_string_equal(s.hosts[0].uri, "qemu:///system");
    assert_string_equal(s.types.types[s.hosts[0].type].name, "g4");
    assert_non_null(site_rule_find(&s, "vm1999"));
    site_free(&s);
    strbuf_free(&b);

    /* a long line's error still names its line */
    strbuf_append(&b, CONTROLLER "vms = ");
    for (int i = 0; i < 100; i++)
        strbuf_appendf(&b, "vm%d, ", i);
    strbuf_append(&b, "vm1\n" HOST_A);
    parse_bad(strbuf_str(&b), "f.ini line 3: vms: 'vm1' is listed twice");
    strbuf_free(&b);
}

/* Built-in types as named, defined ones first; a [type g5] shadows the
 * built-in. */
static void test_types(void **state)
{
    (void)state;
    struct site s;
    parse_ok(CONTROLLER "[type small]\nbase = g4\ncores = 1\n"
                        "[host a]\ntype = g5\nuri = x:///\n[host b]\ntype = SMALL\nuri = x:///\n"
                        "[host c]\ntype = g4\nuri = x:///\n[host d]\ntype = g5\nuri = x:///\n",
             &s);
    assert_int_equal(s.types.n_types, 3);
    assert_string_equal(s.types.types[0].name, "small");
    assert_int_equal(s.types.types[0].cores, 1);
    assert_string_equal(s.types.types[1].name, "g5");
    assert_string_equal(s.types.types[2].name, "g4");
    assert_int_equal(s.types.n_hosts, 4);
    const uint16_t want[] = {1, 0, 2, 1};
    for (size_t i = 0; i < 4; i++) {
        assert_int_equal(s.hosts[i].type, want[i]);
        assert_int_equal(s.types.type_of[i], want[i]);
    }
    site_free(&s);
    parse_ok(CONTROLLER "[type g5]\nbase = g5\ncores = 64\n" HOST_A, &s);
    assert_int_equal(s.types.n_types, 1);
    assert_int_equal(s.types.types[0].cores, 64);
    site_free(&s);
    parse_bad(CONTROLLER "[host a]\ntype = g9\nuri = x:///\n",
              "f.ini line 4: type = g9: no [type g9] section (and not a built-in: g4, g5)");
    parse_bad(CONTROLLER "[host a]\nuri = x:///\n",
              "f.ini line 3: [host a] has no type = NAME (a [type NAME] section, or g4/g5)");
    struct strbuf b = {0};
    strbuf_append(&b, CONTROLLER);
    for (int i = 0; i <= SITE_MAX_HOSTS; i++)
        strbuf_appendf(&b, "[type t%d]\nbase = g4\n", i);
    _cleanup_free_ char *too_many =
        xasprintf("f.ini line %d: more than %d host types", 3 + 2 * SITE_MAX_HOSTS, SITE_MAX_HOSTS);
    parse_bad(strbuf_str(&b), too_many);
    strbuf_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_booleans), cmocka_unit_test(test_errors_name_line),
        cmocka_unit_test(test_comments), cmocka_unit_test(test_long_lines_and_layout),
        cmocka_unit_test(test_types),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
