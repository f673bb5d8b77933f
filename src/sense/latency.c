#include "sense/latency.h"

#include "base/util.h"

static int p(struct host *h, void **st, char **why)
{
    *why = xstrdup("latency: PLACEHOLDER");
    return 0;
}

static int c(struct host *h, void *st, struct sample *s)
{
    return 0;
}

static void f(struct sample *s)
{
}

const struct sampler latency_sampler = {.name = "latency", .probe = p, .collect = c, .free_sample = f};
