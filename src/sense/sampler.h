/* The sampler backend interface and the session that runs them.
 *
 * A sampler is a const table of functions. probe() says whether it works
 * here and why not ("no RAPL: neither powercap nor a perf power PMU"), and
 * may keep state (open perf fds, wrap accumulators) across samples. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

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
    SAMPLER_CSTATE_PMU,
    SAMPLER_GPU, /* after SAMPLER_HWMON: takes the GPU chips' readings from it */
    SAMPLER_DCMI,
    _SAMPLER_MAX,
};

extern const struct sampler *const sampler_table[_SAMPLER_MAX];

/* What each sampler cost: its thread's CPU time (CLOCK_THREAD_CPUTIME_ID)
 * while it collected. Index _SAMPLER_MAX is the sample's own part: the
 * topology, kernel release and hostname. */
#define SENSE_COST_TOPOLOGY _SAMPLER_MAX

struct sense {
    struct host *h; /* borrowed */
    void *state[_SAMPLER_MAX];
    int usable[_SAMPLER_MAX];           /* probe() result */
    char *why[_SAMPLER_MAX];            /* why not usable, owned */
    uint64_t cpu_ns[_SAMPLER_MAX + 1];  /* summed over all samples */
    uint64_t last_ns[_SAMPLER_MAX + 1]; /* the last sample's */
    /* The sampler's last collect read all it tried: it returned >= 0 and
     * added no diagnostic. Kept while the sampler is skipped. */
    bool ok[_SAMPLER_MAX];
    uint64_t samples;
    uint64_t rescans; /* cache drops: age, a vanished file, hotplug, SIGHUP */
    char *online;     /* the last sample's online CPUs ("0-3"), with a cache */
    unsigned skip;    /* 1 << sampler_id: not collected by the next samples
                         (the agent between two fresh device reads) */
};

/* The agent's cache (host_cache_enable): static parts read at most once
 * per SENSE_CACHE_MAX_AGE_NS, and again after a device or CPU went away,
 * the online CPUs changed or sense_refresh(); moving values re-read
 * through files kept open (up to MAX_FDS of them). */
#define SENSE_CACHE_MAX_AGE_NS (60ull * 1000000000ull)
void sense_cache(struct sense *s, unsigned max_fds);
/* Read the static parts anew at the next sample (SIGHUP). */
void sense_refresh(struct sense *s);
/* How a sampler reads: "open" (every file opened each sample: report,
 * top), "cache+pread" (the agent's cache on a live root: static parts
 * cached, moving files kept open), "cache+open" (the cache on a recorded
 * tree, whose files are opened each sample so a removed one is seen). */
const char *sense_read_path(const struct sense *s);
/* The sampler's name for index I, "topology" for SENSE_COST_TOPOLOGY. */
const char *sense_cost_name(unsigned i);

int sense_open(struct host *h, struct sense **ret);
/* One sample of every usable sampler. */
int sense_sample(struct sense *s, struct sample **ret);
void sense_close(struct sense *s);
void sample_free(struct sample *s);
