/* Executors: the engines through which the fleet controller sees and acts
 * on real machines. Two kinds, each a table of function pointers:
 *
 *  - a VM engine (libvirt.c, or exec.c's command templates): list a host's
 *    domains with their CPU time and memory, live-migrate one;
 *  - a power engine (ipmi.c through libfreeipmi, or exec.c): a host's
 *    chassis power status, on, soft off, and its DCMI power reading.
 *
 * Hosts are indices into site->hosts. Every call is bounded in time and
 * returns 0 or a negative errno with ERR naming the host (and the VM):
 * "host h2 (qemu+tcp://10.0.0.2/system): cannot connect: Connection refused".
 * The usual codes: -EHOSTUNREACH the host does not answer; -EACCES refused
 * credentials; -ENOENT no such VM; -ETIMEDOUT the call (or migration) ran
 * out of time and was aborted; -EOPNOTSUPP the engine cannot do that.
 *
 * Engines are safe to call from several threads at once for different
 * hosts (the controller runs migrations in parallel); calls for one host
 * are serialised by the caller. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fleet/model/site.h"

enum fx_power_state { FX_POWER_UNKNOWN = 0, FX_POWER_OFF, FX_POWER_ON };

const char *fx_power_name(enum fx_power_state p); /* "unknown", "off", "on" */

struct fx_domain {
    char *name;
    char uuid[37]; /* "" when the engine does not know it */
    bool active;   /* has a process on the host: running, paused, ... */
    bool running;  /* running (not paused, not shut off) */
    bool persistent;
    uint64_t cpu_ns; /* cumulative CPU time of the domain, all vCPUs */
    unsigned vcpus;
    uint64_t mem_kib; /* memory the domain holds on its host */
};

struct fx_node {
    uint64_t mem_kib;  /* physical memory, 0: unknown */
    unsigned cpus;     /* 0: unknown */
    unsigned mhz;      /* 0: unknown */
    uint64_t free_kib; /* 0: unknown */
};

struct fx_list {
    struct fx_domain *v;
    size_t n;
    struct fx_node node;
    uint64_t t_ns; /* CLOCK_MONOTONIC when the list was read */
};

void fx_list_free(struct fx_list *l);
/* The domain named NAME in L, or NULL. */
const struct fx_domain *fx_list_find(const struct fx_list *l, const char *name);

struct fx_vms {
    const char *name; /* "libvirt", "exec" */
    /* Every domain defined or running on host HI. */
    int (*list)(struct fx_vms *x, size_t hi, struct fx_list *ret, struct fleet_error *err);
    /* Live-migrate VM from host SRC to host DST; on return 0 the VM runs on
     * DST (persistent there, undefined on SRC). Bounded by TIMEOUT_S: past
     * it the job is aborted, the VM stays on SRC, and -ETIMEDOUT returned. */
    int (*migrate)(struct fx_vms *x, const char *vm, size_t src, size_t dst, double timeout_s,
                   struct fleet_error *err);
    void (*close)(struct fx_vms *x);
    /* Optional (NULL: the engine cannot). Destroy (hard stop) VM's copy on
     * host HI only if it is paused there, as a failed migration leaves it:
     * -EBUSY if it runs, -ENOENT if it is not active there. */
    int (*destroy_paused)(struct fx_vms *x, const char *vm, size_t hi, struct fleet_error *err);
};

struct fx_power {
    const char *name; /* "ipmi", "exec", "none" */
    int (*status)(struct fx_power *x, size_t hi, enum fx_power_state *ret, struct fleet_error *err);
    /* ON: chassis power up; !ON: soft off (ACPI shutdown request). Returns
     * once the BMC accepted the command, not when the host is off. */
    int (*set)(struct fx_power *x, size_t hi, bool on, struct fleet_error *err);
    /* The host's power now, watts (DCMI Get Power Reading); -EOPNOTSUPP
     * when the BMC has none. */
    int (*reading)(struct fx_power *x, size_t hi, double *watts, struct fleet_error *err);
    void (*close)(struct fx_power *x);
};

/* ---- names from outside ---------------------------------------------------
 *
 * A VM's name comes from a hypervisor or from the exec engine's list
 * command, and goes on to the migrate command, the journal, the terminal.
 * The rule, libvirt's own and a little more: 1..FX_VM_NAME_MAX - 1 bytes
 * of valid UTF-8 (libvirt's names are XML text), no '/' (libvirt refuses
 * it in domain names: virDomainDefPostParseCheckFeatures), no control
 * character: C0 (libvirt refuses '\n', XML the others but tab and CR),
 * DEL, C1 (U+0080..U+009F), all hostile to terminals and journals.
 * Quotes, blanks, $(), backticks, ';', '|', '*' are legal: no shell reads
 * a name (exec_tmpl.h), and it is always one argv word. The longest name
 * is the controller's: a longer one would be cut there, and the cut name
 * could be another VM's. */
#define FX_VM_NAME_MAX (FLEET_NAME_MAX * 2) /* bytes with the NUL */

/* 0 when NAME passes the rule above; else -EINVAL and WHY ("VM name 'a/b'
 * holds '/' (libvirt refuses it)"), the name escaped (fx_name_escape()). */
int fx_vm_name_check(const char *name, char *why, size_t size);
/* NAME for a message: printable ASCII and valid UTF-8 other than controls
 * as they are, a backslash as \\, every other byte as \xNN; cut with
 * "..." to fit SIZE. */
void fx_name_escape(const char *name, char *out, size_t size);

/* Constructors. They keep a pointer to SITE (which must outlive them) and
 * connect lazily, on the first call for a host; a broken connection is
 * dropped and made again on the next call (a host that was off). */
int fx_libvirt_open(const struct site *site, struct fx_vms **ret, struct fleet_error *err);
int fx_ipmi_open(const struct site *site, struct fx_power **ret, struct fleet_error *err);
int fx_exec_vms_open(const struct site *site, struct fx_vms **ret, struct fleet_error *err);
int fx_exec_power_open(const struct site *site, struct fx_power **ret, struct fleet_error *err);
/* No power control: status is always on, set is -EOPNOTSUPP. */
int fx_none_power_open(const struct site *site, struct fx_power **ret, struct fleet_error *err);

/* The engines site->vm_engine and site->power_engine name. */
int fx_open(const struct site *site, struct fx_vms **ret_vms, struct fx_power **ret_power,
            struct fleet_error *err);

/* ---- the table of engines ------------------------------------------------
 *
 * An engine is one file and one row of fx_engines[] (exec.c): its name
 * (fleet.ini's vm_engine = NAME or power = NAME), the fleet.ini keys it
 * reads, and its functions. site_parse() hands each key to the engines
 * that list it, whichever engines the file chooses (so that `watt fleet
 * check` finds a bad [exec] template before anyone switches to it); an
 * engine keeps what it parsed in its own configuration, which it finds
 * again with fx_engine_conf(). What every engine may use stays in struct
 * site_host: the host's name, type, uri, bmc, bmc_user and password. */

enum fx_where {
    FX_IN_SECTION,    /* the engine's own section, [exec] for "exec" */
    FX_IN_HOST,       /* a [host NAME] section */
    FX_IN_CONTROLLER, /* [controller] */
};

struct fx_key {
    enum fx_where where;
    const char *name;
};

struct fx_engine {
    const char *name;          /* "libvirt": vm_engine = libvirt */
    bool power;                /* a power engine (power = NAME), else a VM engine */
    const char *section;       /* its own section ("exec": [exec]), NULL: none; two
                                * engines may share one, each reading its own keys */
    const struct fx_key *keys; /* what it reads, ended by {0, NULL}; NULL: nothing */
    /* KEY = VAL, one of KEYS, found WHERE (FX_IN_HOST: in host HI's
     * section), into *CONF: NULL at the first key, then what the engine
     * made of it (its own struct, freed by free_conf). 0, or -EINVAL and
     * WHY ("[exec] list: unterminated ' quote in ..."; the caller adds
     * the file and the line). Mandatory when KEYS is not NULL. */
    int (*parse)(void **conf, enum fx_where where, size_t hi, const char *key, const char *val,
                 char *why, size_t size);
    void (*free_conf)(void *conf);
    /* The parsed site, when it chose this engine: is there all it needs
     * (every host's uri, say)? 0, or -EINVAL, WHY and *LINE (the fleet.ini
     * line to name, 0: none). Optional. */
    int (*check)(const struct site *s, const void *conf, char *why, size_t size, int *line);
    /* The engine (open_vms for a VM engine, open_power for a power one). */
    int (*open_vms)(const struct site *site, struct fx_vms **ret, struct fleet_error *err);
    int (*open_power)(const struct site *site, struct fx_power **ret, struct fleet_error *err);
};

/* The rows, one per engine file. */
extern const struct fx_engine fx_engine_libvirt;    /* libvirt.c */
extern const struct fx_engine fx_engine_exec_vms;   /* exec_cmd.c */
extern const struct fx_engine fx_engine_ipmi;       /* ipmi.c */
extern const struct fx_engine fx_engine_exec_power; /* exec_cmd.c */
extern const struct fx_engine fx_engine_none;       /* exec.c */

/* Every engine, NULL-terminated; the first VM and the first power engine
 * are the defaults. */
extern const struct fx_engine *const fx_engines[];

/* The default engine of that kind: its first row (libvirt, ipmi). */
const struct fx_engine *fx_engine_default(bool power);
/* The engine called NAME (case-insensitive) of that kind, or NULL. */
const struct fx_engine *fx_engine_find(const char *name, bool power);
/* What engine E parsed of S's fleet.ini (its parse()'s *CONF), or NULL
 * when the file held none of its keys. */
const void *fx_engine_conf(const struct site *s, const struct fx_engine *e);
