/* devices: runtime power management of every device on every bus
 * (Documentation/ABI/testing/sysfs-devices-power, Documentation/power/
 * runtime_pm.rst). Each /sys/bus/BUS/devices/NAME with a power/control file
 * is listed with its identity (driver, class, vendor:device) and its
 * runtime PM state: control ("auto" lets the driver suspend it, "on" keeps
 * it powered), runtime_status, and the cumulative active and suspended
 * times in ms.
 *
 * The sample also records what the safety policy (sense/devsafety.h) needs
 * to know about the machine: the device chain holding the root filesystem,
 * the NIC of the default route, and where the human input devices are. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sense/devsafety.h"
#include "sense/sample.h"
#include "sense/sampler.h"

enum dev_control {
    DEV_CONTROL_UNKNOWN, /* unreadable or garbage */
    DEV_CONTROL_AUTO,    /* the driver may runtime-suspend it */
    DEV_CONTROL_ON,      /* runtime PM forbidden: always powered */
};

enum dev_status {
    DEV_STATUS_UNKNOWN,
    DEV_STATUS_ACTIVE,
    DEV_STATUS_SUSPENDED,
    DEV_STATUS_SUSPENDING,
    DEV_STATUS_RESUMING,
    DEV_STATUS_ERROR,       /* the driver's last runtime suspend/resume failed */
    DEV_STATUS_UNSUPPORTED, /* runtime PM disabled for it: listed, never a candidate */
};

enum dev_wakeup {
    DEV_WAKEUP_UNKNOWN, /* unreadable or garbage */
    DEV_WAKEUP_ABSENT,  /* no power/wakeup, or empty: cannot wake the system */
    DEV_WAKEUP_DISABLED,
    DEV_WAKEUP_ENABLED,
};

enum dev_kind {
    DEV_KIND_OTHER,
    DEV_KIND_PCI,
    DEV_KIND_USB_DEVICE,
    DEV_KIND_USB_INTERFACE, /* "1-1:1.0" */
    DEV_KIND_VIRTIO,
};

/* USB allows 32 interfaces in a configuration (the kernel's
 * USB_MAXINTERFACES); more entries in a tree are ignored. */
#define DEV_MAX_IFACES 32

/* One interface of a USB device's active configuration: the child
 * "1-2:1.1" (BUS-PORT:CONFIG.INTERFACE) with its bInterfaceClass and the
 * driver bound to it (Documentation/ABI/testing/sysfs-bus-usb). Real
 * kernels give interfaces no power/control (pm_runtime_no_callbacks), so
 * most are not devices of the sample: they are known only from here. */
struct usb_iface {
    char *name;   /* "1-2:1.1"; owned */
    int cls;      /* bInterfaceClass (0x03 HID, 0x01 audio); -1 unreadable */
    char *driver; /* "btusb"; NULL when no driver is bound; owned */
};

struct device_info {
    char *bus;     /* "pci", "usb"; owned */
    char *name;    /* "0000:00:14.0", "1-2"; owned */
    char *path;    /* "devices/pci0000:00/0000:00:14.0", relative to /sys; owned */
    char *driver;  /* "xhci_hcd"; NULL when no driver is bound */
    char *product; /* USB product string, PCI label; NULL when none */
    enum dev_kind kind;
    /* PCI: the 24-bit class (0x0c0330 = USB xHCI); USB: bDeviceClass or
     * bInterfaceClass (0x03 = HID); virtio: the device id. -1 unknown. */
    int class_code;
    int vendor, device; /* PCI vendor/device, USB idVendor/idProduct; -1 unknown */
    int iface_class;    /* USB device: bInterfaceClass of its first interface; -1 */
    /* USB device: every interface, in natural order ("1-2:1.2" before
     * "1-2:1.10"); NULL and 0 for other devices. Owned. The policy looks
     * at all of them (device_usb_class, device_has_driver). */
    struct usb_iface *iface;
    size_t niface;
    enum dev_control control;
    enum dev_status status;
    uint64_t active_ms;    /* runtime_active_time, cumulative ms; VAL_NONE */
    uint64_t suspended_ms; /* runtime_suspended_time, cumulative ms; VAL_NONE */
    /* "enabled", "disabled", "forbidden", "disabled & forbidden"; NULL when
     * unreadable or absent (the file needs CONFIG_PM_ADVANCED_DEBUG) */
    char *runtime_enabled;
    bool has_autosuspend;         /* false: the device does not use autosuspend */
    int64_t autosuspend_delay_ms; /* valid when has_autosuspend; < 0 disables it */
    enum dev_wakeup wakeup;
};

/* A place the safety policy must not power down, with everything above it. */
enum dev_anchor_kind {
    DEV_ANCHOR_ROOTFS,      /* block device holding "/" (and dm/md slaves) */
    DEV_ANCHOR_DEFAULT_NIC, /* network interface of the default route */
};

struct device_anchor {
    char *path; /* sysfs path relative to /sys ("devices/.../block/sda/sda1"); owned */
    enum dev_anchor_kind kind;
    char *what; /* the root's "SOURCE on /", or the interface name; owned */
};

struct devices_sample {
    size_t n;
    struct device_info *dev; /* owned; bus by bus, names in natural order */
    size_t nanchor;
    struct device_anchor *anchor;
    /* sysfs paths of human input: USB interfaces of class 03 (HID) and
     * class/input devices. Owned. */
    size_t ninput;
    char **input;
    /* When the root's device or the default route's NIC cannot be found,
     * the policy treats every storage or network device as possibly it. */
    char *rootfs;          /* "SOURCE on /"; NULL when unknown */
    char *rootfs_why;      /* why the root's device is unknown; NULL when found */
    char *default_nic;     /* "eth0"; NULL when none or unknown */
    char *default_nic_why; /* why the NIC is unknown; NULL when found or no route */
    bool no_default_route; /* the routing tables were read and have none */
};

extern const struct sampler devices_sampler;

/* The device with this bus and name, or NULL. */
const struct device_info *devices_find(const struct devices_sample *s, const char *bus,
                                       const char *name);

/* Names for JSON and text. */
const char *dev_control_name(enum dev_control c); /* "auto", "on", NULL */
const char *dev_status_name(enum dev_status st);  /* "active", ..., NULL */
const char *dev_wakeup_name(enum dev_wakeup w);   /* "enabled", "absent", NULL */
const char *dev_kind_name(enum dev_kind k);       /* "pci", "usb_device", ... */
/* Whether runtime PM is in use for the device: its status is known and
 * not "unsupported". */
static inline bool device_has_rpm(const struct device_info *d)
{
    return d->status != DEV_STATUS_UNSUPPORTED && d->status != DEV_STATUS_UNKNOWN;
}
enum dev_status dev_status_parse(const char *s); /* DEV_STATUS_UNKNOWN on garbage */
/* "USB xHCI", "SATA (AHCI)", "network", "HID"; NULL when unknown. A USB
 * device whose class is defined by its interfaces (bDeviceClass 00 or ef)
 * is named after its first interface of a standard class. */
const char *device_class_name(const struct device_info *d);
/* Whether D is a USB device with an interface of class CLS (any of them,
 * not only the first), or a USB device or interface of that class. */
bool device_usb_class(const struct device_info *d, int cls);
/* Whether DRIVER is bound to D or, for a USB device, to one of its
 * interfaces (btusb binds to "1-2:1.0" and "1-2:1.1", never to "1-2",
 * whose driver is "usb"). */
bool device_has_driver(const struct device_info *d, const char *driver);

/* Pure parsers (fuzz targets). Each returns 0, -EINVAL on garbage or
 * -ENOENT when the text has no such line; ret_* are set only on success. */

/* A hexadecimal id as sysfs prints it: "0x0c0330" (PCI) or "09", "046d"
 * (USB, no prefix). Values above INT32_MAX give -ERANGE. */
int devices_parse_hex(const char *text, size_t len, int *ret);
/* /proc/self/mountinfo: the last line mounted on "/" (the one visible).
 * ret_source is the mount source (a device node, "overlay"), owned. */
int devices_parse_mountinfo_root(const char *text, size_t len, unsigned *ret_major,
                                 unsigned *ret_minor, char **ret_source);
/* /proc/net/route: the interface of the first up default route
 * (destination and mask 00000000). Owned. */
int devices_parse_route_default(const char *text, size_t len, char **ret_iface);
/* /proc/net/ipv6_route: the interface of the first ::/0 route not on "lo". */
int devices_parse_ipv6_route_default(const char *text, size_t len, char **ret_iface);
/* A relative symlink target resolved against the directory holding the
 * link, both relative to one root: ("bus/pci/devices",
 * "../../../devices/pci0000:00/0000:00:14.0") gives
 * "devices/pci0000:00/0000:00:14.0". NULL when it is absolute or climbs
 * above the root. Owned. */
char *devices_resolve_link(const char *linkdir, const char *target);
