/* Fuzz target: base/parse.h, the strict value parsers every sampler uses.
 *
 * parse_u64 and parse_i64 are checked against a second, obviously correct
 * implementation (digit by digit with overflow detection): same return
 * code, same value. The others are checked by invariants: what they accept
 * round-trips through printf, and ret is untouched on failure. */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/parse.h"
#include "fuzz.h"

#define SENTINEL_U 0x5a5a5a5a5a5a5a5aull

static bool only_space(const char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    return *s == '\0';
}

/* The reference: [space] digits [space]; -ERANGE on overflow even when
 * garbage follows (strtoull stops at the garbage after overflowing). */
static int ref_digits(const char *s, uint64_t limit, uint64_t *ret)
{
    if (!isdigit((unsigned char)*s))
        return -EINVAL;
    uint64_t v = 0;
    bool over = false;
    for (; isdigit((unsigned char)*s); s++) {
        unsigned d = (unsigned)(*s - '0');
        if (v > (limit - d) / 10)
            over = true;
        else
            v = v * 10 + d;
    }
    if (over)
        return -ERANGE;
    if (!only_space(s))
        return -EINVAL;
    *ret = v;
    return 0;
}

static void check_u64(const char *s)
{
    uint64_t v = SENTINEL_U, ref = 0;
    int r = parse_u64(s, &v);
    int rr = ref_digits(skip_space(s), UINT64_MAX, &ref);
    FUZZ_CHECK(r == rr);
    if (r < 0) {
        FUZZ_CHECK(v == SENTINEL_U);
        return;
    }
    FUZZ_CHECK(v == ref);
    char buf[32];
    snprintf(buf, sizeof(buf), "%" PRIu64, v);
    uint64_t back;
    FUZZ_CHECK(parse_u64(buf, &back) == 0 && back == v);
}

static void check_i64(const char *s)
{
    int64_t v = (int64_t)SENTINEL_U;
    int r = parse_i64(s, &v);
    const char *p = skip_space(s);
    bool neg = *p == '-';
    if (*p == '-' || *p == '+')
        p++;
    uint64_t mag = 0;
    int rr = ref_digits(p, neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX, &mag);
    FUZZ_CHECK(r == rr);
    if (r < 0) {
        FUZZ_CHECK(v == (int64_t)SENTINEL_U);
        return;
    }
    FUZZ_CHECK(neg ? (uint64_t)0 - (uint64_t)v == mag : (uint64_t)v == mag);
    FUZZ_CHECK(neg ? v <= 0 : v >= 0);
}

static void check_u64_any(const char *s)
{
    uint64_t v = SENTINEL_U;
    int r = parse_u64_any(s, &v);
    FUZZ_CHECK(r == 0 || r == -EINVAL || r == -ERANGE);
    if (r < 0) {
        FUZZ_CHECK(v == SENTINEL_U);
        return;
    }
    const char *p = skip_space(s);
    FUZZ_CHECK(isdigit((unsigned char)*p));
    bool hex = p[0] == '0' && (p[1] == 'x' || p[1] == 'X');
    for (const char *q = hex ? p + 2 : p; *q && !isspace((unsigned char)*q); q++)
        FUZZ_CHECK(hex ? isxdigit((unsigned char)*q) : *q >= '0' && *q <= '9');
    uint64_t dec;
    if (p[0] != '0' && parse_u64(s, &dec) == 0) /* no prefix: plain decimal */
        FUZZ_CHECK(dec == v);
    char buf[32];
    snprintf(buf, sizeof(buf), "%#" PRIx64, v);
    uint64_t back;
    FUZZ_CHECK(parse_u64_any(buf, &back) == 0 && back == v);
}

static void check_double(const char *s)
{
    double v = -12345.678;
    int r = parse_double(s, &v);
    FUZZ_CHECK(r == 0 || r == -EINVAL || r == -ERANGE);
    if (r < 0) {
        FUZZ_CHECK(v == -12345.678);
        return;
    }
    FUZZ_CHECK(isfinite(v));
    FUZZ_CHECK(!only_space(s));
    char buf[64];
    snprintf(buf, sizeof(buf), "%.17g", v);
    double back;
    FUZZ_CHECK(parse_double(buf, &back) == 0 && back == v);
}

static void check_bool01(const char *s)
{
    int v = 42;
    int r = parse_bool01(s, &v);
    const char *p = skip_space(s);
    bool ok = *p && strchr("01YyNn", *p) && only_space(p + 1);
    FUZZ_CHECK((r == 0) == ok);
    if (r < 0) {
        FUZZ_CHECK(r == -EINVAL && v == 42);
        return;
    }
    FUZZ_CHECK(v == (strchr("1Yy", *p) != NULL));
}

/* parse_bool: true exactly for the eight words (any case, blanks around). */
static void check_bool(const char *s)
{
    static const char *const words[] = {"yes", "true", "on", "1", "no", "false", "off", "0"};
    bool v = true;
    int r = parse_bool(s, &v);
    char *t = strdup(skip_space(s));
    if (!t)
        abort();
    strip_trailing(t);
    int hit = -1;
    for (int i = 0; i < 8 && hit < 0; i++)
        if (strcasecmp(t, words[i]) == 0)
            hit = i;
    free(t);
    FUZZ_CHECK((r == 0) == (hit >= 0));
    FUZZ_CHECK(r == 0 ? v == (hit < 4) : (r == -EINVAL && v));
}

static void check_strip(const char *s)
{
    char *copy = strdup(s);
    if (!copy)
        abort();
    size_t n = strlen(strip_trailing(copy));
    FUZZ_CHECK(strncmp(copy, s, n) == 0);
    FUZZ_CHECK(only_space(s + n));
    FUZZ_CHECK(n == 0 || !isspace((unsigned char)copy[n - 1]));
    free(copy);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = fuzz_strndup(data, size);
    check_u64(s);
    check_i64(s);
    check_u64_any(s);
    check_double(s);
    check_bool01(s);
    check_bool(s);
    check_strip(s);
    free(s);
    return 0;
}
