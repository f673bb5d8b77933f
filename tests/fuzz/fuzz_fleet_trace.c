/* Fuzz target: fleet/fleet.h, fleet_trace_parse_planetlab() and
 * fleet_trace_parse_csv(). Both run on every input, which is passed with
 * its exact length and no NUL (ASan catches a read past the end).
 *
 * Accepted: every sample in 0..10000 (0.01 % units; PlanetLab's whole
 * percentages), VMs packed one after another in cpu[], each inside the
 * horizon, the horizon reached by one of them. A PlanetLab file appended
 * twice lands twice, unchanged. Refused: -EINVAL, a message naming the
 * input, and the trace untouched. */
#include <errno.h>
#include <math.h>

#include "fleet/model/fleet.h"
#include "fuzz.h"

#define NAME   "day/vm file"
#define ORIGIN "fuzz.csv"

static void check_trace(const struct fleet_trace *t, size_t size)
{
    FUZZ_CHECK(t->n_vms >= 1 && t->step_s > 0 && isfinite(t->step_s));
    FUZZ_CHECK(t->n_steps >= 1);
    size_t off = 0;
    uint32_t horizon = 0;
    for (size_t v = 0; v < t->n_vms; v++) {
        const struct fleet_trace_vm *vm = &t->vms[v];
        FUZZ_CHECK(vm->name && vm->name[0]);
        FUZZ_CHECK(vm->off == off && vm->len >= 1);
        FUZZ_CHECK((uint64_t)vm->first + vm->len <= t->n_steps);
        if (vm->first + vm->len > horizon)
            horizon = vm->first + vm->len;
        for (uint32_t k = 0; k < vm->len; k++)
            FUZZ_CHECK(t->cpu[vm->off + k] <= 10000);
        FUZZ_CHECK(fleet_trace_at(t, v, vm->first) == t->cpu[vm->off] / FLEET_CPU_SCALE);
        FUZZ_CHECK(fleet_trace_at(t, v, vm->first + vm->len) == 0);
        off += vm->len;
    }
    FUZZ_CHECK(horizon == t->n_steps);
    FUZZ_CHECK(off <= size); /* every sample takes at least one byte */
}

static void planetlab(const uint8_t *data, size_t size)
{
    struct fleet_trace t = {.step_s = 300};
    struct fleet_error err = {{0}};
    int r = fleet_trace_parse_planetlab((const char *)data, size, NAME, &t, &err);
    if (r < 0) {
        FUZZ_CHECK(r == -EINVAL && t.n_vms == 0);
        FUZZ_CHECK(strncmp(err.msg, NAME, strlen(NAME)) == 0);
        fleet_trace_free(&t);
        return;
    }
    FUZZ_CHECK(r == 0 && t.n_vms == 1 && strcmp(t.vms[0].name, "vm file") == 0);
    FUZZ_CHECK(t.vms[0].first == 0 && t.vms[0].len <= 100000 && t.n_steps == t.vms[0].len);
    check_trace(&t, size);
    for (uint32_t k = 0; k < t.vms[0].len; k++)
        FUZZ_CHECK(t.cpu[k] % 100 == 0);
    FUZZ_CHECK(fleet_trace_parse_planetlab((const char *)data, size, NAME, &t, &err) == 0);
    FUZZ_CHECK(t.n_vms == 2 && t.vms[1].off == t.vms[0].len && t.vms[1].len == t.vms[0].len);
    FUZZ_CHECK(memcmp(t.cpu, t.cpu + t.vms[1].off, t.vms[0].len * sizeof(*t.cpu)) == 0);
    fleet_trace_free(&t);
}

static void csv(const uint8_t *data, size_t size)
{
    struct fleet_trace t, untouched;
    memset(&t, 0xa5, sizeof(t));
    memcpy(&untouched, &t, sizeof(t));
    struct fleet_error err = {{0}};
    int r = fleet_trace_parse_csv((const char *)data, size, ORIGIN, &t, &err);
    if (r < 0) {
        FUZZ_CHECK(r == -EINVAL);
        FUZZ_CHECK(strncmp(err.msg, ORIGIN, strlen(ORIGIN)) == 0);
        FUZZ_CHECK(memcmp(&t, &untouched, sizeof(t)) == 0);
        return;
    }
    FUZZ_CHECK(r == 0 && strcmp(t.origin, ORIGIN) == 0);
    FUZZ_CHECK(t.step_s == floor(t.step_s));
    check_trace(&t, size);
    fleet_trace_free(&t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    planetlab(data, size);
    csv(data, size);
    return 0;
}
