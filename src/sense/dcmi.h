/* The BMC's wall power as a sampler ("dcmi"): DCMI Get Power Reading
 * (sense/dcmi_power.h) in-band through /dev/ipmi0 by default, or over the
 * LAN to the BMC that dcmi_sampler_configure() names.
 *
 * The BMC is slow (a read is a round trip through the BMC's firmware: ms
 * over the LAN to ipmi_sim, 10-100 ms on real BMCs), so the sampler reads
 * it at most once per DCMI_MIN_READ_NS or the BMC's statistics period,
 * whichever is longer (capped at DCMI_MAX_READ_NS: some BMCs report the
 * time since their statistics were reset as the period), and in between
 * hands on the last reading with its age. A LAN read gives up after
 * DCMI_LAN_TIMEOUT_S (a session idle that long is stale to freeipmi, so
 * each LAN read opens a fresh one: two round trips, each bounded by the
 * timeout), and after a failure the BMC is left alone for
 * DCMI_BACKOFF_NS, so the agent's one loop never waits on a dead BMC for
 * more than one timeout per back-off. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "base/diag.h"
#include "sense/dcmi_power.h"
#include "sense/power_reading.h"
#include "sense/sampler.h"

#define DCMI_MIN_READ_NS   (1000ull * 1000000ull)  /* 1 s */
#define DCMI_MAX_READ_NS   (30000ull * 1000000ull) /* 30 s */
#define DCMI_BACKOFF_NS    (60000ull * 1000000ull) /* 60 s */
#define DCMI_STALE_NS      (90000ull * 1000000ull) /* 90 s: a reading no longer given */
#define DCMI_LAN_TIMEOUT_S 1.0

struct dcmi_sample {
    bool have;             /* a reading exists (this sample's or an older one) */
    bool fresh;            /* read for this sample (false: the last one again) */
    struct dcmi_power p;   /* the BMC's answer */
    uint64_t read_mono_ns; /* CLOCK_MONOTONIC when it was read */
    double read_ms;        /* how long the read took, ms */
    char via[8];           /* "inband" or "lan" */
    char name[80];         /* "in-band", "lan 127.0.0.1:623" */
};

/* Read the BMC over the LAN instead of in-band: LAN NULL goes back to
 * in-band. Copied; call before sense_open(). Process-wide, as a sampler's
 * probe takes only the host. */
void dcmi_sampler_configure(const struct dcmi_lan *lan);

extern const struct sampler dcmi_sampler;

/* The BMC's reading of the latest sample (b, or a when b is NULL) as one
 * power_reading: scope PLATFORM, source "dcmi", via "inband" or "lan",
 * domain "bmc", watts the BMC's current reading, period its statistics
 * period, label its average over that period. An inactive measurement
 * gives no watts and a reason in D. Returns the number of readings added
 * (0 or 1). */
int dcmi_power(const struct dcmi_sample *a, const struct dcmi_sample *b, struct power_readings *out,
               struct diags *d);
