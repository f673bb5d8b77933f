/* Agent metrics of memory (docs/metrics.md): DRAM power as a share of the
 * node, per NUMA node the memory in use and the time all its CPUs were
 * idle (so its memory controller could idle), and the DIMMs EDAC shows
 * per memory controller. */
#pragma once

#include "agent/metrics_writer.h"
#include "host/host.h"
#include "sense/memory.h"
#include "view/report.h"

/* What the agent keeps: the nodes and the EDAC tree, read once at start
 * and on reload (sizes and DIMMs do not change while it runs), each
 * node's meminfo re-read per sample (one pread of a kept-open file), and
 * per node the seconds its CPUs were all idle. */
struct agent_memory;

/* Reads the nodes and EDAC under h. -ENOMEM only. */
int agent_memory_new(struct host *h, struct agent_memory **ret);
void agent_memory_free(struct agent_memory *m);
/* SIGHUP: read the nodes and EDAC anew; the idle totals of nodes still
 * there are kept. */
void agent_memory_reload(struct agent_memory *m, struct host *h);
/* Per sample: each node's meminfo now, and the interval c->a..c->b into
 * the idle totals (a CPU busier than 1 % of the interval, or one that
 * cannot be judged, keeps its node from counting as idle: the report's
 * rule). */
void agent_memory_update(struct agent_memory *m, struct host *h, const struct report_ctx *c);
/* The nodes and controllers as of the last update (for the report). */
const struct memory_info *agent_memory_info(const struct agent_memory *m);
void metrics_render_memory(struct mw *w, const struct agent_memory *m, const struct report_ctx *c);
