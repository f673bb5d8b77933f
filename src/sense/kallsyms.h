/* kallsyms: kernel symbol names for the callback addresses in trace
 * records (timer, hrtimer and work functions), from /proc/kallsyms
 * (kernel/kallsyms.c s_show(): "ffffffff8142d130 t hrtimer_wakeup" and,
 * for modules, "ffffffffc0a01000 t nvme_irq\t[nvme]").
 *
 * The file is 5 MB and costs about 50 ms of kernel time to read, so it is
 * never kept in memory: each lookup is one streaming pass that picks out
 * the addresses or names asked for. Without CAP_SYSLOG, or with
 * kernel.kptr_restrict = 2, every address reads as 0: nothing resolves,
 * and the cache remembers that instead of reading the file again. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "host/host.h"

/* One line: the address, the name and the module (mod_len 0 for the core
 * kernel); pointers into p. -EINVAL when it is not a symbol line. */
int ksym_parse_line(const char *p, size_t len, uint64_t *addr, const char **name, size_t *name_len,
                    const char **mod, size_t *mod_len);

/* The addresses of these names (every symbol of that name), at most max.
 * Returns how many were found; when none could be (the file unreadable or
 * its addresses hidden), why (may be NULL) gets a sentence. */
size_t ksym_lookup_names(struct host *h, const char *const *names, size_t nnames, uint64_t *ret,
                         size_t max, char *why, size_t why_size);

/* address -> name, bounded (KSYM_CACHE_MAX entries: beyond, it starts afresh). */
#define KSYM_CACHE_MAX 4096
struct ksym_slot;
struct ksym_cache {
    struct ksym_slot *slot;
    size_t nslots, n;
    bool unreadable; /* a pass failed or saw only hidden addresses: no more passes */
    uint64_t passes; /* streaming passes over the file so far */
};

void ksym_cache_init(struct ksym_cache *c);
void ksym_cache_free(struct ksym_cache *c);
/* Names for these addresses: those not cached yet are looked up in one
 * pass. tick (may be NULL) runs after each 64 KiB of the file, so a
 * caller with perf rings can keep draining them (a pass takes 50 ms).
 * Returns 0, or the pass's -errno (names then stay unknown). */
int ksym_resolve(struct ksym_cache *c, struct host *h, const uint64_t *addr, size_t n,
                 void (*tick)(void *ud), void *ud);
/* "hrtimer_wakeup", "nvme_irq [nvme]"; NULL when unknown or unresolvable. */
const char *ksym_name(const struct ksym_cache *c, uint64_t addr);
/* Whether this address has been looked up (resolved or not). */
bool ksym_known(const struct ksym_cache *c, uint64_t addr);
