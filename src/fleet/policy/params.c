/* The watt policy's tunables: "pack=0.8,over=0.95,..." parsed once, into
 * struct fleet_watt_params, with an error naming the key and the range.
 * Pure. */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "fleet/model/fleet.h"

static const struct {
    const char *key;
    size_t off;
    double lo, hi;
    bool lo_open, whole;
} tunables[] = {
    {"pack", offsetof(struct fleet_watt_params, pack), 0, 1, true, false},
    {"over", offsetof(struct fleet_watt_params, over), 0, 2, true, false},
    {"low", offsetof(struct fleet_watt_params, low), 0, 1, false, false},
    {"quantile", offsetof(struct fleet_watt_params, quantile), 0, 1, true, false},
    {"window", offsetof(struct fleet_watt_params, window), 1, 1000, false, true},
    {"per_vm_day", offsetof(struct fleet_watt_params, per_vm_day), 0, 1000, false, false},
    {"per_tick", offsetof(struct fleet_watt_params, per_tick), 0, 1, false, false},
    {"spare", offsetof(struct fleet_watt_params, spare), 0, 10, false, false},
    {"off_after", offsetof(struct fleet_watt_params, off_after), 0, 1e6, false, false},
};

static char *trim(char *s)
{
    s += strspn(s, " \t");
    size_t n = strlen(s);
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t'))
        s[--n] = '\0';
    return s;
}

/* One "KEY=VALUE" into P. */
static int parse_tunable(char *tok, struct fleet_watt_params *p, struct fleet_error *err)
{
    char *eq = strchr(tok, '=');
    if (!eq) {
        fleet_error_set(err, "'%.40s': want KEY=VALUE", trim(tok));
        return -EINVAL;
    }
    *eq = '\0';
    const char *key = trim(tok), *val = trim(eq + 1);
    for (size_t i = 0; i < ARRAY_SIZE(tunables); i++) {
        if (!streq(key, tunables[i].key))
            continue;
        char *end;
        errno = 0;
        double v = strtod(val, &end);
        if (val[strspn(val, "0123456789.eE+-")] || end == val || *end || errno || !isfinite(v) ||
            v < tunables[i].lo || v > tunables[i].hi ||
            (tunables[i].lo_open && v <= tunables[i].lo) || (tunables[i].whole && v != floor(v))) {
            fleet_error_set(err, "%s = '%.40s': want a%s number in %c%g, %g]", key, val,
                            tunables[i].whole ? " whole" : "", tunables[i].lo_open ? '(' : '[',
                            tunables[i].lo, tunables[i].hi);
            return -EINVAL;
        }
        *(double *)((char *)p + tunables[i].off) = v;
        return 0;
    }
    fleet_error_set(err,
                    "unknown tunable '%.40s' (pack, over, low, quantile, window, per_vm_day, "
                    "per_tick, spare, off_after)",
                    key);
    return -EINVAL;
}

int fleet_watt_params_parse(const char *text, struct fleet_watt_params *ret,
                            struct fleet_error *err)
{
    struct fleet_watt_params p = {
        .pack = 0.80,
        .over = 0.95,
        .low = 0.50,
        .quantile = 0.90,
        .window = 12,
        .per_vm_day = 4,
        .per_tick = 0.25,
        .spare = 0.10,
        .off_after = 2,
    };
    _cleanup_free_ char *copy = xstrdup(text ? text : "");
    char *save = NULL;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (!*trim(tok))
            continue;
        int r = parse_tunable(tok, &p, err);
        if (r < 0)
            return r;
    }
    *ret = p;
    return 0;
}
