/* The simulator's state, shared by the engine (sim.c), CloudSim's
 * consolidation (cloudsim.c) and ours (policy/watt.c). Internal to src/fleet. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "fleet/model/fleet.h"
#include "fleet/model/view.h"

struct watt_planner;

#define VM_HISTORY 30 /* CloudSim's PowerVm.HISTORY_LENGTH */

enum sim_power { SIM_ON, SIM_OFF, SIM_BOOTING };

struct sim_vm {
    const struct fleet_vm_type *type;
    double mips; /* per PE */
    unsigned pes;
    double ram_mb;
    int32_t host;     /* -1: not placed (not yet born, failed or gone) */
    int32_t dest;     /* last migration target, -1 when not migrating */
    uint8_t inflight; /* migrations of this VM in flight (CloudSim may start two) */
    bool migrating;   /* CloudSim's Vm.isInMigration() */
    bool alive;       /* exists now */
    bool gone;        /* compat: finished (demand hit 0); realistic: trace ended */
    bool born;        /* has been placed once */
    double req;       /* requested MIPS (all PEs) at the last update */
    double alloc;     /* allocated by its host at the last update */
    double mig_end_s; /* completion time of the migration in flight */
    /* utilisation history, most recent first, CloudSim's PowerVm */
    double hist[VM_HISTORY];
    uint8_t hist_n;
    /* state-history accounting (PDM, unserved) */
    bool sh_has, sh_mig;
    double sh_t, sh_alloc, sh_req;
    double req_integral, alloc_integral, mig_loss_integral;
    /* watt policy bookkeeping */
    uint16_t migrations_day;
    double last_migration_s;
};

struct sim_host {
    const struct fleet_host_type *type;
    double cap;   /* total MIPS */
    int32_t *vms; /* VMs on this host (incl. migrating in), in CloudSim's list order */
    uint32_t n_vms, cap_vms;
    uint32_t n_in;       /* migrating in */
    uint32_t n_out;      /* migrating out */
    double util_mips;    /* at the last update */
    double last_s;       /* time of its last update */
    double util_power_w; /* power at util_mips (cached: PABFD asks for it often) */
    /* sums over the VM list, cached until the list (version) or the
     * requests (sim.epoch) change; summed in list order, as CloudSim */
    uint32_t version;
    uint64_t ckey, hkey;
    double c_req, c_sum_eff, c_alloc_pot, c_mig_s;
    double c_hist[VM_HISTORY];
    double ram_used; /* requested RAM of VMs here */
    enum sim_power power;
    uint32_t empty_ticks; /* decisions in a row it ended on and empty (realistic) */
    double boot_done_s;
    double off_since_s;
    /* state-history accounting (SLATAH) */
    bool sh_has, sh_active;
    double sh_t, sh_alloc, sh_req;
    double active_s, violation_s;
};

struct migration {
    int32_t vm, src, dst;
    double end_s;
};

struct sim {
    const struct fleet_scenario *sc;
    const struct fleet_policy *pol;
    const struct fleet_options *opt;
    bool compat;
    struct sim_vm *vms;
    size_t n_vms;
    struct sim_host *hosts;
    size_t n_hosts;
    double now;                          /* current simulated time, s */
    uint32_t epoch;                      /* bumped whenever requests or migrations change */
    const struct fleet_host_type *types; /* [n_types], options applied */
    uint32_t *type_stamp;                /* PABFD scratch, per type */
    struct pabfd_cand {
        double diff;
        int32_t host;
    } * cand;           /* PABFD scratch, per host */
    int32_t *type_idle; /* PABFD scratch, per type */
    /* a consolidation round's hosts: live ones, and idle ones per type */
    bool in_round;
    int32_t *live;
    uint32_t n_live;
    uint8_t *is_live;
    int32_t **idle_by_type;
    uint32_t *idle_n, *idle_pos;
    uint32_t stamp;
    double last_s; /* last update time */
    double energy_ws;
    double util_mips_s; /* utilisation integrated where energy was metered */
    double interval_energy_ws;
    double interval_active_s, interval_violation_s;
    unsigned interval_migrations;
    unsigned long migrations, power_ons, power_offs;
    struct migration *migs; /* in flight, unordered */
    size_t n_migs, cap_migs;
    uint64_t rng;
    /* a scratch plan for the consolidation round: saved lists */
    int32_t *saved;
    uint32_t *saved_off;
    double *saved_ram;
    size_t n_failed;             /* VMs no host could take at creation */
    double pending_req_integral; /* demand of VMs waiting for a host */
    /* a pure policy (watt): its planner, the view handed to it, and the
     * placement of new VMs (the cloud's scheduler, not the policy) */
    struct watt_planner *planner;
    struct fleet_view_host *view_hosts;
    struct fleet_view_vm *view_vms;
    double day_start_s;
    double *w_per_mips;  /* per host: watts per MIPS at full load */
    int32_t *fill_order; /* all hosts, most efficient type first, for t = 0 */
    size_t *fill_pos;    /* per VM type: hosts before it are full for that type */
    int check_rc;        /* first invariant broken (opt->check), with its message */
    struct fleet_error check_err;
};

/* ---- sim.c: the scheduler of one host, and plan operations ---- */
double sim_host_allocated_mips(const struct sim *s, const struct sim_host *h, bool potential);
double sim_host_available_mips(const struct sim *s, const struct sim_host *h);
bool sim_host_suitable(const struct sim *s, const struct sim_host *h, const struct sim_vm *v);
double sim_vm_requested_mips(const struct sim *s, const struct sim_vm *v);
void sim_host_add_vm(struct sim_host *h, int32_t vm);
void sim_host_remove_vm(struct sim_host *h, int32_t vm);
bool sim_host_has_vm(const struct sim_host *h, int32_t vm);
double sim_host_requested_mips(const struct sim *s, const struct sim_host *h);
void sim_host_sums(const struct sim *s, const struct sim_host *h);
const double *sim_host_history_sum(const struct sim *s, const struct sim_host *h);
double sim_host_power_w(const struct sim_host *h, double util_mips);
void plan_save(struct sim *s);
void plan_restore(struct sim *s);
int sim_start_migration(struct sim *s, int32_t vm, int32_t dst);
void sim_power_off(struct sim *s, int32_t host);
void sim_power_on(struct sim *s, int32_t host);
uint64_t sim_random(struct sim *s);
double sim_vm_demand(const struct sim *s, size_t v, double t);
void sim_update(struct sim *s, double t);
void run_migrations_until(struct sim *s, double limit);
void boots_complete(struct sim *s, double t);
void sim_vm_finish(struct sim *s, int32_t vi);

/* ---- cloudsim.c: CloudSim's detectors, selection, PABFD, underload ---- */
/* Initial placement of VM v at creation: PABFD or first fit. -1: nowhere. */
int32_t cloudsim_initial_host(struct sim *s, int32_t v);
void cloudsim_optimize(struct sim *s);

/* ---- watt.c: the watt policy (policy/watt.c) driven through a view ---- */
int sim_watt_init(struct sim *s, struct fleet_error *err);
void sim_watt_free(struct sim *s);
/* Where a new VM goes when the policy is watt. */
int32_t sim_watt_place(struct sim *s, int32_t v);
/* Build the view, run the policy, apply its plan. */
void sim_watt_decide(struct sim *s);
