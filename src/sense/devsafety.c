#include "sense/devsafety.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "sense/devices.h"
#include "sense/devpolicy.h"

#define PCI_VENDOR_REDHAT_VIRTIO 0x1af4
#define PCI_BASE_BRIDGE          0x06
#define PCI_BASE_INPUT           0x09 /* keyboard/mouse controllers */
#define USB_CLASS_HID            0x03

/* ---- class names ---- */

static const char *pci_class_name(int cls)
{
    switch (cls >> 8) { /* base class and subclass */
    case 0x0106:
        return "SATA (AHCI)";
    case 0x0108:
        return "NVMe";
    case 0x0403:
        return "audio (HDA)";
    case 0x0600:
        return "host bridge";
    case 0x0604:
        return "PCI bridge";
    case 0x0c03:
        switch (cls & 0xff) { /* programming interface */
        case 0x00:
            return "USB UHCI";
        case 0x10:
            return "USB OHCI";
        case 0x20:
            return "USB EHCI";
        case 0x30:
            return "USB xHCI";
        default:
            return "USB";
        }
    default:
        break;
    }
    static const char *const base[] = {
        [0x00] = "unclassified", [0x01] = "storage",         [0x02] = "network",
        [0x03] = "display",      [0x04] = "multimedia",      [0x05] = "memory",
        [0x06] = "bridge",       [0x07] = "communication",   [0x08] = "system",
        [0x09] = "input",        [0x0a] = "docking",         [0x0b] = "processor",
        [0x0c] = "serial bus",   [0x0d] = "wireless",        [0x0e] = "intelligent I/O",
        [0x0f] = "satellite",    [0x10] = "encryption",      [0x11] = "signal processing",
        [0x12] = "accelerator",  [0x13] = "instrumentation",
    };
    size_t b = (size_t)(cls >> 16);
    return b < ARRAY_SIZE(base) ? base[b]
           : b == 0x40          ? "coprocessor"
           : b == 0xff          ? "unassigned"
                                : "other";
}

static const char *usb_class_name(int cls)
{
    switch (cls) {
    case 0x00:
        return "per-interface";
    case 0x01:
        return "audio";
    case 0x02:
        return "communication";
    case 0x03:
        return "HID";
    case 0x06:
        return "image";
    case 0x07:
        return "printer";
    case 0x08:
        return "mass storage";
    case 0x09:
        return "hub";
    case 0x0a:
        return "CDC data";
    case 0x0b:
        return "smart card";
    case 0x0e:
        return "video";
    case 0xe0:
        return "wireless";
    case 0xef:
        return "misc";
    case 0xff:
        return "vendor";
    default:
        return "other";
    }
}

static const char *virtio_class_name(int id)
{
    switch (id) {
    case 1:
        return "network";
    case 2:
        return "block";
    case 3:
        return "console";
    case 4:
        return "entropy";
    case 5:
        return "balloon";
    case 9:
        return "9p";
    case 16:
        return "gpu";
    case 18:
        return "input";
    case 19:
        return "vsock";
    default:
        return "other";
    }
}

/* bDeviceClass 00 ("defined at interface level") and ef/02/01 (interface
 * association: a webcam's video and audio functions) leave the class to
 * the interfaces: the first of a standard class names the device (an HP
 * printer's interface 0 is vendor-specific, its interface 1 the printer). */
static int usb_device_class(const struct device_info *d)
{
    if (d->class_code != 0x00 && d->class_code != 0xef)
        return d->class_code;
    if (!d->niface)
        return d->iface_class >= 0 ? d->iface_class : d->class_code;
    for (size_t i = 0; i < d->niface; i++)
        if (d->iface[i].cls >= 0 && d->iface[i].cls != 0xff && d->iface[i].cls != 0xfe)
            return d->iface[i].cls;
    return d->iface[0].cls >= 0 ? d->iface[0].cls : d->class_code;
}

const char *device_class_name(const struct device_info *d)
{
    if (d->class_code < 0)
        return NULL;
    switch (d->kind) {
    case DEV_KIND_PCI:
        return pci_class_name(d->class_code);
    case DEV_KIND_USB_DEVICE:
        return usb_class_name(usb_device_class(d));
    case DEV_KIND_USB_INTERFACE:
        return usb_class_name(d->class_code);
    case DEV_KIND_VIRTIO:
        return virtio_class_name(d->class_code);
    default:
        return NULL;
    }
}

/* ---- never suspends ---- */

int devices_never_suspends(const struct device_info *d, const struct device_info *prev)
{
    if (d->control == DEV_CONTROL_ON)
        return 1;
    if (d->status == DEV_STATUS_UNKNOWN || d->suspended_ms == VAL_NONE)
        return -ENODATA;
    if (d->status != DEV_STATUS_ACTIVE)
        return 0;
    /* A counter that went backwards means the device was removed and
     * re-added: judge it on the later sample alone. */
    if (prev && prev->suspended_ms != VAL_NONE && prev->suspended_ms <= d->suspended_ms)
        return d->suspended_ms == prev->suspended_ms;
    return d->suspended_ms == 0;
}

/* ---- the rules ---- */

/* path equals anc or is one of its ancestors ("a/b" of "a/b/c"). */
static bool is_at_or_above(const char *path, const char *anc)
{
    size_t n = strlen(path);
    return path[0] && strncmp(path, anc, n) == 0 && (anc[n] == '\0' || anc[n] == '/');
}

static const struct device_anchor *
find_anchor(const struct devices_sample *s, const struct device_info *d, enum dev_anchor_kind kind)
{
    for (size_t i = 0; d->path && i < s->nanchor; i++)
        if (s->anchor[i].kind == kind && is_at_or_above(d->path, s->anchor[i].path))
            return &s->anchor[i];
    return NULL;
}

/* Whether another listed device lies strictly between d and the path. */
static bool listed_between(const struct devices_sample *s, const struct device_info *d,
                           const char *below)
{
    for (size_t i = 0; i < s->n; i++) {
        const char *p = s->dev[i].path;
        if (p && &s->dev[i] != d && strlen(p) > strlen(d->path) && is_at_or_above(d->path, p) &&
            is_at_or_above(p, below))
            return true;
    }
    return false;
}

/* 2: a HID device itself (or its USB device, or the nearest device to an
 * input node); 1: an input device is further below it; 0: neither. */
static int input_rule(const struct devices_sample *s, const struct device_info *d,
                      const char **ret_which)
{
    /* a HID interface, or a USB device with one among its interfaces,
     * whichever interface number it has */
    if ((d->kind == DEV_KIND_USB_INTERFACE || d->kind == DEV_KIND_USB_DEVICE) &&
        device_usb_class(d, USB_CLASS_HID))
        return 2;
    if (d->kind == DEV_KIND_PCI && d->class_code >= 0 && d->class_code >> 16 == PCI_BASE_INPUT)
        return 2;
    int found = 0;
    for (size_t i = 0; d->path && i < s->ninput; i++) {
        const char *in = s->input[i];
        if (!in || streq(in, d->path) || !is_at_or_above(d->path, in))
            continue;
        int level = listed_between(s, d, in) ? 1 : 2;
        const char *slash = strrchr(in, '/');
        /* a USB interface right below its device */
        if (d->kind == DEV_KIND_USB_DEVICE && slash && (size_t)(slash - in) == strlen(d->path))
            level = 2;
        if (level > found) {
            found = level;
            *ret_which = slash ? slash + 1 : in;
        }
    }
    return found;
}

static bool is_virtio(const struct device_info *d)
{
    return streq(d->bus, "virtio") || streq(d->driver, "virtio-pci") ||
           (d->kind == DEV_KIND_PCI && d->vendor == PCI_VENDOR_REDHAT_VIRTIO);
}

static bool is_storage(const struct device_info *d)
{
    switch (d->kind) {
    case DEV_KIND_PCI:
        return d->class_code >= 0 && d->class_code >> 16 == 0x01;
    case DEV_KIND_USB_DEVICE:
        return device_usb_class(d, 0x08); /* any mass-storage interface */
    case DEV_KIND_USB_INTERFACE:
        return d->class_code == 0x08; /* mass storage */
    case DEV_KIND_VIRTIO:
        return d->class_code == 2; /* block */
    default:
        return streq(d->bus, "scsi") || streq(d->bus, "nvme");
    }
}

static bool is_network(const struct device_info *d)
{
    switch (d->kind) {
    case DEV_KIND_PCI:
        return d->class_code >= 0 && d->class_code >> 16 == 0x02;
    case DEV_KIND_VIRTIO:
        return d->class_code == 1;
    default:
        return false; /* USB NICs are class 02/ff: not worth guessing */
    }
}

/* ASPEED and Matrox G200 VGA functions are the BMC's frame buffer on
 * nearly every server board. */
static bool is_bmc_video(const struct device_info *d)
{
    return d->kind == DEV_KIND_PCI && d->class_code >= 0 && d->class_code >> 16 == 0x03 &&
           (d->vendor == 0x1a03 || d->vendor == 0x102b);
}

/* The rules no list can override: suspending these devices loses the
 * root disk, the network, keystrokes or the VM's console. */
static const char *hard_rule(const struct devices_sample *s, const struct device_info *d,
                             char **ret_reason)
{
    const struct device_anchor *a = find_anchor(s, d, DEV_ANCHOR_ROOTFS);
    if (a) {
        *ret_reason = xasprintf("holds the root filesystem (%s)", a->what);
        return "root fs";
    }
    a = find_anchor(s, d, DEV_ANCHOR_DEFAULT_NIC);
    if (a) {
        *ret_reason = xasprintf("NIC of the default route (%s)", a->what);
        return "default NIC";
    }
    if (s->rootfs_why && is_storage(d)) {
        *ret_reason = xasprintf("storage device, and the root filesystem's device is unknown "
                                "(%s): it may hold it",
                                s->rootfs_why);
        return "root fs?";
    }
    if (s->default_nic_why && is_network(d)) {
        *ret_reason = xasprintf("network device, and the default route's NIC is unknown "
                                "(%s): it may carry it",
                                s->default_nic_why);
        return "NIC?";
    }
    const char *which = NULL;
    int in = input_rule(s, d, &which);
    if (in == 2) {
        *ret_reason = xstrdup("HID input device: suspending it drops keystrokes");
        return "HID";
    }
    if (in == 1) {
        *ret_reason = xasprintf("an input device (%s) is attached below it: suspending it "
                                "drops keystrokes",
                                which);
        return "input below";
    }
    if (is_virtio(d)) {
        *ret_reason = xstrdup("virtio device: may be the root disk or console in this VM");
        return "virtio";
    }
    if (is_bmc_video(d)) {
        *ret_reason = xstrdup("BMC video: the remote console (IPMI KVM) draws through it");
        return "BMC console";
    }
    return NULL;
}

/* The first rule that forbids suspending d, else NULL: the hard rules,
 * the built-in deny list, the user's deny rules, then wakeup unless the
 * user allows it (*ret_allow, for the SAFE reason). */
static const char *unsafe_rule(const struct devices_sample *s, const struct device_info *d,
                               const struct devpolicy *pol, char **ret_reason,
                               const struct devpolicy_rule **ret_rule)
{
    const char *tag = hard_rule(s, d, ret_reason);
    if (!tag)
        tag = devpolicy_builtin_deny(s, d, ret_reason);
    if (tag)
        return tag;
    const struct devpolicy_rule *r = devpolicy_find(pol, s, d, DEVPOLICY_DENY);
    if (r) {
        _cleanup_free_ char *name = devpolicy_rule_name(r);
        *ret_reason = xasprintf("denied by %s", name);
        *ret_rule = r;
        return "denied";
    }
    if (d->wakeup == DEV_WAKEUP_ENABLED && d->control != DEV_CONTROL_AUTO) {
        *ret_rule = devpolicy_find(pol, s, d, DEVPOLICY_ALLOW);
        if (*ret_rule)
            return NULL;
        *ret_reason = xstrdup("wakeup enabled: it is armed to wake the system, and "
                              "autosuspend would change how it signals");
        return "wakeup";
    }
    return NULL;
}

static char *safe_reason(const struct device_info *d, const struct devpolicy_rule *allow)
{
    if (allow) {
        _cleanup_free_ char *name = devpolicy_rule_name(allow);
        return xasprintf("safe to autosuspend: wakeup enabled, allowed by %s", name);
    }
    return xstrdup(d->control == DEV_CONTROL_AUTO
                       ? "safe to autosuspend: only autosuspend_delay_ms < 0 keeps it on"
                       : "safe to autosuspend: nothing depends on it staying on");
}

static enum dev_verdict judge(const struct devices_sample *s, const struct device_info *d,
                              int never_suspends, const struct devpolicy *pol, const char **ret_tag,
                              char **ret_reason, const struct devpolicy_rule **ret_rule)
{
    const char *tag;
    char *why = NULL;
    const struct devpolicy_rule *rule = NULL;
    enum dev_verdict v = DEV_VERDICT_NOT_CANDIDATE;
    if (d->status == DEV_STATUS_UNSUPPORTED) {
        tag = "unsupported";
        why = xstrdup("runtime PM is not enabled for it (runtime_status unsupported)");
    } else if (d->status == DEV_STATUS_ERROR) {
        tag = "error";
        why = xstrdup("runtime PM error: its driver's last suspend or resume failed");
    } else if (never_suspends < 0 || d->status == DEV_STATUS_UNKNOWN) {
        tag = "unknown";
        why = xstrdup("runtime status or suspended time unreadable");
    } else if (!never_suspends) {
        v = DEV_VERDICT_SUSPENDS;
        tag = "suspends";
        why = xstrdup("already runtime-suspends");
    } else if (d->kind == DEV_KIND_PCI && d->class_code >= 0 &&
               d->class_code >> 16 == PCI_BASE_BRIDGE) {
        tag = "bridge";
        why = xstrdup("not a candidate: bridge (every device behind it would be affected)");
    } else if ((tag = unsafe_rule(s, d, pol, &why, &rule))) {
        v = DEV_VERDICT_UNSAFE;
    } else if (d->control == DEV_CONTROL_AUTO &&
               !(d->has_autosuspend && d->autosuspend_delay_ms < 0)) {
        tag = "held";
        why = xstrdup("allowed to suspend (control auto) but kept active by its driver or "
                      "a busy child");
        rule = NULL;
    } else {
        v = DEV_VERDICT_SAFE;
        tag = "safe";
        why = safe_reason(d, rule);
    }
    *ret_tag = tag;
    *ret_reason = why;
    *ret_rule = rule;
    return v;
}

enum dev_verdict devsafety_judge_policy(const struct devices_sample *s, const struct device_info *d,
                                        int never_suspends, const struct devpolicy *pol,
                                        const char **ret_tag, char **ret_reason)
{
    const struct devpolicy_rule *rule;
    return judge(s, d, never_suspends, pol, ret_tag, ret_reason, &rule);
}

bool devsafety_safe_when_on(const struct devices_sample *s, const struct device_info *d,
                            const struct devpolicy *pol)
{
    if (!device_has_rpm(d) || d->status == DEV_STATUS_ERROR)
        return false;
    struct device_info on = *d;
    on.control = DEV_CONTROL_ON;
    on.status = DEV_STATUS_ACTIVE;
    on.suspended_ms = 0;
    const char *tag;
    const struct devpolicy_rule *rule;
    _cleanup_free_ char *why = NULL;
    return judge(s, &on, 1, pol, &tag, &why, &rule) == DEV_VERDICT_SAFE;
}

enum dev_verdict devsafety_judge(const struct devices_sample *s, const struct device_info *d,
                                 int never_suspends, const char **ret_tag, char **ret_reason)
{
    return devsafety_judge_policy(s, d, never_suspends, NULL, ret_tag, ret_reason);
}

/* ---- expected saving and latency: typical figures per class ---- */

struct saving {
    double lo_w, hi_w, resume_ms;
    const char *basis;
};

/* Rough typical figures, not measured on this machine. PCI resume: the
 * 10 ms D3hot->D0 recovery time of the PCI PM spec; USB: 20 ms resume
 * signalling plus 10 ms recovery (USB 2.0, 7.1.7.7). */
static struct saving typical_saving(const struct device_info *d)
{
    int cls = d->class_code;
    if (d->kind == DEV_KIND_USB_DEVICE || d->kind == DEV_KIND_USB_INTERFACE)
        return (struct saving){0.1, 0.5, 30, "typical for an idle USB device (and its port)"};
    if (d->kind != DEV_KIND_PCI || cls < 0)
        return (struct saving){0.05, 0.5, 10, "typical for a small on-board device"};
    switch (cls >> 8) {
    case 0x0106:
        return (struct saving){0.2, 1.0, 10, "typical for a SATA controller and its links"};
    case 0x0c03:
        return (struct saving){0.1, 1.0, 10, "typical for a USB host controller"};
    case 0x0403:
        return (struct saving){0.1, 0.5, 10, "typical for an HD audio controller"};
    default:
        break;
    }
    switch (cls >> 16) {
    case 0x01:
        return (struct saving){0.5, 2.0, 10, "typical for a PCIe storage controller at idle"};
    case 0x02:
        return (struct saving){1.0, 2.0, 10, "typical for a PCIe NIC at idle"};
    case 0x03:
        return (struct saving){0.5, 2.0, 10, "typical for an idle display controller"};
    default:
        return (struct saving){0.1, 0.5, 10, "typical for an idle PCIe device"};
    }
}

static void fill(const struct devices_sample *s, const struct devices_sample *prev,
                 const struct devpolicy *pol, const struct device_info *d,
                 struct device_candidate *c)
{
    const struct device_info *p = devices_find(prev, d->bus, d->name);
    int never = devices_never_suspends(d, p);
    *c = (struct device_candidate){.dev = d, .never_suspends = never > 0};
    c->verdict = judge(s, d, never, pol, &c->tag, &c->reason, &c->rule);
    c->suspended_pct = c->saving_w = c->saving_lo_w = c->saving_hi_w = c->resume_ms = NAN;
    if (d->active_ms != VAL_NONE && d->suspended_ms != VAL_NONE) {
        double act = (double)d->active_ms, sus = (double)d->suspended_ms;
        if (p && p->active_ms != VAL_NONE && p->suspended_ms != VAL_NONE &&
            p->active_ms <= d->active_ms && p->suspended_ms <= d->suspended_ms) {
            act -= (double)p->active_ms;
            sus -= (double)p->suspended_ms;
            c->over_interval = true;
        }
        if (act + sus > 0)
            c->suspended_pct = 100.0 * sus / (act + sus);
    }
    struct saving sv = typical_saving(d);
    c->resume_ms = sv.resume_ms;
    c->basis = sv.basis;
    if (c->verdict == DEV_VERDICT_SAFE) {
        c->saving_lo_w = sv.lo_w;
        c->saving_hi_w = sv.hi_w;
        c->saving_w = (sv.lo_w + sv.hi_w) / 2;
        c->action = d->control == DEV_CONTROL_ON ? "write auto to power/control"
                                                 : "write 2000 to power/autosuspend_delay_ms";
    }
}

size_t devices_assess_policy(const struct devices_sample *s, const struct devices_sample *prev,
                             const struct devpolicy *pol, struct device_candidate **ret)
{
    *ret = NULL;
    if (!s || !s->n)
        return 0;
    struct device_candidate *v = xcalloc(s->n, sizeof(*v));
    for (size_t i = 0; i < s->n; i++)
        fill(s, prev, pol, &s->dev[i], &v[i]);
    *ret = v;
    return s->n;
}

size_t devices_candidates_policy(const struct devices_sample *s, const struct devices_sample *prev,
                                 const struct devpolicy *pol, struct device_candidate **ret)
{
    struct device_candidate *all;
    size_t n = devices_assess_policy(s, prev, pol, &all), k = 0;
    for (size_t i = 0; i < n; i++) {
        bool keep = all[i].never_suspends && all[i].dev->status != DEV_STATUS_UNSUPPORTED &&
                    all[i].dev->status != DEV_STATUS_ERROR;
        if (keep)
            all[k++] = all[i];
        else
            free(all[i].reason);
    }
    if (k == 0) {
        free(all);
        all = NULL;
    }
    *ret = all;
    return k;
}

size_t devices_assess(const struct devices_sample *s, const struct devices_sample *prev,
                      struct device_candidate **ret)
{
    return devices_assess_policy(s, prev, NULL, ret);
}

size_t devices_candidates(const struct devices_sample *s, const struct devices_sample *prev,
                          struct device_candidate **ret)
{
    return devices_candidates_policy(s, prev, NULL, ret);
}

void device_candidates_free(struct device_candidate *v, size_t n)
{
    for (size_t i = 0; v && i < n; i++)
        free(v[i].reason);
    free(v);
}
