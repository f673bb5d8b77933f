#include "sense/irq.h"

#include "base/util.h"

static int p(struct host *h, void **st, char **why)
{
    *why = xstrdup("irq: PLACEHOLDER");
    return 0;
}

static int c(struct host *h, void *st, struct sample *s)
{
    return 0;
}

static void f(struct sample *s)
{
}

const struct sampler irq_sampler = {.name = "irq", .probe = p, .collect = c, .free_sample = f};
