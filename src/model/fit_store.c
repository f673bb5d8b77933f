/* The bounded, busy-bucketed store of fit points: see fit_store.h. */
#include "model/fit_store.h"

#include <errno.h>
#include <math.h>

int fit_store_add(struct fit_store *s, const struct fit_point *p)
{
    if (p->cpus == 0 || p->cpus > UINT16_MAX || !isfinite(p->busy) || p->busy < 0 ||
        p->busy > p->cpus || !isfinite(p->watts) || p->watts <= 0)
        return -EINVAL;
    unsigned b = (unsigned)(p->busy / p->cpus * FIT_STORE_BUCKETS);
    if (b >= FIT_STORE_BUCKETS)
        b = FIT_STORE_BUCKETS - 1;
    s->p[b][s->next[b]] = (struct fit_store_point){
        .busy = (float)p->busy,
        .ghz = isfinite(p->ghz) && p->ghz > 0 ? (float)p->ghz : NAN,
        .watts = (float)p->watts,
        .cpus = (uint16_t)p->cpus,
    };
    s->next[b] = (uint8_t)((s->next[b] + 1) % FIT_STORE_PER_BUCKET);
    if (s->n[b] < FIT_STORE_PER_BUCKET)
        s->n[b]++;
    s->seen++;
    return 0;
}

size_t fit_store_points(const struct fit_store *s, struct fit_point *out)
{
    size_t k = 0;
    for (unsigned b = 0; b < FIT_STORE_BUCKETS; b++)
        for (unsigned i = 0; i < s->n[b]; i++) {
            const struct fit_store_point *q = &s->p[b][i];
            out[k++] = (struct fit_point){q->cpus, q->busy, q->ghz, q->watts};
        }
    return k;
}
