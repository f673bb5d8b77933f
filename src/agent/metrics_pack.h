/* Agent metrics of the packer (tune/packer.h, docs/pack.md):
 * watt_pack_cpus and its kin, docs/agent-metrics.md. */
#pragma once

#include "agent/metrics_writer.h"
#include "tune/packer.h"

/* Writes the families; nothing when S is NULL (no packer runs). Reads
 * only the numbers of S (its strings may be gone by a scrape). */
void metrics_render_pack(struct mw *w, const struct pack_status *s);
