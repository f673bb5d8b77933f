/* `watt report --html`: the report as one self-contained page, as
 * powertop --html gives. The page loads nothing: the style is inline and
 * the plots are inline SVG (no xmlns either: HTML5 needs none, and a page
 * holding no URL at all is easy to check). Every string from the machine
 * (process names, device names, paths, the text sections) goes through
 * html_text(): made printable first (base/text.h), then escaped, so a comm
 * of "<script>" is shown, never run. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "base/text.h"
#include "base/util.h"
#include "config.h"
#include "view/report.h"
#include "view/top.h"

#define PLOT_W     760 /* px: the SVG width */
#define LABEL_W    180 /* px: the label column */
#define MAX_BARS   20  /* power sources and processes shown */
#define MAX_CPU_PX 14  /* px: a CPU's bar at most ... */
#define MIN_CPU_PX 3   /* ... and at least (384 CPUs: 3 px each) */

/* Printable (controls and invalid UTF-8 as '?'), then &<>"' escaped. */
static void html_text(struct strbuf *out, const char *s)
{
    if (!s)
        return;
    struct strbuf p = {0};
    text_append(&p, s, strlen(s), true);
    for (const char *c = strbuf_str(&p); *c; c++) {
        switch (*c) {
        case '&':
            strbuf_append(out, "&amp;");
            break;
        case '<':
            strbuf_append(out, "&lt;");
            break;
        case '>':
            strbuf_append(out, "&gt;");
            break;
        case '"':
            strbuf_append(out, "&quot;");
            break;
        case '\'':
            strbuf_append(out, "&#39;");
            break;
        default:
            strbuf_putc(out, *c);
        }
    }
    strbuf_free(&p);
}

static const char style[] =
    "body{font-family:sans-serif;margin:1.5em auto;max-width:62em;color:#222}"
    "h1{font-size:1.5em}h2{font-size:1.15em;border-bottom:1px solid #ccc;margin-top:1.6em}"
    "pre{background:#f6f6f6;padding:.6em;overflow-x:auto;font-size:.85em}"
    "nav a{margin-right:.8em}figure{margin:1em 0}figcaption{font-weight:bold;margin:.3em 0}"
    "svg text{font-family:monospace;font-size:11px}.note{color:#666;font-size:.9em}"
    ".legend span{display:inline-block;margin-right:1em;font-size:.85em}"
    ".legend i{display:inline-block;width:.9em;height:.9em;margin-right:.3em;"
    "vertical-align:middle}";

/* Colours: C0 (busy) first, then the idle states shallow to deep. */
static const char *const colours[] = {"#d62728", "#ff7f0e", "#bcbd22", "#2ca02c",
                                      "#17becf", "#1f77b4", "#9467bd", "#8c564b"};

static const char *colour(size_t i)
{
    return colours[i % ARRAY_SIZE(colours)];
}

static void note(struct strbuf *out, const char *text)
{
    strbuf_append(out, "<p class=\"note\">");
    html_text(out, text);
    strbuf_append(out, "</p>\n");
}

/* ---------------------------------------------------------------- plots */

static void legend_item(struct strbuf *out, size_t i, const char *name)
{
    strbuf_appendf(out, "<span><i style=\"background:%s\"></i>", colour(i));
    html_text(out, name);
    strbuf_append(out, "</span>");
}

static void cstate_row(struct strbuf *out, const struct top_cpu *cpu, unsigned y, unsigned h)
{
    double scale = (PLOT_W - LABEL_W - 10) / 100.0, x = LABEL_W;
    strbuf_appendf(out, "<text x=\"0\" y=\"%u\">cpu%d</text>", y + h - 1, cpu->cpu);
    double busy = isnan(cpu->busy_pct) ? 0 : cpu->busy_pct;
    strbuf_appendf(out,
                   "<rect x=\"%.1f\" y=\"%u\" width=\"%.1f\" height=\"%u\" fill=\"%s\">"
                   "<title>cpu%d C0 (busy) %.1f%%</title></rect>",
                   x, y, busy * scale, h, colour(0), cpu->cpu, busy);
    x += busy * scale;
    for (size_t k = 0; k < cpu->nstates; k++) {
        double pct = cpu->st[k].residency_pct;
        if (isnan(pct) || pct <= 0)
            continue;
        strbuf_appendf(out, "<rect x=\"%.1f\" y=\"%u\" width=\"%.1f\" height=\"%u\" fill=\"%s\">",
                       x, y, pct * scale, h, colour(k + 1));
        strbuf_appendf(out, "<title>cpu%d ", cpu->cpu);
        html_text(out, cpu->st[k].name);
        strbuf_appendf(out, " %.1f%%</title></rect>", pct);
        x += pct * scale;
    }
    strbuf_putc(out, '\n');
}

static void plot_cstates(const struct report_ctx *c, struct strbuf *out)
{
    strbuf_append(out, "<figure id=\"plot-cstates\"><figcaption>C-state residency per CPU (% of "
                       "the interval)</figcaption>\n");
    const struct top_frame *f = c->top;
    if (!f || !f->ncpus_rows) {
        note(out, c->b ? "no per-CPU idle states were measured (see the C-states section)"
                       : "one snapshot (--interval 0): residency needs an interval");
        strbuf_append(out, "</figure>\n");
        return;
    }
    const struct top_cpu *first = &f->cpus[0];
    strbuf_append(out, "<div class=\"legend\">");
    legend_item(out, 0, "C0 (busy)");
    for (size_t k = 0; k < first->nstates; k++)
        legend_item(out, k + 1, first->st[k].name);
    strbuf_append(out, "</div>\n");
    unsigned h = (unsigned)(600 / f->ncpus_rows);
    h = h > MAX_CPU_PX ? MAX_CPU_PX : h < MIN_CPU_PX ? MIN_CPU_PX : h;
    unsigned gap = h > 6 ? 2 : 0;
    strbuf_appendf(out, "<svg width=\"%u\" height=\"%zu\" role=\"img\">\n", PLOT_W,
                   f->ncpus_rows * (h + gap) + 2);
    for (size_t i = 0; i < f->ncpus_rows; i++)
        cstate_row(out, &f->cpus[i], (unsigned)(i * (h + gap)), h);
    strbuf_append(out, "</svg></figure>\n");
}

struct bar {
    char *label; /* owned */
    double value;
};

static void plot_bars(struct strbuf *out, const struct bar *v, size_t n, const char *unit)
{
    double max = 0;
    for (size_t i = 0; i < n; i++)
        max = v[i].value > max ? v[i].value : max;
    strbuf_appendf(out, "<svg width=\"%u\" height=\"%zu\" role=\"img\">\n", PLOT_W, n * 18 + 2);
    for (size_t i = 0; i < n; i++) {
        double w = max > 0 ? v[i].value / max * (PLOT_W - LABEL_W - 110) : 0;
        unsigned y = (unsigned)(i * 18);
        _cleanup_free_ char *cut = text_pad(v[i].label, 0);
        cut[text_fit(cut, 24)] = '\0';
        strbuf_appendf(out, "<text x=\"0\" y=\"%u\">", y + 12);
        html_text(out, cut);
        strbuf_appendf(out,
                       "</text><rect x=\"%u\" y=\"%u\" width=\"%.1f\" height=\"14\" "
                       "fill=\"%s\"><title>",
                       LABEL_W, y, w, colour(5));
        html_text(out, v[i].label);
        strbuf_appendf(out, " %.2f %s</title></rect><text x=\"%.1f\" y=\"%u\">%.2f %s</text>\n",
                       v[i].value, unit, LABEL_W + w + 4, y + 12, v[i].value, unit);
    }
    strbuf_append(out, "</svg>\n");
}

static void free_bars(struct bar *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i].label);
}

static void plot_power(const struct report_ctx *c, struct strbuf *out)
{
    strbuf_append(out, "<figure id=\"plot-power\"><figcaption>Power by source (W)</figcaption>\n");
    const struct power_summary *ps = c->power;
    struct bar v[MAX_BARS + 2];
    size_t n = 0;
    if (ps && !isnan(ps->it_w))
        v[n++] = (struct bar){xasprintf("node (%s)", ps->source), ps->it_w};
    if (ps && !isnan(ps->estimated_w) && ps->measured)
        v[n++] = (struct bar){xasprintf("model estimate"), ps->estimated_w};
    for (size_t i = 0; ps && i < ps->readings.n && n < ARRAY_SIZE(v); i++) {
        const struct power_reading *r = &ps->readings.v[i];
        if (!isnan(r->watts))
            v[n++] = (struct bar){xasprintf("%s %s", r->source, r->domain), r->watts};
    }
    if (n)
        plot_bars(out, v, n, "W");
    else
        note(out, c->b ? "no power figure: no meter gave a rate and the model lacked inputs"
                       : "one snapshot (--interval 0): power needs an interval");
    if (ps && ps->coverage[0])
        note(out, ps->coverage);
    free_bars(v, n);
    strbuf_append(out, "</figure>\n");
}

static void plot_wakeups(const struct report_ctx *c, struct strbuf *out)
{
    strbuf_append(out, "<figure id=\"plot-wakeups\"><figcaption>Wake-ups by process (per "
                       "second)</figcaption>\n");
    const struct top_frame *f = c->top;
    struct bar v[MAX_BARS];
    size_t n = 0;
    for (size_t i = 0; f && i < f->nprocs && n < MAX_BARS; i++) /* sorted by wake-ups */
        if (f->procs[i].wakeups_s > 0)
            v[n++] = (struct bar){xasprintf("%s (%d)", f->procs[i].comm, f->procs[i].pid),
                                  f->procs[i].wakeups_s};
    if (n)
        plot_bars(out, v, n, "/s");
    else
        note(out, !f ? "no interval, or the wake-ups could not be counted"
                     : "no process woke up in the interval");
    if (f && f->why_not_traced)
        note(out, f->why_not_traced);
    free_bars(v, n);
    strbuf_append(out, "</figure>\n");
}

/* ---------------------------------------------------------------- page */

static void header(const struct report_ctx *c, struct strbuf *out)
{
    strbuf_append(out, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
                       "<title>watt report: ");
    html_text(out, c->cur->hostname ? c->cur->hostname : "(no hostname)");
    strbuf_appendf(out, "</title>\n<style>%s</style>\n</head>\n<body>\n<h1>watt report: ", style);
    html_text(out, c->cur->hostname ? c->cur->hostname : "(no hostname)");
    strbuf_append(out, "</h1>\n<p>");
    char when[40] = "";
    time_t t = (time_t)(c->cur->real_ns / 1000000000ull);
    struct tm tm;
    if (c->cur->real_ns && gmtime_r(&t, &tm))
        strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S UTC", &tm);
    strbuf_append(out, "Linux ");
    html_text(out, c->cur->kernel ? c->cur->kernel : "?");
    strbuf_append(out, ", root ");
    html_text(out, c->h->root);
    if (c->b)
        strbuf_appendf(out, ", interval %.3f s", c->interval_s);
    else
        strbuf_append(out, ", one snapshot");
    if (*when && c->h->live)
        strbuf_appendf(out, ", %s", when);
    strbuf_appendf(out, "; watt %s</p>\n<nav><a href=\"#plots\">Plots</a>", WATT_VERSION);
    for (size_t i = 0; i < report_nsections; i++)
        strbuf_appendf(out, "<a href=\"#%s\">%s</a>", report_sections[i]->key,
                       report_sections[i]->title);
    strbuf_append(out, "<a href=\"#unmeasured\">Not measured</a></nav>\n");
}

void report_render_html(const struct report_ctx *c, struct strbuf *out)
{
    header(c, out);
    strbuf_append(out, "<section id=\"plots\"><h2>Plots</h2>\n");
    plot_cstates(c, out);
    plot_power(c, out);
    plot_wakeups(c, out);
    strbuf_append(out, "</section>\n");
    for (size_t i = 0; i < report_nsections; i++) {
        struct strbuf text = {0};
        report_sections[i]->text(c, &text);
        strbuf_appendf(out, "<section id=\"%s\"><h2>%s</h2>\n<pre>", report_sections[i]->key,
                       report_sections[i]->title);
        html_text(out, strbuf_str(&text));
        strbuf_append(out, "</pre></section>\n");
        strbuf_free(&text);
    }
    struct strbuf tail = {0};
    report_render_text_tail(c, &tail);
    strbuf_append(out,
                  "<section id=\"unmeasured\"><h2>Not measured here, and problems</h2>\n<pre>");
    html_text(out, strbuf_str(&tail));
    strbuf_append(out, "</pre></section>\n</body>\n</html>\n");
    strbuf_free(&tail);
}
