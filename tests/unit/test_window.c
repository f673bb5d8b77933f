/* view/window.h: the interval rule, and windows taken on a recorded root
 * and on this machine. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

/* cmocka.h needs stdarg, stddef, stdint and setjmp first */
#include <cmocka.h>

#include "base/util.h"
#include "host/host.h"
#include "sense/sampler.h"
#include "view/window.h"

static void test_interval_rule(void **state)
{
    (void)state;
    struct sample a = {.mono_ns = 5000000000ull}, b = {.mono_ns = 6250000000ull};
    /* live: the monotonic time between the samples, whatever was asked */
    assert_float_equal(window_interval(&a, &b, true, 1.0), 1.25, 1e-12);
    assert_float_equal(window_interval(&a, &b, true, 0), 1.25, 1e-12);
    /* recorded: the nominal interval, however long the reads took */
    assert_float_equal(window_interval(&a, &b, false, 3.0), 3.0, 0);
    /* no nominal interval: the time that passed, recorded or not */
    assert_float_equal(window_interval(&a, &b, false, 0), 1.25, 1e-12);
    /* one snapshot: no interval */
    assert_float_equal(window_interval(&a, NULL, true, 1.0), 0, 0);
    assert_float_equal(window_interval(NULL, &b, false, 1.0), 0, 0);
}

static void test_take_recorded(void **state)
{
    (void)state;
    const char *dir = getenv("WATT_FIXTURES");
    if (!dir)
        skip();
    _cleanup_free_ char *root = xasprintf("%s/intel-2s", dir);
    struct host *h;
    assert_int_equal(host_open(root, &h), 0);
    assert_false(h->live);
    struct sense *s;
    assert_int_equal(sense_open(h, &s), 0);
    struct window w;
    uint64_t t0 = now_monotonic_ns();
    assert_int_equal(window_take(s, h->live, 30, &w), 0);
    /* no sleeping on a recorded root, and the interval is the nominal one */
    assert_true(now_monotonic_ns() - t0 < 20000000000ull);
    assert_non_null(w.a);
    assert_non_null(w.b);
    assert_float_equal(w.seconds, 30, 0);
    assert_true(w.b->mono_ns >= w.a->mono_ns);
    window_clear(&w);
    assert_null(w.a);
    assert_null(w.b);
    /* interval 0: one snapshot */
    assert_int_equal(window_take(s, h->live, 0, &w), 0);
    assert_non_null(w.a);
    assert_null(w.b);
    assert_float_equal(w.seconds, 0, 0);
    window_clear(&w);
    sense_close(s);
    host_close(h);
}

static void test_take_live(void **state)
{
    (void)state;
    struct host *h;
    assert_int_equal(host_open("/", &h), 0);
    assert_true(h->live);
    struct sense *s;
    assert_int_equal(sense_open(h, &s), 0);
    struct window w;
    assert_int_equal(window_take(s, h->live, 0.2, &w), 0);
    /* the second sample begins no earlier than 0.2 s after the first
     * began, and the rates are over the time that really passed */
    assert_true(w.seconds >= 0.2);
    assert_true(w.seconds < 5);
    assert_float_equal(w.seconds, (double)(w.b->mono_ns - w.a->mono_ns) / 1e9, 1e-12);
    window_clear(&w);
    sense_close(s);
    host_close(h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_interval_rule),
        cmocka_unit_test(test_take_recorded),
        cmocka_unit_test(test_take_live),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
