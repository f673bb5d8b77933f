#include "sense/kallsyms.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/parse.h"
#include "base/util.h"

#define KSYM_CHUNK      (64u << 10)
#define KSYM_FIRST_SLOT 256
#define KSYM_NAME_SIZE  64

struct ksym_slot {
    uint64_t addr;
    bool used, resolved;
    char name[KSYM_NAME_SIZE];
};

int ksym_parse_line(const char *p, size_t len, uint64_t *addr, const char **name, size_t *name_len,
                    const char **mod, size_t *mod_len)
{
    const char *e = p + len, *q = p;
    uint64_t a = 0;
    for (; q < e && *q != ' '; q++) {
        int v = hex_digit_value(*q);
        if (v < 0 || q - p >= 16)
            return -EINVAL;
        a = a << 4 | (uint64_t)v;
    }
    /* "ADDR T NAME": one type letter between single spaces */
    if (q == p || e - q < 4 || q[2] != ' ')
        return -EINVAL;
    const char *n = q + 3, *ne = n;
    while (ne < e && *ne != '\t' && *ne != ' ' && *ne != '\n')
        ne++;
    if (ne == n)
        return -EINVAL;
    const char *m = NULL, *me = NULL;
    if (ne < e && *ne == '\t' && ne + 1 < e && ne[1] == '[') {
        m = ne + 2;
        me = memchr(m, ']', (size_t)(e - m));
        if (!me)
            m = me = NULL;
    }
    *addr = a;
    *name = n;
    *name_len = (size_t)(ne - n);
    *mod = m;
    *mod_len = m ? (size_t)(me - m) : 0;
    return 0;
}

typedef bool (*ksym_fn)(void *ud, uint64_t addr, const char *name, size_t nlen, const char *mod,
                        size_t mlen);

static void scan_lines(char *buf, size_t *len, ksym_fn fn, void *ud, bool *stop)
{
    char *p = buf, *end = buf + *len;
    for (char *nl; !*stop && (nl = memchr(p, '\n', (size_t)(end - p))); p = nl + 1) {
        uint64_t a;
        const char *n, *m;
        size_t nl_len, ml;
        if (ksym_parse_line(p, (size_t)(nl - p), &a, &n, &nl_len, &m, &ml) == 0)
            *stop = fn(ud, a, n, nl_len, m, ml);
    }
    *len = (size_t)(end - p);
    memmove(buf, p, *len);
}

/* One streaming pass: fn for each symbol until it returns true, tick
 * after each chunk. Memory is one chunk, whatever the size of the file. */
static int ksym_scan(struct host *h, ksym_fn fn, void *ud, void (*tick)(void *), void *tick_ud)
{
    _cleanup_close_ int fd = host_open_fd(h, HOST_PROC, "kallsyms", O_RDONLY);
    if (fd < 0)
        return fd;
    _cleanup_free_ char *buf = xmalloc(KSYM_CHUNK);
    size_t len = 0;
    bool stop = false;
    while (!stop) {
        if (len == KSYM_CHUNK)
            len = 0; /* a line longer than a chunk: not kallsyms */
        ssize_t n = read(fd, buf + len, KSYM_CHUNK - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        if (n == 0)
            break;
        len += (size_t)n;
        scan_lines(buf, &len, fn, ud, &stop);
        if (tick)
            tick(tick_ud);
    }
    return 0;
}

/* ---- names -> addresses ---- */

struct name_lookup {
    const char *const *names;
    size_t nnames;
    uint64_t *ret;
    size_t max, n, seen, zero;
};

static bool on_name(void *ud, uint64_t addr, const char *name, size_t nlen, const char *mod,
                    size_t mlen)
{
    struct name_lookup *l = ud;
    (void)mod;
    (void)mlen;
    l->seen++;
    l->zero += addr == 0;
    for (size_t i = 0; i < l->nnames; i++)
        if (strlen(l->names[i]) == nlen && memcmp(l->names[i], name, nlen) == 0) {
            if (addr && l->n < l->max)
                l->ret[l->n++] = addr;
            break;
        }
    return false;
}

size_t ksym_lookup_names(struct host *h, const char *const *names, size_t nnames, uint64_t *ret,
                         size_t max, char *why, size_t why_size)
{
    struct name_lookup l = {.names = names, .nnames = nnames, .ret = ret, .max = max};
    int r = ksym_scan(h, on_name, &l, NULL, NULL);
    if (why && why_size)
        why[0] = '\0';
    if (!why || !why_size || (r >= 0 && l.seen && l.zero < l.seen))
        return r < 0 ? 0 : l.n;
    _cleanup_free_ char *path = host_display_path(h, HOST_PROC, "kallsyms");
    if (r < 0)
        snprintf(why, why_size, "cannot read %s: %s", path, errno_name(-r));
    else if (l.seen)
        snprintf(why, why_size, "%s hides the addresses (not root, or kernel.kptr_restrict = 2)",
                 path);
    else
        snprintf(why, why_size, "%s is empty", path);
    return r < 0 ? 0 : l.n;
}

/* ---- addresses -> names ---- */

static size_t slot_of(uint64_t addr, size_t nslots)
{
    uint64_t x = addr ^ addr >> 29;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 32;
    return (size_t)x & (nslots - 1);
}

void ksym_cache_init(struct ksym_cache *c)
{
    *c = (struct ksym_cache){0};
}

void ksym_cache_free(struct ksym_cache *c)
{
    free(c->slot);
    *c = (struct ksym_cache){0};
}

static struct ksym_slot *find(const struct ksym_cache *c, uint64_t addr)
{
    if (!c->nslots)
        return NULL;
    for (size_t i = slot_of(addr, c->nslots);; i = (i + 1) & (c->nslots - 1)) {
        struct ksym_slot *s = &c->slot[i];
        if (!s->used)
            return NULL;
        if (s->addr == addr)
            return s;
    }
}

static void rehash(struct ksym_cache *c, size_t nslots)
{
    struct ksym_slot *old = c->slot;
    size_t nold = c->nslots;
    c->slot = xcalloc(nslots, sizeof(*c->slot));
    c->nslots = nslots;
    for (size_t i = 0; i < nold; i++) {
        if (!old[i].used)
            continue;
        size_t j = slot_of(old[i].addr, nslots);
        while (c->slot[j].used)
            j = (j + 1) & (nslots - 1);
        c->slot[j] = old[i];
    }
    free(old);
}

/* A placeholder the pass fills in. */
static void add(struct ksym_cache *c, uint64_t addr)
{
    if (find(c, addr))
        return;
    if (c->n >= KSYM_CACHE_MAX) { /* bounded: forget all, relearn what is used */
        memset(c->slot, 0, c->nslots * sizeof(*c->slot));
        c->n = 0;
    }
    if (2 * (c->n + 1) > c->nslots)
        rehash(c, c->nslots ? 2 * c->nslots : KSYM_FIRST_SLOT);
    size_t j = slot_of(addr, c->nslots);
    while (c->slot[j].used)
        j = (j + 1) & (c->nslots - 1);
    c->slot[j] = (struct ksym_slot){.addr = addr, .used = true};
    c->n++;
}

struct addr_lookup {
    struct ksym_cache *c;
    size_t want, seen, zero;
};

static bool on_addr(void *ud, uint64_t addr, const char *name, size_t nlen, const char *mod,
                    size_t mlen)
{
    struct addr_lookup *l = ud;
    l->seen++;
    l->zero += addr == 0;
    struct ksym_slot *s = find(l->c, addr);
    if (!s || s->resolved)
        return false; /* of aliases at one address, the first wins */
    int w = mlen
                ? snprintf(s->name, sizeof(s->name), "%.*s [%.*s]", (int)nlen, name, (int)mlen, mod)
                : snprintf(s->name, sizeof(s->name), "%.*s", (int)nlen, name);
    (void)w;
    s->resolved = true;
    return --l->want == 0;
}

int ksym_resolve(struct ksym_cache *c, struct host *h, const uint64_t *addr, size_t n,
                 void (*tick)(void *ud), void *ud)
{
    size_t want = 0;
    for (size_t i = 0; i < n; i++)
        if (!find(c, addr[i])) {
            add(c, addr[i]);
            want++;
        }
    if (!want || c->unreadable)
        return 0;
    /* the placeholders left unresolved by the pass are remembered as such:
     * an address in a record was loaded when it fired, so a later pass
     * would not find it either */
    struct addr_lookup l = {.c = c, .want = want};
    int r = ksym_scan(h, on_addr, &l, tick, ud);
    c->passes++;
    if (r < 0 || (l.seen && l.zero == l.seen))
        c->unreadable = true;
    return r < 0 ? r : 0;
}

const char *ksym_name(const struct ksym_cache *c, uint64_t addr)
{
    const struct ksym_slot *s = find(c, addr);
    return s && s->resolved ? s->name : NULL;
}

bool ksym_known(const struct ksym_cache *c, uint64_t addr)
{
    return find(c, addr) != NULL;
}
