/* Memory metrics: the nodes and EDAC read once, meminfo per sample, the
 * node idle totals folded per interval, rendered from memory only. */
#include "agent/metrics_memory.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "sense/procstat.h"
#include "view/report_memory.h"

/* The report's rule (view/report_memory.c): a CPU busier than this, in %
 * of the interval, keeps its node from counting as idle. */
#define IDLE_BUSY_PCT 1.0

struct node_idle {
    int id;
    double seconds;
    bool present; /* judged in the last interval, or earlier: exported */
};

struct agent_memory {
    struct memory_info info;
    struct node_idle *idle; /* info.nnodes, in the same order */
};

static void idle_remap(struct agent_memory *m, const struct node_idle *old, size_t nold)
{
    m->idle = xcalloc(m->info.nnodes + 1, sizeof(*m->idle));
    for (size_t i = 0; i < m->info.nnodes; i++) {
        m->idle[i].id = m->info.nodes[i].id;
        for (size_t k = 0; k < nold; k++)
            if (old[k].id == m->idle[i].id)
                m->idle[i] = old[k];
    }
}

int agent_memory_new(struct host *h, struct agent_memory **ret)
{
    struct agent_memory *m = xcalloc(1, sizeof(*m));
    int r = memory_read(h, &m->info);
    if (r < 0) {
        free(m);
        return r;
    }
    idle_remap(m, NULL, 0);
    *ret = m;
    return 0;
}

void agent_memory_free(struct agent_memory *m)
{
    if (!m)
        return;
    memory_info_free(&m->info);
    free(m->idle);
    free(m);
}

void agent_memory_reload(struct agent_memory *m, struct host *h)
{
    struct memory_info info;
    enum host_cache_mode was = host_cache_mode(h, HOST_CACHE_OFF); /* read anew */
    int r = memory_read(h, &info);
    host_cache_mode(h, was);
    if (r < 0)
        return; /* out of memory: keep what was read before */
    struct node_idle *old = m->idle;
    size_t nold = m->info.nnodes;
    memory_info_free(&m->info);
    m->info = info;
    idle_remap(m, old, nold);
    free(old);
}

/* node_read_meminfo() (drivers/base/node.c) prints MemTotal, MemFree and
 * MemUsed first, then some 30 lines the agent does not export: parse the
 * first three lines only (the whole file cost 130,000 instructions a
 * sample, two sscanf() per line), the whole text where they are not all
 * there (another kernel's order). */
static int meminfo_head_parse(const char *text, size_t len, int node, struct memory_node *ret)
{
    const char *p = text, *end = text + len;
    for (int k = 0; k < 3 && p && p < end; k++) {
        p = memchr(p, '\n', (size_t)(end - p));
        p = p ? p + 1 : NULL;
    }
    size_t head = p ? (size_t)(p - text) : len;
    int r = memory_meminfo_parse(text, head, node, ret);
    if (r == 0 && ret->free_kb != MEMORY_NONE && ret->used_kb != MEMORY_NONE)
        return 0;
    return memory_meminfo_parse(text, len, node, ret);
}

static void meminfo_refresh(struct host *h, struct memory_node *nd)
{
    _cleanup_free_ char *text = NULL;
    size_t len = 0;
    struct memory_node now = {
        .id = nd->id, .total_kb = MEMORY_NONE, .free_kb = MEMORY_NONE, .used_kb = MEMORY_NONE};
    char path[80];
    snprintf(path, sizeof(path), "devices/system/node/node%d/meminfo", nd->id);
    int r = host_read(h, HOST_SYS, path, &text, &len);
    if (r >= 0)
        r = meminfo_head_parse(text, len, nd->id, &now);
    nd->total_kb = now.total_kb;
    nd->free_kb = now.free_kb;
    nd->used_kb = now.used_kb;
    if (r == -EBADMSG)
        snprintf(nd->why, sizeof(nd->why), "sys/%s has no \"Node %d MemTotal:\" line", path,
                 nd->id);
    else if (r < 0)
        snprintf(nd->why, sizeof(nd->why), "no sys/%s: %s", path, strerror(-r));
    else
        nd->why[0] = '\0';
}

/* Whether every CPU of the set was idle over the interval; -1 when one
 * cannot be judged. */
static int cpus_idle(const struct report_ctx *c, const struct cpuset *cpus)
{
    if (!c->a->procstat || !c->b->procstat)
        return -1;
    CPUSET_FOREACH (cpu, cpus) {
        struct procstat_util u;
        if (procstat_util(procstat_find_cpu(c->a->procstat, cpu),
                          procstat_find_cpu(c->b->procstat, cpu), &u) < 0)
            return -1;
        if (u.busy_pct >= IDLE_BUSY_PCT)
            return 0;
    }
    return 1;
}

void agent_memory_update(struct agent_memory *m, struct host *h, const struct report_ctx *c)
{
    enum host_cache_mode was = host_cache_mode(h, HOST_CACHE_DYNAMIC);
    for (size_t i = 0; i < m->info.nnodes; i++)
        meminfo_refresh(h, &m->info.nodes[i]);
    host_cache_mode(h, was);
    if (!c->b || !(c->interval_s > 0))
        return;
    for (size_t i = 0; i < m->info.nnodes; i++) {
        const struct cpuset *cpus = &m->info.nodes[i].cpus;
        int idle = cpuset_count(cpus) ? cpus_idle(c, cpus) : 1; /* memory-only: idle */
        if (idle < 0)
            continue;
        m->idle[i].seconds += idle ? c->interval_s : 0;
        m->idle[i].present = true;
    }
}

const struct memory_info *agent_memory_info(const struct agent_memory *m)
{
    return m ? &m->info : NULL;
}

/* ---- the families ---- */

static const struct fam f_share =
    GAUGE("watt_memory_dram_share_ratio", "ratio",
          "DRAM power (the RAPL dram domains) as a share of the measured node power, over the "
          "last interval.");
static const struct fam f_total =
    GAUGE("watt_memory_node_total_bytes", "bytes", "Memory of the NUMA node (meminfo MemTotal).");
static const struct fam f_used =
    GAUGE("watt_memory_node_used_bytes", "bytes",
          "Memory in use on the NUMA node (meminfo MemUsed: total - free).");
static const struct fam f_idle =
    COUNTER("watt_memory_node_cpus_idle_seconds_total", "seconds",
            "Time all the node's CPUs were idle (none busier than 1 % of a sample interval), so "
            "its package and memory controller could idle; rate() is the share of time.");
static const struct fam f_dimms =
    GAUGE("watt_memory_controller_dimms", NULL,
          "Populated DIMMs (or csrows) behind each EDAC memory controller.");
static const struct fam f_size = GAUGE("watt_memory_controller_size_bytes", "bytes",
                                       "Memory behind each EDAC memory controller (size_mb).");
static const struct fam f_unavail =
    GAUGE("watt_memory_unavailable", NULL,
          "1 for each memory figure not measured here, with the reason: what is dram_share, "
          "numa_nodes, edac or nodeN_meminfo.");

static void node_series(struct mw *w, int id)
{
    mw_series(w);
    mw_label_int(w, "node", id);
}

static void render_nodes(struct mw *w, const struct agent_memory *m)
{
    const struct memory_info *mi = &m->info;
    for (int pass = 0; pass < 2; pass++) {
        mw_fam(w, pass ? &f_used : &f_total);
        for (size_t i = 0; i < mi->nnodes; i++) {
            uint64_t kb = pass ? mi->nodes[i].used_kb : mi->nodes[i].total_kb;
            if (kb == MEMORY_NONE)
                continue;
            node_series(w, mi->nodes[i].id);
            mw_value_u64(w, kb * 1024);
        }
    }
    mw_fam(w, &f_idle);
    for (size_t i = 0; i < mi->nnodes; i++)
        if (m->idle[i].present) {
            node_series(w, m->idle[i].id);
            mw_value_double(w, m->idle[i].seconds);
        }
}

static void ctl_series(struct mw *w, const struct memory_ctl *mc)
{
    mw_series(w);
    mw_label_int(w, "controller", (int)mc->id);
    mw_label(w, "name", mc->name);
}

static void render_ctls(struct mw *w, const struct memory_info *mi)
{
    mw_fam(w, &f_dimms);
    for (size_t i = 0; i < mi->nctls; i++) {
        ctl_series(w, &mi->ctls[i]);
        mw_value_u64(w, mi->ctls[i].ndimms);
    }
    mw_fam(w, &f_size);
    for (size_t i = 0; i < mi->nctls; i++)
        if (mi->ctls[i].size_mb != MEMORY_NONE) {
            ctl_series(w, &mi->ctls[i]);
            mw_value_u64(w, mi->ctls[i].size_mb << 20);
        }
}

static void unavail_series(struct mw *w, const char *what, const char *why)
{
    mw_series(w);
    mw_label(w, "what", what);
    mw_label(w, "reason", why);
    mw_value_u64(w, 1);
}

static void render_unavailable(struct mw *w, const struct memory_info *mi, const char *share_why)
{
    mw_fam(w, &f_unavail);
    if (share_why)
        unavail_series(w, "dram_share", share_why);
    if (mi && mi->nodes_why[0])
        unavail_series(w, "numa_nodes", mi->nodes_why);
    if (mi && mi->edac_why[0])
        unavail_series(w, "edac", mi->edac_why);
    for (size_t i = 0; mi && i < mi->nnodes; i++)
        if (mi->nodes[i].why[0]) {
            char what[32];
            snprintf(what, sizeof(what), "node%d_meminfo", mi->nodes[i].id);
            unavail_series(w, what, mi->nodes[i].why);
        }
}

void metrics_render_memory(struct mw *w, const struct agent_memory *m, const struct report_ctx *c)
{
    double dram_w, node_w, pct = NAN;
    const char *why = NULL;
    if (c->power) { /* no power summary: nothing to compare, nothing to say */
        pct = report_dram_share(c, &dram_w, &node_w, &why);
        if (!isfinite(pct) && !why)
            why = "the node drew no power";
    }
    mw_fam(w, &f_share);
    if (isfinite(pct)) {
        mw_series(w);
        mw_value_double(w, pct / 100.0);
    }
    if (m) {
        render_nodes(w, m);
        render_ctls(w, &m->info);
    }
    render_unavailable(w, m ? &m->info : NULL, why);
}
