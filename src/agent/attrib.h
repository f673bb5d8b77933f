/* The agent's wake-ups and energy per cgroup (docs/agent-metrics.md,
 * "Wake-ups and energy per cgroup").
 *
 * Every sample, watt top's collector (cli/top_collect.h) turns the two
 * samples, a /proc scan and the wake-up window into a frame; this folds
 * the frame's cgroups into monotonic counters.
 *
 * Cardinality is bounded: at most top_n cgroups get series of their own.
 * A cgroup gets a slot when one is free and it ranks among the window's
 * top by energy; it keeps it (so its counters stay monotonic) until it has
 * shown no activity for AGENT_ATTRIB_EVICT_S seconds. Everything else is
 * summed into cgroup="other". With the idle, kernel and unaccounted lines
 * (watt_attributed_energy_joules_total), the cgroups' energy adds up to
 * the node's over every interval. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/strbuf.h"
#include "host/host.h"
#include "model/model.h"
#include "sense/sample.h"
#include "sense/wakeups.h"

struct top_frame;

#define AGENT_ATTRIB_EVICT_S 600.0

/* = enum wake_mode (sense/wakeups.h) */
enum agent_wakeups_mode {
    AGENT_WAKEUPS_AUTO = WAKE_MODE_AUTO,   /* BPF counters, else the ring, else /proc */
    AGENT_WAKEUPS_BPF = WAKE_MODE_BPF,     /* as auto, BPF asked for (why not: /status) */
    AGENT_WAKEUPS_TRACE = WAKE_MODE_TRACE, /* the tracepoint ring where it works, else /proc */
    AGENT_WAKEUPS_PROC = WAKE_MODE_PROC,   /* /proc only */
    AGENT_WAKEUPS_OFF = WAKE_MODE_OFF,     /* no per-cgroup accounting at all */
};

struct agent_cgroup_series {
    char *path;        /* owned; "other" for the rest */
    double energy_j;   /* since the agent started (or the slot was given) */
    double wakeups;    /* times its tasks were woken */
    double power_w;    /* over the last interval */
    double idle_s;     /* seconds since it last had activity */
    double gpu_j;      /* GPU energy attributed to its processes (model/gpu_attrib.h) */
    double gpu_busy_s; /* GPU engine seconds of its processes */
};

struct agent_attrib {
    struct top_collector *col;
    unsigned top_n;
    size_t n;
    struct agent_cgroup_series *v; /* members, at most top_n */
    struct agent_cgroup_series other;
    double idle_j, kernel_j, unaccounted_j;
    bool have_gpu;                         /* a frame had a GPU */
    double gpu_unattributed_j, gpu_idle_j; /* the GPUs' energy no cgroup owns */
    double gpu_j;                          /* the GPUs' energy (where they state it) */
    double kind_events[_WAKE_KIND_MAX];    /* wake-ups by kind since start */
    size_t ncpu;
    int *cpu;
    double *cpu_idle_wakeups; /* per CPU, since start (traced only) */
    bool traced;
    enum agent_wakeups_mode mode;
    enum wake_path path; /* the last window's */
    char *why_not_bpf;   /* owned; NULL when the BPF counters are used */
    bool have_power;     /* a frame had node power to split */
    uint64_t lost;
    char *why_not_traced; /* owned */
    uint64_t frames;
    struct top_frame *last; /* the last window, sorted by wake-ups (for /status) */
};

/* NULL *ret (and 0) for AGENT_WAKEUPS_OFF. */
int agent_attrib_open(struct host *h, const struct power_model *m, enum agent_wakeups_mode mode,
                      unsigned top_n, struct agent_attrib **ret);
void agent_attrib_free(struct agent_attrib *a);
size_t agent_attrib_fds(struct agent_attrib *a, const int **ret);
void agent_attrib_drain(struct agent_attrib *a);
/* Fold the window ending at sample b (a: the previous sample). */
void agent_attrib_update(struct agent_attrib *a, const struct sample *prev, const struct sample *b,
                         double secs);
/* Fold one frame (owned from here on) into the counters: what
 * agent_attrib_update() does with the collector's frame. */
void agent_attrib_fold(struct agent_attrib *a, struct top_frame *f);
/* The power model changed (the first sample showed a VM; SIGHUP). */
void agent_attrib_set_model(struct agent_attrib *a, const struct power_model *m);
/* The last window's frame, or NULL before the second sample. */
const struct top_frame *agent_attrib_frame(const struct agent_attrib *a);
/* The families (appended to the metrics of one snapshot). */
struct mw;
void agent_attrib_render(struct mw *w, const struct agent_attrib *a);
