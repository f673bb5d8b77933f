/* watt top's collector (top.c): opening and closing it. The per-frame
 * calls are declared in cli/top.h, for the TUI. */
#pragma once

#include <stdbool.h>

#include "host/host.h"
#include "model/model.h"
#include "view/top.h"

struct devpolicy;

struct top_collector_opts {
    const struct power_model *model;
    const struct devpolicy *devpolicy; /* NULL: built-in rules */
    double interval_s;                 /* the refresh; on a recorded root, the window assumed */
    enum wake_mode wakeups;            /* how wake-ups are counted (AUTO: bpf, else the
                                          tracepoint ring, else /proc); OFF means PROC here */
    bool no_trace;                     /* use the /proc fallback even where tracing works */
    bool precise_tasks;                /* read per-thread context switches even when
                                          tracing (one window: --once, report) */
    bool cgroup_cpu;                   /* no per-process rows needed (the agent): where the
                                          BPF counters run and cgroup v2 is mounted, each
                                          cgroup's CPU from its cpu.stat, no /proc scan */
    bool external_samples;             /* the caller samples (agent, report): use
                                          top_collector_frame_from() */
    bool model_auto;                   /* no --model: vm-vcpu in a VM (known after the
                                          first sample), else the given model */
};

/* Opens the samplers and the tracer (or says why not, in the frames'
 * why_not_traced) and takes the first sample: the first frame covers the
 * time from here. */
int top_collector_open(struct host *h, const struct top_collector_opts *o,
                       struct top_collector **ret);
void top_collector_close(struct top_collector *c);
bool top_collector_traced(const struct top_collector *c);
/* Change the power model (report knows VM or not only after sampling). */
void top_collector_set_model(struct top_collector *c, const struct power_model *m);
/* Why tracing is not used, or NULL when it is. */
const char *top_collector_why_not_traced(const struct top_collector *c);
/* The path wake-ups come by, and why the BPF counters are not it (NULL
 * when they are). */
enum wake_path top_collector_wake_path(const struct top_collector *c);
const char *top_collector_why_not_bpf(const struct top_collector *c);

/* A frame for samples the caller took (a before b, secs apart): the /proc
 * scan and the wake-up window run from the previous call (or open) to now.
 * The samples stay the caller's. */
struct sample;
int top_collector_frame_from(struct top_collector *c, const struct sample *a,
                             const struct sample *b, double secs, struct top_frame **ret);
