/* `watt report`: two samples the interval apart, rendered as sections of
 * text (fits 100 columns) or one JSON document (docs/report-json.md). */
#pragma once

#include <stdbool.h>

#include "base/diag.h"
#include "base/json.h"
#include "base/strbuf.h"
#include "model/power.h"
#include "sense/sampler.h"

struct devpolicy;
struct memory_info;
struct top_frame;

#define REPORT_WIDTH 100

struct report_ctx {
    struct host *h;
    const struct sense *sense;
    const struct sample *a;   /* the first sample */
    const struct sample *b;   /* the second; NULL when --interval 0 */
    const struct sample *cur; /* b ? b : a: static values come from here */
    double interval_s;        /* measured between a and b; 0 without b */
    bool per_cpu;             /* text: every CPU, not only per-package lines */
    const struct power_summary *power;
    struct diags *diags; /* problems found while computing rates */
    /* CONFDIR/devices.conf (sense/devpolicy.h); NULL when there is none:
     * built-in rules only. */
    const struct devpolicy *devpolicy;
    /* watt top's frame over the interval (who woke the CPUs); NULL
     * without an interval. */
    const struct top_frame *top;
    /* The agent's slow device reads (device_interval): between two fresh
     * reads a and b hold the same one, so "never suspends" is judged
     * against the read before it, dev_prev (NULL: none yet, judged on
     * the current read alone). Unset: a's devices when there is a b. */
    bool dev_prev_set;
    const struct devices_sample *dev_prev;
    /* NUMA node memory and EDAC DIMMs (sense/memory.h), read once by the
     * caller after the samples; NULL: not read (the memory section says
     * so). */
    const struct memory_info *memory;
    /* The model the agent fitted against this machine's meter (model/
     * fit.h), shown beside a measurement; NULL: none (yet). */
    const struct power_model *fitted;
};

/* The devices sample c's device judgements compare the current one with. */
const struct devices_sample *report_dev_prev(const struct report_ctx *c);

struct report_section {
    const char *key;                                          /* JSON member name */
    const char *title;                                        /* text heading */
    void (*json)(const struct report_ctx *c, struct json *j); /* writes one value */
    void (*text)(const struct report_ctx *c, struct strbuf *out);
};

/* Sections, in report order; each in its own report_*.c. */
extern const struct report_section report_section_host;
extern const struct report_section report_section_power;
extern const struct report_section report_section_reconcile;
extern const struct report_section report_section_memory;
extern const struct report_section report_section_gpus;
extern const struct report_section report_section_cstates;
extern const struct report_section report_section_frequency;
extern const struct report_section report_section_utilisation;
extern const struct report_section report_section_interrupts;
extern const struct report_section report_section_wakeups;
extern const struct report_section report_section_devices;
extern const struct report_section report_section_latency;
extern const struct report_section report_section_tsc;
extern const struct report_section report_section_advice;

/* A sampler that could not run here: its reason, else NULL. */
const char *report_unavailable(const struct report_ctx *c, enum sampler_id id);

/* The per-CPU/per-package pattern of the text tables: a row per CPU when
 * the machine is small (<= 16 CPUs) or --per-cpu was given, then a row per
 * package. cpu_row(i, "cpuN") is called for i < n, cpu_id(i) naming CPU
 * i; pkg_row(id, "pkgN") for each package. Returns whether CPU rows were
 * shown. */
bool report_cpu_rows(const struct report_ctx *c, unsigned n,
                     int (*cpu_id)(const void *ud, unsigned i),
                     void (*cpu_row)(void *ud, unsigned i, const char *label),
                     void (*pkg_row)(void *ud, int pkg, const char *label), void *ud);

/* Append text wrapped at REPORT_WIDTH: the first line starts with
 * `first`, the following ones with `indent` spaces; words longer than a
 * line (paths) get a line of their own. */
void report_wrap(struct strbuf *out, const char *first, size_t indent, const char *text);

/* The sections in report order. */
extern const struct report_section *const report_sections[];
extern const size_t report_nsections;

/* Render the whole report. */
void report_render_text(const struct report_ctx *c, struct strbuf *out);
/* Its last part: the samplers that could not run here, and the problems. */
void report_render_text_tail(const struct report_ctx *c, struct strbuf *out);
/* One self-contained HTML page (report_html.c): the text sections, and
 * inline SVG plots of C-state residency per CPU, power by source and
 * wake-ups by process. Every string from the machine is escaped; nothing
 * is loaded from elsewhere (no URL, script or external style). */
void report_render_html(const struct report_ctx *c, struct strbuf *out);
void report_render_json(const struct report_ctx *c, struct json *j);

int verb_report(int argc, char **argv);
