/* Small pieces of the fleet model: errors, power interpolation, VM types,
 * defaults, freeing results. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/util.h"
#include "fleet/model/fleet.h"

void fleet_error_set(struct fleet_error *err, const char *fmt, ...)
{
    va_list ap;

    if (!err)
        return;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
    va_end(ap);
}

double fleet_host_type_mips(const struct fleet_host_type *t)
{
    return t->cores * t->mips_per_core;
}

/* The same arithmetic as CloudSim's PowerModelSpecPower.getPower(), so that
 * compat runs round the same way: exact table values on the deciles,
 * linear in between. */
double fleet_host_type_power(const struct fleet_host_type *t, double u)
{
    if (!(u > 0))
        return t->power_w[0];
    if (u >= 1)
        return t->power_w[FLEET_POWER_POINTS - 1];
    double x = u * 10;
    /* Java's u % 0.1 == 0 holds only for exact multiples of the double 0.1,
     * where x is within rounding of an integer: test that cheaply first. */
    if (fabs(x - nearbyint(x)) < 1e-9 && fmod(u, 0.1) == 0)
        return t->power_w[(int)x];
    int lo = (int)x;                /* floor: x > 0 */
    int hi = x == lo ? lo : lo + 1; /* ceil */
    double p1 = t->power_w[lo], p2 = t->power_w[hi];
    double delta = (p2 - p1) / 10;
    return p1 + delta * (u - (double)lo / 10) * 100;
}

/* CloudSim's Constants.VM_*: High-CPU Medium, Extra Large, Small, Micro,
 * with the memory halved "to enable oversubscription". */
const struct fleet_vm_type fleet_vm_types_cloudsim[4] = {
    {"high-cpu-medium", 2500, 1, 870, 100},
    {"extra-large", 2000, 1, 1740, 100},
    {"small", 1000, 1, 1740, 100},
    {"micro", 500, 1, 613, 100},
};

void fleet_options_default(struct fleet_options *o)
{
    *o = (struct fleet_options){
        .compat = false,
        .interval_s = 300,
        .seed = 1,
        .boot_s = -1,
        .boot_j = -1,
        .off_w = -1,
        .max_migrations_per_host = 2,
        .series = true,
    };
}

void fleet_result_free(struct fleet_result *r)
{
    if (!r)
        return;
    free(r->series);
    r->series = NULL;
    r->n_series = 0;
}
