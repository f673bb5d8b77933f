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

#include "base/cpuset.h"
#include "base/crc32.h"
#include "base/json.h"
#include "base/jsondoc.h"
#include "base/parse.h"
#include "base/table.h"
#include "base/text.h"
#include "base/util.h"

static void check_cpulist(const char *in, const char *canon, unsigned count)
{
    struct cpuset s;
    assert_int_equal(cpuset_parse(in, &s), 0);
    char *f = cpuset_format(&s);
    assert_string_equal(f, canon);
    assert_int_equal(cpuset_count(&s), count);
    free(f);
    cpuset_free(&s);
}

static void test_cpulist(void **state)
{
    check_cpulist("0-3,8,10-11\n", "0-3,8,10-11", 7);
    check_cpulist("0", "0", 1);
    check_cpulist("\n", "", 0); /* "offline" when every CPU is online */
    check_cpulist("", "", 0);
    check_cpulist("0,1,2,5-5", "0-2,5", 4);
    check_cpulist("0-383", "0-383", 384);
    check_cpulist("376-383", "376-383", 8);
    check_cpulist("0-7,64-71,128-135", "0-7,64-71,128-135", 24);
    struct cpuset s;
    assert_int_equal(cpuset_parse("1-", &s), -EINVAL);
    assert_int_equal(cpuset_parse("3-1", &s), -ERANGE);
    assert_int_equal(cpuset_parse("a", &s), -EINVAL);
    assert_int_equal(cpuset_parse("0,,1", &s), -EINVAL);
    assert_int_equal(cpuset_parse("0-3,", &s), -EINVAL);
    assert_int_equal(cpuset_parse("8192", &s), -ERANGE);
    assert_int_equal(cpuset_parse("0-3 junk", &s), -EINVAL);
    assert_int_equal(cpuset_parse("99999999999999999999", &s), -ERANGE);
}

static void test_cpuset_iterate(void **state)
{
    struct cpuset s = {0};
    cpuset_add(&s, 63);
    cpuset_add(&s, 64);
    cpuset_add(&s, 200);
    int seen[3], n = 0;
    CPUSET_FOREACH (cpu, &s)
        seen[n++] = cpu;
    assert_int_equal(n, 3);
    assert_int_equal(seen[0], 63);
    assert_int_equal(seen[1], 64);
    assert_int_equal(seen[2], 200);
    assert_true(cpuset_has(&s, 200));
    assert_false(cpuset_has(&s, 201));
    assert_false(cpuset_has(&s, 100000));
    cpuset_free(&s);
}

static void test_parse_numbers(void **state)
{
    uint64_t u;
    int64_t i;
    double d;
    assert_int_equal(parse_u64("262143328850\n", &u), 0);
    assert_true(u == 262143328850ull);
    assert_int_equal(parse_u64("", &u), -EINVAL);
    assert_int_equal(parse_u64("-5", &u), -EINVAL);
    assert_int_equal(parse_u64("12abc", &u), -EINVAL);
    assert_int_equal(parse_u64("abc", &u), -EINVAL);
    assert_int_equal(parse_u64("18446744073709551616", &u), -ERANGE);
    assert_int_equal(parse_u64_any("0x0c0330\n", &u), 0);
    assert_int_equal(u, 0x0c0330);
    assert_int_equal(parse_i64("-1\n", &i), 0);
    assert_int_equal(i, -1);
    assert_int_equal(parse_i64("- 1", &i), -EINVAL);
    assert_int_equal(parse_double("2.3283064365386962890625e-10\n", &d), 0);
    assert_true(d > 2.328e-10 && d < 2.329e-10);
    assert_int_equal(parse_double("nan", &d), -EINVAL);
    assert_int_equal(parse_double("1e999", &d), -ERANGE);
    int b;
    assert_int_equal(parse_bool01("Y\n", &b), 0);
    assert_int_equal(b, 1);
    assert_int_equal(parse_bool01("2", &b), -EINVAL);
}

/* One vocabulary for every config file: each word in any case, and
 * nothing else (docs/config.md). */
static void test_parse_bool(void **state)
{
    char pad[] = " \t yes \n";
    assert_string_equal(str_trim(pad), "yes"); /* the shared in-place trim */
    static const char *const yes[] = {"yes", "YES", "True", "on", "On", "1", " true\n"};
    static const char *const no[] = {"no", "No", "FALSE", "off", "OFF", "0", "\toff "};
    static const char *const bad[] = {"", " ", "y", "n", "2", "enable", "yes please", "01", "o n"};
    bool b;
    for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
        b = false;
        assert_int_equal(parse_bool(yes[i], &b), 0);
        assert_true(b);
    }
    for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++) {
        b = true;
        assert_int_equal(parse_bool(no[i], &b), 0);
        assert_false(b);
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        b = true;
        assert_int_equal(parse_bool(bad[i], &b), -EINVAL);
        assert_true(b); /* ret untouched on error */
    }
    assert_int_equal(parse_bool(NULL, &b), -EINVAL);
}

static void test_json(void **state)
{
    struct json j;
    json_init(&j, false);
    json_object_begin(&j);
    json_kv_string(&j, "s", "a\"b\\c\n\x01");
    json_kv_double(&j, "nan", NAN);
    json_kv_double(&j, "j", 240422.366267);
    json_kv_u64(&j, "u", UINT64_MAX);
    json_key(&j, "a");
    json_array_begin(&j);
    json_i64(&j, -3);
    json_bool(&j, true);
    json_string(&j, NULL);
    json_array_end(&j);
    json_key(&j, "empty");
    json_object_begin(&j);
    json_object_end(&j);
    json_object_end(&j);
    assert_string_equal(strbuf_str(&j.out),
                        "{\"s\":\"a\\\"b\\\\c\\n\\u0001\",\"nan\":null,\"j\":240422.366267,"
                        "\"u\":18446744073709551615,\"a\":[-3,true,null],\"empty\":{}}");
    json_free(&j);
}

static void test_table(void **state)
{
    struct table t;
    table_init(&t, "name", ">W", NULL);
    table_add(&t, "package-0", "12.5");
    table_add(&t, "dram-0", "3.25");
    struct strbuf out = {0};
    table_render(&t, &out, 100);
    assert_string_equal(strbuf_str(&out), "  name          W\n"
                                          "  package-0  12.5\n"
                                          "  dram-0     3.25\n");
    strbuf_reset(&out);
    table_render(&t, &out, 10);
    assert_string_equal(strbuf_str(&out), "  name   >\n  package>\n  dram-0 >\n");
    strbuf_free(&out);
    table_free(&t);
}

/* Names from outside: every control, C1 and invalid byte escaped, the
 * document still valid UTF-8 and its text the name's. */
static void test_json_hostile(void **state)
{
    struct json j;
    json_init(&j, false);
    json_string(&j, "\x1b]0;x\x07|\xc2\x9b|\x9b|\x7f|\xe2\x80\xa8|\xc3\xa9|\xe6\x97\xa5|\xc0\xaf");
    assert_string_equal(strbuf_str(&j.out), "\"\\u001b]0;x\\u0007|\\u009b|\\ufffd|\\u007f|\\u2028|"
                                            "\xc3\xa9|\xe6\x97\xa5|\\ufffd\\ufffd\"");
    json_free(&j);
}

static void test_text(void **state)
{
    _cleanup_free_ char *a = text_dup("a\tb\nc\r\x1b[2J\x07\x7f\x9b\xc2\x9b\xe2\x80\xaeZ");
    assert_string_equal(a, "a b c ?[2J?????Z");
    _cleanup_free_ char *dash = text_dup(NULL);
    assert_string_equal(dash, "-");
    struct strbuf b = {0};
    const char *out = "l1\n\tl2 \x1b]0;pwned\x07\nGr\xc3\xbc\xc3\x9f\n";
    text_append(&b, out, strlen(out), true);
    assert_string_equal(strbuf_str(&b), "l1\n\tl2 ?]0;pwned?\nGr\xc3\xbc\xc3\x9f\n");
    strbuf_free(&b);
    _cleanup_free_ char *p = text_pad("\xe6\x97\xa5x\x1b", 6);
    assert_string_equal(p, "\xe6\x97\xa5x?  ");
    assert_int_equal(text_width(p), 6);
    assert_int_equal(text_fit("\xe6\x97\xa5\xe6\x9c\xac", 3), 3); /* never half a wide char */
}

/* Escaped names keep their columns: widths in display columns, the clip
 * never cuts a character. */
static void test_table_hostile(void **state)
{
    struct table t;
    table_init(&t, "name", ">W", NULL);
    table_add(&t, "a\x1b[2J", "1");
    table_add(&t,
              "Gr\xc3\xbc\xc3\x9f"
              "e",
              "2");
    table_add(&t, "\xe6\x97\xa5\xe6\x9c\xac", "3");
    table_add(&t, "\x9b\xff", "4");
    table_add(&t, "x\xc2\x9by\n", "5");
    struct strbuf out = {0};
    table_render(&t, &out, 100);
    assert_string_equal(strbuf_str(&out), "  name   W\n"
                                          "  a?[2J  1\n"
                                          "  Gr\xc3\xbc\xc3\x9f"
                                          "e  2\n"
                                          "  \xe6\x97\xa5\xe6\x9c\xac   3\n"
                                          "  ??     4\n"
                                          "  x?y    5\n");
    strbuf_reset(&out);
    table_render(&t, &out, 6);
    assert_string_equal(strbuf_str(&out),
                        "  nam>\n  a?[>\n  Gr\xc3\xbc>\n  \xe6\x97\xa5>\n  ?? >\n  x?y>\n");
    strbuf_free(&out);
    table_free(&t);
}

/* The standard check value, and a CRC continued over two pieces. */
static void test_crc32(void **state)
{
    assert_int_equal(crc32_update(0, "123456789", 9), 0xcbf43926u);
    assert_int_equal(crc32_update(crc32_update(0, "1234", 4), "56789", 5), 0xcbf43926u);
    assert_int_equal(crc32_update(0, "", 0), 0);
}

/* The header of every --json document (docs/json.md) and WATT_TIME_NOW. */
static void test_jsondoc(void **state)
{
    (void)state;
    char buf[64];
    assert_int_equal(doc_time_format(0, buf, sizeof(buf)), 0);
    assert_string_equal(buf, "1970-01-01T00:00:00Z");
    assert_int_equal(doc_time_format(1796406600, buf, sizeof(buf)), 0);
    assert_string_equal(buf, "2026-12-04T17:50:00Z");
    assert_int_equal(doc_time_format(INT64_C(253402300799), buf, sizeof(buf)), 0);
    assert_string_equal(buf, "9999-12-31T23:59:59Z");
    assert_int_equal(doc_time_format(INT64_C(253402300800), buf, sizeof(buf)), -ERANGE);
    assert_int_equal(doc_time_format(-1, buf, sizeof(buf)), -ERANGE);
    assert_int_equal(doc_time_format(0, buf, 8), -ERANGE); /* too small a buffer */

    char *err = NULL;
    unsetenv("WATT_TIME_NOW");
    assert_int_equal(doc_time_check(&err), 0);
    assert_int_equal(doc_time(42), 42); /* unset: the fallback */
    setenv("WATT_TIME_NOW", "1796406600", 1);
    assert_int_equal(doc_time_check(&err), 0);
    assert_int_equal(doc_time(42), 1796406600);
    assert_int_equal(doc_time_now(), 1796406600);
    const char *bad[] = {
        "", "x", "-1", "+1", "1.5", " 1", "1 ", "253402300800", "99999999999999999999999"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        setenv("WATT_TIME_NOW", bad[i], 1);
        err = NULL;
        assert_int_equal(doc_time_check(&err), -EINVAL);
        assert_non_null(strstr(err, "$WATT_TIME_NOW='"));
        assert_non_null(strstr(err, bad[i]));
        free(err);
        assert_int_equal(doc_time(42), 42); /* a bad value is never stated */
    }
    setenv("WATT_TIME_NOW", "253402300799", 1);
    assert_int_equal(doc_time_check(&err), 0);

    struct json j;
    json_init(&j, false);
    json_doc_begin(&j, "watt-test/3", 1796406600);
    json_kv_u64(&j, "n", 1);
    json_object_end(&j);
    assert_string_equal(strbuf_str(&j.out),
                        "{\"schema\":\"watt-test/3\",\"time\":\"2026-12-04T17:50:00Z\",\"n\":1}");
    json_free(&j);
    unsetenv("WATT_TIME_NOW");
}

/* text_wrap: lines of at most COLS columns, broken at blanks, long words
 * broken inside (never inside a character), nothing else dropped. */
static void test_text_wrap(void **state)
{
    (void)state;
    char **l;
    size_t n = text_wrap("the quick  brown fox jumps", 10, &l);
    assert_int_equal(n, 3);
    assert_string_equal(l[0], "the quick");
    assert_string_equal(l[1], "brown fox");
    assert_string_equal(l[2], "jumps");
    text_wrap_free(l, n);
    n = text_wrap("abcdefghijkl xy", 5, &l);
    assert_int_equal(n, 3);
    assert_string_equal(l[0], "abcde");
    assert_string_equal(l[1], "fghij");
    assert_string_equal(l[2], "kl xy");
    text_wrap_free(l, n);
    /* wide characters count two columns and are never split */
    n = text_wrap("\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e", 3, &l);
    assert_int_equal(n, 3);
    assert_string_equal(l[0], "\xe6\x97\xa5");
    text_wrap_free(l, n);
    /* a character wider than the line still goes out, alone */
    n = text_wrap("\xe6\x97\xa5", 1, &l);
    assert_int_equal(n, 1);
    text_wrap_free(l, n);
    /* controls are made printable, a blank text gives no line */
    n = text_wrap("a\x1b[2Jb", 80, &l);
    assert_int_equal(n, 1);
    assert_string_equal(l[0], "a?[2Jb");
    text_wrap_free(l, n);
    assert_int_equal(text_wrap("   ", 10, &l), 0);
    text_wrap_free(l, 0);
    assert_int_equal(text_wrap(NULL, 10, &l), 0);
    text_wrap_free(l, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cpulist),       cmocka_unit_test(test_cpuset_iterate),
        cmocka_unit_test(test_parse_numbers), cmocka_unit_test(test_parse_bool),
        cmocka_unit_test(test_json),          cmocka_unit_test(test_crc32),
        cmocka_unit_test(test_table),         cmocka_unit_test(test_json_hostile),
        cmocka_unit_test(test_text),          cmocka_unit_test(test_table_hostile),
        cmocka_unit_test(test_jsondoc),       cmocka_unit_test(test_text_wrap),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
