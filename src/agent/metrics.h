/* The agent's metrics: Prometheus text format 0.0.4 and OpenMetrics 1.0,
 * rendered once per sample from two samples (the previous and the new) into
 * an immutable buffer that scrapes only copy.
 *
 * Every metric has the watt_ prefix, its unit in the name (_joules_total,
 * _watts, _seconds_total, _hertz, _ratio), HELP and TYPE lines. Values that
 * could not be read are left out (the series disappears), never guessed. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "base/json.h"
#include "base/strbuf.h"
#include "sense/sample.h"
#include "tune/guard.h"
#include "view/report.h"

struct agent_attrib;
struct agent_cstate;
struct agent_memory;

enum agent_rapl_mode {
    AGENT_RAPL_EXACT,  /* energy counters as read */
    AGENT_RAPL_COARSE, /* rounded down to whole kilojoules: RAPL energy is a
                        * side channel (CVE-2020-8694) */
    AGENT_RAPL_OFF,    /* no RAPL energy or power series at all */
};

/* What one part of the agent's sample cost and how it read: a sense
 * sampler ("cpuidle", path "cache+pread"), the topology, the wake-up
 * accounting ("wakeups", path "trace", "proc" or "off"), the power model
 * ("model") and the rendering of this snapshot ("render"). */
struct agent_cost {
    const char *sampler;
    const char *path;
    int up;        /* a sense sampler: 1 when its last read worked, 0 when
                    * not; -1 for the agent's own parts (no read) */
    double cpu_s;  /* thread CPU time, summed over all samples */
    double last_s; /* ... of the last sample */
};

#define AGENT_COSTS_MAX 16

struct agent_costs {
    struct agent_cost v[AGENT_COSTS_MAX];
    size_t n;
    bool cache;           /* the host's read cache is on */
    uint64_t cache_files; /* entries in it */
    uint64_t cache_fds;   /* files and directories kept open */
    uint64_t rescans;     /* times it was dropped and read anew */
};

/* The fleet controller's metrics file (fleet_metrics, fleet_doc.h) as of
 * the sample. */
struct agent_fleet {
    bool ok;    /* read and valid: served */
    char *text; /* the document for each format; NULL unless ok */
    char *om;
};

/* The agent about itself. */
struct agent_self {
    double cpu_s;                      /* user + system CPU seconds since start */
    uint64_t wakeups;                  /* voluntary + involuntary context switches */
    uint64_t rss_bytes;                /* resident set */
    double sample_s;                   /* how long the last sample took */
    uint64_t samples;                  /* samples taken */
    uint64_t scrapes;                  /* /metrics requests served */
    uint64_t http_open;                /* HTTP connections open now */
    uint64_t http_accepted;            /* ... accepted since start */
    uint64_t http_evicted;             /* ... closed for max_connections */
    uint64_t http_timed_out;           /* ... closed for header_timeout */
    double start_time_s;               /* realtime of the agent's start */
    const struct guard_status *guard;  /* the latency guard; NULL when none runs */
    const struct pack_status *pack;    /* the packer (numbers only); NULL when none runs */
    const struct agent_attrib *attrib; /* per-cgroup accounting; NULL when off */
    const struct agent_costs *costs;   /* per-sampler costs; NULL: not rendered */
    const struct agent_fleet *fleet;   /* NULL: no fleet_metrics configured */
    const struct agent_cstate *cstate; /* C-state totals (metrics_cstate.h); NULL: none */
    const struct agent_memory *memory; /* nodes, EDAC (metrics_memory.h); NULL: none */
};

/* Monotonic energy totals per (source, domain), corrected for hardware
 * counter wraps: each counter's delta between two samples is taken modulo
 * its range (RAPL max_energy_range_uj; 2^32 or 2^64 where no range is
 * known), so a total never decreases while the counter wraps. A counter
 * that vanishes keeps its total and stops being exported; one that appears
 * starts at its first reading's delta of 0. */
struct agent_energy;

int agent_energy_new(struct agent_energy **ret);
void agent_energy_free(struct agent_energy *e);
/* Fold sample B (A: the previous sample, NULL for the first) into E. */
void agent_energy_update(struct agent_energy *e, const struct sample *a, const struct sample *b);

/* Render every metric family for one snapshot: C (a = previous sample or
 * NULL, b/cur = this one, power summary), E, SELF; PUE multiplies the IT
 * power into the facility power; OPENMETRICS picks the format (and ends it
 * with "# EOF"). Appends to OUT. */
/* The costs as /status's "agent" member's value (an object). */
void agent_costs_json(const struct agent_costs *c, struct json *j);

void agent_metrics_render(const struct report_ctx *c, const struct agent_energy *e,
                          const struct agent_self *self, enum agent_rapl_mode rapl, double pue,
                          bool openmetrics, struct strbuf *out);
