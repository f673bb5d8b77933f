/* Fuzz target: /proc/cpuinfo, read by two parsers: cpuinfo_parse()
 * (sense/clock.h: vendor, model, TSC flags) and cpufreq_parse_cpuinfo_mhz()
 * (sense/cpufreq.h: "cpu MHz" per processor).
 *
 * The input is passed with its exact length and no NUL (ASan catches a
 * read past the end). Accepted: at least one processor, only TSCF_* bits,
 * one-line strings, MHz finite and per processor, never more MHz entries
 * than processors. Refused: only -EINVAL, with *ret untouched. */
#include <errno.h>
#include <math.h>
#include <stdbool.h>

#include "base/cpuset.h"
#include "fuzz.h"
#include "sense/clock.h"
#include "sense/cpufreq.h"

#define TSCF_ALL 0x7fu

static void check_string(const char *s)
{
    if (!s)
        return;
    size_t n = strlen(s);
    FUZZ_CHECK(n > 0 && !strchr(s, '\n'));
    FUZZ_CHECK(s[n - 1] != ' ' && s[n - 1] != '\t' && s[n - 1] != '\r');
}

/* Returns nprocessors, or -1 when refused. */
static long check_cpuinfo(const uint8_t *data, size_t size)
{
    struct cpuinfo ci;
    memset(&ci, 0xa5, sizeof(ci));
    struct cpuinfo untouched = ci;
    int r = cpuinfo_parse((const char *)data, size, &ci);
    if (r < 0) {
        FUZZ_CHECK(r == -EINVAL);
        FUZZ_CHECK(memcmp(&ci, &untouched, sizeof(ci)) == 0);
        return -1;
    }
    FUZZ_CHECK(r == 0 && ci.nprocessors >= 1);
    FUZZ_CHECK((ci.flags & ~TSCF_ALL) == 0);
    FUZZ_CHECK(ci.has_flags || (ci.flags == 0 && ci.ndisagree == 0));
    FUZZ_CHECK(ci.ndisagree > 0 || ci.first_disagree == -1);
    check_string(ci.vendor);
    check_string(ci.model);
    long n = ci.nprocessors;
    cpuinfo_clear(&ci);
    return n;
}

static void check_mhz(const uint8_t *data, size_t size, long nprocessors)
{
    struct cpufreq_mhz *v = (struct cpufreq_mhz *)0x1;
    size_t n = 77;
    int r = cpufreq_parse_cpuinfo_mhz((const char *)data, size, &v, &n);
    if (r < 0) {
        FUZZ_CHECK(r == -EINVAL);
        FUZZ_CHECK(v == (struct cpufreq_mhz *)0x1 && n == 77);
        return;
    }
    FUZZ_CHECK((size_t)r == n && (n == 0) == (v == NULL));
    for (size_t i = 0; i < n; i++) {
        FUZZ_CHECK(v[i].cpu >= 0 && v[i].cpu <= CPUSET_MAX_CPU);
        FUZZ_CHECK(isfinite(v[i].mhz) && v[i].mhz >= 0);
    }
    /* each MHz entry follows its own "processor" line */
    FUZZ_CHECK(n == 0 || (nprocessors >= 0 && n <= (size_t)nprocessors));
    free(v);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    check_mhz(data, size, check_cpuinfo(data, size));
    return 0;
}
