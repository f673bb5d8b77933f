/* Fuzz target: the RAPL parsers of sense/rapl.h, all four on every input:
 * a perf PMU event file ("event=0x02"), a .scale file, a powercap zone
 * directory name ("intel-rapl:0:1") and a zone's name file ("package-0").
 *
 * The input is passed with its exact length and no NUL (ASan catches a
 * read past the end). What each accepts is in range and round-trips
 * through its canonical spelling; outputs are untouched on refusal. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>

#include "fuzz.h"
#include "sense/rapl.h"

static void check_perf_event(const char *t, size_t n)
{
    uint64_t config = 0x5a5a, back;
    int r = rapl_parse_perf_event(t, n, &config);
    FUZZ_CHECK(r == 0 || r == -EINVAL || r == -EOPNOTSUPP || r == -ERANGE);
    if (r < 0) {
        FUZZ_CHECK(config == 0x5a5a);
        return;
    }
    FUZZ_CHECK(memmem(t, n, "event=", 6) != NULL);
    char buf[64];
    int len = snprintf(buf, sizeof(buf), "event=%#" PRIx64 "\n", config);
    FUZZ_CHECK(rapl_parse_perf_event(buf, (size_t)len, &back) == 0 && back == config);
}

static void check_scale(const char *t, size_t n)
{
    double v = -1, back;
    int r = rapl_parse_scale(t, n, &v);
    if (r < 0) {
        FUZZ_CHECK(v == -1);
        return;
    }
    FUZZ_CHECK(isfinite(v) && v > 0);
    char buf[64];
    int len = snprintf(buf, sizeof(buf), "%.17g\n", v);
    FUZZ_CHECK(rapl_parse_scale(buf, (size_t)len, &back) == 0 && back == v);
}

static void check_zone_id(const char *t, size_t n)
{
    bool mmio = false;
    int zone = -7, sub = -7;
    int r = rapl_parse_zone_id(t, n, &mmio, &zone, &sub);
    FUZZ_CHECK(r == 0 || r == -EINVAL || r == -ENOENT || r == -ERANGE);
    if (r < 0) {
        FUZZ_CHECK(zone == -7 && sub == -7);
        return;
    }
    FUZZ_CHECK(zone >= 0 && zone <= 65535 && sub >= -1 && sub <= 65535);
    FUZZ_CHECK(n >= 10 && memcmp(t, "intel-rapl", 10) == 0);
    char buf[64];
    int len =
        sub < 0 ? snprintf(buf, sizeof(buf), "intel-rapl%s:%d", mmio ? "-mmio" : "", zone)
                : snprintf(buf, sizeof(buf), "intel-rapl%s:%d:%d", mmio ? "-mmio" : "", zone, sub);
    bool mmio2;
    int zone2, sub2;
    FUZZ_CHECK(rapl_parse_zone_id(buf, (size_t)len, &mmio2, &zone2, &sub2) == 0);
    FUZZ_CHECK(mmio2 == mmio && zone2 == zone && sub2 == sub);
}

static void check_zone_name(const char *t, size_t n)
{
    enum power_scope scope = POWER_SCOPE_DEVICE;
    int pkg = -7, die = -7;
    int r = rapl_parse_zone_name(t, n, &scope, &pkg, &die);
    if (r < 0) {
        FUZZ_CHECK(scope == POWER_SCOPE_DEVICE && pkg == -7 && die == -7);
        return;
    }
    FUZZ_CHECK(scope == POWER_SCOPE_PACKAGE || scope == POWER_SCOPE_CORE ||
               scope == POWER_SCOPE_UNCORE || scope == POWER_SCOPE_DRAM ||
               scope == POWER_SCOPE_PSYS);
    FUZZ_CHECK(scope == POWER_SCOPE_PACKAGE ? pkg >= 0 : pkg == -1 && die == -1);
    FUZZ_CHECK(die >= -1);
    if (scope != POWER_SCOPE_PACKAGE)
        return;
    char buf[64];
    int len = die < 0 ? snprintf(buf, sizeof(buf), "package-%d\n", pkg)
                      : snprintf(buf, sizeof(buf), "package-%d-die-%d\n", pkg, die);
    enum power_scope s2;
    int pkg2, die2;
    FUZZ_CHECK(rapl_parse_zone_name(buf, (size_t)len, &s2, &pkg2, &die2) == 0);
    FUZZ_CHECK(s2 == scope && pkg2 == pkg && die2 == die);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *t = (const char *)data;
    check_perf_event(t, size);
    check_scale(t, size);
    check_zone_id(t, size);
    check_zone_name(t, size);
    return 0;
}
