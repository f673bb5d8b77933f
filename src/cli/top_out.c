/* watt top's presentation without a terminal: freeing and sorting a
 * frame, and the --once outputs, text and JSON (schema: docs/top.md).
 * The cells of the text tables come from top_view.c, as the TUI's do. */
#include "cli/top_view.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/json.h"
#include "base/jsondoc.h"
#include "base/strbuf.h"
#include "base/table.h"
#include "base/text.h"
#include "base/util.h"

/* ---- JSON ------------------------------------------------------------------ */

/* A string (at most MAX bytes of it; 0: all) as valid UTF-8: the JSON
 * writer escapes control characters but passes other bytes through. */
static void json_kv_text(struct json *j, const char *key, const char *s, size_t max)
{
    if (!s) {
        json_kv_null(j, key);
        return;
    }
    char *buf = text_utf8_valid(s, max ? strnlen(s, max) : strlen(s));
    json_kv_string(j, key, buf);
    free(buf);
}

/* "" is "not known" in the fixed-size fields: null. */
static void json_kv_field(struct json *j, const char *key, const char *s, size_t max)
{
    if (!s[0])
        json_kv_null(j, key);
    else
        json_kv_text(j, key, s, max);
}

static void json_header(struct json *j, const struct top_frame *f)
{
    /* the time is the end of the window (a frame without one: now) */
    int64_t end_s = f->real_ns ? (int64_t)(f->real_ns / 1000000000u) : doc_time_now();
    json_doc_begin(j, "watt-top/2", doc_time(end_s));
    json_kv_double(j, "interval_s", f->interval_s);
    json_key(j, "host");
    json_object_begin(j);
    json_kv_text(j, "hostname", f->hostname, 0);
    json_kv_text(j, "kernel", f->kernel, 0);
    json_kv_u64(j, "cpus", f->ncpus);
    json_kv_double(j, "busy_cpus", f->busy_cpus);
    json_object_end(j);
    json_key(j, "wakeups");
    json_object_begin(j);
    json_kv_string(j, "source", f->traced ? "tracepoints" : "proc");
    json_kv_text(j, "why_not_traced", f->traced ? NULL : f->why_not_traced, 0);
    json_kv_string(j, "counted_by", wake_path_name(f->wake_path));
    json_kv_text(j, "why_not_bpf", f->why_not_bpf, 0);
    json_kv_double(j, "total_per_s", f->total_wakeups_s);
    json_kv_double(j, "idle_per_s", f->traced ? f->total_idle_wakeups_s : NAN);
    json_kv_u64(j, "lost_events", f->lost_events);
    json_kv_u64(j, "undelivered_events", f->undelivered_events);
    json_kv_string(j, "process_source",
                   !f->traced || f->proc_wakeups_from_proc ? "proc" : "tracepoints");
    json_kv_u64(j, "dropped_events", f->dropped_events);
    json_object_end(j);
    json_key(j, "power");
    json_object_begin(j);
    json_kv_double(j, "node_w", f->node_w);
    json_kv_bool(j, "measured", f->measured);
    json_kv_field(j, "source", f->power_source, sizeof(f->power_source));
    json_kv_double(j, "idle_w", f->idle_w);
    json_kv_double(j, "kernel_w", f->kernel_w);
    json_kv_double(j, "unaccounted_w", f->unaccounted_w);
    json_kv_double(j, "processes_w", f->procs_w);
    json_kv_double(j, "error_pct", f->error_pct);
    json_kv_field(j, "note", f->power_note, sizeof(f->power_note));
    json_object_end(j);
}

static void json_proc(struct json *j, const struct top_frame *f, const struct top_proc *p)
{
    json_object_begin(j);
    json_kv_i64(j, "pid", p->pid);
    json_kv_text(j, "comm", p->comm, sizeof(p->comm));
    json_kv_text(j, "cmdline", p->cmdline, 0);
    json_kv_text(j, "cgroup", p->cgroup, 0);
    json_kv_bool(j, "kthread", p->kthread);
    json_kv_bool(j, "exited", p->exited);
    json_kv_u64(j, "threads", p->threads);
    json_kv_double(j, "cpu_pct", p->cpu_pct);
    json_kv_double(j, "wakeups_per_s", p->wakeups_s);
    json_kv_double(j, "idle_wakeups_per_s", p->idle_wakeups_s);
    json_kv_double(j, "power_w", p->power_w);
    json_kv_double(j, "energy_j", p->energy_j);
    if (f->ngpus) { /* only where a GPU exists: the frames without keep their shape */
        json_kv_double(j, "gpu_busy_pct", p->gpu_busy_pct);
        json_kv_double(j, "gpu_w", p->gpu_w);
        json_kv_double(j, "gpu_energy_j", p->gpu_j);
    }
    json_object_end(j);
}

static void json_cgroup(struct json *j, const struct top_frame *f, const struct top_cgroup *c)
{
    json_object_begin(j);
    json_kv_text(j, "path", c->path, 0);
    json_kv_u64(j, "processes", c->nprocs);
    json_kv_double(j, "cpu_pct", c->cpu_pct);
    json_kv_double(j, "wakeups_per_s", c->wakeups_s);
    json_kv_double(j, "idle_wakeups_per_s", c->idle_wakeups_s);
    json_kv_double(j, "power_w", c->power_w);
    json_kv_double(j, "energy_j", c->energy_j);
    if (f->ngpus) {
        json_kv_double(j, "gpu_busy_pct", c->gpu_busy_pct);
        json_kv_double(j, "gpu_w", c->gpu_w);
        json_kv_double(j, "gpu_energy_j", c->gpu_j);
    }
    json_object_end(j);
}

/* A GPU's watts as split: its processes' + unattributed + idle = watts. */
static void json_gpu(struct json *j, const struct top_gpu *g)
{
    json_object_begin(j);
    json_kv_field(j, "id", g->id, sizeof(g->id));
    json_kv_field(j, "pdev", g->pdev, sizeof(g->pdev));
    json_kv_field(j, "driver", g->driver, sizeof(g->driver));
    json_kv_field(j, "via", g->via, sizeof(g->via));
    json_kv_double(j, "watts", g->watts);
    json_kv_double(j, "util_pct", g->util_pct);
    json_kv_u64(j, "processes", g->nprocs);
    json_kv_double(j, "processes_busy_pct", g->procs_busy_pct);
    json_kv_double(j, "processes_w", g->procs_w);
    json_kv_double(j, "unattributed_w", g->unattributed_w);
    json_kv_double(j, "idle_w", g->idle_w);
    json_kv_bool(j, "normalised", g->normalised);
    json_kv_bool(j, "equal_shares", g->equal_shares);
    json_object_end(j);
}

static void json_source(struct json *j, const struct top_source *s)
{
    json_object_begin(j);
    json_kv_string(j, "kind", top_kind_name(s->kind));
    if (s->kind == WAKE_IRQ && s->irq >= 0)
        json_kv_i64(j, "irq", s->irq);
    else
        json_kv_null(j, "irq");
    json_kv_text(j, "name", s->name, sizeof(s->name));
    json_kv_double(j, "per_s", s->events_s);
    json_kv_double(j, "idle_per_s", s->idle_wakeups_s);
    json_object_end(j);
}

static void json_cpu(struct json *j, const struct top_cpu *c)
{
    json_object_begin(j);
    json_kv_i64(j, "cpu", c->cpu);
    json_kv_double(j, "busy_pct", c->busy_pct);
    json_kv_double(j, "mhz", c->mhz);
    json_kv_double(j, "idle_wakeups_per_s", c->idle_wakeups_s);
    json_kv_double(j, "irqs_per_s", c->irqs_s);
    json_key(j, "states");
    json_array_begin(j);
    for (size_t i = 0; i < c->nstates; i++) {
        const struct top_cstate *s = &c->st[i];
        json_object_begin(j);
        json_kv_text(j, "name", s->name, sizeof(s->name));
        json_kv_double(j, "residency_pct", s->residency_pct);
        json_kv_double(j, "entries_per_s", s->entries_s);
        json_kv_u64(j, "latency_us", s->latency_us);
        json_kv_bool(j, "disabled", s->disabled);
        json_object_end(j);
    }
    json_array_end(j);
    json_object_end(j);
}

static void json_pkg(struct json *j, const struct top_pkg *p)
{
    json_object_begin(j);
    json_kv_i64(j, "package", p->package);
    json_kv_u64(j, "cpus", p->ncpus);
    json_kv_double(j, "busy_pct", p->busy_pct);
    json_kv_string(j, "source", p->pmu ? "pmu" : p->nstates ? "cpuidle mean" : "none");
    json_kv_text(j, "why", p->pmu ? NULL : p->why, sizeof(p->why));
    json_key(j, "states");
    json_array_begin(j);
    for (size_t i = 0; i < p->nstates; i++) {
        json_object_begin(j);
        json_kv_text(j, "name", p->st[i].name, sizeof(p->st[i].name));
        json_kv_double(j, "residency_pct", p->st[i].residency_pct);
        json_object_end(j);
    }
    json_array_end(j);
    json_object_end(j);
}

static void json_device(struct json *j, const struct top_device *d)
{
    json_object_begin(j);
    json_kv_text(j, "bus", d->bus, 0);
    json_kv_text(j, "name", d->name, 0);
    json_kv_text(j, "driver", d->driver, 0);
    json_kv_text(j, "product", d->product, 0);
    json_kv_field(j, "control", d->control, sizeof(d->control));
    json_kv_field(j, "status", d->status, sizeof(d->status));
    json_kv_double(j, "active_pct", d->active_pct);
    json_kv_bool(j, "safe", d->safe);
    json_kv_text(j, "why", d->why, 0);
    json_object_end(j);
}

static size_t limited(size_t n, size_t limit)
{
    return limit && limit < n ? limit : n;
}

/* The three limited lists with their full counts. */
static void json_lists(struct json *j, const struct top_frame *f, size_t limit)
{
    json_key(j, "processes");
    json_array_begin(j);
    for (size_t i = 0; i < limited(f->nprocs, limit); i++)
        json_proc(j, f, &f->procs[i]);
    json_array_end(j);
    json_key(j, "cgroups");
    json_array_begin(j);
    for (size_t i = 0; i < limited(f->ncgroups, limit); i++)
        json_cgroup(j, f, &f->cgroups[i]);
    json_array_end(j);
    json_key(j, "sources");
    json_array_begin(j);
    for (size_t i = 0; i < limited(f->nsources, limit); i++)
        json_source(j, &f->sources[i]);
    json_array_end(j);
    json_key(j, "totals");
    json_object_begin(j);
    json_kv_u64(j, "processes", f->nprocs);
    json_kv_u64(j, "cgroups", f->ncgroups);
    json_kv_u64(j, "sources", f->nsources);
    json_object_end(j);
}

void top_print_json(const struct top_frame *f, FILE *out, size_t limit)
{
    struct json j;
    json_init(&j, true);
    json_header(&j, f); /* opens the document */
    json_lists(&j, f, limit);
    json_key(&j, "cpus");
    json_array_begin(&j);
    for (size_t i = 0; i < f->ncpus_rows; i++)
        json_cpu(&j, &f->cpus[i]);
    json_array_end(&j);
    json_key(&j, "packages");
    json_array_begin(&j);
    for (size_t i = 0; i < f->npkgs; i++)
        json_pkg(&j, &f->pkgs[i]);
    json_array_end(&j);
    json_key(&j, "devices");
    json_array_begin(&j);
    for (size_t i = 0; i < f->ndevices; i++)
        json_device(&j, &f->devices[i]);
    json_array_end(&j);
    if (f->ngpus) {
        json_key(&j, "gpus");
        json_array_begin(&j);
        for (size_t i = 0; i < f->ngpus; i++)
            json_gpu(&j, &f->gpus[i]);
        json_array_end(&j);
    }
    json_key(&j, "notes");
    json_array_begin(&j);
    for (size_t i = 0; i < f->nnotes; i++) {
        char *n =
            text_utf8_valid(f->notes[i] ? f->notes[i] : "", f->notes[i] ? strlen(f->notes[i]) : 0);
        json_string(&j, n);
        free(n);
    }
    json_array_end(&j);
    json_object_end(&j);
    strbuf_putc(&j.out, '\n');
    fputs(strbuf_str(&j.out), out);
    json_free(&j);
}

/* ---- text ------------------------------------------------------------------ */

/* Widest flex cell in the text output: long command lines are cut. */
#define TEXT_FLEX_COLS 80

/* One view as a table.h table. Names wider than one byte per column only
 * appear in the flex column, which is last and so not padded: byte-width
 * alignment stays right. */
static void text_view(struct strbuf *b, const struct top_frame *f, enum top_view v, size_t limit)
{
    struct top_col cols[TOP_MAX_COLS];
    size_t ncols = top_view_cols(f, v, cols);
    char head[TOP_MAX_COLS][48];
    const char *h[TOP_MAX_COLS + 1] = {0};
    for (size_t c = 0; c < ncols; c++) {
        snprintf(head[c], sizeof(head[c]), "%s%.39s", cols[c].right ? ">" : "", cols[c].head);
        h[c] = head[c];
    }
    struct table t;
    /* table_init takes a NULL-terminated list: pass all 16 slots */
    table_init(&t, h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7], h[8], h[9], h[10], h[11], h[12],
               h[13], h[14], h[15], NULL);
    char(*cells)[TOP_CELL] = xmalloc(TOP_MAX_COLS * TOP_CELL);
    for (size_t r = 0; r < limited(top_view_nrows(f, v), limit); r++) {
        top_view_row(f, v, r, true, TEXT_FLEX_COLS, cells);
        const char *p[TOP_MAX_COLS];
        for (size_t c = 0; c < TOP_MAX_COLS; c++)
            p[c] = cells[c];
        table_add(&t, p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], p[8], p[9], p[10], p[11],
                  p[12], p[13], p[14], p[15]);
    }
    free(cells);
    table_render(&t, b, 4096);
    table_free(&t);
}

static void text_section(struct strbuf *b, const struct top_frame *f, enum top_view v, size_t limit,
                         const char *what)
{
    size_t n = top_view_nrows(f, v);
    strbuf_appendf(b, "\n%s", top_view_title(v));
    if (limit && limit < n)
        strbuf_appendf(b, " (top %zu of %zu %s)", limit, n, what);
    else
        strbuf_appendf(b, " (%zu %s)", n, what);
    strbuf_append(b, ":\n");
    if (!n)
        strbuf_append(b, "  none\n");
    else
        text_view(b, f, v, limit);
}

static void text_title(struct strbuf *b, const struct top_frame *f)
{
    char host[256], kern[256], when[64] = "";
    text_printable(host, sizeof(host), f->hostname ? f->hostname : "?",
                   f->hostname ? strlen(f->hostname) : 1, 64, true);
    text_printable(kern, sizeof(kern), f->kernel ? f->kernel : "?",
                   f->kernel ? strlen(f->kernel) : 1, 64, true);
    time_t t = (time_t)(f->real_ns / 1000000000u);
    struct tm tm;
    if (f->real_ns && gmtime_r(&t, &tm))
        strftime(when, sizeof(when), "  %Y-%m-%dT%H:%M:%SZ", &tm);
    strbuf_appendf(b, "watt top  %s  %s%s  window %.2f s\n", host, kern, when, f->interval_s);
}

/* A note in full, wrapped at TOP_TEXT_WIDTH: FIRST before its first line,
 * INDENT (as wide) before the others. */
static void wrapped(struct strbuf *b, const char *text, const char *first, const char *indent)
{
    char **lines;
    size_t n = text_wrap(text, TOP_TEXT_WIDTH - strlen(indent), &lines);
    for (size_t i = 0; i < n; i++)
        strbuf_appendf(b, "%s%s\n", i ? indent : first, lines[i]);
    text_wrap_free(lines, n);
}

static void text_w(char *buf, size_t size, double w)
{
    if (isfinite(w))
        snprintf(buf, size, "%.1f W", w);
    else
        snprintf(buf, size, "-");
}

/* One line per GPU, only where there is one: its watts and their split
 * (processes + unattributed + idle = watts; docs/gpu-attribution.md). */
static void text_gpus(struct strbuf *b, const struct top_frame *f)
{
    for (size_t i = 0; i < f->ngpus; i++) {
        const struct top_gpu *g = &f->gpus[i];
        char w[32], p[32], u[32], idle[32];
        text_w(w, sizeof(w), g->watts);
        text_w(p, sizeof(p), g->procs_w);
        text_w(u, sizeof(u), g->unattributed_w);
        text_w(idle, sizeof(idle), g->idle_w);
        _cleanup_free_ char *id = text_utf8_valid(g->id, strnlen(g->id, sizeof(g->id)));
        _cleanup_free_ char *drv =
            text_utf8_valid(g->driver, strnlen(g->driver, sizeof(g->driver)));
        strbuf_appendf(b,
                       "%-10s%s %s %s: processes %s (%.0f %% busy%s), unattributed %s, idle %s\n",
                       i ? "" : "GPUs", id, drv, w, p, g->procs_busy_pct,
                       g->equal_shares ? ", equal shares" : "", u, idle);
    }
}

void top_print_text(const struct top_frame *f, FILE *out, size_t limit)
{
    struct strbuf b = {0};
    char lines[TOP_HEADER][TOP_LINE];
    text_title(&b, f);
    top_header_lines(f, true, lines);
    for (size_t i = 0; i < TOP_HEADER; i++)
        strbuf_appendf(&b, "%s\n", lines[i]);
    if (f->power_note[0]) {
        _cleanup_free_ char *pn = xstrndup(f->power_note, sizeof(f->power_note));
        wrapped(&b, pn, "          ", "          ");
    }
    text_gpus(&b, f);
    text_section(&b, f, TOP_VIEW_PROCS, limit, "processes");
    text_section(&b, f, TOP_VIEW_CGROUPS, limit, "cgroups");
    text_section(&b, f, TOP_VIEW_SOURCES, limit, "sources");
    text_section(&b, f, TOP_VIEW_CSTATES, 0, "states");
    if (f->ncpus_rows) {
        strbuf_appendf(&b, "\nC-states per CPU (%zu CPUs):\n", f->ncpus_rows);
        text_view(&b, f, TOP_VIEW_CPUS, 0);
    }
    text_section(&b, f, TOP_VIEW_PKGS, 0, "packages");
    for (size_t i = 0; i < f->npkgs; i++)
        if (!f->pkgs[i].pmu) { /* one reason: the same for every package in practice */
            _cleanup_free_ char *why =
                xasprintf("cpuidle mean: the package's CPUs' mean, not package C-states: %.*s",
                          (int)sizeof(f->pkgs[i].why), f->pkgs[i].why);
            wrapped(&b, why, "  ", "  ");
            break;
        }
    text_section(&b, f, TOP_VIEW_DEVICES, 0, "devices");
    if (f->nnotes) {
        strbuf_append(&b, "\nNotes:\n");
        for (size_t i = 0; i < f->nnotes; i++)
            wrapped(&b, f->notes[i] ? f->notes[i] : "", "  - ", "    ");
    }
    text_fputs(strbuf_str(&b), out);
    strbuf_free(&b);
}
