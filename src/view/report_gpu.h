/* The GPU section's figures other parts of the report use. */
#pragma once

#include "sense/gpu.h"
#include "view/report.h"

/* The power section's reading of GPU g (source "gpu", domain its id), or
 * NULL when gpu_power() gave none. */
const struct power_reading *report_gpu_reading(const struct report_ctx *c, const struct gpu_dev *g);
