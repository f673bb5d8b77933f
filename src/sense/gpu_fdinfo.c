/* DRM client usage stats from /proc/PID/fdinfo (gpu_fdinfo.h). */
#include "sense/gpu_fdinfo.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"

/* One line split into key and value, both bounded (no NUL in the text). */
struct line {
    const char *key, *val;
    size_t klen, vlen;
};

static bool is_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\r';
}

static bool has_prefix(const struct line *l, const char *p, const char **ret_rest, size_t *ret_n)
{
    size_t n = strlen(p);
    if (l->klen <= n || memcmp(l->key, p, n) != 0)
        return false;
    *ret_rest = l->key + n;
    *ret_n = l->klen - n;
    return true;
}

/* Which unit a value may carry besides none. */
enum unit {
    UNIT_NONE,
    UNIT_NS,  /* drm-engine-: "ns" */
    UNIT_MEM, /* memory: "KiB" or "MiB", scaled to bytes */
};

static int parse_value(const char *v, size_t n, enum unit unit, uint64_t *ret)
{
    size_t i = 0;
    uint64_t x = 0;
    if (!n || v[0] < '0' || v[0] > '9')
        return -EINVAL;
    for (; i < n && v[i] >= '0' && v[i] <= '9'; i++) {
        if (x > (UINT64_MAX - (uint64_t)(v[i] - '0')) / 10)
            return -ERANGE;
        x = x * 10 + (uint64_t)(v[i] - '0');
    }
    while (i < n && is_blank(v[i]))
        i++;
    const char *u = v + i;
    size_t ul = n - i;
    uint64_t scale = 1;
    if (ul == 0)
        scale = 1;
    else if (unit == UNIT_MEM && ul == 3 && memcmp(u, "KiB", 3) == 0)
        scale = 1024;
    else if (unit == UNIT_MEM && ul == 3 && memcmp(u, "MiB", 3) == 0)
        scale = 1024 * 1024;
    else if (unit == UNIT_NS && ul == 2 && memcmp(u, "ns", 2) == 0)
        scale = 1;
    else
        return -EINVAL;
    if (x > UINT64_MAX / scale)
        return -ERANGE;
    *ret = x * scale;
    return 0;
}

/* A name or a one-word value: refused when empty, too long, or holding a
 * blank or a control byte (a NUL would make two names look alike). */
static int copy_str(char *dst, size_t size, const char *s, size_t n)
{
    if (!n || n >= size)
        return -EINVAL;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] <= ' ' || s[i] == 0x7f)
            return -EINVAL;
    memcpy(dst, s, n);
    dst[n] = '\0';
    return 0;
}

static struct gpu_fdinfo_engine *engine_get(struct gpu_fdinfo_client *c, const char *name, size_t n)
{
    for (size_t i = 0; i < c->nengines; i++)
        if (strlen(c->engines[i].name) == n && memcmp(c->engines[i].name, name, n) == 0)
            return &c->engines[i];
    if (c->nengines == GPU_FDINFO_MAX_ENGINES)
        return NULL;
    struct gpu_fdinfo_engine *e = &c->engines[c->nengines];
    if (copy_str(e->name, sizeof(e->name), name, n) < 0)
        return NULL;
    e->busy_ns = e->cycles = e->total_cycles = GPU_FDINFO_NONE;
    e->capacity = 1; /* the spec: a class without the key has one engine */
    c->nengines++;
    return e;
}

static struct gpu_fdinfo_region *region_get(struct gpu_fdinfo_client *c, const char *name, size_t n)
{
    for (size_t i = 0; i < c->nregions; i++)
        if (strlen(c->regions[i].name) == n && memcmp(c->regions[i].name, name, n) == 0)
            return &c->regions[i];
    if (c->nregions == GPU_FDINFO_MAX_REGIONS)
        return NULL;
    struct gpu_fdinfo_region *r = &c->regions[c->nregions];
    if (copy_str(r->name, sizeof(r->name), name, n) < 0)
        return NULL;
    r->total = r->shared = r->resident = r->active = r->purgeable = GPU_FDINFO_NONE;
    c->nregions++;
    return r;
}

/* Engine keys, longest prefix first: "drm-engine-capacity-" before
 * "drm-engine-", "drm-total-cycles-" before "drm-total-". */
static const struct {
    const char *prefix;
    size_t off;
    enum unit unit;
} engine_keys[] = {
    {"drm-engine-capacity-", offsetof(struct gpu_fdinfo_engine, capacity), UNIT_NONE},
    {"drm-engine-", offsetof(struct gpu_fdinfo_engine, busy_ns), UNIT_NS},
    {"drm-total-cycles-", offsetof(struct gpu_fdinfo_engine, total_cycles), UNIT_NONE},
    {"drm-cycles-", offsetof(struct gpu_fdinfo_engine, cycles), UNIT_NONE},
};

static const struct {
    const char *prefix;
    size_t off;
} region_keys[] = {
    {"drm-total-", offsetof(struct gpu_fdinfo_region, total)},
    {"drm-shared-", offsetof(struct gpu_fdinfo_region, shared)},
    {"drm-resident-", offsetof(struct gpu_fdinfo_region, resident)},
    {"drm-memory-", offsetof(struct gpu_fdinfo_region, resident)},
    {"drm-active-", offsetof(struct gpu_fdinfo_region, active)},
    {"drm-purgeable-", offsetof(struct gpu_fdinfo_region, purgeable)},
};

/* A counter key: 1 when it was one (kept or dropped), 0 when not. */
static int take_engine(struct gpu_fdinfo_client *c, const struct line *l)
{
    const char *name;
    size_t n;
    for (size_t k = 0; k < ARRAY_SIZE(engine_keys); k++) {
        if (!has_prefix(l, engine_keys[k].prefix, &name, &n))
            continue;
        uint64_t v;
        struct gpu_fdinfo_engine *e;
        if (parse_value(l->val, l->vlen, engine_keys[k].unit, &v) < 0 ||
            !(e = engine_get(c, name, n)))
            c->dropped++;
        else
            *(uint64_t *)((char *)e + engine_keys[k].off) = v;
        return 1;
    }
    return 0;
}

static int take_region(struct gpu_fdinfo_client *c, const struct line *l)
{
    const char *name;
    size_t n;
    for (size_t k = 0; k < ARRAY_SIZE(region_keys); k++) {
        if (!has_prefix(l, region_keys[k].prefix, &name, &n))
            continue;
        uint64_t v;
        struct gpu_fdinfo_region *r;
        if (parse_value(l->val, l->vlen, UNIT_MEM, &v) < 0 || !(r = region_get(c, name, n))) {
            c->dropped++;
            return 1;
        }
        uint64_t *f = (uint64_t *)((char *)r + region_keys[k].off);
        /* drm-memory- is the older name of drm-resident-: the newer wins */
        if (strcmp(region_keys[k].prefix, "drm-memory-") != 0 || *f == GPU_FDINFO_NONE)
            *f = v;
        return 1;
    }
    return 0;
}

static void take_line(struct gpu_fdinfo_client *c, const struct line *l, bool *have_driver)
{
    if (l->klen == 10 && memcmp(l->key, "drm-driver", 10) == 0) {
        if (copy_str(c->driver, sizeof(c->driver), l->val, l->vlen) == 0)
            *have_driver = true;
        return;
    }
    if (l->klen == 8 && memcmp(l->key, "drm-pdev", 8) == 0) {
        if (copy_str(c->pdev, sizeof(c->pdev), l->val, l->vlen) < 0)
            c->dropped++;
        return;
    }
    if (l->klen == 13 && memcmp(l->key, "drm-client-id", 13) == 0) {
        uint64_t v;
        if (parse_value(l->val, l->vlen, UNIT_NONE, &v) == 0)
            c->client_id = v;
        else
            c->dropped++;
        return;
    }
    /* drm-total-cycles- is an engine key, drm-total- a region key */
    if (take_engine(c, l) || take_region(c, l))
        return;
    /* other drm- keys (drm-client-name, drm-maxfreq-, drm-curfreq-) and
     * driver-specific ones are not used */
}

/* Splits "key:   value  " at the first colon; false when the line has no
 * colon, an empty key or a key with a blank in it. */
static bool split_line(const char *s, size_t n, struct line *ret)
{
    const char *colon = memchr(s, ':', n);
    if (!colon || colon == s)
        return false;
    for (const char *p = s; p < colon; p++)
        if (is_blank(*p))
            return false;
    const char *v = colon + 1, *end = s + n;
    while (v < end && is_blank(*v))
        v++;
    while (end > v && is_blank(end[-1]))
        end--;
    *ret =
        (struct line){.key = s, .klen = (size_t)(colon - s), .val = v, .vlen = (size_t)(end - v)};
    return true;
}

int gpu_fdinfo_parse(const char *text, size_t len, struct gpu_fdinfo_client *ret)
{
    _cleanup_free_ struct gpu_fdinfo_client *c = calloc(1, sizeof(*c));
    if (!c)
        return -ENOMEM;
    c->client_id = GPU_FDINFO_NONE;
    bool have_driver = false;
    const char *p = text, *end = text + len;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
        struct line l;
        if (n > 4 && memcmp(p, "drm-", 4) == 0 && split_line(p, n, &l))
            take_line(c, &l, &have_driver);
        p += n + 1;
    }
    if (!have_driver)
        return -EBADMSG;
    *ret = *c;
    return 0;
}

static bool same_client(const struct gpu_fdinfo_client *a, const struct gpu_fdinfo_client *b)
{
    return a->client_id != GPU_FDINFO_NONE && a->client_id == b->client_id &&
           strcmp(a->driver, b->driver) == 0 && strcmp(a->pdev, b->pdev) == 0;
}

int gpu_fdinfo_read_pid(struct host *h, pid_t pid, struct gpu_fdinfo_client **ret, size_t *ret_n)
{
    char dir[48];
    snprintf(dir, sizeof(dir), "%d/fdinfo", (int)pid);
    char **fds = NULL;
    size_t nfds = 0;
    int r = host_list(h, HOST_PROC, dir, &fds, &nfds);
    if (r < 0)
        return r;
    struct gpu_fdinfo_client *out = NULL;
    size_t n = 0;
    for (size_t i = 0; i < nfds; i++) {
        char path[96];
        _cleanup_free_ char *text = NULL;
        size_t len;
        snprintf(path, sizeof(path), "%s/%s", dir, fds[i]);
        if (host_read(h, HOST_PROC, path, &text, &len) < 0)
            continue; /* closed since the listing, or not readable */
        struct gpu_fdinfo_client c;
        if (gpu_fdinfo_parse(text, len, &c) < 0)
            continue;
        bool dup = false;
        for (size_t j = 0; j < n && !dup; j++)
            dup = same_client(&out[j], &c);
        if (dup)
            continue;
        struct gpu_fdinfo_client *grown = realloc(out, (n + 1) * sizeof(*out));
        if (!grown) {
            r = -ENOMEM;
            break;
        }
        out = grown;
        out[n++] = c;
    }
    host_free_list(fds, nfds);
    if (r < 0) {
        free(out);
        return r;
    }
    *ret = out;
    *ret_n = n;
    return 0;
}
