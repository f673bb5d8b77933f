/* The host's read cache, for a long-running sampler (the agent): what
 * cannot have changed between two samples is read once, what moves is
 * re-read through a file kept open. Internal to the host layer; the API
 * is host_cache_*() in host.h. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "host/host.h"

enum cache_kind {
    CACHE_CONTENT, /* a static file's content, or the error reading it gave */
    CACHE_LIST,    /* a directory's names */
    CACHE_LINK,    /* a symlink's target */
    CACHE_STAT,    /* exists / is a directory */
    CACHE_DIR,     /* an O_PATH directory fd (host_dir_open) */
    CACHE_FD,      /* a moving file: kept open, re-read with pread */
    _CACHE_KIND_MAX,
};

struct cache_ent {
    char *key; /* kind + 1, dir + 1, then the path */
    uint64_t hash;
    enum cache_kind kind;
    int err;      /* the -errno the first look gave (static kinds) */
    int fd;       /* CACHE_FD, CACHE_DIR: -1 when none is kept */
    bool ok;      /* CACHE_FD: a read once succeeded, so a vanishing is news */
    bool refetch; /* CONTENT: written since (host_write): read it again */
    char *data;   /* CONTENT, LINK */
    size_t len;   /* CONTENT */
    char **list;  /* LIST */
    size_t nlist;
    unsigned mode;    /* STAT: st_mode */
    uint64_t read_ns; /* FD under HOST_CACHE_SLOW: when data was read; 0 none */
};

struct host_cache {
    struct cache_ent *ent; /* open addressing, cap a power of two */
    size_t n, cap;
    unsigned max_fds; /* kept-open budget */
    unsigned nfds;
    uint64_t slow_ns;  /* HOST_CACHE_SLOW's age (host_cache_slow) */
    bool stale;        /* a kept file vanished: rescan before the next sample */
    uint64_t since_ns; /* CLOCK_MONOTONIC of the last drop */
    uint64_t hits, misses, drops;
};

/* The entry for (kind, d, path), made empty when missing and *ret_new set. */
struct cache_ent *cache_get(struct host_cache *c, enum cache_kind kind, enum host_dir d,
                            const char *path, bool *ret_new);
void cache_clear(struct host_cache *c);
