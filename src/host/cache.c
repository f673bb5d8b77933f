/* The host's read cache: see cache.h and host_cache_*() in host.h. */
#include "host/cache.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/util.h"

/* FNV-1a, then murmur3's finaliser: FNV's low bits (the table index)
 * mix poorly on paths that differ in one digit ("cpu17/.../state2"). */
static uint64_t hash_key(const char *k, size_t len)
{
    uint64_t x = 1469598103934665603ull;
    for (size_t i = 0; i < len; i++) {
        x ^= (unsigned char)k[i];
        x *= 1099511628211ull;
    }
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return x;
}

/* The key: kind and dir as two bytes (never NUL: +1), then the path. */
static size_t make_key(char *buf, size_t size, enum cache_kind kind, enum host_dir d,
                       const char *path)
{
    size_t pl = strlen(path);
    if (pl + 3 > size)
        return 0;
    buf[0] = (char)(kind + 1);
    buf[1] = (char)(d + 1);
    memcpy(buf + 2, path, pl + 1);
    return pl + 2;
}

static void ent_free(struct cache_ent *e)
{
    if (e->fd >= 0)
        close(e->fd);
    free(e->key);
    free(e->data);
    for (size_t i = 0; i < e->nlist; i++)
        free(e->list[i]);
    free(e->list);
}

static void grow(struct host_cache *c)
{
    size_t cap = c->cap ? c->cap * 2 : 1024;
    struct cache_ent *ent = xcalloc(cap, sizeof(*ent));
    for (size_t i = 0; i < c->cap; i++) {
        struct cache_ent *e = &c->ent[i];
        if (!e->key)
            continue;
        size_t j = e->hash & (cap - 1);
        while (ent[j].key)
            j = (j + 1) & (cap - 1);
        ent[j] = *e;
    }
    free(c->ent);
    c->ent = ent;
    c->cap = cap;
}

struct cache_ent *cache_get(struct host_cache *c, enum cache_kind kind, enum host_dir d,
                            const char *path, bool *ret_new)
{
    char key[4200];
    size_t kl = make_key(key, sizeof(key), kind, d, path);
    *ret_new = false;
    if (!kl)
        return NULL;
    if ((c->n + 1) * 2 > c->cap)
        grow(c);
    uint64_t hash = hash_key(key, kl);
    size_t j = hash & (c->cap - 1);
    while (c->ent[j].key) {
        if (c->ent[j].hash == hash && streq(c->ent[j].key, key)) {
            c->hits++;
            return &c->ent[j];
        }
        j = (j + 1) & (c->cap - 1);
    }
    c->misses++;
    c->n++;
    c->ent[j] = (struct cache_ent){.key = xstrdup(key), .hash = hash, .kind = kind, .fd = -1};
    *ret_new = true;
    return &c->ent[j];
}

void cache_clear(struct host_cache *c)
{
    for (size_t i = 0; i < c->cap; i++)
        if (c->ent[i].key)
            ent_free(&c->ent[i]);
    free(c->ent);
    c->ent = NULL;
    c->n = c->cap = 0;
    c->nfds = 0;
    c->stale = false;
    c->drops++;
}
