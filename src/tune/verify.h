/* verify: measure what a tune changed. A window is two samples SECONDS
 * apart, reduced to what a latency/power trade moves: per C-state
 * residency and entries per second, wake-ups, the latency constraint in
 * force, disabled states, governor/EPP, average frequency, and watts where
 * a meter exists (never a model estimate presented as measured).
 * `watt tune --verify` measures one window before applying and one after,
 * and prints them side by side with a change column. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "base/json.h"
#include "host/host.h"
#include "tune/verify_package.h"

/* One C-state (by index), over the CPUs that have it. */
struct tune_verify_state {
    char *name;               /* "POLL", "C6"; owned; "stateK" when unreadable */
    uint64_t latency_us;      /* exit latency of the first CPU; UINT64_MAX unknown */
    double residency_pct;     /* mean over CPUs, % of the interval; NaN unknown */
    double entries_per_s;     /* summed over CPUs; NaN unknown */
    double entries_per_s_cpu; /* per-CPU average; NaN unknown */
    unsigned ncpus;           /* CPUs that have this state */
    unsigned ndisabled;       /* CPUs whose disable file reads 1 (at the end) */
    unsigned nexcluded;       /* CPUs whose latency constraint excludes it */
};

struct tune_verify_window {
    double seconds;      /* the interval the rates are over */
    bool recorded;       /* a recorded root: the interval is nominal (1 s) */
    unsigned ncpus;      /* CPUs with cpuidle */
    char *idle_driver;   /* "intel_idle", "haltpoll"; NULL when none; owned */
    char *idle_governor; /* "menu", "teo", "haltpoll"; owned */
    double c0_pct;       /* mean share not in any idle state, %; NaN */
    unsigned nstates;
    struct tune_verify_state *state; /* owned */
    double wakeups_per_s;            /* idle entries per second, all states and CPUs; NaN */
    double irq_per_s;                /* /proc/interrupts total per second; NaN when unreadable */
    int64_t global_latency_us;       /* /dev/cpu_dma_latency: INT64_MAX none, -1 unreadable */
    int64_t min_resume_us;           /* smallest per-CPU pm_qos_resume_latency_us, same markers */
    char *latency_holders; /* processes holding cpu_dma_latency ("tuned[812]"); NULL none */
    char *freq_governor;   /* scaling_governor ("mixed" when CPUs differ); NULL without cpufreq */
    char *epp;             /* energy_performance_preference, "mixed"; NULL without EPP */
    double busy_mhz;       /* mean clock while busy (APERF/MPERF, else scaling_cur_freq); NaN */
    double watts;          /* measured, summed over the meter's top-level domains; NaN */
    char *meter;           /* "rapl (package+dram), covers ..."; NULL: no meter; owned */
    char *no_meter_why;    /* why not; owned */
    double est_watts;      /* the power model's estimate, never shown as measured; NaN */
    char *est_model;       /* the model's name ("vm-vcpu"); owned */
    unsigned npackages;    /* per package (tune/verify_package.h); 0: no topology */
    struct tune_verify_package *pkg; /* owned */
    char *pc_pmu;                    /* "cstate_pkg" when it measured; NULL: see pc_why; owned */
    char *pc_why;                    /* why no package C-states; owned */
    /* `--workload CMD` (cli/tune_workload.h), set by the caller: */
    double workload_runs_per_s; /* completed runs per second; NaN: no workload */
    uint64_t workload_runs;     /* runs that exited 0 in the window */
    uint64_t workload_failed;   /* runs that exited otherwise */
};

/* Measure one window of `seconds` (> 0) on h: sample, sleep, sample. On a
 * recorded root (h is not the live "/"), the fixture's second read stands
 * for "one second later" and the window is taken as 1 s without sleeping.
 * ret_err: one sentence when it fails (-ENODATA: nothing to measure). */
int tune_verify_measure(struct host *h, double seconds, struct tune_verify_window **ret,
                        char **ret_err);
/* before/after table with a change column; after may be NULL (one window). */
void tune_verify_print(FILE *f, const struct tune_verify_window *before,
                       const struct tune_verify_window *after);
/* {"seconds":..,"before":{...},"after":{...}} as one object value. */
void tune_verify_json(struct json *j, const struct tune_verify_window *before,
                      const struct tune_verify_window *after);
void tune_verify_window_free(struct tune_verify_window *w);

/* ---- the pure parts, for tests ---- */

struct sample;

/* Reduce two samples interval_s apart to a window (b may not be NULL).
 * -ENODATA when neither cpuidle nor anything else gave a rate. */
int tune_verify_window_build(const struct sample *a, const struct sample *b, double interval_s,
                             bool recorded, struct tune_verify_window **ret);

/* How a change is judged: a rate (entries/s, wake-ups/s, interrupts/s, W,
 * MHz) that moved less than 5 % of its before value, or less than 1 per
 * second, is noise; a share in % is noise under 1 percentage point. */
enum tune_verify_kind {
    TUNE_VERIFY_RATE,
    TUNE_VERIFY_PCT,
};
#define TUNE_VERIFY_NOISE_REL   0.05 /* rates: 5 % */
#define TUNE_VERIFY_NOISE_FLOOR 1.0  /* rates: 1 per second */
#define TUNE_VERIFY_NOISE_PTS   1.0  /* shares: 1 percentage point */
bool tune_verify_is_noise(enum tune_verify_kind k, double before, double after);
/* The change column: "+12.3 (+5.1 %)" for rates, "+12.3 pts" for shares,
 * " ~noise" appended when within noise, "same" when equal, "-" when either is NaN. */
void tune_verify_format_change(char *buf, size_t size, enum tune_verify_kind k, double before,
                               double after);
