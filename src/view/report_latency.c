/* Latency constraints in force (PM QoS) and the C-states they exclude. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/table.h"
#include "base/util.h"
#include "sense/cpuidle.h"
#include "sense/latency.h"
#include "view/report.h"

static const char *state_word(int64_t v)
{
    return v == LATENCY_UNKNOWN ? "unknown" : v == LATENCY_NONE ? "none" : "constraint";
}

static void value_json(struct json *j, const char *key, int64_t v)
{
    json_key(j, key);
    if (v == LATENCY_UNKNOWN || v == LATENCY_NONE)
        json_null(j);
    else
        json_i64(j, v);
}

static void excluded_json(const struct report_ctx *c, const struct latency_sample *l, int cpu,
                          struct json *j)
{
    json_key(j, "excluded_states");
    const struct cpuidle_cpu *ic = cpuidle_find_cpu(c->cur->cpuidle, cpu);
    if (!ic) {
        json_null(j);
        return;
    }
    json_array_begin(j);
    for (unsigned k = 0; k < ic->nstates; k++) {
        const struct cpuidle_state *st = &ic->state[k];
        if (!latency_excludes_state(l, cpu, st->latency_us))
            continue;
        json_object_begin(j);
        json_kv_u64(j, "index", k);
        json_kv_string(j, "name", st->name);
        json_kv_u64(j, "latency_us", st->latency_us);
        json_object_end(j);
    }
    json_array_end(j);
}

static void latency_json(const struct report_ctx *c, struct json *j)
{
    const struct latency_sample *l = c->cur->latency;
    if (!l) {
        json_null(j);
        return;
    }
    json_object_begin(j);
    json_key(j, "global");
    json_object_begin(j);
    json_kv_string(j, "state", state_word(l->global_us));
    value_json(j, "us", l->global_us);
    value_json(j, "raw", l->global_raw);
    json_object_end(j);
    json_kv_bool(j, "holders_scanned", l->holders_scanned);
    json_kv_u64(j, "holders_unreadable", l->holders_unreadable);
    json_key(j, "holders");
    json_array_begin(j);
    for (size_t i = 0; i < l->nholders; i++) {
        json_object_begin(j);
        json_kv_i64(j, "pid", l->holders[i].pid);
        json_kv_string(j, "comm", l->holders[i].comm);
        json_object_end(j);
    }
    json_array_end(j);
    json_key(j, "per_cpu");
    json_array_begin(j);
    for (unsigned i = 0; i < l->ncpus; i++) {
        const struct latency_cpu *lc = &l->cpus[i];
        int64_t force = latency_in_force_us(l, lc->cpu);
        json_object_begin(j);
        json_kv_i64(j, "cpu", lc->cpu);
        json_kv_string(j, "resume_latency", lc->resume_us == 0 ? "n/a" : state_word(lc->resume_us));
        value_json(j, "resume_latency_us", lc->resume_us);
        json_kv_string(j, "in_force", state_word(force));
        value_json(j, "in_force_us", force);
        excluded_json(c, l, lc->cpu, j);
        json_object_end(j);
    }
    json_array_end(j);
    json_object_end(j);
}

/* "C6 (133 us), C1E (10 us)": the states the CPU's constraint excludes;
 * "none", or "?" without cpuidle. Owned. */
static char *excluded_text(const struct report_ctx *c, const struct latency_sample *l, int cpu)
{
    const struct cpuidle_cpu *ic = cpuidle_find_cpu(c->cur->cpuidle, cpu);
    if (!ic)
        return xstrdup("? (no cpuidle states to compare)");
    struct strbuf b = {0};
    for (unsigned k = 0; k < ic->nstates; k++) {
        const struct cpuidle_state *st = &ic->state[k];
        if (!latency_excludes_state(l, cpu, st->latency_us))
            continue;
        strbuf_appendf(&b, "%s%s (%" PRIu64 " us)", b.len ? ", " : "", st->name ? st->name : "?",
                       st->latency_us);
    }
    return b.len ? strbuf_steal(&b) : xstrdup("none");
}

static char *us_text(int64_t v, bool resume)
{
    if (v == LATENCY_UNKNOWN)
        return xstrdup("unknown");
    if (v == LATENCY_NONE)
        return xstrdup("none");
    if (v == 0 && resume)
        return xstrdup("n/a (0 us)");
    return xasprintf("%" PRId64 " us", v);
}

/* CPUs grouped by what is in force for them and what it excludes, so a
 * large machine with one constraint takes one line. */
struct group {
    char *force, *excluded; /* owned */
    struct cpuset cpus;
};

static void groups_text(const struct report_ctx *c, const struct latency_sample *l,
                        struct strbuf *out)
{
    struct group *g = xcalloc(l->ncpus + 1, sizeof(*g));
    unsigned ng = 0;
    for (unsigned i = 0; i < l->ncpus; i++) {
        int cpu = l->cpus[i].cpu;
        char *force = us_text(latency_in_force_us(l, cpu), false);
        char *excl = excluded_text(c, l, cpu);
        unsigned k = 0;
        while (k < ng && !(streq(g[k].force, force) && streq(g[k].excluded, excl)))
            k++;
        if (k == ng) {
            g[ng++] = (struct group){.force = force, .excluded = excl};
        } else {
            free(force);
            free(excl);
        }
        cpuset_add(&g[k].cpus, (unsigned)cpu);
    }
    if (ng == 0) {
        strbuf_append(out, "  no online CPU known: nothing in force to show\n");
        free(g);
        return;
    }
    if (ng == 1 && streq(g[0].force, "none")) {
        strbuf_append(out, "  no constraint in force: the governor may pick any enabled C-state\n");
        free(g[0].force);
        free(g[0].excluded);
        cpuset_free(&g[0].cpus);
        free(g);
        return;
    }
    struct table t;
    table_init(&t, ">in force", "CPUs", "C-states excluded (exit latency)", NULL);
    for (unsigned k = 0; k < ng; k++) {
        _cleanup_free_ char *cpus = cpuset_format(&g[k].cpus);
        table_add(&t, g[k].force, cpus, g[k].excluded);
        free(g[k].force);
        free(g[k].excluded);
        cpuset_free(&g[k].cpus);
    }
    table_render(&t, out, REPORT_WIDTH);
    table_free(&t);
    free(g);
}

static void per_cpu_text(const struct latency_sample *l, struct strbuf *out)
{
    unsigned nset = 0, nunknown = 0;
    for (unsigned i = 0; i < l->ncpus; i++) {
        nset += l->cpus[i].resume_us != LATENCY_NONE && l->cpus[i].resume_us != LATENCY_UNKNOWN;
        nunknown += l->cpus[i].resume_us == LATENCY_UNKNOWN;
    }
    strbuf_append(out, "  per CPU (pm_qos_resume_latency_us): ");
    if (nset == 0 && l->ncpus > nunknown)
        strbuf_appendf(out, "none on any of %u CPUs", l->ncpus - nunknown);
    else if (nset == 0)
        strbuf_append(out, "none read");
    for (unsigned i = 0, shown = 0; i < l->ncpus; i++) {
        int64_t v = l->cpus[i].resume_us;
        if (v == LATENCY_NONE || v == LATENCY_UNKNOWN)
            continue;
        if (shown++ == 8) {
            strbuf_appendf(out, ", ... (%u CPUs, see --json)", nset);
            break;
        }
        _cleanup_free_ char *txt = us_text(v, true);
        strbuf_appendf(out, "%scpu%d %s", shown > 1 ? ", " : "", l->cpus[i].cpu, txt);
    }
    if (nunknown)
        strbuf_appendf(out, "; unreadable on %u CPU%s", nunknown, nunknown == 1 ? "" : "s");
    strbuf_putc(out, '\n');
}

static void holders_text(const struct latency_sample *l, struct strbuf *out)
{
    struct strbuf line = {0};
    if (!l->nholders)
        strbuf_append(&line, "no process has /dev/cpu_dma_latency open: a driver in the kernel "
                             "holds the limit");
    else
        strbuf_appendf(&line,
                       "held open by %zu process%s (each open file is one request; the "
                       "lowest value wins):",
                       l->nholders, l->nholders == 1 ? "" : "es");
    for (size_t i = 0; i < l->nholders; i++)
        strbuf_appendf(&line, " %s%s[%d]", i ? ", " : "",
                       l->holders[i].comm ? l->holders[i].comm : "?", l->holders[i].pid);
    if (l->holders_unreadable)
        strbuf_appendf(&line, "; %u process%s could not be inspected", l->holders_unreadable,
                       l->holders_unreadable == 1 ? "" : "es");
    report_wrap(out, "  ", 4, strbuf_str(&line));
    strbuf_free(&line);
}

static void latency_text(const struct report_ctx *c, struct strbuf *out)
{
    const struct latency_sample *l = c->cur->latency;
    if (!l) {
        const char *why = report_unavailable(c, SAMPLER_LATENCY);
        strbuf_appendf(out, "  not available: %s\n", why ? why : "no PM QoS interface");
        return;
    }
    strbuf_append(out, "  global (cpu_dma_latency): ");
    if (l->global_us == LATENCY_UNKNOWN)
        strbuf_append(out, "unknown (unreadable: see problems)\n");
    else if (l->global_us == LATENCY_NONE)
        strbuf_appendf(out, "none (reads %" PRId64 ", the default: no request below it)\n",
                       l->global_raw);
    else
        strbuf_appendf(out, "%" PRId64 " us\n", l->global_us);
    per_cpu_text(l, out);
    groups_text(c, l, out);
    if (l->holders_scanned)
        holders_text(l, out);
}

const struct report_section report_section_latency = {
    .key = "latency",
    .title = "Latency constraints in force",
    .json = latency_json,
    .text = latency_text,
};
