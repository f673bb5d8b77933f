/* The fleet view and the plan: what a policy reads and what it returns.
 *
 * A policy is a pure function: a fleet view in (host types and states, VMs
 * with their demand history and sizes, migrations in flight, limits,
 * constraints), a plan out (power a host on, migrate a VM from one host to
 * another, power a host off), each action with its reason and the forecast
 * it rests on. The simulator (src/fleet/sim/) builds a view of its state
 * every decision interval and applies the plan; the controller
 * (src/fleet/control/) builds one from what its engines observed and
 * executes the plan within its limits. Neither reaches into the other.
 *
 * Indices: hosts and VMs are indices into the view's arrays; -1 is none.
 * Units as in fleet.h: MIPS, megabytes, utilisation 0..1. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fleet/model/fleet.h"

enum fleet_power {
    FLEET_ON,       /* up, takes VMs */
    FLEET_OFF,      /* off: a policy may switch it on */
    FLEET_BOOTING,  /* switched on, not able to take VMs yet */
    FLEET_UNUSABLE, /* neither usable nor known to be off (unreachable, stopping,
                     * unknown): never a target, never switched */
};

struct fleet_view_host {
    const struct fleet_host_type *type;
    enum fleet_power power;
    double ram_used_mb; /* RAM taken: VMs here and booked in, and any the host lacks */
    const int32_t *vms; /* VMs listed here, those migrating in included, in the
                         * hypervisor's order (the order decides ties) */
    uint32_t n_vms;
    uint32_t n_in, n_out; /* migrations in flight */
    uint32_t empty_ticks; /* earlier decisions in a row it ended on and empty */
    bool maintenance;     /* evacuated, never a target, never switched on or off */
    bool busy;            /* runs something the view does not list (a second copy of a
                           * VM, a domain not planned for): never drained, never off */
};

struct fleet_view_vm {
    int32_t host; /* where it runs; -1: not placed (no plan touches it) */
    int32_t dest; /* migrating to; -1: not migrating */
    double mips;  /* per vCPU */
    uint32_t pes; /* vCPUs */
    double ram_mb;
    double req;         /* demand now, MIPS over all its vCPUs */
    const double *hist; /* utilisation, most recent first */
    uint32_t hist_n;
    uint32_t migrations_day; /* migrations begun in the last day */
    bool fixed;              /* never moved by the policy (not ours, just failed) */
    int32_t pin;             /* must run on this host; -1: anywhere */
    int32_t group;           /* anti-affinity group: no two on one host; -1: none */
};

struct fleet_view {
    const struct fleet_view_host *hosts;
    size_t n_hosts;
    const struct fleet_view_vm *vms;
    size_t n_vms;
    const struct fleet_host_type *types; /* every host's type points into it */
    size_t n_types;
    uint32_t max_migrations_per_host; /* in + out at once; 0: no limit */
    bool hard_ram;                    /* a VM's RAM counts on the host it moves to */
    bool manage_power;                /* hosts may be switched on and off */
    /* the demand history covers the policy's window; if not, only
     * overloads (and maintenance, pins, anti-affinity) act */
    bool warm;
    /* some host is in maintenance, or some VM is fixed, pinned or in a
     * group; false: none is, and the policy skips those checks */
    bool constrained;
};

enum fleet_action_kind { FLEET_ACT_POWER_ON, FLEET_ACT_MIGRATE, FLEET_ACT_POWER_OFF };

enum fleet_reason {
    FLEET_WHY_OVERLOAD,    /* migrate: its host's forecast or demand is over the limit */
    FLEET_WHY_DRAIN,       /* migrate: its host is lightly used and can be emptied */
    FLEET_WHY_MAINTENANCE, /* migrate: its host is in maintenance */
    FLEET_WHY_PIN,         /* migrate: back to the host it is pinned to */
    FLEET_WHY_AFFINITY,    /* migrate: it shares a host with a VM of its group */
    FLEET_WHY_TARGET,      /* power on: a VM the policy must move needs this host */
    FLEET_WHY_SPARE,       /* power on: powered spare below the margin */
    FLEET_WHY_IDLE,        /* power off: empty long enough, the others cover the forecast */
};
const char *fleet_reason_name(enum fleet_reason r); /* "overload", "drain", ... */

struct fleet_action {
    enum fleet_action_kind kind;
    enum fleet_reason reason;
    int32_t vm, src, dst; /* migrate */
    int32_t host;         /* power on, power off */
    /* the forecast it rests on: for a migration, the VM's forecast and its
     * source host's forecast load and capacity (MIPS, at the moment of the
     * decision); for power, the fleet's forecast need (load plus spare) and
     * the powered capacity at the packing target, after the action */
    double vm_mips, load_mips, cap_mips;
};

struct fleet_plan {
    struct fleet_action *v;
    size_t n, cap;
    double need_mips; /* forecast load plus spare, at the end of the plan */
    double cap_mips;  /* powered capacity at the packing target, at the end */
    bool observing;   /* !view->warm: only overloads acted */
};

struct fleet_action *fleet_plan_add(struct fleet_plan *p, enum fleet_action_kind kind,
                                    enum fleet_reason reason);
void fleet_plan_free(struct fleet_plan *p);
