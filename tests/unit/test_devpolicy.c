/* The device policy: devices.conf parsing and errors, the built-in deny
 * list, and the verdicts under user allow/deny rules (sense/devpolicy.h,
 * sense/devsafety.h). */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* cmocka.h needs stdarg, stddef, stdint and setjmp first */
#include <cmocka.h>

#include "base/util.h"
#include "sense/devices.h"
#include "sense/devpolicy.h"
#include "sense/devsafety.h"
#include "sense/sampler.h" /* sample_free() */
#include "tree.h"
#include "tune/plan.h"
#include "tune/profile.h"

#define PCI0      "devices/pci0000:00"
#define XHCI      PCI0 "/0000:00:14.0"
#define ROOT_PART PCI0 "/0000:00:17.0/ata1/host0/target0:0:0/0:0:0:0/block/sda/sda2"

/* ---- a small tree ---- */

static void rpm(const char *root, const char *dir, const char *control)
{
    char p[512];
    const char *files[][2] = {
        {"control", control},
        {"runtime_status", "active"},
        {"runtime_active_time", "5000"},
        {"runtime_suspended_time", "0"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(files); i++) {
        snprintf(p, sizeof(p), "sys/%s/power/%s", dir, files[i][0]);
        tree_write(root, p, "%s\n", files[i][1]);
    }
}

static void link_bus(const char *root, const char *bus, const char *path)
{
    char p[1024], t[1024];
    snprintf(p, sizeof(p), "sys/bus/%s/devices/%s", bus, strrchr(path, '/') + 1);
    snprintf(t, sizeof(t), "../../../%s", path);
    tree_symlink(root, p, t);
}

static void driver(const char *root, const char *bus, const char *path, const char *drv)
{
    char p[1024], t[1024];
    snprintf(p, sizeof(p), "sys/%s/driver", path);
    snprintf(t, sizeof(t), "../../../../bus/%s/drivers/%s", bus, drv);
    tree_symlink(root, p, t);
}

static void pci(const char *root, const char *path, const char *cls, const char *vd,
                const char *drv)
{
    char p[512];
    snprintf(p, sizeof(p), "sys/%s/class", path);
    tree_write(root, p, "%s\n", cls);
    snprintf(p, sizeof(p), "sys/%s/vendor", path);
    tree_write(root, p, "0x%.4s\n", vd);
    snprintf(p, sizeof(p), "sys/%s/device", path);
    tree_write(root, p, "0x%s\n", vd + 5);
    link_bus(root, "pci", path);
    if (drv)
        driver(root, "pci", path, drv);
    rpm(root, path, "on");
}

/* A USB device (vd "vvvv:pppp") with one interface of class icls. */
static void usb(const char *root, const char *path, const char *dcls, const char *vd,
                const char *icls, const char *idrv, bool iface_rpm)
{
    char p[1024], ip[512];
    snprintf(p, sizeof(p), "sys/%s/bDeviceClass", path);
    tree_write(root, p, "%s\n", dcls);
    snprintf(p, sizeof(p), "sys/%s/idVendor", path);
    tree_write(root, p, "%.4s\n", vd);
    snprintf(p, sizeof(p), "sys/%s/idProduct", path);
    tree_write(root, p, "%s\n", vd + 5);
    link_bus(root, "usb", path);
    driver(root, "usb", path, "usb");
    rpm(root, path, "on");
    snprintf(ip, sizeof(ip), "%s/%s:1.0", path, strrchr(path, '/') + 1);
    snprintf(p, sizeof(p), "sys/%s/bInterfaceClass", ip);
    tree_write(root, p, "%s\n", icls);
    link_bus(root, "usb", ip);
    if (idrv)
        driver(root, "usb", ip, idrv);
    if (iface_rpm)
        rpm(root, ip, "on");
}

/* Root on AHCI, default route on e1000e, a virtio disk, a keyboard, a USB
 * stick, two igb NICs (one armed for wake-on-LAN), a Bluetooth dongle, a
 * USB sound card and printer, an Intel ME and a nouveau GPU. */
static char *make_root(void)
{
    char *root = tree_new();
    pci(root, XHCI, "0x0c0330", "8086:a36d", "xhci_hcd");
    pci(root, PCI0 "/0000:00:17.0", "0x010601", "8086:a352", "ahci");
    pci(root, PCI0 "/0000:00:1f.6", "0x020000", "8086:15bb", "e1000e");
    pci(root, PCI0 "/0000:00:1c.0/0000:03:00.0", "0x020000", "8086:1533", "igb");
    pci(root, PCI0 "/0000:00:1c.1/0000:04:00.0", "0x020000", "8086:1533", "igb");
    tree_write(root, "sys/" PCI0 "/0000:00:1c.1/0000:04:00.0/power/wakeup", "enabled\n");
    pci(root, PCI0 "/0000:00:05.0", "0x010000", "1af4:1042", "virtio-pci");
    pci(root, PCI0 "/0000:00:16.0", "0x078000", "8086:a360", "mei_me");
    pci(root, PCI0 "/0000:00:01.0/0000:01:00.0", "0x030000", "10de:1c82", "nouveau");

    usb(root, XHCI "/usb1/1-1", "00", "046d:c31c", "03", "usbhid", false);
    usb(root, XHCI "/usb1/1-2", "00", "0781:5567", "08", "usb-storage", false);
    usb(root, XHCI "/usb1/1-3", "e0", "8087:0a2b", "e0", "btusb", true);
    usb(root, XHCI "/usb1/1-4", "00", "0d8c:0014", "01", "snd-usb-audio", false);
    usb(root, XHCI "/usb1/1-5", "00", "03f0:0c17", "07", "usblp", false);
    /* autosuspend delays: the stick uses 2 s; a card reader is allowed to
     * suspend (control auto) but a negative delay keeps it on */
    tree_write(root, "sys/" XHCI "/usb1/1-2/power/autosuspend_delay_ms", "2000\n");
    usb(root, XHCI "/usb1/1-6", "00", "0bda:0129", "08", "rtsx_usb", false);
    tree_write(root, "sys/" XHCI "/usb1/1-6/power/control", "auto\n");
    tree_write(root, "sys/" XHCI "/usb1/1-6/power/autosuspend_delay_ms", "-1\n");

    tree_write(root, "sys/" ROOT_PART "/dev", "8:2\n");
    tree_symlink(root, "sys/dev/block/8:2", "../../" ROOT_PART);
    tree_write(root, "proc/self/mountinfo",
               "27 1 8:2 / / rw,relatime shared:1 - ext4 /dev/sda2 rw\n");
    tree_write(root, "sys/" PCI0 "/0000:00:1f.6/net/eno1/address", "00:11:22:33:44:55\n");
    tree_symlink(root, "sys/class/net/eno1", "../../" PCI0 "/0000:00:1f.6/net/eno1");
    tree_write(
        root, "proc/net/route",
        "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n"
        "eno1\t00000000\t0102A8C0\t0003\t0\t0\t100\t00000000\t0\t0\t0\n");
    return root;
}

struct fx {
    char *root;
    struct host *h;
    struct sample *s;
};

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));
    f->root = make_root();
    assert_int_equal(host_open(f->root, &f->h), 0);
    f->s = calloc(1, sizeof(*f->s));
    assert_int_equal(devices_sampler.collect(f->h, NULL, f->s), 0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    sample_free(f->s);
    host_close(f->h);
    tree_free(f->root);
    free(f);
    return 0;
}

static struct devpolicy *parse_ok(const char *text)
{
    struct devpolicy *p = NULL;
    char *err = NULL;
    int r = devpolicy_parse(text, strlen(text), "/etc/watt/devices.conf", &p, &err);
    if (r < 0)
        fail_msg("unexpected error: %s", err);
    return p;
}

static char *parse_err(const char *text)
{
    struct devpolicy *p = (struct devpolicy *)0x1;
    char *err = NULL;
    int r = devpolicy_parse(text, strlen(text), "d.conf", &p, &err);
    assert_int_equal(r, -EINVAL);
    assert_ptr_equal(p, (struct devpolicy *)0x1); /* untouched */
    assert_non_null(err);
    return err;
}

/* Verdicts of every device under policy text (NULL: built-in only). */
struct judged {
    struct device_candidate *v;
    size_t n;
    struct devpolicy *p;
};

static struct judged judge(const struct fx *f, const char *text)
{
    struct judged j = {.p = text ? parse_ok(text) : NULL};
    j.n = devices_assess_policy(f->s->devices, NULL, j.p, &j.v);
    return j;
}

static void judged_free(struct judged *j)
{
    device_candidates_free(j->v, j->n);
    devpolicy_free(j->p);
}

static const struct device_candidate *dev(const struct judged *j, const char *name)
{
    for (size_t i = 0; i < j->n; i++)
        if (streq(j->v[i].dev->name, name))
            return &j->v[i];
    fail_msg("no device %s", name);
    return NULL;
}

static void assert_verdict(const struct judged *j, const char *name, enum dev_verdict v,
                           const char *tag)
{
    const struct device_candidate *c = dev(j, name);
    if (c->verdict != v || !streq(c->tag, tag))
        fail_msg("%s: verdict %d tag '%s' (%s), want %d '%s'", name, c->verdict, c->tag, c->reason,
                 v, tag);
}

/* ---- parsing ---- */

static void test_parse(void **state)
{
    (void)state;
    struct devpolicy *p = parse_ok("# watt device policy\n"
                                   "\n"
                                   "deny driver=btusb   # drops its link\n"
                                   "  allow\t8086:1533\n"
                                   "deny 046D:*\r\n"
                                   "deny *:0a2b\n"
                                   "deny path=/sys/devices/pci0000:00/0000:00:1c.0/\n"
                                   "allow path=/sys/bus/usb/devices/1-2");
    assert_int_equal(p->n, 6);
    assert_string_equal(p->file, "/etc/watt/devices.conf");
    assert_int_equal(p->v[0].action, DEVPOLICY_DENY);
    assert_int_equal(p->v[0].match, DEVPOLICY_MATCH_DRIVER);
    assert_string_equal(p->v[0].value, "btusb");
    assert_string_equal(p->v[0].origin, "/etc/watt/devices.conf:3");
    char *name = devpolicy_rule_name(&p->v[0]);
    assert_string_equal(name, "/etc/watt/devices.conf:3 (driver=btusb)");
    free(name);
    assert_int_equal(p->v[1].action, DEVPOLICY_ALLOW);
    assert_int_equal(p->v[1].match, DEVPOLICY_MATCH_ID);
    assert_int_equal(p->v[1].vendor, 0x8086);
    assert_int_equal(p->v[1].device, 0x1533);
    assert_int_equal(p->v[2].vendor, 0x046d);
    assert_int_equal(p->v[2].device, -1);
    assert_string_equal(p->v[2].origin, "/etc/watt/devices.conf:5");
    assert_int_equal(p->v[3].vendor, -1);
    assert_int_equal(p->v[3].device, 0x0a2b);
    assert_int_equal(p->v[4].match, DEVPOLICY_MATCH_PATH);
    assert_string_equal(p->v[4].value, "devices/pci0000:00/0000:00:1c.0");
    assert_int_equal(p->v[5].match, DEVPOLICY_MATCH_BUSDEV);
    assert_string_equal(p->v[5].value, "usb/1-2");
    assert_string_equal(p->v[5].text, "path=/sys/bus/usb/devices/1-2");
    devpolicy_free(p);

    p = parse_ok("");
    assert_int_equal(p->n, 0);
    devpolicy_free(p);
    p = parse_ok("# only a comment\n\n   \n");
    assert_int_equal(p->n, 0);
    devpolicy_free(p);
}

static void test_parse_errors(void **state)
{
    (void)state;
    static const struct {
        const char *text, *want;
    } cases[] = {
        {"deny 8086:1533\n\ndney 8086:1533\n",
         "d.conf:3: unknown action 'dney' (want deny or allow)"},
        {"deny\n", "d.conf:1: want 'deny' and one match, found 1 word"},
        {"allow 8086:1533 8086:1534\n", "d.conf:1: want 'allow' and one match, found 3 words"},
        {"deny 8086\n", "d.conf:1: unknown match '8086'"},
        {"deny 8086:15330\n", "d.conf:1: unknown match '8086:15330'"},
        {"deny 8086:1533:1\n", "d.conf:1: unknown match"},
        {"deny 80g6:1533\n", "d.conf:1: unknown match"},
        {"deny :1533\n", "d.conf:1: unknown match"},
        {"deny driver=\n", "d.conf:1: driver name '' is empty"},
        {"deny driver=a/b\n", "d.conf:1: driver name 'a/b'"},
        {"deny path=devices/pci0000:00\n", "d.conf:1: path 'devices/pci0000:00' is not a sysfs"},
        {"deny path=/sys/devices/../class\n", "d.conf:1: path"},
        {"deny path=/sys/devices//x\n", "d.conf:1: path"},
        {"deny path=/sys/\n", "d.conf:1: path"},
        {"deny path=/sys/class/net/eth0\n", "d.conf:1: path '/sys/class/net/eth0' is neither"},
        {"deny path=/sys/bus/pci/devices\n", "d.conf:1: path"},
        {"deny path=/sys/bus/pci/devices/a/b\n", "d.conf:1: path"},
        {"deny x\nallow 8086:1533\n", "d.conf:1: unknown match 'x'"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        char *err = parse_err(cases[i].text);
        if (strncmp(err, cases[i].want, strlen(cases[i].want)) != 0)
            fail_msg("case %zu: got '%s', want '%s...'", i, err, cases[i].want);
        free(err);
    }
    /* a NUL byte in the middle */
    struct devpolicy *p = (struct devpolicy *)0x1;
    char *err = NULL;
    assert_int_equal(devpolicy_parse("deny 8086:1533\nde\0ny 1:2\n", 25, "d.conf", &p, &err),
                     -EINVAL);
    assert_string_equal(err, "d.conf:2: a NUL byte: not a text file");
    free(err);
}

static void test_load(void **state)
{
    (void)state;
    char *dir = tree_new();
    struct devpolicy *p = (struct devpolicy *)0x1;
    char *err = NULL;
    assert_int_equal(devpolicy_load(dir, &p, &err), 0); /* missing: built-in rules */
    assert_null(p);
    tree_write(dir, "devices.conf", "deny driver=btusb\nallow 8086:1533\n");
    assert_int_equal(devpolicy_load(dir, &p, &err), 0);
    assert_int_equal(p->n, 2);
    char want[4200];
    snprintf(want, sizeof(want), "%s/devices.conf", dir);
    assert_string_equal(p->file, want);
    snprintf(want, sizeof(want), "%s/devices.conf:2", dir);
    assert_string_equal(p->v[1].origin, want);
    devpolicy_free(p);

    tree_write(dir, "devices.conf", "deny driver=btusb\nallow 8086\n");
    p = (struct devpolicy *)0x1;
    assert_int_equal(devpolicy_load(dir, &p, &err), -EINVAL);
    snprintf(want, sizeof(want), "%s/devices.conf:2: unknown match '8086'", dir);
    assert_true(strncmp(err, want, strlen(want)) == 0);
    assert_ptr_equal(p, (struct devpolicy *)0x1);
    free(err);

    char *big = malloc(DEVPOLICY_MAX_BYTES + 2);
    memset(big, '#', DEVPOLICY_MAX_BYTES + 1);
    big[DEVPOLICY_MAX_BYTES + 1] = '\0';
    tree_write(dir, "devices.conf", "%s", big);
    free(big);
    assert_int_equal(devpolicy_load(dir, &p, &err), -EFBIG);
    assert_non_null(strstr(err, "larger than 64 KiB"));
    free(err);
    tree_free(dir);
}

/* ---- verdicts ---- */

static void test_builtin(void **state)
{
    struct fx *f = *state;
    struct judged j = judge(f, NULL);
    assert_verdict(&j, "0000:00:17.0", DEV_VERDICT_UNSAFE, "root fs");
    assert_verdict(&j, "0000:00:1f.6", DEV_VERDICT_UNSAFE, "default NIC");
    assert_verdict(&j, "0000:00:05.0", DEV_VERDICT_UNSAFE, "virtio");
    assert_verdict(&j, "1-1", DEV_VERDICT_UNSAFE, "HID");
    assert_verdict(&j, "0000:00:14.0", DEV_VERDICT_UNSAFE, "input below");
    assert_verdict(&j, "0000:04:00.0", DEV_VERDICT_UNSAFE, "wakeup");
    assert_verdict(&j, "0000:03:00.0", DEV_VERDICT_SAFE, "safe");
    assert_verdict(&j, "1-2", DEV_VERDICT_SAFE, "safe");
    assert_verdict(&j, "1-3", DEV_VERDICT_SAFE, "safe"); /* btusb: not denied by default */
    assert_verdict(&j, "1-4", DEV_VERDICT_UNSAFE, "USB audio");
    assert_string_equal(dev(&j, "1-4")->reason,
                        "built-in deny: USB audio: USB audio class (01): sound drops or clicks "
                        "on every resume");
    assert_verdict(&j, "1-5", DEV_VERDICT_UNSAFE, "printer");
    assert_verdict(&j, "0000:00:16.0", DEV_VERDICT_UNSAFE, "ME interface");
    assert_verdict(&j, "0000:01:00.0", DEV_VERDICT_UNSAFE, "GPU driver");
    assert_non_null(strstr(dev(&j, "0000:01:00.0")->reason, "built-in deny: GPU driver (nouveau)"));
    for (size_t i = 0; i < j.n; i++)
        assert_null(j.v[i].rule);

    /* the old entry points are the policy ones with no user file */
    struct device_candidate *v;
    size_t n = devices_assess(f->s->devices, NULL, &v);
    assert_int_equal(n, j.n);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(v[i].verdict, j.v[i].verdict);
        assert_string_equal(v[i].reason, j.v[i].reason);
    }
    device_candidates_free(v, n);
    judged_free(&j);
}

static void test_user_rules(void **state)
{
    struct fx *f = *state;
    struct judged j = judge(f, "deny driver=btusb\n" /* 1: via the interface */
                               "allow 8086:1533\n"   /* 2: lifts wakeup of 04:00.0 */
                               "deny path=/sys/bus/usb/devices/1-2\n");
    assert_verdict(&j, "1-3", DEV_VERDICT_UNSAFE, "denied");
    assert_string_equal(dev(&j, "1-3")->reason,
                        "denied by /etc/watt/devices.conf:1 (driver=btusb)");
    assert_ptr_equal(dev(&j, "1-3")->rule, &j.p->v[0]);
    assert_verdict(&j, "1-3:1.0", DEV_VERDICT_UNSAFE, "denied"); /* the interface itself */
    assert_verdict(&j, "0000:04:00.0", DEV_VERDICT_SAFE, "safe");
    assert_string_equal(dev(&j, "0000:04:00.0")->reason,
                        "safe to autosuspend: wakeup enabled, allowed by "
                        "/etc/watt/devices.conf:2 (8086:1533)");
    assert_ptr_equal(dev(&j, "0000:04:00.0")->rule, &j.p->v[1]);
    assert_verdict(&j, "0000:03:00.0", DEV_VERDICT_SAFE, "safe"); /* allow changes nothing */
    assert_string_equal(dev(&j, "0000:03:00.0")->reason,
                        "safe to autosuspend: nothing depends on it staying on");
    assert_verdict(&j, "1-2", DEV_VERDICT_UNSAFE, "denied");
    assert_string_equal(dev(&j, "1-2")->reason,
                        "denied by /etc/watt/devices.conf:3 (path=/sys/bus/usb/devices/1-2)");
    judged_free(&j);

    /* deny wins over allow, in either order */
    j = judge(f, "allow 8086:1533\ndeny driver=igb\n");
    assert_verdict(&j, "0000:04:00.0", DEV_VERDICT_UNSAFE, "denied");
    assert_verdict(&j, "0000:03:00.0", DEV_VERDICT_UNSAFE, "denied");
    assert_string_equal(dev(&j, "0000:03:00.0")->reason,
                        "denied by /etc/watt/devices.conf:2 (driver=igb)");
    judged_free(&j);

    /* a path denies the device and everything below it, not its siblings */
    j = judge(f, "deny path=/sys/devices/pci0000:00/0000:00:1c.0\n");
    assert_verdict(&j, "0000:03:00.0", DEV_VERDICT_UNSAFE, "denied");
    assert_verdict(&j, "0000:04:00.0", DEV_VERDICT_UNSAFE, "wakeup");
    judged_free(&j);
    j = judge(f, "deny path=/sys/devices/pci0000:00/0000:00:1c\n"); /* a prefix, not a parent */
    assert_verdict(&j, "0000:03:00.0", DEV_VERDICT_SAFE, "safe");
    judged_free(&j);

    /* vendor wildcards; a USB interface matches its device's ids */
    j = judge(f, "deny 0781:*\ndeny *:0a2b\n");
    assert_verdict(&j, "1-2", DEV_VERDICT_UNSAFE, "denied");
    assert_verdict(&j, "1-3", DEV_VERDICT_UNSAFE, "denied");
    assert_verdict(&j, "1-3:1.0", DEV_VERDICT_UNSAFE, "denied");
    assert_string_equal(dev(&j, "1-3:1.0")->reason, "denied by /etc/watt/devices.conf:2 (*:0a2b)");
    assert_verdict(&j, "0000:03:00.0", DEV_VERDICT_SAFE, "safe");
    judged_free(&j);
}

/* Allow lifts wakeup only: the hard rules and the built-in list stand. */
static void test_allow_cannot_override(void **state)
{
    struct fx *f = *state;
    struct judged j = judge(f, "allow 1af4:*\n"
                               "allow 8086:*\n"
                               "allow 046d:c31c\n"
                               "allow 0d8c:0014\n"
                               "allow driver=nouveau\n"
                               "allow path=/sys/devices/pci0000:00\n");
    assert_verdict(&j, "0000:00:05.0", DEV_VERDICT_UNSAFE, "virtio");
    assert_verdict(&j, "0000:00:17.0", DEV_VERDICT_UNSAFE, "root fs");
    assert_verdict(&j, "0000:00:1f.6", DEV_VERDICT_UNSAFE, "default NIC");
    assert_verdict(&j, "1-1", DEV_VERDICT_UNSAFE, "HID");
    assert_verdict(&j, "0000:00:14.0", DEV_VERDICT_UNSAFE, "input below");
    assert_verdict(&j, "1-4", DEV_VERDICT_UNSAFE, "USB audio");
    assert_verdict(&j, "0000:01:00.0", DEV_VERDICT_UNSAFE, "GPU driver");
    assert_verdict(&j, "0000:00:16.0", DEV_VERDICT_UNSAFE, "ME interface");
    assert_verdict(&j, "0000:04:00.0", DEV_VERDICT_SAFE, "safe");
    for (size_t i = 0; i < j.n; i++)
        if (j.v[i].verdict == DEV_VERDICT_UNSAFE)
            assert_null(j.v[i].rule);
    judged_free(&j);

    /* and a deny of a hard-rule device keeps the hard rule's reason */
    j = judge(f, "deny 1af4:*\n");
    assert_verdict(&j, "0000:00:05.0", DEV_VERDICT_UNSAFE, "virtio");
    assert_null(dev(&j, "0000:00:05.0")->rule);
    judged_free(&j);
}

/* What a runtime_pm = auto profile claims, whatever control is now. */
static void test_safe_when_on(void **state)
{
    struct fx *f = *state;
    struct devpolicy *p = parse_ok("allow 8086:1533\ndeny 0781:*\n");
    static const struct {
        const char *name;
        bool builtin, policy;
    } cases[] = {
        {"1-6", true, true},           /* control auto, negative delay */
        {"0000:03:00.0", true, true},  /* on, safe */
        {"0000:04:00.0", false, true}, /* wakeup: allowed */
        {"1-2", true, false},          /* denied by 0781:* */
        {"0000:00:05.0", false, false},
        {"0000:00:17.0", false, false},
        {"1-1", false, false},
        {"1-4", false, false},
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        const struct device_info *d = NULL;
        for (size_t k = 0; k < f->s->devices->n; k++)
            if (streq(f->s->devices->dev[k].name, cases[i].name))
                d = &f->s->devices->dev[k];
        assert_non_null(d);
        if (devsafety_safe_when_on(f->s->devices, d, NULL) != cases[i].builtin ||
            devsafety_safe_when_on(f->s->devices, d, p) != cases[i].policy)
            fail_msg("%s: safe when on, want %d/%d", cases[i].name, cases[i].builtin,
                     cases[i].policy);
    }
    devpolicy_free(p);
}

/* Candidates (what `watt tune` plans from) and the full assessment agree. */
static void test_candidates(void **state)
{
    struct fx *f = *state;
    struct devpolicy *p = parse_ok("deny driver=btusb\nallow 8086:1533\n");
    struct device_candidate *all, *cand;
    size_t n = devices_assess_policy(f->s->devices, NULL, p, &all);
    size_t k = devices_candidates_policy(f->s->devices, NULL, p, &cand);
    size_t safe_all = 0, safe_cand = 0;
    for (size_t i = 0; i < n; i++)
        safe_all += all[i].verdict == DEV_VERDICT_SAFE;
    for (size_t i = 0; i < k; i++)
        safe_cand += cand[i].verdict == DEV_VERDICT_SAFE;
    assert_int_equal(safe_all, 4); /* 03:00.0, 04:00.0, 1-2, 1-6 */
    assert_int_equal(safe_cand, safe_all);
    device_candidates_free(all, n);
    device_candidates_free(cand, k);
    devpolicy_free(p);
}

/* ---- the plan: tune_plan_devices() writes exactly the SAFE candidates ---- */

static struct profile *profile_of(const char *runtime_pm, const char *delay)
{
    struct profile *p = calloc(1, sizeof(*p));
    p->name = strdup("t");
    p->origin = strdup("t.conf");
    p->v = calloc(2, sizeof(*p->v));
    const char *keys[] = {"runtime_pm", "autosuspend_delay_ms"}, *vals[] = {runtime_pm, delay};
    for (size_t i = 0; i < 2; i++) {
        if (!vals[i])
            continue;
        p->v[p->n++] = (struct profile_value){
            .section = strdup("devices"),
            .key = strdup(keys[i]),
            .value = strdup(vals[i]),
            .origin = xasprintf("t.conf:%zu", i + 2),
        };
    }
    return p;
}

static const struct tune_change *change(const struct tune_plan *pl, const char *dev_path,
                                        const char *file)
{
    char want[1024];
    snprintf(want, sizeof(want), "%s/power/%s", dev_path, file);
    for (size_t i = 0; i < pl->n; i++)
        if (streq(pl->v[i].path, want))
            return &pl->v[i];
    return NULL;
}

/* Every SAFE candidate is in the plan and nothing else is. */
static void assert_plan_is_safe_set(const struct fx *f, const struct devpolicy *pol,
                                    const struct tune_plan *pl)
{
    struct device_candidate *v;
    size_t n = devices_assess_policy(f->s->devices, NULL, pol, &v), safe = 0;
    for (size_t i = 0; i < n; i++) {
        const char *p = v[i].dev->path;
        bool planned = change(pl, p, "control") || change(pl, p, "autosuspend_delay_ms");
        if (planned != (v[i].verdict == DEV_VERDICT_SAFE))
            fail_msg("%s: planned %d, verdict %s", v[i].dev->name, planned, v[i].tag);
        safe += planned;
    }
    for (size_t i = 0; i < pl->n; i++) /* no write outside a device's power/ */
        assert_non_null(strstr(pl->v[i].path, "/power/"));
    assert_true(safe > 0);
    device_candidates_free(v, n);
}

static void test_plan(void **state)
{
    struct fx *f = *state;
    struct profile *p = profile_of("auto", "1500");
    struct tune_plan pl = {0};
    char *err = NULL;
    assert_int_equal(tune_plan_devices(f->h, p, NULL, &pl, &err), 0);
    assert_plan_is_safe_set(f, NULL, &pl);
    const struct tune_change *c = change(&pl, XHCI "/usb1/1-2", "control");
    assert_non_null(c);
    assert_int_equal(c->dir, HOST_SYS);
    assert_string_equal(c->old_value, "on");
    assert_string_equal(c->new_value, "auto");
    assert_string_equal(c->knob, "devices.runtime_pm");
    assert_string_equal(c->origin, "t.conf:2");
    assert_non_null(strstr(c->why, "usb 1-2"));
    c = change(&pl, XHCI "/usb1/1-2", "autosuspend_delay_ms");
    assert_non_null(c);
    assert_string_equal(c->old_value, "2000");
    assert_string_equal(c->new_value, "1500");
    assert_string_equal(c->knob, "devices.autosuspend_delay_ms");
    assert_string_equal(c->origin, "t.conf:3");
    /* control already auto: only the delay, which kept it on */
    assert_null(change(&pl, XHCI "/usb1/1-6", "control"));
    c = change(&pl, XHCI "/usb1/1-6", "autosuspend_delay_ms");
    assert_non_null(c);
    assert_string_equal(c->old_value, "-1");
    assert_string_equal(c->new_value, "1500");
    /* never a hard-rule or built-in-denied device */
    assert_null(change(&pl, PCI0 "/0000:00:05.0", "control"));
    assert_null(change(&pl, PCI0 "/0000:00:17.0", "control"));
    assert_null(change(&pl, XHCI "/usb1/1-1", "control"));
    assert_null(change(&pl, XHCI "/usb1/1-4", "control"));
    assert_int_equal(pl.nnotes, 1);
    assert_string_equal(pl.notes[0],
                        "devices.runtime_pm: 10 devices left on: 1 virtio, 1 default NIC, 1 input "
                        "below, 1 ME interface, 1 root fs, 1 GPU driver, 1 wakeup, 1 HID, 1 USB "
                        "audio, 1 printer (see watt report)");
    tune_plan_free(&pl);
    profile_free(p);

    /* under a policy; no delay set: a negative one becomes 2000 ms */
    struct devpolicy *pol = parse_ok("deny driver=btusb\nallow 8086:1533\n");
    p = profile_of("auto", NULL);
    assert_int_equal(tune_plan_devices(f->h, p, pol, &pl, &err), 0);
    assert_plan_is_safe_set(f, pol, &pl);
    assert_non_null(change(&pl, PCI0 "/0000:00:1c.1/0000:04:00.0", "control")); /* allowed */
    assert_null(change(&pl, XHCI "/usb1/1-3", "control"));                      /* denied */
    assert_null(change(&pl, XHCI "/usb1/1-2", "autosuspend_delay_ms"));         /* 2000 already */
    c = change(&pl, XHCI "/usb1/1-6", "autosuspend_delay_ms");
    assert_non_null(c);
    assert_string_equal(c->new_value, "2000");
    assert_string_equal(c->origin, "t.conf:2");
    assert_non_null(strstr(pl.notes[0], "2 denied")); /* 1-3 and its interface */
    tune_plan_free(&pl);
    profile_free(p);
    devpolicy_free(pol);
}

static void test_plan_knobs(void **state)
{
    struct fx *f = *state;
    struct tune_plan pl = {0};
    char *err = NULL;
    /* keep, or unset: nothing, not even a note */
    const char *nothing[][2] = {{"keep", NULL}, {NULL, NULL}, {"", ""}};
    for (size_t i = 0; i < ARRAY_SIZE(nothing); i++) {
        struct profile *p = profile_of(nothing[i][0], nothing[i][1]);
        assert_int_equal(tune_plan_devices(f->h, p, NULL, &pl, &err), 0);
        assert_int_equal(pl.n, 0);
        assert_int_equal(pl.nnotes, 0);
        profile_free(p);
    }
    /* a delay alone: delays of SAFE devices that have one, no control */
    struct profile *p = profile_of("keep", "500");
    assert_int_equal(tune_plan_devices(f->h, p, NULL, &pl, &err), 0);
    assert_int_equal(pl.n, 2); /* 1-2 and 1-6 */
    for (size_t i = 0; i < pl.n; i++) {
        assert_string_equal(pl.v[i].knob, "devices.autosuspend_delay_ms");
        assert_string_equal(pl.v[i].new_value, "500");
    }
    assert_non_null(strstr(pl.notes[0], "devices.autosuspend_delay_ms: 10 devices left on"));
    tune_plan_free(&pl);
    profile_free(p);
    /* bad values name the profile line */
    p = profile_of("sometimes", NULL);
    assert_int_equal(tune_plan_devices(f->h, p, NULL, &pl, &err), -EINVAL);
    assert_string_equal(err, "t.conf:2: devices.runtime_pm 'sometimes': want auto or keep");
    free(err);
    profile_free(p);
    p = profile_of("auto", "2s");
    assert_int_equal(tune_plan_devices(f->h, p, NULL, &pl, &err), -EINVAL);
    assert_non_null(strstr(err, "t.conf:3: devices.autosuspend_delay_ms '2s'"));
    free(err);
    profile_free(p);
    assert_int_equal(pl.n, 0);
}

/* No devices sampler here (no sysfs bus directory): a note, no error. */
static void test_plan_no_sysfs(void **state)
{
    (void)state;
    char *root = tree_new();
    tree_write(root, "proc/self/mountinfo", "%s", "");
    struct host *h;
    assert_int_equal(host_open(root, &h), 0);
    struct profile *p = profile_of("auto", NULL);
    struct tune_plan pl = {0};
    char *err = NULL;
    assert_int_equal(tune_plan_devices(h, p, NULL, &pl, &err), 0);
    assert_int_equal(pl.n, 0);
    assert_int_equal(pl.nnotes, 1);
    assert_non_null(strstr(pl.notes[0], "devices.runtime_pm: skipped"));
    tune_plan_free(&pl);
    profile_free(p);
    host_close(h);
    tree_free(root);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse),
        cmocka_unit_test(test_parse_errors),
        cmocka_unit_test(test_load),
        cmocka_unit_test_setup_teardown(test_builtin, setup, teardown),
        cmocka_unit_test_setup_teardown(test_user_rules, setup, teardown),
        cmocka_unit_test_setup_teardown(test_allow_cannot_override, setup, teardown),
        cmocka_unit_test_setup_teardown(test_candidates, setup, teardown),
        cmocka_unit_test_setup_teardown(test_safe_when_on, setup, teardown),
        cmocka_unit_test_setup_teardown(test_plan, setup, teardown),
        cmocka_unit_test_setup_teardown(test_plan_knobs, setup, teardown),
        cmocka_unit_test(test_plan_no_sysfs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
