/* rapl: the sampler, its wrap-tracking state, and power between samples.
 * Discovery of the two paths lives in rapl_powercap.c and rapl_perf.c. */
#include "sense/rapl.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/parse.h"
#include "base/util.h"

const char *rapl_via_name(enum rapl_via v)
{
    return v == RAPL_VIA_PERF ? "perf" : "powercap";
}

const struct rapl_domain *rapl_find(const struct rapl_sample *s, const char *name)
{
    if (!s)
        return NULL;
    for (unsigned i = 0; i < s->n; i++)
        if (streq(s->v[i].name, name))
            return &s->v[i];
    return NULL;
}

/* ---- pure parsers ---- */

int rapl_text_copy(const char *text, size_t len, char *buf, size_t size)
{
    if (!text || memchr(text, '\0', len))
        return -EINVAL;
    while (len > 0 && isspace((unsigned char)text[len - 1]))
        len--;
    if (len >= size)
        return -EINVAL;
    memcpy(buf, text, len);
    buf[len] = '\0';
    return 0;
}

int rapl_parse_perf_event(const char *text, size_t len, uint64_t *ret_config)
{
    char buf[128];
    int r = rapl_text_copy(text, len, buf, sizeof(buf));
    if (r < 0)
        return r;
    bool have = false;
    uint64_t config = 0;
    char *save = NULL;
    for (char *term = strtok_r(buf, ",", &save); term; term = strtok_r(NULL, ",", &save)) {
        term = (char *)skip_space(term);
        if (strncmp(term, "event=", 6) != 0)
            return strchr(term, '=') || *term ? -EOPNOTSUPP : -EINVAL;
        if (have || parse_u64_any(term + 6, &config) < 0)
            return -EINVAL;
        have = true;
    }
    if (!have)
        return -EINVAL;
    *ret_config = config;
    return 0;
}

/* Counts to joules. powercap counts µJ: divide by 1e6 so that the result
 * is the correctly rounded decimal (240422366267 µJ prints as 240422.366267
 * J, as node_exporter's does); multiplying by 1e-6 is off by one ulp. */
static double rapl_to_joules(uint64_t count, double scale)
{
    return scale == 1e-6 ? (double)count / 1e6 : (double)count * scale;
}

int rapl_parse_scale(const char *text, size_t len, double *ret_scale)
{
    char buf[64];
    double v;
    int r = rapl_text_copy(text, len, buf, sizeof(buf));
    if (r < 0)
        return r;
    r = parse_double(buf, &v);
    if (r < 0)
        return r;
    if (!isfinite(v) || v <= 0)
        return -ERANGE;
    *ret_scale = v;
    return 0;
}

/* A small decimal id ("0", "12") at *p, advancing p. */
static int take_id(const char **p, int *ret)
{
    const char *s = *p;
    int v = 0;
    if (!isdigit((unsigned char)*s))
        return -EINVAL;
    for (; isdigit((unsigned char)*s); s++) {
        v = v * 10 + (*s - '0');
        if (v > 65535)
            return -ERANGE;
    }
    *p = s;
    *ret = v;
    return 0;
}

int rapl_parse_zone_id(const char *text, size_t len, bool *ret_mmio, int *ret_zone, int *ret_sub)
{
    char buf[64];
    if (!text || memchr(text, '\0', len) || len >= sizeof(buf))
        return -EINVAL;
    memcpy(buf, text, len);
    buf[len] = '\0';
    /* "intel-rapl" is the MSR interface; "intel-rapl-mmio" (and any other
     * "intel-rapl-X") a second interface to the same registers. */
    if (strncmp(buf, "intel-rapl", 10) != 0)
        return -EINVAL;
    const char *p = buf + 10;
    bool mmio = false;
    if (*p == '-') {
        mmio = true;
        if (!islower((unsigned char)*++p))
            return -EINVAL;
        while (islower((unsigned char)*p))
            p++;
    }
    if (*p == '\0')
        return -ENOENT; /* the control type directory itself */
    int zone, sub = -1;
    if (*p++ != ':' || take_id(&p, &zone) < 0)
        return -EINVAL;
    if (*p == ':' && (p++, take_id(&p, &sub) < 0))
        return -EINVAL;
    if (*p != '\0')
        return -EINVAL;
    *ret_mmio = mmio;
    *ret_zone = zone;
    *ret_sub = sub;
    return 0;
}

int rapl_parse_zone_name(const char *text, size_t len, enum power_scope *ret_scope,
                         int *ret_package, int *ret_die)
{
    static const struct {
        const char *name;
        enum power_scope scope;
    } plain[] = {
        {"core", POWER_SCOPE_CORE},
        {"uncore", POWER_SCOPE_UNCORE},
        {"dram", POWER_SCOPE_DRAM},
        {"psys", POWER_SCOPE_PSYS},
    };
    char buf[64];
    int r = rapl_text_copy(text, len, buf, sizeof(buf));
    if (r < 0)
        return r;
    for (size_t i = 0; i < ARRAY_SIZE(plain); i++)
        if (streq(buf, plain[i].name)) {
            *ret_scope = plain[i].scope;
            *ret_package = *ret_die = -1;
            return 0;
        }
    if (strncmp(buf, "package-", 8) != 0)
        return -EINVAL;
    const char *p = buf + 8;
    int pkg, die = -1;
    if (take_id(&p, &pkg) < 0)
        return -EINVAL;
    if (strncmp(p, "-die-", 5) == 0) {
        p += 5;
        if (take_id(&p, &die) < 0)
            return -EINVAL;
    }
    if (*p != '\0')
        return -EINVAL;
    *ret_scope = POWER_SCOPE_PACKAGE;
    *ret_package = pkg;
    *ret_die = die;
    return 0;
}

int rapl_delta(uint64_t last, uint64_t raw, uint64_t max_range, uint64_t *ret_delta)
{
    if (max_range != VAL_NONE && (raw > max_range || last > max_range))
        return -ERANGE;
    if (raw >= last) {
        *ret_delta = raw - last;
        return 0;
    }
    if (max_range == VAL_NONE)
        return -ERANGE;
    *ret_delta = raw + (max_range - last);
    return 1;
}

/* ---- state ---- */

struct rapl_track *rapl_state_add(struct rapl_state *st)
{
    st->v = grow_array(st->v, sizeof(*st->v), st->n, &st->cap);
    struct rapl_track *t = &st->v[st->n++];
    memset(t, 0, sizeof(*t));
    t->fd = -1;
    t->d.package = -1;
    t->d.enabled = -1;
    t->d.max_range = VAL_NONE;
    return t;
}

struct rapl_track *rapl_state_find(struct rapl_state *st, const char *name)
{
    for (size_t i = 0; i < st->n; i++)
        if (streq(st->v[i].d.name, name))
            return &st->v[i];
    return NULL;
}

void rapl_state_note(struct rapl_state *st, struct host *h, const char *path, int err,
                     const char *what)
{
    _cleanup_free_ char *where = host_display_path(h, HOST_SYS, path);
    diags_add(&st->notes, where, err, "%s", what);
}

static void rapl_free_state(void *state)
{
    struct rapl_state *st = state;
    if (!st)
        return;
    diags_free(&st->notes);
    for (size_t i = 0; i < st->n; i++) {
        if (st->v[i].fd >= 0)
            close(st->v[i].fd);
        free(st->v[i].static_why);
    }
    free(st->v);
    free(st);
}

static int rapl_probe(struct host *h, void **ret_state, char **ret_reason)
{
    struct rapl_state *st = xcalloc(1, sizeof(*st));
    _cleanup_free_ char *pmu_why = NULL;
    rapl_powercap_discover(h, st);
    rapl_perf_discover(h, st, &pmu_why);
    if (st->n == 0 && st->notes.n > 0) {
        *ret_reason =
            xasprintf("no RAPL domain usable: %s: %s", st->notes.v[0].where, st->notes.v[0].what);
        rapl_free_state(st);
        return 0;
    }
    if (st->n == 0) {
        rapl_free_state(st);
        *ret_reason = pmu_why ? xasprintf("no RAPL: no powercap intel-rapl zone, and %s", pmu_why)
                              : xstrdup("no RAPL: neither powercap intel-rapl zones nor a "
                                        "perf power PMU (a VM, or a CPU without RAPL)");
        return 0;
    }
    *ret_state = st;
    return 1;
}

/* ---- collect ---- */

/* Fold a new raw reading into the track's 64-bit total. */
static void advance(struct rapl_track *t, struct rapl_domain *d, uint64_t raw)
{
    d->raw = raw;
    if (!t->have_last) {
        t->acc = raw;
    } else {
        uint64_t delta;
        int r = rapl_delta(t->last, raw, t->d.max_range, &delta);
        if (r >= 0) {
            t->acc += delta;
            d->wrapped = r == 1;
        } else {
            t->epoch++;
            if (t->d.max_range != VAL_NONE && raw > t->d.max_range)
                d->break_why =
                    xasprintf("counter %llu is above its wrap point %llu", (unsigned long long)raw,
                              (unsigned long long)t->d.max_range);
            else
                d->break_why = xasprintf("counter went backwards (%llu to %llu) and "
                                         "its wrap point is unknown",
                                         (unsigned long long)t->last, (unsigned long long)raw);
        }
    }
    t->have_last = true;
    t->last = raw;
    d->acc = t->acc;
    d->joules = rapl_to_joules(t->acc, t->d.scale);
    d->epoch = t->epoch;
}

static void absent(struct host *h, struct sample *s, struct rapl_domain *d, const char *path,
                   int err, const char *why)
{
    _cleanup_free_ char *where = host_display_path(h, HOST_SYS, path);
    d->why = xstrdup(why);
    diags_add(&s->diags, where, err, "%s", why);
}

static void collect_powercap(struct host *h, struct sample *s, struct rapl_track *t,
                             struct rapl_domain *d)
{
    char path[160];
    uint64_t raw, en;
    snprintf(path, sizeof(path), "%s/enabled", t->dir);
    if (host_read_u64(h, HOST_SYS, path, &en) == 0)
        d->enabled = en != 0;
    snprintf(path, sizeof(path), "%s/energy_uj", t->dir);
    int r = host_read_u64(h, HOST_SYS, path, &raw);
    if (r == 0) {
        advance(t, d, raw);
        return;
    }
    if (r == -EACCES || r == -EPERM)
        absent(h, s, d, path, r,
               "permission denied: energy_uj is root-only since CVE-2020-8694 (run as root)");
    else if (r == -EINVAL || r == -ERANGE)
        absent(h, s, d, path, 0, r == -EINVAL ? "malformed value" : "value out of range");
    else
        absent(h, s, d, path, r, strerror(-r));
}

static void collect_perf(struct host *h, struct sample *s, struct rapl_track *t,
                         struct rapl_domain *d)
{
    if (t->fd < 0) {
        absent(h, s, d, t->dir, t->static_err, t->static_why);
        return;
    }
    uint64_t count;
    ssize_t n = read(t->fd, &count, sizeof(count));
    if (n != (ssize_t)sizeof(count)) {
        int err = n < 0 ? errno : EIO;
        char why[96];
        snprintf(why, sizeof(why), "cannot read the perf counter: %s", strerror(err));
        absent(h, s, d, t->dir, err, why);
        return;
    }
    advance(t, d, count);
}

static int rapl_collect(struct host *h, void *state, struct sample *s)
{
    struct rapl_state *st = state;
    struct rapl_sample *rs = xcalloc(1, sizeof(*rs));
    s->rapl = rs;
    rs->v = xcalloc(st->n ? st->n : 1, sizeof(*rs->v));
    for (size_t i = 0; i < st->notes.n; i++)
        diags_add(&s->diags, st->notes.v[i].where, st->notes.v[i].err, "%s", st->notes.v[i].what);
    unsigned ok = 0;
    for (size_t i = 0; i < st->n; i++) {
        struct rapl_track *t = &st->v[i];
        struct rapl_domain *d = &rs->v[rs->n++];
        *d = t->d;
        d->raw = d->acc = VAL_NONE;
        d->joules = NAN;
        d->epoch = t->epoch;
        if (t->d.via == RAPL_VIA_PERF)
            collect_perf(h, s, t, d);
        else
            collect_powercap(h, s, t, d);
        ok += d->raw != VAL_NONE;
    }
    return ok || st->n == 0 ? 0 : -ENODATA;
}

static void rapl_free_sample(struct sample *s)
{
    struct rapl_sample *rs = s->rapl;
    if (!rs)
        return;
    for (unsigned i = 0; i < rs->n; i++) {
        free(rs->v[i].why);
        free(rs->v[i].break_why);
    }
    free(rs->v);
    free(rs);
    s->rapl = NULL;
}

/* ---- power between samples ---- */

static void fill_reading(struct power_reading *p, const struct rapl_domain *d)
{
    snprintf(p->source, sizeof(p->source), "rapl");
    snprintf(p->via, sizeof(p->via), "%s", rapl_via_name(d->via));
    snprintf(p->domain, sizeof(p->domain), "%s", d->name);
    snprintf(p->label, sizeof(p->label), "%s", d->zone);
    p->scope = d->scope;
    p->package = d->package;
    p->joules = d->joules;
}

static void delta(const struct rapl_domain *x, const struct rapl_domain *y, double interval_s,
                  struct power_reading *p, struct diags *d)
{
    char where[64];
    snprintf(where, sizeof(where), "rapl %s", y->name);
    if (!x) {
        diags_add(d, where, 0, "no energy: the domain is not in the earlier sample");
        return;
    }
    if (x->acc == VAL_NONE || y->acc == VAL_NONE)
        return; /* the failed read is already in the sample's diags */
    if (x->epoch != y->epoch || y->acc < x->acc) {
        diags_add(d, where, 0, "no energy over the interval: %s",
                  y->break_why ? y->break_why : "the counter broke continuity between samples");
        return;
    }
    p->delta_j = rapl_to_joules(y->acc - x->acc, y->scale);
    if (interval_s > 0)
        p->watts = p->delta_j / interval_s;
}

int rapl_power(const struct rapl_sample *a, const struct rapl_sample *b, double interval_s,
               struct power_readings *out, struct diags *d)
{
    const struct rapl_sample *cur = b ? b : a;
    if (!cur)
        return 0;
    for (unsigned i = 0; i < cur->n; i++) {
        const struct rapl_domain *y = &cur->v[i];
        struct power_reading *p = power_readings_add(out);
        fill_reading(p, y);
        if (b)
            delta(rapl_find(a, y->name), y, interval_s, p, d);
    }
    return (int)cur->n;
}

const struct sampler rapl_sampler = {
    .name = "rapl",
    .probe = rapl_probe,
    .collect = rapl_collect,
    .free_sample = rapl_free_sample,
    .free_state = rapl_free_state,
};
