/* Timekeeping: can TSC-based figures be trusted across deep C-states? */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "sense/clock.h"
#include "view/report.h"

#define MAX_NOTES 8

struct notes {
    char *v[MAX_NOTES]; /* owned */
    unsigned n;
};

static void note(struct notes *n, char *line)
{
    if (n->n < MAX_NOTES)
        n->v[n->n++] = line;
    else
        free(line);
}

static void notes_free(struct notes *n)
{
    for (unsigned i = 0; i < n->n; i++)
        free(n->v[i]);
}

static void verdict_notes(const struct clock_sample *c, enum clock_verdict v, struct notes *n)
{
    unsigned f = c ? c->cpu.flags : 0;
    switch (v) {
    case CLOCK_TSC_TRUSTWORTHY:
        note(n, xstrdup("invariant TSC (constant_tsc and nonstop_tsc) and the kernel keeps time "
                        "with it: TSC-based figures hold across deep C-states"));
        break;
    case CLOCK_TSC_NOT_INVARIANT:
        if (!(f & TSCF_CONSTANT))
            note(n, xstrdup("no constant_tsc: the TSC rate follows the core frequency, so TSC "
                            "deltas are not time"));
        if (!(f & TSCF_NONSTOP))
            note(n, xstrdup("no nonstop_tsc: the TSC may stop in deep C-states and under-count "
                            "idle time"));
        break;
    case CLOCK_TSC_NOT_CLOCKSOURCE:
        note(n, xasprintf("the TSC is invariant but the kernel keeps time with %s", c->current));
        note(n, clock_list_has(c->available, "tsc")
                    ? xstrdup("tsc is available but not selected: clocksource= on the command "
                              "line, or the watchdog marked it unstable (see dmesg)")
                    : xstrdup("tsc is not an available clocksource: marked unstable at boot "
                              "(see dmesg), or tsc=unstable"));
        break;
    case CLOCK_TSC_INCONSISTENT:
        note(n, xasprintf("processors disagree on the TSC flags (processor %d differs from the "
                          "first): per-CPU TSC values may not compare",
                          c->cpu.first_disagree));
        break;
    case CLOCK_TSC_NONE:
        note(n, xstrdup("no TSC: not an x86 CPU (or cpuinfo without flags)"));
        break;
    case CLOCK_TSC_UNKNOWN:
        note(n, xstrdup("cannot judge: /proc/cpuinfo or the clocksource is unreadable"));
        break;
    }
}

static void flag_notes(const struct clock_sample *c, struct notes *n)
{
    unsigned f = c->cpu.flags, inv = TSCF_CONSTANT | TSCF_NONSTOP;
    if (c->current && !streq(c->current, "tsc"))
        note(n, xasprintf("%s: %s", c->current, clock_source_meaning(c->current)));
    if (f & TSCF_RELIABLE)
        note(n, xstrdup("tsc_reliable: the kernel skips the clocksource watchdog for the TSC"));
    else if ((f & (inv | TSCF_ADJUST)) == (inv | TSCF_ADJUST))
        note(n, xstrdup("no tsc_reliable, but invariant TSC with tsc_adjust: kernels since 5.16 "
                        "skip the watchdog on up to 4 packages"));
    else
        note(n, xstrdup("no tsc_reliable: the clocksource watchdog checks the TSC against "
                        "another clock and drops it if they drift"));
    if (f & TSCF_KNOWN_FREQ)
        note(n, xstrdup("tsc_known_freq: the rate comes from CPUID/MSR, not boot calibration"));
    if (f & TSCF_HYPERVISOR)
        note(n, xstrdup("virtual machine: the flags are what the hypervisor exposes and hold "
                        "only if the host's TSC is invariant too"));
}

static void build_notes(const struct clock_sample *c, enum clock_verdict v, struct notes *n)
{
    *n = (struct notes){0};
    verdict_notes(c, v, n);
    if (c && c->have_cpuinfo && c->cpu.has_flags && (c->cpu.flags & TSCF_TSC))
        flag_notes(c, n);
    else if (c && c->current && !streq(c->current, "tsc"))
        note(n, xasprintf("%s: %s", c->current, clock_source_meaning(c->current)));
}

static void flags_json(const struct clock_sample *c, struct json *j)
{
    json_key(j, "flags");
    if (!c->have_cpuinfo || !c->cpu.has_flags) {
        json_null(j);
        return;
    }
    static const struct {
        const char *name;
        unsigned bit;
    } f[] = {
        {"tsc", TSCF_TSC},
        {"constant_tsc", TSCF_CONSTANT},
        {"nonstop_tsc", TSCF_NONSTOP},
        {"tsc_reliable", TSCF_RELIABLE},
        {"tsc_known_freq", TSCF_KNOWN_FREQ},
        {"tsc_adjust", TSCF_ADJUST},
        {"hypervisor", TSCF_HYPERVISOR},
    };
    json_object_begin(j);
    for (size_t i = 0; i < ARRAY_SIZE(f); i++)
        json_kv_bool(j, f[i].name, (c->cpu.flags & f[i].bit) != 0);
    json_object_end(j);
}

static void available_json(const char *list, struct json *j)
{
    json_key(j, "available");
    if (!list) {
        json_null(j);
        return;
    }
    json_array_begin(j);
    for (const char *p = list; *p;) {
        while (*p == ' ')
            p++;
        const char *w = p;
        while (*p && *p != ' ')
            p++;
        if (p > w) {
            _cleanup_free_ char *word = xasprintf("%.*s", (int)(p - w), w);
            json_string(j, word);
        }
    }
    json_array_end(j);
}

static void tsc_json(const struct report_ctx *c, struct json *j)
{
    const struct clock_sample *cs = c->cur->clock;
    if (!cs) {
        json_null(j);
        return;
    }
    enum clock_verdict v = clock_tsc_verdict(cs);
    unsigned inv = TSCF_CONSTANT | TSCF_NONSTOP;
    json_object_begin(j);
    json_kv_string(j, "clocksource", cs->current);
    available_json(cs->available, j);
    json_kv_string(j, "vendor", cs->have_cpuinfo ? cs->cpu.vendor : NULL);
    json_kv_string(j, "cpu_model", clock_cpu_model(cs));
    json_kv_bool(j, "virtualised", clock_is_vm(cs));
    flags_json(cs, j);
    json_key(j, "invariant_tsc");
    if (cs->have_cpuinfo && cs->cpu.has_flags)
        json_bool(j, (cs->cpu.flags & inv) == inv);
    else
        json_null(j);
    json_key(j, "processors");
    cs->have_cpuinfo ? json_u64(j, cs->cpu.nprocessors) : json_null(j);
    json_kv_u64(j, "disagreeing_processors", cs->cpu.ndisagree);
    json_kv_string(j, "verdict", clock_verdict_name(v));
    json_kv_string(j, "clocksource_meaning",
                   cs->current ? clock_source_meaning(cs->current) : NULL);
    struct notes n;
    build_notes(cs, v, &n);
    json_key(j, "notes");
    json_array_begin(j);
    for (unsigned i = 0; i < n.n; i++)
        json_string(j, n.v[i]);
    json_array_end(j);
    notes_free(&n);
    json_object_end(j);
}

/* "  - text", wrapped at the report width with continuation lines under
 * the text. */
static void wrap_note(struct strbuf *out, const char *text)
{
    size_t col = 4;
    strbuf_append(out, "  - ");
    for (const char *p = text; *p;) {
        const char *w = p;
        while (*p && *p != ' ')
            p++;
        size_t n = (size_t)(p - w);
        if (col > 4 && col + 1 + n > REPORT_WIDTH) {
            strbuf_append(out, "\n    ");
            col = 4;
        } else if (col > 4) {
            strbuf_putc(out, ' ');
            col++;
        }
        strbuf_append_n(out, w, n);
        col += n;
        while (*p == ' ')
            p++;
    }
    strbuf_putc(out, '\n');
}

static const char *yes(const struct clock_sample *c, unsigned bit)
{
    return c->cpu.flags & bit ? "yes" : "no";
}

static void tsc_text(const struct report_ctx *c, struct strbuf *out)
{
    const struct clock_sample *cs = c->cur->clock;
    if (!cs) {
        const char *why = report_unavailable(c, SAMPLER_CLOCK);
        strbuf_appendf(out, "  not available: %s\n", why ? why : "unreadable");
        return;
    }
    strbuf_appendf(out, "  clocksource %s (available: %s)\n", cs->current ? cs->current : "unknown",
                   cs->available ? cs->available : "unknown");
    if (cs->have_cpuinfo && cs->cpu.has_flags) {
        strbuf_appendf(out,
                       "  flags: constant_tsc %s, nonstop_tsc %s, tsc_reliable %s, "
                       "tsc_known_freq %s, tsc_adjust %s\n",
                       yes(cs, TSCF_CONSTANT), yes(cs, TSCF_NONSTOP), yes(cs, TSCF_RELIABLE),
                       yes(cs, TSCF_KNOWN_FREQ), yes(cs, TSCF_ADJUST));
        strbuf_appendf(out, "  %s, %u processors (%s), hypervisor flag %s\n",
                       cs->cpu.vendor ? cs->cpu.vendor : "unknown vendor", cs->cpu.nprocessors,
                       cs->cpu.ndisagree ? "they DISAGREE on these flags" : "all agree",
                       yes(cs, TSCF_HYPERVISOR));
    }
    enum clock_verdict v = clock_tsc_verdict(cs);
    static const char *const say[] = {
        [CLOCK_TSC_UNKNOWN] = "unknown",
        [CLOCK_TSC_NONE] = "no TSC",
        [CLOCK_TSC_TRUSTWORTHY] = "TSC trustworthy across deep C-states",
        [CLOCK_TSC_NOT_INVARIANT] = "TSC NOT invariant",
        [CLOCK_TSC_NOT_CLOCKSOURCE] = "TSC invariant, but not the clocksource",
        [CLOCK_TSC_INCONSISTENT] = "TSC flags differ between processors",
    };
    strbuf_appendf(out, "  verdict: %s\n", say[v]);
    struct notes n;
    build_notes(cs, v, &n);
    for (unsigned i = 0; i < n.n; i++)
        wrap_note(out, n.v[i]);
    notes_free(&n);
}

const struct report_section report_section_tsc = {
    .key = "tsc",
    .title = "Timekeeping (TSC)",
    .json = tsc_json,
    .text = tsc_text,
};
