/* The C-state section's hardware part: package and core C-state residency
 * from the cstate PMUs (sense/cstate_pmu.h), over the report's interval. */
#pragma once

#include "base/json.h"
#include "base/strbuf.h"
#include "sense/cstate_pmu.h"
#include "view/report.h"

/* Package PKG's residency per event of the package PMU, in % of the
 * interval, into ret_pct (CSTATE_PMU_MAX_EVENTS) and the event names into
 * *ret_pmu's ev[]. Returns the number of events (> 0) when the PMU
 * measured it, else 0 with *ret_why saying why not (static or the
 * sample's string). */
unsigned report_pkg_pmu(const struct report_ctx *c, int pkg, double *ret_pct,
                        const struct cstate_pmu **ret_pmu, const char **ret_why);
/* "package_pmu" and "core_pmu" members of the cstates object. */
void report_cstate_pmu_json(const struct report_ctx *c, struct json *j);
/* The package C-state lines under the per-CPU table. */
void report_cstate_pmu_text(const struct report_ctx *c, struct strbuf *out);
