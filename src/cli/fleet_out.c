#include "cli/fleet_out.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/jsondoc.h"
#include "base/table.h"
#include "base/util.h"

/* ---- shared ------------------------------------------------------------ */

/* energy / lower bound - 1 (0.25 = 25 % above the bound); NaN without a
 * usable bound, which JSON writes as null and the tables as "-". */
static double above_bound(const struct fleet_result *r)
{
    if (!(r->lower_bound_kwh > 0) || !isfinite(r->lower_bound_kwh) || !isfinite(r->energy_kwh))
        return NAN;
    return r->energy_kwh / r->lower_bound_kwh - 1.0;
}

/* V with DECIMALS decimals; "-" when not finite; never "-0.00". SIGN
 * prints a leading '+' on positive numbers. */
static void fmt_fixed(char *buf, size_t size, double v, int decimals, bool sign)
{
    if (!isfinite(v)) {
        snprintf(buf, size, "-");
        return;
    }
    if (fabs(v) < 0.5 * pow(10, -decimals))
        v = 0.0;
    snprintf(buf, size, sign ? "%+.*f" : "%.*f", decimals, v);
}

/* Write B to F and flush: 0 or -errno (-EIO when the stream gives none). */
static int write_all(FILE *f, const struct strbuf *b)
{
    errno = 0;
    if (b->len && fwrite(b->s, 1, b->len, f) != b->len)
        return errno > 0 ? -errno : -EIO;
    if (fflush(f) != 0 || ferror(f))
        return errno > 0 ? -errno : -EIO;
    return 0;
}

/* ---- JSON -------------------------------------------------------------- */

static void json_point(struct json *j, const struct fleet_point *p)
{
    json_object_begin(j);
    json_kv_double(j, "t_s", p->t_s);
    json_kv_u64(j, "active_hosts", p->active_hosts);
    json_kv_u64(j, "vms", p->vms);
    json_kv_double(j, "power_w", p->power_w);
    json_kv_double(j, "sla_violation", p->sla_violation);
    json_kv_u64(j, "migrations", p->migrations);
    json_object_end(j);
}

void fleet_out_json(struct json *j, const struct fleet_result *r, const char *trace_origin,
                    bool with_series)
{
    json_object_begin(j);
    json_kv_string(j, "policy", r->policy);
    json_kv_string(j, "mode", r->compat ? "compat" : "realistic");
    json_kv_string(j, "trace", trace_origin);
    json_kv_double(j, "energy_kwh", r->energy_kwh);
    json_kv_double(j, "slatah", r->slatah);
    json_kv_double(j, "pdm", r->pdm);
    json_kv_double(j, "slav", r->slav);
    json_kv_double(j, "esv", r->esv);
    json_kv_u64(j, "migrations", r->migrations);
    json_kv_u64(j, "power_ons", r->power_ons);
    json_kv_u64(j, "power_offs", r->power_offs);
    json_kv_double(j, "unserved", r->unserved);
    json_kv_u64(j, "max_active_hosts", r->max_active_hosts);
    json_kv_double(j, "mean_active_hosts", r->mean_active_hosts);
    json_kv_u64(j, "vms_end", r->vms_end);
    json_kv_u64(j, "vms_failed", r->vms_failed);
    json_kv_double(j, "lower_bound_kwh", r->lower_bound_kwh);
    json_kv_double(j, "above_lower_bound", above_bound(r));
    json_kv_double(j, "served_bound_kwh", r->served_bound_kwh);
    if (with_series) {
        json_key(j, "series");
        json_array_begin(j);
        for (size_t i = 0; i < r->n_series; i++)
            json_point(j, &r->series[i]);
        json_array_end(j);
    }
    json_object_end(j);
}

void fleet_out_json_doc(struct json *j, const char *schema, int64_t time_s,
                        const struct fleet_result *const *runs, char *const *origins, size_t n,
                        bool with_series)
{
    json_doc_begin(j, schema, time_s);
    json_key(j, "runs");
    json_array_begin(j);
    for (size_t i = 0; i < n; i++)
        fleet_out_json(j, runs[i], origins ? origins[i] : NULL, with_series);
    json_array_end(j);
    json_object_end(j);
}

/* ---- tables ------------------------------------------------------------ */

enum {
    COL_POLICY,
    COL_ENERGY,
    COL_SLATAH,
    COL_PDM,
    COL_SLAV,
    COL_ESV,
    COL_MIGRATIONS,
    COL_ONOFF,
    COL_BOUND,
    N_COLS,
};

#define CELL_MAX 64

/* The metric cells of one run, scaled as the column headers say. */
static void row_cells(const struct fleet_result *r, char c[N_COLS][CELL_MAX])
{
    snprintf(c[COL_POLICY], CELL_MAX, "%s", r->policy);
    fmt_fixed(c[COL_ENERGY], CELL_MAX, r->energy_kwh, 2, false);
    fmt_fixed(c[COL_SLATAH], CELL_MAX, r->slatah * 100, 2, false);
    fmt_fixed(c[COL_PDM], CELL_MAX, r->pdm * 100, 3, false);
    fmt_fixed(c[COL_SLAV], CELL_MAX, r->slav * 1e5, 2, false);
    fmt_fixed(c[COL_ESV], CELL_MAX, r->esv * 1e3, 2, false);
    snprintf(c[COL_MIGRATIONS], CELL_MAX, "%lu", r->migrations);
    snprintf(c[COL_ONOFF], CELL_MAX, "%lu/%lu", r->power_ons, r->power_offs);
    fmt_fixed(c[COL_BOUND], CELL_MAX, above_bound(r) * 100, 1, true);
}

/* Headers; a leading '>' right-aligns (table.h). */
static const char *const col_head[N_COLS] = {
    "policy",     ">energy kWh", ">SLATAH %",     ">PDM %",      ">SLAV x1e-5",
    ">ESV x1e-3", ">migrations", ">hosts on/off", ">vs bound %",
};

void fleet_out_table(struct strbuf *out, const struct fleet_result *const *runs, size_t n,
                     const char *const *labels)
{
    const char *const *h = col_head;
    struct table t;
    if (labels)
        table_init(&t, "label", h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7], h[8], NULL);
    else
        table_init(&t, h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7], h[8], NULL);
    for (size_t i = 0; i < n; i++) {
        char c[N_COLS][CELL_MAX];
        row_cells(runs[i], c);
        if (labels)
            table_add(&t, labels[i], c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7], c[8]);
        else
            table_add(&t, c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7], c[8]);
    }
    /* no clipping: every cell is data (about 116 columns for a day's label) */
    table_render(&t, out, 4096);
    table_free(&t);
}

/* A markdown cell: '|' escaped, line breaks as spaces. */
static void md_cell(struct strbuf *out, const char *s)
{
    strbuf_append(out, " ");
    for (; s && *s; s++) {
        if (*s == '|')
            strbuf_append(out, "\\|");
        else if (*s == '\n' || *s == '\r')
            strbuf_putc(out, ' ');
        else
            strbuf_putc(out, *s);
    }
    strbuf_append(out, " |");
}

void fleet_out_markdown(struct strbuf *out, const struct fleet_result *const *runs, size_t n,
                        const char *const *labels)
{
    strbuf_append(out, "|");
    if (labels)
        md_cell(out, "label");
    for (size_t c = 0; c < N_COLS; c++)
        md_cell(out, col_head[c] + (col_head[c][0] == '>'));
    strbuf_append(out, "\n|");
    if (labels)
        strbuf_append(out, "---|");
    for (size_t c = 0; c < N_COLS; c++)
        strbuf_append(out, col_head[c][0] == '>' ? "---:|" : "---|");
    strbuf_putc(out, '\n');
    for (size_t i = 0; i < n; i++) {
        char c[N_COLS][CELL_MAX];
        row_cells(runs[i], c);
        strbuf_append(out, "|");
        if (labels)
            md_cell(out, labels[i]);
        for (size_t k = 0; k < N_COLS; k++)
            md_cell(out, c[k]);
        strbuf_putc(out, '\n');
    }
}

/* ---- CSV --------------------------------------------------------------- */

/* RFC 4180: quote a field holding a comma, quote or line break. */
static void csv_field(struct strbuf *b, const char *s)
{
    if (!strpbrk(s, ",\"\r\n")) {
        strbuf_append(b, s);
        return;
    }
    strbuf_putc(b, '"');
    for (; *s; s++) {
        if (*s == '"')
            strbuf_putc(b, '"');
        strbuf_putc(b, *s);
    }
    strbuf_putc(b, '"');
}

int fleet_out_series_csv(FILE *f, const struct fleet_result *const *runs, size_t n,
                         const char *const *labels)
{
    struct strbuf b = {0};
    strbuf_append(&b, "run,policy,t_s,active_hosts,vms,power_w,sla_violation,migrations\n");
    for (size_t i = 0; i < n; i++) {
        const struct fleet_result *r = runs[i];
        char run[32];
        snprintf(run, sizeof(run), "%zu", i + 1);
        for (size_t k = 0; k < r->n_series; k++) {
            const struct fleet_point *p = &r->series[k];
            csv_field(&b, labels && labels[i] ? labels[i] : run);
            strbuf_putc(&b, ',');
            csv_field(&b, r->policy);
            /* t_s to 0.1 s keeps CloudSim's k x 300 + 0.1 ticks exact */
            strbuf_appendf(&b, ",%.1f,%u,%u,%.1f,%.6f,%u\n", p->t_s, p->active_hosts, p->vms,
                           p->power_w, p->sla_violation, p->migrations);
        }
    }
    int rc = write_all(f, &b);
    strbuf_free(&b);
    return rc;
}

/* ---- SVG --------------------------------------------------------------- */

#define SVG_W        900
#define SVG_LEFT     70 /* room for y tick labels */
#define SVG_RIGHT    20
#define SVG_PLOT_W   (SVG_W - SVG_LEFT - SVG_RIGHT)
#define SVG_PANEL_H  160
#define SVG_LABEL_H  24 /* panel title above each panel */
#define SVG_GAP      12
#define SVG_CHAR_W   7 /* rough width of a 12 px sans-serif character, for layout */
#define SVG_N_PANELS 3

/* Okabe & Ito's colour-blind-safe palette, ordered for a white background
 * (yellow last); runs beyond 8 reuse it dashed. */
static const char *const svg_palette[] = {
    "#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442",
};
#define SVG_N_COLOURS ARRAY_SIZE(svg_palette)

static const char *const panel_title[SVG_N_PANELS] = {
    "active hosts",
    "power (kW)",
    "SLA violation (% of active host-time)",
};

static double panel_value(int panel, const struct fleet_point *p)
{
    switch (panel) {
    case 0:
        return p->active_hosts;
    case 1:
        return p->power_w / 1000.0;
    default:
        return p->sla_violation * 100.0;
    }
}

/* Length of the well-formed UTF-8 sequence (an XML character) at P, or 0. */
static size_t utf8_char_len(const unsigned char *p)
{
    if (p[0] < 0x80)
        return 1;
    size_t n = p[0] >= 0xc2 && p[0] <= 0xdf   ? 2
               : p[0] >= 0xe0 && p[0] <= 0xef ? 3
               : p[0] >= 0xf0 && p[0] <= 0xf4 ? 4
                                              : 0;
    for (size_t i = 1; i < n; i++)
        if ((p[i] & 0xc0) != 0x80)
            return 0;
    /* overlong forms, surrogates, beyond U+10FFFF, U+FFFE and U+FFFF */
    if ((p[0] == 0xe0 && p[1] < 0xa0) || (p[0] == 0xed && p[1] >= 0xa0) ||
        (p[0] == 0xf0 && p[1] < 0x90) || (p[0] == 0xf4 && p[1] >= 0x90) ||
        (p[0] == 0xef && p[1] == 0xbf && p[2] >= 0xbe))
        return 0;
    return n;
}

/* Text as XML character data or attribute value: markup characters as
 * entities; control characters and invalid UTF-8, which XML cannot carry,
 * as '?'. */
static void svg_escape(struct strbuf *b, const char *s)
{
    const unsigned char *p = (const unsigned char *)(s ? s : "");
    while (*p) {
        size_t len = utf8_char_len(p);
        switch (len ? *p : 0) {
        case '&':
            strbuf_append(b, "&amp;");
            break;
        case '<':
            strbuf_append(b, "&lt;");
            break;
        case '>':
            strbuf_append(b, "&gt;");
            break;
        case '"':
            strbuf_append(b, "&quot;");
            break;
        case '\'':
            strbuf_append(b, "&#39;");
            break;
        default:
            if (len == 0 || *p < 0x20)
                strbuf_putc(b, '?');
            else
                strbuf_append_n(b, (const char *)p, len);
        }
        p += len ? len : 1;
    }
}

/* An axis from 0 to max with ticks every step, labelled with decimals. */
struct axis {
    double max, step;
    int decimals;
};

static int step_decimals(double step)
{
    int d = 0;
    while (d < 6 && fabs(step * pow(10, d) - round(step * pow(10, d))) > 1e-6)
        d++;
    return d;
}

/* A round step (1, 2, 2.5, 5 x 10^k, at least MIN_STEP) giving about
 * TICKS ticks up to VMAX. */
static struct axis axis_nice(double vmax, double ticks, double min_step)
{
    if (!(vmax > 0) || !isfinite(vmax))
        vmax = 1;
    double raw = vmax / ticks;
    double mag = pow(10, floor(log10(raw)));
    static const double mult[] = {1, 2, 2.5, 5, 10};
    double step = 10 * mag;
    for (size_t i = 0; i < ARRAY_SIZE(mult); i++)
        if (mult[i] * mag >= raw * (1 - 1e-9)) {
            step = mult[i] * mag;
            break;
        }
    if (step < min_step)
        step = min_step;
    struct axis a = {.step = step, .decimals = step_decimals(step)};
    a.max = fmax(1, ceil(vmax / step - 1e-9)) * step;
    return a;
}

/* Time in hours: steps that read as a clock (3 h for a day), <= 8 ticks. */
static struct axis axis_hours(double max_h)
{
    static const double steps[] = {0.25, 0.5, 1, 2, 3, 6, 12, 24, 48, 72, 168, 336, 720, 1440};
    double step = steps[ARRAY_SIZE(steps) - 1];
    for (size_t i = 0; i < ARRAY_SIZE(steps); i++)
        if (ceil(max_h / steps[i] - 1e-3) <= 8) {
            step = steps[i];
            break;
        }
    struct axis a = {.step = step, .decimals = step_decimals(step)};
    /* the slack absorbs CloudSim's 0.1 s tick offset: 24.00003 h stays 24 */
    a.max = fmax(1, ceil(max_h / step - 1e-3)) * step;
    return a;
}

static double axis_frac(const struct axis *a, double v)
{
    double f = v / a->max;
    return f < 0 ? 0 : f > 1 ? 1 : f;
}

static void svg_text(struct strbuf *b, double x, double y, const char *anchor, const char *s)
{
    strbuf_appendf(b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\">", x, y, anchor);
    svg_escape(b, s);
    strbuf_append(b, "</text>\n");
}

static void legend_text(struct strbuf *t, const struct fleet_result *r, const char *label)
{
    strbuf_reset(t);
    if (label) {
        strbuf_append(t, label);
        strbuf_putc(t, ' ');
    }
    strbuf_append(t, r->policy);
}

static void svg_stroke(struct strbuf *b, size_t i)
{
    strbuf_appendf(b, "stroke=\"%s\"", svg_palette[i % SVG_N_COLOURS]);
    if ((i / SVG_N_COLOURS) % 2)
        strbuf_append(b, " stroke-dasharray=\"6 3\"");
}

/* The legend, flowing left to right from Y; returns the height it took. */
static int svg_legend(struct strbuf *b, const struct fleet_result *const *runs, size_t n,
                      const char *const *labels, int y)
{
    struct strbuf t = {0};
    int x = SVG_LEFT, rows = n ? 1 : 0;
    for (size_t i = 0; i < n; i++) {
        legend_text(&t, runs[i], labels ? labels[i] : NULL);
        int w = 30 + SVG_CHAR_W * (int)t.len + 18;
        if (x > SVG_LEFT && x + w > SVG_LEFT + SVG_PLOT_W) {
            x = SVG_LEFT;
            rows++;
        }
        int ly = y + (rows - 1) * 18 + 12;
        strbuf_appendf(b, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke-width=\"2.5\" ", x,
                       ly - 4, x + 24, ly - 4);
        svg_stroke(b, i);
        strbuf_append(b, "/>\n");
        svg_text(b, x + 30, ly, "start", strbuf_str(&t));
        x += w;
    }
    strbuf_free(&t);
    return rows * 18 + (rows ? 8 : 0);
}

/* Frame, grid and tick labels of one panel whose plot area starts at TOP. */
static void svg_panel_frame(struct strbuf *b, int panel, int top, const struct axis *xa,
                            const struct axis *ya, bool x_labels)
{
    svg_text(b, SVG_LEFT, top - 8, "start", panel_title[panel]);
    strbuf_append(b, "<g stroke=\"#dddddd\" stroke-width=\"1\">\n");
    for (double v = 0; v <= ya->max * (1 + 1e-9); v += ya->step) {
        double y = top + SVG_PANEL_H * (1 - axis_frac(ya, v));
        strbuf_appendf(b, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\"/>\n", SVG_LEFT, y,
                       SVG_LEFT + SVG_PLOT_W, y);
    }
    for (double h = 0; h <= xa->max * (1 + 1e-9); h += xa->step) {
        double x = SVG_LEFT + SVG_PLOT_W * axis_frac(xa, h);
        strbuf_appendf(b, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\"/>\n", x, top, x,
                       top + SVG_PANEL_H);
    }
    strbuf_append(b, "</g>\n");
    strbuf_appendf(b,
                   "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" "
                   "stroke=\"#333333\"/>\n",
                   SVG_LEFT, top, SVG_PLOT_W, SVG_PANEL_H);
    char num[32];
    for (double v = 0; v <= ya->max * (1 + 1e-9); v += ya->step) {
        double y = top + SVG_PANEL_H * (1 - axis_frac(ya, v));
        fmt_fixed(num, sizeof(num), v, ya->decimals, false);
        svg_text(b, SVG_LEFT - 6, y + 4, "end", num);
    }
    for (double h = 0; x_labels && h <= xa->max * (1 + 1e-9); h += xa->step) {
        fmt_fixed(num, sizeof(num), h, xa->decimals, false);
        svg_text(b, SVG_LEFT + SVG_PLOT_W * axis_frac(xa, h), top + SVG_PANEL_H + 16, "middle",
                 num);
    }
}

/* One polyline per run with a series; non-finite points are left out. */
static void svg_panel_lines(struct strbuf *b, int panel, int top, const struct axis *xa,
                            const struct axis *ya, const struct fleet_result *const *runs, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const struct fleet_result *r = runs[i];
        if (!r->n_series)
            continue;
        strbuf_append(b, "<polyline fill=\"none\" stroke-width=\"1.5\" "
                         "stroke-linejoin=\"round\" ");
        svg_stroke(b, i);
        strbuf_append(b, " points=\"");
        size_t put = 0;
        for (size_t k = 0; k < r->n_series; k++) {
            double v = panel_value(panel, &r->series[k]);
            double h = r->series[k].t_s / 3600.0;
            if (!isfinite(v) || !isfinite(h))
                continue;
            strbuf_appendf(b, "%s%.1f,%.1f",
                           put == 0  ? ""
                           : put % 8 ? " "
                                     : "\n",
                           SVG_LEFT + SVG_PLOT_W * axis_frac(xa, h),
                           top + SVG_PANEL_H * (1 - axis_frac(ya, v)));
            put++;
        }
        strbuf_append(b, "\"/>\n");
    }
}

/* The largest value of PANEL over all runs (0 without data). */
static double panel_max(int panel, const struct fleet_result *const *runs, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++)
        for (size_t k = 0; k < runs[i]->n_series; k++) {
            double v = panel == -1 ? runs[i]->series[k].t_s / 3600.0
                                   : panel_value(panel, &runs[i]->series[k]);
            if (isfinite(v) && v > m)
                m = v;
        }
    return m;
}

static void svg_build(struct strbuf *b, const struct fleet_result *const *runs, size_t n,
                      const char *const *labels, const char *title)
{
    struct strbuf body = {0};
    int y = 12;
    if (title) {
        strbuf_appendf(&body,
                       "<text x=\"%d\" y=\"28\" text-anchor=\"middle\" font-size=\"16\" "
                       "font-weight=\"bold\">",
                       SVG_W / 2);
        svg_escape(&body, title);
        strbuf_append(&body, "</text>\n");
        y = 44;
    }
    y += svg_legend(&body, runs, n, labels, y);
    struct axis xa = axis_hours(panel_max(-1, runs, n));
    for (int p = 0; p < SVG_N_PANELS; p++) {
        int top = y + SVG_LABEL_H;
        struct axis ya = axis_nice(panel_max(p, runs, n), 5, p == 0 ? 1 : 0);
        strbuf_appendf(&body, "<g class=\"panel\">\n");
        svg_panel_frame(&body, p, top, &xa, &ya, p == SVG_N_PANELS - 1);
        svg_panel_lines(&body, p, top, &xa, &ya, runs, n);
        strbuf_append(&body, "</g>\n");
        y = top + SVG_PANEL_H + SVG_GAP;
    }
    svg_text(&body, SVG_LEFT + SVG_PLOT_W / 2.0, y + 26, "middle", "time (h)");
    int height = y + 36;

    strbuf_append(b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    strbuf_appendf(b,
                   "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
                   "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"12\" "
                   "fill=\"#222222\">\n",
                   SVG_W, height, SVG_W, height);
    if (title) {
        strbuf_append(b, "<title>");
        svg_escape(b, title);
        strbuf_append(b, "</title>\n");
    }
    strbuf_appendf(b, "<rect width=\"%d\" height=\"%d\" fill=\"#ffffff\"/>\n", SVG_W, height);
    strbuf_append(b, strbuf_str(&body));
    strbuf_append(b, "</svg>\n");
    strbuf_free(&body);
}

int fleet_out_svg(FILE *f, const struct fleet_result *const *runs, size_t n,
                  const char *const *labels, const char *title)
{
    struct strbuf b = {0};
    svg_build(&b, runs, n, labels, title);
    int rc = write_all(f, &b);
    strbuf_free(&b);
    return rc;
}
