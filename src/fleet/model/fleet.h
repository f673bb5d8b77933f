/* The fleet model: host types, VM types, traces, scenarios and results.
 *
 * Pure data and pure functions. Time and random seeds are arguments; the
 * only I/O is in trace_load.c (reading a PlanetLab folder or a CSV file),
 * at the edge. Units are in every name: _s seconds, _w watts, _j joules,
 * _mb megabytes, _mbit megabits per second, mips million instructions per
 * second, utilisation as a fraction 0..1 unless named _pct. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FLEET_POWER_POINTS 11 /* power at 0, 10, ..., 100 % CPU load */
#define FLEET_NAME_MAX     48

/* Errors from parsers and the simulator: a sentence naming what and where
 * ("trace/20110303/host_x line 17: '1o' is not a number"). */
struct fleet_error {
    char msg[512];
};

void fleet_error_set(struct fleet_error *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

struct fleet_host_type {
    char name[FLEET_NAME_MAX];
    unsigned cores;
    double mips_per_core;
    unsigned ram_mb;
    double bw_mbit;                     /* network; half of it carries migrations */
    double power_w[FLEET_POWER_POINTS]; /* SPECpower-style table, linearly interpolated */
    double off_w;                       /* drawn when switched off (BMC), realistic mode */
    double boot_s;                      /* off -> able to run VMs, realistic mode */
    double boot_j;                      /* energy of one boot above off_w, realistic mode */
};

struct fleet_vm_type {
    char name[FLEET_NAME_MAX];
    double mips; /* per vCPU */
    unsigned pes;
    unsigned ram_mb;
    double bw_mbit;
};

/* The hosts of a fleet: types and, per host, its type index. */
struct fleet_hosts {
    struct fleet_host_type *types;
    size_t n_types;
    uint16_t *type_of; /* [n_hosts] */
    size_t n_hosts;
};

/* Built-in types: the HP ProLiant ML110 G4 (Xeon 3040) and G5 (Xeon 3075)
 * of CloudSim's PlanetLab experiments, with their SPECpower tables. */
const struct fleet_host_type *fleet_host_type_builtin(const char *name);

/* Parse a host spec. SPEC is either "cloudsim" (800 hosts, G4 and G5
 * alternating, as in CloudSim), a list "400xg4,400xg5[,alternate]", or the
 * text of an INI file with [type NAME] sections and a [fleet] section (see
 * docs/fleet.md). ORIGIN names the text in errors ("hosts.ini"). Pure. */
int fleet_hosts_parse(const char *text, size_t len, const char *origin, struct fleet_hosts *ret,
                      struct fleet_error *err);
void fleet_hosts_free(struct fleet_hosts *h);
/* One [type NAME] section as its keys come, for every file that holds
 * such sections (a --hosts INI, fleet.ini; docs/fleet-formats.md): each
 * key through fleet_type_spec_key(), then fleet_type_spec_finish() for
 * the type (base first, then the keys set, then the derived defaults).
 * Both return 0, or -EINVAL with WHY (naming the key; the caller adds the
 * file and line). */
struct fleet_type_spec {
    struct fleet_host_type t;           /* the keys set; t.name: NAME */
    const struct fleet_host_type *base; /* base = g4|g5; NULL: none */
    unsigned set;                       /* which keys were set (hosts.c) */
    int line;                           /* of its [type NAME] header */
};
#define FLEET_TYPE_NAME_MAX 40 /* inih keeps 50 bytes of "type NAME" */
/* 1..FLEET_TYPE_NAME_MAX letters, digits, '_', '-' or '.'. */
bool fleet_type_name_ok(const char *name);
int fleet_type_spec_key(struct fleet_type_spec *ts, const char *key, const char *val, char *why,
                        size_t size);
int fleet_type_spec_finish(const struct fleet_type_spec *ts, struct fleet_host_type *ret, char *why,
                           size_t size);
double fleet_host_type_mips(const struct fleet_host_type *t); /* cores x mips_per_core */
/* Power at utilisation u (0..1, clamped) by linear interpolation, watts. */
double fleet_host_type_power(const struct fleet_host_type *t, double u);

/* The four VM types of CloudSim's experiments (EC2-like, RAM halved). */
extern const struct fleet_vm_type fleet_vm_types_cloudsim[4];

/* CPU demand traces: one series per VM, one sample every step_s seconds,
 * in units of 0.01 % of the VM's capacity (0..10000), which holds
 * PlanetLab's integer percentages exactly. A VM exists from sample FIRST
 * for LEN samples (CSV traces may start and end VMs at any step). */
struct fleet_trace_vm {
    char *name;
    uint32_t first;
    uint32_t len;
    size_t off;      /* into fleet_trace.cpu */
    uint32_t ram_mb; /* from the CSV mem_mb column (max), 0 = take the VM type's */
};

struct fleet_trace {
    char *origin; /* folder or file it came from, for messages */
    double step_s;
    uint32_t n_steps; /* horizon = n_steps x step_s */
    struct fleet_trace_vm *vms;
    size_t n_vms;
    uint16_t *cpu;
};

#define FLEET_CPU_SCALE 10000.0 /* cpu[] units per 100 % */

/* The longest horizon a trace may have and a simulation may cover: 366
 * days. The simulator ticks every decision interval over the whole
 * horizon, so the horizon, not the number of samples, sets the run time:
 * two CSV rows 10^12 s apart made 6.7 x 10^9 ticks (32 hours). A PlanetLab
 * file of its 100,000 lines at 300 s spans 347 days. */
#define FLEET_MAX_HORIZON_S 31622400.0
/* The most decision intervals one simulation may take (366 days at 300 s
 * is 105,408). */
#define FLEET_MAX_TICKS 1000000.0

void fleet_trace_free(struct fleet_trace *t);

/* One PlanetLab file: one integer percentage per line. Pure; NAME is used in
 * errors. Appends one VM to T (T->step_s must be set). */
int fleet_trace_parse_planetlab(const char *text, size_t len, const char *name,
                                struct fleet_trace *t, struct fleet_error *err);
/* A CSV trace: header "vm,time_s,cpu_pct[,mem_mb]", each VM's rows together
 * and in increasing time, one step for all VMs. Pure. */
int fleet_trace_parse_csv(const char *text, size_t len, const char *origin, struct fleet_trace *ret,
                          struct fleet_error *err);
/* Load a PlanetLab folder (files in byte order of their names) or a .csv
 * file. The only I/O of the fleet layer. */
int fleet_trace_load(const char *path, struct fleet_trace *ret, struct fleet_error *err);

/* A seeded synthetic trace: diurnal pattern, bursts, heavy-tailed sizes. */
struct fleet_synth {
    size_t n_vms;
    uint32_t n_steps; /* default 288 */
    double step_s;    /* default 300 */
    uint64_t seed;
    double mean_pct; /* target mean utilisation, default 12 (like PlanetLab) */
};
int fleet_trace_synth(const struct fleet_synth *s, struct fleet_trace *ret,
                      struct fleet_error *err);

/* Demand of VM v at sample index k as a fraction 0..1 (0 outside its life). */
static inline double fleet_trace_at(const struct fleet_trace *t, size_t v, uint32_t k)
{
    const struct fleet_trace_vm *vm = &t->vms[v];
    if (k < vm->first || k - vm->first >= vm->len)
        return 0.0;
    return t->cpu[vm->off + (k - vm->first)] / FLEET_CPU_SCALE;
}

/* ---- policies -------------------------------------------------------- */

enum fleet_alloc {
    FLEET_NPA,     /* no power management: every host at full power */
    FLEET_DVFS,    /* power follows load, no migrations */
    FLEET_MIGRATE, /* CloudSim's detector + selection + PABFD */
    FLEET_WATT,    /* ours */
};

enum fleet_detector { FLEET_THR, FLEET_IQR, FLEET_MAD, FLEET_LR, FLEET_LRR };
enum fleet_selection { FLEET_MMT, FLEET_MC, FLEET_MU, FLEET_RS };

struct fleet_policy {
    enum fleet_alloc alloc;
    enum fleet_detector detector;
    enum fleet_selection selection;
    double param;              /* threshold or safety parameter */
    char name[FLEET_NAME_MAX]; /* canonical: "iqr-mmt-1.5", "watt" */
};

/* "npa", "dvfs", "thr-mmt-0.8", "iqr-mc-1.5", "lrr-rs-1.2", "watt". */
int fleet_policy_parse(const char *s, struct fleet_policy *ret, struct fleet_error *err);

/* ---- simulation ------------------------------------------------------ */

struct fleet_options {
    bool compat;       /* reproduce CloudSim 3.0.3, artefacts included */
    double interval_s; /* decision interval, default 300 */
    uint64_t seed;     /* RS selection, tie breaks */
    /* realistic mode only */
    double boot_s;                    /* < 0: take each host type's */
    double boot_j;                    /* < 0: take each host type's */
    double off_w;                     /* < 0: take each host type's */
    unsigned max_migrations_per_host; /* concurrent, in + out; default 2 */
    bool hard_ram;                    /* a VM holds its whole RAM on its host; default
                                       * is CloudSim's model, where RAM is checked only
                                       * when a VM is created (the PlanetLab runner
                                       * models RAM use as 0) */
    bool series;                      /* keep the per-interval time series */
    bool check;                       /* verify invariants every tick (tests) */
    const char *watt_params;          /* watt policy tunables "pack=0.8,..."; NULL: defaults */
};

void fleet_options_default(struct fleet_options *o);

/* The watt policy's tunables (docs/fleet.md), defaults in brackets. */
struct fleet_watt_params {
    double pack;       /* (0, 1]: pack hosts to this share of capacity (0.80) */
    double over;       /* (0, 2]: relieve a host above this share (0.95) */
    double low;        /* [0, 1]: drain candidates are below this share (0.50) */
    double quantile;   /* (0, 1]: forecast quantile of the recent history (0.90) */
    double window;     /* whole, [1, 1000]: history samples the forecast looks at (12) */
    double per_vm_day; /* [0, 1000]: migrations per VM per day (4) */
    double per_tick;   /* [0, 1]: drains per tick, share of VMs (0.25) */
    double spare;      /* [0, 10]: powered spare capacity, share of load (0.10) */
    double off_after;  /* [0, 10^6]: empty ticks before a host goes off (2) */
};

/* TEXT ("pack=0.8,over=0.95,...", blanks around keys and values allowed,
 * a later key wins) over the defaults; NULL or "": the defaults. A key not
 * listed above, a value that is not a number or out of range: -EINVAL,
 * ERR says which, *RET untouched. */
int fleet_watt_params_parse(const char *text, struct fleet_watt_params *ret,
                            struct fleet_error *err);

/* The time series: one point per decision interval. */
struct fleet_point {
    double t_s;
    unsigned active_hosts; /* hosts on (running VMs, booting or idle-on) */
    unsigned vms;          /* VMs alive */
    double power_w;        /* mean over the interval */
    double sla_violation;  /* share of active host-time in violation this interval */
    unsigned migrations;   /* started this interval */
};

struct fleet_result {
    char policy[FLEET_NAME_MAX];
    bool compat;
    double energy_kwh;
    double slatah;   /* fraction */
    double pdm;      /* fraction */
    double slav;     /* slatah x pdm */
    double esv;      /* energy_kwh x slav */
    double unserved; /* share of requested VM CPU-time not served (realistic) */
    unsigned long migrations;
    unsigned long power_ons;
    unsigned long power_offs;
    unsigned max_active_hosts;
    double mean_active_hosts;
    size_t vms_end;          /* VMs alive at the end (compat removes idle ones) */
    size_t vms_failed;       /* compat: VMs no host could take at creation (CloudSim drops them) */
    double lower_bound_kwh;  /* fluid lower bound, same accounting */
    double served_bound_kwh; /* the same bound on what this run served: energy >= it, always */
    struct fleet_point *series;
    size_t n_series;
};

void fleet_result_free(struct fleet_result *r);

/* The operator's constraints, as the controller takes them from fleet.ini:
 * hosts in maintenance (never used), VMs pinned to a host, anti-affinity
 * groups (no two VMs of a group on one host). Only the watt policy honours
 * them; CloudSim's policies know none. */
struct fleet_constraints {
    uint8_t *maintenance; /* [n_hosts] */
    int32_t *pin;         /* [n_vms] host index, -1: any */
    int32_t *group;       /* [n_vms] group, -1: none */
    size_t n_hosts, n_vms, n_groups;
};

/* The INI text of `watt fleet sim --constraints FILE` (docs/fleet-formats.md)
 * for trace TR on N_HOSTS hosts; SEED draws "random = GxK" groups. Pure. */
int fleet_constraints_parse(const char *text, size_t len, const char *origin,
                            const struct fleet_trace *tr, size_t n_hosts, uint64_t seed,
                            struct fleet_constraints *ret, struct fleet_error *err);
void fleet_constraints_free(struct fleet_constraints *c);

struct fleet_scenario {
    const struct fleet_hosts *hosts;
    const struct fleet_trace *trace;
    const struct fleet_vm_type *vm_types;
    size_t n_vm_types;
    const uint16_t *vm_type_of;                  /* [n_vms]; NULL: CloudSim's quarters rule */
    const struct fleet_constraints *constraints; /* NULL: none */
};

/* Run one simulation. Returns 0, or -EINVAL with ERR set when the scenario
 * cannot run (a VM bigger than every host, no hosts). */
int fleet_sim_run(const struct fleet_scenario *sc, const struct fleet_policy *p,
                  const struct fleet_options *o, struct fleet_result *ret, struct fleet_error *err);

/* The fluid lower bound of energy: every interval, the total demand packed
 * perfectly onto the fewest, most efficient hosts (fractional last host),
 * no migration or boot cost; the same metering as the run's mode. */
double fleet_lower_bound_kwh(const struct fleet_scenario *sc, const struct fleet_options *o);
/* Its parts: the cheapest watts per MIPS above standby over all types and
 * load points, and a type's standby power in the run's mode. */
double fleet_cheapest_w_per_mips(const struct fleet_hosts *hs, const struct fleet_options *o);
double fleet_type_off_w(const struct fleet_host_type *t, const struct fleet_options *o);
