/* The operator's constraints for the simulator (`watt fleet sim
 * --constraints FILE`): hosts in maintenance, VMs pinned to a host,
 * anti-affinity groups; the same the controller takes from fleet.ini, so
 * that their energy cost can be measured. Pure: the text in, arrays out.
 * Format: docs/fleet-formats.md. */
#include <errno.h>
#include <ini.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/util.h"
#include "fleet/model/fleet.h"
#include "fleet/model/ini_lines.h"

struct cctx {
    const struct fleet_trace *tr;
    size_t n_hosts;
    uint64_t seed;
    struct fleet_constraints c;
    size_t *by_name; /* VM indices sorted by name */
    char msg[400];
    struct fleet_ini_lines lines; /* the reader in front of inih: numbers, long lines */
};

static int cmp_name(const void *a, const void *b, void *arg)
{
    const struct fleet_trace *tr = arg;
    return strcmp(tr->vms[*(const size_t *)a].name, tr->vms[*(const size_t *)b].name);
}

static long find_vm(const struct cctx *x, const char *name)
{
    size_t lo = 0, hi = x->tr->n_vms;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(x->tr->vms[x->by_name[mid]].name, name);
        if (c == 0)
            return (long)x->by_name[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -1;
}

/* A whole number in [0, max) at *S, advancing it. */
static int take_index(const char **s, size_t max, size_t *ret)
{
    const char *p = *s;
    if (*p < '0' || *p > '9')
        return -EINVAL;
    size_t v = 0;
    while (*p >= '0' && *p <= '9') {
        v = v * 10 + (size_t)(*p - '0');
        if (v > max)
            return -ERANGE;
        p++;
    }
    if (v >= max)
        return -ERANGE;
    *s = p;
    *ret = v;
    return 0;
}

/* "0-9, 40": host indices. */
static int on_hosts(struct cctx *x, const char *val)
{
    const char *p = val;
    for (;;) {
        p += strspn(p, " \t");
        size_t a, b;
        int r = take_index(&p, x->n_hosts, &a);
        b = a;
        if (r == 0 && *p == '-') {
            p++;
            r = take_index(&p, x->n_hosts, &b);
        }
        if (r < 0 || b < a) {
            snprintf(x->msg, sizeof(x->msg),
                     "hosts = '%.60s': want host indices 0..%zu as a list (0-9,40)", val,
                     x->n_hosts ? x->n_hosts - 1 : 0);
            return -EINVAL;
        }
        for (size_t h = a; h <= b; h++)
            x->c.maintenance[h] = 1;
        p += strspn(p, " \t");
        if (!*p)
            return 0;
        if (*p++ != ',') {
            snprintf(x->msg, sizeof(x->msg), "hosts = '%.60s': want a list such as 0-9,40", val);
            return -EINVAL;
        }
    }
}

static int join_group(struct cctx *x, long vi, int32_t g, const char *name)
{
    if (x->c.group[vi] >= 0) {
        snprintf(x->msg, sizeof(x->msg), "VM '%.60s' is in two anti-affinity groups", name);
        return -EINVAL;
    }
    x->c.group[vi] = g;
    return 0;
}

/* "random = GxK": G groups of K VMs drawn with the seed. */
static int on_random(struct cctx *x, const char *val)
{
    unsigned long g, k;
    char tail;
    if (sscanf(val, "%lux%lu%c", &g, &k, &tail) != 2 || g == 0 || k < 2 || g > x->tr->n_vms ||
        k > x->tr->n_vms || g * k > x->tr->n_vms) {
        snprintf(x->msg, sizeof(x->msg),
                 "random = '%.40s': want GROUPSxSIZE (e.g. 100x3), SIZE >= 2, at most %zu VMs "
                 "in all",
                 val, x->tr->n_vms);
        return -EINVAL;
    }
    /* a seeded shuffle of the VMs not yet in a group (xorshift64*) */
    size_t n = 0;
    _cleanup_free_ size_t *free_vms = xmalloc((x->tr->n_vms ? x->tr->n_vms : 1) * sizeof(size_t));
    for (size_t vi = 0; vi < x->tr->n_vms; vi++)
        if (x->c.group[vi] < 0)
            free_vms[n++] = vi;
    if (g * k > n) {
        snprintf(x->msg, sizeof(x->msg), "random = %lux%lu: only %zu VMs are in no group", g, k, n);
        return -EINVAL;
    }
    uint64_t s = x->seed * 0x9E3779B97F4A7C15ull + 0x2545F4914F6CDD1Dull;
    for (size_t i = 0; i < g * k; i++) {
        s ^= s >> 12;
        s ^= s << 25;
        s ^= s >> 27;
        size_t j = i + (size_t)((s * 0x2545F4914F6CDD1Dull) % (n - i));
        size_t t = free_vms[i];
        free_vms[i] = free_vms[j];
        free_vms[j] = t;
        x->c.group[free_vms[i]] = (int32_t)(x->c.n_groups + i / k);
    }
    x->c.n_groups += g;
    return 0;
}

static int on_key(struct cctx *x, const char *section, const char *key, const char *val);

/* inih's handler: a long line's value from the reader. */
static int on_entry(void *user, const char *section, const char *key, const char *val)
{
    struct cctx *x = user;
    if (x->msg[0])
        return 0;
    _cleanup_free_ char *long_value = fleet_ini_take_long(&x->lines);
    int r = on_key(x, section, key, long_value ? long_value : val);
    if (x->msg[0])
        x->lines.failed = true; /* the first error is the one to report */
    return r;
}

static int on_key(struct cctx *x, const char *section, const char *key, const char *val)
{
    if (strcasecmp(section, "maintenance") == 0) {
        if (strcmp(key, "hosts") != 0) {
            snprintf(x->msg, sizeof(x->msg), "[maintenance] knows hosts = LIST, not '%.40s'", key);
            return 0;
        }
        return on_hosts(x, val) == 0;
    }
    if (strcasecmp(section, "pin") == 0) {
        long vi = find_vm(x, key);
        const char *p = val;
        size_t h;
        if (vi < 0) {
            snprintf(x->msg, sizeof(x->msg), "[pin] VM '%.60s' is not in the trace", key);
            return 0;
        }
        if (take_index(&p, x->n_hosts, &h) < 0 || *p) {
            snprintf(x->msg, sizeof(x->msg), "[pin] %.60s = '%.40s': want a host index 0..%zu", key,
                     val, x->n_hosts ? x->n_hosts - 1 : 0);
            return 0;
        }
        x->c.pin[vi] = (int32_t)h;
        return 1;
    }
    if (strcasecmp(section, "anti-affinity") == 0) {
        if (strcmp(key, "random") == 0)
            return on_random(x, val) == 0;
        int32_t g = (int32_t)x->c.n_groups++;
        _cleanup_free_ char *copy = xstrdup(val);
        char *save = NULL;
        size_t members = 0;
        for (char *w = strtok_r(copy, " \t,", &save); w; w = strtok_r(NULL, " \t,", &save)) {
            long vi = find_vm(x, w);
            if (vi < 0) {
                snprintf(x->msg, sizeof(x->msg),
                         "[anti-affinity] %.40s: VM '%.60s' is not in "
                         "the trace",
                         key, w);
                return 0;
            }
            if (join_group(x, vi, g, w) < 0)
                return 0;
            members++;
        }
        if (members < 2) {
            snprintf(x->msg, sizeof(x->msg), "[anti-affinity] %.40s: a group needs two VMs or more",
                     key);
            return 0;
        }
        return 1;
    }
    snprintf(x->msg, sizeof(x->msg), "unknown section [%.40s] (maintenance, pin, anti-affinity)",
             section);
    return 0;
}

void fleet_constraints_free(struct fleet_constraints *c)
{
    free(c->maintenance);
    free(c->pin);
    free(c->group);
    *c = (struct fleet_constraints){0};
}

int fleet_constraints_parse(const char *text, size_t len, const char *origin,
                            const struct fleet_trace *tr, size_t n_hosts, uint64_t seed,
                            struct fleet_constraints *ret, struct fleet_error *err)
{
    if (memchr(text, '\0', len)) {
        fleet_error_set(err, "%s: contains a NUL byte", origin);
        return -EINVAL;
    }
    struct cctx x = {.tr = tr, .n_hosts = n_hosts, .seed = seed};
    x.c.n_hosts = n_hosts;
    x.c.n_vms = tr->n_vms;
    x.c.maintenance = xcalloc(n_hosts ? n_hosts : 1, 1);
    x.c.pin = xmalloc((tr->n_vms ? tr->n_vms : 1) * sizeof(int32_t));
    x.c.group = xmalloc((tr->n_vms ? tr->n_vms : 1) * sizeof(int32_t));
    for (size_t vi = 0; vi < tr->n_vms; vi++)
        x.c.pin[vi] = x.c.group[vi] = -1;
    x.by_name = xmalloc((tr->n_vms ? tr->n_vms : 1) * sizeof(size_t));
    for (size_t vi = 0; vi < tr->n_vms; vi++)
        x.by_name[vi] = vi;
    qsort_r(x.by_name, tr->n_vms, sizeof(size_t), cmp_name, (void *)tr);
    _cleanup_free_ char *copy = xstrndup(text, len);
    x.lines = (struct fleet_ini_lines){.pos = copy};
    int line = ini_parse_stream(fleet_ini_read, &x.lines, on_entry, &x);
    fleet_ini_lines_free(&x.lines);
    if (x.lines.why[0] && (line <= 0 || line > x.lines.line)) {
        line = x.lines.line;
        snprintf(x.msg, sizeof(x.msg), "%s", x.lines.why);
    }
    free(x.by_name);
    if (line != 0 || x.msg[0]) {
        if (line > 0)
            fleet_error_set(err, "%s line %d: %s", origin, line,
                            x.msg[0] ? x.msg : "syntax error (want key = value)");
        else
            fleet_error_set(err, "%s: %s", origin, x.msg[0] ? x.msg : "cannot parse");
        fleet_constraints_free(&x.c);
        return -EINVAL;
    }
    for (size_t vi = 0; vi < tr->n_vms; vi++)
        if (x.c.pin[vi] >= 0 && x.c.maintenance[x.c.pin[vi]]) {
            fleet_error_set(err, "%s: VM '%.60s' is pinned to host %d, which is in maintenance",
                            origin, tr->vms[vi].name, x.c.pin[vi]);
            fleet_constraints_free(&x.c);
            return -EINVAL;
        }
    *ret = x.c;
    return 0;
}
