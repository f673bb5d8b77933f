/* Fuzz target: devpolicy_parse() (sense/devpolicy.h), the device
 * allow/deny file devices.conf, then devpolicy_find() and the built-in
 * deny list over a small fixed set of devices.
 *
 * The input is passed with its exact length and no NUL (ASan catches a
 * read past the end). Refused: -EINVAL, ret untouched, one error naming
 * "fuzz.conf:LINE: " on one line without control bytes. Accepted: every rule is well formed (ids in
 * range, paths relative to /sys without "." or ".." components), and the rules written back as
 * "ACTION MATCH" lines parse to the same rules (a round trip). */
#include <errno.h>

#include "fuzz.h"
#include "sense/devices.h"
#include "sense/devpolicy.h"

#define FILE_NAME "fuzz.conf"

static void check_error(int r, struct devpolicy *p, char *err)
{
    FUZZ_CHECK(r == -EINVAL);
    FUZZ_CHECK(p == (struct devpolicy *)0x1);
    FUZZ_CHECK(err && strncmp(err, FILE_NAME ":", strlen(FILE_NAME ":")) == 0);
    const char *q = err + strlen(FILE_NAME ":");
    FUZZ_CHECK(*q >= '1' && *q <= '9');
    while (*q >= '0' && *q <= '9')
        q++;
    FUZZ_CHECK(q[0] == ':' && q[1] == ' ' && q[2]);
    for (const char *c = err; *c; c++) /* one clean line: no control bytes */
        FUZZ_CHECK((unsigned char)*c >= ' ' && *c != 0x7f);
    free(err);
}

static void check_rule(const struct devpolicy_rule *r)
{
    FUZZ_CHECK(r->action == DEVPOLICY_DENY || r->action == DEVPOLICY_ALLOW);
    FUZZ_CHECK(r->text && r->text[0] && !strpbrk(r->text, " \t\n#"));
    FUZZ_CHECK(r->origin && strncmp(r->origin, FILE_NAME ":", strlen(FILE_NAME ":")) == 0);
    switch (r->match) {
    case DEVPOLICY_MATCH_ID:
        FUZZ_CHECK(r->vendor >= -1 && r->vendor <= 0xffff);
        FUZZ_CHECK(r->device >= -1 && r->device <= 0xffff);
        FUZZ_CHECK(r->value == NULL);
        break;
    case DEVPOLICY_MATCH_DRIVER:
        FUZZ_CHECK(r->value && r->value[0] && !strchr(r->value, '/'));
        break;
    case DEVPOLICY_MATCH_PATH:
        FUZZ_CHECK(r->value && strncmp(r->value, "devices/", 8) == 0);
        FUZZ_CHECK(!strstr(r->value, "//") && r->value[strlen(r->value) - 1] != '/');
        FUZZ_CHECK(!strstr(r->value, "/../") && !strstr(r->value, "/./"));
        break;
    case DEVPOLICY_MATCH_BUSDEV:
        FUZZ_CHECK(r->value && strchr(r->value, '/') && !strchr(strchr(r->value, '/') + 1, '/'));
        break;
    default:
        FUZZ_CHECK(!"unknown match kind");
    }
}

static void round_trip(const struct devpolicy *p)
{
    size_t cap = 1;
    for (size_t i = 0; i < p->n; i++)
        cap += strlen(p->v[i].text) + 8;
    char *text = malloc(cap), *w = text;
    if (!text)
        abort();
    for (size_t i = 0; i < p->n; i++)
        w += sprintf(w, "%s %s\n", p->v[i].action == DEVPOLICY_DENY ? "deny" : "allow",
                     p->v[i].text);
    struct devpolicy *q = NULL;
    char *err = NULL;
    FUZZ_CHECK(devpolicy_parse(text, (size_t)(w - text), FILE_NAME, &q, &err) == 0);
    FUZZ_CHECK(q->n == p->n);
    for (size_t i = 0; i < p->n; i++) {
        const struct devpolicy_rule *a = &p->v[i], *b = &q->v[i];
        FUZZ_CHECK(a->action == b->action && a->match == b->match);
        FUZZ_CHECK(a->vendor == b->vendor && a->device == b->device);
        FUZZ_CHECK((!a->value && !b->value) ||
                   (a->value && b->value && !strcmp(a->value, b->value)));
    }
    devpolicy_free(q);
    free(text);
}

/* A USB device with a listed interface, a PCI NIC and a driverless one. */
static void match_some(const struct devpolicy *p)
{
    struct device_info dev[] = {
        {.bus = "pci",
         .name = "0000:03:00.0",
         .path = "devices/pci0000:00/0000:03:00.0",
         .driver = "igb",
         .kind = DEV_KIND_PCI,
         .class_code = 0x020000,
         .vendor = 0x8086,
         .device = 0x1533,
         .iface_class = -1},
        {.bus = "usb",
         .name = "1-3",
         .path = "devices/pci0000:00/0000:00:14.0/usb1/1-3",
         .driver = "usb",
         .kind = DEV_KIND_USB_DEVICE,
         .class_code = 0,
         .vendor = 0x8087,
         .device = 0x0a2b,
         .iface_class = 0x01},
        {.bus = "usb",
         .name = "1-3:1.0",
         .path = "devices/pci0000:00/0000:00:14.0/usb1/1-3/1-3:1.0",
         .driver = "btusb",
         .kind = DEV_KIND_USB_INTERFACE,
         .class_code = 0xe0,
         .vendor = -1,
         .device = -1,
         .iface_class = -1},
        {.bus = "platform",
         .name = "x",
         .path = NULL,
         .kind = DEV_KIND_OTHER,
         .class_code = -1,
         .vendor = -1,
         .device = -1,
         .iface_class = -1},
    };
    struct devices_sample s = {.n = sizeof(dev) / sizeof(dev[0]), .dev = dev};
    for (size_t i = 0; i < s.n; i++) {
        const struct devpolicy_rule *d = devpolicy_find(p, &s, &dev[i], DEVPOLICY_DENY);
        const struct devpolicy_rule *a = devpolicy_find(p, &s, &dev[i], DEVPOLICY_ALLOW);
        FUZZ_CHECK(!d || (d >= p->v && d < p->v + p->n && d->action == DEVPOLICY_DENY));
        FUZZ_CHECK(!a || (a >= p->v && a < p->v + p->n && a->action == DEVPOLICY_ALLOW));
        char *why = NULL;
        const char *tag = devpolicy_builtin_deny(&s, &dev[i], &why);
        FUZZ_CHECK(!tag == !why);
        FUZZ_CHECK(!why || strncmp(why, "built-in deny: ", 15) == 0);
        free(why);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct devpolicy *p = (struct devpolicy *)0x1;
    char *err = NULL;
    int r = devpolicy_parse((const char *)data, size, FILE_NAME, &p, &err);
    if (r < 0) {
        check_error(r, p, err);
        return 0;
    }
    FUZZ_CHECK(r == 0 && p && p != (struct devpolicy *)0x1 && err == NULL);
    FUZZ_CHECK(p->file && !strcmp(p->file, FILE_NAME));
    for (size_t i = 0; i < p->n; i++)
        check_rule(&p->v[i]);
    round_trip(p);
    match_some(p);
    devpolicy_free(p);
    return 0;
}
