/* The device runtime-PM policy: the built-in deny list and the user's
 * allow/deny file CONFDIR/devices.conf (CONFDIR is /etc/watt, or
 * --config-dir / $WATT_CONFIG_DIR). `watt report` and `watt tune` judge
 * every device with the same policy (sense/devsafety.h), so the SAFE
 * candidates the report lists are exactly what tune changes.
 *
 * File format (docs/tune-devices.md): one rule a line, "#" starts a
 * comment, blank lines are ignored:
 *
 *   deny  driver=btusb                            # Bluetooth drops its link
 *   deny  046d:*                                  # every Logitech device
 *   allow 8086:1533                               # spare NIC, wake-on-LAN armed
 *   deny  path=/sys/devices/pci0000:00/0000:00:1c.0   # and everything below
 *
 * A match is VENDOR:DEVICE (hex, 1-4 digits each, "*" for any),
 * driver=NAME (the device's driver, or for a USB device the driver of any
 * of its interfaces), or path=/sys/devices/... (that device and
 * every device below it) or path=/sys/bus/BUS/devices/NAME (that device).
 * USB interfaces match by the vendor:device of their USB device.
 *
 * What a rule can do: deny makes a device UNSAFE (never written); allow
 * lifts the wakeup rule only. Deny wins over allow. No rule overrides the
 * hard rules (root filesystem, default-route NIC, HID/input, virtio) or the
 * built-in deny list. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

struct device_info;
struct devices_sample;

#define DEVPOLICY_FILE      "devices.conf"
#define DEVPOLICY_MAX_BYTES 65536 /* a larger file is refused */

enum devpolicy_action {
    DEVPOLICY_DENY,
    DEVPOLICY_ALLOW,
};

enum devpolicy_match {
    DEVPOLICY_MATCH_ID,     /* vendor:device */
    DEVPOLICY_MATCH_DRIVER, /* driver=NAME */
    DEVPOLICY_MATCH_PATH,   /* path=/sys/devices/... (a subtree) */
    DEVPOLICY_MATCH_BUSDEV, /* path=/sys/bus/BUS/devices/NAME (one device) */
};

struct devpolicy_rule {
    enum devpolicy_action action;
    enum devpolicy_match match;
    int vendor, device; /* MATCH_ID: 0..0xffff, -1 for "*" */
    /* MATCH_DRIVER: the driver; MATCH_PATH: relative to /sys, no trailing
     * slash ("devices/pci0000:00/0000:00:14.0"); MATCH_BUSDEV: "BUS/NAME".
     * NULL for MATCH_ID. Owned. */
    char *value;
    char *text;   /* the match as written: "driver=btusb"; owned */
    char *origin; /* "/etc/watt/devices.conf:3"; owned */
};

struct devpolicy {
    char *file; /* where the rules came from; owned */
    struct devpolicy_rule *v;
    size_t n;
};

/* Parse the text of a devices.conf (fuzz target). FILE names it in
 * errors and origins. The text is len bytes, NUL not required. Errors
 * (-EINVAL) are one sentence naming FILE:LINE: "devices.conf:3: unknown
 * action 'dney' (want deny or allow)". An empty file is an empty policy. */
int devpolicy_parse(const char *text, size_t len, const char *file, struct devpolicy **ret,
                    char **ret_err);
/* Load CONFDIR/devices.conf. A missing file is no error: *ret is NULL
 * (built-in rules only) and 0 is returned. Unreadable, too large or bad
 * files give < 0 and ret_err. */
int devpolicy_load(const char *confdir, struct devpolicy **ret, char **ret_err);
void devpolicy_free(struct devpolicy *p);

/* The first rule of P with this action that matches D (a device of S),
 * or NULL. P may be NULL. */
const struct devpolicy_rule *devpolicy_find(const struct devpolicy *p,
                                            const struct devices_sample *s,
                                            const struct device_info *d,
                                            enum devpolicy_action action);
/* "/etc/watt/devices.conf:3 (driver=btusb)". Owned. */
char *devpolicy_rule_name(const struct devpolicy_rule *r);

/* The built-in deny list: the tag ("USB audio") of the first entry that
 * matches D, with *ret_reason ("built-in deny: USB audio: ..."; owned),
 * else NULL. */
const char *devpolicy_builtin_deny(const struct devices_sample *s, const struct device_info *d,
                                   char **ret_reason);
