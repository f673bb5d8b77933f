/* rapl: CPU energy counters (Running Average Power Limit), by two paths.
 *
 * 1. powercap sysfs (Documentation/power/powercap/powercap.rst): zones
 *    /sys/class/powercap/intel-rapl:N (a package, or psys) and
 *    intel-rapl:N:M (its core, uncore or dram subzone), also
 *    intel-rapl-mmio:N. Each has name ("package-0", "package-0-die-1",
 *    "core", "uncore", "dram", "psys"), energy_uj (µJ, cumulative, wraps to
 *    0 after max_energy_range_uj) and enabled (power limiting on/off, not
 *    metering). energy_uj is readable by root only since CVE-2020-8694.
 *
 * 2. the perf "power" PMU (arch/x86/events/rapl.c), under
 *    /sys/bus/event_source/devices/power: type, cpumask (one CPU per
 *    package or die) and events/energy-{cores,pkg,ram,gpu,psys} ("event=0x02")
 *    with .scale (joules per count, 2^-32) and .unit ("Joules"). The kernel
 *    keeps a 64-bit count, so this path never wraps; the count starts at 0
 *    when watt opens the counter. Counters need the live kernel.
 *
 * powercap is preferred when both describe a domain; perf takes over a
 * domain only when its energy_uj cannot be read (non-root) and the perf
 * counter opens.
 *
 * Wrap handling (powercap): the sampler state keeps, per domain, the last
 * raw energy_uj and a 64-bit accumulated µJ total. When raw < last, the
 * counter wrapped once: delta = raw + (max_energy_range_uj - last). Two
 * wraps between samples cannot be told from one, so sampling must be faster
 * than the wrap period, 2^32 energy units / power: 262143 J / 280 W = 936 s
 * for a package with 61 µJ units. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sense/power_reading.h"
#include "sense/sample.h"
#include "sense/sampler.h"

enum rapl_via {
    RAPL_VIA_POWERCAP,
    RAPL_VIA_PERF,
};

struct rapl_domain {
    char name[48]; /* watt's name: "package-0", "dram-0", "core-0", "uncore-0", "psys" */
    char zone[40]; /* where it comes from: "intel-rapl:0:0", or the perf event "energy-ram" */
    enum rapl_via via;
    enum power_scope scope; /* PACKAGE, CORE, UNCORE, DRAM or PSYS */
    int package;            /* physical package id; -1 for psys */
    int enabled;            /* powercap "enabled" (power limiting): 0/1; -1 unknown or perf */
    double scale;           /* joules per raw unit: 1e-6 for powercap, the PMU's .scale */
    uint64_t max_range;     /* raw value after which the counter wraps to 0; VAL_NONE for
                             * perf (64-bit) or when max_energy_range_uj is unreadable */
    uint64_t raw;           /* the counter as read; VAL_NONE when unreadable */
    uint64_t acc;           /* accumulated raw units (64-bit, across wraps); VAL_NONE when
                             * raw is */
    double joules;          /* acc * scale: J since boot (powercap, first read) or since
                             * watt opened the counter (perf); NaN when unreadable */
    unsigned epoch;         /* samples of a domain with equal epochs can be differenced */
    bool wrapped;           /* the counter wrapped since the previous sample */
    char *why;              /* why raw is absent, owned; NULL when read */
    char *break_why;        /* why the epoch changed at this sample, owned; NULL when not */
};

struct rapl_sample {
    unsigned n;
    struct rapl_domain *v; /* powercap domains first, in zone order, then perf ones */
};

extern const struct sampler rapl_sampler;

const char *rapl_via_name(enum rapl_via v); /* "powercap", "perf" */
/* The domain with that name ("package-0"), or NULL. */
const struct rapl_domain *rapl_find(const struct rapl_sample *s, const char *name);

/* One struct power_reading per domain of the latest sample (b, or a when b
 * is NULL): source "rapl", via, domain, scope, package, joules from the
 * latest sample; delta_j and watts over interval_s when b is given (NaN
 * otherwise). Absent deltas get a reason in d (read failures are already
 * in the samples' diags). Returns the number of readings appended. */
int rapl_power(const struct rapl_sample *a, const struct rapl_sample *b, double interval_s,
               struct power_readings *out, struct diags *d);

/* Energy between two raw readings of a counter that wraps to 0 after
 * max_range (VAL_NONE: unknown). Returns 0, or 1 when it wrapped (one wrap
 * assumed); -ERANGE when raw is above max_range or the counter went
 * backwards with max_range unknown. */
int rapl_delta(uint64_t last, uint64_t raw, uint64_t max_range, uint64_t *ret_delta);

/* Pure parsers, for fuzzing. text need not be NUL-terminated. */
/* A PMU event file: "event=0x02\n" gives config 2. Other terms than
 * event= give -EOPNOTSUPP (the power PMU's format is config:0-7). */
int rapl_parse_perf_event(const char *text, size_t len, uint64_t *ret_config);
/* A .scale file: a finite positive decimal, "2.3283064365386962890625e-10". */
int rapl_parse_scale(const char *text, size_t len, double *ret_scale);
/* A powercap zone directory name: "intel-rapl:0" gives zone 0, sub -1;
 * "intel-rapl:0:1" zone 0, sub 1; "intel-rapl-mmio:0" sets *ret_mmio.
 * The bare control type "intel-rapl" gives -ENOENT. */
int rapl_parse_zone_id(const char *text, size_t len, bool *ret_mmio, int *ret_zone, int *ret_sub);
/* A zone's name file: "package-0" (scope PACKAGE, package 0, die -1),
 * "package-1-die-0", "core", "uncore", "dram", "psys". Subzone names carry
 * no package (-1): it is their parent's. */
int rapl_parse_zone_name(const char *text, size_t len, enum power_scope *ret_scope,
                         int *ret_package, int *ret_die);

/* ---- internal to rapl.c, rapl_powercap.c and rapl_perf.c ---- */

/* One domain as the sampler state tracks it across samples. */
struct rapl_track {
    struct rapl_domain d; /* the description: name, zone, via, scope, package, scale,
                           * max_range; the per-sample fields are unused */
    char dir[128];        /* powercap: the zone ("class/powercap/intel-rapl:0");
                           * perf: the event file, for diagnostics (under HOST_SYS) */
    int fd;               /* perf counter, -1 when none */
    char *static_why;     /* perf without a counter: why, for every sample; owned */
    int static_err;       /* its errno */
    bool have_last;
    uint64_t last; /* the previous raw reading */
    uint64_t acc;  /* 64-bit total in raw units */
    unsigned epoch;
};

struct rapl_state {
    struct rapl_track *v;
    size_t n, cap;
    struct diags notes; /* problems met while probing, repeated in every sample */
};

struct rapl_track *rapl_state_add(struct rapl_state *st);
struct rapl_track *rapl_state_find(struct rapl_state *st, const char *name);
/* Copy text into buf, NUL-terminated, without trailing whitespace; -EINVAL
 * when it holds a NUL or does not fit. */
int rapl_text_copy(const char *text, size_t len, char *buf, size_t size);
void rapl_state_note(struct rapl_state *st, struct host *h, const char *path, int err,
                     const char *what);
void rapl_powercap_discover(struct host *h, struct rapl_state *st);
/* ret_why: why the perf PMU could not be used, when it exists but failed. */
void rapl_perf_discover(struct host *h, struct rapl_state *st, char **ret_why);
