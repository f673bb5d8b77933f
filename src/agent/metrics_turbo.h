/* Agent metrics of turbo headroom per package (model/turbo.h):
 * watt_cpu_base_frequency_hertz and its kin, docs/agent-metrics.md. */
#pragma once

#include "agent/metrics_writer.h"
#include "view/report.h"

/* Writes the families; a package whose figure is unknown has no series. */
void metrics_render_turbo(struct mw *w, const struct report_ctx *c);
