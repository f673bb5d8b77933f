/* Agent metrics of GPUs (sense/gpu.h): watt_gpu_power_watts and its kin,
 * docs/agent-metrics.md "GPUs". */
#pragma once

#include "agent/metrics_writer.h"
#include "view/report.h"

/* Writes the families from the latest sample and the power section's
 * readings; a figure that is unknown has no series. */
void metrics_render_gpu(struct mw *w, const struct report_ctx *c);
