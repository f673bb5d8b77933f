/* GPUs: DRM cards in sysfs and NVIDIA GPUs through NVML (sense/gpu.h).
 *
 * sysfs: /sys/class/drm/cardN (Documentation/gpu/drm-uapi.rst), its PCI
 * function /sys/bus/pci/devices/PDEV, the driver's hwmon chip
 * (Documentation/gpu/amdgpu/thermal.rst, drivers/gpu/drm/i915/i915_hwmon.c,
 * drivers/gpu/drm/xe/xe_hwmon.c) and runtime PM (Documentation/power/
 * runtime_pm.rst). The hwmon sampler runs before this one: where it read
 * the chip, its values are taken from the sample rather than read twice. */
#include "sense/gpu.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/parse.h"
#include "base/util.h"
#include "sense/gpu_nvml.h"
#include "sense/hwmon.h"

#define DRM   "class/drm"
#define PCI   "bus/pci/devices"
#define HWMON "class/hwmon"

struct gpu_state {
    struct gpu_nvml *nvml; /* NULL when NVML is not usable */
    char nvml_why[200];
};

/* ---- discovery ---- */

/* "card3" -> 3; -1 for connectors ("card0-DP-1"), renderD*, others. */
static long card_number(const char *name)
{
    uint64_t v;
    if (strncmp(name, "card", 4) != 0 || !str_all_digits(name + 4) || parse_u64(name + 4, &v) < 0 ||
        v > 1u << 16)
        return -1;
    return (long)v;
}

/* DRM drivers of display-only PCI functions: a server BMC's VGA (ast on
 * ASPEED, mgag200 on Matrox G200e, hibmc on HiSilicon) and the emulated
 * cards of hypervisors. They have no GPU to measure or to suspend. */
static const char *const display_only[] = {
    "ast", "mgag200",    "hibmc-drm", "bochs-drm",  "bochs",      "cirrus",    "cirrus-qemu",
    "qxl", "virtio-pci", "vmwgfx",    "hyperv_drm", "hyperv-drm", "vboxvideo", "simple-framebuffer",
};

static bool is_display_only(const char *driver)
{
    for (size_t i = 0; i < ARRAY_SIZE(display_only); i++)
        if (streq(driver, display_only[i]))
            return true;
    return false;
}

/* A card's PCI address and driver; < 0 when it is not a PCI device with a
 * GPU driver bound (a virtual card: vkms, simpledrm on a platform device;
 * a BMC's VGA: display_only[]). */
static int card_pci(struct host *h, const char *card, char pdev[GPU_PDEV_LEN], char *driver,
                    size_t dlen)
{
    char p[96];
    _cleanup_free_ char *bdf = NULL, *drv = NULL, *sub = NULL;
    snprintf(p, sizeof(p), DRM "/%s/device/subsystem", card);
    if (host_link_name(h, HOST_SYS, p, &sub) < 0 || !streq(sub, "pci"))
        return -ENODEV;
    snprintf(p, sizeof(p), DRM "/%s/device", card);
    int r = host_link_name(h, HOST_SYS, p, &bdf);
    if (r < 0)
        return r;
    snprintf(p, sizeof(p), DRM "/%s/device/driver", card);
    r = host_link_name(h, HOST_SYS, p, &drv);
    if (r < 0)
        return r;
    if (is_display_only(drv))
        return -ENODEV;
    snprintf(pdev, GPU_PDEV_LEN, "%s", bdf);
    for (char *c = pdev; *c; c++)
        *c = (char)tolower((unsigned char)*c);
    snprintf(driver, dlen, "%s", drv);
    return 0;
}

static int count_cards(struct host *h)
{
    char **names;
    size_t n;
    int found = 0;
    if (host_list(h, HOST_SYS, DRM, &names, &n) < 0)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char pdev[GPU_PDEV_LEN], drv[24];
        if (card_number(names[i]) >= 0 && card_pci(h, names[i], pdev, drv, sizeof(drv)) == 0)
            found++;
    }
    host_free_list(names, n);
    return found;
}

/* NVML is the running machine's: on a recorded root only a library named
 * by $WATT_NVML_LIBRARY (a test double) is loaded, never the driver's. */
static int nvml_try(struct host *h, struct gpu_state *st)
{
    const char *lib = getenv(GPU_NVML_ENV_LIBRARY);
    if (!h->live && (!lib || !*lib)) {
        snprintf(st->nvml_why, sizeof(st->nvml_why),
                 "not asked on a recorded root (set " GPU_NVML_ENV_LIBRARY ")");
        return -ENOTSUP;
    }
    return gpu_nvml_open(&st->nvml, st->nvml_why, sizeof(st->nvml_why));
}

static int gpu_probe(struct host *h, void **ret_state, char **ret_reason)
{
    struct gpu_state *st = xcalloc(1, sizeof(*st));
    int cards = count_cards(h);
    int r = nvml_try(h, st);
    if (cards == 0 && r < 0) {
        *ret_reason = xasprintf("no DRM card with a GPU driver and no NVML: %s", st->nvml_why);
        free(st);
        return 0;
    }
    *ret_state = st;
    return 1;
}

static void gpu_free_state(void *state)
{
    struct gpu_state *st = state;
    if (!st)
        return;
    gpu_nvml_close(st->nvml);
    free(st);
}

/* ---- sysfs reads ---- */

static void dev_init(struct gpu_dev *g)
{
    *g = (struct gpu_dev){.energy_j = NAN,
                          .power_w = NAN,
                          .cap_w = NAN,
                          .cap_min_w = NAN,
                          .cap_max_w = NAN,
                          .busy_pct = NAN,
                          .mem_busy_pct = NAN,
                          .temp_c = NAN,
                          .core_mhz = NAN,
                          .mem_mhz = NAN,
                          .pstate = -1,
                          .rpm_suspended_ms = VAL_NONE,
                          .rpm_active_ms = VAL_NONE};
}

/* An optional attribute: absent is not a problem (the driver has no such
 * file), any other failure goes to the diags. */
static int read_opt_str(struct host *h, struct sample *s, const char *path, char *buf, size_t n)
{
    _cleanup_free_ char *v = NULL;
    int r = host_read_str(h, HOST_SYS, path, &v);
    if (r < 0) {
        if (r != -ENOENT)
            sample_diag_read(s, h, HOST_SYS, path, r);
        return r;
    }
    snprintf(buf, n, "%s", v);
    return 0;
}

static double read_opt_u64(struct host *h, struct sample *s, const char *path, double scale)
{
    uint64_t v;
    int r = host_read_u64(h, HOST_SYS, path, &v);
    if (r < 0) {
        if (r != -ENOENT)
            sample_diag_read(s, h, HOST_SYS, path, r);
        return NAN;
    }
    return (double)v * scale;
}

static void read_rpm(struct host *h, struct sample *s, struct gpu_dev *g)
{
    char p[96];
    snprintf(p, sizeof(p), PCI "/%s/power/control", g->pdev);
    read_opt_str(h, s, p, g->rpm_control, sizeof(g->rpm_control));
    snprintf(p, sizeof(p), PCI "/%s/power/runtime_status", g->pdev);
    read_opt_str(h, s, p, g->rpm_status, sizeof(g->rpm_status));
    uint64_t v;
    snprintf(p, sizeof(p), PCI "/%s/power/runtime_suspended_time", g->pdev);
    if (host_read_u64(h, HOST_SYS, p, &v) >= 0)
        g->rpm_suspended_ms = v;
    snprintf(p, sizeof(p), PCI "/%s/power/runtime_active_time", g->pdev);
    if (host_read_u64(h, HOST_SYS, p, &v) >= 0)
        g->rpm_active_ms = v;
}

/* amdgpu's pp_dpm_sclk / pp_dpm_mclk: "0: 500Mhz\n1: 1700Mhz *\n", the
 * level in use marked '*' (Documentation/gpu/amdgpu/thermal.rst). */
static double dpm_current_mhz(const char *text)
{
    for (const char *l = text; l && *l;) {
        const char *nl = strchr(l, '\n');
        size_t len = nl ? (size_t)(nl - l) : strlen(l);
        unsigned idx;
        double mhz;
        char line[64];
        if (len < sizeof(line)) {
            memcpy(line, l, len);
            line[len] = '\0';
            if (strchr(line, '*') && sscanf(line, "%u: %lf", &idx, &mhz) == 2)
                return mhz;
        }
        l = nl ? nl + 1 : NULL;
    }
    return NAN;
}

static double read_dpm(struct host *h, struct sample *s, const char *path)
{
    _cleanup_free_ char *text = NULL;
    size_t len;
    int r = host_read(h, HOST_SYS, path, &text, &len);
    if (r < 0) {
        if (r != -ENOENT)
            sample_diag_read(s, h, HOST_SYS, path, r);
        return NAN;
    }
    return dpm_current_mhz(text);
}

/* The hwmon channel that is the whole card: xe labels channel 1 "card" and
 * 2 "pkg" on discrete GPUs and shows only channel 2 ("pkg") on integrated
 * ones (xe_hwmon.c); i915 and amdgpu have one channel, unlabelled or
 * "PPT". */
static unsigned energy_channel(struct host *h, const char *chip)
{
    char p[96];
    snprintf(p, sizeof(p), HWMON "/%s/energy1_input", chip);
    if (host_exists(h, HOST_SYS, p))
        return 1;
    snprintf(p, sizeof(p), HWMON "/%s/energy2_input", chip);
    return host_exists(h, HOST_SYS, p) ? 2 : 1;
}

/* OWN: read what the hwmon sampler did not (temperature, limits); without
 * it only the hwmon sample's power and energy are taken. */
static void read_hwmon(struct host *h, struct sample *s, struct gpu_dev *g, bool own)
{
    char p[96];
    enum host_cache_mode m0 = host_cache_mode(h, HOST_CACHE_STATIC);
    unsigned ch = energy_channel(h, g->hwmon);
    host_cache_mode(h, m0);
    const struct hwmon_sensor *e = hwmon_find(s->hwmon, g->hwmon, HWMON_ENERGY, ch);
    const struct hwmon_sensor *pw = hwmon_find(s->hwmon, g->hwmon, HWMON_POWER, ch);
    if (!own) {
        if (e && e->input != VAL_NONE)
            g->energy_j = (double)e->input / 1e6;
        if (pw && (pw->average_uw != VAL_NONE || pw->input != VAL_NONE))
            g->power_w = (double)(pw->average_uw != VAL_NONE ? pw->average_uw : pw->input) / 1e6;
        return;
    }
    enum host_cache_mode m = host_cache_mode(h, HOST_CACHE_DYNAMIC);
    if (e) {
        if (e->input != VAL_NONE)
            g->energy_j = (double)e->input / 1e6;
    } else {
        snprintf(p, sizeof(p), HWMON "/%s/energy%u_input", g->hwmon, ch);
        g->energy_j = read_opt_u64(h, s, p, 1e-6);
    }
    if (pw) {
        uint64_t uw = pw->average_uw != VAL_NONE ? pw->average_uw : pw->input;
        if (uw != VAL_NONE)
            g->power_w = (double)uw / 1e6;
    } else {
        snprintf(p, sizeof(p), HWMON "/%s/power%u_average", g->hwmon, ch);
        g->power_w = read_opt_u64(h, s, p, 1e-6);
        if (isnan(g->power_w)) {
            snprintf(p, sizeof(p), HWMON "/%s/power%u_input", g->hwmon, ch);
            g->power_w = read_opt_u64(h, s, p, 1e-6);
        }
    }
    snprintf(p, sizeof(p), HWMON "/%s/temp1_input", g->hwmon);
    g->temp_c = read_opt_u64(h, s, p, 1e-3);
    /* the limit: amdgpu power1_cap, i915/xe powerK_max (µW) */
    snprintf(p, sizeof(p), HWMON "/%s/power%u_cap", g->hwmon, ch);
    g->cap_w = read_opt_u64(h, s, p, 1e-6);
    if (isnan(g->cap_w)) {
        snprintf(p, sizeof(p), HWMON "/%s/power%u_max", g->hwmon, ch);
        g->cap_w = read_opt_u64(h, s, p, 1e-6);
    }
    host_cache_mode(h, HOST_CACHE_STATIC);
    snprintf(p, sizeof(p), HWMON "/%s/power%u_cap_min", g->hwmon, ch);
    g->cap_min_w = read_opt_u64(h, s, p, 1e-6);
    snprintf(p, sizeof(p), HWMON "/%s/power%u_cap_max", g->hwmon, ch);
    g->cap_max_w = read_opt_u64(h, s, p, 1e-6);
    if (isnan(g->cap_max_w)) { /* i915/xe: the card's rated (TDP) maximum */
        snprintf(p, sizeof(p), HWMON "/%s/power%u_rated_max", g->hwmon, ch);
        g->cap_max_w = read_opt_u64(h, s, p, 1e-6);
    }
    host_cache_mode(h, m);
}

static void read_clocks(struct host *h, struct sample *s, const char *card, struct gpu_dev *g)
{
    char p[128];
    if (streq(g->driver, "amdgpu")) {
        snprintf(p, sizeof(p), PCI "/%s/pp_dpm_sclk", g->pdev);
        g->core_mhz = read_dpm(h, s, p);
        snprintf(p, sizeof(p), PCI "/%s/pp_dpm_mclk", g->pdev);
        g->mem_mhz = read_dpm(h, s, p);
    } else if (streq(g->driver, "i915")) {
        snprintf(p, sizeof(p), DRM "/%s/gt_act_freq_mhz", card);
        g->core_mhz = read_opt_u64(h, s, p, 1);
    } else if (streq(g->driver, "xe")) {
        snprintf(p, sizeof(p), PCI "/%s/tile0/gt0/freq0/act_freq", g->pdev);
        g->core_mhz = read_opt_u64(h, s, p, 1);
    }
}

static void read_card(struct host *h, struct sample *s, const char *card, struct gpu_dev *g)
{
    char p[128];
    snprintf(g->id, sizeof(g->id), "%s", card);
    snprintf(g->via, sizeof(g->via), "sysfs");
    read_rpm(h, s, g);
    enum host_cache_mode m = host_cache_mode(h, HOST_CACHE_STATIC);
    snprintf(p, sizeof(p), PCI "/%s/product_name", g->pdev); /* amdgpu, from the FRU */
    read_opt_str(h, s, p, g->name, sizeof(g->name));
    char **names;
    size_t n;
    snprintf(p, sizeof(p), PCI "/%s/hwmon", g->pdev);
    if (host_list(h, HOST_SYS, p, &names, &n) >= 0) {
        if (n > 0)
            snprintf(g->hwmon, sizeof(g->hwmon), "%s", names[0]);
        host_free_list(names, n);
    }
    host_cache_mode(h, m);
    /* A runtime-suspended card is left asleep: reading amdgpu's sensors
     * resumes it where amdgpu_pm.c calls pm_runtime_get_sync() (5.x
     * kernels), costing what the suspend saves.
     * Only what the hwmon sampler read anyway is taken. */
    bool asleep = streq(g->rpm_status, "suspended");
    if (g->hwmon[0])
        read_hwmon(h, s, g, !asleep);
    if (asleep)
        return;
    if (streq(g->driver, "amdgpu")) {
        snprintf(p, sizeof(p), PCI "/%s/gpu_busy_percent", g->pdev);
        g->busy_pct = read_opt_u64(h, s, p, 1);
        snprintf(p, sizeof(p), PCI "/%s/mem_busy_percent", g->pdev);
        g->mem_busy_pct = read_opt_u64(h, s, p, 1);
        snprintf(p, sizeof(p), PCI "/%s/power_dpm_force_performance_level", g->pdev);
        read_opt_str(h, s, p, g->perf_level, sizeof(g->perf_level));
    }
    read_clocks(h, s, card, g);
}

static int collect_sysfs(struct host *h, struct sample *s, struct gpu_sample *gs, size_t *cap)
{
    char **names;
    size_t n;
    enum host_cache_mode m = host_cache_mode(h, HOST_CACHE_STATIC);
    int r = host_list(h, HOST_SYS, DRM, &names, &n);
    host_cache_mode(h, m);
    if (r < 0)
        return r == -ENOENT ? 0 : r;
    for (size_t i = 0; i < n; i++) {
        char pdev[GPU_PDEV_LEN], drv[24];
        if (card_number(names[i]) < 0)
            continue;
        m = host_cache_mode(h, HOST_CACHE_STATIC);
        r = card_pci(h, names[i], pdev, drv, sizeof(drv));
        host_cache_mode(h, m);
        if (r < 0)
            continue;
        gs->v = grow_array(gs->v, sizeof(*gs->v), gs->n + 1, cap);
        struct gpu_dev *g = &gs->v[gs->n++];
        dev_init(g);
        snprintf(g->pdev, sizeof(g->pdev), "%s", pdev);
        snprintf(g->driver, sizeof(g->driver), "%s", drv);
        read_card(h, s, names[i], g);
    }
    host_free_list(names, n);
    return 0;
}

/* ---- NVML ---- */

/* NVML's "00000000:19:00.0" (8-digit domain, upper case) as sysfs writes
 * it: "0000:19:00.0". */
static void nvml_pdev(const char *bus, char out[GPU_PDEV_LEN])
{
    unsigned dom, b, d, f;
    out[0] = '\0';
    if (sscanf(bus, "%x:%x:%x.%x", &dom, &b, &d, &f) == 4)
        snprintf(out, GPU_PDEV_LEN, "%04x:%02x:%02x.%x", dom & 0xffff, b & 0xff, d & 0x1f, f & 7);
}

static bool ok(const struct gpu_reading *r, enum gpu_field f)
{
    return r->state[f] == GPU_FIELD_OK;
}

static void nvml_fill(const struct gpu_reading *r, struct gpu_dev *g)
{
    snprintf(g->id, sizeof(g->id), "nvml%u", r->index);
    snprintf(g->via, sizeof(g->via), "nvml");
    snprintf(g->driver, sizeof(g->driver), "nvidia");
    g->lost = r->lost;
    if (ok(r, GPU_F_NAME))
        snprintf(g->name, sizeof(g->name), "%s", r->name);
    if (ok(r, GPU_F_PCI))
        nvml_pdev(r->bus_id, g->pdev);
    if (ok(r, GPU_F_POWER))
        g->power_w = r->power_mw / 1e3;
    if (ok(r, GPU_F_ENERGY))
        g->energy_j = (double)r->energy_mj / 1e3;
    if (ok(r, GPU_F_LIMIT))
        g->cap_w = r->limit_mw / 1e3;
    if (ok(r, GPU_F_LIMIT_RANGE)) {
        g->cap_min_w = r->limit_min_mw / 1e3;
        g->cap_max_w = r->limit_max_mw / 1e3;
    }
    if (ok(r, GPU_F_UTIL)) {
        g->busy_pct = r->util_gpu_pct;
        g->mem_busy_pct = r->util_mem_pct;
    }
    if (ok(r, GPU_F_CLOCK_SM))
        g->core_mhz = r->sm_mhz;
    if (ok(r, GPU_F_CLOCK_MEM))
        g->mem_mhz = r->mem_mhz;
    if (ok(r, GPU_F_PSTATE) && r->pstate >= 0 && r->pstate <= 15)
        g->pstate = r->pstate;
    if (ok(r, GPU_F_TEMP))
        g->temp_c = r->temp_c;
    if (ok(r, GPU_F_PROCS) && r->nprocs) {
        g->procs = xcalloc(r->nprocs, sizeof(*g->procs));
        for (unsigned i = 0; i < r->nprocs; i++)
            g->procs[i] = (struct gpu_proc){
                .pid = r->procs[i].pid,
                .used_bytes = r->procs[i].used_bytes,
                .sm_util_pct = r->procs[i].sm_util_pct}; /* NaN: no sample (gpu_nvml.h) */
        g->nprocs = r->nprocs;
    }
}

/* Errors other than "no such sensor" are worth a line; a lost GPU one. */
static void nvml_diags(const struct gpu_state *st, const struct gpu_reading *r, struct sample *s)
{
    char where[48];
    snprintf(where, sizeof(where), "NVML GPU %u", r->index);
    if (r->lost) {
        diags_add(&s->diags, where, 0,
                  "the GPU fell off the bus (NVML_ERROR_GPU_IS_LOST): its readings are gone");
        return;
    }
    for (int f = 0; f < GPU_F_COUNT; f++)
        if (r->state[f] == GPU_FIELD_ERROR)
            diags_add(&s->diags, where, 0, "%s: %s", gpu_field_name(f),
                      gpu_nvml_strerror(st->nvml, r->nvml_rc[f]));
}

/* Merge a sysfs card the nvidia driver owns into the NVML GPU at its PCI
 * address: its runtime PM, then the sysfs entry goes. */
static void nvml_merge(struct gpu_sample *gs, size_t nsysfs, struct gpu_dev *g)
{
    for (size_t i = 0; i < nsysfs; i++) {
        struct gpu_dev *c = &gs->v[i];
        if (c->pdev[0] && streq(c->pdev, g->pdev) && streq(c->driver, "nvidia")) {
            memcpy(g->rpm_control, c->rpm_control, sizeof(g->rpm_control));
            memcpy(g->rpm_status, c->rpm_status, sizeof(g->rpm_status));
            g->rpm_suspended_ms = c->rpm_suspended_ms;
            g->rpm_active_ms = c->rpm_active_ms;
            c->driver[0] = '\0'; /* marks it merged */
            return;
        }
    }
}

static void collect_nvml(struct gpu_state *st, struct sample *s, struct gpu_sample *gs, size_t *cap)
{
    struct gpu_reading *rd = xcalloc(GPU_NVML_MAX_GPUS, sizeof(*rd));
    size_t n = 0, nsysfs = gs->n;
    char why[200] = "";
    if (gpu_nvml_read(st->nvml, rd, GPU_NVML_MAX_GPUS, &n, why, sizeof(why)) < 0) {
        diags_add(&s->diags, "NVML", EIO, "%s", why);
        free(rd);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        gs->v = grow_array(gs->v, sizeof(*gs->v), gs->n + 1, cap);
        struct gpu_dev *g = &gs->v[gs->n++];
        dev_init(g);
        nvml_fill(&rd[i], g);
        nvml_diags(st, &rd[i], s);
        if (g->pdev[0])
            nvml_merge(gs, nsysfs, g);
    }
    free(rd);
    /* drop the merged sysfs cards, keeping the order */
    size_t w = 0;
    for (size_t i = 0; i < gs->n; i++)
        if (i >= nsysfs || gs->v[i].driver[0])
            gs->v[w++] = gs->v[i];
    gs->n = w;
}

static int gpu_collect(struct host *h, void *state, struct sample *s)
{
    struct gpu_state *st = state;
    struct gpu_sample *gs = xcalloc(1, sizeof(*gs));
    size_t cap = 0;
    s->gpu = gs;
    int r = collect_sysfs(h, s, gs, &cap);
    if (r < 0)
        sample_diag_read(s, h, HOST_SYS, DRM, r);
    if (st && st->nvml)
        collect_nvml(st, s, gs, &cap);
    return 0;
}

static void gpu_free_sample(struct sample *s)
{
    struct gpu_sample *gs = s->gpu;
    if (!gs)
        return;
    for (size_t i = 0; i < gs->n; i++)
        free(gs->v[i].procs);
    free(gs->v);
    free(gs);
    s->gpu = NULL;
}

/* ---- power ---- */

const struct gpu_dev *gpu_find_pdev(const struct gpu_sample *s, const char *pdev)
{
    if (!s || !pdev || !*pdev)
        return NULL;
    for (size_t i = 0; i < s->n; i++)
        if (streq(s->v[i].pdev, pdev))
            return &s->v[i];
    return NULL;
}

/* The same GPU in the other sample: by PCI address, else by id. */
static const struct gpu_dev *find_same(const struct gpu_sample *s, const struct gpu_dev *g)
{
    if (!s)
        return NULL;
    if (g->pdev[0])
        return gpu_find_pdev(s, g->pdev);
    for (size_t i = 0; i < s->n; i++)
        if (streq(s->v[i].id, g->id))
            return &s->v[i];
    return NULL;
}

/* Watts of y over the interval into p (NaN with a reason in d when the
 * counter cannot be differenced); false when y has no figure at all. */
static bool dev_watts(const struct gpu_dev *x, const struct gpu_dev *y, double interval_s,
                      struct power_reading *p, struct diags *d)
{
    p->joules = NAN;
    p->delta_j = NAN;
    p->watts = NAN;
    if (y->lost)
        return false;
    if (!isnan(y->energy_j) && x && !isnan(x->energy_j) && interval_s > 0) {
        p->joules = y->energy_j;
        if (y->energy_j < x->energy_j) {
            if (d) {
                char where[48];
                snprintf(where, sizeof(where), "gpu %s", y->id);
                diags_add(d, where, 0,
                          "no power over the interval: the energy counter went backwards "
                          "(%.3f to %.3f J: the driver was reloaded)",
                          x->energy_j, y->energy_j);
            }
            return true;
        }
        p->delta_j = y->energy_j - x->energy_j;
        p->watts = p->delta_j / interval_s;
        snprintf(p->via, sizeof(p->via), "%s", y->via);
        return true;
    }
    if (!isnan(y->power_w)) {
        if (!isnan(y->energy_j))
            p->joules = y->energy_j;
        p->watts = y->power_w;
        return true;
    }
    return false;
}

int gpu_power(const struct gpu_sample *a, const struct gpu_sample *b, double interval_s,
              struct power_readings *out, struct diags *d)
{
    const struct gpu_sample *cur = b ? b : a;
    int n = 0;
    if (!cur)
        return 0;
    for (size_t i = 0; i < cur->n; i++) {
        const struct gpu_dev *y = &cur->v[i];
        const struct gpu_dev *x = b ? find_same(a, y) : NULL;
        struct power_reading tmp = {0};
        if (!dev_watts(x, y, interval_s, &tmp, d))
            continue;
        struct power_reading *p = power_readings_add(out);
        *p = tmp;
        snprintf(p->source, sizeof(p->source), "gpu");
        snprintf(p->via, sizeof(p->via), "%s", y->via);
        snprintf(p->domain, sizeof(p->domain), "%s", y->id);
        snprintf(p->label, sizeof(p->label), "%.63s", y->name[0] ? y->name : y->driver);
        p->scope = POWER_SCOPE_DEVICE;
        p->package = -1;
        n++;
    }
    return n;
}

double gpu_watts(const struct gpu_sample *a, const struct gpu_sample *b, double interval_s,
                 const char *pdev)
{
    const struct gpu_dev *y = gpu_find_pdev(b ? b : a, pdev);
    if (!y)
        return NAN;
    struct power_reading p = {0};
    if (!dev_watts(b ? gpu_find_pdev(a, pdev) : NULL, y, interval_s, &p, NULL))
        return NAN;
    return p.watts;
}

const struct sampler gpu_sampler = {
    .name = "gpu",
    .probe = gpu_probe,
    .collect = gpu_collect,
    .free_sample = gpu_free_sample,
    .free_state = gpu_free_state,
};
