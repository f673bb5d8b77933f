/* A real fleet, as fleet.ini describes it: host types (the simulator's
 * [type NAME] sections), the hosts with their hypervisor URI and BMC, the
 * VMs the controller manages, the controller's limits, the engines it
 * chose and what each engine parsed of its own keys (the exec engine's
 * command templates, libvirt's migrate mode, IPMI's timeouts: see
 * fleet/engine/exec.h). See docs/fleet-run.md.
 *
 * The data only: the engines read it (a host's URI and BMC, their own
 * parsed keys), so it sits in the model room below them. Parsing it
 * (site_parse(), which hands each engine its keys) is the controller's:
 * fleet/control/site.h. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "fleet/model/fleet.h"

#define SITE_MAX_HOSTS 4096
#define SITE_MAX_VMS   65536

struct fx_engine; /* fleet/engine/exec.h */

/* What any engine may use of a host (the exec engine's placeholders
 * among them); what only one engine reads (libvirt's migrate_uri, IPMI's
 * bmc_cipher) is that engine's, in its configuration. */
struct site_host {
    char name[FLEET_NAME_MAX];
    int line;      /* of its [host NAME] header in fleet.ini */
    uint16_t type; /* index into site.types.types */
    char *uri;     /* libvirt connection URI ("qemu+ssh://h1/system") */
    char *bmc;     /* BMC address "host" or "host:port" (port default 623); NULL: none */
    char *bmc_user;
    char *bmc_password;      /* bmc_password = , or site_load(): the file's first line */
    char *bmc_password_file; /* bmc_password_file = PATH as written; NULL: none */
    int bmc_password_line;   /* of bmc_password or bmc_password_file; 0: neither */
};

struct site_vm {
    char name[FLEET_NAME_MAX * 2]; /* libvirt domain name */
    int line;                      /* where fleet.ini names it, 0: discovered */
};

/* The operator's constraints on one VM ([pin], [anti-affinity];
 * site_rules.c). */
struct site_rule {
    char vm[FLEET_NAME_MAX * 2];
    int32_t pin;   /* the host it must run on, -1: any */
    int32_t group; /* its anti-affinity group (index into site.groups), -1: none */
    int pin_line, group_line;
};

/* An anti-affinity group: no two of its VMs on one host. */
struct site_group {
    char name[FLEET_NAME_MAX];
    int line; /* its NAME = line in [anti-affinity] */
    uint32_t n_vms;
};

/* automatic: execute the plan (the default); manual: write it to
 * state_dir/plan.json and execute only what an operator approved. */
enum site_mode { SITE_AUTOMATIC, SITE_MANUAL };

struct site_limits {
    double interval_s;          /* control loop period, default 300 */
    unsigned max_concurrent;    /* migrations at once over the fleet, default 2 */
    unsigned per_host;          /* migrations at once per host (in + out), default 1 */
    double per_vm_day;          /* migrations per VM per 24 h, default 4 */
    unsigned min_hosts_on;      /* default 1 */
    double spare;               /* powered spare capacity, share of the forecast, default 0.10 */
    double migration_timeout_s; /* default 120 */
    double boot_timeout_s;      /* power on -> hypervisor answers, default 600 */
    double off_timeout_s;       /* power off -> BMC says off, default 300 */
    double vm_mips;             /* capacity of one vCPU; 0: the slowest host type's core */
};

struct site {
    char *origin;             /* "fleet.ini", for messages */
    struct fleet_hosts types; /* [type NAME] sections; types.type_of[i] = hosts[i].type */
    struct site_host *hosts;
    size_t n_hosts;
    struct site_vm *vms; /* managed VMs; none listed: every domain found is managed */
    size_t n_vms;
    bool vms_listed;
    const struct fx_engine *vm_engine;    /* vm_engine = NAME (fx_engines[]), default libvirt */
    const struct fx_engine *power_engine; /* power = NAME, default ipmi */
    void **engine_conf; /* per fx_engines[] row: what it parsed of its keys; NULL: none */
    struct site_limits limits;
    char *policy;      /* watt policy tunables "pack=0.8,..." (fleet_options.watt_params) */
    char *state_dir;   /* journal and state, default /var/lib/watt/fleet */
    int password_line; /* the first bmc_password = line; 0: the file holds none */
    /* the operator's (site_rules.c, docs/fleet-run.md) */
    enum site_mode mode;
    bool destroy_stale_copy; /* destroy a paused copy whose running twin answers */
    struct site_rule *rules; /* every VM pinned or in a group, sorted by name */
    size_t n_rules;
    struct site_group *groups;
    size_t n_groups;
};
