/* The packer's plan: which CPUs movable work is confined to, so that whole
 * cores and whole packages stay idle (docs/pack.md). Pure: a topology, the
 * CPUs never to pack and a demand in, a plan out; no I/O, no clock.
 *
 * The growth order lists every packable CPU once: packages one at a time
 * (those holding an excluded CPU first, since an isolated or guarded CPU
 * keeps its package out of package C-states anyway; then by rising package
 * id), within a package cores by rising (die, core_id), cores with an
 * excluded SMT sibling after the clean ones, and a core's online siblings
 * next to each other. A plan is always a prefix of that order that ends on
 * a core boundary: a core is packed with all its packable siblings. */
#pragma once

#include <stdbool.h>

#include "base/cpuset.h"
#include "host/topology.h"

/* Defaults of a [pack] profile section (docs/pack.md says why). */
#define PACK_DEFAULT_HEADROOM     0.25 /* plan for demand × 1.25 */
#define PACK_DEFAULT_SHRINK_SLACK 0.25 /* shrink only with 25 % more to spare */
#define PACK_DEFAULT_MIN_CPUS     1u

struct pack_input {
    const struct topology *topo;
    const struct cpuset *excluded; /* never packed (isolcpus, nohz_full, a latency
                                    * guard's CPUs, user-pinned cpusets); may be NULL */
    double demand_cpus;            /* CPUs busy over the window (1.0 = one CPU), >= 0 */
    double headroom;               /* fraction added to the demand, >= 0 */
    unsigned min_cpus;             /* the plan holds at least this many (at least 1) */
};

struct pack_plan {
    struct cpuset cpus; /* the packed set, owned */
    unsigned ncpus;     /* its size */
    double target;      /* demand × (1 + headroom), in CPUs */
    bool saturated;     /* the target (or min) exceeds every packable CPU */
    int *order;         /* every packable CPU in growth order, owned; cpus
                         * is order[0 .. ncpus) */
    unsigned norder;
    unsigned *core_end; /* prefix lengths that end a core: order[0 ..
                         * core_end[i]) is the first i+1 cores, owned */
    unsigned ncore_steps;
    struct cpuset idle_cores; /* every CPU of the online cores with no packed
                               * and no excluded CPU: cores left wholly idle */
    unsigned nidle_cores;
    int *idle_packages; /* package ids with no packed and no excluded
                         * online CPU, rising, owned */
    unsigned nidle_packages;
};

/* Builds the plan. -EINVAL for a NULL topology, a negative or non-finite
 * demand or headroom; -ENOSPC when no online CPU is packable (all
 * excluded, or no CPU with a known package). *ret set only on success. */
int pack_plan_build(const struct pack_input *in, struct pack_plan *ret);
void pack_plan_free(struct pack_plan *p);

/* ---- hysteresis ----
 * GROW at once when the target exceeds the current set; SHRINK only when
 * demand × (1 + headroom) × (1 + slack) fits in fewer cores than the
 * current set, and then only to that size (so the next small rise does
 * not grow again); KEEP otherwise. REPLAN when the current set is not a
 * plan of this topology any more: it holds a CPU that is offline,
 * excluded or unknown, or is not the growth order's prefix (a CPU went
 * offline, the excluded set changed); the replanned set is the plan for
 * the demand but never smaller than what is left usable of the current
 * one, so a replan never hides a shrink. */
enum pack_action { PACK_KEEP, PACK_GROW, PACK_SHRINK, PACK_REPLAN };

/* CURRENT is the set in force (NULL or empty: nothing packed yet, which
 * gives GROW). *ret_next is the plan to apply (for KEEP, the plan that
 * equals CURRENT); errors as pack_plan_build(), plus -EINVAL for a
 * negative or non-finite slack. */
int pack_decide(const struct pack_input *in, const struct cpuset *current, double shrink_slack,
                enum pack_action *ret_action, struct pack_plan *ret_next);
const char *pack_action_name(enum pack_action a); /* "keep", "grow", "shrink", "replan" */
