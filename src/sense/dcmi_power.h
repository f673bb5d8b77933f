/* DCMI power reading (DCMI 1.5 §6.6.1, Get Power Reading, mode 1 "system
 * power statistics") of this node's BMC, through libfreeipmi: in-band
 * through the kernel's IPMI device (OpenIPMI driver: ipmi_si or ipmi_ssif
 * loaded, and ipmi_devintf giving ipmi0), or over the LAN (IPMI 2.0,
 * RMCP+) to a named BMC, which is how the tests reach ipmi_sim on
 * 127.0.0.1. Both faces run the same read. The BMC measures the whole
 * server at the wall.
 *
 * libfreeipmi is not linked: the first open dlopen()s libfreeipmi.so.17
 * (DCMI_ENV_LIBRARY names another file, for tests), so every build has
 * this reader and a machine without the library only lacks the BMC
 * source, with the reason "libfreeipmi.so.17 not found: install
 * libfreeipmi17". Not thread-safe per connection; dcmi_open_lan()
 * initialises libgcrypt the first time, before threads are started. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One answer to Get Power Reading. The statistics (min, max, average) are
 * the BMC's, over its last PERIOD_MS, not ours. */
struct dcmi_power {
    double current_w;   /* W, instantaneous */
    double min_w;       /* W, minimum over the period */
    double max_w;       /* W, maximum over the period */
    double average_w;   /* W, average over the period */
    uint32_t period_ms; /* statistics reporting time period, ms */
    uint32_t timestamp; /* the BMC's clock, s since the epoch */
    bool active;        /* "power measurement active": false means the
                         * values above are not a measurement */
};

/* A BMC over the LAN: IPMI 2.0 (lanplus). */
struct dcmi_lan {
    const char *host;     /* "127.0.0.1" or "127.0.0.1:9623" (UDP port) */
    const char *user;     /* "" for the anonymous user */
    const char *password; /* "" for none */
    unsigned cipher;      /* cipher suite id; 0: 3 (the common default) */
    double timeout_s;     /* session timeout, s; <= 0: 5 */
};

struct dcmi_conn;

/* The library to load instead of libfreeipmi.so.17 (a path or soname). */
#define DCMI_ENV_LIBRARY "WATT_FREEIPMI_LIBRARY"

/* Load libfreeipmi once (the opens call it). Returns 0, or -ENOENT with
 * "NAME not found: install libfreeipmi17" in WHY, -ENOSYS when a call is
 * missing from it. */
int dcmi_library_load(char *why, size_t size);
/* The file dcmi_library_load() opens. */
const char *dcmi_library_name(void);

/* Open the in-band device. Returns 0, or -errno with a reason in WHY:
 * -ENOENT "no /dev/ipmi0 (load ipmi_si or ipmi_ssif)" when the kernel has
 * no IPMI device, -EACCES when it is not ours to open. */
int dcmi_open_inband(struct dcmi_conn **ret, char *why, size_t size);

/* Open a session with LAN's BMC. Returns 0, or -errno with a reason in WHY
 * (-ETIMEDOUT no answer, -EACCES credentials refused, ...). */
int dcmi_open_lan(const struct dcmi_lan *lan, struct dcmi_conn **ret, char *why, size_t size);

/* Read the power. Returns 0, or -errno with a reason in WHY: -EOPNOTSUPP
 * when the BMC does not implement DCMI power management, -EBADMSG when
 * the answer lacks a field. */
int dcmi_power_read(struct dcmi_conn *c, struct dcmi_power *ret, char *why, size_t size);

/* "in-band" or "lan HOST", for messages. */
const char *dcmi_conn_name(const struct dcmi_conn *c);

/* Closes and frees C; NULL is accepted. */
void dcmi_close(struct dcmi_conn *c);
