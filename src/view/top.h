/* watt top: one frame of what `watt top` shows, built by top.c (the
 * collector) and drawn by top_tui.c (ncurses) or printed by top_out.c
 * (--once: text or --json). The schema of the JSON is docs/top.md. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "sense/wakeups.h"

struct top_proc {
    int32_t pid;
    char comm[32];
    char *cmdline; /* owned; NULL for kernel threads */
    char *cgroup;  /* owned; NULL unknown */
    bool kthread;
    bool exited; /* known only from trace events: gone before it could be read */
    unsigned threads;
    double cpu_pct;        /* % of one CPU */
    double wakeups_s;      /* times woken per second (all threads) */
    double idle_wakeups_s; /* CPU idle exits blamed on it per second; NaN: not traced */
    double power_w;        /* attributed power; NaN when no attribution */
    double energy_j;       /* power_w * interval */
    /* GPUs (top_gpu.c, model/gpu_attrib.h): engine seconds per second of
     * window over all GPUs (1 = one GPU's engines busy the whole window),
     * and the GPU watts attributed to it; NaN when it used no GPU in the
     * window, or gpu_w when no GPU it used states its watts */
    double gpu_busy_pct;
    double gpu_w, gpu_j;
};

struct top_cgroup {
    char *path; /* owned */
    size_t nprocs;
    double cpu_pct, wakeups_s, idle_wakeups_s, power_w, energy_j;
    double gpu_busy_pct, gpu_w, gpu_j; /* its processes' sums; NaN as for a process */
};

/* One GPU's power as split over its processes (model/gpu_attrib.h): the
 * processes' lines + unattributed_w + idle_w = watts. */
struct top_gpu {
    char id[24], pdev[16], driver[24], via[8];
    double watts;                           /* over the window; NaN unknown */
    double util_pct;                        /* the GPU's own utilisation; NaN unknown */
    double procs_busy_pct;                  /* Σ its processes' engine time, % of the window */
    double procs_w, unattributed_w, idle_w; /* NaN when watts is */
    size_t nprocs;
    bool normalised;   /* processes' busy time above the window: shares scaled */
    bool equal_shares; /* NVML without per-process utilisation: shared equally */
};

/* IRQs, timers, hrtimers and work items (and "other"). */
struct top_source {
    enum wake_kind kind;
    int irq;       /* WAKE_IRQ; else -1 */
    char name[96]; /* handler name or callback symbol */
    double events_s;
    double idle_wakeups_s; /* NaN: not traced */
};

struct top_cstate {
    char name[32];
    double residency_pct; /* NaN unknown */
    double entries_s;
    unsigned latency_us;
    bool disabled;
};

struct top_cpu {
    int cpu;
    double busy_pct;
    double mhz;            /* effective, else requested; NaN unknown */
    double idle_wakeups_s; /* NaN: not traced */
    double irqs_s;         /* from /proc/interrupts; NaN unknown */
    size_t nstates;
    struct top_cstate *st; /* owned */
};

/* A package row of the C-states view (top_pkg.c): the package's own
 * C-states from the cstate PMUs (PC2, PC6, ... and the mean of its
 * cores' CC1, CC6, ...) where they measured it, else the mean of its
 * CPUs' cpuidle residency, as the report's package rows. */
#define TOP_PKG_STATES 24

struct top_pkg_state {
    char name[32];        /* "PC6", "CC6" (pmu); the cpuidle name ("C6") */
    double residency_pct; /* % of the window; NaN unknown */
};

struct top_pkg {
    int package;
    bool pmu;        /* the states come from the cstate PMUs */
    unsigned ncpus;  /* its online CPUs */
    double busy_pct; /* mean of its CPUs; NaN unknown */
    char why[200];   /* why not the PMU; "" when pmu */
    size_t nstates;
    struct top_pkg_state st[TOP_PKG_STATES];
};

struct top_device {
    char *bus, *name, *driver, *product; /* owned; driver/product may be NULL */
    char control[8];                     /* "auto", "on" */
    char status[16];                     /* "active", "suspended", ... */
    double active_pct;                   /* runtime_active_time share of the window; NaN unknown */
    bool safe;                           /* autosuspend candidate under the device policy */
    char *why;                           /* owned; why not safe, or NULL */
};

struct top_frame {
    /* header */
    double interval_s;
    uint64_t real_ns;
    char *hostname, *kernel; /* owned; may be NULL */
    unsigned ncpus;
    double busy_cpus;
    /* wake-ups */
    bool traced;
    bool proc_wakeups_from_proc; /* traced, but the kernel lost events: process
                                    wake-ups from /proc context switches */
    char *why_not_traced;        /* owned; NULL when traced */
    enum wake_path wake_path;    /* bpf, trace (the ring) or proc */
    char *why_not_bpf;           /* owned; NULL when the BPF counters are used */
    double wake_window_s;        /* the wake-up window the rates are over (the
                                    tracer's; interval_s for /proc) */
    double total_wakeups_s;      /* all events per second */
    double total_idle_wakeups_s; /* idle exits per second; NaN: not traced */
    uint64_t lost_events;        /* dropped by the kernel, undelivered included */
    uint64_t undelivered_events; /* counted by the kernel, never delivered (some VMs) */
    uint64_t dropped_events;
    /* power */
    double node_w;
    bool measured;
    char power_source[96];
    double idle_w, kernel_w, unaccounted_w, procs_w;
    double error_pct;
    char power_note[256];
    /* views */
    size_t nprocs;
    struct top_proc *procs; /* owned; every process active in the window */
    size_t ncgroups;
    struct top_cgroup *cgroups;
    size_t nsources;
    struct top_source *sources;
    size_t ncpus_rows;
    struct top_cpu *cpus;
    size_t npkgs;
    struct top_pkg *pkgs; /* owned; by package id */
    size_t ndevices;
    struct top_device *devices;
    size_t ngpus;
    struct top_gpu *gpus; /* owned; none: no GPU columns anywhere */
    size_t nnotes;
    char **notes; /* owned: what could not be measured, and why */
};

void top_frame_free(struct top_frame *f);

enum top_sort {
    TOP_SORT_WAKEUPS,
    TOP_SORT_POWER,
    TOP_SORT_CPU,
    TOP_SORT_IDLE_WAKEUPS,
    TOP_SORT_GPU, /* GPU watts, then GPU busy % */
};
enum top_view {
    TOP_VIEW_PROCS,
    TOP_VIEW_CGROUPS,
    TOP_VIEW_SOURCES,
    TOP_VIEW_CPUS,
    TOP_VIEW_DEVICES,
    _TOP_VIEW_MAX
};

/* Sort the frame's procs, cgroups and sources in place. */
void top_frame_sort(struct top_frame *f, enum top_sort s);

/* --once outputs (top_out.c). limit 0: every row. */
void top_print_json(const struct top_frame *f, FILE *out, size_t limit);
void top_print_text(const struct top_frame *f, FILE *out, size_t limit);

/* The collector the TUI drives (top.c). */
struct top_collector;
/* fds to poll for POLLIN between frames (the tracer's rings) */
size_t top_collector_fds(struct top_collector *c, const int **ret);
/* one of those fds is readable */
void top_collector_drain(struct top_collector *c);
/* Build the frame for the window since the previous call. */
int top_collector_frame(struct top_collector *c, struct top_frame **ret);

struct top_tui_opts {
    double interval_s;
    enum top_sort sort;
    enum top_view view;
};
/* Run the ncurses TUI until 'q' (or SIGINT/SIGTERM). Keys: see docs/top.md.
 * Returns 0, or < 0 when the terminal cannot be used. */
int top_tui_run(struct top_collector *c, struct top_tui_opts *o);
