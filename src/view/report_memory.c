/* The report's memory section: DRAM power as a share of the node's, per
 * NUMA node the memory in use and whether all its CPUs were idle over the
 * interval (so its memory controller could idle and DRAM self-refresh),
 * and the DIMMs EDAC shows per memory controller. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/util.h"
#include "sense/memory.h"
#include "sense/procstat.h"
#include "view/report_memory.h"

/* A CPU busier than this over the interval (% of its time, /proc/stat
 * ticks) keeps its node from counting as idle. */
#define MEM_IDLE_BUSY_PCT 1.0

struct dram_share {
    double dram_w; /* sum of RAPL dram domains, NaN when none gave a rate */
    double node_w; /* the power section's node figure */
    double pct;    /* dram_w / node_w, NaN when either is unknown */
    const char *absent;
};

static void dram_share(const struct report_ctx *c, struct dram_share *ret)
{
    const struct power_summary *ps = c->power;
    *ret = (struct dram_share){.dram_w = NAN, .node_w = NAN, .pct = NAN};
    unsigned n = 0;
    for (size_t i = 0; ps && i < ps->readings.n; i++) {
        const struct power_reading *p = &ps->readings.v[i];
        if (p->scope != POWER_SCOPE_DRAM)
            continue;
        n++;
        if (!isnan(p->watts))
            ret->dram_w = (isnan(ret->dram_w) ? 0 : ret->dram_w) + p->watts;
    }
    if (ps && ps->measured)
        ret->node_w = ps->it_w;
    if (!n)
        ret->absent = "no RAPL dram domain here (AMD and VMs have none; some Intel parts "
                      "neither)";
    else if (isnan(ret->dram_w))
        ret->absent = c->b ? "the dram counters gave no rate" : "no interval (--interval 0)";
    else if (isnan(ret->node_w))
        ret->absent = "no measured node power to compare with";
    else if (ret->node_w > 0)
        ret->pct = 100.0 * ret->dram_w / ret->node_w;
}

double report_dram_share(const struct report_ctx *c, double *ret_dram_w, double *ret_node_w,
                         const char **ret_why)
{
    struct dram_share ds;
    dram_share(c, &ds);
    *ret_dram_w = ds.dram_w;
    *ret_node_w = ds.node_w;
    *ret_why = ds.absent;
    return ds.pct;
}

/* The busiest of the node's CPUs over the interval, in %; NaN when none
 * could be judged. */
static double node_max_busy(const struct report_ctx *c, const struct cpuset *cpus)
{
    double max = NAN;
    if (!c->b || !c->a->procstat || !c->b->procstat)
        return NAN;
    CPUSET_FOREACH (cpu, cpus) {
        struct procstat_util u;
        if (procstat_util(procstat_find_cpu(c->a->procstat, cpu),
                          procstat_find_cpu(c->b->procstat, cpu), &u) < 0)
            return NAN; /* one CPU unknown: the node cannot be called idle */
        if (isnan(max) || u.busy_pct > max)
            max = u.busy_pct;
    }
    return max;
}

static double pct_of(uint64_t part, uint64_t whole)
{
    if (part == MEMORY_NONE || whole == MEMORY_NONE || !whole)
        return NAN;
    return 100.0 * (double)part / (double)whole;
}

static void u64_or_null(struct json *j, const char *key, uint64_t v)
{
    if (v == MEMORY_NONE)
        json_kv_null(j, key);
    else
        json_kv_u64(j, key, v);
}

static void node_json(const struct report_ctx *c, const struct memory_node *nd, struct json *j)
{
    json_object_begin(j);
    json_kv_i64(j, "id", nd->id);
    _cleanup_free_ char *cpus = cpuset_format(&nd->cpus);
    json_kv_string(j, "cpus", cpus);
    u64_or_null(j, "total_kb", nd->total_kb);
    u64_or_null(j, "used_kb", nd->used_kb);
    u64_or_null(j, "free_kb", nd->free_kb);
    json_kv_double(j, "used_pct", pct_of(nd->used_kb, nd->total_kb));
    double busy = cpuset_count(&nd->cpus) ? node_max_busy(c, &nd->cpus) : NAN;
    json_kv_double(j, "max_cpu_busy_pct", busy);
    if (!cpuset_count(&nd->cpus))
        json_kv_bool(j, "cpus_all_idle", true); /* a memory-only node */
    else if (isnan(busy))
        json_kv_null(j, "cpus_all_idle");
    else
        json_kv_bool(j, "cpus_all_idle", busy < MEM_IDLE_BUSY_PCT);
    json_kv_string(j, "absent", nd->why[0] ? nd->why : NULL);
    json_object_end(j);
}

static void ctl_json(const struct memory_ctl *mc, struct json *j)
{
    json_object_begin(j);
    json_kv_u64(j, "id", mc->id);
    json_kv_string(j, "name", mc->name[0] ? mc->name : NULL);
    u64_or_null(j, "size_mb", mc->size_mb);
    json_kv_string(j, "layout", mc->csrow_layout ? "csrow" : "dimm");
    json_kv_u64(j, "dimm_count", mc->ndimms);
    json_key(j, "dimms");
    json_array_begin(j);
    for (size_t i = 0; i < mc->ndimms; i++) {
        const struct memory_dimm *d = &mc->dimms[i];
        json_object_begin(j);
        json_kv_u64(j, "index", d->index);
        json_kv_string(j, "label", d->label[0] ? d->label : NULL);
        json_kv_string(j, "location", d->location[0] ? d->location : NULL);
        json_kv_string(j, "mem_type", d->mem_type[0] ? d->mem_type : NULL);
        u64_or_null(j, "size_mb", d->size_mb);
        json_object_end(j);
    }
    json_array_end(j);
    json_object_end(j);
}

static void memory_json(const struct report_ctx *c, struct json *j)
{
    const struct memory_info *m = c->memory;
    struct dram_share ds;
    dram_share(c, &ds);
    json_object_begin(j);
    json_key(j, "dram");
    json_object_begin(j);
    json_kv_double(j, "watts", ds.dram_w);
    json_kv_double(j, "node_watts", ds.node_w);
    json_kv_double(j, "share_pct", ds.pct);
    json_kv_string(j, "node_source", c->power && c->power->measured ? c->power->source : NULL);
    json_kv_string(j, "absent", ds.absent);
    json_object_end(j);
    json_kv_double(j, "idle_busy_threshold_pct", MEM_IDLE_BUSY_PCT);
    json_key(j, "nodes");
    json_array_begin(j);
    for (size_t i = 0; m && i < m->nnodes; i++)
        node_json(c, &m->nodes[i], j);
    json_array_end(j);
    json_kv_string(j, "nodes_absent", !m ? "not read" : m->nodes_why[0] ? m->nodes_why : NULL);
    json_key(j, "controllers");
    json_array_begin(j);
    for (size_t i = 0; m && i < m->nctls; i++)
        ctl_json(&m->ctls[i], j);
    json_array_end(j);
    json_kv_string(j, "controllers_absent", !m ? "not read" : m->edac_why[0] ? m->edac_why : NULL);
    json_object_end(j);
}

static void dram_text(const struct report_ctx *c, struct strbuf *out)
{
    struct dram_share ds;
    dram_share(c, &ds);
    if (!isnan(ds.pct))
        strbuf_appendf(out, "  DRAM %.1f W of %.1f W node (%s): %.1f %%\n", ds.dram_w, ds.node_w,
                       c->power->source, ds.pct);
    else if (!isnan(ds.dram_w))
        strbuf_appendf(out, "  DRAM %.1f W; share of the node unknown: %s\n", ds.dram_w, ds.absent);
    else
        strbuf_appendf(out, "  DRAM power: %s\n", ds.absent);
}

static void gib(char *buf, size_t n, uint64_t kb)
{
    if (kb == MEMORY_NONE)
        snprintf(buf, n, "?");
    else
        snprintf(buf, n, "%.1f", (double)kb / (1024.0 * 1024.0));
}

static void node_text(const struct report_ctx *c, const struct memory_node *nd, struct strbuf *out)
{
    char used[24], total[24], idle[64];
    gib(used, sizeof(used), nd->used_kb);
    gib(total, sizeof(total), nd->total_kb);
    _cleanup_free_ char *cpus = cpuset_format(&nd->cpus);
    double busy = cpuset_count(&nd->cpus) ? node_max_busy(c, &nd->cpus) : NAN;
    if (!cpuset_count(&nd->cpus))
        snprintf(idle, sizeof(idle), "no CPUs");
    else if (isnan(busy))
        snprintf(idle, sizeof(idle), "%s", c->b ? "busy unknown" : "no interval");
    else
        snprintf(idle, sizeof(idle), "%s (busiest CPU %.1f %%)",
                 busy < MEM_IDLE_BUSY_PCT ? "all idle" : "busy", busy);
    char pct[16];
    double p = pct_of(nd->used_kb, nd->total_kb);
    if (isnan(p))
        snprintf(pct, sizeof(pct), "-");
    else
        snprintf(pct, sizeof(pct), "%.1f %%", p);
    strbuf_appendf(out, "  node%-3d %8s %8s %7s  %-12s %s\n", nd->id, used, total, pct,
                   cpus[0] ? cpus : "-", idle);
    if (nd->why[0])
        report_wrap(out, "          ", 10, nd->why);
}

static void ctl_text(const struct memory_ctl *mc, struct strbuf *out)
{
    uint64_t sum = 0;
    size_t known = 0;
    for (size_t i = 0; i < mc->ndimms; i++)
        if (mc->dimms[i].size_mb != MEMORY_NONE) {
            sum += mc->dimms[i].size_mb;
            known++;
        }
    char total[32];
    if (known == mc->ndimms && known)
        snprintf(total, sizeof(total), "%7.1f GiB", (double)sum / 1024.0);
    else
        snprintf(total, sizeof(total), "size unknown");
    strbuf_appendf(out, "  mc%-3u %-28s %2zu DIMM%s %s%s\n", mc->id,
                   mc->name[0] ? mc->name : "(no name)", mc->ndimms, mc->ndimms == 1 ? " " : "s",
                   total, mc->csrow_layout ? "  (csrow layout)" : "");
    for (size_t i = 0; i < mc->ndimms; i++) {
        const struct memory_dimm *d = &mc->dimms[i];
        char size[24];
        if (d->size_mb == MEMORY_NONE)
            snprintf(size, sizeof(size), "?");
        else
            snprintf(size, sizeof(size), "%.0f GiB", (double)d->size_mb / 1024.0);
        strbuf_appendf(out, "      %-34s %-18s %-16s %s\n", d->label[0] ? d->label : "(no label)",
                       d->location, d->mem_type, size);
    }
}

static void memory_text(const struct report_ctx *c, struct strbuf *out)
{
    const struct memory_info *m = c->memory;
    dram_text(c, out);
    if (!m) {
        strbuf_appendf(out, "  NUMA nodes and DIMMs: not read\n");
        return;
    }
    if (m->nnodes) {
        strbuf_appendf(out,
                       "  node       used    total    used  CPUs         CPUs over the "
                       "interval (GiB; idle: each < %.0f %% busy)\n",
                       MEM_IDLE_BUSY_PCT);
        for (size_t i = 0; i < m->nnodes; i++)
            node_text(c, &m->nodes[i], out);
    } else {
        report_wrap(out, "  NUMA nodes: ", 4, m->nodes_why);
    }
    if (m->nctls) {
        for (size_t i = 0; i < m->nctls; i++)
            ctl_text(&m->ctls[i], out);
    } else {
        report_wrap(out, "  DIMMs: ", 4, m->edac_why);
    }
}

const struct report_section report_section_memory = {
    .key = "memory",
    .title = "Memory",
    .json = memory_json,
    .text = memory_text,
};
