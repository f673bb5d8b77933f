/* CPU demand traces: PlanetLab files (one integer percentage per line) and
 * CSV traces (vm,time_s,cpu_pct[,mem_mb]). Pure: the bytes come from
 * trace_load.c or from a test.
 *
 * Memory: all samples of all VMs are one uint16_t array (0.01 % units), so
 * 1,000,000 VMs x 288 steps take 576 MB. The array and the VM table have no
 * capacity field (fleet.h): their capacity is implied by their length, the
 * next power of two (cap_for()), so appends grow them geometrically. Large
 * blocks are mmap()ed, so the unused part of a power of two costs address
 * space, not memory. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "fleet/model/fleet.h"

#define PLANETLAB_MAX_LINES 100000u
#define PLANETLAB_LINE_MAX  32u
#define CSV_LINE_MAX        512u
#define CSV_NAME_MAX        255u
#define CSV_MAX_STEPS       10000000u
#define CSV_MAX_TIME_S      1000000000000ull /* 31,700 years */
#define CSV_HEADER          "vm,time_s,cpu_pct"
#define CSV_DEFAULT_STEP_S  300u /* when no VM has two samples */

void fleet_trace_free(struct fleet_trace *t)
{
    if (!t)
        return;
    for (size_t i = 0; i < t->n_vms; i++)
        free(t->vms[i].name);
    free(t->vms);
    free(t->cpu);
    free(t->origin);
    *t = (struct fleet_trace){0};
}

static size_t cap_for(size_t n)
{
    size_t c = 16;
    while (c < n)
        c *= 2;
    return c;
}

static size_t samples_used(const struct fleet_trace *t)
{
    return t->n_vms ? t->vms[t->n_vms - 1].off + t->vms[t->n_vms - 1].len : 0;
}

/* Room for ADD_VMS more VMs and ADD_SAMPLES more samples. */
static void trace_reserve(struct fleet_trace *t, size_t add_vms, size_t add_samples)
{
    size_t used = samples_used(t);
    if (!t->cpu || cap_for(used + add_samples) > cap_for(used))
        t->cpu = xrealloc(t->cpu, cap_for(used + add_samples) * sizeof(*t->cpu));
    if (!t->vms || cap_for(t->n_vms + add_vms) > cap_for(t->n_vms))
        t->vms = xrealloc(t->vms, cap_for(t->n_vms + add_vms) * sizeof(*t->vms));
}

/* Text from a file for an error message: at most 32 bytes, printable. */
static const char *shown(const char *s, size_t n, char *buf, size_t size)
{
    size_t k = 0;
    for (size_t i = 0; i < n && i < 32 && k + 4 < size; i++)
        buf[k++] = isprint((unsigned char)s[i]) ? s[i] : '?';
    if (n > 32 && k + 4 < size)
        k += (size_t)snprintf(buf + k, size - k, "...");
    buf[k] = '\0';
    return buf;
}

/* The next line of TEXT from *POS, without "\n" or "\r\n". */
static bool next_line(const char *text, size_t len, size_t *pos, const char **ret, size_t *ret_n)
{
    if (*pos >= len)
        return false;
    const char *s = text + *pos;
    const char *nl = memchr(s, '\n', len - *pos);
    size_t n = nl ? (size_t)(nl - s) : len - *pos;
    *pos += n + (nl != NULL);
    if (n > 0 && s[n - 1] == '\r')
        n--;
    *ret = s;
    *ret_n = n;
    return true;
}

static void trim_blanks(const char **s, size_t *n)
{
    while (*n > 0 && (**s == ' ' || **s == '\t'))
        (*s)++, (*n)--;
    while (*n > 0 && ((*s)[*n - 1] == ' ' || (*s)[*n - 1] == '\t'))
        (*n)--;
}

/* Digits only, at most 13 of them. */
static int parse_digits(const char *s, size_t n, uint64_t *ret)
{
    if (n == 0 || n > 13)
        return -EINVAL;
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isdigit((unsigned char)s[i]))
            return -EINVAL;
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    *ret = v;
    return 0;
}

/* ---- PlanetLab ---------------------------------------------------------- */

static int planetlab_line(const char *s, size_t n, const char *name, size_t lineno, uint16_t *ret,
                          struct fleet_error *err)
{
    char b[48];
    if (n > PLANETLAB_LINE_MAX) {
        fleet_error_set(err, "%s line %zu: longer than %u characters (want an integer 0..100)",
                        name, lineno, PLANETLAB_LINE_MAX);
        return -EINVAL;
    }
    trim_blanks(&s, &n);
    uint64_t v;
    if (parse_digits(s, n, &v) < 0) {
        fleet_error_set(err, "%s line %zu: '%s' is not a number (want an integer 0..100)", name,
                        lineno, shown(s, n, b, sizeof(b)));
        return -EINVAL;
    }
    if (v > 100) {
        fleet_error_set(err, "%s line %zu: %s is out of range (want an integer 0..100)", name,
                        lineno, shown(s, n, b, sizeof(b)));
        return -EINVAL;
    }
    *ret = (uint16_t)(v * 100);
    return 0;
}

/* The VM is named after the file: NAME without its folder. */
int fleet_trace_parse_planetlab(const char *text, size_t len, const char *name,
                                struct fleet_trace *t, struct fleet_error *err)
{
    if (len == 0) {
        fleet_error_set(err, "%s: empty file (want one integer 0..100 per line)", name);
        return -EINVAL;
    }
    size_t lines = text[len - 1] != '\n';
    for (const char *p = text; (p = memchr(p, '\n', len - (size_t)(p - text))); p++)
        if (++lines > PLANETLAB_MAX_LINES)
            break;
    if (lines > PLANETLAB_MAX_LINES) {
        fleet_error_set(err, "%s: more than %u lines", name, PLANETLAB_MAX_LINES);
        return -EINVAL;
    }
    trace_reserve(t, 1, lines);
    size_t off = samples_used(t), pos = 0, k = 0, n;
    const char *s;
    while (next_line(text, len, &pos, &s, &n)) {
        int r = planetlab_line(s, n, name, k + 1, &t->cpu[off + k], err);
        if (r < 0)
            return r;
        k++;
    }
    const char *base = strrchr(name, '/');
    t->vms[t->n_vms++] = (struct fleet_trace_vm){
        .name = xstrdup(base ? base + 1 : name),
        .first = 0,
        .len = (uint32_t)k,
        .off = off,
    };
    if (t->n_steps < k)
        t->n_steps = (uint32_t)k;
    if (!(t->step_s > 0))
        t->step_s = 300; /* PlanetLab's */
    return 0;
}

/* ---- CSV ---------------------------------------------------------------- */

/* A VM's rows as pass 1 found them. */
struct run {
    const char *name;
    size_t name_len;
    size_t line; /* of its first row */
    size_t row0; /* index of its first row */
    size_t rows;
    uint32_t mem_mb;
};

struct csv {
    const char *origin;
    bool has_mem;
    struct run *runs;
    size_t n_runs, cap_runs;
    uint64_t *time_s; /* [rows], freed after pass 2 */
    uint16_t *cpu;    /* [rows], becomes the trace's */
    size_t n_rows, cap_rows;
    size_t *row_line; /* [rows] line of each row, for pass 2's messages */
    uint64_t min_step_s, tmin_s, tmax_s;
    size_t tmin_line, tmax_line; /* where the earliest and the latest times are */
};

static void csv_free(struct csv *c)
{
    free(c->runs);
    free(c->time_s);
    free(c->cpu);
    free(c->row_line);
}

struct row {
    const char *f[4];
    size_t n[4];
};

static int split_row(const char *s, size_t n, struct row *r)
{
    size_t k = 0;
    const char *start = s;
    for (size_t i = 0; i <= n; i++) {
        if (i < n && s[i] != ',')
            continue;
        if (k == 4)
            return -EINVAL;
        r->f[k] = start;
        r->n[k] = (size_t)(s + i - start);
        trim_blanks(&r->f[k], &r->n[k]);
        k++;
        start = s + i + 1;
    }
    return (int)k;
}

/* "12", "12.5", ".5": 0..100 % to 0.01 % units. */
static int parse_pct(const char *s, size_t n, uint16_t *ret)
{
    char buf[40];
    size_t digits = 0, dots = 0;
    if (n == 0 || n >= sizeof(buf))
        return -EINVAL;
    for (size_t i = 0; i < n; i++) {
        if (isdigit((unsigned char)s[i]))
            digits++;
        else if (s[i] == '.' && dots++ == 0)
            continue;
        else
            return -EINVAL;
    }
    if (digits == 0)
        return -EINVAL;
    memcpy(buf, s, n);
    buf[n] = '\0';
    double v = strtod(buf, NULL);
    if (!(v >= 0 && v <= 100))
        return -ERANGE;
    *ret = (uint16_t)lround(v * 100);
    return 0;
}

static int csv_header(struct csv *c, const char *s, size_t n, struct fleet_error *err)
{
    char b[48];
    if (n >= 3 && memcmp(s, "\xef\xbb\xbf", 3) == 0) /* a UTF-8 BOM from a spreadsheet */
        s += 3, n -= 3;
    if (n == strlen(CSV_HEADER) && memcmp(s, CSV_HEADER, n) == 0)
        return 0;
    if (n == strlen(CSV_HEADER ",mem_mb") && memcmp(s, CSV_HEADER ",mem_mb", n) == 0) {
        c->has_mem = true;
        return 0;
    }
    fleet_error_set(err, "%s line 1: header '%s' (want " CSV_HEADER "[,mem_mb])", c->origin,
                    shown(s, n, b, sizeof(b)));
    return -EINVAL;
}

static int row_fields(struct csv *c, const char *s, size_t n, size_t line, struct row *r,
                      uint64_t *t_s, uint16_t *cpu, uint64_t *mem, struct fleet_error *err)
{
    char b[48];
    int k = split_row(s, n, r);
    if (k != 3 + c->has_mem) {
        fleet_error_set(err, "%s line %zu: want %d fields (vm,time_s,cpu_pct%s)", c->origin, line,
                        3 + c->has_mem, c->has_mem ? ",mem_mb" : "");
        return -EINVAL;
    }
    if (r->n[0] == 0 || r->n[0] > CSV_NAME_MAX) {
        fleet_error_set(err, "%s line %zu: the vm name must be 1..%u characters", c->origin, line,
                        CSV_NAME_MAX);
        return -EINVAL;
    }
    for (size_t i = 0; i < r->n[0]; i++)
        if ((unsigned char)r->f[0][i] < 0x20 || r->f[0][i] == 0x7f) {
            fleet_error_set(err, "%s line %zu: the vm name has a control character", c->origin,
                            line);
            return -EINVAL;
        }
    if (parse_digits(r->f[1], r->n[1], t_s) < 0 || *t_s > CSV_MAX_TIME_S) {
        fleet_error_set(err, "%s line %zu: time_s '%s' is not an integer 0..%llu", c->origin, line,
                        shown(r->f[1], r->n[1], b, sizeof(b)), CSV_MAX_TIME_S);
        return -EINVAL;
    }
    int e = parse_pct(r->f[2], r->n[2], cpu);
    if (e < 0) {
        fleet_error_set(err, "%s line %zu: cpu_pct '%s' is %s (want a decimal 0..100)", c->origin,
                        line, shown(r->f[2], r->n[2], b, sizeof(b)),
                        e == -ERANGE ? "out of range" : "not a number");
        return -EINVAL;
    }
    *mem = 0;
    if (c->has_mem && r->n[3] > 0 &&
        (parse_digits(r->f[3], r->n[3], mem) < 0 || *mem > UINT32_MAX)) {
        fleet_error_set(err, "%s line %zu: mem_mb '%s' is not an integer 0..%u", c->origin, line,
                        shown(r->f[3], r->n[3], b, sizeof(b)), UINT32_MAX);
        return -EINVAL;
    }
    return 0;
}

/* Pass 1, one row: grouping and order within a VM, the smallest step. */
static int csv_row(struct csv *c, const char *s, size_t n, size_t line, struct fleet_error *err)
{
    struct row r;
    uint64_t t_s, mem;
    uint16_t cpu;
    int e = row_fields(c, s, n, line, &r, &t_s, &cpu, &mem, err);
    if (e < 0)
        return e;
    struct run *cur = c->n_runs ? &c->runs[c->n_runs - 1] : NULL;
    if (cur && cur->name_len == r.n[0] && memcmp(cur->name, r.f[0], r.n[0]) == 0) {
        uint64_t prev = c->time_s[c->n_rows - 1];
        char b[48];
        if (t_s <= prev) {
            fleet_error_set(err,
                            "%s line %zu: %s row for vm '%s' at time %llu (rows must be "
                            "sorted by time within a VM)",
                            c->origin, line, t_s == prev ? "duplicate" : "out-of-order",
                            shown(r.f[0], r.n[0], b, sizeof(b)), (unsigned long long)t_s);
            return -EINVAL;
        }
        if (c->min_step_s == 0 || t_s - prev < c->min_step_s)
            c->min_step_s = t_s - prev;
    } else {
        c->runs = grow_array(c->runs, sizeof(*c->runs), c->n_runs, &c->cap_runs);
        cur = &c->runs[c->n_runs++];
        *cur = (struct run){.name = r.f[0], .name_len = r.n[0], .line = line, .row0 = c->n_rows};
    }
    if (c->n_rows == 0 || t_s < c->tmin_s) {
        c->tmin_s = t_s;
        c->tmin_line = line;
    }
    if (c->n_rows == 0 || t_s > c->tmax_s) {
        c->tmax_s = t_s;
        c->tmax_line = line;
    }
    if (mem > cur->mem_mb)
        cur->mem_mb = (uint32_t)mem;
    cur->rows++;
    if (c->n_rows == c->cap_rows) {
        c->cap_rows = c->cap_rows ? c->cap_rows * 2 : 1024;
        c->time_s = xrealloc(c->time_s, c->cap_rows * sizeof(*c->time_s));
        c->cpu = xrealloc(c->cpu, c->cap_rows * sizeof(*c->cpu));
        c->row_line = xrealloc(c->row_line, c->cap_rows * sizeof(*c->row_line));
    }
    c->time_s[c->n_rows] = t_s;
    c->cpu[c->n_rows] = cpu;
    c->row_line[c->n_rows++] = line;
    return 0;
}

static int by_run_name(const void *a, const void *b)
{
    const struct run *x = a, *y = b;
    size_t n = x->name_len < y->name_len ? x->name_len : y->name_len;
    int r = memcmp(x->name, y->name, n);
    if (r == 0)
        r = (x->name_len > y->name_len) - (x->name_len < y->name_len);
    return r ? r : (x->line > y->line) - (x->line < y->line);
}

static bool same_name(const struct run *a, const struct run *b)
{
    return a->name_len == b->name_len && memcmp(a->name, b->name, a->name_len) == 0;
}

/* A VM whose rows come in two runs: report the earliest reappearance. */
static int csv_grouped(struct csv *c, struct fleet_error *err)
{
    if (c->n_runs < 2)
        return 0;
    _cleanup_free_ struct run *s = xmalloc(c->n_runs * sizeof(*s));
    memcpy(s, c->runs, c->n_runs * sizeof(*s));
    qsort(s, c->n_runs, sizeof(*s), by_run_name);
    const struct run *bad = NULL, *first = NULL;
    for (size_t i = 1; i < c->n_runs; i++)
        if (same_name(&s[i], &s[i - 1]) && (!bad || s[i].line < bad->line)) {
            bad = &s[i];
            first = &s[i - 1];
        }
    if (!bad)
        return 0;
    char b[48];
    fleet_error_set(err,
                    "%s line %zu: vm '%s' reappears after other VMs' rows (seen before on line "
                    "%zu; rows must be grouped by VM)",
                    c->origin, bad->line, shown(bad->name, bad->name_len, b, sizeof(b)),
                    first->line);
    return -EINVAL;
}

/* Pass 2: every time on the grid from the first time of the file, no gap
 * inside a VM's life. Returns the VM's first step in *RET_FIRST. */
static int csv_grid(struct csv *c, const struct run *run, uint64_t step_s, uint32_t *ret_first,
                    struct fleet_error *err)
{
    char b[48];
    for (size_t i = run->row0; i < run->row0 + run->rows; i++) {
        uint64_t t_s = c->time_s[i];
        if ((t_s - c->tmin_s) % step_s != 0) {
            fleet_error_set(err,
                            "%s line %zu: time %llu s is not a multiple of the step %llu s "
                            "from the first time %llu s",
                            c->origin, c->row_line[i], (unsigned long long)t_s,
                            (unsigned long long)step_s, (unsigned long long)c->tmin_s);
            return -EINVAL;
        }
        if (i > run->row0 && t_s - c->time_s[i - 1] != step_s) {
            fleet_error_set(err,
                            "%s line %zu: vm '%s' has no sample from %llu s to %llu s (the "
                            "step is %llu s; missing steps inside a VM's life)",
                            c->origin, c->row_line[i],
                            shown(run->name, run->name_len, b, sizeof(b)),
                            (unsigned long long)(c->time_s[i - 1] + step_s),
                            (unsigned long long)(t_s - step_s), (unsigned long long)step_s);
            return -EINVAL;
        }
    }
    uint64_t first = (c->time_s[run->row0] - c->tmin_s) / step_s;
    if (first + run->rows > CSV_MAX_STEPS) {
        fleet_error_set(err, "%s line %zu: the trace spans more than %u steps of %llu s", c->origin,
                        run->line, CSV_MAX_STEPS, (unsigned long long)step_s);
        return -EINVAL;
    }
    *ret_first = (uint32_t)first;
    return 0;
}

/* The horizon, from the earliest time to the end of the latest one's step,
 * within FLEET_MAX_HORIZON_S: named by the line that makes it too long
 * (the later of the two ends in the file). */
static int csv_horizon(const struct csv *c, uint64_t step_s, struct fleet_error *err)
{
    uint64_t horizon = c->tmax_s - c->tmin_s + step_s;
    if ((double)horizon <= FLEET_MAX_HORIZON_S)
        return 0;
    bool max_later = c->tmax_line > c->tmin_line;
    fleet_error_set(err,
                    "%s line %zu: time %llu s is %llu s %s the %s time %llu s (line %zu); with "
                    "the step of %llu s the trace spans %llu s, more than the %.0f s (366 days) "
                    "a trace may span",
                    c->origin, max_later ? c->tmax_line : c->tmin_line,
                    (unsigned long long)(max_later ? c->tmax_s : c->tmin_s),
                    (unsigned long long)(c->tmax_s - c->tmin_s), max_later ? "after" : "before",
                    max_later ? "earliest" : "latest",
                    (unsigned long long)(max_later ? c->tmin_s : c->tmax_s),
                    max_later ? c->tmin_line : c->tmax_line, (unsigned long long)step_s,
                    (unsigned long long)horizon, FLEET_MAX_HORIZON_S);
    return -EINVAL;
}

static int csv_build(struct csv *c, struct fleet_trace *t, struct fleet_error *err)
{
    uint64_t step_s = c->min_step_s ? c->min_step_s : CSV_DEFAULT_STEP_S;
    int rh = csv_horizon(c, step_s, err);
    if (rh < 0)
        return rh;
    *t = (struct fleet_trace){.step_s = (double)step_s};
    trace_reserve(t, c->n_runs, c->n_rows);
    for (size_t v = 0; v < c->n_runs; v++) {
        const struct run *run = &c->runs[v];
        uint32_t first;
        int r = csv_grid(c, run, step_s, &first, err);
        if (r < 0)
            return r;
        char *name = xmalloc(run->name_len + 1);
        memcpy(name, run->name, run->name_len);
        name[run->name_len] = '\0';
        t->vms[t->n_vms++] = (struct fleet_trace_vm){
            .name = name,
            .first = first,
            .len = (uint32_t)run->rows,
            .off = run->row0,
            .ram_mb = run->mem_mb,
        };
        if (first + run->rows > t->n_steps)
            t->n_steps = first + (uint32_t)run->rows;
    }
    memcpy(t->cpu, c->cpu, c->n_rows * sizeof(*c->cpu));
    return 0;
}

static int csv_rows(struct csv *c, const char *text, size_t len, struct fleet_error *err)
{
    size_t pos = 0, line = 0, n;
    const char *s;
    while (next_line(text, len, &pos, &s, &n)) {
        line++;
        if (n > CSV_LINE_MAX) {
            fleet_error_set(err, "%s line %zu: longer than %u characters", c->origin, line,
                            CSV_LINE_MAX);
            return -EINVAL;
        }
        int r = line == 1 ? csv_header(c, s, n, err) : csv_row(c, s, n, line, err);
        if (r < 0)
            return r;
    }
    if (line == 0) {
        fleet_error_set(err, "%s: empty file (want a header " CSV_HEADER "[,mem_mb] and rows)",
                        c->origin);
        return -EINVAL;
    }
    if (c->n_rows == 0) {
        fleet_error_set(err, "%s: no rows after the header", c->origin);
        return -EINVAL;
    }
    return 0;
}

int fleet_trace_parse_csv(const char *text, size_t len, const char *origin, struct fleet_trace *ret,
                          struct fleet_error *err)
{
    struct csv c = {.origin = origin ? origin : "trace.csv"};
    struct fleet_trace t = {0};
    int r = csv_rows(&c, text, len, err);
    if (r == 0)
        r = csv_grouped(&c, err);
    if (r == 0)
        r = csv_build(&c, &t, err);
    csv_free(&c);
    if (r < 0) {
        fleet_trace_free(&t);
        return r;
    }
    t.origin = xstrdup(c.origin);
    *ret = t;
    return 0;
}
