#include "sense/devpolicy.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "host/host.h"
#include "sense/devices.h"

/* ---- the built-in deny list ---- */

/* Short on purpose: each entry is a class of device or a driver known to
 * misbehave under runtime autosuspend, and why. The hard rules (root fs,
 * default NIC, HID/input, virtio, BMC console, bridges) live in
 * devsafety.c; these come after them. */
struct builtin_deny {
    const char *tag; /* for tables */
    const char *why; /* appended to "built-in deny: TAG: " */
    int usb_class;   /* USB device, interface or any interface's class; -1 none */
    const char *const *drivers;
};

/* GPU drivers run their device's runtime PM themselves (PRIME offload,
 * D3cold of a discrete GPU): they set power/control as they need it, and
 * nvidia's runtime D3 needs the driver configured for it. TLP leaves them
 * alone by default (RUNTIME_PM_DRIVER_DENYLIST "amdgpu nouveau nvidia
 * radeon" in 1.x). */
static const char *const gpu_drivers[] = {"amdgpu", "nouveau", "nvidia", "radeon", NULL};
/* Intel ME (mei_me): the kernel allows its runtime PM only on platforms
 * with D0i3, "as some older platforms were found to have broken power
 * management" (kernel commit cc365dcf0e56, mei: me: allow runtime pm for
 * platform with D0i3); TLP's default driver deny list has it too. */
static const char *const mei_drivers[] = {"mei_me", NULL};

static const struct builtin_deny builtin[] = {
    /* TLP's USB_EXCLUDE_AUDIO (default 1): USB sound devices click, lose
     * the first samples or stall the stream on every resume. */
    {"USB audio", "USB audio class (01): sound drops or clicks on every resume", 0x01, NULL},
    /* TLP's USB_EXCLUDE_PRINTER (default 1): printers go offline or lose
     * a job when their port suspends. */
    {"printer", "USB printer class (07): printers go offline or lose jobs when suspended", 0x07,
     NULL},
    {"GPU driver", "its driver runs the GPU's runtime PM itself", -1, gpu_drivers},
    {"ME interface", "Intel ME (mei_me): runtime PM is broken on older platforms", -1, mei_drivers},
};

/* Whether path is d's USB device's directory: "a/1-1" of "a/1-1/1-1:1.0". */
static bool parent_is(const char *child, const char *parent)
{
    const char *slash = strrchr(child, '/');
    return slash && parent && (size_t)(slash - child) == strlen(parent) &&
           strncmp(child, parent, strlen(parent)) == 0;
}

/* The first driver of LIST bound to D or to one of its USB interfaces. */
static const char *driver_in(const struct device_info *d, const char *const *list)
{
    for (size_t i = 0; list && list[i]; i++)
        if (device_has_driver(d, list[i]))
            return list[i];
    return NULL;
}

const char *devpolicy_builtin_deny(const struct devices_sample *s, const struct device_info *d,
                                   char **ret_reason)
{
    (void)s; /* a USB device carries its interfaces (device_info.iface) */
    for (size_t i = 0; i < ARRAY_SIZE(builtin); i++) {
        const struct builtin_deny *b = &builtin[i];
        /* any interface of the class: a webcam's audio is interface 2 */
        bool hit = b->usb_class >= 0 && device_usb_class(d, b->usb_class);
        const char *drv = hit ? NULL : driver_in(d, b->drivers);
        if (!hit && !drv)
            continue;
        *ret_reason = drv ? xasprintf("built-in deny: %s (%s): %s", b->tag, drv, b->why)
                          : xasprintf("built-in deny: %s: %s", b->tag, b->why);
        return b->tag;
    }
    return NULL;
}

/* ---- matching user rules ---- */

/* A USB interface has no ids of its own: its USB device's count. */
static const struct device_info *id_source(const struct devices_sample *s,
                                           const struct device_info *d)
{
    if (d->kind != DEV_KIND_USB_INTERFACE || d->vendor >= 0 || !d->path)
        return d;
    for (size_t i = 0; i < s->n; i++)
        if (s->dev[i].kind == DEV_KIND_USB_DEVICE && parent_is(d->path, s->dev[i].path))
            return &s->dev[i];
    return d;
}

static bool path_at_or_below(const char *path, const char *top)
{
    size_t n = strlen(top);
    return path && strncmp(path, top, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

static bool rule_matches(const struct devpolicy_rule *r, const struct devices_sample *s,
                         const struct device_info *d)
{
    switch (r->match) {
    case DEVPOLICY_MATCH_ID: {
        const struct device_info *src = id_source(s, d);
        return src->vendor >= 0 && src->device >= 0 &&
               (r->vendor < 0 || r->vendor == src->vendor) &&
               (r->device < 0 || r->device == src->device);
    }
    case DEVPOLICY_MATCH_DRIVER:
        return device_has_driver(d, r->value);
    case DEVPOLICY_MATCH_PATH:
        return path_at_or_below(d->path, r->value);
    case DEVPOLICY_MATCH_BUSDEV: {
        size_t n = d->bus ? strlen(d->bus) : 0;
        return n && strncmp(r->value, d->bus, n) == 0 && r->value[n] == '/' &&
               streq(r->value + n + 1, d->name);
    }
    }
    return false;
}

const struct devpolicy_rule *devpolicy_find(const struct devpolicy *p,
                                            const struct devices_sample *s,
                                            const struct device_info *d,
                                            enum devpolicy_action action)
{
    for (size_t i = 0; p && s && i < p->n; i++)
        if (p->v[i].action == action && rule_matches(&p->v[i], s, d))
            return &p->v[i];
    return NULL;
}

char *devpolicy_rule_name(const struct devpolicy_rule *r)
{
    return xasprintf("%s (%s)", r->origin, r->text);
}

/* ---- parsing ---- */

static int hex_or_any(const char *s, size_t n, int *ret)
{
    if (n == 1 && s[0] == '*') {
        *ret = -1;
        return 0;
    }
    if (n == 0 || n > 4)
        return -EINVAL;
    int v = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        int digit = c >= '0' && c <= '9'   ? c - '0'
                    : c >= 'a' && c <= 'f' ? c - 'a' + 10
                    : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                           : -1;
        if (digit < 0)
            return -EINVAL;
        v = v * 16 + digit;
    }
    *ret = v;
    return 0;
}

/* User text for an error message: at most 80 bytes, control bytes as
 * '?', so the message stays one clean line. Owned. */
static char *shown(const char *w)
{
    char *c = strndup(w, 80);
    if (!c)
        abort();
    for (char *q = c; *q; q++)
        if ((unsigned char)*q < ' ' || *q == 0x7f)
            *q = '?';
    return c;
}

static int parse_id(const char *w, struct devpolicy_rule *r)
{
    const char *colon = strchr(w, ':');
    if (!colon || strchr(colon + 1, ':'))
        return -EINVAL;
    int v, d;
    if (hex_or_any(w, (size_t)(colon - w), &v) < 0 ||
        hex_or_any(colon + 1, strlen(colon + 1), &d) < 0)
        return -EINVAL;
    r->match = DEVPOLICY_MATCH_ID;
    r->vendor = v;
    r->device = d;
    return 0;
}

/* A driver name or a path component: no space, control byte or '/'. */
static bool name_ok(const char *s, size_t n, size_t max)
{
    if (n == 0 || n > max)
        return false;
    for (size_t i = 0; i < n; i++)
        if (s[i] <= ' ' || s[i] == '/' || s[i] == 0x7f)
            return false;
    return !(n == 1 && s[0] == '.') && !(n == 2 && s[0] == '.' && s[1] == '.');
}

/* Components of a sysfs path: each a name, none "." or "..". */
static bool components_ok(const char *p, size_t *ret_n)
{
    size_t n = 0;
    while (*p) {
        size_t w = strcspn(p, "/");
        if (!name_ok(p, w, 255))
            return false;
        n++;
        p += w;
        if (*p == '/' && !*++p)
            return false;
    }
    *ret_n = n;
    return n > 0;
}

static int parse_path(const char *w, struct devpolicy_rule *r, char **ret_err)
{
    _cleanup_free_ char *sys = host_kernel_path(HOST_SYS, ""); /* sysfs, with its slash */
    size_t ls = strlen(sys), n = 0;
    _cleanup_free_ char *rel = NULL;
    if (strncmp(w, sys, ls) == 0) {
        rel = xstrdup(w + ls);
        for (size_t l = strlen(rel); l > 0 && rel[l - 1] == '/'; l--)
            rel[l - 1] = '\0';
    }
    _cleanup_free_ char *what = shown(w);
    if (!rel || !components_ok(rel, &n)) {
        *ret_err = xasprintf("path '%s' is not a sysfs device path (want %sdevices/... or "
                             "%sbus/BUS/devices/NAME)",
                             what, sys, sys);
        return -EINVAL;
    }
    char bus[65], name[257];
    if (strncmp(rel, "devices/", 8) == 0) {
        r->match = DEVPOLICY_MATCH_PATH;
        r->value = TAKE_PTR(rel);
    } else if (n == 4 && sscanf(rel, "bus/%64[^/]/devices/%256[^/]", bus, name) == 2) {
        r->match = DEVPOLICY_MATCH_BUSDEV;
        r->value = xasprintf("%s/%s", bus, name);
    } else {
        *ret_err = xasprintf("path '%s' is neither under %sdevices/ nor a %sbus/BUS/devices/NAME "
                             "link",
                             what, sys, sys);
        return -EINVAL;
    }
    return 0;
}

static int parse_match(const char *w, struct devpolicy_rule *r, char **ret_err)
{
    _cleanup_free_ char *what = shown(w);
    if (strncmp(w, "driver=", 7) == 0) {
        if (!name_ok(w + 7, strlen(w + 7), 64)) {
            *ret_err = xasprintf(
                "driver name '%s' is empty, longer than 64 bytes, or has a space or a '/'",
                what + 7);
            return -EINVAL;
        }
        r->match = DEVPOLICY_MATCH_DRIVER;
        r->value = xstrdup(w + 7);
        return 0;
    }
    if (strncmp(w, "path=", 5) == 0)
        return parse_path(w + 5, r, ret_err);
    if (parse_id(w, r) == 0)
        return 0;
    *ret_err = xasprintf("unknown match '%s' (want VENDOR:DEVICE in hex such as 8086:1533 or "
                         "046d:*, driver=NAME or path=SYSFS-PATH)",
                         what);
    return -EINVAL;
}

/* One line, comment stripped; words split in place. 0 and no rule for a
 * blank line, 1 for a rule. */
static int parse_line(char *line, struct devpolicy_rule *r, char **ret_err)
{
    char *hash = strchr(line, '#');
    if (hash)
        *hash = '\0';
    char *words[3] = {0};
    size_t n = 0;
    for (char *save = NULL, *w = strtok_r(line, " \t\r\f\v", &save); w;
         w = strtok_r(NULL, " \t\r\f\v", &save))
        if (n < ARRAY_SIZE(words))
            words[n++] = w;
        else
            n++;
    if (n == 0)
        return 0;
    if (streq(words[0], "deny"))
        r->action = DEVPOLICY_DENY;
    else if (streq(words[0], "allow"))
        r->action = DEVPOLICY_ALLOW;
    else {
        _cleanup_free_ char *what = shown(words[0]);
        *ret_err = xasprintf("unknown action '%s' (want deny or allow)", what);
        return -EINVAL;
    }
    if (n != 2) {
        *ret_err =
            xasprintf("want '%s' and one match, found %zu word%s", words[0], n, n == 1 ? "" : "s");
        return -EINVAL;
    }
    int rc = parse_match(words[1], r, ret_err);
    if (rc < 0)
        return rc;
    r->text = xstrdup(words[1]);
    return 1;
}

static void rule_free(struct devpolicy_rule *r)
{
    free(r->value);
    free(r->text);
    free(r->origin);
}

void devpolicy_free(struct devpolicy *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->n; i++)
        rule_free(&p->v[i]);
    free(p->v);
    free(p->file);
    free(p);
}

int devpolicy_parse(const char *text, size_t len, const char *file, struct devpolicy **ret,
                    char **ret_err)
{
    struct devpolicy *p = xcalloc(1, sizeof(*p));
    p->file = xstrdup(file);
    size_t cap = 0, pos = 0;
    for (unsigned lineno = 1; pos < len; lineno++) {
        const char *nl = memchr(text + pos, '\n', len - pos);
        size_t end = nl ? (size_t)(nl - text) : len;
        bool binary = memchr(text + pos, '\0', end - pos) != NULL;
        _cleanup_free_ char *line = xmalloc(end - pos + 1);
        memcpy(line, text + pos, end - pos);
        line[end - pos] = '\0';
        pos = end + 1;
        struct devpolicy_rule r = {0};
        char *err = binary ? xstrdup("a NUL byte: not a text file") : NULL;
        int rc = binary ? -EINVAL : parse_line(line, &r, &err);
        if (rc < 0) {
            rule_free(&r);
            *ret_err = xasprintf("%s:%u: %s", file, lineno, err);
            free(err);
            devpolicy_free(p);
            return rc;
        }
        if (rc == 0)
            continue;
        r.origin = xasprintf("%s:%u", file, lineno);
        p->v = grow_array(p->v, sizeof(*p->v), p->n, &cap);
        p->v[p->n++] = r;
    }
    *ret = p;
    return 0;
}

int devpolicy_load(const char *confdir, struct devpolicy **ret, char **ret_err)
{
    _cleanup_free_ char *path = xasprintf("%s/%s", confdir, DEVPOLICY_FILE);
    FILE *f = fopen(path, "re");
    if (!f && errno == ENOENT) {
        *ret = NULL;
        return 0;
    }
    if (!f) {
        int err = errno;
        *ret_err = xasprintf("cannot read %s: %s", path, strerror(err));
        return -err;
    }
    _cleanup_free_ char *buf = xmalloc(DEVPOLICY_MAX_BYTES + 1);
    size_t n = fread(buf, 1, DEVPOLICY_MAX_BYTES + 1, f);
    int rerr = ferror(f) ? errno : 0;
    fclose(f);
    if (rerr) {
        *ret_err = xasprintf("cannot read %s: %s", path, strerror(rerr));
        return -rerr;
    }
    if (n > DEVPOLICY_MAX_BYTES) {
        *ret_err = xasprintf("%s: larger than %d KiB", path, DEVPOLICY_MAX_BYTES / 1024);
        return -EFBIG;
    }
    return devpolicy_parse(buf, n, path, ret, ret_err);
}
