/* The [gpu] knobs on DRM cards (docs/gpu-knobs.md): a board power limit
 * and amdgpu's performance level, found through /sys/class/drm/cardN (a
 * card, not its connectors cardN-DP-1 nor renderD*) and written through
 * that link, so that the knob table names GPU files only.
 *
 *   power_limit_w / power_limit_pct
 *     amdgpu   device/hwmon/hwmonM/power1_cap, µW, within power1_cap_min
 *              ..power1_cap_max (Documentation/gpu/amdgpu/thermal.rst);
 *              the driver keeps whole watts (amdgpu_hwmon_set_power_cap
 *              divides by 10^6), so whole watts are planned; a percentage
 *              is of power1_cap_max
 *     i915, xe device/hwmon/hwmonM/power1_max, µW, the card's sustained
 *              (PL1) limit: "writing 0 disables the limit; values > 0 and
 *              <= TDP enable it" (ABI sysfs-driver-intel-{i915,xe}-hwmon),
 *              so within 1 W..power1_rated_max (the TDP); a percentage is
 *              of power1_rated_max. xe may make it read-only (firmware
 *              locked PL1): a note, as every read-only knob.
 *   perf_level   amdgpu device/power_dpm_force_performance_level
 *
 * A limit outside a card's range is an error before anything is planned,
 * naming the file and its range, so no part of the profile is applied.
 * NVIDIA GPUs (the nvidia driver has no such files) are knobs_gpu_nvml.c. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/parse.h"
#include "base/util.h"
#include "tune/knobs.h"
#include "tune/plan.h"
#include "tune/profile.h"

#define DRM_CLASS "class/drm"
#define UW_PER_W  1000000.0

struct gpu_card {
    char *id;     /* "card0" */
    char *pdev;   /* "0000:03:00.0", or "" */
    char *driver; /* "amdgpu", or "" */
    char *hwmon;  /* "class/drm/card0/device/hwmon/hwmon0", or NULL */
};

static void cards_free(struct gpu_card *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(v[i].id);
        free(v[i].pdev);
        free(v[i].driver);
        free(v[i].hwmon);
    }
    free(v);
}

/* "card" and digits only: a card, not a connector or a render node. */
static bool card_name(const char *s)
{
    if (strncmp(s, "card", 4) || !s[4])
        return false;
    for (const char *d = s + 4; *d; d++)
        if (*d < '0' || *d > '9')
            return false;
    return true;
}

static char *hwmon_of(struct host *h, const char *card)
{
    _cleanup_free_ char *dir = xasprintf(DRM_CLASS "/%s/device/hwmon", card);
    char **v = NULL;
    size_t n = 0;
    char *ret = NULL;
    if (host_list(h, HOST_SYS, dir, &v, &n) < 0)
        return NULL;
    for (size_t i = 0; i < n && !ret; i++)
        if (!strncmp(v[i], "hwmon", 5))
            ret = xasprintf("%s/%s", dir, v[i]);
    host_free_list(v, n);
    return ret;
}

static size_t cards_list(struct host *h, struct gpu_card **ret)
{
    char **names = NULL;
    size_t n = 0, k = 0;
    struct gpu_card *v = NULL;
    if (host_list(h, HOST_SYS, DRM_CLASS, &names, &n) >= 0 && n)
        v = xcalloc(n, sizeof(*v));
    for (size_t i = 0; i < n; i++) {
        if (!card_name(names[i]))
            continue;
        struct gpu_card *g = &v[k++];
        g->id = xstrdup(names[i]);
        _cleanup_free_ char *dev = xasprintf(DRM_CLASS "/%s/device", names[i]);
        _cleanup_free_ char *drv = xasprintf("%s/driver", dev);
        if (host_link_name(h, HOST_SYS, dev, &g->pdev) < 0)
            g->pdev = xstrdup("");
        if (host_link_name(h, HOST_SYS, drv, &g->driver) < 0)
            g->driver = xstrdup("");
        g->hwmon = hwmon_of(h, names[i]);
    }
    host_free_list(names, n);
    *ret = v;
    return k;
}

/* ---------------------------------------------------------------- the keys */

struct gpu_keys {
    const struct profile_value *w, *pct, *level, *gpus;
    double limit; /* W, or % of the maximum with pct */
    char **ids;   /* NULL: every GPU */
    size_t nids;
    bool *named; /* ids[i] matched a GPU */
};

static const struct profile_value *get(const struct profile *p, const char *key)
{
    const struct profile_value *v = profile_get(p, "gpu", key);
    return v && v->value && *v->value ? v : NULL;
}

static int fail(struct knob_ctx *c, char *msg)
{
    free(c->err);
    c->err = msg;
    return -EINVAL;
}

static void keys_free(struct gpu_keys *k)
{
    profile_names_free(k->ids, k->nids);
    free(k->named);
}

static int keys_read(struct knob_ctx *c, struct gpu_keys *k)
{
    *k = (struct gpu_keys){.w = get(c->p, "power_limit_w"),
                           .pct = get(c->p, "power_limit_pct"),
                           .level = get(c->p, "perf_level"),
                           .gpus = get(c->p, "gpus")};
    if (k->level && streq(k->level->value, "keep"))
        k->level = NULL;
    if (k->w && k->pct)
        return fail(c, xasprintf("%s: gpu.power_limit_pct: set power_limit_w (%s) or "
                                 "power_limit_pct, not both",
                                 k->pct->origin, k->w->origin));
    const struct profile_value *lim = k->w ? k->w : k->pct;
    if (lim && (parse_double(lim->value, &k->limit) < 0 || !(k->limit > 0)))
        return fail(c, xasprintf("%s: gpu.%s '%s' is not a positive number", lim->origin, lim->key,
                                 lim->value));
    if (k->gpus && profile_parse_gpus(k->gpus->value, &k->ids, &k->nids) < 0)
        return fail(
            c, xasprintf("%s: gpu.gpus '%s' is not a GPU list", k->gpus->origin, k->gpus->value));
    if (k->ids)
        k->named = xcalloc(k->nids, sizeof(*k->named));
    return 0;
}

bool knobs_gpu_selected(const char *const *ids, size_t nids, bool *named, const char *id,
                        const char *pdev)
{
    if (!ids)
        return true;
    bool hit = false;
    for (size_t i = 0; i < nids; i++)
        if (streq(ids[i], id) || (pdev && *pdev && streq(ids[i], pdev))) {
            named[i] = true;
            hit = true;
        }
    return hit;
}

/* ---------------------------------------------------------------- power limit */

struct limit_file {
    const char *file, *range_lo, *range_hi; /* names in the hwmon directory */
    bool whole_watts;
};

static const struct limit_file amd_limit = {"power1_cap", "power1_cap_min", "power1_cap_max", true};
static const struct limit_file intel_limit = {"power1_max", NULL, "power1_rated_max", false};

static const struct limit_file *limit_file_of(const struct gpu_card *g)
{
    if (streq(g->driver, "amdgpu"))
        return &amd_limit;
    if (streq(g->driver, "i915") || streq(g->driver, "xe"))
        return &intel_limit;
    return NULL;
}

static int read_uw(struct knob_ctx *c, const char *dir, const char *name, uint64_t *ret)
{
    _cleanup_free_ char *path = xasprintf("%s/%s", dir, name);
    return host_read_u64(c->h, HOST_SYS, path, ret);
}

/* One card's limit. 1 when planned or already right, 0 when this card
 * has no limit it can take (noted), -EINVAL outside its range. */
static int plan_card_limit(struct knob_ctx *c, const struct gpu_keys *k, const struct gpu_card *g)
{
    const struct profile_value *pv = k->w ? k->w : k->pct;
    const struct limit_file *lf = limit_file_of(g);
    if (streq(g->driver, "nvidia"))
        return 0; /* NVML's (knobs_gpu_nvml.c) */
    if (!lf || !g->hwmon) {
        tune_plan_note(c->plan, "gpu.power_limit_w: skipped %s (%s): no power limit file (%s)",
                       g->id, *g->driver ? g->driver : "no driver", pv->origin);
        return 0;
    }
    uint64_t lo = lf->whole_watts ? 0 : 1000000, hi = 0, cur;
    _cleanup_free_ char *path = xasprintf("%s/%s", g->hwmon, lf->file);
    _cleanup_free_ char *kpath = host_kernel_path(HOST_SYS, path);
    if (host_read_u64(c->h, HOST_SYS, path, &cur) < 0) {
        tune_plan_note(c->plan, "gpu.power_limit_w: skipped %s (%s): no readable %s (%s)", g->id,
                       g->driver, kpath, pv->origin);
        return 0;
    }
    if ((lf->range_lo && read_uw(c, g->hwmon, lf->range_lo, &lo) < 0) ||
        read_uw(c, g->hwmon, lf->range_hi, &hi) < 0 || hi == 0 || lo > hi) {
        tune_plan_note(c->plan,
                       "gpu.power_limit_w: skipped %s (%s): its range (%s%s%s) is not readable, "
                       "so a limit cannot be checked against it (%s)",
                       g->id, g->driver, lf->range_lo ? lf->range_lo : "", lf->range_lo ? ".." : "",
                       lf->range_hi, pv->origin);
        return 0;
    }
    double want_uw = k->pct ? (double)hi * k->limit / 100.0 : k->limit * UW_PER_W;
    uint64_t uw = (uint64_t)llround(want_uw);
    if (lf->whole_watts)
        uw = k->pct ? (uint64_t)floor(want_uw / UW_PER_W) * 1000000
                    : (uint64_t)llround(want_uw / UW_PER_W) * 1000000;
    char watts[32] = "";
    if (k->pct)
        snprintf(watts, sizeof(watts), "%.6g W", (double)uw / UW_PER_W);
    if (uw < lo || uw > hi)
        return fail(c, xasprintf("%s: gpu.%s %s%s%s for %s (%s, %s) is outside what %s takes: "
                                 "%.6g..%.6g W (%s%s%s); nothing was changed",
                                 pv->origin, pv->key, pv->value, k->pct ? "% = " : " W", watts,
                                 g->id, g->driver, g->pdev, kpath, (double)lo / UW_PER_W,
                                 (double)hi / UW_PER_W, lf->range_lo ? lf->range_lo : "1 W", "..",
                                 lf->range_hi));
    char val[24], old[24];
    snprintf(val, sizeof(val), "%" PRIu64, uw);
    snprintf(old, sizeof(old), "%" PRIu64, cur);
    if (uw == cur) {
        tune_plan_cover(c->plan, HOST_SYS, path, NULL);
        return 1;
    }
    if (!knobs_writable(c, HOST_SYS, path, "gpu.power_limit_w", pv->origin))
        return 0; /* xe: PL1 locked by the firmware makes power1_max 0444 */
    _cleanup_free_ char *why =
        xasprintf("%s (%s %s) board power limit %.6g W (was %.6g W; range %.6g..%.6g W)", g->id,
                  g->driver, g->pdev, (double)uw / UW_PER_W, (double)cur / UW_PER_W,
                  (double)lo / UW_PER_W, (double)hi / UW_PER_W);
    int r = tune_plan_add(c->plan, HOST_SYS, path, old, val, "gpu.power_limit_w", why, pv->origin);
    return r < 0 ? r : 1;
}

/* ---------------------------------------------------------------- perf level */

static int plan_card_level(struct knob_ctx *c, const struct gpu_keys *k, const struct gpu_card *g)
{
    if (!streq(g->driver, "amdgpu"))
        return 0;
    _cleanup_free_ char *path =
        xasprintf(DRM_CLASS "/%s/device/power_dpm_force_performance_level", g->id);
    _cleanup_free_ char *raw = NULL;
    if (host_read_str(c->h, HOST_SYS, path, &raw) < 0)
        return 0;
    _cleanup_free_ char *cur = tune_value_active(raw);
    if (streq(cur, k->level->value)) {
        tune_plan_cover(c->plan, HOST_SYS, path, NULL);
        return 1;
    }
    if (!knobs_writable(c, HOST_SYS, path, "gpu.perf_level", k->level->origin))
        return 0;
    _cleanup_free_ char *why =
        xasprintf("%s (amdgpu %s) performance level %s", g->id, g->pdev, k->level->value);
    int r = tune_plan_add(c->plan, HOST_SYS, path, cur, k->level->value, "gpu.perf_level", why,
                          k->level->origin);
    return r < 0 ? r : 1;
}

int knobs_gpu(struct knob_ctx *c)
{
    struct gpu_keys k;
    int r = keys_read(c, &k);
    if (r < 0 || (!k.w && !k.pct && !k.level)) {
        keys_free(&k);
        return r;
    }
    struct gpu_card *v = NULL;
    size_t n = cards_list(c->h, &v), limits = 0, levels = 0;
    for (size_t i = 0; i < n && r >= 0; i++) {
        if (!knobs_gpu_selected((const char *const *)k.ids, k.nids, k.named, v[i].id, v[i].pdev))
            continue;
        if (k.level && (r = plan_card_level(c, &k, &v[i])) > 0)
            levels++;
        if (r >= 0 && (k.w || k.pct) && (r = plan_card_limit(c, &k, &v[i])) > 0)
            limits++;
    }
    cards_free(v, n);
    if (r >= 0 && (k.w || k.pct))
        r = knobs_gpu_nvml(c,
                           &(struct knobs_gpu_limit){(const char *const *)k.ids, k.nids, k.named,
                                                     k.w ? k.w : k.pct, k.pct != NULL, k.limit},
                           &limits);
    if (r >= 0) {
        for (size_t i = 0; i < k.nids; i++)
            if (!k.named[i])
                tune_plan_note(c->plan, "gpu.gpus: no GPU %s on this machine (%s)", k.ids[i],
                               k.gpus->origin);
        if ((k.w || k.pct) && !limits)
            tune_plan_note(c->plan,
                           "gpu.power_limit_w: skipped, no GPU with a power limit "
                           "watt can set here (%s)",
                           (k.w ? k.w : k.pct)->origin);
        if (k.level && !levels)
            tune_plan_note(c->plan,
                           "gpu.perf_level: skipped, no amdgpu card with "
                           "power_dpm_force_performance_level here (%s)",
                           k.level->origin);
    }
    keys_free(&k);
    return r < 0 ? r : 0;
}
