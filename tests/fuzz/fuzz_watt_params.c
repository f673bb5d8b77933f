/* Fuzz target: fleet/fleet.h, fleet_watt_params_parse() (the watt
 * policy's tunables: WATT_FLEET_PARAMS and fleet.ini's policy =).
 *
 * Refused: -EINVAL, a message, *ret untouched. Accepted: every tunable in
 * its documented range (finite; window whole), and a round trip: all nine
 * written back with %.17g parse to the same values. */
#include <errno.h>
#include <math.h>
#include <stdbool.h>

#include "fleet/model/fleet.h"
#include "fuzz.h"

static bool in(double v, double lo, double hi, bool lo_open)
{
    return isfinite(v) && v >= lo && v <= hi && (!lo_open || v > lo);
}

static void check_ranges(const struct fleet_watt_params *p)
{
    FUZZ_CHECK(in(p->pack, 0, 1, true));
    FUZZ_CHECK(in(p->over, 0, 2, true));
    FUZZ_CHECK(in(p->low, 0, 1, false));
    FUZZ_CHECK(in(p->quantile, 0, 1, true));
    FUZZ_CHECK(in(p->window, 1, 1000, false) && p->window == floor(p->window));
    FUZZ_CHECK(in(p->per_vm_day, 0, 1000, false));
    FUZZ_CHECK(in(p->per_tick, 0, 1, false));
    FUZZ_CHECK(in(p->spare, 0, 10, false));
    FUZZ_CHECK(in(p->off_after, 0, 1e6, false));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = fuzz_strndup(data, size);
    struct fleet_watt_params p, untouched, q;
    memset(&p, 0xa5, sizeof(p));
    memcpy(&untouched, &p, sizeof(p));
    struct fleet_error err = {{0}};
    int r = fleet_watt_params_parse(text, &p, &err);
    if (r < 0) {
        FUZZ_CHECK(r == -EINVAL && err.msg[0]);
        FUZZ_CHECK(memcmp(&p, &untouched, sizeof(p)) == 0);
    } else {
        FUZZ_CHECK(r == 0);
        check_ranges(&p);
        char back[1024];
        snprintf(back, sizeof(back),
                 "pack=%.17g,over=%.17g,low=%.17g,quantile=%.17g,window=%.17g,per_vm_day=%.17g,"
                 "per_tick=%.17g,spare=%.17g,off_after=%.17g",
                 p.pack, p.over, p.low, p.quantile, p.window, p.per_vm_day, p.per_tick, p.spare,
                 p.off_after);
        FUZZ_CHECK(fleet_watt_params_parse(back, &q, &err) == 0);
        FUZZ_CHECK(memcmp(&p, &q, sizeof(p)) == 0);
    }
    free(text);
    return 0;
}
