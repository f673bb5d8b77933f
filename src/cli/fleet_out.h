/* Output of `watt fleet sim` and `watt fleet compare`: JSON, a text or
 * markdown metrics table, a long-format CSV of the time series and an SVG
 * chart, all from struct fleet_result. Formatting only; the results are
 * computed by src/fleet/.
 *
 * Conventions: JSON carries the raw values (shares as fractions 0..1, see
 * docs/fleet-json.md); the tables print them scaled for reading, with the
 * unit in the column header (SLATAH %, SLAV x1e-5). LABELS, where taken, is
 * an array of N strings naming the runs ("20110303"); NULL drops the label
 * column (tables), numbers the runs from 1 (CSV) or names them by policy
 * alone (SVG legend). Output is deterministic: the same results give the
 * same bytes. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "base/json.h"
#include "base/strbuf.h"
#include "fleet/model/fleet.h"

/* One JSON object for run R, written as the next value of J. TRACE_ORIGIN
 * names the trace (folder, file or "synth:seed=1"); NULL writes null.
 * WITH_SERIES adds the per-interval "series" array. */
void fleet_out_json(struct json *j, const struct fleet_result *r, const char *trace_origin,
                    bool with_series);

/* The whole --json document of `watt fleet sim|compare` (docs/fleet-json.md):
 * {"schema": SCHEMA ("watt-fleet-sim/2", "watt-fleet-compare/2"), "time",
 * "runs": [one object per run, as above]}. ORIGINS may be NULL. */
void fleet_out_json_doc(struct json *j, const char *schema, int64_t time_s,
                        const struct fleet_result *const *runs, char *const *origins, size_t n,
                        bool with_series);

/* A plain-text metrics table, one row per run, appended to OUT. Lines are
 * 116 columns wide with 8-character labels ("20110303") and 11-character
 * policies ("iqr-mmt-1.5"); nothing is clipped. */
void fleet_out_table(struct strbuf *out, const struct fleet_result *const *runs, size_t n,
                     const char *const *labels);

/* The same table as GitHub markdown (for the README), appended to OUT. */
void fleet_out_markdown(struct strbuf *out, const struct fleet_result *const *runs, size_t n,
                        const char *const *labels);

/* The time series of every run in long format, header first:
 * run,policy,t_s,active_hosts,vms,power_w,sla_violation,migrations
 * Returns 0, or -errno when writing to F fails (F is flushed). */
int fleet_out_series_csv(FILE *f, const struct fleet_result *const *runs, size_t n,
                         const char *const *labels);

/* A self-contained SVG (no scripts, no external references), 900 px wide:
 * three panels over a shared time axis in hours (active hosts, power in kW,
 * SLA violation in % of active host-time), one line per run, a legend and
 * TITLE (NULL: none). Returns 0, or -errno when writing to F fails. */
int fleet_out_svg(FILE *f, const struct fleet_result *const *runs, size_t n,
                  const char *const *labels, const char *title);
