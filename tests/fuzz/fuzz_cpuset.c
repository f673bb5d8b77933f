/* Fuzz target: base/cpuset.h, the kernel's cpulist format ("0-3,8,10-11").
 *
 * What is accepted has only ids up to CPUSET_MAX_CPU, iterates to exactly
 * cpuset_count() members in rising order, and formats to a canonical list
 * that parses back to the same set and formats to the same text again. */
#include <ctype.h>
#include <errno.h>
#include <stdbool.h>

#include "base/cpuset.h"
#include "fuzz.h"

/* The grammar, written again: [space] [id[-id] {,id[-id]}] [space], ids
 * 0..CPUSET_MAX_CPU (leading zeros allowed), lo <= hi. Fills in[]; -1 if
 * the text is not a cpulist. */
static int ref_id(const char **p, unsigned *ret)
{
    unsigned long v = 0;
    if (!isdigit((unsigned char)**p))
        return -1;
    for (; isdigit((unsigned char)**p); (*p)++)
        if ((v = v * 10 + (unsigned long)(**p - '0')) > CPUSET_MAX_CPU)
            return -1;
    *ret = (unsigned)v;
    return 0;
}

static int ref_parse(const char *p, bool *in)
{
    while (isspace((unsigned char)*p))
        p++;
    while (isdigit((unsigned char)*p)) {
        unsigned lo, hi;
        if (ref_id(&p, &lo) < 0)
            return -1;
        hi = lo;
        if (*p == '-' && (p++, ref_id(&p, &hi) < 0 || hi < lo))
            return -1;
        for (unsigned c = lo; c <= hi; c++)
            in[c] = true;
        if (*p != ',')
            break;
        if (!isdigit((unsigned char)*++p))
            return -1;
    }
    while (isspace((unsigned char)*p))
        p++;
    return *p ? -1 : 0;
}

static void check_same(const struct cpuset *a, const struct cpuset *b)
{
    FUZZ_CHECK(cpuset_count(a) == cpuset_count(b));
    for (int cpu = cpuset_next(a, -1); cpu >= 0; cpu = cpuset_next(a, cpu))
        FUZZ_CHECK(cpuset_has(b, (unsigned)cpu));
}

/* Canonical: digits, commas and dashes; ranges "a-b" only with a < b, in
 * rising order with a gap between them (never "3,4" or "0-3,4-5"). */
static void check_canonical(const char *text)
{
    long prev_hi = -2;
    for (const char *p = text; *p;) {
        FUZZ_CHECK(isdigit((unsigned char)*p));
        char *e;
        long lo = strtol(p, &e, 10), hi = lo;
        if (*e == '-') {
            FUZZ_CHECK(isdigit((unsigned char)e[1]));
            hi = strtol(e + 1, &e, 10);
            FUZZ_CHECK(lo < hi);
        }
        FUZZ_CHECK(lo > prev_hi + 1);
        prev_hi = hi;
        FUZZ_CHECK(*e == '\0' || (*e == ',' && e[1]));
        p = *e ? e + 1 : e;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = fuzz_strndup(data, size);
    struct cpuset set = {.bits = (uint64_t *)0x1, .nwords = 77};
    int r = cpuset_parse(s, &set);
    FUZZ_CHECK(r == 0 || r == -EINVAL || r == -ERANGE);
    static bool in[CPUSET_MAX_CPU + 1];
    memset(in, 0, sizeof(in));
    FUZZ_CHECK((r == 0) == (ref_parse(s, in) == 0));
    if (r < 0) {
        FUZZ_CHECK(set.bits == (uint64_t *)0x1 && set.nwords == 77);
        free(s);
        return 0;
    }

    unsigned n = 0;
    int prev = -1;
    for (int cpu = cpuset_next(&set, -1); cpu >= 0; cpu = cpuset_next(&set, cpu)) {
        FUZZ_CHECK(cpu > prev && cpu <= CPUSET_MAX_CPU);
        FUZZ_CHECK(cpuset_has(&set, (unsigned)cpu) && in[cpu]);
        prev = cpu;
        n++;
    }
    FUZZ_CHECK(n == cpuset_count(&set));
    unsigned nref = 0;
    for (unsigned c = 0; c <= CPUSET_MAX_CPU; c++)
        nref += in[c];
    FUZZ_CHECK(n == nref);
    FUZZ_CHECK(!cpuset_has(&set, CPUSET_MAX_CPU + 1));

    char *text = cpuset_format(&set);
    FUZZ_CHECK(text != NULL);
    check_canonical(text);
    struct cpuset back;
    FUZZ_CHECK(cpuset_parse(text, &back) == 0);
    check_same(&set, &back);
    check_same(&back, &set);
    char *again = cpuset_format(&back);
    FUZZ_CHECK(strcmp(text, again) == 0);

    /* The kernel ends the line with '\n'; that must not change anything. */
    size_t len = strlen(text);
    char *nl = malloc(len + 2);
    if (!nl)
        abort();
    memcpy(nl, text, len);
    memcpy(nl + len, "\n", 2);
    struct cpuset with_nl;
    FUZZ_CHECK(cpuset_parse(nl, &with_nl) == 0);
    check_same(&set, &with_nl);

    cpuset_free(&with_nl);
    free(nl);
    free(again);
    free(text);
    cpuset_free(&back);
    cpuset_free(&set);
    cpuset_free(&set); /* destructors accept an already freed set */
    free(s);
    return 0;
}
