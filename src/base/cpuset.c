#include "cpuset.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "strbuf.h"
#include "util.h"

void cpuset_add(struct cpuset *set, unsigned cpu)
{
    unsigned w = cpu / 64;
    if (w >= set->nwords) {
        unsigned n = w + 1;
        set->bits = xrealloc(set->bits, n * sizeof(uint64_t));
        memset(set->bits + set->nwords, 0, (n - set->nwords) * sizeof(uint64_t));
        set->nwords = n;
    }
    set->bits[w] |= 1ull << (cpu % 64);
}

void cpuset_del(struct cpuset *set, unsigned cpu)
{
    unsigned w = cpu / 64;
    if (w < set->nwords)
        set->bits[w] &= ~(1ull << (cpu % 64));
}

bool cpuset_has(const struct cpuset *set, unsigned cpu)
{
    unsigned w = cpu / 64;
    return w < set->nwords && (set->bits[w] >> (cpu % 64)) & 1;
}

unsigned cpuset_count(const struct cpuset *set)
{
    unsigned n = 0;
    for (unsigned i = 0; i < set->nwords; i++)
        n += (unsigned)__builtin_popcountll(set->bits[i]);
    return n;
}

int cpuset_next(const struct cpuset *set, int prev)
{
    unsigned cpu = (unsigned)(prev + 1);
    for (unsigned w = cpu / 64; w < set->nwords; w++) {
        uint64_t word = set->bits[w];
        if (w == cpu / 64)
            word &= ~0ull << (cpu % 64);
        if (word)
            return (int)(w * 64 + (unsigned)__builtin_ctzll(word));
    }
    return -1;
}

static int parse_id(const char **p, unsigned *ret)
{
    if (!isdigit((unsigned char)**p))
        return -EINVAL;
    unsigned long v = 0;
    while (isdigit((unsigned char)**p)) {
        v = v * 10 + (unsigned long)(**p - '0');
        if (v > CPUSET_MAX_CPU)
            return -ERANGE;
        (*p)++;
    }
    *ret = (unsigned)v;
    return 0;
}

int cpuset_parse(const char *s, struct cpuset *ret)
{
    struct cpuset set = {0};
    const char *p = s;
    while (isspace((unsigned char)*p))
        p++;
    while (*p && !isspace((unsigned char)*p)) {
        unsigned lo, hi;
        int r = parse_id(&p, &lo);
        if (r < 0)
            goto fail;
        hi = lo;
        if (*p == '-') {
            p++;
            r = parse_id(&p, &hi);
            if (r < 0)
                goto fail;
            if (hi < lo) {
                r = -ERANGE;
                goto fail;
            }
        }
        for (unsigned c = lo; c <= hi; c++)
            cpuset_add(&set, c);
        if (*p == ',') {
            p++;
            if (!isdigit((unsigned char)*p)) { /* "0-3," or "0,,1" */
                r = -EINVAL;
                goto fail;
            }
        } else if (*p && !isspace((unsigned char)*p)) {
            r = -EINVAL;
            goto fail;
        }
        continue;
    fail:
        cpuset_free(&set);
        return r;
    }
    while (isspace((unsigned char)*p))
        p++;
    if (*p) {
        cpuset_free(&set);
        return -EINVAL;
    }
    *ret = set;
    return 0;
}

char *cpuset_format(const struct cpuset *set)
{
    struct strbuf b = {0};
    int cpu = cpuset_next(set, -1);
    while (cpu >= 0) {
        int end = cpu;
        while (cpuset_has(set, (unsigned)end + 1))
            end++;
        if (b.len)
            strbuf_putc(&b, ',');
        if (end == cpu)
            strbuf_appendf(&b, "%d", cpu);
        else
            strbuf_appendf(&b, "%d-%d", cpu, end);
        cpu = cpuset_next(set, end);
    }
    return strbuf_steal(&b);
}

void cpuset_free(struct cpuset *set)
{
    free(set->bits);
    set->bits = NULL;
    set->nwords = 0;
}
