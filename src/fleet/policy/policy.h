/* The policies that are pure functions of a fleet view (model/view.h).
 *
 * watt's own policy is one: watt_plan() reads a view and returns a plan,
 * nothing else. The simulator and the controller both call it and apply
 * its plan. CloudSim's policies (thr/iqr/mad/lr/lrr with mmt/mc/mu/rs) are
 * the benchmark's reference and stay inside the simulator (sim/cloudsim.c),
 * where they reproduce CloudSim's own bookkeeping, artefacts included;
 * they never drive a real fleet. */
#pragma once

#include "fleet/model/fleet.h"
#include "fleet/model/view.h"

/* A planner: the tunables, parsed once, and scratch memory reused from one
 * call to the next. The plan depends only on the tunables and the view.
 * Tables that follow from the host types are kept from call to call while
 * the view's types array (its address and count) and a host's type stay
 * the same: a caller that changes a type's figures in place makes a new
 * planner. */
struct watt_planner;

struct watt_planner *watt_planner_new(const struct fleet_watt_params *p);
void watt_planner_free(struct watt_planner *w);
const struct fleet_watt_params *watt_planner_params(const struct watt_planner *w);

/* The plan for VIEW, appended to RET (which the caller frees with
 * fleet_plan_free). Actions come in the order they are to be applied:
 * a migration's target is on (or switched on, by an earlier action, and
 * the VM moves at a later decision), each within the view's limits. */
void watt_plan(struct watt_planner *w, const struct fleet_view *view, struct fleet_plan *ret);

/* The forecast of a VM's demand, MIPS: the QUANTILE of its last WINDOW
 * samples, at least its demand now; with no sample, its demand now. */
double watt_forecast(const struct fleet_watt_params *p, const struct fleet_view_vm *v);
