/* Fuzz target: host/isolation.h, the kernel command line's isolcpus= and
 * nohz_full= in the kernel's cpu-list grammar ("N", "all", "a-b:u/g").
 *
 * The first byte picks nr_cpu_ids (1..256); the rest is the text, read
 * both as a whole command line and as one parameter's value. Whatever is
 * accepted names only CPUs below nr_cpu_ids; a plain cpulist (digits,
 * '-', ',') is read exactly as base/cpuset.h reads it. */
#include <errno.h>
#include <stdbool.h>

#include "base/cpuset.h"
#include "fuzz.h"
#include "host/isolation.h"

static void check_below(const struct cpuset *s, unsigned ncpu)
{
    CPUSET_FOREACH (cpu, s)
        FUZZ_CHECK((unsigned)cpu < ncpu);
}

static bool plain(const char *s)
{
    for (; *s; s++)
        if (!((*s >= '0' && *s <= '9') || *s == '-' || *s == ','))
            return false;
    return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    unsigned ncpu = 1u + data[0];
    char *s = fuzz_strndup(data + 1, size - 1);

    struct cpuset cmd = {.bits = (uint64_t *)0x1, .nwords = 77};
    int bad = isolation_parse_cmdline(s, ncpu, &cmd);
    FUZZ_CHECK(bad >= 0);
    check_below(&cmd, ncpu);
    cpuset_free(&cmd);

    struct cpuset one = {.bits = (uint64_t *)0x1, .nwords = 77};
    int r = isolation_parse_cpulist(s, strlen(s), ncpu, &one);
    FUZZ_CHECK(r == 0 || r == -EINVAL || r == -ERANGE);
    if (r < 0) {
        FUZZ_CHECK(one.bits == (uint64_t *)0x1 && one.nwords == 77);
    } else {
        check_below(&one, ncpu);
        struct cpuset ref;
        if (plain(s) && *s && cpuset_parse(s, &ref) == 0) {
            FUZZ_CHECK(cpuset_count(&ref) == cpuset_count(&one));
            CPUSET_FOREACH (cpu, &ref)
                FUZZ_CHECK(cpuset_has(&one, (unsigned)cpu));
            cpuset_free(&ref);
        }
        /* the same value as a boot parameter is read the same way */
        char *line = malloc(strlen(s) + 16);
        if (!line)
            abort();
        snprintf(line, strlen(s) + 16, "ro nohz_full=%s", s);
        if (!strpbrk(s, " \t\n\v\f\r\"")) {
            FUZZ_CHECK(isolation_parse_cmdline(line, ncpu, &cmd) == 0);
            FUZZ_CHECK(cpuset_count(&cmd) == cpuset_count(&one));
            cpuset_free(&cmd);
        }
        free(line);
        cpuset_free(&one);
    }
    free(s);
    return 0;
}
