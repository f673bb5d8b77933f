/* `watt agent`: one thread, one epoll loop. A timerfd takes a sample every
 * interval and renders an immutable snapshot (metrics in both formats, the
 * status JSON); libmicrohttpd, driven from the same loop (external epoll
 * mode, no thread per connection), only copies the latest snapshot out. A
 * signalfd turns SIGTERM/SIGINT into a clean exit and SIGHUP into a config
 * reload that keeps the old config when the new one is broken. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "agent/attrib.h"
#include "agent/metrics.h"

#define AGENT_DEFAULT_PORT    9723 /* watt's default, documented in the README */
#define AGENT_DEFAULT_CONTROL "/run/watt/agent.sock"

/* `watt ctl status|reload|sample`: one command line to the agent's control
 * socket, which answers root only (SO_PEERCRED). */
int verb_ctl(int argc, char **argv);

struct agent_config {
    char *listen_host; /* "127.0.0.1" by default: never more than asked */
    uint16_t port;
    double interval_s;          /* sampling, default 1 */
    char *root;                 /* NULL: the running kernel */
    enum agent_rapl_mode rapl;  /* exact by default */
    double pue;                 /* facility = IT x PUE, default 1.5 */
    char *model;                /* power model name or file, NULL: default */
    unsigned max_connections;   /* default 128 */
    unsigned max_per_client;    /* max_connections_per_client, default 16 */
    unsigned timeout_s;         /* idle connection timeout, default 10 */
    unsigned header_timeout_s;  /* to send a whole request head, default 5 */
    unsigned max_request_bytes; /* per connection memory, default 16 KiB */
    char *control;              /* watt ctl socket, default /run/watt/agent.sock; "" none */
    char *tls_cert, *tls_key;   /* PEM files: HTTPS instead of HTTP */
    char *auth_user;            /* basic auth: this user ... */
    char *auth_password_file;   /* ... with the password in this file (first line) */
    bool insecure;              /* allow plain HTTP without auth beyond loopback */
    /* watt tune in the agent (docs/agent.md, "Tuning"): */
    char *profile;        /* applied at start (journal owner "agent"), its
                           * [latency] guard run; NULL: none */
    char *config_dir;     /* profiles.d/ and devices.conf; NULL: $WATT_CONFIG_DIR,
                           * else /etc/watt */
    char *journal;        /* relative to the root; default var/lib/watt/journal */
    bool restore_on_exit; /* restore the profile's values on SIGTERM/SIGINT (yes) */
    /* wake-ups and energy per cgroup (docs/agent-metrics.md): */
    enum agent_wakeups_mode wakeups; /* auto (default), bpf, trace, proc or off */
    unsigned cgroups;                /* cgroups with series of their own (10) */
    double device_interval_s;        /* device runtime PM read afresh this often
                                        (0: every sample; < 0, the default: 10 s
                                        on a live root, 0 on a recorded one) */
    double fit_interval_s;           /* seconds between fits of the power model to
                                        the meter (docs/power-model.md); 0: off; 300 */
    /* the metrics `watt fleet run --metrics FILE` writes, served with ours
     * (text format); NULL: none */
    char *fleet_metrics;
    /* the BMC whose wall power the "dcmi" sampler reads over the LAN
     * (HOST[:PORT]; NULL: in-band through /dev/ipmi0), its user and the
     * file whose first line is its password (docs/dcmi-power.md) */
    char *bmc, *bmc_user, *bmc_password_file;
};

void agent_config_default(struct agent_config *c);
void agent_config_free(struct agent_config *c);
/* Whether HOST (a numeric address) is a loopback address. */
bool agent_host_is_loopback(const char *host);
/* Parse "HOST:PORT" (or ":PORT", "PORT"); -EINVAL on garbage. */
int agent_parse_listen(const char *s, char **ret_host, uint16_t *ret_port);
/* Read an INI file over the defaults in *C: [agent] listen, interval_s, root,
 * rapl_energy (exact|coarse|off), pue, model, max_connections,
 * max_connections_per_client, timeout_s, header_timeout_s, max_request_bytes,
 * control, tls_cert, tls_key, auth_user, auth_password_file, insecure, profile, config_dir,
 * journal, restore_on_exit (booleans: parse_bool()), wakeups (auto|bpf|trace|proc|off),
 * cgroups (0..1000), device_interval_s (0..3600 s), fit_interval_s (0..86400 s, 0 off),
 * fleet_metrics (an absolute path), bmc (HOST[:PORT]), bmc_user, bmc_password_file.
 * The names before the unit suffix (interval, timeout, header_timeout,
 * device_interval) are still read, each with a one-line deprecation note on
 * stderr naming FILE:LINE and the new name (docs/config.md). On error *C is
 * unchanged and ret_err names file and line. Pure text parser below for fuzzing. */
int agent_config_load(const char *path, struct agent_config *c, char **ret_err);
int agent_config_parse(const char *text, const char *origin, struct agent_config *c,
                       char **ret_err);

/* Run until SIGTERM/SIGINT. CONFIG_PATH (may be NULL) is re-read on
 * SIGHUP; OVERRIDES are re-applied over it (the command line wins).
 * CONFIG_OPTIONAL: CONFIG_PATH is the default file, which may not exist
 * (then a SIGHUP keeps the built-in defaults, and says so). Returns 0 on
 * a clean exit, < 0 when it could not start. */
int agent_run(const struct agent_config *start, const char *config_path, bool config_optional,
              const struct agent_config *overrides, unsigned override_mask);

enum {
    AGENT_OVR_LISTEN = 1 << 0,
    AGENT_OVR_INTERVAL = 1 << 1,
    AGENT_OVR_ROOT = 1 << 2,
    AGENT_OVR_CONTROL = 1 << 3,
    AGENT_OVR_PROFILE = 1 << 4,
};
