/* A real fleet, as fleet.ini describes it: host types (the simulator's
 * [type NAME] sections), the hosts with their hypervisor URI and BMC, the
 * VMs the controller manages, the controller's limits, and the command
 * templates of the exec engine. See docs/fleet-run.md.
 *
 * Pure: site_parse() takes the file's text; site_load() (fleet/control/
 * site_load.h) reads the file, checks who may read it and reads the
 * bmc_password_file files. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "fleet/model/fleet.h"

#define SITE_MAX_HOSTS 4096
#define SITE_MAX_VMS   65536

enum site_vm_engine { SITE_VMS_LIBVIRT, SITE_VMS_EXEC };
enum site_power_engine { SITE_POWER_IPMI, SITE_POWER_EXEC, SITE_POWER_NONE };
enum site_migrate_mode { SITE_MIGRATE_P2P, SITE_MIGRATE_MANAGED };

struct site_host {
    char name[FLEET_NAME_MAX];
    int line;          /* of its [host NAME] header in fleet.ini */
    uint16_t type;     /* index into site.types.types */
    char *uri;         /* libvirt connection URI ("qemu+ssh://h1/system") */
    char *migrate_uri; /* optional: where the migration stream goes
                        * (VIR_MIGRATE_PARAM_URI, "tcp://10.0.0.2"); NULL: libvirt's choice */
    char *bmc;         /* BMC address "host" or "host:port" (port default 623); NULL: none */
    char *bmc_user;
    char *bmc_password;      /* bmc_password = , or site_load(): the file's first line */
    char *bmc_password_file; /* bmc_password_file = PATH as written; NULL: none */
    int bmc_password_line;   /* of bmc_password or bmc_password_file; 0: neither */
    unsigned bmc_cipher;     /* IPMI 2.0 cipher suite id, default 3 */
    bool bmc_lan15;          /* IPMI 1.5 LAN instead of 2.0 lanplus */
};

struct site_vm {
    char name[FLEET_NAME_MAX * 2]; /* libvirt domain name */
    int line;                      /* where fleet.ini names it, 0: discovered */
};

struct site_exec {
    /* Command templates, run by /bin/sh -c with {host}, {vm}, {src}, {dst},
     * {uri}, {bmc} replaced by single-quoted values. NULL: not configured. */
    char *list;          /* prints one line per domain: NAME STATE CPU_NS MEM_KIB VCPUS */
    char *migrate;       /* exit 0: moved */
    char *power_on;      /* exit 0: accepted */
    char *power_off;     /* exit 0: accepted */
    char *power_status;  /* prints "on" or "off" */
    char *power_reading; /* prints watts */
    double timeout_s;    /* per command, default 60 */
};

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
    double bmc_timeout_s;       /* one IPMI session, default 5 */
    unsigned bmc_retries;       /* per call, default 2 */
};

struct site {
    char *origin;             /* "fleet.ini", for messages */
    struct fleet_hosts types; /* [type NAME] sections; types.type_of[i] = hosts[i].type */
    struct site_host *hosts;
    size_t n_hosts;
    struct site_vm *vms; /* managed VMs; none listed: every domain found is managed */
    size_t n_vms;
    bool vms_listed;
    enum site_vm_engine vm_engine;
    enum site_power_engine power_engine;
    enum site_migrate_mode migrate_mode;
    struct site_limits limits;
    struct site_exec exec;
    char *policy;      /* watt policy tunables "pack=0.8,..." (fleet_options.watt_params) */
    char *state_dir;   /* journal and state, default /var/lib/watt/fleet */
    int password_line; /* the first bmc_password = line; 0: the file holds none */
};

/* Parse fleet.ini. ORIGIN names the text in errors ("fleet.ini line 12: ..."). */
int site_parse(const char *text, size_t len, const char *origin, struct site *ret,
               struct fleet_error *err);
void site_free(struct site *s);
/* The host named NAME, or -1. */
ssize_t site_host_find(const struct site *s, const char *name);
/* The managed VM named NAME, or -1 (always -1 when none are listed). */
ssize_t site_vm_find(const struct site *s, const char *name);
