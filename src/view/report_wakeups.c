/* The top wakers: processes, IRQs, timers and work items by wake-ups per
 * second over the report's interval, from watt top's collector (perf
 * tracepoints, else /proc), with each process's attributed power. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/table.h"
#include "base/util.h"
#include "view/report.h"
#include "view/top.h"

#define TOP_N 10

static const char *unavailable(const struct report_ctx *c)
{
    if (!c->b)
        return "needs an interval (wake-ups are counted between two samples)";
    if (!c->top)
        return "not measured";
    return NULL;
}

static void procs_json(const struct top_frame *f, struct json *j)
{
    json_key(j, "processes");
    json_array_begin(j);
    for (size_t i = 0; i < f->nprocs && i < TOP_N; i++) {
        const struct top_proc *p = &f->procs[i];
        json_object_begin(j);
        json_kv_i64(j, "pid", p->pid);
        json_kv_string(j, "comm", p->comm);
        json_kv_bool(j, "exited", p->exited);
        json_kv_double(j, "wakeups_per_s", p->wakeups_s);
        json_kv_double(j, "idle_wakeups_per_s", p->idle_wakeups_s);
        json_kv_double(j, "cpu_pct", p->cpu_pct);
        json_kv_double(j, "power_w", p->power_w);
        json_object_end(j);
    }
    json_array_end(j);
}

static void sources_json(const struct top_frame *f, struct json *j)
{
    json_key(j, "sources");
    json_array_begin(j);
    for (size_t i = 0; i < f->nsources && i < TOP_N; i++) {
        const struct top_source *s = &f->sources[i];
        json_object_begin(j);
        json_kv_string(j, "kind", wake_kind_name(s->kind));
        if (s->irq >= 0)
            json_kv_i64(j, "irq", s->irq);
        else
            json_kv_null(j, "irq");
        json_kv_string(j, "name", s->name);
        json_kv_double(j, "per_s", s->events_s);
        json_kv_double(j, "idle_per_s", s->idle_wakeups_s);
        json_object_end(j);
    }
    json_array_end(j);
}

static void wakeups_json(const struct report_ctx *c, struct json *j)
{
    const char *why = unavailable(c);
    json_object_begin(j);
    if (why) {
        json_kv_string(j, "unavailable", why);
        json_object_end(j);
        return;
    }
    const struct top_frame *f = c->top;
    json_kv_string(j, "source", f->traced ? "tracepoints" : "proc");
    json_kv_string(j, "why_not_traced", f->why_not_traced);
    json_kv_string(j, "counted_by", wake_path_name(f->wake_path));
    json_kv_string(j, "why_not_bpf", f->why_not_bpf);
    json_kv_double(j, "total_per_s", f->total_wakeups_s);
    json_kv_double(j, "idle_per_s", f->total_idle_wakeups_s);
    json_kv_u64(j, "lost_events", f->lost_events);
    procs_json(f, j);
    sources_json(f, j);
    json_object_end(j);
}

static char *fmt_rate(double v)
{
    return isnan(v) ? xstrdup("-") : xasprintf("%.1f", v);
}

static void procs_text(const struct top_frame *f, struct strbuf *out)
{
    struct table t;
    table_init(&t, ">pid", "process", ">wake/s", ">idle/s", ">cpu %", ">power W", NULL);
    for (size_t i = 0; i < f->nprocs && i < TOP_N; i++) {
        const struct top_proc *p = &f->procs[i];
        _cleanup_free_ char *pid = xasprintf("%d", p->pid);
        _cleanup_free_ char *name = xasprintf("%s%s", p->comm, p->exited ? " (exited)" : "");
        _cleanup_free_ char *w = fmt_rate(p->wakeups_s), *iw = fmt_rate(p->idle_wakeups_s);
        _cleanup_free_ char *cpu = fmt_rate(p->cpu_pct);
        _cleanup_free_ char *pw = isnan(p->power_w) ? xstrdup("-") : xasprintf("%.2f", p->power_w);
        table_add(&t, pid, name, w, iw, cpu, pw);
    }
    if (t.nrows)
        table_render(&t, out, REPORT_WIDTH);
    table_free(&t);
}

static void sources_text(const struct top_frame *f, struct strbuf *out)
{
    struct table t;
    table_init(&t, "kind", "source", ">per s", ">idle/s", NULL);
    for (size_t i = 0; i < f->nsources && i < TOP_N; i++) {
        const struct top_source *s = &f->sources[i];
        _cleanup_free_ char *name =
            s->irq >= 0 ? xasprintf("%d %s", s->irq, s->name) : xstrdup(s->name);
        _cleanup_free_ char *r = fmt_rate(s->events_s), *ir = fmt_rate(s->idle_wakeups_s);
        table_add(&t, wake_kind_name(s->kind), name, r, ir);
    }
    if (t.nrows) {
        strbuf_putc(out, '\n');
        table_render(&t, out, REPORT_WIDTH);
    }
    table_free(&t);
}

static void wakeups_text(const struct report_ctx *c, struct strbuf *out)
{
    const char *why = unavailable(c);
    if (why) {
        strbuf_appendf(out, "  %s\n", why);
        return;
    }
    const struct top_frame *f = c->top;
    if (f->traced) {
        strbuf_appendf(out, "  %.1f wake-up events/s; CPUs left idle %.1f times/s (tracepoints)\n",
                       f->total_wakeups_s, f->total_idle_wakeups_s);
    } else {
        _cleanup_free_ char *line =
            xasprintf("%.1f wake-ups/s from /proc (voluntary context switches and IRQ counts): %s",
                      f->total_wakeups_s, f->why_not_traced ? f->why_not_traced : "no tracepoints");
        report_wrap(out, "  ", 2, line);
    }
    procs_text(f, out);
    sources_text(f, out);
}

const struct report_section report_section_wakeups = {
    .key = "wakeups",
    .title = "Top wake-ups",
    .json = wakeups_json,
    .text = wakeups_text,
};
