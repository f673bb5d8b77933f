/* The report's GPU section: per GPU what it draws (and from which
 * reading), its power limit and range, how busy, clocks, P-state or
 * performance level, temperature and the runtime PM of its PCI function
 * (sense/gpu.h; docs/report-json/gpus.md). The watts are the power
 * section's readings (source "gpu"), so both sections agree. */
#include "view/report_gpu.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/parse.h"
#include "base/util.h"
#include "sense/gpu.h"
#include "sense/gpu_fdinfo.h"

const struct power_reading *report_gpu_reading(const struct report_ctx *c, const struct gpu_dev *g)
{
    const struct power_summary *ps = c->power;
    for (size_t i = 0; ps && i < ps->readings.n; i++) {
        const struct power_reading *p = &ps->readings.v[i];
        if (streq(p->source, "gpu") && streq(p->domain, g->id))
            return p;
    }
    return NULL;
}

/* How the watts were had, or NULL with *ret_why when there are none. */
static const char *watts_how(const struct report_ctx *c, const struct gpu_dev *g, double *ret_w,
                             const char **ret_why)
{
    const struct power_reading *p = report_gpu_reading(c, g);
    *ret_w = NAN;
    *ret_why = NULL;
    if (g->lost) {
        *ret_why = "the GPU fell off the bus (lost)";
        return NULL;
    }
    if (!p) {
        if (streq(g->rpm_status, "suspended") && isnan(g->power_w))
            *ret_why = "runtime-suspended: not read (reading its sensors could wake it)";
        else if (streq(g->driver, "nvidia") && streq(g->via, "sysfs"))
            *ret_why = "the nvidia driver's readings come through NVML, not loaded here";
        else
            *ret_why = g->hwmon[0] || streq(g->via, "nvml")
                           ? "the driver gives no power reading for this GPU"
                           : "no power sensor: the driver registers no hwmon chip";
        return NULL;
    }
    if (isnan(p->watts)) {
        *ret_why = p->stuck ? "the energy counter did not advance"
                            : "the energy counter went backwards (driver reloaded)";
        return NULL;
    }
    *ret_w = p->watts;
    return !isnan(p->delta_j) ? "energy_counter" : "driver_reading";
}

static void rpm_json(const struct gpu_dev *g, struct json *j)
{
    json_key(j, "runtime_pm");
    json_object_begin(j);
    json_kv_string(j, "control", g->rpm_control[0] ? g->rpm_control : NULL);
    json_kv_string(j, "status", g->rpm_status[0] ? g->rpm_status : NULL);
    if (g->rpm_suspended_ms == VAL_NONE)
        json_kv_null(j, "suspended_ms");
    else
        json_kv_u64(j, "suspended_ms", g->rpm_suspended_ms);
    if (g->rpm_active_ms == VAL_NONE)
        json_kv_null(j, "active_ms");
    else
        json_kv_u64(j, "active_ms", g->rpm_active_ms);
    json_object_end(j);
}

static void procs_json(const struct gpu_dev *g, struct json *j)
{
    json_key(j, "processes");
    json_array_begin(j);
    for (size_t i = 0; i < g->nprocs; i++) {
        json_object_begin(j);
        json_kv_u64(j, "pid", g->procs[i].pid);
        if (g->procs[i].used_bytes == VAL_NONE)
            json_kv_null(j, "used_bytes");
        else
            json_kv_u64(j, "used_bytes", g->procs[i].used_bytes);
        json_object_end(j);
    }
    json_array_end(j);
}

static void gpu_json(const struct report_ctx *c, const struct gpu_dev *g, struct json *j)
{
    double w;
    const char *why;
    const char *how = watts_how(c, g, &w, &why);
    json_object_begin(j);
    json_kv_string(j, "id", g->id);
    json_kv_string(j, "via", g->via);
    json_kv_string(j, "driver", g->driver[0] ? g->driver : NULL);
    json_kv_string(j, "name", g->name[0] ? g->name : NULL);
    json_kv_string(j, "pdev", g->pdev[0] ? g->pdev : NULL);
    json_kv_string(j, "hwmon", g->hwmon[0] ? g->hwmon : NULL);
    json_kv_bool(j, "lost", g->lost);
    json_kv_double(j, "watts", w);
    json_kv_string(j, "watts_from", how);
    json_kv_string(j, "watts_absent", why);
    json_kv_double(j, "energy_j", g->energy_j);
    json_kv_double(j, "limit_w", g->cap_w);
    json_kv_double(j, "limit_min_w", g->cap_min_w);
    json_kv_double(j, "limit_max_w", g->cap_max_w);
    json_kv_double(j, "busy_pct", g->busy_pct);
    json_kv_double(j, "mem_busy_pct", g->mem_busy_pct);
    json_kv_double(j, "core_mhz", g->core_mhz);
    json_kv_double(j, "mem_mhz", g->mem_mhz);
    if (g->pstate >= 0)
        json_kv_i64(j, "pstate", g->pstate);
    else
        json_kv_null(j, "pstate");
    json_kv_string(j, "perf_level", g->perf_level[0] ? g->perf_level : NULL);
    json_kv_double(j, "temp_c", g->temp_c);
    rpm_json(g, j);
    procs_json(g, j);
    json_object_end(j);
}

static const char *section_absent(const struct report_ctx *c)
{
    if (c->cur->gpu)
        return c->cur->gpu->n ? NULL : "no GPU found";
    const char *why = report_unavailable(c, SAMPLER_GPU);
    return why ? why : "the GPUs were not read";
}

static void gpus_json(const struct report_ctx *c, struct json *j)
{
    const struct gpu_sample *g = c->cur->gpu;
    json_object_begin(j);
    json_kv_string(j, "absent", section_absent(c));
    json_key(j, "devices");
    json_array_begin(j);
    for (size_t i = 0; g && i < g->n; i++)
        gpu_json(c, &g->v[i], j);
    json_array_end(j);
    json_object_end(j);
}

/* "412 W", or "?" when unknown. */
static void watts_or_q(struct strbuf *b, double v)
{
    if (isnan(v))
        strbuf_append(b, "?");
    else
        strbuf_appendf(b, "%.0f", v);
}

static void limits_text(const struct gpu_dev *g, struct strbuf *b)
{
    if (!isnan(g->cap_w))
        strbuf_appendf(b, "; limit %.0f W", g->cap_w);
    if (isnan(g->cap_min_w) && isnan(g->cap_max_w))
        return;
    strbuf_append(b, isnan(g->cap_w) ? "; limit range " : " (");
    watts_or_q(b, g->cap_min_w);
    strbuf_append(b, "-");
    watts_or_q(b, g->cap_max_w);
    strbuf_append(b, isnan(g->cap_w) ? " W" : " W)");
}

static void state_text(const struct gpu_dev *g, struct strbuf *b)
{
    if (!isnan(g->busy_pct))
        strbuf_appendf(b, "; busy %.0f %%", g->busy_pct);
    if (!isnan(g->mem_busy_pct))
        strbuf_appendf(b, ", memory %.0f %%", g->mem_busy_pct);
    if (!isnan(g->core_mhz))
        strbuf_appendf(b, "; core %.0f MHz", g->core_mhz);
    if (!isnan(g->mem_mhz))
        strbuf_appendf(b, ", memory %.0f MHz", g->mem_mhz);
    if (g->pstate >= 0)
        strbuf_appendf(b, "; P%d", g->pstate);
    if (g->perf_level[0])
        strbuf_appendf(b, "; perf level %s", g->perf_level);
    if (!isnan(g->temp_c))
        strbuf_appendf(b, "; %.0f °C", g->temp_c);
    if (g->rpm_status[0])
        strbuf_appendf(b, "; runtime PM %s, %s", g->rpm_control[0] ? g->rpm_control : "?",
                       g->rpm_status);
    if (g->nprocs)
        strbuf_appendf(b, "; %zu compute process%s", g->nprocs, g->nprocs == 1 ? "" : "es");
}

static void gpu_text(const struct report_ctx *c, const struct gpu_dev *g, struct strbuf *out)
{
    double w;
    const char *why;
    const char *how = watts_how(c, g, &w, &why);
    strbuf_appendf(out, "  %-6s %-7s %-12s %s%s\n", g->id, g->driver[0] ? g->driver : "?",
                   g->pdev[0] ? g->pdev : "-", g->name[0] ? g->name : "(no product name)",
                   g->lost ? "  LOST: fell off the bus" : "");
    struct strbuf b = {0};
    if (how)
        strbuf_appendf(&b, "%.1f W (%s)", w,
                       streq(how, "energy_counter") ? "energy counter" : "driver's reading");
    else
        strbuf_appendf(&b, "W unknown: %s", why);
    limits_text(g, &b);
    state_text(g, &b);
    report_wrap(out, "         ", 9, strbuf_str(&b));
    strbuf_free(&b);
}

static void gpus_text(const struct report_ctx *c, struct strbuf *out)
{
    const char *why = section_absent(c);
    if (why) {
        report_wrap(out, "  not available: ", 4, why);
        return;
    }
    const struct gpu_sample *g = c->cur->gpu;
    for (size_t i = 0; i < g->n; i++)
        gpu_text(c, &g->v[i], out);
}

const struct report_section report_section_gpus = {
    .key = "gpus",
    .title = "GPUs",
    .json = gpus_json,
    .text = gpus_text,
};

/* ---- holders, for the advice ---- */

static void holders_add(struct gpu_holders *hs, size_t *cap, const char *pdev)
{
    for (size_t i = 0; i < hs->n; i++)
        if (streq(hs->pdev[i], pdev))
            return;
    hs->pdev = grow_array(hs->pdev, sizeof(*hs->pdev), hs->n + 1, cap);
    snprintf(hs->pdev[hs->n++], GPU_PDEV_LEN, "%.15s", pdev);
}

void report_gpu_holders(const struct report_ctx *c, struct gpu_holders *ret)
{
    *ret = (struct gpu_holders){0};
    char **names;
    size_t n, cap = 0;
    if (host_list(c->h, HOST_PROC, ".", &names, &n) < 0) {
        ret->unreadable = 1;
        return;
    }
    for (size_t i = 0; i < n; i++) {
        uint64_t pid;
        if (!str_all_digits(names[i]) || parse_u64(names[i], &pid) < 0 || pid > INT32_MAX)
            continue;
        struct gpu_fdinfo_client *cl = NULL;
        size_t ncl = 0;
        int r = gpu_fdinfo_read_pid(c->h, (pid_t)pid, &cl, &ncl);
        if (r == -EACCES || r == -EPERM)
            ret->unreadable++;
        for (size_t k = 0; r >= 0 && k < ncl; k++)
            if (cl[k].pdev[0])
                holders_add(ret, &cap, cl[k].pdev);
        free(cl);
    }
    host_free_list(names, n);
}

void report_gpu_holders_free(struct gpu_holders *g)
{
    free(g->pdev);
    *g = (struct gpu_holders){0};
}

int report_gpu_held(const struct gpu_holders *hs, const struct gpu_dev *g)
{
    if (streq(g->via, "nvml"))
        return g->nprocs > 0;
    if (streq(g->driver, "nvidia"))
        return -1;
    for (size_t i = 0; i < hs->n; i++)
        if (streq(hs->pdev[i], g->pdev))
            return 1;
    return hs->unreadable ? -1 : 0;
}
