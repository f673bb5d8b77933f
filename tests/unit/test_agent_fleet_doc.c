/* The fleet controller's metrics as the agent serves them (fleet_doc.h)
 * and the agent's gzip (gzip.h). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

/* cmocka.h needs stdarg, stddef, stdint and setjmp first */
#include <cmocka.h>

#include "agent/fleet_doc.h"
#include "agent/gzip.h"
#include "base/util.h"

/* What the controller writes (control_tick.c, control_manual.c), cut. */
static const char good[] =
    "# HELP watt_fleet_host_state Hosts of the fleet by the controller's view.\n"
    "# TYPE watt_fleet_host_state gauge\n"
    "watt_fleet_host_state{host=\"h1\",state=\"on\"} 1\n"
    "watt_fleet_host_state{host=\"h1\",state=\"off\"} 0\n"
    "\n"
    "# HELP watt_fleet_migrations_total Live migrations by outcome.\n"
    "# TYPE watt_fleet_migrations_total counter\n"
    "watt_fleet_migrations_total{result=\"ok\"} 3\n"
    "watt_fleet_migrations_total{result=\"failed\"} 0\n"
    "# a comment\n"
    "# HELP watt_fleet_power_watts Sum of the \"hosts'\" readings \\\\ in W.\n"
    "# TYPE watt_fleet_power_watts gauge\n"
    "watt_fleet_power_watts 412.5 1700000000123\n"
    "watt_fleet_odd{x=\"a\\\"b\\\\c\\nd\",} NaN\n"
    "# TYPE watt_fleet_safety_refusals_total counter\n"
    "watt_fleet_safety_refusals_total +Inf";

static const char good_om[] =
    "# HELP watt_fleet_host_state Hosts of the fleet by the controller's view.\n"
    "# TYPE watt_fleet_host_state gauge\n"
    "watt_fleet_host_state{host=\"h1\",state=\"on\"} 1\n"
    "watt_fleet_host_state{host=\"h1\",state=\"off\"} 0\n"
    "# HELP watt_fleet_migrations Live migrations by outcome.\n"
    "# TYPE watt_fleet_migrations counter\n"
    "watt_fleet_migrations_total{result=\"ok\"} 3\n"
    "watt_fleet_migrations_total{result=\"failed\"} 0\n"
    "# HELP watt_fleet_power_watts Sum of the \\\"hosts'\\\" readings \\\\ in W.\n"
    "# TYPE watt_fleet_power_watts gauge\n"
    "watt_fleet_power_watts 412.5 1700000000.123\n"
    "# TYPE watt_fleet_odd unknown\n"
    "watt_fleet_odd{x=\"a\\\"b\\\\c\\nd\"} NaN\n"
    "# TYPE watt_fleet_safety_refusals counter\n"
    "watt_fleet_safety_refusals_total +Inf\n";

static void test_convert(void **state)
{
    (void)state;
    char *text = NULL, *om = NULL, *err = NULL;
    assert_int_equal(fleet_doc_convert(good, strlen(good), &text, &om, &err), 0);
    assert_string_equal(om, good_om);
    /* the text format as written, less the blank line and the comment */
    assert_non_null(strstr(text, "watt_fleet_power_watts 412.5 1700000000123\n"));
    assert_non_null(strstr(text, "# TYPE watt_fleet_migrations_total counter\n"));
    assert_null(strstr(text, "# a comment"));
    assert_null(strstr(text, "\n\n"));
    assert_int_equal(text[strlen(text) - 1], '\n');
    free(text);
    free(om);
    /* empty: nothing to serve, but valid */
    assert_int_equal(fleet_doc_convert("", 0, &text, &om, &err), 0);
    assert_string_equal(text, "");
    assert_string_equal(om, "");
    free(text);
    free(om);
}

static void test_refused(void **state)
{
    (void)state;
    static const char *const bad[][2] = {
        {"watt_fleet_a 1\nwatt_fleet_b 1\nwatt_fleet_a 2\n", "line 3: watt_fleet_a again"},
        {"node_load1 1\n", "line 1: node_load1 is not named watt_fleet_*"},
        {"watt_fleet_x{a=\"1\",b=\"2\"} 1\nwatt_fleet_x{a=\"2\"} 1\nwatt_fleet_x{b=\"2\",a=\"1\"} "
         "2\n",
         "line 3: watt_fleet_x{a=\"1\",b=\"2\"} again: the same series twice"},
        {"watt_fleet_x 1\nwatt_fleet_x 2\nwatt_fleet_y 1\n",
         "line 2: watt_fleet_x again: the same"},
        {"watt_fleet_y 1\nwatt_fleet_x{ab=\"1\",a=\"1\"} 1\nwatt_fleet_x{a=\"1\",ab=\"1\"} 1\n",
         "line 3: watt_fleet_x{a=\"1\",ab=\"1\"} again"},
        {"watt_energy_joules_total 1\n", "not named watt_fleet_"},
        {"# TYPE watt_fleet_x counter\n", "line 1: counter watt_fleet_x does not end in _total"},
        {"# TYPE watt_fleet_x_total gauge\n", "ends in _total but is not a counter"},
        {"watt_fleet_x_total 1\n", "ends in _total but is not a counter"},
        {"# TYPE watt_fleet_x_total counter\nwatt_fleet_x_total -1\n",
         "line 2: counter watt_fleet_x_total is negative"},
        {"# TYPE watt_fleet_x_total counter\nwatt_fleet_x_total NaN\n", "is NaN"},
        {"# TYPE watt_fleet_x gauge\n# TYPE watt_fleet_x gauge\n", "line 2: a second TYPE"},
        {"# HELP watt_fleet_x a\n# HELP watt_fleet_x b\n", "a second HELP"},
        {"watt_fleet_x 1\n# TYPE watt_fleet_x gauge\n", "TYPE for watt_fleet_x after its samples"},
        {"# TYPE watt_fleet_x histogram\n", "not supported"},
        {"# TYPE watt_fleet_x wibble\n", "unknown type"},
        {"watt_fleet_x{a=\"1\",a=\"2\"} 1\n", "label a twice"},
        {"watt_fleet_x{a=\"1} 1\n", "value not closed"},
        {"watt_fleet_x{a=\"\\t\"} 1\n", "bad escape"},
        {"watt_fleet_x{__name__=\"y\"} 1\n", "reserved"},
        {"watt_fleet_x{1a=\"y\"} 1\n", "bad label"},
        {"watt_fleet_x 1 2 3\n", "text after the timestamp"},
        {"watt_fleet_x 0x10\n", "bad value '0x10'"},
        {"watt_fleet_x 1e\n", "bad value"},
        {"watt_fleet_x\n", "bad sample"},
        {"watt_fleet_x \n", "no value"},
        {"watt_fleet_x 1 12.5\n", "bad timestamp"},
        {"watt-fleet 1\n", "bad sample"},
        {"watt_fleet_x{a=\"\xff\"} 1\n", "line 1: not UTF-8"},
        {"# HELP watt_fleet_x a \\t b\n", "escape \\t"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        char *text = NULL, *om = NULL, *err = NULL;
        int r = fleet_doc_convert(bad[i][0], strlen(bad[i][0]), &text, &om, &err);
        if (r != -EINVAL || !err || !strstr(err, bad[i][1]))
            fail_msg("%zu: %s: got %d '%s', want '%s'", i, bad[i][0], r, err ? err : "", bad[i][1]);
        assert_null(text);
        assert_null(om);
        free(err);
    }
    /* a NUL inside */
    char *text = NULL, *om = NULL, *err = NULL;
    assert_int_equal(fleet_doc_convert("watt_fleet_x 1\n\0x", 17, &text, &om, &err), -EINVAL);
    assert_non_null(strstr(err, "line 2: a NUL byte"));
    free(err);
}

static void test_accept(void **state)
{
    (void)state;
    assert_false(agent_accepts_gzip(NULL));
    assert_false(agent_accepts_gzip(""));
    assert_true(agent_accepts_gzip("gzip"));
    assert_true(agent_accepts_gzip("identity, GZIP"));
    assert_true(agent_accepts_gzip("deflate;q=0.5, gzip;q=0.8"));
    assert_false(agent_accepts_gzip("gzip;q=0"));
    assert_false(agent_accepts_gzip("gzip ; q=0.000, identity"));
    assert_true(agent_accepts_gzip("*"));
    assert_false(agent_accepts_gzip("*, gzip;q=0"));
    assert_false(agent_accepts_gzip("x-gzip2, deflate, br"));
}

static void test_gzip(void **state)
{
    (void)state;
    struct {
        char *s;
        size_t n;
    } in = {xmalloc(300000), 300000};
    for (size_t i = 0; i < in.n; i++)
        in.s[i] = "watt_cpu_seconds_total{cpu=\"0\"} 12.5\n"[i % 37];
    char *gz;
    size_t gz_len;
    assert_int_equal(agent_gzip(in.s, in.n, &gz, &gz_len), 0);
    assert_true(gz_len > 18 && gz_len < in.n / 10);
    assert_int_equal((unsigned char)gz[0], 0x1f); /* the gzip magic */
    assert_int_equal((unsigned char)gz[1], 0x8b);
    z_stream z = {0};
    assert_int_equal(inflateInit2(&z, 15 + 16), Z_OK);
    char *back = xmalloc(in.n + 1);
    z.next_in = (unsigned char *)gz;
    z.avail_in = (uInt)gz_len;
    z.next_out = (unsigned char *)back;
    z.avail_out = (uInt)in.n + 1;
    assert_int_equal(inflate(&z, Z_FINISH), Z_STREAM_END);
    assert_int_equal(z.total_out, in.n);
    assert_memory_equal(back, in.s, in.n);
    inflateEnd(&z);
    free(back);
    free(gz);
    /* an empty document is a valid, empty gzip member */
    assert_int_equal(agent_gzip("", 0, &gz, &gz_len), 0);
    assert_true(gz_len >= 20);
    free(gz);
    free(in.s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_convert),
        cmocka_unit_test(test_refused),
        cmocka_unit_test(test_accept),
        cmocka_unit_test(test_gzip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
