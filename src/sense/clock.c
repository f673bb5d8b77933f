#include "sense/clock.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"

#define CS_DIR "devices/system/clocksource/clocksource0"

static const struct {
    const char *name;
    unsigned bit;
} tsc_flags[] = {
    {"tsc", TSCF_TSC},
    {"constant_tsc", TSCF_CONSTANT},
    {"nonstop_tsc", TSCF_NONSTOP},
    {"tsc_reliable", TSCF_RELIABLE},
    {"tsc_known_freq", TSCF_KNOWN_FREQ},
    {"hypervisor", TSCF_HYPERVISOR},
    {"tsc_adjust", TSCF_ADJUST},
};

/* The TSCF_* bits among the words of a flags line. */
static unsigned flag_bits(const char *p, const char *e)
{
    unsigned bits = 0;
    while (p < e) {
        while (p < e && (*p == ' ' || *p == '\t'))
            p++;
        const char *w = p;
        while (p < e && *p != ' ' && *p != '\t')
            p++;
        size_t n = (size_t)(p - w);
        /* every flag we want starts with 't', 'c', 'n' or 'h': skip the rest cheaply */
        if (n == 0 || !*w || !strchr("tcnh", *w))
            continue;
        for (size_t i = 0; i < ARRAY_SIZE(tsc_flags); i++)
            if (strlen(tsc_flags[i].name) == n && memcmp(tsc_flags[i].name, w, n) == 0)
                bits |= tsc_flags[i].bit;
    }
    return bits;
}

static char *dup_range(const char *p, const char *e)
{
    char *s = xmalloc((size_t)(e - p) + 1);
    memcpy(s, p, (size_t)(e - p));
    s[e - p] = '\0';
    return s;
}

/* "key\t\t: value": the key without trailing blanks, the value after ": ". */
static bool split_line(const char *p, const char *e, const char **ke, const char **v)
{
    const char *colon = memchr(p, ':', (size_t)(e - p));
    if (!colon)
        return false;
    const char *k = colon;
    while (k > p && isspace((unsigned char)k[-1]))
        k--;
    *ke = k;
    const char *val = colon + 1;
    while (val < e && (*val == ' ' || *val == '\t'))
        val++;
    *v = val;
    return true;
}

static bool key_is(const char *p, const char *ke, const char *key)
{
    size_t n = strlen(key);
    return (size_t)(ke - p) == n && memcmp(p, key, n) == 0;
}

struct cpuinfo_state {
    struct cpuinfo ci;
    long processor; /* the current entry's number */
    const char *first_flags, *first_flags_end;
};

static void take_flags(struct cpuinfo_state *st, const char *v, const char *e)
{
    if (st->ci.nprocessors == 1 && !st->ci.has_flags) {
        st->ci.has_flags = true;
        st->ci.flags = flag_bits(v, e);
        st->first_flags = v;
        st->first_flags_end = e;
        return;
    }
    if (!st->ci.has_flags)
        return;
    /* Big machines repeat the same line hundreds of times: compare bytes
     * first, words only when the line differs. */
    size_t n = (size_t)(e - v);
    if (n == (size_t)(st->first_flags_end - st->first_flags) && memcmp(v, st->first_flags, n) == 0)
        return;
    if (flag_bits(v, e) != st->ci.flags && st->ci.ndisagree++ == 0)
        st->ci.first_disagree = (int)st->processor;
}

static void take_line(struct cpuinfo_state *st, const char *p, const char *e)
{
    const char *ke, *v;
    if (!split_line(p, e, &ke, &v))
        return;
    while (e > v && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r'))
        e--;
    if (key_is(p, ke, "processor")) {
        st->ci.nprocessors++;
        char buf[16] = "";
        if (e - v < (long)sizeof(buf))
            memcpy(buf, v, (size_t)(e - v));
        st->processor = strtol(buf, NULL, 10);
    } else if (key_is(p, ke, "flags")) {
        take_flags(st, v, e);
    } else if (key_is(p, ke, "vendor_id")) {
        if (!st->ci.vendor && v < e)
            st->ci.vendor = dup_range(v, e);
    } else if (key_is(p, ke, "model name")) {
        if (!st->ci.model && v < e)
            st->ci.model = dup_range(v, e);
    }
}

int cpuinfo_parse(const char *text, size_t len, struct cpuinfo *ret)
{
    struct cpuinfo_state st = {.ci = {.first_disagree = -1}};
    const char *p = text, *end = text + len;
    while (p < end) {
        const char *e = memchr(p, '\n', (size_t)(end - p));
        const char *next = e ? e + 1 : end;
        e = e ? e : end;
        /* the keys we want start with p, f, v or m; most lines do not */
        if (e > p && *p && strchr("pfvm", *p) && !memchr(p, '\0', (size_t)(e - p)))
            take_line(&st, p, e);
        p = next;
    }
    if (st.ci.nprocessors == 0) {
        cpuinfo_clear(&st.ci);
        return -EINVAL;
    }
    *ret = st.ci;
    return 0;
}

void cpuinfo_clear(struct cpuinfo *c)
{
    if (!c)
        return;
    free(c->vendor);
    free(c->model);
    *c = (struct cpuinfo){.first_disagree = -1};
}

/* ---- sampler ---- */

static int clock_probe(struct host *h, void **ret_state, char **ret_reason)
{
    if (host_exists(h, HOST_SYS, CS_DIR "/current_clocksource") ||
        host_exists(h, HOST_PROC, "cpuinfo"))
        return 1;
    *ret_reason = xstrdup("neither a clocksource in sysfs nor /proc/cpuinfo");
    return 0;
}

static char *read_str_or_null(struct host *h, struct sample *s, const char *path)
{
    char *v = NULL;
    int r = host_read_str(h, HOST_SYS, path, &v);
    if (r < 0)
        sample_diag_read(s, h, HOST_SYS, path, r);
    return v;
}

static void read_cpuinfo(struct host *h, struct sample *s, struct clock_sample *c)
{
    _cleanup_free_ char *text = NULL;
    size_t len;
    int r = host_read(h, HOST_PROC, "cpuinfo", &text, &len);
    if (r < 0) {
        sample_diag_read(s, h, HOST_PROC, "cpuinfo", r);
        return;
    }
    if (cpuinfo_parse(text, len, &c->cpu) < 0) {
        _cleanup_free_ char *p = host_display_path(h, HOST_PROC, "cpuinfo");
        diags_add(&s->diags, p, 0, "no \"processor\" line: not a cpuinfo file");
        return;
    }
    c->have_cpuinfo = true;
}

static int clock_collect(struct host *h, void *state, struct sample *s)
{
    struct clock_sample *c = xcalloc(1, sizeof(*c));
    s->clock = c;
    c->cpu.first_disagree = -1;
    /* the clocksources and the CPU flags: static under the agent's cache
     * (a clocksource switch shows within a minute, or at SIGHUP) */
    enum host_cache_mode m = host_cache_mode(h, HOST_CACHE_STATIC);
    if (host_is_dir(h, HOST_SYS, CS_DIR)) {
        c->current = read_str_or_null(h, s, CS_DIR "/current_clocksource");
        c->available = read_str_or_null(h, s, CS_DIR "/available_clocksource");
    } else {
        /* one reason for both values */
        sample_diag_read(s, h, HOST_SYS, CS_DIR, -ENOENT);
    }
    read_cpuinfo(h, s, c);
    host_cache_mode(h, m);
    return 0;
}

static void clock_free_sample(struct sample *s)
{
    struct clock_sample *c = s->clock;
    if (!c)
        return;
    free(c->current);
    free(c->available);
    cpuinfo_clear(&c->cpu);
    free(c);
    s->clock = NULL;
}

const struct sampler clock_sampler = {
    .name = "clock",
    .probe = clock_probe,
    .collect = clock_collect,
    .free_sample = clock_free_sample,
};

/* ---- interpretation ---- */

const char *clock_cpu_model(const struct clock_sample *c)
{
    return c && c->have_cpuinfo ? c->cpu.model : NULL;
}

bool clock_is_vm(const struct clock_sample *c)
{
    if (!c)
        return false;
    if (c->have_cpuinfo && (c->cpu.flags & TSCF_HYPERVISOR))
        return true;
    /* paravirtual clocksources exist only in guests */
    return c->current && (streq(c->current, "kvm-clock") || streq(c->current, "xen") ||
                          strncmp(c->current, "hyperv_clocksource", 18) == 0);
}

bool clock_list_has(const char *list, const char *name)
{
    if (!list || !name || !*name)
        return false;
    size_t n = strlen(name);
    for (const char *p = list; (p = strstr(p, name)); p += n)
        if ((p == list || p[-1] == ' ') && (p[n] == '\0' || p[n] == ' ' || p[n] == '\n'))
            return true;
    return false;
}

enum clock_verdict clock_tsc_verdict(const struct clock_sample *c)
{
    if (!c || !c->have_cpuinfo)
        return CLOCK_TSC_UNKNOWN;
    if (!c->cpu.has_flags || !(c->cpu.flags & TSCF_TSC))
        return CLOCK_TSC_NONE;
    if (c->cpu.ndisagree)
        return CLOCK_TSC_INCONSISTENT;
    unsigned inv = TSCF_CONSTANT | TSCF_NONSTOP;
    if ((c->cpu.flags & inv) != inv)
        return CLOCK_TSC_NOT_INVARIANT;
    if (!c->current)
        return CLOCK_TSC_UNKNOWN;
    return streq(c->current, "tsc") ? CLOCK_TSC_TRUSTWORTHY : CLOCK_TSC_NOT_CLOCKSOURCE;
}

const char *clock_verdict_name(enum clock_verdict v)
{
    static const char *const names[] = {
        [CLOCK_TSC_UNKNOWN] = "unknown",
        [CLOCK_TSC_NONE] = "no_tsc",
        [CLOCK_TSC_TRUSTWORTHY] = "trustworthy",
        [CLOCK_TSC_NOT_INVARIANT] = "not_invariant",
        [CLOCK_TSC_NOT_CLOCKSOURCE] = "not_clocksource",
        [CLOCK_TSC_INCONSISTENT] = "inconsistent",
    };
    return (unsigned)v < ARRAY_SIZE(names) ? names[v] : "unknown";
}

const char *clock_source_meaning(const char *name)
{
    static const struct {
        const char *name, *meaning;
    } known[] = {
        {"tsc", "the CPU's time-stamp counter: the cheapest clock to read (rdtsc, in the vDSO)"},
        {"tsc-early", "the TSC before the kernel finished calibrating it (early boot only)"},
        {"kvm-clock", "KVM's paravirtual clock: cheap to read through the vDSO, fine in a VM"},
        {"hpet", "the HPET chipset timer: slow to read (an uncached device access, about "
                 "a microsecond, on every clock read), usually because the TSC was dropped"},
        {"acpi_pm", "the ACPI PM timer (3.58 MHz, an I/O port read): slow to read, the last "
                    "hardware fallback"},
        {"xen", "Xen's paravirtual clock: fine in a Xen guest"},
        {"hyperv_clocksource_tsc_page", "Hyper-V's reference TSC page: cheap to read, fine in "
                                        "a Hyper-V guest"},
        {"hyperv_clocksource_msr", "Hyper-V's reference counter read through an MSR: a VM exit "
                                   "on every read, slow"},
        {"arch_sys_counter", "the Arm generic timer: constant rate, counts through idle "
                             "states, cheap to read"},
        {"jiffies", "the scheduler tick: 1-10 ms resolution, used when no hardware clock works"},
        {"refined-jiffies", "the scheduler tick: 1-10 ms resolution, used when no hardware "
                            "clock works"},
        {"pit", "the legacy i8253 PIT: slow and coarse"},
    };
    for (size_t i = 0; name && i < ARRAY_SIZE(known); i++)
        if (streq(known[i].name, name))
            return known[i].meaning;
    return "a clocksource watt does not describe";
}
