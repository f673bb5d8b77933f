/* Fuzz target: the one-value sysfs/dev parsers of the samplers:
 * devices_parse_hex() (PCI/USB ids), dev_status_parse() (runtime_status),
 * latency_parse_resume() (pm_qos_resume_latency_us) and
 * latency_parse_global() (the 4 bytes of cpu_dma_latency), and one name
 * parser: hwmon_parse_attr() ("power1_average").
 *
 * The input is passed with its exact length and no NUL (ASan catches a
 * read past the end). devices_parse_hex() is checked against a reference;
 * the others by range and round-trip. */
#include <ctype.h>
#include <errno.h>
#include <stdbool.h>

#include "fuzz.h"
#include "sense/devices.h"
#include "sense/hwmon.h"
#include "sense/latency.h"

/* [space] [0x|0X] hexdigits [space], at most INT32_MAX, on the text up to
 * the first NUL (the parser works on a C-string copy). */
static int ref_hex(const char *s, int *ret)
{
    while (isspace((unsigned char)*s))
        s++;
    if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))
        s += 2;
    const char *e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1]))
        e--;
    if (e == s)
        return -EINVAL;
    uint64_t v = 0;
    for (; s < e; s++) {
        if (!isxdigit((unsigned char)*s))
            return -EINVAL;
        v = v * 16 + (uint64_t)(isdigit((unsigned char)*s) ? *s - '0' : (*s | 0x20) - 'a' + 10);
        if (v > INT32_MAX)
            return -ERANGE;
    }
    *ret = (int)v;
    return 0;
}

static void check_hex(const uint8_t *data, size_t size, const char *s)
{
    int v = -7, ref = -7;
    int r = devices_parse_hex((const char *)data, size, &v);
    if (size >= 32) { /* sysfs ids are short; longer text is refused */
        FUZZ_CHECK(r == -EINVAL && v == -7);
        return;
    }
    FUZZ_CHECK(r == ref_hex(s, &ref));
    FUZZ_CHECK(v == ref);
}

static void check_status(const char *s)
{
    enum dev_status st = dev_status_parse(s);
    const char *name = dev_status_name(st);
    if (st == DEV_STATUS_UNKNOWN)
        return;
    FUZZ_CHECK(name && strcmp(name, s) == 0);
}

static void check_resume(const uint8_t *data, size_t size)
{
    int64_t v = -7;
    int r = latency_parse_resume((const char *)data, size, &v);
    FUZZ_CHECK(r == 0 || r == -EINVAL || r == -ERANGE);
    if (r < 0) {
        FUZZ_CHECK(v == -7);
        return;
    }
    FUZZ_CHECK(v == LATENCY_NONE || (v >= 0 && v <= INT32_MAX));
    char buf[32];
    int len = v == 0 ? snprintf(buf, sizeof(buf), "n/a\n")
                     : snprintf(buf, sizeof(buf), "%lld\n", v == LATENCY_NONE ? 0 : (long long)v);
    int64_t back;
    FUZZ_CHECK(latency_parse_resume(buf, (size_t)len, &back) == 0 && back == v);
}

static void check_global(const uint8_t *data, size_t size)
{
    int64_t us = -7, raw = -7;
    int r = latency_parse_global(data, size, &us, &raw);
    if (size != 4) {
        FUZZ_CHECK(r == -EIO && us == -7 && raw == -7);
        return;
    }
    int32_t v;
    memcpy(&v, data, 4);
    FUZZ_CHECK(r == (v < 0 ? -EINVAL : 0));
    if (r == 0)
        FUZZ_CHECK(raw == v && us == (v >= LATENCY_GLOBAL_DEFAULT ? LATENCY_NONE : v));
}

static void check_hwmon_attr(const uint8_t *data, size_t size)
{
    static const char *const fields[] = {
        [HWMON_INPUT] = "input",
        [HWMON_AVERAGE] = "average",
        [HWMON_AVERAGE_INTERVAL] = "average_interval",
        [HWMON_CAP] = "cap",
        [HWMON_LABEL] = "label",
        [HWMON_IS_BATTERY] = "is_battery",
    };
    struct hwmon_attr a = {.index = 77777}, back;
    int r = hwmon_parse_attr((const char *)data, size, &a);
    FUZZ_CHECK(r == 0 || r == -ENOENT || r == -EINVAL);
    if (r < 0) {
        FUZZ_CHECK(a.index == 77777);
        return;
    }
    FUZZ_CHECK(a.kind == HWMON_POWER || a.kind == HWMON_ENERGY);
    FUZZ_CHECK(a.index >= 1 && a.index <= 9999);
    FUZZ_CHECK((unsigned)a.field < sizeof(fields) / sizeof(fields[0]));
    char buf[64];
    int len = snprintf(buf, sizeof(buf), "%s%u_%s", a.kind == HWMON_POWER ? "power" : "energy",
                       a.index, fields[a.field]);
    FUZZ_CHECK((size_t)len == size && memcmp(buf, data, size) == 0); /* one spelling */
    FUZZ_CHECK(hwmon_parse_attr(buf, (size_t)len, &back) == 0);
    FUZZ_CHECK(back.kind == a.kind && back.index == a.index && back.field == a.field);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = fuzz_strndup(data, size);
    check_hex(data, size, s);
    check_status(s);
    check_resume(data, size);
    check_global(data, size);
    check_hwmon_attr(data, size);
    free(s);
    return 0;
}
