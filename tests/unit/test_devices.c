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

#include "base/strbuf.h"
#include "base/util.h"
#include "host/cache.h" /* the cache's age, to be a minute older */
#include "sense/devices.h"
#include "sense/devpolicy.h"
#include "sense/devsafety.h"
#include "sense/sampler.h" /* sample_free(), sense_sample() */
#include "tree.h"

#define PCI0      "devices/pci0000:00"
#define XHCI      PCI0 "/0000:00:14.0"
#define ROOT_PART PCI0 "/0000:00:17.0/ata1/host0/target0:0:0/0:0:0:0/block/sda/sda2"

/* One device's runtime PM files: control, status, active and suspended ms. */
static void rpm(const char *root, const char *dir, const char *control, const char *status,
                unsigned active, unsigned suspended)
{
    char p[512];
#define W(f, ...)                                      \
    snprintf(p, sizeof(p), "sys/%s/power/%s", dir, f); \
    tree_write(root, p, __VA_ARGS__)
    W("control", "%s\n", control);
    W("runtime_status", "%s\n", status);
    W("runtime_active_time", "%u\n", active);
    W("runtime_suspended_time", "%u\n", suspended);
    W("autosuspend_delay_ms", "%s", ""); /* the kernel's EIO, as recorded */
#undef W
}

static void pci(const char *root, const char *path, const char *cls, const char *vendor,
                const char *device, const char *driver)
{
    char p[512], t[512];
    const char *name = strrchr(path, '/') + 1;
    snprintf(p, sizeof(p), "sys/%s/class", path);
    tree_write(root, p, "%s\n", cls);
    snprintf(p, sizeof(p), "sys/%s/vendor", path);
    tree_write(root, p, "%s\n", vendor);
    snprintf(p, sizeof(p), "sys/%s/device", path);
    tree_write(root, p, "%s\n", device);
    snprintf(p, sizeof(p), "sys/bus/pci/devices/%s", name);
    snprintf(t, sizeof(t), "../../../%s", path);
    tree_symlink(root, p, t);
    if (driver) {
        snprintf(p, sizeof(p), "sys/bus/pci/drivers/%s/.keep", driver);
        tree_write(root, p, "%s", "");
        int depth = 0;
        for (const char *c = path; *c; c++)
            depth += *c == '/';
        struct strbuf up = {0};
        for (int i = 0; i <= depth; i++)
            strbuf_append(&up, "../");
        snprintf(p, sizeof(p), "sys/%s/driver", path);
        snprintf(t, sizeof(t), "%sbus/pci/drivers/%s", strbuf_str(&up), driver);
        tree_symlink(root, p, t);
        strbuf_free(&up);
    }
}

static void usb(const char *root, const char *path, const char *cls_file, const char *cls,
                const char *vendor, const char *product)
{
    char p[512], t[512];
    const char *name = strrchr(path, '/') + 1;
    snprintf(p, sizeof(p), "sys/%s/%s", path, cls_file);
    tree_write(root, p, "%s\n", cls);
    if (vendor) {
        snprintf(p, sizeof(p), "sys/%s/idVendor", path);
        tree_write(root, p, "%.4s\n", vendor);
        snprintf(p, sizeof(p), "sys/%s/idProduct", path);
        tree_write(root, p, "%s\n", vendor + 5);
    }
    if (product) {
        snprintf(p, sizeof(p), "sys/%s/product", path);
        tree_write(root, p, "%s\n", product);
    }
    snprintf(p, sizeof(p), "sys/bus/usb/devices/%s", name);
    snprintf(t, sizeof(t), "../../../%s", path);
    tree_symlink(root, p, t);
}

/* A desktop-ish server: host bridge, xHCI with a keyboard and a USB stick,
 * AHCI holding the root filesystem, the default route's NIC, a spare NIC,
 * a NIC armed for wake-on-LAN, a virtio device and an unsupported one. */
static char *make_root(const char *faults)
{
    char *root = tree_new();
    pci(root, PCI0 "/0000:00:00.0", "0x060000", "0x8086", "0x3e0f", NULL);
    rpm(root, PCI0 "/0000:00:00.0", "on", "active", 5000, 0);
    pci(root, XHCI, "0x0c0330", "0x8086", "0xa36d", "xhci_hcd");
    rpm(root, XHCI, "on", "active", 5000, 0);
    pci(root, PCI0 "/0000:00:17.0", "0x010601", "0x8086", "0xa352", "ahci");
    rpm(root, PCI0 "/0000:00:17.0", "on", "active", 5000, 0);
    pci(root, PCI0 "/0000:00:1f.6", "0x020000", "0x8086", "0x15bb", "e1000e");
    rpm(root, PCI0 "/0000:00:1f.6", "on", "active", 5000, 0);
    pci(root, PCI0 "/0000:00:1c.0/0000:03:00.0", "0x020000", "0x8086", "0x1533", "igb");
    rpm(root, PCI0 "/0000:00:1c.0/0000:03:00.0", "on", "active", 5000, 0);
    tree_write(root, "sys/" PCI0 "/0000:00:1c.0/0000:03:00.0/power/wakeup", "disabled\n");
    pci(root, PCI0 "/0000:00:1c.1/0000:04:00.0", "0x020000", "0x8086", "0x1533", "igb");
    rpm(root, PCI0 "/0000:00:1c.1/0000:04:00.0", "on", "active", 5000, 0);
    tree_write(root, "sys/" PCI0 "/0000:00:1c.1/0000:04:00.0/power/wakeup", "enabled\n");
    pci(root, PCI0 "/0000:00:05.0", "0x018000", "0x1af4", "0x1042", "virtio-pci");
    rpm(root, PCI0 "/0000:00:05.0", "on", "active", 5000, 0);

    usb(root, XHCI "/usb1", "bDeviceClass", "09", "1d6b:0002", "xHCI Host Controller");
    rpm(root, XHCI "/usb1", "auto", "active", 4000, 1000);
    usb(root, XHCI "/usb1/1-1", "bDeviceClass", "00", "046d:c31c", "USB Keyboard");
    rpm(root, XHCI "/usb1/1-1", "on", "active", 5000, 0);
    usb(root, XHCI "/usb1/1-1/1-1:1.0", "bInterfaceClass", "03", NULL, NULL);
    tree_symlink(root, "sys/class/input/input3",
                 "../../" XHCI "/usb1/1-1/1-1:1.0/0003:046D:C31C.0001/input/input3");
    char p[512];
    snprintf(p, sizeof(p), "sys/%s/name",
             XHCI "/usb1/1-1/1-1:1.0/0003:046D:C31C.0001/input/input3");
    tree_write(root, p, "Logitech USB Keyboard\n");
    usb(root, XHCI "/usb1/1-2", "bDeviceClass", "00", "0781:5567", "Cruzer Blade");
    rpm(root, XHCI "/usb1/1-2", "on", "active", 5000, 0);
    usb(root, XHCI "/usb1/1-2/1-2:1.0", "bInterfaceClass", "08", NULL, NULL);

    tree_symlink(root, "sys/bus/platform/devices/serial8250",
                 "../../../devices/platform/serial8250");
    tree_write(root, "sys/devices/platform/serial8250/power/control", "auto\n");
    tree_write(root, "sys/devices/platform/serial8250/power/runtime_status", "unsupported\n");

    tree_write(root, "sys/" ROOT_PART "/dev", "8:2\n");
    tree_symlink(root, "sys/dev/block/8:2", "../../" ROOT_PART);
    tree_write(root, "proc/self/mountinfo",
               "22 27 0:21 / /proc rw,relatime - proc proc rw\n"
               "27 1 8:2 / / rw,relatime shared:1 - ext4 /dev/sda2 rw\n"
               "28 27 8:1 / /boot rw,relatime - vfat /dev/sda1 rw\n");
    tree_write(root, "sys/" PCI0 "/0000:00:1f.6/net/eno1/address", "00:11:22:33:44:55\n");
    tree_symlink(root, "sys/class/net/eno1", "../../" PCI0 "/0000:00:1f.6/net/eno1");
    tree_write(
        root, "proc/net/route",
        "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n"
        "eno1\t00000000\t0102A8C0\t0003\t0\t0\t100\t00000000\t0\t0\t0\n"
        "eno1\t0002A8C0\t00000000\t0001\t0\t0\t100\t00FFFFFF\t0\t0\t0\n");
    if (faults)
        tree_write(root, "watt-faults", "%s", faults);
    return root;
}

static struct sample *take(struct host *h)
{
    struct sample *s = calloc(1, sizeof(*s));
    assert_int_equal(devices_sampler.collect(h, NULL, s), 0);
    return s;
}

static const struct device_candidate *find_c(const struct device_candidate *v, size_t n,
                                             const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (streq(v[i].dev->name, name))
            return &v[i];
    fail_msg("no device %s", name);
    return NULL;
}

static bool has_diag(const struct sample *s, const char *where_suffix)
{
    for (size_t i = 0; i < s->diags.n; i++) {
        const char *w = s->diags.v[i].where;
        size_t lw = strlen(w), ls = strlen(where_suffix);
        if (lw >= ls && streq(w + lw - ls, where_suffix))
            return true;
    }
    return false;
}

static void test_reads_devices(void **state)
{
    char *root = make_root(NULL);
    struct host *h;
    assert_int_equal(host_open(root, &h), 0);
    void *st = NULL;
    char *why = NULL;
    assert_int_equal(devices_sampler.probe(h, &st, &why), 1);
    struct sample *s = take(h);
    const struct devices_sample *ds = s->devices;
    /* 7 PCI, 3 USB devices with power/control, 1 platform; USB interfaces
     * without power/control are not listed. */
    assert_int_equal(ds->n, 11);
    const struct device_info *x = devices_find(ds, "pci", "0000:00:14.0");
    assert_non_null(x);
    assert_string_equal(x->path, XHCI);
    assert_string_equal(x->driver, "xhci_hcd");
    assert_int_equal(x->class_code, 0x0c0330);
    assert_string_equal(device_class_name(x), "USB xHCI");
    assert_int_equal(x->vendor, 0x8086);
    assert_int_equal(x->control, DEV_CONTROL_ON);
    assert_int_equal(x->status, DEV_STATUS_ACTIVE);
    assert_int_equal(x->active_ms, 5000);
    assert_int_equal(x->suspended_ms, 0);
    assert_false(x->has_autosuspend);
    assert_int_equal(x->wakeup, DEV_WAKEUP_ABSENT);
    assert_null(devices_find(ds, "pci", "0000:00:00.0")->driver);
    const struct device_info *stick = devices_find(ds, "usb", "1-2");
    assert_int_equal(stick->kind, DEV_KIND_USB_DEVICE);
    assert_int_equal(stick->vendor, 0x0781);
    assert_int_equal(stick->device, 0x5567);
    assert_string_equal(stick->product, "Cruzer Blade");
    assert_int_equal(devices_find(ds, "usb", "usb1")->class_code, 0x09);
    assert_int_equal(devices_find(ds, "platform", "serial8250")->status, DEV_STATUS_UNSUPPORTED);
    assert_int_equal(devices_find(ds, "pci", "0000:04:00.0")->wakeup, DEV_WAKEUP_ENABLED);
    /* the root chain and the default route */
    assert_string_equal(ds->rootfs, "/dev/sda2 on /");
    assert_null(ds->rootfs_why);
    assert_string_equal(ds->default_nic, "eno1");
    assert_int_equal(ds->nanchor, 2);
    assert_string_equal(ds->anchor[0].path, ROOT_PART);
    /* the keyboard: its HID interface and its input node */
    assert_int_equal(ds->ninput, 2);
    /* EIO-as-empty autosuspend_delay_ms and absent wakeup are normal */
    assert_int_equal(s->diags.n, 0);
    sample_free(s);
    host_close(h);
    tree_free(root);
}

static void test_verdicts(void **state)
{
    char *root = make_root(NULL);
    struct host *h;
    assert_int_equal(host_open(root, &h), 0);
    struct sample *s = take(h);
    struct device_candidate *v;
    size_t n = devices_assess(s->devices, NULL, &v);
    assert_int_equal(n, 11);
    const struct device_candidate *c;

    c = find_c(v, n, "0000:00:00.0");
    assert_int_equal(c->verdict, DEV_VERDICT_NOT_CANDIDATE);
    assert_string_equal(c->tag, "bridge");
    assert_non_null(strstr(c->reason, "bridge"));

    c = find_c(v, n, "0000:00:17.0"); /* AHCI under the root partition */
    assert_int_equal(c->verdict, DEV_VERDICT_UNSAFE);
    assert_string_equal(c->reason, "holds the root filesystem (/dev/sda2 on /)");

    c = find_c(v, n, "0000:00:1f.6");
    assert_int_equal(c->verdict, DEV_VERDICT_UNSAFE);
    assert_string_equal(c->reason, "NIC of the default route (eno1)");

    c = find_c(v, n, "1-1"); /* the keyboard */
    assert_int_equal(c->verdict, DEV_VERDICT_UNSAFE);
    assert_string_equal(c->reason, "HID input device: suspending it drops keystrokes");

    c = find_c(v, n, "0000:00:14.0"); /* the keyboard's controller */
    assert_int_equal(c->verdict, DEV_VERDICT_UNSAFE);
    assert_non_null(strstr(c->reason, "input device"));

    c = find_c(v, n, "0000:00:05.0");
    assert_int_equal(c->verdict, DEV_VERDICT_UNSAFE);
    assert_string_equal(c->tag, "virtio");
    assert_non_null(strstr(c->reason, "virtio device"));

    c = find_c(v, n, "0000:04:00.0");
    assert_int_equal(c->verdict, DEV_VERDICT_UNSAFE);
    assert_string_equal(c->tag, "wakeup");

    c = find_c(v, n, "1-2"); /* the USB stick with control=on */
    assert_int_equal(c->verdict, DEV_VERDICT_SAFE);
    assert_true(c->never_suspends);
    assert_true(c->saving_w > 0.05 && c->saving_w < 1.0);
    assert_true(c->resume_ms >= 10 && c->resume_ms <= 100);
    assert_string_equal(c->action, "write auto to power/control");

    c = find_c(v, n, "0000:03:00.0"); /* spare NIC, wakeup disabled */
    assert_int_equal(c->verdict, DEV_VERDICT_SAFE);
    assert_true(c->saving_lo_w >= 1.0 && c->saving_hi_w <= 2.0);
    assert_float_equal(c->resume_ms, 10, 1e-9);

    c = find_c(v, n, "usb1");
    assert_int_equal(c->verdict, DEV_VERDICT_SUSPENDS);
    assert_float_equal(c->suspended_pct, 20.0, 1e-9);
    assert_true(isnan(c->saving_w));

    c = find_c(v, n, "serial8250");
    assert_int_equal(c->verdict, DEV_VERDICT_NOT_CANDIDATE);
    assert_string_equal(c->tag, "unsupported");
    device_candidates_free(v, n);

    /* candidates: the never-suspending devices with runtime PM */
    n = devices_candidates(s->devices, NULL, &v);
    assert_int_equal(n, 9);
    size_t safe = 0;
    for (size_t i = 0; i < n; i++)
        safe += v[i].verdict == DEV_VERDICT_SAFE;
    assert_int_equal(safe, 2);
    device_candidates_free(v, n);
    sample_free(s);
    host_close(h);
    tree_free(root);
}

/* Root on device-mapper: dm-0's slaves lead to the real disk. */
static void test_root_on_dm(void **state)
{
    char *root = make_root(NULL);
    tree_write(root, "proc/self/mountinfo", "27 1 253:0 / / rw - xfs /dev/mapper/vg-root rw\n");
    tree_write(root, "sys/devices/virtual/block/dm-0/dev", "253:0\n");
    tree_symlink(root, "sys/dev/block/253:0", "../../devices/virtual/block/dm-0");
    tree_symlink(
        root, "sys/devices/virtual/block/dm-0/slaves/sda2",
        "../../../../pci0000:00/0000:00:17.0/ata1/host0/target0:0:0/0:0:0:0/block/sda/sda2");
    struct host *h;
    assert_int_equal(host_open(root, &h), 0);
    struct sample *s = take(h);
    assert_string_equal(s->devices->rootfs, "/dev/mapper/vg-root on /");
    struct device_candidate *v;
    size_t n = devices_assess(s->devices, NULL, &v);
    const struct device_candidate *c = find_c(v, n, "0000:00:17.0");
    assert_int_equal(c->verdict, DEV_VERDICT_UNSAFE);
    assert_string_equal(c->tag, "root fs");
    device_candidates_free(v, n);
    sample_free(s);
    host_close(h);
    tree_free(root);
}

/* Root on NVMe with native multipath: the namespace head lives under
 * devices/virtual/, and only its multipath/ links lead to the controller. */
static void test_root_on_nvme_multipath(void **state)
{
    char *root = make_root(NULL);
    pci(root, PCI0 "/0000:00:1d.0/0000:41:00.0", "0x010802", "0x144d", "0xa808", "nvme");
    rpm(root, PCI0 "/0000:00:1d.0/0000:41:00.0", "on", "active", 5000, 0);
#define HEAD "devices/virtual/nvme-subsystem/nvme-subsys0/nvme0n1"
    tree_write(root, "sys/" HEAD "/dev", "259:0\n");
    tree_write(root, "sys/" HEAD "/nvme0n1p2/partition", "2\n");
    tree_symlink(root, "sys/dev/block/259:2", "../../" HEAD "/nvme0n1p2");
    tree_symlink(root, "sys/" HEAD "/multipath/nvme0c0n1",
                 "../../../../../pci0000:00/0000:00:1d.0/0000:41:00.0/nvme/nvme0/nvme0c0n1");
#undef HEAD
    tree_write(root, "proc/self/mountinfo", "27 1 259:2 / / rw - xfs /dev/nvme0n1p2 rw\n");
    struct host *h;
    assert_int_equal(host_open(root, &h), 0);
    struct sample *s = take(h);
    struct device_candidate *v;
    size_t n = devices_assess(s->devices, NULL, &v);
    const struct device_candidate *c = find_c(v, n, "0000:41:00.0");
    assert_int_equal(c->verdict, DEV_VERDICT_UNSAFE);
    assert_string_equal(c->reason, "holds the root filesystem (/dev/nvme0n1p2 on /)");
    /* the SATA controller no longer holds the root: a candidate */
    assert_int_equal(find_c(v, n, "0000:00:17.0")->verdict, DEV_VERDICT_SAFE);
    device_candidates_free(v, n);
    sample_free(s);
    host_close(h);
    tree_free(root);
}

/* Without mountinfo or routes, every storage and network device might be
 * the one: none of them is safe. */
static void test_unknown_root_and_route(void **state)
{
    char *root = make_root(NULL);
    char p[4200];
    snprintf(p, sizeof(p), "%s/proc/self/mountinfo", root);
    unlink(p);
    snprintf(p, sizeof(p), "%s/proc/net/route", root);
    unlink(p);
    struct host *h;
    assert_int_equal(host_open(root, &h), 0);
    struct sample *s = take(h);
    assert_non_null(s->devices->rootfs_why);
    assert_non_null(s->devices->default_nic_why);
    struct device_candidate *v;
    size_t n = devices_assess(s->devices, NULL, &v);
    assert_int_equal(find_c(v, n, "0000:00:17.0")->verdict, DEV_VERDICT_UNSAFE);
    assert_int_equal(find_c(v, n, "0000:03:00.0")->verdict, DEV_VERDICT_UNSAFE);
    assert_string_equal(find_c(v, n, "0000:03:00.0")->tag, "NIC?");
    assert_string_equal(find_c(v, n, "1-2")->tag, "root fs?"); /* USB mass storage */
    assert_int_equal(find_c(v, n, "0000:04:00.0")->verdict, DEV_VERDICT_UNSAFE);
    device_candidates_free(v, n);
    sample_free(s);
    host_close(h);
    tree_free(root);
}

/* Unreadable, garbage and missing files: absent with a reason; the EIO of
 * autosuspend_delay_ms is normal and gives no problem. */
static void test_bad_files(void **state)
{
    char *root = make_root("sys/bus/pci/devices/0000:03:00.0/power/runtime_status EACCES\n"
                           "sys/bus/pci/devices/0000:00:14.0/power/autosuspend_delay_ms EIO\n"
                           "sys/bus/pci/devices/0000:00:17.0/class =0xzz\n"
                           "sys/bus/usb/devices/1-2/power/runtime_suspended_time =12ab\n");
    tree_write(root, "sys/" PCI0 "/0000:00:1f.6/power/control", "sometimes\n");
    char p[4200];
    snprintf(p, sizeof(p), "%s/sys/%s/power/runtime_active_time", root, PCI0 "/0000:00:05.0");
    unlink(p);
    struct host *h;
    assert_int_equal(host_open(root, &h), 0);
    struct sample *s = take(h);
    const struct devices_sample *ds = s->devices;
    assert_int_equal(devices_find(ds, "pci", "0000:03:00.0")->status, DEV_STATUS_UNKNOWN);
    assert_true(has_diag(s, "0000:03:00.0/power/runtime_status"));
    assert_int_equal(devices_find(ds, "pci", "0000:00:17.0")->class_code, -1);
    assert_true(has_diag(s, "0000:00:17.0/class"));
    assert_int_equal(devices_find(ds, "usb", "1-2")->suspended_ms, VAL_NONE);
    assert_true(has_diag(s, "1-2/power/runtime_suspended_time"));
    assert_int_equal(devices_find(ds, "pci", "0000:00:1f.6")->control, DEV_CONTROL_UNKNOWN);
    assert_true(has_diag(s, "0000:00:1f.6/power/control"));
    assert_int_equal(devices_find(ds, "pci", "0000:00:05.0")->active_ms, VAL_NONE);
    assert_true(has_diag(s, "0000:00:05.0/power/runtime_active_time"));
    assert_false(has_diag(s, "autosuspend_delay_ms"));
    assert_int_equal(s->diags.n, 5);

    struct device_candidate *v;
    size_t n = devices_assess(ds, NULL, &v);
    /* status unknown: never a SAFE verdict, and a reason */
    const struct device_candidate *c = find_c(v, n, "0000:03:00.0");
    assert_int_equal(c->verdict, DEV_VERDICT_NOT_CANDIDATE);
    assert_string_equal(c->tag, "unknown");
    c = find_c(v, n, "1-2");
    assert_int_equal(c->verdict, DEV_VERDICT_SAFE); /* control=on still decides */
    assert_true(isnan(c->suspended_pct));
    c = find_c(v, n, "0000:00:1f.6"); /* control unknown, suspended 0: never suspends */
    assert_int_equal(c->verdict, DEV_VERDICT_UNSAFE);
    device_candidates_free(v, n);
    sample_free(s);
    host_close(h);
    tree_free(root);
}

/* Over an interval: suspended time that grows means it suspends; a device
 * gone in the second sample is simply absent; one that appeared, or whose
 * counters went backwards (re-added), is judged on the later sample. */
static void test_two_samples(void **state)
{
    char *root = make_root(NULL);
    /* a device with control=auto that is held active by its driver */
    pci(root, PCI0 "/0000:00:1d.0", "0x040300", "0x8086", "0xa348", "snd_hda_intel");
    rpm(root, PCI0 "/0000:00:1d.0", "auto", "active", 3000, 200);
    struct host *h;
    assert_int_equal(host_open(root, &h), 0);
    struct sample *a = take(h);
    /* between the samples: the stick is unplugged, the audio device's
     * suspended time does not move, the spare NIC is hot-plugged */
    char p[4200];
    snprintf(p, sizeof(p), "%s/sys/bus/usb/devices/1-2", root);
    assert_int_equal(unlink(p), 0);
    rpm(root, PCI0 "/0000:00:1d.0", "auto", "active", 4000, 200);
    pci(root, PCI0 "/0000:00:1c.2/0000:05:00.0", "0x020000", "0x8086", "0x1533", "igb");
    rpm(root, PCI0 "/0000:00:1c.2/0000:05:00.0", "auto", "active", 10, 0);
    /* the controller was re-added: its counters restart */
    rpm(root, XHCI, "on", "active", 100, 0);
    struct sample *b = take(h);
    assert_null(devices_find(b->devices, "usb", "1-2"));

    struct device_candidate *v;
    size_t n = devices_assess(b->devices, a->devices, &v);
    const struct device_candidate *c = find_c(v, n, "0000:00:1d.0");
    assert_true(c->over_interval);
    assert_true(c->never_suspends);
    assert_float_equal(c->suspended_pct, 0.0, 1e-9);
    assert_string_equal(c->tag, "held");
    c = find_c(v, n, "0000:05:00.0"); /* new: since-boot figures */
    assert_false(c->over_interval);
    assert_true(c->never_suspends);
    assert_string_equal(c->tag, "held");
    c = find_c(v, n, "0000:00:14.0"); /* counters went backwards */
    assert_false(c->over_interval);
    assert_float_equal(c->suspended_pct, 0.0, 1e-9);
    c = find_c(v, n, "usb1"); /* active, suspended time did not move */
    assert_true(c->over_interval);
    assert_true(c->never_suspends);
    device_candidates_free(v, n);

    /* the first sample alone: usb1 suspends since boot */
    n = devices_assess(a->devices, NULL, &v);
    assert_false(find_c(v, n, "usb1")->never_suspends);
    assert_false(find_c(v, n, "0000:00:1d.0")->never_suspends);
    device_candidates_free(v, n);
    sample_free(a);
    sample_free(b);
    host_close(h);
    tree_free(root);
}

static void test_parsers(void **state)
{
    int x;
    assert_int_equal(devices_parse_hex("0x0c0330\n", 9, &x), 0);
    assert_int_equal(x, 0x0c0330);
    assert_int_equal(devices_parse_hex("09\n", 3, &x), 0);
    assert_int_equal(x, 9);
    assert_int_equal(devices_parse_hex("046d", 4, &x), 0);
    assert_int_equal(x, 0x046d);
    assert_int_equal(devices_parse_hex("", 0, &x), -EINVAL);
    assert_int_equal(devices_parse_hex("0x", 2, &x), -EINVAL);
    assert_int_equal(devices_parse_hex("12g", 3, &x), -EINVAL);
    assert_int_equal(devices_parse_hex("0xffffffffff", 12, &x), -ERANGE);

    unsigned maj, min;
    char *src;
    const char *mi = "27 1 254:0 / / rw,relatime - ext4 /dev/vda rw\n"
                     "40 27 0:45 / / rw - overlay overlay rw,lowerdir=/a\n";
    assert_int_equal(devices_parse_mountinfo_root(mi, strlen(mi), &maj, &min, &src), 0);
    assert_int_equal(maj, 0); /* the last mount on / is the visible one */
    assert_string_equal(src, "overlay");
    free(src);
    assert_int_equal(devices_parse_mountinfo_root(mi, 45, &maj, &min, &src), 0);
    assert_int_equal(maj, 254);
    assert_string_equal(src, "/dev/vda");
    free(src);
    const char *bad = "27 1 254:0 / / rw\n"; /* truncated: no separator */
    assert_int_equal(devices_parse_mountinfo_root(bad, strlen(bad), &maj, &min, &src), -ENOENT);
    assert_int_equal(devices_parse_mountinfo_root("", 0, &maj, &min, &src), -ENOENT);

    char *iface;
    const char *rt = "Iface\tDestination\tGateway\tFlags\tRefCnt\tUse\tMetric\tMask\n"
                     "eth1\t00000000\t0102A8C0\t0002\t0\t0\t0\t00000000\n" /* down */
                     "eth0\t00000000\t010200C0\t0003\t0\t0\t0\t00000000\n";
    assert_int_equal(devices_parse_route_default(rt, strlen(rt), &iface), 0);
    assert_string_equal(iface, "eth0");
    free(iface);
    assert_int_equal(devices_parse_route_default(rt, 60, &iface), -ENOENT);
    const char *r6 = "fe800000000000000000000000000000 40 00000000000000000000000000000000 00 "
                     "00000000000000000000000000000000 00000100 00000002 00000000 00000001 eth0\n"
                     "00000000000000000000000000000000 00 00000000000000000000000000000000 00 "
                     "00000000000000000000000000000000 ffffffff 00000001 00000000 00200200 lo\n"
                     "00000000000000000000000000000000 00 00000000000000000000000000000000 00 "
                     "fd000000000000000000000000000001 00000400 00000002 00000000 00000003 ens5\n";
    assert_int_equal(devices_parse_ipv6_route_default(r6, strlen(r6), &iface), 0);
    assert_string_equal(iface, "ens5");
    free(iface);

    char *r = devices_resolve_link("bus/pci/devices", "../../../devices/pci0000:00/0000:00:14.0");
    assert_string_equal(r, "devices/pci0000:00/0000:00:14.0");
    free(r);
    r = devices_resolve_link("devices/virtual/block/dm-0/slaves", "../../../../pci0000:00/./x");
    assert_string_equal(r, "devices/pci0000:00/x");
    free(r);
    assert_null(devices_resolve_link("class/net", "../../../../etc"));
    assert_null(devices_resolve_link("class/net", "/sys/devices/x"));
    assert_int_equal(dev_status_parse("suspending"), DEV_STATUS_SUSPENDING);
    assert_int_equal(dev_status_parse("Active"), DEV_STATUS_UNKNOWN);
}

/* ---- USB devices with several interfaces, laid out as real kernels do:
 * the interfaces have no power/control (pm_runtime_no_callbacks), so they
 * are not devices of the sample, only of their USB device. ---- */

/* Interface NAME:1.N of the USB device at path, class cls, driver drv. */
static void usb_iface(const char *root, const char *path, unsigned n, const char *cls,
                      const char *drv)
{
    char ip[512], p[1024];
    snprintf(ip, sizeof(ip), "%s/%s:1.%u", path, strrchr(path, '/') + 1, n);
    usb(root, ip, "bInterfaceClass", cls, NULL, NULL);
    snprintf(p, sizeof(p), "sys/%s/power/runtime_status", ip);
    tree_write(root, p, "%s\n", drv ? "active" : "suspended");
    if (drv) {
        char t[256];
        snprintf(p, sizeof(p), "sys/%s/driver", ip);
        snprintf(t, sizeof(t), "../../../../../../bus/usb/drivers/%s", drv);
        tree_symlink(root, p, t);
    }
}

static void usb_dev(const char *root, const char *name, const char *dcls, const char *vd)
{
    char path[256];
    snprintf(path, sizeof(path), XHCI "/usb1/%s", name);
    usb(root, path, "bDeviceClass", dcls, vd, NULL);
    rpm(root, path, "on", "active", 5000, 0);
    char p[512];
    snprintf(p, sizeof(p), "sys/%s/driver", path);
    tree_symlink(root, p, "../../../../../bus/usb/drivers/usb");
}

#define USB1 XHCI "/usb1"

/* A headset (HID on 0, audio on 1-2), a Bluetooth adapter (btusb on both
 * interfaces), a webcam (video 0-1, audio 2-3, bDeviceClass ef), an HP
 * printer (vendor-specific 0, printer 1), a dual serial adapter, and a
 * device with more interface entries than USB allows. No input nodes:
 * the HID rule must come from the interfaces alone. */
static char *make_usb_root(void)
{
    char *root = tree_new();
    pci(root, XHCI, "0x0c0330", "0x8086", "0xa36d", "xhci_hcd");
    rpm(root, XHCI, "on", "active", 5000, 0);
    usb(root, USB1, "bDeviceClass", "09", "1d6b:0002", NULL);
    rpm(root, USB1, "auto", "active", 4000, 1000);
    usb_dev(root, "1-1", "00", "046d:0a44");
    usb_iface(root, USB1 "/1-1", 0, "01", "snd-usb-audio");
    usb_iface(root, USB1 "/1-1", 1, "01", "snd-usb-audio");
    usb_iface(root, USB1 "/1-1", 3, "03", "usbhid");
    usb_dev(root, "1-2", "e0", "8087:0029");
    usb_iface(root, USB1 "/1-2", 0, "e0", "btusb");
    usb_iface(root, USB1 "/1-2", 1, "e0", "btusb");
    usb_dev(root, "1-3", "ef", "046d:082d");
    usb_iface(root, USB1 "/1-3", 0, "0e", "uvcvideo");
    usb_iface(root, USB1 "/1-3", 1, "0e", "uvcvideo");
    usb_iface(root, USB1 "/1-3", 2, "01", "snd-usb-audio");
    usb_iface(root, USB1 "/1-3", 3, "01", "snd-usb-audio");
    usb_dev(root, "1-4", "00", "03f0:5c11");
    usb_iface(root, USB1 "/1-4", 0, "ff", NULL);
    usb_iface(root, USB1 "/1-4", 1, "07", "usblp");
    usb_iface(root, USB1 "/1-4", 2, "ff", NULL);
    usb_dev(root, "1-5", "00", "0403:6010");
    usb_iface(root, USB1 "/1-5", 0, "ff", "ftdi_sio");
    usb_iface(root, USB1 "/1-5", 1, "ff", "ftdi_sio");
    usb_dev(root, "1-6", "00", "1234:5678");
    for (unsigned i = 0; i < 40; i++)
        usb_iface(root, USB1 "/1-6", i, i == 7 ? "zz" : "ff", NULL);
    /* no mountinfo or routes would make every storage or network device
     * unsafe: give the root a disk elsewhere and no default route */
    tree_write(root, "sys/" ROOT_PART "/dev", "8:2\n");
    tree_symlink(root, "sys/dev/block/8:2", "../../" ROOT_PART);
    tree_write(root, "proc/self/mountinfo", "27 1 8:2 / / rw - ext4 /dev/sda2 rw\n");
    tree_write(
        root, "proc/net/route",
        "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n");
    return root;
}

static void test_usb_interfaces(void **state)
{
    char *root = make_usb_root();
    struct host *h;
    assert_int_equal(host_open(root, &h), 0);
    struct sample *s = take(h);
    const struct devices_sample *ds = s->devices;
    assert_int_equal(ds->n, 8);      /* xHCI, usb1, six devices: no interface is listed */
    assert_int_equal(ds->ninput, 1); /* the headset's HID interface */

    const struct device_info *hs = devices_find(ds, "usb", "1-1");
    assert_int_equal(hs->niface, 3);
    assert_string_equal(hs->iface[0].name, "1-1:1.0");
    assert_int_equal(hs->iface[0].cls, 0x01);
    assert_string_equal(hs->iface[0].driver, "snd-usb-audio");
    assert_string_equal(hs->iface[2].name, "1-1:1.3");
    assert_int_equal(hs->iface[2].cls, 0x03);
    assert_string_equal(hs->iface[2].driver, "usbhid");
    assert_int_equal(hs->iface_class, 0x01);
    assert_true(device_usb_class(hs, 0x03));
    assert_true(device_has_driver(hs, "usbhid"));
    assert_true(device_has_driver(hs, "usb")); /* its own */
    assert_false(device_has_driver(hs, "btusb"));
    assert_false(device_has_driver(hs, NULL));

    const struct device_info *pr = devices_find(ds, "usb", "1-4");
    assert_int_equal(pr->niface, 3);
    assert_null(pr->iface[0].driver);                      /* nothing bound to the scan channel */
    assert_string_equal(device_class_name(pr), "printer"); /* not "vendor" */
    assert_string_equal(device_class_name(devices_find(ds, "usb", "1-3")), "video");
    assert_string_equal(device_class_name(devices_find(ds, "usb", "1-5")), "vendor");

    /* at most USB_MAXINTERFACES, in natural order; a garbage class is -1
     * and said once */
    const struct device_info *many = devices_find(ds, "usb", "1-6");
    assert_int_equal(many->niface, DEV_MAX_IFACES);
    assert_string_equal(many->iface[2].name, "1-6:1.2");
    assert_string_equal(many->iface[10].name, "1-6:1.10");
    assert_int_equal(many->iface[7].cls, -1);
    assert_int_equal(s->diags.n, 1);
    assert_true(has_diag(s, "1-6:1.7/bInterfaceClass"));

    struct device_candidate *v;
    size_t n = devices_assess(ds, NULL, &v);
    assert_string_equal(find_c(v, n, "1-1")->tag, "HID");       /* HID on interface 3 */
    assert_string_equal(find_c(v, n, "1-2")->tag, "safe");      /* btusb: no built-in rule */
    assert_string_equal(find_c(v, n, "1-3")->tag, "USB audio"); /* audio on interface 2 */
    assert_string_equal(find_c(v, n, "1-4")->tag, "printer");   /* printer on interface 1 */
    assert_string_equal(find_c(v, n, "1-5")->tag, "safe");
    device_candidates_free(v, n);

    /* driver= matches a driver bound to any interface, not only the first */
    const char *conf = "deny driver=btusb\ndeny driver=ftdi_sio\n";
    struct devpolicy *pol;
    char *err = NULL;
    assert_int_equal(devpolicy_parse(conf, strlen(conf), "d.conf", &pol, &err), 0);
    n = devices_assess_policy(ds, NULL, pol, &v);
    assert_string_equal(find_c(v, n, "1-2")->reason, "denied by d.conf:1 (driver=btusb)");
    assert_string_equal(find_c(v, n, "1-5")->reason, "denied by d.conf:2 (driver=ftdi_sio)");
    device_candidates_free(v, n);
    devpolicy_free(pol);
    sample_free(s);
    host_close(h);
    tree_free(root);
}

/* The HID rule from the interface list alone: a sample with no input
 * nodes at all (class/input unreadable, the HID interface not listed). */
static void test_usb_hid_any_interface(void **state)
{
    struct usb_iface ifs[3] = {{.name = (char *)"1-1:1.0", .cls = 0x01},
                               {.name = (char *)"1-1:1.1", .cls = 0x01},
                               {.name = (char *)"1-1:1.2", .cls = 0x03}};
    struct device_info d = {.bus = (char *)"usb",
                            .name = (char *)"1-1",
                            .path = (char *)USB1 "/1-1",
                            .driver = (char *)"usb",
                            .kind = DEV_KIND_USB_DEVICE,
                            .class_code = 0,
                            .vendor = 0x046d,
                            .device = 0x0a44,
                            .iface_class = 0x01,
                            .iface = ifs,
                            .niface = 3,
                            .control = DEV_CONTROL_ON,
                            .status = DEV_STATUS_ACTIVE,
                            .active_ms = 5000,
                            .suspended_ms = 0,
                            .wakeup = DEV_WAKEUP_ABSENT};
    struct devices_sample s = {
        .n = 1, .dev = &d, .rootfs = (char *)"/dev/sda2 on /", .no_default_route = true};
    const char *tag;
    char *why;
    assert_int_equal(devsafety_judge(&s, &d, 1, &tag, &why), DEV_VERDICT_UNSAFE);
    assert_string_equal(tag, "HID"); /* before the built-in audio rule */
    free(why);
    ifs[2].cls = 0xff; /* no HID: the audio interfaces decide */
    assert_int_equal(devsafety_judge(&s, &d, 1, &tag, &why), DEV_VERDICT_UNSAFE);
    assert_string_equal(tag, "USB audio");
    free(why);
    ifs[0].cls = ifs[1].cls = 0xff;
    assert_int_equal(devsafety_judge(&s, &d, 1, &tag, &why), DEV_VERDICT_UNSAFE);
    assert_string_equal(tag, "USB audio"); /* iface_class: a sample built by hand */
    free(why);
    d.iface_class = 0xff;
    assert_int_equal(devsafety_judge(&s, &d, 1, &tag, &why), DEV_VERDICT_SAFE);
    free(why);
    (void)state;
}

/* node_exporter's real tree: a bridge, an NVMe disk and a WoL-armed NIC,
 * without mountinfo or routes. */
static void test_node_exporter(void **state)
{
    const char *dir = getenv("WATT_FIXTURES");
    if (!dir)
        skip();
    char root[4096];
    snprintf(root, sizeof(root), "%s/node_exporter", dir);
    struct host *h;
    if (host_open(root, &h) < 0)
        skip();
    struct sample *s = take(h);
    assert_int_equal(s->devices->n, 3);
    struct device_candidate *v;
    size_t n = devices_assess(s->devices, NULL, &v);
    const struct device_candidate *c = find_c(v, n, "0000:00:02.1");
    assert_string_equal(c->tag, "bridge");
    assert_int_equal(c->dev->autosuspend_delay_ms, 100);
    c = find_c(v, n, "0000:01:00.0");
    assert_string_equal(device_class_name(c->dev), "NVMe");
    assert_string_equal(c->dev->runtime_enabled, "forbidden");
    assert_false(c->dev->has_autosuspend);            /* recorded EIO: empty */
    assert_int_equal(c->verdict, DEV_VERDICT_UNSAFE); /* the root's device is unknown */
    c = find_c(v, n, "0000:45:00.0");
    assert_int_equal(c->verdict, DEV_VERDICT_UNSAFE);
    assert_string_equal(c->tag, "NIC?"); /* no routing table; it is also WoL-armed */
    assert_int_equal(c->dev->wakeup, DEV_WAKEUP_ENABLED);
    device_candidates_free(v, n);
    sample_free(s);
    host_close(h);
}

/* The generated machines (tests/fixtures/gen/mkfixture.py). */
static void test_generated_fixtures(void **state)
{
    const char *dir = getenv("WATT_FIXTURES");
    char root[4096];
    struct host *h;
    snprintf(root, sizeof(root), "%s/intel-2s", dir ? dir : "");
    if (!dir || host_open(root, &h) < 0)
        skip();
    struct sample *s = take(h);
    struct device_candidate *v;
    size_t n = devices_assess(s->devices, NULL, &v);
    assert_string_equal(find_c(v, n, "0000:00:17.0")->tag, "root fs"); /* AHCI */
    assert_string_equal(find_c(v, n, "1-1")->tag, "HID");              /* keyboard */
    assert_string_equal(find_c(v, n, "0000:00:14.0")->tag, "input below");
    assert_int_equal(find_c(v, n, "2-1")->verdict, DEV_VERDICT_SAFE); /* USB stick */
    /* the printer: usblp on interface 1 behind a vendor-specific 0; its
     * interfaces have no runtime PM files, as on real kernels */
    const struct device_candidate *pr = find_c(v, n, "1-2");
    assert_string_equal(pr->tag, "printer");
    assert_int_equal(pr->dev->niface, 4);
    assert_int_equal(pr->dev->iface_class, 0xff);
    assert_string_equal(pr->dev->iface[1].driver, "usblp");
    assert_null(pr->dev->iface[3].driver);
    assert_null(devices_find(s->devices, "usb", "1-2:1.1"));
    device_candidates_free(v, n);
    sample_free(s);
    host_close(h);
    snprintf(root, sizeof(root), "%s/amd-epyc", dir);
    if (host_open(root, &h) < 0)
        return;
    s = take(h);
    n = devices_assess(s->devices, NULL, &v);
    assert_string_equal(find_c(v, n, "0000:41:00.0")->tag, "root fs"); /* NVMe */
    device_candidates_free(v, n);
    sample_free(s);
    host_close(h);
}

/* ---- the agent's read cache (host_cache_enable via sense_cache) ---- */

static struct sample *sense_take(struct sense *se)
{
    struct sample *s = NULL;
    assert_int_equal(sense_sample(se, &s), 0);
    assert_non_null(s->devices);
    return s;
}

static const struct device_info *hda(const struct sample *s)
{
    return devices_find(s->devices, "pci", "0000:00:1d.0");
}

/* Static parts come from the cache until a drop: a device added between
 * samples shows after sense_refresh() (SIGHUP) or once the cache is a
 * minute old, not before; moving values show at once. */
static void test_cache_refresh(void **state)
{
    char *root = make_root(NULL);
    pci(root, PCI0 "/0000:00:1d.0", "0x040300", "0x8086", "0xa348", "snd_hda_intel");
    rpm(root, PCI0 "/0000:00:1d.0", "auto", "active", 3000, 200);
    struct host *h;
    struct sense *se;
    assert_int_equal(host_open(root, &h), 0);
    assert_int_equal(sense_open(h, &se), 0);
    sense_cache(se, 1024);
    assert_string_equal(sense_read_path(se), "cache+open");
    struct sample *a = sense_take(se);
    assert_int_equal(hda(a)->active_ms, 3000);
    struct host_cache_stats st;
    host_cache_stats(h, &st);
    assert_true(st.enabled && st.entries > 0);
    assert_int_equal(st.kept_fds, 0); /* a recorded tree's files: opened each time */

    /* the counter moves (same file, rewritten in place); a NIC arrives */
    rpm(root, PCI0 "/0000:00:1d.0", "auto", "active", 4000, 200);
    pci(root, PCI0 "/0000:00:1c.2/0000:05:00.0", "0x020000", "0x8086", "0x1533", "igb");
    rpm(root, PCI0 "/0000:00:1c.2/0000:05:00.0", "auto", "active", 10, 0);
    struct sample *b = sense_take(se);
    assert_int_equal(hda(b)->active_ms, 4000);
    assert_null(devices_find(b->devices, "pci", "0000:05:00.0")); /* static: not yet */
    assert_int_equal(se->rescans, 0);

    sense_refresh(se); /* SIGHUP */
    struct sample *c = sense_take(se);
    assert_non_null(devices_find(c->devices, "pci", "0000:05:00.0"));
    assert_int_equal(se->rescans, 1);

    /* a minute later the cache is read anew by itself */
    char p[4200];
    snprintf(p, sizeof(p), "%s/sys/bus/pci/devices/0000:05:00.0", root);
    assert_int_equal(unlink(p), 0);
    struct sample *d = sense_take(se);
    assert_non_null(devices_find(d->devices, "pci", "0000:05:00.0"));
    h->cache->since_ns -= SENSE_CACHE_MAX_AGE_NS + 1;
    struct sample *e = sense_take(se);
    assert_null(devices_find(e->devices, "pci", "0000:05:00.0"));
    assert_int_equal(se->rescans, 2);

    /* without a cache (report, top) the same tree reads the same */
    struct host *h2;
    assert_int_equal(host_open(root, &h2), 0);
    struct sample *f = take(h2);
    assert_int_equal(f->devices->n, e->devices->n);
    for (size_t i = 0; i < f->devices->n; i++) {
        assert_string_equal(f->devices->dev[i].name, e->devices->dev[i].name);
        assert_int_equal(f->devices->dev[i].active_ms, e->devices->dev[i].active_ms);
        assert_int_equal(f->devices->dev[i].status, e->devices->dev[i].status);
    }
    struct sample *v[] = {a, b, c, d, e, f};
    for (size_t i = 0; i < ARRAY_SIZE(v); i++)
        sample_free(v[i]);
    sense_close(se);
    host_close(h2);
    host_close(h);
    tree_free(root);
}

/* A device that goes away between samples: the kernel answers ENODEV on
 * its kept files (here the fault file says so, from the 2nd read on), or
 * ENOENT where the file is opened each time (no fds to keep). One sample
 * says so; the next rescans and the device is gone, no error storm. */
static void test_cache_device_vanishes(void **state)
{
    for (int keep = 0; keep < 2; keep++) {
        char *root = make_root(keep ? "sys/bus/pci/devices/0000:00:1d.0/power/runtime_status "
                                      "ENODEV from=2\n"
                                    : NULL);
        pci(root, PCI0 "/0000:00:1d.0", "0x040300", "0x8086", "0xa348", "snd_hda_intel");
        rpm(root, PCI0 "/0000:00:1d.0", "auto", "active", 3000, 200);
        struct host *h;
        struct sense *se;
        assert_int_equal(host_open(root, &h), 0);
        assert_int_equal(sense_open(h, &se), 0);
        sense_cache(se, keep ? 1024 : 0);
        struct sample *a = sense_take(se);
        assert_non_null(hda(a));
        char cmd[4400];
        snprintf(cmd, sizeof(cmd),
                 "rm -rf '%s/sys/" PCI0 "/0000:00:1d.0' '%s/sys/bus/pci/devices/0000:00:1d.0'",
                 root, root);
        assert_int_equal(system(cmd), 0);
        struct sample *b = sense_take(se); /* the listing is cached: one failed read */
        assert_true(has_diag(b, "0000:00:1d.0/power/runtime_status"));
        assert_int_equal(se->rescans, 0);
        struct sample *c = sense_take(se); /* stale: rescanned */
        assert_int_equal(se->rescans, 1);
        assert_null(hda(c));
        assert_false(has_diag(c, "0000:00:1d.0/power/runtime_status"));
        struct sample *d = sense_take(se); /* and quiet from then on */
        assert_int_equal(se->rescans, 1);
        assert_false(has_diag(d, "0000:00:1d.0/power/runtime_status"));
        assert_non_null(devices_find(d->devices, "pci", "0000:00:14.0"));
        sample_free(a);
        sample_free(b);
        sample_free(c);
        sample_free(d);
        sense_close(se);
        host_close(h);
        tree_free(root);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reads_devices),
        cmocka_unit_test(test_verdicts),
        cmocka_unit_test(test_root_on_dm),
        cmocka_unit_test(test_unknown_root_and_route),
        cmocka_unit_test(test_bad_files),
        cmocka_unit_test(test_two_samples),
        cmocka_unit_test(test_parsers),
        cmocka_unit_test(test_node_exporter),
        cmocka_unit_test(test_root_on_nvme_multipath),
        cmocka_unit_test(test_generated_fixtures),
        cmocka_unit_test(test_usb_interfaces),
        cmocka_unit_test(test_usb_hid_any_interface),
        cmocka_unit_test(test_cache_refresh),
        cmocka_unit_test(test_cache_device_vanishes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
