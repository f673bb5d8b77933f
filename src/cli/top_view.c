/* watt top's views as rows of printable cells, shared by the --once text
 * (top_out.c) and the TUI (top_tui.c): the columns, number formats and
 * escaping of names that both show, and the header block. */
#include "cli/top_view.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/strbuf.h"
#include "base/util.h"

/* ---- number formats ----------------------------------------------------- */

#define CELL(v) cells[v], TOP_CELL

/* Never "-0.0"; "-" when unknown. */
static void fmt_num(char *buf, size_t size, double v, int decimals)
{
    if (!isfinite(v)) {
        snprintf(buf, size, "-");
        return;
    }
    if (fabs(v) < 0.5 * pow(10, -decimals))
        v = 0;
    snprintf(buf, size, "%.*f", decimals, v);
}

/* Rates (events/s): one decimal below 1000, none above, "M" above 10^7. */
static void fmt_rate(char *buf, size_t size, double v)
{
    if (isfinite(v) && v >= 1e7)
        snprintf(buf, size, "%.1fM", v / 1e6);
    else
        fmt_num(buf, size, v, isfinite(v) && v >= 1000 ? 0 : 1);
}

/* Watts and joules: two decimals below 10, one below 1000. */
static void fmt_watts(char *buf, size_t size, double v)
{
    double a = fabs(v);
    fmt_num(buf, size, v, !isfinite(v) || a < 10 ? 2 : a < 1000 ? 1 : 0);
}

/* ---- the views ----------------------------------------------------------- */

static const char *const view_title[] = {
    [TOP_VIEW_PROCS] = "Processes",
    [TOP_VIEW_CGROUPS] = "Cgroups",
    [TOP_VIEW_SOURCES] = "IRQs/timers/work",
    [TOP_VIEW_CPUS] = "C-states",
    [TOP_VIEW_DEVICES] = "Devices",
    [_TOP_VIEW_MAX] = "C-state summary",
    [_TOP_VIEW_MAX + 1] = "C-states per package",
};
static const char *const view_name[] = {
    [TOP_VIEW_PROCS] = "processes",   [TOP_VIEW_CGROUPS] = "cgroups",
    [TOP_VIEW_SOURCES] = "sources",   [TOP_VIEW_CPUS] = "cstates",
    [TOP_VIEW_DEVICES] = "devices",   [_TOP_VIEW_MAX] = "states",
    [_TOP_VIEW_MAX + 1] = "packages",
};

const char *top_view_title(enum top_view v)
{
    return (unsigned)v <= _TOP_VIEW_MAX + 1 ? view_title[v] : "?";
}

const char *top_view_name(enum top_view v)
{
    return (unsigned)v <= _TOP_VIEW_MAX + 1 ? view_name[v] : "?";
}

const char *top_sort_title(enum top_sort s)
{
    static const char *const t[] = {"wake-ups", "power", "CPU", "idle wake-ups", "GPU"};
    return (unsigned)s < ARRAY_SIZE(t) ? t[s] : "?";
}

const char *top_kind_name(enum wake_kind k)
{
    static const char *const n[] = {"task", "irq", "timer", "hrtimer", "work", "other"};
    return (unsigned)k < ARRAY_SIZE(n) ? n[k] : "other";
}

struct col_spec {
    const char *head; /* '>' first: right-aligned; '*' first: flex */
    unsigned width;
};

static const struct col_spec cols_procs[] = {
    {">PID", 7},   {">Wake/s", 8}, {">Idle/s", 8},   {">CPU%", 6},
    {">Watts", 7}, {">Thr", 4},    {"*Command", 20}, {NULL, 0},
};
static const struct col_spec cols_cgroups[] = {
    {">Procs", 5}, {">Wake/s", 8}, {">Idle/s", 8},  {">CPU%", 6},
    {">Watts", 7}, {">Joules", 8}, {"*Cgroup", 20}, {NULL, 0},
};
static const struct col_spec cols_sources[] = {
    {"Kind", 7}, {">IRQ", 4}, {">Events/s", 9}, {">Idle/s", 8}, {"*Name", 20}, {NULL, 0},
};
static const struct col_spec cols_cpus[] = {
    {">CPU", 4}, {">Busy%", 6}, {">MHz", 6}, {">Idle/s", 8}, {">IRQ/s", 8}, {NULL, 0},
};
static const struct col_spec cols_cstates[] = {
    {"State", 8},       {">Exit us", 8},      {">Mean res%", 10},
    {">Entries/s", 10}, {">Disabled on", 12}, {NULL, 0},
};
/* Residency: "PC2 12.0  PC6 70.0  CC6 81.2" from the PMUs, else the
 * package's CPUs' mean per cpuidle state ("POLL 0.0  C1 2.1  C6 90.3"). */
static const struct col_spec cols_pkgs[] = {
    {">Pkg", 4}, {">CPUs", 5}, {">Busy%", 6}, {"Source", 12}, {"*Residency %", 20}, {NULL, 0},
};
static const struct col_spec cols_devices[] = {
    {"Bus", 6},     {"Device", 16},  {"Driver", 12},      {"Control", 7},
    {"Status", 10}, {">Active%", 8}, {"Autosuspend", 11}, {"*Product / why not", 20},
    {NULL, 0},
};

static const struct col_spec *view_specs(enum top_view v)
{
    switch ((int)v) {
    case TOP_VIEW_PROCS:
        return cols_procs;
    case TOP_VIEW_CGROUPS:
        return cols_cgroups;
    case TOP_VIEW_SOURCES:
        return cols_sources;
    case TOP_VIEW_CPUS:
        return cols_cpus;
    case TOP_VIEW_DEVICES:
        return cols_devices;
    case TOP_VIEW_PKGS:
        return cols_pkgs;
    default:
        return cols_cstates;
    }
}

/* C-state columns of the grid: the first CPU's states. */
static size_t grid_states(const struct top_frame *f)
{
    if (!f->ncpus_rows)
        return 0;
    size_t n = f->cpus[0].nstates, max = TOP_MAX_COLS - (ARRAY_SIZE(cols_cpus) - 1);
    return n < max ? n : max;
}

/* GPU busy % and GPU watts on process and cgroup rows, only where the
 * machine has a GPU. */
static bool gpu_cols(const struct top_frame *f, enum top_view v)
{
    return f->ngpus && (v == TOP_VIEW_PROCS || v == TOP_VIEW_CGROUPS);
}

size_t top_view_cols(const struct top_frame *f, enum top_view v, struct top_col cols[TOP_MAX_COLS])
{
    size_t n = 0;
    for (const struct col_spec *c = view_specs(v); c->head; c++, n++) {
        const char *h = c->head;
        cols[n] = (struct top_col){.width = c->width, .right = h[0] == '>', .flex = h[0] == '*'};
        snprintf(cols[n].head, sizeof(cols[n].head), "%s", h + (h[0] == '>' || h[0] == '*'));
    }
    if (gpu_cols(f, v)) { /* before the flex column, which stays last */
        cols[n + 1] = cols[n - 1];
        cols[n - 1] = (struct top_col){.width = 6, .right = true};
        snprintf(cols[n - 1].head, sizeof(cols[n - 1].head), "GPU%%");
        cols[n] = (struct top_col){.width = 7, .right = true};
        snprintf(cols[n].head, sizeof(cols[n].head), "GPU W");
        n += 2;
    }
    if (v == TOP_VIEW_CPUS)
        for (size_t s = 0; s < grid_states(f); s++, n++) {
            char name[24];
            text_printable(name, sizeof(name), f->cpus[0].st[s].name, sizeof(f->cpus[0].st[s].name),
                           12, false);
            cols[n] = (struct top_col){.right = true};
            snprintf(cols[n].head, sizeof(cols[n].head), "%s%%", name);
            size_t w = strlen(cols[n].head);
            cols[n].width = w > 6 ? (unsigned)w : 6;
        }
    return n;
}

size_t top_view_nrows(const struct top_frame *f, enum top_view v)
{
    switch ((int)v) {
    case TOP_VIEW_PROCS:
        return f->nprocs;
    case TOP_VIEW_CGROUPS:
        return f->ncgroups;
    case TOP_VIEW_SOURCES:
        return f->nsources;
    case TOP_VIEW_CPUS:
        return f->ncpus_rows;
    case TOP_VIEW_DEVICES:
        return f->ndevices;
    case TOP_VIEW_PKGS:
        return f->npkgs;
    default:
        return grid_states(f);
    }
}

/* "[kworker/0:1]" for kernel threads, the command line for the others
 * (its comm while it has none), "(exited)" after what is known. */
static void proc_command(const struct top_proc *p, bool utf8, size_t flex, char *cell)
{
    char comm[sizeof(p->comm) * 4];
    text_printable(comm, sizeof(comm), p->comm, strnlen(p->comm, sizeof(p->comm)), sizeof(p->comm),
                   utf8);
    struct strbuf b = {0};
    if (p->kthread)
        strbuf_appendf(&b, "[%s]", comm);
    else if (p->cmdline && p->cmdline[0])
        strbuf_append(&b, p->cmdline);
    else
        strbuf_append(&b, comm);
    if (p->exited)
        strbuf_append(&b, " (exited)");
    text_printable(cell, TOP_CELL, strbuf_str(&b), b.len, flex, utf8);
    strbuf_free(&b);
}

/* The GPU cells at I and I + 1 where the frame has a GPU; the next cell. */
static size_t gpu_cells(const struct top_frame *f, double busy_pct, double w,
                        char cells[][TOP_CELL], size_t i)
{
    if (!f->ngpus)
        return i;
    fmt_num(CELL(i), busy_pct, 1);
    fmt_watts(CELL(i + 1), w);
    return i + 2;
}

static void row_proc(const struct top_frame *f, const struct top_proc *p, bool utf8, size_t flex,
                     char cells[][TOP_CELL])
{
    snprintf(CELL(0), "%d", (int)p->pid);
    fmt_rate(CELL(1), p->wakeups_s);
    fmt_rate(CELL(2), p->idle_wakeups_s);
    fmt_num(CELL(3), p->cpu_pct, 1);
    fmt_watts(CELL(4), p->power_w);
    snprintf(CELL(5), "%u", p->threads);
    size_t k = gpu_cells(f, p->gpu_busy_pct, p->gpu_w, cells, 6);
    proc_command(p, utf8, flex, cells[k]);
}

static void row_cgroup(const struct top_frame *f, const struct top_cgroup *c, bool utf8,
                       size_t flex, char cells[][TOP_CELL])
{
    snprintf(CELL(0), "%zu", c->nprocs);
    fmt_rate(CELL(1), c->wakeups_s);
    fmt_rate(CELL(2), c->idle_wakeups_s);
    fmt_num(CELL(3), c->cpu_pct, 1);
    fmt_watts(CELL(4), c->power_w);
    fmt_watts(CELL(5), c->energy_j);
    size_t k = gpu_cells(f, c->gpu_busy_pct, c->gpu_w, cells, 6);
    const char *p = c->path ? c->path : "(unknown)";
    text_printable(CELL(k), p, strlen(p), flex, utf8);
}

static void row_source(const struct top_source *s, bool utf8, size_t flex, char cells[][TOP_CELL])
{
    snprintf(CELL(0), "%s", top_kind_name(s->kind));
    if (s->kind == WAKE_IRQ && s->irq >= 0)
        snprintf(CELL(1), "%d", s->irq);
    else
        snprintf(CELL(1), "-");
    fmt_rate(CELL(2), s->events_s);
    fmt_rate(CELL(3), s->idle_wakeups_s);
    text_printable(CELL(4), s->name, strnlen(s->name, sizeof(s->name)), flex, utf8);
}

static const struct top_cstate *cpu_state(const struct top_cpu *c, const char *name)
{
    for (size_t i = 0; i < c->nstates; i++)
        if (!strncmp(c->st[i].name, name, sizeof(c->st[i].name)))
            return &c->st[i];
    return NULL;
}

/* One CPU: residency per state of the first CPU's list, matched by name
 * (CPUs of a hybrid part can have different lists); "off" when disabled. */
static void row_cpu(const struct top_frame *f, const struct top_cpu *c, char cells[][TOP_CELL])
{
    snprintf(CELL(0), "%d", c->cpu);
    fmt_num(CELL(1), c->busy_pct, 1);
    fmt_num(CELL(2), c->mhz, 0);
    fmt_rate(CELL(3), c->idle_wakeups_s);
    fmt_rate(CELL(4), c->irqs_s);
    for (size_t s = 0; s < grid_states(f); s++) {
        const struct top_cstate *st = cpu_state(c, f->cpus[0].st[s].name);
        if (st && st->disabled)
            snprintf(CELL(5 + s), "off");
        else
            fmt_num(CELL(5 + s), st ? st->residency_pct : NAN, 1);
    }
}

/* One state over all CPUs: mean residency, summed entries, where disabled. */
static void row_cstate(const struct top_frame *f, size_t s, char cells[][TOP_CELL])
{
    const struct top_cstate *first = &f->cpus[0].st[s];
    double res = 0, entries = 0;
    size_t nres = 0, ndis = 0, nhave = 0;
    for (size_t i = 0; i < f->ncpus_rows; i++) {
        const struct top_cstate *st = cpu_state(&f->cpus[i], first->name);
        if (!st)
            continue;
        nhave++;
        ndis += st->disabled;
        if (isfinite(st->residency_pct)) {
            res += st->residency_pct;
            nres++;
        }
        if (isfinite(st->entries_s))
            entries += st->entries_s;
    }
    text_printable(CELL(0), first->name, strnlen(first->name, sizeof(first->name)), 16, false);
    snprintf(CELL(1), "%u", first->latency_us);
    fmt_num(CELL(2), nres ? res / (double)nres : NAN, 1);
    fmt_rate(CELL(3), entries);
    if (ndis)
        snprintf(CELL(4), "%zu of %zu", ndis, nhave);
    else
        snprintf(CELL(4), "none");
}

static void row_pkg(const struct top_pkg *p, bool utf8, size_t flex, char cells[][TOP_CELL])
{
    snprintf(CELL(0), "%d", p->package);
    snprintf(CELL(1), "%u", p->ncpus);
    fmt_num(CELL(2), p->busy_pct, 1);
    snprintf(CELL(3), "%s", p->pmu ? "pmu" : p->nstates ? "cpuidle mean" : "none");
    struct strbuf b = {0};
    for (size_t k = 0; k < p->nstates; k++) {
        char v[32];
        fmt_num(v, sizeof(v), p->st[k].residency_pct, 1);
        strbuf_appendf(&b, "%s%.*s %s", k ? "  " : "", (int)sizeof(p->st[k].name), p->st[k].name,
                       v);
    }
    if (!p->nstates)
        strbuf_append(&b, "-");
    text_printable(CELL(4), strbuf_str(&b), b.len, flex, utf8);
    strbuf_free(&b);
}

static void row_device(const struct top_device *d, bool utf8, size_t flex, char cells[][TOP_CELL])
{
    const char *s[] = {d->bus, d->name, d->driver};
    for (size_t i = 0; i < ARRAY_SIZE(s); i++)
        text_printable(CELL(i), s[i] ? s[i] : "-", s[i] ? strlen(s[i]) : 1, 40, utf8);
    text_printable(CELL(3), d->control, strnlen(d->control, sizeof(d->control)), 16, utf8);
    text_printable(CELL(4), d->status, strnlen(d->status, sizeof(d->status)), 16, utf8);
    fmt_num(CELL(5), d->active_pct, 1);
    snprintf(CELL(6), "%s", d->safe ? "safe" : "no");
    struct strbuf b = {0};
    strbuf_append(&b, d->product ? d->product : "");
    if (d->why)
        strbuf_appendf(&b, "%s(%s)", b.len ? " " : "", d->why);
    text_printable(CELL(7), strbuf_str(&b), b.len, flex, utf8);
    strbuf_free(&b);
}

void top_view_row(const struct top_frame *f, enum top_view v, size_t row, bool utf8,
                  size_t flex_cols, char cells[TOP_MAX_COLS][TOP_CELL])
{
    for (size_t i = 0; i < TOP_MAX_COLS; i++)
        cells[i][0] = '\0';
    if (row >= top_view_nrows(f, v))
        return;
    switch ((int)v) {
    case TOP_VIEW_PROCS:
        row_proc(f, &f->procs[row], utf8, flex_cols, cells);
        break;
    case TOP_VIEW_CGROUPS:
        row_cgroup(f, &f->cgroups[row], utf8, flex_cols, cells);
        break;
    case TOP_VIEW_SOURCES:
        row_source(&f->sources[row], utf8, flex_cols, cells);
        break;
    case TOP_VIEW_CPUS:
        row_cpu(f, &f->cpus[row], cells);
        break;
    case TOP_VIEW_DEVICES:
        row_device(&f->devices[row], utf8, flex_cols, cells);
        break;
    case TOP_VIEW_PKGS:
        row_pkg(&f->pkgs[row], utf8, flex_cols, cells);
        break;
    default:
        row_cstate(f, row, cells);
    }
}

/* ---- the header ------------------------------------------------------------ */

static void header_power(const struct top_frame *f, bool utf8, char *l0, char *l1)
{
    char src[sizeof(f->power_source) * 4], w[32], e[32];
    text_printable(src, sizeof(src), f->power_source,
                   strnlen(f->power_source, sizeof(f->power_source)), sizeof(f->power_source),
                   utf8);
    fmt_watts(w, sizeof(w), f->node_w);
    if (isfinite(f->error_pct))
        snprintf(e, sizeof(e), ", %s%.0f %%", utf8 ? "\u00b1" : "+/-", f->error_pct);
    else
        e[0] = '\0';
    if (isfinite(f->node_w))
        snprintf(l0, TOP_LINE, "%-10s%s W %s%s%s%s%s", "Power", w,
                 f->measured ? "measured" : "estimated", src[0] ? " (" : "", src, src[0] ? ")" : "",
                 e);
    else
        snprintf(l0, TOP_LINE, "%-10sunknown%s%s%s", "Power", src[0] ? " (" : "", src,
                 src[0] ? ")" : "");
    char idle[32], kern[32], unacc[32], procs[32];
    fmt_watts(idle, sizeof(idle), f->idle_w);
    fmt_watts(kern, sizeof(kern), f->kernel_w);
    fmt_watts(unacc, sizeof(unacc), f->unaccounted_w);
    fmt_watts(procs, sizeof(procs), f->procs_w);
    snprintf(l1, TOP_LINE, "%-10sidle floor %s W, kernel %s W, unaccounted %s W, processes %s W",
             "", idle, kern, unacc, procs);
}

static void header_wakeups(const struct top_frame *f, bool utf8, char *l)
{
    char tot[32], idle[32];
    fmt_rate(tot, sizeof(tot), f->total_wakeups_s);
    fmt_rate(idle, sizeof(idle), f->total_idle_wakeups_s);
    if (f->traced) {
        int n = snprintf(l, TOP_LINE, "%-10s%s/s, %s/s out of idle (tracepoints", "Wake-ups", tot,
                         idle);
        if (f->lost_events || f->dropped_events)
            n +=
                snprintf(l + n, TOP_LINE - (size_t)n, "; %llu lost, %llu dropped: low",
                         (unsigned long long)f->lost_events, (unsigned long long)f->dropped_events);
        snprintf(l + n, TOP_LINE - (size_t)n, ")");
        return;
    }
    char why[TOP_LINE / 2];
    const char *w = f->why_not_traced ? f->why_not_traced : "unknown";
    text_printable(why, sizeof(why), w, strlen(w), 160, utf8);
    snprintf(l, TOP_LINE, "%-10s%s/s (from /proc, not traced: %s)", "Wake-ups", tot, why);
}

void top_header_lines(const struct top_frame *f, bool utf8, char lines[TOP_HEADER][TOP_LINE])
{
    header_power(f, utf8, lines[0], lines[1]);
    header_wakeups(f, utf8, lines[2]);
    char busy[32];
    fmt_num(busy, sizeof(busy), f->busy_cpus, 2);
    snprintf(lines[3], TOP_LINE, "%-10s%s of %u busy", "CPUs", busy, f->ncpus);
}
