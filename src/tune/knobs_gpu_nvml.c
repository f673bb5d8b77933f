/* The [gpu] power limit on NVIDIA GPUs (docs/gpu-knobs.md): NVML's power
 * management limit (nvmlDeviceSetPowerManagementLimit, mW, root only,
 * in force until the driver unloads), within nvmlDeviceGetPowerManagement-
 * LimitConstraints. A percentage is of the maximum. The knob is
 * "GPU-UUID/power_limit_mw" under HOST_NVML (tune/knob_io.h), so the
 * journal records the old limit before it is set and a restore, in this
 * process or another, or after a crash, sets it back.
 *
 * NVML is asked only on a live root or with $WATT_NVML_LIBRARY set (the
 * test double): a recorded tree has no NVML state of its own. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/util.h"
#include "sense/gpu_nvml.h"
#include "tune/knob_io.h"
#include "tune/knobs.h"
#include "tune/plan.h"
#include "tune/profile.h"

/* "00000000:19:00.0" (NVML's bus id) -> "0000:19:00.0", lower case. */
static void pdev_of(const char *bus_id, char *out, size_t size)
{
    size_t n = strlen(bus_id);
    const char *s = n > 12 ? bus_id + n - 12 : bus_id;
    snprintf(out, size, "%s", s);
    for (char *p = out; *p; p++)
        if (*p >= 'A' && *p <= 'F')
            *p = (char)(*p - 'A' + 'a');
}

static int fail(struct knob_ctx *c, char *msg)
{
    free(c->err);
    c->err = msg;
    return -EINVAL;
}

/* One GPU. 1 when planned or already right, 0 when skipped (noted),
 * -EINVAL outside its range. */
static int plan_one(struct knob_ctx *c, const struct knobs_gpu_limit *l,
                    const struct gpu_reading *g, const char *id, const char *pdev)
{
    const struct profile_value *pv = l->v;
    if (g->state[GPU_F_UUID] != GPU_FIELD_OK || !*g->uuid ||
        g->state[GPU_F_LIMIT] != GPU_FIELD_OK || g->state[GPU_F_LIMIT_RANGE] != GPU_FIELD_OK ||
        g->limit_max_mw == 0) {
        tune_plan_note(c->plan,
                       "gpu.power_limit_w: skipped %s (%s): NVML gives no power limit or "
                       "range for it (%s)",
                       id, *g->name ? g->name : "NVIDIA", pv->origin);
        return 0;
    }
    uint32_t lo = g->limit_min_mw, hi = g->limit_max_mw;
    double want = l->pct ? (double)hi * l->limit / 100.0 : l->limit * 1000.0;
    uint64_t mw = (uint64_t)llround(want);
    _cleanup_free_ char *path = xasprintf("%s/power_limit_mw", g->uuid);
    if (mw < lo || mw > hi) {
        char watts[32] = "";
        if (l->pct)
            snprintf(watts, sizeof(watts), "%.6g W", (double)mw / 1000.0);
        return fail(c, xasprintf("%s: gpu.%s %s%s%s for %s (%s, %s) is outside what its NVML "
                                 "power limit takes: %.6g..%.6g W "
                                 "(nvmlDeviceGetPowerManagementLimitConstraints); nothing was "
                                 "changed",
                                 pv->origin, pv->key, pv->value, l->pct ? "% = " : " W", watts, id,
                                 *g->name ? g->name : "NVIDIA", pdev, (double)lo / 1000.0,
                                 (double)hi / 1000.0));
    }
    if (mw == g->limit_mw) {
        tune_plan_cover(c->plan, HOST_NVML, path, NULL);
        return 1;
    }
    char val[24], old[24];
    snprintf(val, sizeof(val), "%" PRIu64, mw);
    snprintf(old, sizeof(old), "%" PRIu32, g->limit_mw);
    _cleanup_free_ char *why =
        xasprintf("%s (%s %s) board power limit %.6g W (was %.6g W; range %.6g..%.6g W)", id,
                  *g->name ? g->name : "NVIDIA", pdev, (double)mw / 1000.0,
                  (double)g->limit_mw / 1000.0, (double)lo / 1000.0, (double)hi / 1000.0);
    int r = tune_plan_add(c->plan, HOST_NVML, path, old, val, "gpu.power_limit_w", why, pv->origin);
    return r < 0 ? r : 1;
}

int knobs_gpu_nvml(struct knob_ctx *c, const struct knobs_gpu_limit *l, size_t *planned)
{
    if (!knob_io_nvml_ok(c->h))
        return 0; /* a recorded tree: no NVML of its own */
    struct gpu_nvml *n = knob_io_nvml(NULL, 0);
    if (!n)
        return 0; /* no NVIDIA driver here: nothing to note */
    struct gpu_reading *v = xcalloc(GPU_NVML_MAX_GPUS, sizeof(*v));
    size_t count = 0;
    char why[256] = "";
    int r = 0;
    if (gpu_nvml_read(n, v, GPU_NVML_MAX_GPUS, &count, why, sizeof(why)) < 0)
        tune_plan_note(c->plan, "gpu.power_limit_w: NVML cannot list its GPUs: %s (%s)", why,
                       l->v->origin);
    for (size_t i = 0; i < count && r >= 0; i++) {
        char id[24], pdev[24] = "";
        snprintf(id, sizeof(id), "nvml%u", v[i].index);
        if (v[i].state[GPU_F_PCI] == GPU_FIELD_OK)
            pdev_of(v[i].bus_id, pdev, sizeof(pdev));
        if (!knobs_gpu_selected(l->ids, l->nids, l->named, id, pdev))
            continue;
        if (v[i].lost) {
            tune_plan_note(c->plan, "gpu.power_limit_w: skipped %s: the GPU fell off the bus (%s)",
                           id, l->v->origin);
            continue;
        }
        if ((r = plan_one(c, l, &v[i], id, pdev)) > 0)
            (*planned)++;
    }
    free(v);
    knob_io_release(); /* the apply opens it again, in the journal's hands */
    return r < 0 ? r : 0;
}
