/* Devices that never runtime-suspend, with the safety verdict for each
 * (sense/devsafety.h) and what allowing autosuspend would save. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/table.h"
#include "base/util.h"
#include "sense/devices.h"
#include "sense/devpolicy.h"
#include "sense/devsafety.h"
#include "view/report.h"

/* Above this many rows the text table shows only the devices that never
 * suspend (JSON always has every device). */
#define MAX_TEXT_ROWS 40

struct dev_counts {
    size_t listed, with_rpm, never, safe;
};

static struct dev_counts count(const struct device_candidate *v, size_t n)
{
    struct dev_counts k = {.listed = n};
    for (size_t i = 0; i < n; i++) {
        if (!device_has_rpm(v[i].dev))
            continue;
        k.with_rpm++;
        k.never += v[i].never_suspends;
        k.safe += v[i].verdict == DEV_VERDICT_SAFE;
    }
    return k;
}

static const char *verdict_name(enum dev_verdict v)
{
    switch (v) {
    case DEV_VERDICT_SAFE:
        return "safe";
    case DEV_VERDICT_UNSAFE:
        return "unsafe";
    case DEV_VERDICT_SUSPENDS:
        return "suspends";
    default:
        return "not_candidate";
    }
}

/* "0x0c0330" for PCI, "0x03" for USB, NULL when unknown. */
static char *fmt_class(const struct device_info *d)
{
    if (d->class_code < 0)
        return NULL;
    return xasprintf(d->kind == DEV_KIND_PCI ? "0x%06x" : "0x%02x", (unsigned)d->class_code);
}

static void kv_hex(struct json *j, const char *key, int v)
{
    char buf[16];
    snprintf(buf, sizeof(buf), "0x%04x", (unsigned)v);
    json_kv_string(j, key, v < 0 ? NULL : buf);
}

static void kv_ms(struct json *j, const char *key, uint64_t v)
{
    json_key(j, key);
    v == VAL_NONE ? json_null(j) : json_u64(j, v);
}

static void device_json(const struct device_candidate *c, bool policy, struct json *j)
{
    const struct device_info *d = c->dev;
    json_object_begin(j);
    json_kv_string(j, "name", d->name);
    json_kv_string(j, "bus", d->bus);
    json_kv_string(j, "kind", dev_kind_name(d->kind));
    json_kv_string(j, "sysfs_path", d->path);
    json_kv_string(j, "driver", d->driver);
    _cleanup_free_ char *cls = fmt_class(d);
    json_kv_string(j, "class_code", cls);
    json_kv_string(j, "class", device_class_name(d));
    if (d->kind == DEV_KIND_USB_DEVICE) {
        char ic[8];
        snprintf(ic, sizeof(ic), "0x%02x", (unsigned)d->iface_class & 0xff);
        json_kv_string(j, "interface_class", d->iface_class < 0 ? NULL : ic);
    }
    kv_hex(j, "vendor", d->vendor);
    kv_hex(j, "device", d->device);
    json_kv_string(j, "product", d->product);
    json_kv_string(j, "control", dev_control_name(d->control));
    json_kv_string(j, "runtime_status", dev_status_name(d->status));
    kv_ms(j, "runtime_active_time_ms", d->active_ms);
    kv_ms(j, "runtime_suspended_time_ms", d->suspended_ms);
    json_kv_string(j, "runtime_enabled", d->runtime_enabled);
    json_key(j, "autosuspend_delay_ms");
    d->has_autosuspend ? json_i64(j, d->autosuspend_delay_ms) : json_null(j);
    json_kv_string(j, "wakeup", dev_wakeup_name(d->wakeup));
    json_kv_double(j, "suspended_pct", c->suspended_pct);
    json_kv_bool(j, "never_suspends", c->never_suspends);
    json_kv_string(j, "verdict", verdict_name(c->verdict));
    json_kv_string(j, "tag", c->tag);
    json_kv_string(j, "reason", c->reason);
    json_kv_double(j, "saving_w", c->saving_w);
    json_kv_double(j, "saving_lo_w", c->saving_lo_w);
    json_kv_double(j, "saving_hi_w", c->saving_hi_w);
    json_kv_double(j, "resume_ms", c->resume_ms);
    json_kv_string(j, "saving_basis", c->verdict == DEV_VERDICT_SAFE ? c->basis : NULL);
    json_kv_string(j, "action", c->action);
    if (policy) {
        /* only with a devices.conf: the report without one stays as it was */
        _cleanup_free_ char *rule = c->rule ? devpolicy_rule_name(c->rule) : NULL;
        json_kv_string(j, "policy_rule", rule);
    }
    json_object_end(j);
}

/* Devices without runtime PM, compact: there are thousands of memory
 * blocks on large machines, and nothing more to say about them. */
static void unsupported_json(const struct device_candidate *v, size_t n, struct json *j)
{
    json_key(j, "unsupported");
    json_array_begin(j);
    for (size_t i = 0; i < n; i++) {
        const struct device_info *d = v[i].dev;
        if (d->status != DEV_STATUS_UNSUPPORTED)
            continue;
        json_object_begin(j);
        json_kv_string(j, "bus", d->bus);
        json_kv_string(j, "name", d->name);
        json_kv_string(j, "driver", d->driver);
        json_kv_string(j, "control", dev_control_name(d->control));
        json_object_end(j);
    }
    json_array_end(j);
}

static void anchors_json(const struct devices_sample *ds, struct json *j)
{
    json_key(j, "protected");
    json_array_begin(j);
    for (size_t i = 0; i < ds->nanchor; i++) {
        json_object_begin(j);
        json_kv_string(j, "kind",
                       ds->anchor[i].kind == DEV_ANCHOR_ROOTFS ? "rootfs" : "default_nic");
        json_kv_string(j, "what", ds->anchor[i].what);
        json_kv_string(j, "sysfs_path", ds->anchor[i].path);
        json_object_end(j);
    }
    json_array_end(j);
}

static void devices_json(const struct report_ctx *c, struct json *j)
{
    const struct devices_sample *ds = c->cur->devices;
    if (!ds) {
        json_null(j);
        return;
    }
    struct device_candidate *v;
    size_t n = devices_assess_policy(ds, report_dev_prev(c), c->devpolicy, &v);
    struct dev_counts k = count(v, n);
    json_object_begin(j);
    json_kv_string(j, "basis", c->b ? "interval" : "since_boot");
    json_kv_u64(j, "listed", k.listed);
    json_kv_u64(j, "with_runtime_pm", k.with_rpm);
    json_kv_u64(j, "never_suspend", k.never);
    json_kv_u64(j, "safe_candidates", k.safe);
    double total = 0;
    for (size_t i = 0; i < n; i++)
        total += v[i].verdict == DEV_VERDICT_SAFE ? v[i].saving_w : 0;
    json_kv_double(j, "safe_saving_w", total);
    json_kv_string(j, "rootfs", ds->rootfs);
    json_kv_string(j, "rootfs_note", ds->rootfs_why);
    json_kv_string(j, "default_nic", ds->default_nic);
    json_kv_string(j, "default_nic_note",
                   ds->no_default_route ? "no default route" : ds->default_nic_why);
    if (c->devpolicy) {
        json_kv_string(j, "policy_file", c->devpolicy->file);
        json_kv_u64(j, "policy_rules", c->devpolicy->n);
    }
    anchors_json(ds, j);
    json_key(j, "devices");
    json_array_begin(j);
    for (size_t i = 0; i < n; i++)
        if (v[i].dev->status != DEV_STATUS_UNSUPPORTED)
            device_json(&v[i], c->devpolicy != NULL, j);
    json_array_end(j);
    unsupported_json(v, n, j);
    json_object_end(j);
    device_candidates_free(v, n);
}

static void add_row(struct table *t, const struct device_candidate *c)
{
    const struct device_info *d = c->dev;
    char pct[24] = "-", drv[16], cls[16];
    if (!isnan(c->suspended_pct))
        snprintf(pct, sizeof(pct), "%.1f", c->suspended_pct);
    const char *cn = device_class_name(d);
    snprintf(drv, sizeof(drv), "%.12s", d->driver ? d->driver : "-");
    snprintf(cls, sizeof(cls), "%.12s", cn ? cn : "-");
    table_add(t, d->name, d->bus, drv, cls, dev_control_name(d->control),
              dev_status_name(d->status), pct, c->tag);
}

/* Text wrapped at the report width, continuation lines indented. */
static void wrapped(struct strbuf *out, const char *first, const char *text)
{
    size_t col = strlen(first), indent = 5; /* plus the space before a word */
    strbuf_append(out, first);
    _cleanup_free_ char *copy = xstrdup(text);
    char *save = NULL;
    for (char *w = strtok_r(copy, " ", &save); w; w = strtok_r(NULL, " ", &save)) {
        size_t wl = strlen(w);
        bool wrap = col > indent && col + 1 + wl > REPORT_WIDTH;
        if (wrap) {
            strbuf_putc(out, '\n');
            strbuf_pad(out, ' ', indent);
        }
        strbuf_putc(out, ' ');
        col = (wrap ? indent : col) + 1 + wl;
        strbuf_append(out, w);
    }
    strbuf_putc(out, '\n');
}

static void reasons_text(const struct device_candidate *v, size_t n, struct strbuf *out)
{
    for (size_t i = 0; i < n; i++) {
        const struct device_candidate *c = &v[i];
        if (!c->never_suspends || !device_has_rpm(c->dev))
            continue;
        char id[24] = "";
        if (c->dev->vendor >= 0 && c->dev->device >= 0)
            snprintf(id, sizeof(id), " [%04x:%04x]", (unsigned)c->dev->vendor,
                     (unsigned)c->dev->device);
        _cleanup_free_ char *first = xasprintf("  %s %s%s:", c->dev->bus, c->dev->name, id);
        wrapped(out, first, c->reason);
        if (c->verdict != DEV_VERDICT_SAFE)
            continue;
        _cleanup_free_ char *gain = xasprintf(
            "saves ~%.1f W (%.1f-%.1f W, %s), resume ~%.0f ms each time; to do it: %s", c->saving_w,
            c->saving_lo_w, c->saving_hi_w, c->basis, c->resume_ms, c->action);
        wrapped(out, "   ", gain);
    }
}

static void context_text(const struct report_ctx *c, const struct devices_sample *ds,
                         struct strbuf *out)
{
    strbuf_appendf(out, "  root filesystem: %s%s%s\n", ds->rootfs ? ds->rootfs : "unknown",
                   ds->rootfs_why ? "; " : "", ds->rootfs_why ? ds->rootfs_why : "");
    strbuf_appendf(out, "  default route: %s%s%s\n",
                   ds->default_nic        ? ds->default_nic
                   : ds->no_default_route ? "none"
                                          : "unknown",
                   ds->default_nic_why ? "; " : "", ds->default_nic_why ? ds->default_nic_why : "");
    if (c->devpolicy)
        strbuf_appendf(out, "  policy: %s (%zu rule%s) and the built-in rules\n",
                       c->devpolicy->file, c->devpolicy->n, c->devpolicy->n == 1 ? "" : "s");
}

static void devices_text(const struct report_ctx *c, struct strbuf *out)
{
    const struct devices_sample *ds = c->cur->devices;
    if (!ds) {
        const char *why = report_unavailable(c, SAMPLER_DEVICES);
        strbuf_appendf(out, "  not available: %s\n", why ? why : "no device list");
        return;
    }
    struct device_candidate *v;
    size_t n = devices_assess_policy(ds, report_dev_prev(c), c->devpolicy, &v);
    struct dev_counts k = count(v, n);
    strbuf_appendf(out,
                   "  %zu devices with runtime PM (%zu listed), %zu never suspend, %zu safe "
                   "candidate%s\n",
                   k.with_rpm, k.listed, k.never, k.safe, k.safe == 1 ? "" : "s");
    context_text(c, ds, out);
    if (k.with_rpm && !c->b)
        strbuf_append(out, "  one snapshot: suspended share since boot\n");
    if (k.with_rpm) {
        bool only_never = k.with_rpm > MAX_TEXT_ROWS;
        struct table t;
        table_init(&t, "device", "bus", "driver", "class", "control", "status", ">susp %",
                   "verdict", NULL);
        for (size_t i = 0; i < n; i++)
            if (device_has_rpm(v[i].dev) && (!only_never || v[i].never_suspends))
                add_row(&t, &v[i]);
        table_render(&t, out, REPORT_WIDTH);
        table_free(&t);
        if (only_never)
            strbuf_appendf(out, "  (%zu devices that do suspend not shown; --json has all)\n",
                           k.with_rpm - k.never);
        reasons_text(v, n, out);
    }
    device_candidates_free(v, n);
}

const struct report_section report_section_devices = {
    .key = "devices",
    .title = "Devices that never suspend",
    .json = devices_json,
    .text = devices_text,
};
