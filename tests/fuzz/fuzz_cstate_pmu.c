/* Fuzz target: the cstate PMU parsers of sense/cstate_pmu.h on every
 * input: an events/ file name ("c6-residency", NUL-terminated as a
 * directory entry is), and the residency arithmetic on the first 32 bytes
 * read as four counter values (count0, count1, tsc0, tsc1).
 *
 * What the name parser accepts round-trips through "cN-residency"; a
 * residency is a fraction in [0, 1]; outputs are untouched on refusal. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "sense/cstate_pmu.h"

static void check_name(const char *t, size_t n)
{
    char name[256];
    if (n >= sizeof(name))
        n = sizeof(name) - 1;
    memcpy(name, t, n);
    name[n] = '\0';
    char st[8] = "x";
    unsigned num = 12345;
    int r = cstate_pmu_parse_event_name(name, st, &num);
    FUZZ_CHECK(r == 0 || r == -EINVAL);
    if (r < 0) {
        FUZZ_CHECK(st[0] == 'x' && num == 12345);
        return;
    }
    FUZZ_CHECK(st[0] == 'c' && strlen(st) <= 3 && num <= 99);
    char back[32];
    snprintf(back, sizeof(back), "%s-residency", st);
    FUZZ_CHECK(strcmp(back, name) == 0);
    FUZZ_CHECK((unsigned)strtoul(st + 1, NULL, 10) == num);
}

static void check_residency(const uint8_t *d, size_t n)
{
    uint64_t v[4] = {0};
    memcpy(v, d, n < sizeof(v) ? n : sizeof(v));
    double f = -2;
    int r = cstate_pmu_residency(v[0], v[1], v[2], v[3], &f);
    FUZZ_CHECK(r == 0 || r == -EINVAL || r == -ERANGE);
    if (r < 0) {
        FUZZ_CHECK(f == -2);
        return;
    }
    FUZZ_CHECK(f >= 0 && f <= 1 && v[1] >= v[0] && v[3] > v[2]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    check_name((const char *)data, size);
    check_residency(data, size);
    return 0;
}
