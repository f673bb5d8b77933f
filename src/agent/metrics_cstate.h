/* Agent metrics of package and core C-states (docs/metrics.md): the
 * cstate PMUs' residency (sense/cstate_pmu.h) per package and state, and
 * per core, as counters of seconds; where the package PMU gives nothing,
 * the mean of the package's CPUs' cpuidle time, under its own name. */
#pragma once

#include "agent/metrics_writer.h"
#include "view/report.h"

/* Seconds per (package, core, state), kept across samples: a PMU gives a
 * share of each interval (delta(count) / delta(tsc)), which is summed as
 * share x interval, so the totals never decrease and rate() of them is
 * the residency over any window, whatever the scrape interval. */
struct agent_cstate;

int agent_cstate_new(struct agent_cstate **ret);
void agent_cstate_free(struct agent_cstate *s);
/* Fold the interval from c->a to c->b into the totals (nothing without
 * c->b). A unit or CPU not read in both samples adds nothing and its
 * series is left out until it is read again. */
void agent_cstate_update(struct agent_cstate *s, const struct report_ctx *c);
/* The families; S NULL: only the source and the reasons. */
void metrics_render_cstate(struct mw *w, const struct agent_cstate *s, const struct report_ctx *c);
