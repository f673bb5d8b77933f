/* Fuzz target: fleet/model/fleet.h, fleet_constraints_parse() (the INI of
 * `watt fleet sim --constraints FILE`) against a fixed trace of 12 VMs
 * (vm0..vm11) on 10 hosts.
 *
 * Accepted: every maintenance flag 0 or 1, every pin -1 or a host index
 * not in maintenance, every group -1 or below n_groups. Refused: -EINVAL,
 * a message naming the input, *ret untouched. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "fleet/model/fleet.h"
#include "fuzz.h"

#define ORIGIN  "fuzz.ini"
#define N_VMS   12
#define N_HOSTS 10

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char names[N_VMS][8];
    static struct fleet_trace_vm vms[N_VMS];
    for (int i = 0; i < N_VMS; i++) {
        snprintf(names[i], sizeof(names[i]), "vm%d", i);
        vms[i] = (struct fleet_trace_vm){.name = names[i], .len = 1};
    }
    struct fleet_trace tr = {
        .origin = "t", .step_s = 300, .n_steps = 1, .vms = vms, .n_vms = N_VMS};
    struct fleet_constraints c, untouched;
    memset(&c, 0xa5, sizeof(c));
    memcpy(&untouched, &c, sizeof(c));
    struct fleet_error err = {{0}};
    int r = fleet_constraints_parse((const char *)data, size, ORIGIN, &tr, N_HOSTS, 7, &c, &err);
    if (r < 0) {
        FUZZ_CHECK(r == -EINVAL);
        FUZZ_CHECK(strncmp(err.msg, ORIGIN, strlen(ORIGIN)) == 0 && err.msg[strlen(ORIGIN)]);
        FUZZ_CHECK(memcmp(&c, &untouched, sizeof(c)) == 0);
        return 0;
    }
    FUZZ_CHECK(r == 0 && c.n_hosts == N_HOSTS && c.n_vms == N_VMS);
    for (int h = 0; h < N_HOSTS; h++)
        FUZZ_CHECK(c.maintenance[h] <= 1);
    for (int v = 0; v < N_VMS; v++) {
        FUZZ_CHECK(c.pin[v] >= -1 && c.pin[v] < N_HOSTS);
        FUZZ_CHECK(c.pin[v] < 0 || !c.maintenance[c.pin[v]]);
        FUZZ_CHECK(c.group[v] >= -1 && c.group[v] < (int32_t)c.n_groups);
    }
    fleet_constraints_free(&c);
    return 0;
}
