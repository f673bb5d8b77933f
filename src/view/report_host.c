/* The report's first section: which machine, which root, its topology. */
#include <math.h>
#include <stdlib.h>

#include "base/util.h"
#include "sense/clock.h"
#include "view/report.h"

static void cpus_json(struct json *j, const char *key, const struct cpuset *set)
{
    _cleanup_free_ char *s = cpuset_format(set);
    json_kv_string(j, key, s);
}

static void offline_set(const struct topology *t, struct cpuset *ret)
{
    *ret = (struct cpuset){0};
    CPUSET_FOREACH (cpu, &t->possible)
        if (!cpuset_has(&t->online, (unsigned)cpu))
            cpuset_add(ret, (unsigned)cpu);
}

static void package_cpus(const struct topology *t, int pkg, struct cpuset *ret, unsigned *cores)
{
    *ret = (struct cpuset){0};
    *cores = 0;
    for (unsigned i = 0; i < t->ncpu; i++)
        if (t->cpu[i].online && t->cpu[i].package == pkg) {
            cpuset_add(ret, i);
            *cores += t->cpu[i].thread == 0;
        }
}

static void host_json(const struct report_ctx *c, struct json *j)
{
    const struct topology *t = &c->cur->topo;
    json_object_begin(j);
    json_kv_string(j, "hostname", c->cur->hostname);
    json_kv_string(j, "kernel", c->cur->kernel);
    json_kv_string(j, "cpu_model", clock_cpu_model(c->cur->clock));
    json_kv_bool(j, "virtualised", clock_is_vm(c->cur->clock));
    cpus_json(j, "cpus_possible", &t->possible);
    cpus_json(j, "cpus_present", &t->present);
    cpus_json(j, "cpus_online", &t->online);
    struct cpuset off;
    offline_set(t, &off);
    cpus_json(j, "cpus_offline", &off);
    cpuset_free(&off);
    json_kv_u64(j, "online_cpus", cpuset_count(&t->online));
    json_kv_u64(j, "cores", t->ncores);
    json_kv_u64(j, "packages", t->npackages);
    json_kv_u64(j, "numa_nodes", t->nnodes);
    json_key(j, "package_list");
    json_array_begin(j);
    for (unsigned p = 0; p < t->npackages; p++) {
        struct cpuset cpus;
        unsigned cores;
        package_cpus(t, t->package_ids[p], &cpus, &cores);
        json_object_begin(j);
        json_kv_i64(j, "id", t->package_ids[p]);
        cpus_json(j, "cpus", &cpus);
        json_kv_u64(j, "cores", cores);
        json_kv_u64(j, "threads", cpuset_count(&cpus));
        json_object_end(j);
        cpuset_free(&cpus);
    }
    json_array_end(j);
    json_object_end(j);
}

static void host_text(const struct report_ctx *c, struct strbuf *out)
{
    const struct topology *t = &c->cur->topo;
    const char *model = clock_cpu_model(c->cur->clock);
    strbuf_appendf(out, "  %s, Linux %s%s\n", c->cur->hostname ? c->cur->hostname : "(no hostname)",
                   c->cur->kernel ? c->cur->kernel : "(unknown)",
                   clock_is_vm(c->cur->clock) ? ", virtual machine" : "");
    if (!c->h->live)
        strbuf_appendf(out, "  recorded root: %s\n", c->h->root);
    if (model)
        strbuf_appendf(out, "  %s\n", model);
    _cleanup_free_ char *online = cpuset_format(&t->online);
    struct cpuset off;
    offline_set(t, &off);
    _cleanup_free_ char *offline = cpuset_format(&off);
    strbuf_appendf(out, "  %u package%s, %u cores, %u CPUs online (%s)", t->npackages,
                   t->npackages == 1 ? "" : "s", t->ncores, cpuset_count(&t->online), online);
    if (cpuset_count(&off))
        strbuf_appendf(out, ", %u offline (%s)", cpuset_count(&off), offline);
    strbuf_appendf(out, ", %u NUMA node%s\n", t->nnodes, t->nnodes == 1 ? "" : "s");
    cpuset_free(&off);
    if (c->b)
        strbuf_appendf(out, "  interval %.3f s; one sample cost %.2f ms\n", c->interval_s,
                       (double)c->cur->cost_ns / 1e6);
    else
        strbuf_appendf(out, "  one snapshot (--interval 0): no rates; cost %.2f ms\n",
                       (double)c->cur->cost_ns / 1e6);
}

const struct report_section report_section_host = {
    .key = "host",
    .title = "Host",
    .json = host_json,
    .text = host_text,
};
