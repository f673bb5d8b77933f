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

/* Why a zone was skipped: the file at fault (under HOST_SYS) and why. */
struct skip {
    char path[160];
    int err;
    const char *why;
};

static int skip(struct skip *sk, const char *entry, const char *file, int r, const char *why)
{
    snprintf(sk->path, sizeof(sk->path), POWERCAP "/%s/%s", entry, file);
    sk->err = r == -EINVAL || r == -ERANGE ? 0 : -r;
    sk->why = why;
    return r;
}

/* Name, scope and package of a zone. A subzone belongs to its parent's
 * package: "intel-rapl:1:0" named "dram" under "package-1" is "dram-1".
 * On failure *sk says which file and why. */
static int describe(struct host *h, const char *entry, int sub, struct rapl_domain *d,
                    struct skip *sk)
{
    enum power_scope scope;
    int pkg, die;
    int r = read_zone_name(h, entry, &scope, &pkg, &die);
    if (r < 0)
        return skip(sk, entry, "name", r,
                    r == -EINVAL || r == -ERANGE ? "not a RAPL domain name watt knows: zone skipped"
                                                 : "cannot read the zone's name: zone skipped");
    bool top_kind = scope == POWER_SCOPE_PACKAGE || scope == POWER_SCOPE_PSYS;
    if ((sub < 0) != top_kind)
        return skip(sk, entry, "name", -EINVAL,
                    sub < 0 ? "a subzone's name (core, uncore, dram) on a top-level zone: "
                              "zone skipped"
                            : "a package or psys name on a subzone: zone skipped");
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
        if (r == 0 && pscope != POWER_SCOPE_PACKAGE)
            r = -EINVAL;
        if (r < 0)
            return skip(sk, parent, "name", r,
                        r == -ENOENT ? "a subzone's parent zone is missing: subzone skipped"
                                     : "a subzone's parent zone has no package name: subzone "
                                       "skipped");
    }
    package_name(d->name, sizeof(d->name), power_scope_name(scope), pkg, die);
    d->package = pkg;
    return 0;
}

static void add_zone(struct host *h, struct rapl_state *st, const char *entry, int sub, bool mmio)
{
    struct rapl_domain d = {.package = -1};
    char dir[128];
    snprintf(dir, sizeof(dir), POWERCAP "/%s", entry);
    struct skip sk;
    if (describe(h, entry, sub, &d, &sk) < 0) {
        rapl_state_note(st, h, sk.path, sk.err, sk.why);
        return;
    }
    /* intel-rapl-mmio repeats package-N of the MSR interface: first wins.
     * Two MSR zones of one name are not a repeat: say which is dropped. */
    struct rapl_track *dup = rapl_state_find(st, d.name);
    if (dup) {
        if (!mmio && dup->d.via == RAPL_VIA_POWERCAP) {
            char path[160], why[160];
            snprintf(path, sizeof(path), "%s/name", dir);
            snprintf(why, sizeof(why), "the same domain as %s (%s): zone skipped", dup->d.zone,
                     d.name);
            rapl_state_note(st, h, path, 0, why);
        }
        return;
    }
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
    int r = host_read_u64(h, HOST_SYS, path, &max);
    /* Kept without it: energy_uj still gives watts until it wraps, and a
     * wrap then breaks continuity with a reason instead of a wrong delta. */
    if (r == 0 && max > 0)
        t->d.max_range = max;
    else
        rapl_state_note(st, h, path, r < 0 && r != -EINVAL && r != -ERANGE ? r : 0,
                        r == -ENOENT ? "missing: wrap point unknown, a wrap of energy_uj will "
                                       "break the energy total"
                                     : "not a positive number: wrap point unknown, a wrap of "
                                       "energy_uj will break the energy total");
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
            int r = rapl_parse_zone_id(names[i], strlen(names[i]), &mmio, &zone, &sub);
            /* "intel-rapl" itself (-ENOENT) and other control types (dtpm,
             * not RAPL) are not zones; "intel-rapl:x", "intel-rapl:0:0:0"
             * are zones watt cannot place: named, once. */
            if (r == -EINVAL && pass == 0 && strncmp(names[i], "intel-rapl", 10) == 0) {
                char path[160];
                snprintf(path, sizeof(path), POWERCAP "/%s", names[i]);
                for (char *c = path; *c; c++) /* a name from the tree: printable only */
                    if ((unsigned char)*c < 0x20 || (unsigned char)*c >= 0x7f)
                        *c = '?';
                rapl_state_note(st, h, path, 0,
                                "not a zone name watt can parse (intel-rapl:N or "
                                "intel-rapl:N:M): zone skipped");
            }
            if (r < 0)
                continue;
            if (mmio == (pass == 1))
                add_zone(h, st, names[i], sub, mmio);
        }
    host_free_list(names, n);
}
