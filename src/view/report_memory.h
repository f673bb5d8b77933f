/* The memory section's figures other sections show too. */
#pragma once

#include "view/report.h"

/* DRAM power as a share of the node (report-json/memory.md "dram").
 * ret_dram_w: the RAPL dram domains summed, W, NaN when none gave a rate;
 * ret_node_w: the measured node figure, NaN when the node is estimated;
 * ret_why: why the share is unknown, NULL when known. Returns the share
 * in %, NaN when unknown. */
double report_dram_share(const struct report_ctx *c, double *ret_dram_w, double *ret_node_w,
                         const char **ret_why);
