/* The [devices] knobs runtime_pm and autosuspend_delay_ms: exactly the
 * SAFE candidates of sense/devsafety.h under the device policy
 * (sense/devpolicy.h), the same list `watt report` prints.
 *
 *   runtime_pm = auto   write "auto" to power/control of every SAFE
 *                       candidate whose control is "on"; one whose control
 *                       is already "auto" is kept on only by a negative
 *                       autosuspend delay, so that delay is set instead
 *                       (autosuspend_delay_ms, or 2000 ms when unset)
 *   runtime_pm = keep   nothing (also when unset)
 *   autosuspend_delay_ms = N   write N (ms) to power/autosuspend_delay_ms
 *                       of the SAFE candidates that have the file
 *
 * Devices that are not SAFE are never written. One sample of the devices
 * sampler decides "never suspends" (control "on", or no suspended time
 * since boot); `watt report --interval S` judges over the interval and may
 * see fewer candidates, `watt report --interval 0` sees the same. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/parse.h"
#include "base/strbuf.h"
#include "base/util.h"
#include "sense/devices.h"
#include "sense/devpolicy.h"
#include "sense/devsafety.h"
#include "sense/sampler.h"
#include "tune/plan.h"
#include "tune/profile.h"

/* What a device whose only brake is a negative delay gets without an
 * autosuspend_delay_ms setting: the USB core's default delay (2 s,
 * usbcore.autosuspend) and what `watt report` advises. */
#define DEFAULT_DELAY_MS 2000

struct dev_knobs {
    bool runtime_auto;
    bool has_delay;
    int64_t delay_ms;
    const struct profile_value *rpm, *delay; /* NULL when unset */
};

static int read_knobs(const struct profile *p, struct dev_knobs *k, char **ret_err)
{
    *k = (struct dev_knobs){.rpm = profile_get(p, "devices", "runtime_pm"),
                            .delay = profile_get(p, "devices", "autosuspend_delay_ms")};
    if (k->rpm && k->rpm->value[0] && !streq(k->rpm->value, "keep")) {
        if (!streq(k->rpm->value, "auto")) {
            *ret_err = xasprintf("%s: devices.runtime_pm '%s': want auto or keep", k->rpm->origin,
                                 k->rpm->value);
            return -EINVAL;
        }
        k->runtime_auto = true;
    }
    if (k->delay && k->delay->value[0]) {
        if (parse_i64(k->delay->value, &k->delay_ms) < 0 || k->delay_ms < -1 ||
            k->delay_ms > INT32_MAX) {
            *ret_err = xasprintf("%s: devices.autosuspend_delay_ms '%s': want milliseconds "
                                 "(-1 .. %d)",
                                 k->delay->origin, k->delay->value, INT32_MAX);
            return -EINVAL;
        }
        k->has_delay = true;
    }
    return 0;
}

/* "pci 0000:03:00.0 (ahci, SATA (AHCI))" */
static char *device_label(const struct device_info *d)
{
    const char *cls = device_class_name(d);
    if (d->driver && cls)
        return xasprintf("%s %s (%s, %s)", d->bus, d->name, d->driver, cls);
    if (d->driver || cls)
        return xasprintf("%s %s (%s)", d->bus, d->name, d->driver ? d->driver : cls);
    return xasprintf("%s %s", d->bus, d->name);
}

static int plan_one(struct tune_plan *plan, const struct dev_knobs *k,
                    const struct device_candidate *c)
{
    const struct device_info *d = c->dev;
    _cleanup_free_ char *label = device_label(d);
    int r = 0;
    if (k->runtime_auto && d->control != DEV_CONTROL_AUTO) {
        _cleanup_free_ char *path = xasprintf("%s/power/control", d->path);
        _cleanup_free_ char *why = xasprintf("%s never suspends; %s", label, c->reason);
        const char *old = dev_control_name(d->control);
        r = tune_plan_add(plan, HOST_SYS, path, old ? old : "(unreadable)", "auto",
                          "devices.runtime_pm", why, k->rpm->origin);
        if (r < 0)
            return r;
    }
    if (!d->has_autosuspend)
        return 0;
    int64_t want;
    const struct profile_value *origin;
    if (k->has_delay) {
        want = k->delay_ms;
        origin = k->delay;
    } else if (k->runtime_auto && d->autosuspend_delay_ms < 0) {
        want = DEFAULT_DELAY_MS;
        origin = k->rpm;
    } else {
        return 0;
    }
    if (want == d->autosuspend_delay_ms)
        return 0;
    _cleanup_free_ char *path = xasprintf("%s/power/autosuspend_delay_ms", d->path);
    _cleanup_free_ char *old = xasprintf("%" PRId64, d->autosuspend_delay_ms);
    _cleanup_free_ char *val = xasprintf("%" PRId64, want);
    _cleanup_free_ char *why =
        xasprintf("%s waits %s ms idle before it suspends%s", label, val,
                  d->autosuspend_delay_ms < 0 ? " (a negative delay kept it on)" : "");
    return tune_plan_add(plan, HOST_SYS, path, old, val, "devices.autosuspend_delay_ms", why,
                         origin->origin);
}

/* "devices.runtime_pm: 3 devices left on: 2 virtio, 1 root fs (see watt
 * report)": one note for every UNSAFE device the profile would otherwise
 * have touched. */
static int note_unsafe(struct tune_plan *plan, const char *knob, const struct device_candidate *v,
                       size_t n)
{
    const char *tags[64];
    size_t counts[64], ntags = 0, total = 0;
    for (size_t i = 0; i < n; i++) {
        if (v[i].verdict != DEV_VERDICT_UNSAFE)
            continue;
        total++;
        size_t t = 0;
        while (t < ntags && !streq(tags[t], v[i].tag))
            t++;
        if (t == ntags && ntags < ARRAY_SIZE(tags)) {
            tags[ntags] = v[i].tag;
            counts[ntags++] = 0;
        }
        if (t < ntags)
            counts[t]++;
    }
    if (!total)
        return 0;
    /* most first; ties in device order (insertion sort: a handful of tags) */
    for (size_t t = 1; t < ntags; t++)
        for (size_t u = t; u > 0 && counts[u] > counts[u - 1]; u--) {
            size_t c = counts[u];
            const char *g = tags[u];
            counts[u] = counts[u - 1];
            tags[u] = tags[u - 1];
            counts[u - 1] = c;
            tags[u - 1] = g;
        }
    struct strbuf list = {0};
    for (size_t t = 0; t < ntags; t++)
        strbuf_appendf(&list, "%s%zu %s", t ? ", " : "", counts[t], tags[t]);
    int r = tune_plan_note(plan, "%s: %zu device%s left on: %s (see watt report)", knob, total,
                           total == 1 ? "" : "s", strbuf_str(&list));
    strbuf_free(&list);
    return r;
}

/* One sample of the devices sampler on H into *ret; ret->devices stays
 * NULL, with a note, when the sampler cannot run here. */
static int sample_devices(struct host *h, struct tune_plan *plan, const char *knob,
                          struct sample *ret)
{
    void *state = NULL;
    _cleanup_free_ char *why = NULL;
    int r = devices_sampler.probe(h, &state, &why);
    if (r <= 0)
        return tune_plan_note(plan, "%s: skipped, %s", knob,
                              why ? why : "the devices sampler cannot run here");
    r = devices_sampler.collect(h, state, ret);
    if (devices_sampler.free_state)
        devices_sampler.free_state(state);
    if (r < 0 || !ret->devices)
        return tune_plan_note(plan, "%s: skipped, cannot list the devices: %s", knob,
                              strerror(r < 0 ? -r : ENODATA));
    return 0;
}

int tune_plan_devices(struct host *h, const struct profile *p, const struct devpolicy *dp,
                      struct tune_plan *plan, char **ret_err)
{
    struct dev_knobs k;
    int r = read_knobs(p, &k, ret_err);
    if (r < 0 || (!k.runtime_auto && !k.has_delay))
        return r;
    const char *knob = k.runtime_auto ? "devices.runtime_pm" : "devices.autosuspend_delay_ms";
    struct sample s = {0};
    r = sample_devices(h, plan, knob, &s);
    if (r >= 0 && s.devices) {
        struct device_candidate *v = NULL;
        size_t n = devices_candidates_policy(s.devices, NULL, dp, &v);
        for (size_t i = 0; i < n && r >= 0; i++)
            if (v[i].verdict == DEV_VERDICT_SAFE)
                r = plan_one(plan, &k, &v[i]);
        if (r >= 0)
            r = note_unsafe(plan, knob, v, n);
        device_candidates_free(v, n);
    }
    devices_sampler.free_sample(&s);
    diags_free(&s.diags);
    if (r < 0) {
        *ret_err = xasprintf("%s: cannot plan: %s", knob, strerror(-r));
        return r;
    }
    return 0;
}
