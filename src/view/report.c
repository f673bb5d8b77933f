#include "view/report.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/jsondoc.h"
#include "base/text.h"
#include "base/util.h"
#include "config.h"
#include "sense/clock.h"

const struct report_section *const report_sections[] = {
    &report_section_host,      &report_section_power,       &report_section_reconcile,
    &report_section_memory,    &report_section_gpus,        &report_section_cstates,
    &report_section_frequency, &report_section_utilisation, &report_section_interrupts,
    &report_section_wakeups,   &report_section_devices,     &report_section_latency,
    &report_section_tsc,       &report_section_advice,
};
const size_t report_nsections = ARRAY_SIZE(report_sections);

const struct devices_sample *report_dev_prev(const struct report_ctx *c)
{
    if (c->dev_prev_set)
        return c->dev_prev;
    return c->b ? c->a->devices : NULL;
}

const char *report_unavailable(const struct report_ctx *c, enum sampler_id id)
{
    return c->sense->usable[id] ? NULL : c->sense->why[id];
}

bool report_cpu_rows(const struct report_ctx *c, unsigned n,
                     int (*cpu_id)(const void *ud, unsigned i),
                     void (*cpu_row)(void *ud, unsigned i, const char *label),
                     void (*pkg_row)(void *ud, int pkg, const char *label), void *ud)
{
    char label[24];
    bool per_cpu = c->per_cpu || n <= 16;
    for (unsigned i = 0; per_cpu && i < n; i++) {
        snprintf(label, sizeof(label), "cpu%d", cpu_id(ud, i));
        cpu_row(ud, i, label);
    }
    const struct topology *t = &c->cur->topo;
    for (unsigned p = 0; p < t->npackages; p++) {
        snprintf(label, sizeof(label), "pkg%d", t->package_ids[p]);
        pkg_row(ud, t->package_ids[p], label);
    }
    return per_cpu;
}

void report_wrap(struct strbuf *out, const char *first, size_t indent, const char *text)
{
    size_t col = strlen(first);
    strbuf_append(out, first);
    bool line_empty = true;
    while (*text) {
        while (*text == ' ')
            text++;
        size_t w = strcspn(text, " ");
        if (!w)
            break;
        if (!line_empty && col + 1 + w > REPORT_WIDTH) {
            strbuf_putc(out, '\n');
            strbuf_pad(out, ' ', indent);
            col = indent;
            line_empty = true;
        }
        if (!line_empty) {
            strbuf_putc(out, ' ');
            col++;
        }
        strbuf_append_n(out, text, w);
        col += w;
        line_empty = false;
        text += w;
    }
    strbuf_putc(out, '\n');
}

/* The same problem seen in both samples is one problem. */
static bool seen_before(const struct report_ctx *c, const struct diags *d, size_t i)
{
    const struct diags *lists[] = {&c->a->diags, c->b ? &c->b->diags : NULL, c->diags};
    for (size_t l = 0; l < ARRAY_SIZE(lists); l++) {
        if (!lists[l])
            continue;
        size_t n = lists[l] == d ? i : lists[l]->n;
        for (size_t k = 0; k < n; k++)
            if (streq(lists[l]->v[k].where, d->v[i].where) &&
                streq(lists[l]->v[k].what, d->v[i].what))
                return true;
        if (lists[l] == d)
            return false;
    }
    return false;
}

static void add_diags(const struct report_ctx *c, struct json *j, const struct diags *d)
{
    for (size_t i = 0; i < d->n; i++) {
        if (seen_before(c, d, i))
            continue;
        json_object_begin(j);
        json_kv_string(j, "where", d->v[i].where);
        json_kv_string(j, "error", d->v[i].err ? errno_name(d->v[i].err) : NULL);
        json_kv_string(j, "reason", d->v[i].what);
        json_object_end(j);
    }
}

static void problems_json(const struct report_ctx *c, struct json *j)
{
    json_key(j, "unavailable");
    json_array_begin(j);
    for (int i = 0; i < _SAMPLER_MAX; i++) {
        if (c->sense->usable[i])
            continue;
        json_object_begin(j);
        json_kv_string(j, "sampler", sampler_table[i]->name);
        json_kv_string(j, "reason", c->sense->why[i]);
        json_object_end(j);
    }
    json_array_end(j);
    json_key(j, "problems");
    json_array_begin(j);
    add_diags(c, j, &c->a->diags);
    if (c->b)
        add_diags(c, j, &c->b->diags);
    add_diags(c, j, c->diags);
    json_array_end(j);
}

void report_render_json(const struct report_ctx *c, struct json *j)
{
    /* the time of the later sample: the end of the window the report covers */
    uint64_t real_ns = c->cur->real_ns;
    json_doc_begin(j, "watt-report/2",
                   real_ns ? doc_time((int64_t)(real_ns / 1000000000u)) : doc_time_now());
    json_kv_string(j, "watt_version", WATT_VERSION);
    json_kv_string(j, "root", c->h->root);
    json_kv_bool(j, "live", c->h->live);
    json_kv_double(j, "interval_s", c->b ? c->interval_s : NAN);
    json_kv_double(j, "sample_cost_ms", (double)c->cur->cost_ns / 1e6);
    for (size_t i = 0; i < report_nsections; i++) {
        json_key(j, report_sections[i]->key);
        report_sections[i]->json(c, j);
    }
    problems_json(c, j);
    json_object_end(j);
}

static void text_diags(const struct report_ctx *c, struct strbuf *out, const struct diags *d,
                       size_t *shown)
{
    for (size_t i = 0; i < d->n; i++) {
        if (seen_before(c, d, i))
            continue;
        if (++*shown > 40)
            continue;
        _cleanup_free_ char *line = xasprintf("%s: %s", d->v[i].where, d->v[i].what);
        report_wrap(out, "  ", 6, line);
    }
}

static size_t count_diags(const struct report_ctx *c, const struct diags *d)
{
    size_t n = 0;
    for (size_t i = 0; i < d->n; i++)
        n += !seen_before(c, d, i);
    return n;
}

void report_render_text(const struct report_ctx *c, struct strbuf *out)
{
    for (size_t i = 0; i < report_nsections; i++) {
        strbuf_appendf(out, "%s%s\n", i ? "\n" : "", report_sections[i]->title);
        report_sections[i]->text(c, out);
    }
    strbuf_putc(out, '\n');
    report_render_text_tail(c, out);
}

void report_render_text_tail(const struct report_ctx *c, struct strbuf *out)
{
    size_t total = count_diags(c, &c->a->diags) + (c->b ? count_diags(c, &c->b->diags) : 0) +
                   count_diags(c, c->diags);
    strbuf_append(out, "Not measured here\n");
    bool all = true;
    for (int i = 0; i < _SAMPLER_MAX; i++)
        all &= c->sense->usable[i] != 0;
    if (all)
        strbuf_append(out, "  nothing: every sampler ran\n");
    for (int i = 0; i < _SAMPLER_MAX; i++)
        if (!c->sense->usable[i]) {
            char first[32];
            snprintf(first, sizeof(first), "  %-9s ", sampler_table[i]->name);
            report_wrap(out, first, 12, c->sense->why[i]);
        }
    if (total) {
        size_t shown = 0;
        strbuf_appendf(out, "\nProblems (%zu): these values are absent from the report\n", total);
        text_diags(c, out, &c->a->diags, &shown);
        if (c->b)
            text_diags(c, out, &c->b->diags, &shown);
        text_diags(c, out, c->diags, &shown);
        if (shown > 40)
            strbuf_appendf(out, "  ... %zu more in --json\n", shown - 40);
    }
}
