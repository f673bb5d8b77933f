/* The sampler backend interface and the session that runs them.
 *
 * A sampler is a const table of functions. probe() says whether it works
 * here and why not ("no RAPL: neither powercap nor a perf power PMU"), and
 * may keep state (open perf fds, wrap accumulators) across samples. */
#pragma once

#include <stdbool.h>

#include "host/host.h"
#include "sense/sample.h"

struct sampler {
    const char *name;
    /* mandatory */
    /* > 0 usable, 0 not here (ret_reason says why), < 0 error. ret_state
     * may be left NULL by samplers without state. */
    int (*probe)(struct host *h, void **ret_state, char **ret_reason);
    /* Fill this sampler's member of s. Problems go to s->diags; return < 0
     * only when nothing at all could be read. */
    int (*collect)(struct host *h, void *state, struct sample *s);
    void (*free_sample)(struct sample *s);
    /* optional */
    void (*free_state)(void *state);
};

enum sampler_id {
    SAMPLER_CPUIDLE,
    SAMPLER_CPUFREQ,
    SAMPLER_PROCSTAT,
    SAMPLER_RAPL,
    SAMPLER_HWMON,
    SAMPLER_IRQ,
    SAMPLER_DEVICES,
    SAMPLER_LATENCY,
    SAMPLER_CLOCK,
    _SAMPLER_MAX,
};

extern const struct sampler *const sampler_table[_SAMPLER_MAX];

struct sense {
    struct host *h; /* borrowed */
    void *state[_SAMPLER_MAX];
    int usable[_SAMPLER_MAX]; /* probe() result */
    char *why[_SAMPLER_MAX];  /* why not usable, owned */
};

int sense_open(struct host *h, struct sense **ret);
/* One sample of every usable sampler. */
int sense_sample(struct sense *s, struct sample **ret);
void sense_close(struct sense *s);
void sample_free(struct sample *s);
