/* `watt tune` inside the agent: the profile named by `profile =` applied at
 * start through the journal (owner "agent"), its [latency] guard run on the
 * agent's timer, and every value put back on exit (restore_on_exit) and on
 * the next start after a crash (stale "agent" and "guard" records).
 *
 * The journal is opened only for a write or a restore and closed at once:
 * holding its lock would make every `watt tune` refuse. When a running
 * `watt tune` holds it, the agent tries again on the next tick. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "agent/agent.h"
#include "base/json.h"
#include "host/host.h"
#include "tune/guard.h"
#include "tune/packer.h"

struct profile;

struct agent_tuning {
    struct host *h; /* borrowed */
    char *journal;  /* relative to the root; owned */
    char *confdir;  /* owned */
    bool restore_on_exit;
    bool need_recover;      /* stale records still to restore (lock was busy) */
    bool need_apply;        /* the profile still to apply (lock was busy) */
    bool applied;           /* the profile's values are in force */
    char *profile;          /* its name; owned, NULL: none */
    struct profile *prof;   /* owned */
    struct guard_config gc; /* the profile's [latency], when has_gc */
    bool has_gc;
    struct guard *guard;   /* NULL: no [latency], or not started yet */
    struct pack_config pc; /* the profile's [pack], when has_pc */
    bool has_pc;
    struct packer *packer; /* NULL: no [pack], or not started yet */
    size_t nchanges;       /* values the profile changed */
    bool locked_logged;    /* "journal locked" said once per wait */
};

/* Where profiles.d/ and devices.conf are: C's config_dir, else
 * $WATT_CONFIG_DIR, else /etc/watt. Borrowed from C or the environment. */
const char *agent_tuning_confdir(const struct agent_config *c);

/* Start: restore stale records, load and apply C's profile, start its
 * guard. A broken profile or a refused write is an error (said on
 * stderr); a locked journal is not (it is retried on the next tick). */
int agent_tuning_start(struct agent_tuning *t, struct host *h, const struct agent_config *c);
/* On the guard's period: retry what waited for the lock, tick the guard. */
void agent_tuning_tick(struct agent_tuning *t, uint64_t now_ns);
/* SIGHUP: a changed profile is validated first (a broken one keeps the
 * running one), then the old one restored and the new one applied. */
void agent_tuning_reload(struct agent_tuning *t, const struct agent_config *c);
/* Exit: release the guard, restore the profile's values when configured. */
void agent_tuning_stop(struct agent_tuning *t);
/* "profile", "tuning", "guard" and "pack" members for `watt ctl status`. */
void agent_tuning_status(const struct agent_tuning *t, uint64_t now_ns, struct json *j);

/* The packer ([pack]): its tick (every agent_tuning_pack_interval()
 * seconds, 0 when there is no packer), and a PSI trigger fd of
 * agent_tuning_pack_fds() that polled EPOLLPRI at WOKE_NS. */
double agent_tuning_pack_interval(const struct agent_tuning *t);
void agent_tuning_pack_tick(struct agent_tuning *t, uint64_t now_ns);
void agent_tuning_pack_pressure(struct agent_tuning *t, int fd, uint64_t woke_ns);
size_t agent_tuning_pack_fds(const struct agent_tuning *t, const int **ret);
