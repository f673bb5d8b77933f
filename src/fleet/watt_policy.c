/* PLACEHOLDER */
#include "fleet/sim.h"
int watt_policy_init(struct sim *s) { return 0; }
void watt_policy_free(struct sim *s) {}
int32_t watt_initial_host(struct sim *s, int32_t v) { return cloudsim_initial_host(s, v); }
void watt_optimize(struct sim *s) {}
