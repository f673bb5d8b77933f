#include "sense/power_reading.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"

struct power_reading *power_readings_add(struct power_readings *r)
{
    r->v = grow_array(r->v, sizeof(*r->v), r->n, &r->cap);
    struct power_reading *p = &r->v[r->n++];
    memset(p, 0, sizeof(*p));
    p->package = -1;
    p->joules = p->delta_j = p->watts = p->period = NAN;
    return p;
}

unsigned power_readings_mark_stuck(struct power_readings *r, double busy_cpus)
{
    if (busy_cpus == 0)
        return 0; /* every CPU idle for every tick: a still counter is plausible */
    unsigned n = 0;
    for (size_t i = 0; i < r->n; i++) {
        struct power_reading *p = &r->v[i];
        if (isnan(p->delta_j) || p->delta_j != 0)
            continue;
        p->stuck = true;
        p->delta_j = p->watts = NAN;
        n++;
    }
    return n;
}

void power_readings_free(struct power_readings *r)
{
    free(r->v);
    *r = (struct power_readings){0};
}

const char *power_scope_name(enum power_scope s)
{
    static const char *const names[] = {
        [POWER_SCOPE_PACKAGE] = "package", [POWER_SCOPE_CORE] = "core",
        [POWER_SCOPE_UNCORE] = "uncore",   [POWER_SCOPE_DRAM] = "dram",
        [POWER_SCOPE_PSYS] = "psys",       [POWER_SCOPE_PLATFORM] = "platform",
        [POWER_SCOPE_DEVICE] = "device",
    };
    return names[s];
}
