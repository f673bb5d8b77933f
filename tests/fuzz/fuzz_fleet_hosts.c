/* Fuzz target: fleet/fleet.h, fleet_hosts_parse() (a --hosts spec: a
 * list, "cloudsim" or an INI text) and, on the same bytes as a string,
 * fleet_policy_parse().
 *
 * Hosts accepted: 1..10,000,000 hosts, 1..65535 types, every host's type
 * in range, every type sane (finite, non-negative, power not falling with
 * load). Refused: -EINVAL, a message naming the input, *ret untouched.
 * Policies accepted: the canonical name parses back to the same policy. */
#include <errno.h>
#include <math.h>

#include "fleet/model/fleet.h"
#include "fuzz.h"

#define ORIGIN "fuzz.ini"

static void check_type(const struct fleet_host_type *t)
{
    FUZZ_CHECK(memchr(t->name, '\0', sizeof(t->name)) && t->name[0]);
    FUZZ_CHECK(t->cores >= 1 && t->ram_mb >= 1);
    FUZZ_CHECK(isfinite(t->mips_per_core) && t->mips_per_core > 0);
    FUZZ_CHECK(isfinite(t->bw_mbit) && t->bw_mbit > 0);
    FUZZ_CHECK(isfinite(t->off_w) && t->off_w >= 0);
    FUZZ_CHECK(isfinite(t->boot_s) && t->boot_s >= 0);
    FUZZ_CHECK(isfinite(t->boot_j) && t->boot_j >= 0);
    for (int i = 0; i < FLEET_POWER_POINTS; i++) {
        FUZZ_CHECK(isfinite(t->power_w[i]) && t->power_w[i] >= 0);
        FUZZ_CHECK(i == 0 || t->power_w[i] >= t->power_w[i - 1]);
    }
}

static void hosts(const uint8_t *data, size_t size)
{
    struct fleet_hosts h, untouched;
    memset(&h, 0xa5, sizeof(h));
    memcpy(&untouched, &h, sizeof(h));
    struct fleet_error err = {{0}};
    int r = fleet_hosts_parse((const char *)data, size, ORIGIN, &h, &err);
    if (r < 0) {
        FUZZ_CHECK(r == -EINVAL);
        FUZZ_CHECK(strncmp(err.msg, ORIGIN, strlen(ORIGIN)) == 0 && err.msg[strlen(ORIGIN)]);
        FUZZ_CHECK(memcmp(&h, &untouched, sizeof(h)) == 0);
        return;
    }
    FUZZ_CHECK(r == 0);
    FUZZ_CHECK(h.n_hosts >= 1 && h.n_hosts <= 10000000);
    FUZZ_CHECK(h.n_types >= 1 && h.n_types <= 65535);
    for (size_t i = 0; i < h.n_types; i++)
        check_type(&h.types[i]);
    for (size_t i = 0; i < h.n_hosts; i++)
        FUZZ_CHECK(h.type_of[i] < h.n_types);
    fleet_hosts_free(&h);
}

static void policy(const uint8_t *data, size_t size)
{
    char *s = fuzz_strndup(data, size);
    struct fleet_policy p, q;
    struct fleet_error err = {{0}};
    int r = fleet_policy_parse(s, &p, &err);
    if (r < 0) {
        FUZZ_CHECK(r == -EINVAL && err.msg[0]);
    } else {
        FUZZ_CHECK(memchr(p.name, '\0', sizeof(p.name)) && p.name[0]);
        FUZZ_CHECK(fleet_policy_parse(p.name, &q, &err) == 0);
        FUZZ_CHECK(strcmp(p.name, q.name) == 0 && p.alloc == q.alloc);
        if (p.alloc == FLEET_MIGRATE) {
            FUZZ_CHECK(p.detector == q.detector && p.selection == q.selection);
            FUZZ_CHECK(isfinite(p.param) && p.param > 0);
            FUZZ_CHECK(p.detector != FLEET_THR || p.param <= 1);
        }
    }
    free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    hosts(data, size);
    policy(data, size);
    return 0;
}
