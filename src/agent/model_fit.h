/* The agent's own power model: where a meter gives the node's watts, each
 * sample is a point (CPUs, busy CPUs with POLL, GHz, measured watts) in a
 * bounded store (model/fit_store.h); every fit_interval_s the model is
 * fitted (model/fit.h) and written, atomically, to ROOT/FIT_MODEL_PATH,
 * which `watt report --model fitted` loads. docs/power-model.md. */
#pragma once

#include <stdint.h>

#include "host/host.h"
#include "model/model.h"
#include "model/power.h"

struct agent_fit;

/* EVERY_S: seconds between fits (> 0). An existing fitted file is loaded
 * (shown until the first fit; replaced once a fit has at least as many
 * points, or FIT_STORE_MAX / 4). */
struct agent_fit *agent_fit_new(struct host *h, double every_s);
void agent_fit_free(struct agent_fit *f);

/* Offer one sample's power summary: kept when it is measured and has a
 * utilisation; fitted and written when due (NOW_NS monotonic). Failures
 * are said on stderr once per change of the reason. */
void agent_fit_update(struct agent_fit *f, const struct power_summary *ps, double pue,
                      uint64_t now_ns);

/* The fitted model, NULL while there is none. */
const struct power_model *agent_fit_model(const struct agent_fit *f);
