/* The fleet controller: observe, forecast and plan with the simulator's
 * watt policy, execute within limits, verify, journal. One tick at a time
 * (control_tick); `watt fleet run` loops over it, `watt fleet plan` runs
 * one tick that executes nothing.
 *
 * Files: control.c (state, observation, host states), control_plan.c
 * (the policy on a snapshot of the real fleet), control_act.c (actions,
 * safety checks, verification), control_journal.c (the journal),
 * control_history.c (the CPU samples kept across restarts, and the gate
 * that makes a controller without them observe before it consolidates). */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "fleet/control/opstate.h"
#include "fleet/control/site.h"
#include "fleet/engine/exec.h"
#include "fleet/model/view.h"

/* What the controller believes of a host. */
enum ctl_host_state {
    CTL_ON,          /* BMC on (or none) and the hypervisor answers: usable */
    CTL_OFF,         /* the BMC says off */
    CTL_BOOTING,     /* switched on by us, the hypervisor does not answer yet */
    CTL_STOPPING,    /* soft off sent, the BMC still says on */
    CTL_UNREACHABLE, /* the BMC says on, the hypervisor does not answer: it
                      * may run VMs; never used, never switched off */
    CTL_UNKNOWN,     /* the BMC does not answer and neither does the hypervisor:
                      * never assumed off */
};
const char *ctl_host_state_name(enum ctl_host_state s);

struct ctl_host {
    enum ctl_host_state state;
    enum fx_power_state bmc; /* last BMC answer */
    bool bmc_ok;             /* the BMC answered this tick */
    bool hv_ok;              /* the hypervisor answered this tick */
    unsigned bmc_failures;   /* in a row: the BMC is asked again after a backoff */
    unsigned empty_ticks;    /* ticks in a row on with no domain running */
    bool maintenance;        /* evacuated, kept out of plans */
    double bmc_next_s;       /* do not ask the BMC before this (backoff) */
    double since_s;          /* in this state since */
    double watts;            /* DCMI reading, NAN: none */
    struct fx_list doms;     /* this tick's domains (hv_ok) */
    uint64_t mem_kib;        /* the hypervisor's memory (0: unknown) */
    char err[640];           /* the last error, "" none */
};

/* CPU samples kept per VM: CloudSim's history length, as the simulator's
 * VM_HISTORY; the watt policy's window is capped at it. */
#define CTL_HISTORY 30

struct ctl_vm {
    char name[FLEET_NAME_MAX * 2];
    int32_t host;    /* where it is active now, -1: not seen */
    int32_t seen_on; /* last host it was seen on, -1: never */
    unsigned copies; /* hosts where it is active this tick (> 1: a split brain) */
    double util;     /* CPU, share of its vCPUs 0..1, this tick; NAN: no sample yet */
    uint64_t prev_cpu_ns, prev_t_ns;
    int32_t prev_host;
    unsigned vcpus;
    double mem_mb;
    double hist[CTL_HISTORY];   /* utilisation history 0..1, most recent first */
    double hist_t[CTL_HISTORY]; /* when each was taken, unix seconds (CLOCK_REALTIME) */
    unsigned hist_n;
    double seen_unix_s;      /* last seen active, unix seconds; 0: never */
    unsigned migrations_day; /* begun in the last 24 h (journal) */
    double no_move_until_s;  /* after a failed migration: left alone for two ticks */
    bool managed;
    int32_t pin;   /* the host it must run on, -1: any */
    int32_t group; /* its anti-affinity group, -1: none */
};

enum ctl_action_kind {
    CTL_MIGRATE,
    CTL_POWER_ON,
    CTL_POWER_OFF,
    CTL_DESTROY_COPY, /* destroy_stale_copy: the paused copy of VM on HOST, its twin on SRC */
};

struct ctl_action {
    enum ctl_action_kind kind;
    enum fleet_reason reason;
    int32_t vm; /* CTL_MIGRATE */
    int32_t src, dst;
    int32_t host;                        /* power actions */
    double vm_mips, load_mips, cap_mips; /* the policy's forecast (model/view.h) */
    char why[160];
    char id[OPSTATE_ID_LEN + 1]; /* stable across ticks (opstate_action_id) */
    bool held;                   /* manual mode: not approved, not executed */
    /* after execution */
    int rc;
    char result[900];
};

struct ctl_plan {
    struct ctl_action *v;
    size_t n, cap;
    char notes[16][256]; /* why something was not done ("min_hosts_on holds h1 on") */
    size_t n_notes;
    double forecast_mips, capacity_on_mips;
    bool observing;                      /* the policy's history is short: only overloads act */
    double observe_s, plan_s, execute_s; /* what the tick took, wall */
};

struct controller;

struct ctl_options {
    bool dry_run; /* plan and print, execute nothing, write no journal */
    /* the "schema" of the JSON tick reports (docs/json.md): NULL is
     * "watt-fleet-run/2"; `watt fleet plan` says "watt-fleet-plan/1" */
    const char *json_schema;
};

/* Open: engines, the journal (recovering what a crash left open) and the
 * lock in site->state_dir (not for a dry run). */
int controller_open(const struct site *site, const struct ctl_options *opt, struct controller **ret,
                    struct fleet_error *err);
/* The same with the engines given (tests: an engine of their own); the
 * controller owns them from here on, also on failure. */
int controller_open_engines(const struct site *site, const struct ctl_options *opt,
                            struct fx_vms *vms, struct fx_power *power, struct controller **ret,
                            struct fleet_error *err);
void controller_close(struct controller *c);

/* One tick: observe, plan, and (unless dry run) execute and verify.
 * NOW_S: seconds on a monotonic clock. Writes the tick's report to OUT
 * (text, or one JSON object a line with JSON). Returns 0, or a negative
 * errno when the tick could not even observe (the loop goes on). */
int controller_tick(struct controller *c, double now_s, FILE *out, bool json);

/* Observe only (no plan, no action, no report): the first CPU sample of
 * every VM, so that a tick SAMPLE seconds later has rates (watt fleet plan). */
void controller_prime(struct controller *c, double now_s);

/* Prometheus text exposition of the controller's state and counters. */
void controller_metrics(const struct controller *c, FILE *f);

/* ---- internal, shared by the control_*.c files ---------------------- */

struct ctl_journal;
struct watt_planner;

struct controller {
    const struct site *site;
    struct ctl_options opt;
    struct fx_vms *vms;
    struct fx_power *power;
    struct ctl_host *hosts;
    struct ctl_vm *vm;
    size_t n_vm, cap_vm;
    int32_t *vm_index; /* control.c: VMs by name (hash of indices, -1 empty) */
    size_t vm_index_cap;
    struct ctl_journal *journal;
    struct watt_planner *planner; /* the policy, its tunables parsed once */
    int lock_fd;
    double now_s, start_s;
    double now_unix_s; /* wall clock of the last observation, unix seconds */
    unsigned long ticks;
    unsigned long observations; /* since open (a CPU sample needs two) */
    unsigned hist_loaded;       /* the most recent samples of a VM state_dir/history gave */
    char history_error[600];    /* why state_dir/history was refused, "" none */
    /* counters for the metrics */
    unsigned long migrations_ok, migrations_failed, power_ons, power_offs, power_failed;
    unsigned long safety_refusals, vms_missing;
    char last_error[512];
    /* control_manual.c: the operator's files, manual mode; control_copies.c */
    char maint_error[320];     /* the maintenance file was refused: why ("" fine) */
    unsigned plan_kinds[4];    /* this tick's plan by enum ctl_action_kind */
    unsigned plan_pending;     /* of which held for an approval */
    uint64_t plan_serial;      /* plan.json's "plan" */
    struct ctl_recent *recent; /* the last plans' pending IDs, for "approve all" */
    unsigned long approvals_done, approvals_dropped, copies_destroyed;
};

/* control.c */
void ctl_observe(struct controller *c);
int32_t ctl_vm_index(struct controller *c, const char *name, bool add);

/* control_plan.c */
/* The watt policy tunables: fleet.ini's spare and max_migrations_per_vm_day,
 * then its policy = "pack=0.8,..." over them, parsed once. */
int ctl_policy_params(const struct site *site, struct fleet_watt_params *ret,
                      struct fleet_error *err);
/* The view the policy plans from: every VM of c->vm (index for index),
 * those not planned for with host -1. Arrays owned by RET_BUF. */
struct ctl_view_buf {
    struct fleet_view_host *hosts;
    struct fleet_view_vm *vms;
    int32_t *lists;
};
void ctl_view_make(const struct controller *c, struct fleet_view *ret, struct ctl_view_buf *buf);
void ctl_view_free(struct ctl_view_buf *buf);
int ctl_plan_make(struct controller *c, struct ctl_plan *ret);
void ctl_plan_free(struct ctl_plan *p);
void ctl_plan_note(struct ctl_plan *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Capacity (MIPS at the packing target) of hosts that stay on, and the
 * forecast demand plus spare they must cover, if host SKIP went off. */
void ctl_capacity(const struct controller *c, int32_t skip, double *ret_cap, double *ret_need);

/* control_history.c: state_dir/history, the warm start.
 *
 * The gate: the watt policy forecasts from a window of CPU samples per VM
 * (fleet.ini's policy = window=N, default 12, at most CTL_HISTORY). A
 * controller that has fewer samples than that (a first start, or a
 * restart whose history is missing, refused or older than window x
 * interval_s) only observes: the view it gives the policy is not warm
 * (model/view.h), so no VM moves to consolidate and no host is switched
 * on or off for the spare margin; overloads, maintenance, pins and
 * anti-affinity still act. ctl_warm() says whether the window is
 * full: RET_HAVE samples (those loaded from state_dir/history plus one
 * per observation since the first), RET_NEED the window (either may be
 * NULL). */
bool ctl_warm(const struct controller *c, unsigned *ret_have, unsigned *ret_need);
/* The notes of a plan P made while observing (none when warm): how many
 * samples, and what WOULD (the plan a warm controller would make) does
 * that P does not ("held back"). The policy itself holds back: the view's
 * warm flag is ctl_warm(). */
void ctl_warm_notes(struct controller *c, const struct ctl_plan *would, struct ctl_plan *p);
/* A VM's CPU demand now, share of its vCPUs 0..1: its rate this tick; else
 * its last sample (one from before a restart); else, with no sample at
 * all, 0 while observing (it must not switch hosts on) and its whole size
 * (1) once warm (a new VM). */
double ctl_vm_demand(const struct controller *c, const struct ctl_vm *v);
/* Add a sample U (0..1) taken at T_UNIX_S, most recent first. */
void ctl_history_push(struct ctl_vm *v, double u, double t_unix_s);
/* Read state_dir/history into the VMs (adding those not known yet), keeping
 * only samples at most window x interval_s old at NOW_UNIX_S. 0 also when
 * there is none; -errno with ERR naming the file (and line) when it is
 * refused: then nothing is loaded. */
int ctl_history_load(struct controller *c, double now_unix_s, struct fleet_error *err);
/* Write every VM's samples (VMs seen in the last day) to state_dir/history:
 * a temporary file, fsynced, renamed over it, the directory fsynced. */
int ctl_history_save(const struct controller *c, double now_unix_s, struct fleet_error *err);

/* control_act.c */
void ctl_execute(struct controller *c, struct ctl_plan *p);
/* Close every begin of the journal that no end closes (a crash, or an end
 * record that could not be written) from this tick's observation: "end N
 * recovered ... outcome=done|failed|unknown". Never acts. */
void ctl_recover(struct controller *c);

/* control_manual.c: before planning, the maintenance file into
 * hosts[].maintenance (kept as it was when the file is refused). */
void ctl_operator_read(struct controller *c);
/* After planning: destroy_stale_copy's actions, every action's ID, the
 * notes; in manual mode the approvals taken, the plan ordered approved
 * first and *RET_N_RUN set to how many to execute (automatic: all). */
void ctl_operator_plan(struct controller *c, struct ctl_plan *p, size_t *ret_n_run);
/* After executing: manual mode writes plan.json; the metrics' counts. */
void ctl_operator_done(struct controller *c, struct ctl_plan *p);
void ctl_operator_metrics(const struct controller *c, FILE *f);
void ctl_operator_free(struct controller *c);
const char *ctl_action_name(enum ctl_action_kind k); /* "migrate", "power_on", ... */
/* "migrate vm1 h1 -> h2", "switch off h3", ... */
void ctl_action_describe(const struct controller *c, const struct ctl_action *a, char *buf,
                         size_t size);

/* control_copies.c: destroy_stale_copy */
void ctl_copies_plan(struct controller *c, struct ctl_plan *p);
void ctl_copies_execute(struct controller *c, struct ctl_plan *p);

/* control_journal.c: one line per record, fdatasync'd, in state_dir/journal.
 * Safe to call from several threads at once: numbers are taken and lines
 * written and synced under the journal's own lock, so the file's lines
 * are whole and in the order of their numbers. */
/* READ_ONLY: a dry run's view (no directory made, nothing written). */
int ctl_journal_open(const char *dir, bool read_only, struct ctl_journal **ret,
                     struct fleet_error *err);
void ctl_journal_close(struct ctl_journal *j);
/* mkdir DIR (0700) unless it exists; a new one's name is fsynced into its parent. */
int ctl_journal_mkdir(const char *dir, struct fleet_error *err);
/* The begun actions no end record closes (a crash between the two, or an
 * end that could not be written): "SEQ TEXT" each, in file order. */
size_t ctl_journal_open_actions(struct ctl_journal *j, char ***ret_lines);
size_t ctl_journal_n_open(struct ctl_journal *j);
/* Append "begin ..." and return its sequence number, or -errno. A number
 * is never given twice: an append that fails (short or failed write,
 * failed fdatasync) is cut back off the file and leaves a gap. */
long ctl_journal_begin(struct ctl_journal *j, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
int ctl_journal_end(struct ctl_journal *j, long seq, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* A name as one word of a record ("web 1" -> "web%201"), and back. */
char *ctl_journal_word(const char *s);
int ctl_journal_unword(const char *s, char *out, size_t size);
/* FN(CTX, vm) for every migration begun since SINCE_UNIX_S; FN runs under
 * the journal's lock and must not call the journal. */
void ctl_journal_migrations_since(struct ctl_journal *j, double since_unix_s,
                                  void (*fn)(void *ctx, const char *vm), void *ctx);
/* Tests: the journal's write(2), fdatasync(2) and ftruncate(2), to make
 * them fail. */
struct ctl_journal_io {
    ssize_t (*write)(int fd, const void *buf, size_t len);
    int (*fdatasync)(int fd);
    int (*ftruncate)(int fd, off_t len);
};
void ctl_journal_set_io(struct ctl_journal *j, const struct ctl_journal_io *io);
