/* rapl via powercap sysfs: find the zones under /sys/class/powercap and
 * name them the way watt does ("package-0", "dram-0", "psys"). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "sense/rapl.h"

#define POWERCAP "class/powercap"

static int read_zone_name(struct host *h, const char *entry, enum power_scope *scope, int *pkg,
                          int *die)
{
    _cleanup_free_ char *s = NULL;
    int r = host_read_strf(h, HOST_SYS, &s, POWERCAP "/%s/name", entry);
    if (r < 0)
        return r;
    return rapl_parse_zone_name(s, strlen(s), scope, pkg, die);
}

/* "package-0", "package-0-die-1", or with a kind before the suffix:
 * "dram-0", "core-0-die-1". */
static void package_name(char *buf, size_t size, const char *kind, int pkg, int die)
{
    if (die >= 0)
        snprintf(buf, size, "%s-%d-die-%d", kind, pkg, die);
    else
        snprintf(buf, size, "%s-%d", kind, pkg);
}

/* Name, scope and package of a zone. A subzone belongs to its parent's
 * package: "intel-rapl:1:0" named "dram" under "package-1" is "dram-1". */
static int describe(struct host *h, const char *entry, int sub, struct rapl_domain *d)
{
    enum power_scope scope;
    int pkg, die;
    int r = read_zone_name(h, entry, &scope, &pkg, &die);
    if (r < 0)
        return r;
    bool top_kind = scope == POWER_SCOPE_PACKAGE || scope == POWER_SCOPE_PSYS;
    if ((sub < 0) != top_kind)
        return -EINVAL; /* a "core" zone at the top, or a "package-0" under one */
    d->scope = scope;
    if (scope == POWER_SCOPE_PSYS) {
        snprintf(d->name, sizeof(d->name), "psys");
        return 0;
    }
    if (sub >= 0) {
        char parent[64];
        snprintf(parent, sizeof(parent), "%s", entry);
        *strrchr(parent, ':') = '\0';
        enum power_scope pscope;
        r = read_zone_name(h, parent, &pscope, &pkg, &die);
        if (r < 0)
            return r;
        if (pscope != POWER_SCOPE_PACKAGE)
            return -EINVAL;
    }
    package_name(d->name, sizeof(d->name), power_scope_name(scope), pkg, die);
    d->package = pkg;
    return 0;
}

static void add_zone(struct host *h, struct rapl_state *st, const char *entry, int sub)
{
    struct rapl_domain d = {.package = -1};
    char dir[128];
    snprintf(dir, sizeof(dir), POWERCAP "/%s", entry);
    int r = describe(h, entry, sub, &d);
    if (r < 0) {
        char path[160];
        snprintf(path, sizeof(path), "%s/name", dir);
        rapl_state_note(st, h, path, r == -EINVAL ? 0 : r,
                        r == -EINVAL ? "not a RAPL domain name watt knows: zone skipped"
                                     : "cannot read the zone's name: zone skipped");
        return;
    }
    /* intel-rapl-mmio repeats package-N of the MSR interface: first wins */
    if (rapl_state_find(st, d.name))
        return;
    struct rapl_track *t = rapl_state_add(st);
    snprintf(t->d.name, sizeof(t->d.name), "%s", d.name);
    snprintf(t->d.zone, sizeof(t->d.zone), "%s", entry);
    snprintf(t->dir, sizeof(t->dir), "%s", dir);
    t->d.via = RAPL_VIA_POWERCAP;
    t->d.scope = d.scope;
    t->d.package = d.package;
    t->d.scale = 1e-6; /* µJ */
    char path[160];
    snprintf(path, sizeof(path), "%s/max_energy_range_uj", dir);
    uint64_t max;
    r = host_read_u64(h, HOST_SYS, path, &max);
    if (r == 0 && max > 0)
        t->d.max_range = max;
    else
        rapl_state_note(st, h, path, r < 0 && r != -EINVAL ? r : 0,
                        "wrap point unknown: a wrap of energy_uj will break the energy total");
}

void rapl_powercap_discover(struct host *h, struct rapl_state *st)
{
    char **names;
    size_t n;
    if (host_list(h, HOST_SYS, POWERCAP, &names, &n) < 0)
        return;
    /* The MSR interface first, then the others (which sort first). */
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; i < n; i++) {
            bool mmio;
            int zone, sub;
            if (rapl_parse_zone_id(names[i], strlen(names[i]), &mmio, &zone, &sub) < 0)
                continue; /* "intel-rapl" itself, or another control type */
            if (mmio == (pass == 1))
                add_zone(h, st, names[i], sub);
        }
    host_free_list(names, n);
}
