#include "sense/devices.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/parse.h"
#include "base/strbuf.h"
#include "base/util.h"

/* Links of bond/bridge/vlan masters followed to the real NICs, at most. */
#define MAX_NET_DEPTH 4
/* dm on md on disks: levels of slaves/ followed, at most. */
#define MAX_SLAVE_DEPTH 8

static int devices_probe(struct host *h, void **ret_state, char **ret_reason)
{
    if (host_is_dir(h, HOST_SYS, "bus"))
        return 1;
    *ret_reason = xstrdup("no bus directory in sysfs: cannot list devices");
    return 0;
}

/* ---- pure parsers ---- */

int devices_parse_hex(const char *text, size_t len, int *ret)
{
    char buf[32];
    if (len >= sizeof(buf))
        return -EINVAL;
    memcpy(buf, text, len);
    buf[len] = '\0';
    strip_trailing(buf);
    const char *p = skip_space(buf);
    if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X'))
        p += 2;
    if (!*p)
        return -EINVAL;
    uint64_t v = 0;
    for (; *p; p++) {
        int digit;
        if (*p >= '0' && *p <= '9')
            digit = *p - '0';
        else if (*p >= 'a' && *p <= 'f')
            digit = *p - 'a' + 10;
        else if (*p >= 'A' && *p <= 'F')
            digit = *p - 'A' + 10;
        else
            return -EINVAL;
        v = v * 16 + (uint64_t)digit;
        if (v > INT32_MAX)
            return -ERANGE;
    }
    *ret = (int)v;
    return 0;
}

/* The next line of text as a NUL-terminated copy; NULL at the end. */
static char *next_line(const char **p, const char *end)
{
    if (*p >= end)
        return NULL;
    const char *nl = memchr(*p, '\n', (size_t)(end - *p));
    const char *stop = nl ? nl : end;
    char *line = xmalloc((size_t)(stop - *p) + 1);
    memcpy(line, *p, (size_t)(stop - *p));
    line[stop - *p] = '\0';
    *p = nl ? nl + 1 : end;
    return line;
}

/* Fields separated by blanks; at most max, the rest ignored. */
static size_t split_fields(char *line, char **f, size_t max)
{
    size_t n = 0;
    for (char *save = NULL, *t = strtok_r(line, " \t", &save); t && n < max;
         t = strtok_r(NULL, " \t", &save))
        f[n++] = t;
    return n;
}

int devices_parse_mountinfo_root(const char *text, size_t len, unsigned *ret_major,
                                 unsigned *ret_minor, char **ret_source)
{
    const char *p = text, *end = text + len;
    unsigned maj = 0, min = 0;
    char *source = NULL;
    bool found = false;
    char *line;
    /* "36 35 98:0 / / rw,noatime master:1 - ext3 /dev/root rw": fields
     * 3 and 5 are MAJ:MIN and the mount point; after the "-" separator come
     * the type and the source. */
    while ((line = next_line(&p, end))) {
        char *f[32];
        size_t n = split_fields(line, f, ARRAY_SIZE(f));
        unsigned a, b;
        char tail;
        size_t dash = 6;
        while (dash < n && !streq(f[dash], "-"))
            dash++;
        if (n >= 5 && streq(f[4], "/") && isdigit((unsigned char)f[2][0]) && !strpbrk(f[2], "+-") &&
            sscanf(f[2], "%u:%u%c", &a, &b, &tail) == 2 && dash + 2 < n) {
            maj = a;
            min = b;
            free(source);
            source = xstrdup(f[dash + 2]);
            found = true;
        }
        free(line);
    }
    if (!found)
        return -ENOENT;
    *ret_major = maj;
    *ret_minor = min;
    *ret_source = source;
    return 0;
}

int devices_parse_route_default(const char *text, size_t len, char **ret_iface)
{
    const char *p = text, *end = text + len;
    char *line;
    char *iface = NULL;
    /* "Iface Destination Gateway Flags RefCnt Use Metric Mask ...", hex
     * fields; RTF_UP is 0x1. */
    while (!iface && (line = next_line(&p, end))) {
        char *f[12];
        size_t n = split_fields(line, f, ARRAY_SIZE(f));
        int flags;
        if (n >= 8 && streq(f[1], "00000000") && streq(f[7], "00000000") &&
            devices_parse_hex(f[3], strlen(f[3]), &flags) == 0 && (flags & 1))
            iface = xstrdup(f[0]);
        free(line);
    }
    if (!iface)
        return -ENOENT;
    *ret_iface = iface;
    return 0;
}

int devices_parse_ipv6_route_default(const char *text, size_t len, char **ret_iface)
{
    const char *p = text, *end = text + len;
    char *line;
    char *iface = NULL;
    /* dest plen src splen nexthop metric refcnt use flags devname */
    while (!iface && (line = next_line(&p, end))) {
        char *f[12];
        size_t n = split_fields(line, f, ARRAY_SIZE(f));
        if (n >= 10 && strspn(f[0], "0") == 32 && f[0][32] == '\0' && streq(f[1], "00") &&
            !streq(f[9], "lo"))
            iface = xstrdup(f[9]);
        free(line);
    }
    if (!iface)
        return -ENOENT;
    *ret_iface = iface;
    return 0;
}

char *devices_resolve_link(const char *linkdir, const char *target)
{
    if (!target || target[0] == '/')
        return NULL;
    struct strbuf b = {0};
    strbuf_append(&b, linkdir);
    _cleanup_free_ char *t = xstrdup(target);
    char *save = NULL;
    for (char *c = strtok_r(t, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
        if (streq(c, "."))
            continue;
        if (streq(c, "..")) {
            if (b.len == 0) {
                strbuf_free(&b);
                return NULL;
            }
            char *slash = strrchr(b.s, '/');
            b.len = slash ? (size_t)(slash - b.s) : 0;
            b.s[b.len] = '\0';
            continue;
        }
        if (b.len)
            strbuf_putc(&b, '/');
        strbuf_append(&b, c);
    }
    if (b.len == 0) {
        strbuf_free(&b);
        return NULL;
    }
    return strbuf_steal(&b);
}

/* ---- names ---- */

const char *dev_control_name(enum dev_control c)
{
    return c == DEV_CONTROL_AUTO ? "auto" : c == DEV_CONTROL_ON ? "on" : NULL;
}

static const char *const status_names[] = {
    [DEV_STATUS_ACTIVE] = "active",         [DEV_STATUS_SUSPENDED] = "suspended",
    [DEV_STATUS_SUSPENDING] = "suspending", [DEV_STATUS_RESUMING] = "resuming",
    [DEV_STATUS_ERROR] = "error",           [DEV_STATUS_UNSUPPORTED] = "unsupported",
};

const char *dev_status_name(enum dev_status st)
{
    return (size_t)st < ARRAY_SIZE(status_names) ? status_names[st] : NULL;
}

enum dev_status dev_status_parse(const char *s)
{
    for (size_t i = 0; s && i < ARRAY_SIZE(status_names); i++)
        if (status_names[i] && streq(s, status_names[i]))
            return (enum dev_status)i;
    return DEV_STATUS_UNKNOWN;
}

const char *dev_wakeup_name(enum dev_wakeup w)
{
    switch (w) {
    case DEV_WAKEUP_ABSENT:
        return "absent";
    case DEV_WAKEUP_DISABLED:
        return "disabled";
    case DEV_WAKEUP_ENABLED:
        return "enabled";
    default:
        return NULL;
    }
}

const char *dev_kind_name(enum dev_kind k)
{
    static const char *const names[] = {"other", "pci", "usb_device", "usb_interface", "virtio"};
    return (size_t)k < ARRAY_SIZE(names) ? names[k] : "other";
}

/* ---- reading one device ---- */

/* A string attribute; a missing optional file is not a problem. */
static char *read_attr(struct host *h, struct sample *s, const char *dir, const char *name,
                       bool optional)
{
    _cleanup_free_ char *path = xasprintf("%s/%s", dir, name);
    char *v = NULL;
    int r = host_read_str(h, HOST_SYS, path, &v);
    if (r < 0 && !(optional && r == -ENOENT))
        sample_diag_read(s, h, HOST_SYS, path, r);
    return r < 0 ? NULL : v;
}

static uint64_t read_ms(struct host *h, struct sample *s, const char *dir, const char *name)
{
    _cleanup_free_ char *path = xasprintf("%s/%s", dir, name);
    uint64_t v;
    int r = host_read_u64(h, HOST_SYS, path, &v);
    if (r < 0) {
        sample_diag_read(s, h, HOST_SYS, path, r);
        return VAL_NONE;
    }
    return v;
}

static int read_hex(struct host *h, struct sample *s, const char *dir, const char *name,
                    bool optional)
{
    _cleanup_free_ char *v = read_attr(h, s, dir, name, optional);
    int x;
    if (!v)
        return -1;
    if (devices_parse_hex(v, strlen(v), &x) < 0) {
        _cleanup_free_ char *path = xasprintf("%s/%s", dir, name);
        sample_diag_read(s, h, HOST_SYS, path, -EINVAL);
        return -1;
    }
    return x;
}

/* autosuspend_delay_ms gives EIO on devices that do not use autosuspend
 * (most of them): that is the kernel's way of saying "not applicable". */
static void read_autosuspend(struct host *h, struct sample *s, const char *pw,
                             struct device_info *d)
{
    _cleanup_free_ char *path = xasprintf("%s/autosuspend_delay_ms", pw);
    _cleanup_free_ char *v = NULL;
    int r = host_read_str(h, HOST_SYS, path, &v);
    if (r == -EIO || r == -ENOENT || (r == 0 && !*v))
        return; /* recorded trees keep the EIO as an empty file */
    int64_t x;
    if (r == 0)
        r = parse_i64(v, &x);
    if (r < 0) {
        sample_diag_read(s, h, HOST_SYS, path, r);
        return;
    }
    d->has_autosuspend = true;
    d->autosuspend_delay_ms = x;
}

static enum dev_wakeup read_wakeup(struct host *h, struct sample *s, const char *pw)
{
    _cleanup_free_ char *path = xasprintf("%s/wakeup", pw);
    _cleanup_free_ char *v = NULL;
    int r = host_read_str(h, HOST_SYS, path, &v);
    if (r == -ENOENT || (r == 0 && !*v))
        return DEV_WAKEUP_ABSENT; /* empty: cannot wake the system now */
    if (r == 0 && streq(v, "enabled"))
        return DEV_WAKEUP_ENABLED;
    if (r == 0 && streq(v, "disabled"))
        return DEV_WAKEUP_DISABLED;
    sample_diag_read(s, h, HOST_SYS, path, r < 0 ? r : -EINVAL);
    return DEV_WAKEUP_UNKNOWN;
}

static void read_power(struct host *h, struct sample *s, const char *pw, struct device_info *d);

/* power/ moves (and `watt tune` moves control): read through files kept
 * open under the agent's cache, at most every host_cache_slow() seconds
 * (the agent: 10 s on a live root; its counters are cumulative, so a rate
 * over a longer window stays exact); but a device whose runtime PM
 * is "unsupported" (no driver support: memory blocks, virtio, most
 * platform devices) stays so until its driver changes, so under the cache
 * its power/ is static after the first look (a rebind shows at the next
 * drop, within a minute). Each file is still read once a sample at most,
 * as the fixtures' faults expect. */
static void read_runtime_pm(struct host *h, struct sample *s, const char *dir,
                            struct device_info *d)
{
    _cleanup_free_ char *pw = xasprintf("%s/power", dir);
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/runtime_status", pw);
    const char *known = host_cache_peek(h, HOST_SYS, path);
    bool unsupported = known && streq(known, "unsupported\n");
    enum host_cache_mode m = host_cache_mode(h, unsupported ? HOST_CACHE_STATIC : HOST_CACHE_SLOW);
    read_power(h, s, pw, d);
    host_cache_mode(h, m);
    if (!unsupported && d->status == DEV_STATUS_UNSUPPORTED)
        host_cache_put(h, HOST_SYS, path, "unsupported\n");
}

static void read_power(struct host *h, struct sample *s, const char *pw, struct device_info *d)
{
    _cleanup_free_ char *ctl = read_attr(h, s, pw, "control", false);
    d->control = streq(ctl, "auto") ? DEV_CONTROL_AUTO
                 : streq(ctl, "on") ? DEV_CONTROL_ON
                                    : DEV_CONTROL_UNKNOWN;
    if (ctl && d->control == DEV_CONTROL_UNKNOWN) {
        _cleanup_free_ char *path = xasprintf("%s/control", pw);
        sample_diag_read(s, h, HOST_SYS, path, -EINVAL);
    }
    _cleanup_free_ char *st = read_attr(h, s, pw, "runtime_status", false);
    d->status = dev_status_parse(st);
    if (st && d->status == DEV_STATUS_UNKNOWN) {
        _cleanup_free_ char *path = xasprintf("%s/runtime_status", pw);
        sample_diag_read(s, h, HOST_SYS, path, -EINVAL);
    }
    d->active_ms = d->suspended_ms = VAL_NONE;
    d->wakeup = DEV_WAKEUP_UNKNOWN;
    /* Unsupported devices (memory blocks, CPUs: thousands on big machines)
     * have nothing more to say; skip their other files. */
    if (d->status == DEV_STATUS_UNSUPPORTED)
        return;
    d->active_ms = read_ms(h, s, pw, "runtime_active_time");
    d->suspended_ms = read_ms(h, s, pw, "runtime_suspended_time");
    d->runtime_enabled = read_attr(h, s, pw, "runtime_enabled", true);
    read_autosuspend(h, s, pw, d);
    d->wakeup = read_wakeup(h, s, pw);
}

/* Every interface of a USB device: its children "NAME:C.I" (the active
 * configuration's only). Devices of class 00 or ef say what they are
 * there, and their drivers bind there: a headset's audio can be interface
 * 2 behind a HID interface 0. */
static void read_ifaces(struct host *h, struct sample *s, const char *dir, struct device_info *d)
{
    char **names;
    size_t n, nl = strlen(d->name);
    if (host_list(h, HOST_SYS, dir, &names, &n) < 0)
        return;
    for (size_t i = 0; i < n && d->niface < DEV_MAX_IFACES; i++) {
        if (strncmp(names[i], d->name, nl) != 0 || names[i][nl] != ':' || !names[i][nl + 1])
            continue;
        if (!d->iface)
            d->iface = xcalloc(DEV_MAX_IFACES, sizeof(*d->iface));
        struct usb_iface *f = &d->iface[d->niface++];
        _cleanup_free_ char *idir = xasprintf("%s/%s", dir, names[i]);
        f->name = xstrdup(names[i]);
        f->cls = read_hex(h, s, idir, "bInterfaceClass", false);
        /* through the real path, as the device's own driver; ENOENT: none */
        _cleanup_free_ char *drv = xasprintf("%s/%s/driver", d->path, names[i]);
        host_link_name(h, HOST_SYS, drv, &f->driver);
    }
    if (d->niface)
        d->iface_class = d->iface[0].cls;
    host_free_list(names, n);
}

bool device_usb_class(const struct device_info *d, int cls)
{
    if (d->kind != DEV_KIND_USB_DEVICE && d->kind != DEV_KIND_USB_INTERFACE)
        return false;
    if (d->class_code == cls || (d->kind == DEV_KIND_USB_DEVICE && d->iface_class == cls))
        return true;
    for (size_t i = 0; i < d->niface; i++)
        if (d->iface[i].cls == cls)
            return true;
    return false;
}

bool device_has_driver(const struct device_info *d, const char *driver)
{
    if (!driver)
        return false;
    if (streq(d->driver, driver))
        return true;
    for (size_t i = 0; i < d->niface; i++)
        if (streq(d->iface[i].driver, driver))
            return true;
    return false;
}

static void read_identity(struct host *h, struct sample *s, const char *dir, struct device_info *d)
{
    d->class_code = d->vendor = d->device = d->iface_class = -1;
    if (streq(d->bus, "pci")) {
        d->kind = DEV_KIND_PCI;
        d->class_code = read_hex(h, s, dir, "class", false);
        d->vendor = read_hex(h, s, dir, "vendor", false);
        d->device = read_hex(h, s, dir, "device", false);
        d->product = read_attr(h, s, dir, "label", true);
    } else if (streq(d->bus, "usb") && strchr(d->name, ':')) {
        d->kind = DEV_KIND_USB_INTERFACE;
        d->class_code = read_hex(h, s, dir, "bInterfaceClass", false);
        d->product = read_attr(h, s, dir, "interface", true);
    } else if (streq(d->bus, "usb")) {
        d->kind = DEV_KIND_USB_DEVICE;
        d->class_code = read_hex(h, s, dir, "bDeviceClass", false);
        d->vendor = read_hex(h, s, dir, "idVendor", false);
        d->device = read_hex(h, s, dir, "idProduct", false);
        d->product = read_attr(h, s, dir, "product", true);
        read_ifaces(h, s, dir, d);
    } else if (streq(d->bus, "virtio")) {
        d->kind = DEV_KIND_VIRTIO;
        d->class_code = read_hex(h, s, dir, "device", true);
        d->vendor = read_hex(h, s, dir, "vendor", true);
    }
}

/* Where a link under sys/ leads, relative to sys/; the link's own path
 * when it is not a link (a flattened recorded tree). */
static char *resolve_sys_link(struct host *h, const char *linkdir, const char *name)
{
    _cleanup_free_ char *path = xasprintf("%s/%s", linkdir, name);
    _cleanup_free_ char *target = NULL;
    if (host_readlink(h, HOST_SYS, path, &target) < 0)
        return TAKE_PTR(path);
    char *real = devices_resolve_link(linkdir, target);
    return real ? real : TAKE_PTR(path);
}

static void read_device(struct host *h, struct sample *s, const char *bus, const char *name,
                        struct device_info *d)
{
    _cleanup_free_ char *linkdir = xasprintf("bus/%s/devices", bus);
    _cleanup_free_ char *dir = xasprintf("%s/%s", linkdir, name);
    d->bus = xstrdup(bus);
    d->name = xstrdup(name);
    d->path = resolve_sys_link(h, linkdir, name);
    /* Through the real path: a recorded tree cannot hold a link below
     * the bus directory's link. ENOENT: no driver bound. */
    _cleanup_free_ char *drv = xasprintf("%s/driver", d->path);
    host_link_name(h, HOST_SYS, drv, &d->driver);
    read_runtime_pm(h, s, dir, d);
    if (d->status != DEV_STATUS_UNSUPPORTED || streq(bus, "pci") || streq(bus, "usb"))
        read_identity(h, s, dir, d);
    else
        d->class_code = d->vendor = d->device = d->iface_class = -1;
}

/* ---- input devices ---- */

static void add_input(struct devices_sample *ds, char *path, size_t *cap)
{
    ds->input = grow_array(ds->input, sizeof(*ds->input), ds->ninput, cap);
    ds->input[ds->ninput++] = path;
}

/* A USB interface without runtime PM files of its own still makes its
 * device a keyboard or mouse. */
static void note_usb_hid(struct host *h, struct devices_sample *ds, const char *name, size_t *cap)
{
    if (!strchr(name, ':'))
        return;
    int cls;
    _cleanup_free_ char *v = NULL;
    if (host_read_strf(h, HOST_SYS, &v, "bus/usb/devices/%s/bInterfaceClass", name) < 0 ||
        devices_parse_hex(v, strlen(v), &cls) < 0 || cls != 0x03)
        return;
    add_input(ds, resolve_sys_link(h, "bus/usb/devices", name), cap);
}

static void collect_inputs(struct host *h, struct devices_sample *ds, size_t *cap)
{
    char **names;
    size_t n;
    for (size_t i = 0; i < ds->n; i++)
        if (ds->dev[i].kind == DEV_KIND_USB_INTERFACE && ds->dev[i].class_code == 0x03)
            add_input(ds, xstrdup(ds->dev[i].path), cap);
    if (host_list(h, HOST_SYS, "class/input", &names, &n) < 0)
        return; /* no input class: a headless server */
    for (size_t i = 0; i < n; i++)
        if (strncmp(names[i], "input", 5) == 0)
            add_input(ds, resolve_sys_link(h, "class/input", names[i]), cap);
    host_free_list(names, n);
}

/* ---- walking the buses ---- */

static void collect_bus(struct host *h, struct sample *s, struct devices_sample *ds,
                        const char *bus, size_t *cap, size_t *incap)
{
    _cleanup_free_ char *dir = xasprintf("bus/%s/devices", bus);
    char **names;
    size_t n;
    int r = host_list(h, HOST_SYS, dir, &names, &n);
    if (r < 0) {
        if (r != -ENOENT)
            sample_diag_read(s, h, HOST_SYS, dir, r);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        if (!host_existsf(h, HOST_SYS, "%s/%s/power/control", dir, names[i])) {
            if (streq(bus, "usb"))
                note_usb_hid(h, ds, names[i], incap);
            continue;
        }
        ds->dev = grow_array(ds->dev, sizeof(*ds->dev), ds->n, cap);
        struct device_info *d = &ds->dev[ds->n++];
        *d = (struct device_info){0};
        read_device(h, s, bus, names[i], d);
    }
    host_free_list(names, n);
}

/* ---- the root filesystem and the default route ---- */

static void add_anchor(struct devices_sample *ds, char *path, enum dev_anchor_kind kind,
                       const char *what)
{
    ds->anchor = xrealloc(ds->anchor, (ds->nanchor + 1) * sizeof(*ds->anchor));
    ds->anchor[ds->nanchor++] =
        (struct device_anchor){.path = path, .kind = kind, .what = xstrdup(what)};
}

static void anchor_block(struct host *h, struct devices_sample *ds, char *path, int depth);

/* Slave, multipath and lower_ links can form cycles or fan out in a
 * hostile tree: a path already anchored is not walked again, so the walk
 * is linear in the anchors. */
static bool anchored(const struct devices_sample *ds, const char *path)
{
    for (size_t i = 0; i < ds->nanchor; i++)
        if (streq(ds->anchor[i].path, path))
            return true;
    return false;
}

/* Follow the links in DIR/sub ("slaves" of dm and md, "multipath" of an
 * NVMe namespace head, which lives under devices/virtual/ and not under
 * its controller). */
static void anchor_lower(struct host *h, struct devices_sample *ds, const char *dir,
                         const char *sub, int depth)
{
    _cleanup_free_ char *lower = xasprintf("%s/%s", dir, sub);
    char **names;
    size_t n;
    if (host_list(h, HOST_SYS, lower, &names, &n) < 0)
        return;
    for (size_t i = 0; i < n; i++) {
        _cleanup_free_ char *lp = xasprintf("%s/%s", lower, names[i]);
        _cleanup_free_ char *target = NULL;
        char *real = NULL;
        if (host_readlink(h, HOST_SYS, lp, &target) == 0)
            real = devices_resolve_link(lower, target);
        if (real)
            anchor_block(h, ds, real, depth + 1);
    }
    host_free_list(names, n);
}

/* A block device and what it is built on, for a partition also via its
 * disk. */
static void anchor_block(struct host *h, struct devices_sample *ds, char *path, int depth)
{
    if (anchored(ds, path)) {
        free(path);
        return;
    }
    add_anchor(ds, path, DEV_ANCHOR_ROOTFS, ds->rootfs);
    if (depth >= MAX_SLAVE_DEPTH)
        return;
    _cleanup_free_ char *disk = xstrdup(path);
    char *slash = strrchr(disk, '/');
    if (slash)
        *slash = '\0';
    bool partition = slash && host_existsf(h, HOST_SYS, "%s/partition", path);
    const char *dirs[] = {path, partition ? disk : NULL};
    for (size_t i = 0; i < ARRAY_SIZE(dirs) && dirs[i]; i++) {
        anchor_lower(h, ds, dirs[i], "slaves", depth);
        anchor_lower(h, ds, dirs[i], "multipath", depth);
    }
}

/* The block device's sysfs path from the mount source, when the root's
 * st_dev is anonymous (btrfs: 0:NN); a device-mapper name is a link to
 * its dm-N node. */
static char *block_path_from_source(struct host *h, const char *source)
{
    const char *devdir = host_dir_name(HOST_DEV);
    size_t dl = strlen(devdir);
    if (source[0] != '/' || strncmp(source + 1, devdir, dl) != 0 || source[1 + dl] != '/')
        return NULL;
    const char *rel = source + 2 + dl;
    const char *slash = strrchr(rel, '/');
    const char *name = slash ? slash + 1 : rel;
    _cleanup_free_ char *target = NULL;
    if (host_readlink(h, HOST_DEV, rel, &target) == 0) {
        slash = strrchr(target, '/');
        name = slash ? slash + 1 : target;
    }
    if (!*name || streq(name, "..") || streq(name, "."))
        return NULL;
    /* class/block/NAME is there for every disk and partition */
    _cleanup_free_ char *cls = xasprintf("class/block/%s", name);
    _cleanup_free_ char *t = NULL;
    if (host_readlink(h, HOST_SYS, cls, &t) < 0)
        return NULL;
    return devices_resolve_link("class/block", t);
}

static void find_rootfs(struct host *h, struct devices_sample *ds)
{
    _cleanup_free_ char *text = NULL;
    size_t len;
    unsigned maj, min;
    _cleanup_free_ char *source = NULL;
    if (host_read(h, HOST_PROC, "self/mountinfo", &text, &len) < 0) {
        ds->rootfs_why = xstrdup("cannot read mountinfo"); /* errno differs on replay */
        return;
    }
    if (devices_parse_mountinfo_root(text, len, &maj, &min, &source) < 0) {
        ds->rootfs_why = xstrdup("no mount on / in mountinfo");
        return;
    }
    ds->rootfs = xasprintf("%s on /", source);
    char *path = NULL;
    _cleanup_free_ char *link = xasprintf("dev/block/%u:%u", maj, min);
    _cleanup_free_ char *target = NULL;
    if (maj != 0 && host_readlink(h, HOST_SYS, link, &target) == 0)
        path = devices_resolve_link("dev/block", target);
    if (!path)
        path = block_path_from_source(h, source);
    if (!path) {
        ds->rootfs_why =
            xasprintf("root filesystem %u:%u (%s) is not on a block device", maj, min, source);
        return;
    }
    anchor_block(h, ds, path, 0);
}

/* A NIC and, for bonds, bridges and VLANs, the lower interfaces. */
static void anchor_nic(struct host *h, struct devices_sample *ds, const char *iface, int depth)
{
    char *path = resolve_sys_link(h, "class/net", iface);
    if (path && anchored(ds, path)) {
        free(path);
        return;
    }
    add_anchor(ds, path, DEV_ANCHOR_DEFAULT_NIC, ds->default_nic);
    char **names;
    size_t n;
    if (depth >= MAX_NET_DEPTH || host_list(h, HOST_SYS, path, &names, &n) < 0)
        return;
    for (size_t i = 0; i < n; i++)
        if (strncmp(names[i], "lower_", 6) == 0 && names[i][6])
            anchor_nic(h, ds, names[i] + 6, depth + 1);
    host_free_list(names, n);
}

static void find_default_nic(struct host *h, struct devices_sample *ds)
{
    _cleanup_free_ char *text = NULL, *text6 = NULL;
    size_t len;
    char *iface = NULL;
    if (host_read(h, HOST_PROC, "net/route", &text, &len) == 0)
        devices_parse_route_default(text, len, &iface);
    if (!iface && host_read(h, HOST_PROC, "net/ipv6_route", &text6, &len) == 0)
        devices_parse_ipv6_route_default(text6, len, &iface);
    if (!iface) {
        ds->no_default_route = text || text6;
        if (!ds->no_default_route)
            ds->default_nic_why = xstrdup("cannot read the routing table");
        return;
    }
    ds->default_nic = iface;
    if (!host_existsf(h, HOST_SYS, "class/net/%s", iface)) {
        ds->default_nic_why = xasprintf("%s has no class/net entry", iface);
        return;
    }
    anchor_nic(h, ds, iface, 0);
}

/* Buses of system pseudo-devices: memory blocks, CPUs, NUMA nodes, timers
 * and PMUs have power/ directories but runtime PM never applies to them
 * (they are "unsupported"). ACPI device nodes are firmware companions: the
 * device that suspends is their physical twin on pci/platform/usb. A
 * 24 GiB VM has 192 memory blocks and 41 ACPI nodes: walking them was two
 * thirds of a live report's syscalls. */
static bool pseudo_bus(const char *bus)
{
    static const char *const skip[] = {
        "memory",       "memory_tiering", "cpu",       "node",         "clockevents", "clocksource",
        "event_source", "workqueue",      "container", "machinecheck", "edac",        "acpi",
    };
    for (size_t i = 0; i < ARRAY_SIZE(skip); i++)
        if (streq(bus, skip[i]))
            return true;
    return false;
}

static int collect_all(struct host *h, struct sample *s);

/* Under the agent's cache the buses, devices, identities, drivers, the
 * root filesystem's and the default route's anchors are read once a
 * minute (a device that goes away drops them sooner); power/ every
 * sample. */
static int devices_collect(struct host *h, void *state, struct sample *s)
{
    enum host_cache_mode m = host_cache_mode(h, HOST_CACHE_STATIC);
    int r = collect_all(h, s);
    host_cache_mode(h, m);
    return r;
}

static int collect_all(struct host *h, struct sample *s)
{
    struct devices_sample *ds = xcalloc(1, sizeof(*ds));
    s->devices = ds;
    char **buses;
    size_t nbus, cap = 0, incap = 0;
    int r = host_list(h, HOST_SYS, "bus", &buses, &nbus);
    if (r < 0) {
        sample_diag_read(s, h, HOST_SYS, "bus", r);
        return r;
    }
    for (size_t i = 0; i < nbus; i++)
        if (!pseudo_bus(buses[i]))
            collect_bus(h, s, ds, buses[i], &cap, &incap);
    host_free_list(buses, nbus);
    collect_inputs(h, ds, &incap);
    find_rootfs(h, ds);
    find_default_nic(h, ds);
    return 0;
}

static void devices_free_sample(struct sample *s)
{
    struct devices_sample *ds = s->devices;
    if (!ds)
        return;
    for (size_t i = 0; i < ds->n; i++) {
        struct device_info *d = &ds->dev[i];
        free(d->bus);
        free(d->name);
        free(d->path);
        free(d->driver);
        free(d->product);
        free(d->runtime_enabled);
        for (size_t k = 0; k < d->niface; k++) {
            free(d->iface[k].name);
            free(d->iface[k].driver);
        }
        free(d->iface);
    }
    free(ds->dev);
    for (size_t i = 0; i < ds->nanchor; i++) {
        free(ds->anchor[i].path);
        free(ds->anchor[i].what);
    }
    free(ds->anchor);
    for (size_t i = 0; i < ds->ninput; i++)
        free(ds->input[i]);
    free(ds->input);
    free(ds->rootfs);
    free(ds->rootfs_why);
    free(ds->default_nic);
    free(ds->default_nic_why);
    free(ds);
    s->devices = NULL;
}

const struct device_info *devices_find(const struct devices_sample *s, const char *bus,
                                       const char *name)
{
    for (size_t i = 0; s && i < s->n; i++)
        if (streq(s->dev[i].bus, bus) && streq(s->dev[i].name, name))
            return &s->dev[i];
    return NULL;
}

const struct sampler devices_sampler = {
    .name = "devices",
    .probe = devices_probe,
    .collect = devices_collect,
    .free_sample = devices_free_sample,
};
