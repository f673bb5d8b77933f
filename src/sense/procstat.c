#include "sense/procstat.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cpuset.h"
#include "base/parse.h"
#include "base/util.h"

static const char *const mode_names[_PROCSTAT_NMODES] = {
    [PROCSTAT_USER] = "user",       [PROCSTAT_NICE] = "nice",
    [PROCSTAT_SYSTEM] = "system",   [PROCSTAT_IDLE] = "idle",
    [PROCSTAT_IOWAIT] = "iowait",   [PROCSTAT_IRQ] = "irq",
    [PROCSTAT_SOFTIRQ] = "softirq", [PROCSTAT_STEAL] = "steal",
    [PROCSTAT_GUEST] = "guest",     [PROCSTAT_GUEST_NICE] = "guest_nice",
};

const char *procstat_mode_name(enum procstat_mode m)
{
    return (unsigned)m < _PROCSTAT_NMODES ? mode_names[m] : NULL;
}

/* ---- parsing -------------------------------------------------------- */

struct parse_ctx {
    const char *name; /* the file as the user knows it */
    unsigned lineno;
    struct diags *d;
    struct procstat_sample *s;
    size_t cap;
};

static void bad_line(struct parse_ctx *p, const char *label, const char *why)
{
    if (!p->d)
        return;
    char where[256];
    snprintf(where, sizeof(where), "%s line %u (%.32s)", p->name, p->lineno, label);
    diags_add(p->d, where, 0, "%s", why);
}

/* The columns after "cpuN": at least user nice system idle. Columns a
 * future kernel adds after guest_nice are ignored. */
static int parse_ticks(char *rest, struct procstat_cpu *c)
{
    for (int k = 0; k < _PROCSTAT_NMODES; k++)
        c->ticks[k] = VAL_NONE;
    unsigned k = 0;
    char *save = NULL;
    for (char *tok = strtok_r(rest, " \t", &save); tok && k < _PROCSTAT_NMODES;
         tok = strtok_r(NULL, " \t", &save)) {
        int r = parse_u64(tok, &c->ticks[k]);
        if (r < 0) {
            c->ticks[k] = VAL_NONE;
            return r;
        }
        k++;
    }
    return k >= 4 ? 0 : -ENODATA;
}

/* "cpu" is the total (-1); "cpuN" a CPU; anything else -EINVAL. */
static int cpu_label(const char *label, int *ret)
{
    if (streq(label, "cpu")) {
        *ret = -1;
        return 0;
    }
    uint64_t n;
    if (parse_u64(label + 3, &n) < 0 || n > CPUSET_MAX_CPU)
        return -EINVAL;
    *ret = (int)n;
    return 0;
}

static void parse_cpu_line(struct parse_ctx *p, const char *label, char *rest)
{
    int id;
    if (cpu_label(label, &id) < 0) {
        bad_line(p, label, "not a CPU number");
        return;
    }
    struct procstat_cpu c = {.cpu = id};
    int r = parse_ticks(rest, &c);
    if (r < 0) {
        bad_line(p, label, r == -ENODATA ? "fewer than 4 time columns" : "malformed time value");
        return;
    }
    struct procstat_sample *s = p->s;
    if (id < 0) {
        if (s->has_total) {
            bad_line(p, label, "second total line");
            return;
        }
        s->total = c;
        s->has_total = true;
        return;
    }
    if (procstat_find_cpu(s, id)) {
        bad_line(p, label, "CPU listed twice");
        return;
    }
    s->cpus = grow_array(s->cpus, sizeof(*s->cpus), s->ncpus, &p->cap);
    s->cpus[s->ncpus++] = c;
}

static uint64_t *counter_field(struct procstat_sample *s, const char *key)
{
    if (streq(key, "ctxt"))
        return &s->ctxt;
    if (streq(key, "intr"))
        return &s->intr;
    if (streq(key, "btime"))
        return &s->btime;
    if (streq(key, "processes"))
        return &s->processes;
    if (streq(key, "procs_running"))
        return &s->procs_running;
    if (streq(key, "procs_blocked"))
        return &s->procs_blocked;
    return NULL; /* softirq, page, swap, disk_io: not ours */
}

static void parse_line(struct parse_ctx *p, char *line)
{
    char *save = NULL;
    char *key = strtok_r(line, " \t", &save);
    if (!key)
        return;
    char *rest = save ? save : (char *)"";
    if (strncmp(key, "cpu", 3) == 0) {
        parse_cpu_line(p, key, rest);
        return;
    }
    uint64_t *field = counter_field(p->s, key);
    if (!field)
        return;
    /* intr: the total comes first, then one count per IRQ number */
    char *first = strtok_r(rest, " \t", &save);
    uint64_t v;
    if (!first || parse_u64(first, &v) < 0 || (!streq(key, "intr") && strtok_r(NULL, " \t", &save)))
        bad_line(p, key, "malformed value");
    else
        *field = v;
}

static int parse_named(const char *text, size_t len, const char *name, struct procstat_sample *ret,
                       struct diags *d)
{
    _cleanup_free_ char *buf = xmalloc(len + 1);
    memcpy(buf, text, len);
    buf[len] = '\0';
    struct procstat_sample s = {
        .ctxt = VAL_NONE,
        .intr = VAL_NONE,
        .btime = VAL_NONE,
        .processes = VAL_NONE,
        .procs_running = VAL_NONE,
        .procs_blocked = VAL_NONE,
    };
    struct parse_ctx p = {.name = name, .d = d, .s = &s};
    char *next = buf;
    /* by hand, not strtok: line numbers must count empty lines too */
    while (next && *next) {
        char *line = next;
        next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        p.lineno++;
        parse_line(&p, line);
    }
    if (!s.has_total && s.ncpus == 0) {
        procstat_sample_clear(&s);
        return -EBADMSG;
    }
    *ret = s;
    return 0;
}

int procstat_parse(const char *text, size_t len, struct procstat_sample *ret, struct diags *d)
{
    return parse_named(text, len, "stat", ret, d);
}

void procstat_sample_clear(struct procstat_sample *s)
{
    if (!s)
        return;
    free(s->cpus);
    s->cpus = NULL;
    s->ncpus = 0;
}

/* ---- the sampler ---------------------------------------------------- */

static int procstat_probe(struct host *h, void **ret_state, char **ret_reason)
{
    if (host_exists(h, HOST_PROC, "stat"))
        return 1;
    *ret_reason = xstrdup("no /proc/stat (procfs not mounted under the root)");
    return 0;
}

static int procstat_collect(struct host *h, void *state, struct sample *s)
{
    _cleanup_free_ char *text = NULL;
    size_t len;
    int r = host_read(h, HOST_PROC, "stat", &text, &len);
    if (r < 0) {
        sample_diag_read(s, h, HOST_PROC, "stat", r);
        return r;
    }
    _cleanup_free_ char *name = host_display_path(h, HOST_PROC, "stat");
    struct procstat_sample *ps = xcalloc(1, sizeof(*ps));
    r = parse_named(text, len, name, ps, &s->diags);
    if (r < 0) {
        diags_add(&s->diags, name, 0, "no cpu line could be read");
        free(ps);
        return r;
    }
    s->procstat = ps;
    return 0;
}

static void procstat_free_sample(struct sample *s)
{
    procstat_sample_clear(s->procstat);
    free(s->procstat);
    s->procstat = NULL;
}

/* ---- rates ---------------------------------------------------------- */

const struct procstat_cpu *procstat_find_cpu(const struct procstat_sample *s, int cpu)
{
    if (!s)
        return NULL;
    for (unsigned i = 0; i < s->ncpus; i++)
        if (s->cpus[i].cpu == cpu)
            return &s->cpus[i];
    return NULL;
}

double procstat_seconds(const struct procstat_cpu *c, enum procstat_mode m)
{
    if (!c || (unsigned)m >= _PROCSTAT_NMODES || c->ticks[m] == VAL_NONE)
        return NAN;
    return (double)c->ticks[m] / PROCSTAT_USER_HZ;
}

int procstat_util(const struct procstat_cpu *a, const struct procstat_cpu *b,
                  struct procstat_util *ret)
{
    if (!a || !b)
        return -ENODATA;
    double d[_PROCSTAT_NMODES];
    for (int k = 0; k < _PROCSTAT_NMODES; k++) {
        if (a->ticks[k] == VAL_NONE || b->ticks[k] == VAL_NONE) {
            d[k] = NAN;
            continue;
        }
        if (b->ticks[k] < a->ticks[k]) {
            /* proc.rst: iowait can decrease; idle too on NO_HZ kernels
             * (it is estimated from the tick). No time passed there. */
            if (k == PROCSTAT_IOWAIT || k == PROCSTAT_IDLE) {
                d[k] = 0;
                continue;
            }
            return -ERANGE;
        }
        d[k] = (double)(b->ticks[k] - a->ticks[k]);
    }
    /* guest and guest_nice are inside user and nice: not in the total */
    double total = 0;
    for (int k = 0; k < PROCSTAT_GUEST; k++)
        total += isnan(d[k]) ? 0 : d[k];
    if (total <= 0)
        return -ENODATA;
#define Z(k)   (isnan(d[k]) ? 0 : d[k])
#define PCT(x) (100.0 * (x) / total)
    /* Steal is time the hypervisor ran another guest: not this CPU's work
     * (top and mpstat show it apart too); it is reported as steal_pct. */
    double busy = total - Z(PROCSTAT_IDLE) - Z(PROCSTAT_IOWAIT) - Z(PROCSTAT_STEAL);
    *ret = (struct procstat_util){
        .busy_pct = PCT(busy),
        .user_pct = PCT(Z(PROCSTAT_USER) + Z(PROCSTAT_NICE)),
        .system_pct = PCT(Z(PROCSTAT_SYSTEM)),
        .irq_pct = PCT(Z(PROCSTAT_IRQ) + Z(PROCSTAT_SOFTIRQ)),
        .iowait_pct = PCT(d[PROCSTAT_IOWAIT]),
        .steal_pct = PCT(d[PROCSTAT_STEAL]),
        .guest_pct = PCT(d[PROCSTAT_GUEST] + Z(PROCSTAT_GUEST_NICE)),
        .idle_pct = PCT(Z(PROCSTAT_IDLE)),
        .busy_cpus = busy / total,
    };
#undef PCT
#undef Z
    return 0;
}

double procstat_busy_cpus(const struct procstat_sample *a, const struct procstat_sample *b)
{
    if (!a || !b)
        return NAN;
    double sum = 0;
    unsigned n = 0;
    for (unsigned i = 0; i < b->ncpus; i++) {
        struct procstat_util u;
        if (procstat_util(procstat_find_cpu(a, b->cpus[i].cpu), &b->cpus[i], &u) == 0) {
            sum += u.busy_cpus;
            n++;
        }
    }
    return n ? sum : NAN;
}

const struct sampler procstat_sampler = {
    .name = "procstat",
    .probe = procstat_probe,
    .collect = procstat_collect,
    .free_sample = procstat_free_sample,
};
