/* The report's "Wall and parts" section: the wall meter (ACPI power meter
 * or the BMC's DCMI reading) against the sum of the measured parts, the
 * unmeasured remainder, and the facility on top (model/reconcile.h). */
#include <math.h>
#include <stdio.h>

#include "base/table.h"
#include "base/util.h"
#include "model/reconcile.h"
#include "view/report.h"
#include "view/report_power.h"

static const char *const part_text[] = {
    [RECONCILE_PACKAGES] = "CPU packages",
    [RECONCILE_PSYS] = "SoC platform (psys)",
    [RECONCILE_DRAM] = "DRAM",
    [RECONCILE_GPUS] = "GPUs",
    [RECONCILE_OTHER] = "other device sensors",
};

void report_reconcile(const struct report_ctx *c, struct reconcile *ret)
{
    reconcile_power(&c->power->readings, c->power->pue, ret);
}

static void reconcile_json(const struct report_ctx *c, struct json *j)
{
    struct reconcile rc;
    report_reconcile(c, &rc);
    json_object_begin(j);
    json_kv_string(j, "wall_source", rc.have_wall ? rc.wall_source : NULL);
    json_kv_string(j, "wall_via", rc.have_wall ? rc.wall_via : NULL);
    json_kv_double(j, "wall_w", rc.wall_w);
    json_key(j, "parts");
    json_array_begin(j);
    for (int i = 0; i < _RECONCILE_PARTS; i++) {
        const struct reconcile_sum *s = &rc.part[i];
        if (!s->channels && !s->no_rate)
            continue;
        json_object_begin(j);
        json_kv_string(j, "part", reconcile_part_name((enum reconcile_part)i));
        json_kv_double(j, "watts", s->channels ? s->watts : NAN);
        json_kv_u64(j, "channels", s->channels);
        json_kv_u64(j, "no_rate", s->no_rate);
        json_kv_bool(j, "added", !s->excluded);
        json_kv_string(j, "excluded", s->excluded);
        json_object_end(j);
    }
    json_array_end(j);
    json_kv_double(j, "parts_w", rc.parts_w);
    json_kv_bool(j, "parts_complete", rc.parts_complete);
    json_kv_double(j, "unmeasured_w", rc.parts_exceed ? NAN : rc.unmeasured_w);
    json_kv_double(j, "unmeasured_pct",
                   !isnan(rc.unmeasured_w) && !rc.parts_exceed && rc.wall_w > 0
                       ? 100.0 * rc.unmeasured_w / rc.wall_w
                       : NAN);
    json_kv_bool(j, "parts_exceed_wall", rc.parts_exceed);
    json_kv_double(j, "excess_w", rc.parts_exceed ? -rc.unmeasured_w : NAN);
    json_kv_double(j, "pue", rc.pue);
    json_kv_double(j, "facility_w", rc.facility_w);
    json_kv_string(j, "note", rc.note);
    json_object_end(j);
}

static void parts_table(const struct reconcile *rc, struct strbuf *out)
{
    struct table t;
    table_init(&t, "part", ">W", ">channels", "note", NULL);
    for (int i = 0; i < _RECONCILE_PARTS; i++) {
        const struct reconcile_sum *s = &rc->part[i];
        if (!s->channels && !s->no_rate)
            continue;
        _cleanup_free_ char *w = s->channels ? xasprintf("%.1f", s->watts) : xstrdup("-");
        _cleanup_free_ char *n = xasprintf("%u", s->channels + s->no_rate);
        _cleanup_free_ char *why = s->excluded  ? xstrdup(s->excluded)
                                   : s->no_rate ? xasprintf("%u gave no rate", s->no_rate)
                                                : xstrdup("");
        table_add(&t, part_text[i], w, n, why);
    }
    table_render(&t, out, REPORT_WIDTH);
    table_free(&t);
}

static void reconcile_text(const struct report_ctx *c, struct strbuf *out)
{
    struct reconcile rc;
    report_reconcile(c, &rc);
    if (rc.have_wall)
        strbuf_appendf(out, "  wall: %.1f W (%s %s %s)\n", rc.wall_w, rc.wall_source, rc.wall_via,
                       rc.wall_domain);
    else
        strbuf_append(out, "  wall: - (no ACPI power meter, no BMC DCMI reading)\n");
    bool any = false;
    for (int i = 0; i < _RECONCILE_PARTS; i++)
        any |= rc.part[i].channels + rc.part[i].no_rate > 0;
    if (any)
        parts_table(&rc, out);
    strbuf_appendf(out, "  measured parts: %.1f W%s\n", rc.parts_w,
                   any ? (rc.parts_complete ? "" : " (incomplete)") : " (no part is metered)");
    if (rc.have_wall && !rc.parts_exceed && !isnan(rc.unmeasured_w))
        strbuf_appendf(out, "  unmeasured: %.1f W (%.0f %% of the wall)\n", rc.unmeasured_w,
                       rc.wall_w > 0 ? 100.0 * rc.unmeasured_w / rc.wall_w : 0.0);
    else if (rc.have_wall && !rc.parts_exceed)
        strbuf_append(out, "  unmeasured: - (a part gave no rate)\n");
    else if (rc.have_wall)
        strbuf_appendf(out, "  unmeasured: - (the parts exceed the wall by %.1f W)\n",
                       -rc.unmeasured_w);
    report_wrap(out, "  ", 4, rc.note);
    if (!isnan(rc.facility_w))
        strbuf_appendf(out, "  facility at PUE %.2f: %.1f W of which %.1f W the wall's IT power\n",
                       rc.pue, rc.facility_w, rc.wall_w);
}

const struct report_section report_section_reconcile = {
    .key = "reconcile",
    .title = "Wall and parts",
    .json = reconcile_json,
    .text = reconcile_text,
};
