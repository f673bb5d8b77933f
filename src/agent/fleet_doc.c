/* The fleet metrics document (fleet_doc.h): one pass over the lines,
 * families kept in the order met, the OpenMetrics metadata of a family
 * written at its first sample (a HELP comes before its TYPE in the text
 * format, and OpenMetrics names a counter family by its TYPE). */
#include "agent/fleet_doc.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/strbuf.h"
#include "base/util.h"

#define FLEET_PREFIX "watt_fleet_"
#define MAX_FAMILIES 1024u
#define MAX_LABELS   32u

enum ftype { T_UNSET, T_COUNTER, T_GAUGE, T_UNTYPED };

struct family {
    char *name; /* as the text format spells it; owned */
    enum ftype type;
    const char *help; /* text-format escaped; NULL: none */
    bool meta_out;    /* its OpenMetrics HELP/TYPE are written */
    bool samples;
};

/* A series of the current family: its labels in name order, and where. */
struct series_key {
    char *labels;
    unsigned line;
};

struct conv {
    struct family *v;
    size_t n, cap;
    struct family *cur;
    struct series_key *keys; /* the current family's series */
    size_t nkeys, kcap;
    struct strbuf text, om;
    unsigned line;
    char *err;
};

static int fail(struct conv *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(struct conv *c, const char *fmt, ...)
{
    if (c->err)
        return -EINVAL;
    struct strbuf b = {0};
    strbuf_appendf(&b, "line %u: ", c->line);
    va_list ap;
    va_start(ap, fmt);
    strbuf_vappendf(&b, fmt, ap);
    va_end(ap);
    c->err = strbuf_steal(&b);
    return -EINVAL;
}

static bool ends_with(const char *s, size_t len, const char *suffix)
{
    size_t n = strlen(suffix);
    return len >= n && memcmp(s + len - n, suffix, n) == 0;
}

static bool name_char(char ch, bool first, bool colon)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch == '_' ||
           (colon && ch == ':') || (!first && ch >= '0' && ch <= '9');
}

/* The length of the metric (COLON) or label name at S; 0 when none. */
static size_t name_len(const char *s, bool colon)
{
    size_t n = 0;
    while (name_char(s[n], n == 0, colon))
        n++;
    return n;
}

/* Strict UTF-8 without NUL: OpenMetrics is UTF-8 throughout. */
static int check_utf8(struct conv *c, const unsigned char *s, size_t len)
{
    c->line = 1;
    for (size_t i = 0; i < len;) {
        unsigned char b = s[i];
        size_t n = b < 0x80             ? 1
                   : (b & 0xe0) == 0xc0 ? 2
                   : (b & 0xf0) == 0xe0 ? 3
                   : (b & 0xf8) == 0xf0 ? 4
                                        : 0;
        if (b == 0)
            return fail(c, "a NUL byte");
        if (b == '\n')
            c->line++;
        if (!n || i + n > len || (n == 2 && b < 0xc2) || (n == 4 && b > 0xf4))
            return fail(c, "not UTF-8");
        for (size_t k = 1; k < n; k++)
            if ((s[i + k] & 0xc0) != 0x80)
                return fail(c, "not UTF-8");
        i += n;
    }
    return 0;
}

static const char *om_type(enum ftype t)
{
    return t == T_COUNTER ? "counter" : t == T_GAUGE ? "gauge" : "unknown";
}

/* The family's OpenMetrics name: a counter's without _total. */
static void put_om_name(struct conv *c, const struct family *f)
{
    size_t len = strlen(f->name);
    strbuf_append_n(&c->om, f->name, f->type == T_COUNTER ? len - strlen("_total") : len);
}

/* HELP and TYPE in OpenMetrics: HELP's escapes are the text format's
 * (\\ and \n, checked when read) plus \" for a quote. */
static void om_meta(struct conv *c, struct family *f)
{
    if (f->meta_out)
        return;
    f->meta_out = true;
    if (f->help) {
        strbuf_append(&c->om, "# HELP ");
        put_om_name(c, f);
        strbuf_putc(&c->om, ' ');
        for (const char *p = f->help; *p; p++) {
            if (*p == '"')
                strbuf_putc(&c->om, '\\');
            strbuf_putc(&c->om, *p);
        }
        strbuf_putc(&c->om, '\n');
    }
    if (f->type != T_UNSET) {
        strbuf_append(&c->om, "# TYPE ");
        put_om_name(c, f);
        strbuf_putc(&c->om, ' ');
        strbuf_append(&c->om, om_type(f->type));
        strbuf_putc(&c->om, '\n');
    }
}

static int cmp_key(const void *a, const void *b)
{
    const struct series_key *x = a, *y = b;
    int r = strcmp(x->labels, y->labels);
    return r ? r : (x->line > y->line) - (x->line < y->line);
}

static void keys_clear(struct conv *c)
{
    for (size_t i = 0; i < c->nkeys; i++)
        free(c->keys[i].labels);
    c->nkeys = 0;
}

/* At a family's end: no series twice (the same labels in any order),
 * which OpenMetrics forbids and Prometheus would drop. */
static int check_series(struct conv *c)
{
    if (c->nkeys > 1)
        qsort(c->keys, c->nkeys, sizeof(*c->keys), cmp_key);
    for (size_t i = 1; i < c->nkeys; i++)
        if (streq(c->keys[i - 1].labels, c->keys[i].labels)) {
            c->line = c->keys[i].line;
            const char *l = c->keys[i].labels;
            int r = fail(c, "%s%s%s%s again: the same series twice", c->cur->name, *l ? "{" : "", l,
                         *l ? "}" : "");
            keys_clear(c);
            return r;
        }
    keys_clear(c);
    return 0;
}

/* The family NAME belongs to: the current one, or a new one after it. A
 * family met before is split, which neither format allows. */
static int family_of(struct conv *c, const char *name, struct family **ret)
{
    if (c->cur && streq(c->cur->name, name)) {
        *ret = c->cur;
        return 0;
    }
    for (size_t i = 0; i < c->n; i++)
        if (streq(c->v[i].name, name))
            return fail(c, "%s again after other families: a family's lines go together", name);
    if (strncmp(name, FLEET_PREFIX, strlen(FLEET_PREFIX)) != 0)
        return fail(c, "%s is not named " FLEET_PREFIX "*", name);
    if (c->n >= MAX_FAMILIES)
        return fail(c, "more than %u families", MAX_FAMILIES);
    if (c->cur) {
        om_meta(c, c->cur);
        int r = check_series(c);
        if (r < 0)
            return r;
    }
    c->v = grow_array(c->v, sizeof(*c->v), c->n, &c->cap);
    c->cur = &c->v[c->n++];
    *c->cur = (struct family){.name = xstrdup(name)};
    *ret = c->cur;
    return 0;
}

/* A name token at *P ending in a space (or the line's end); NUL-terminated
 * in place. */
static int take_name(struct conv *c, char **p, const char **ret)
{
    char *s = *p;
    size_t n = name_len(s, true);
    if (!n || (s[n] && s[n] != ' ' && s[n] != '\t'))
        return fail(c, "bad metric name '%.40s'", s);
    if (s[n])
        s[n++] = '\0';
    *ret = s;
    *p = s + n;
    return 0;
}

static int type_rules(struct conv *c, const struct family *f)
{
    bool total = ends_with(f->name, strlen(f->name), "_total");
    if (f->type == T_COUNTER && !total)
        return fail(c, "counter %s does not end in _total", f->name);
    if (f->type != T_COUNTER && total)
        return fail(c, "%s ends in _total but is not a counter", f->name);
    return 0;
}

static int on_help(struct conv *c, char *rest)
{
    const char *name;
    struct family *f;
    int r = take_name(c, &rest, &name);
    if (r < 0 || (r = family_of(c, name, &f)) < 0)
        return r;
    if (f->help)
        return fail(c, "a second HELP for %s", name);
    if (f->samples)
        return fail(c, "HELP for %s after its samples", name);
    for (const char *p = rest; *p; p++)
        if (*p == '\\' && p[1] != '\\' && p[1] != 'n')
            return fail(c, "HELP for %s: escape \\%c (only \\\\ and \\n)", name, p[1] ? p[1] : ' ');
        else if (*p == '\\')
            p++;
    f->help = rest;
    return 0;
}

static int on_type(struct conv *c, char *rest)
{
    const char *name;
    struct family *f;
    int r = take_name(c, &rest, &name);
    if (r < 0 || (r = family_of(c, name, &f)) < 0)
        return r;
    if (f->samples) /* before the next test: a sample made it untyped */
        return fail(c, "TYPE for %s after its samples", name);
    if (f->type != T_UNSET)
        return fail(c, "a second TYPE for %s", name);
    if (streq(rest, "counter"))
        f->type = T_COUNTER;
    else if (streq(rest, "gauge"))
        f->type = T_GAUGE;
    else if (streq(rest, "untyped"))
        f->type = T_UNTYPED;
    else if (streq(rest, "summary") || streq(rest, "histogram"))
        return fail(c, "TYPE %s of %s: not supported in fleet_metrics", rest, name);
    else
        return fail(c, "TYPE of %s: unknown type '%.20s'", name, rest);
    return type_rules(c, f);
}

struct label {
    const char *s; /* name="value" */
    size_t n, name_n;
};

static int cmp_label(const void *a, const void *b)
{
    const struct label *x = a, *y = b;
    size_t n = x->name_n < y->name_n ? x->name_n : y->name_n;
    int r = memcmp(x->s, y->s, n);
    return r ? r : (x->name_n > y->name_n) - (x->name_n < y->name_n);
}

/* The series' labels in name order into KEY: one series, whatever the
 * order they were written in. */
static void label_key(struct label *v, size_t n, struct strbuf *key)
{
    qsort(v, n, sizeof(*v), cmp_label);
    for (size_t i = 0; i < n; i++) {
        if (i)
            strbuf_putc(key, ',');
        strbuf_append_n(key, v[i].s, v[i].n);
    }
}

/* {a="x",b="y"} at *P, checked and copied to OUT as it is (both formats
 * escape label values alike: \\, \" and \n); KEY gets them sorted. */
static int take_labels(struct conv *c, char **p, struct strbuf *out, struct strbuf *key)
{
    char *s = *p + 1;
    const char *seen[MAX_LABELS];
    struct label lab[MAX_LABELS];
    size_t nseen = 0;
    strbuf_putc(out, '{');
    for (;;) {
        if (*s == '}')
            break;
        size_t n = name_len(s, false);
        if (!n || s[n] != '=' || s[n + 1] != '"')
            return fail(c, "bad label at '%.20s'", s);
        if (n >= 2 && s[0] == '_' && s[1] == '_')
            return fail(c, "label %.*s: names beginning __ are reserved", (int)n, s);
        for (size_t i = 0; i < nseen; i++)
            if (strncmp(seen[i], s, n) == 0 && seen[i][n] == '=')
                return fail(c, "label %.*s twice", (int)n, s);
        if (nseen == MAX_LABELS)
            return fail(c, "more than %u labels", MAX_LABELS);
        seen[nseen++] = s;
        if (nseen > 1)
            strbuf_putc(out, ',');
        char *v = s + n + 2;
        while (*v && *v != '"') {
            if (*v == '\\' && v[1] != '\\' && v[1] != '"' && v[1] != 'n')
                return fail(c, "label %.*s: bad escape", (int)n, s);
            v += *v == '\\' ? 2 : 1;
        }
        if (*v != '"')
            return fail(c, "label %.*s: value not closed", (int)n, s);
        strbuf_append_n(out, s, (size_t)(v + 1 - s));
        lab[nseen - 1] = (struct label){.s = s, .n = (size_t)(v + 1 - s), .name_n = n};
        s = v + 1;
        if (*s == ',')
            s++;
        else if (*s != '}')
            return fail(c, "expected , or } after label %.*s", (int)n, seen[nseen - 1]);
    }
    strbuf_putc(out, '}');
    label_key(lab, nseen, key);
    *p = s + 1;
    return 0;
}

/* A value as Go's ParseFloat reads the text format, in the decimal form
 * both formats share; *ret_om is its OpenMetrics spelling. */
static int take_value(struct conv *c, const char *tok, const char *name, bool counter,
                      const char **ret_om)
{
    static const char *const special[][2] = {
        {"NaN", "NaN"}, {"+Inf", "+Inf"}, {"Inf", "+Inf"}, {"-Inf", "-Inf"}};
    for (size_t i = 0; i < ARRAY_SIZE(special); i++)
        if (strcasecmp(tok, special[i][0]) == 0) {
            if (counter && special[i][1][0] != '+')
                return fail(c, "counter %s is %s", name, tok);
            *ret_om = special[i][1];
            return 0;
        }
    const char *p = tok + (*tok == '-' || *tok == '+');
    size_t digits = strspn(p, "0123456789");
    p += digits;
    if (*p == '.') {
        size_t frac = strspn(p + 1, "0123456789");
        digits += frac;
        p += 1 + frac;
    }
    if (digits && (*p == 'e' || *p == 'E')) {
        p++;
        p += *p == '-' || *p == '+';
        size_t exp = strspn(p, "0123456789");
        p = exp ? p + exp : tok; /* no exponent digits: bad */
    }
    if (!digits || *p)
        return fail(c, "%s: bad value '%.30s'", name, tok);
    if (counter && tok[0] == '-' && strtod(tok, NULL) < 0)
        return fail(c, "counter %s is negative (%s)", name, tok);
    *ret_om = tok;
    return 0;
}

/* The text format's timestamp, milliseconds, as OpenMetrics' seconds. */
static int put_timestamp(struct conv *c, const char *tok, struct strbuf *om)
{
    bool neg = *tok == '-';
    const char *d = tok + neg;
    size_t n = strspn(d, "0123456789");
    if (!n || d[n] || n > 18)
        return fail(c, "bad timestamp '%.30s' (milliseconds)", tok);
    unsigned long long ms = strtoull(d, NULL, 10);
    strbuf_appendf(om, " %s%llu.%03llu", neg ? "-" : "", ms / 1000, ms % 1000);
    return 0;
}

static char *next_token(char **p)
{
    char *s = *p + strspn(*p, " \t");
    if (!*s)
        return NULL;
    size_t n = strcspn(s, " \t");
    *p = s + n;
    if (s[n]) {
        s[n] = '\0';
        (*p)++;
    }
    return s;
}

static int on_sample(struct conv *c, char *line)
{
    size_t n = name_len(line, true);
    if (!n || (line[n] != '{' && line[n] != ' ' && line[n] != '\t'))
        return fail(c, "bad sample '%.40s'", line);
    char *p = line + n;
    struct strbuf labels = {0}, key = {0};
    int r = *p == '{' ? take_labels(c, &p, &labels, &key) : 0;
    char save = line[n];
    line[n] = '\0';
    struct family *f;
    if (r >= 0 && (r = family_of(c, line, &f)) >= 0 && f->type == T_UNSET) {
        f->type = T_UNTYPED; /* no TYPE: untyped, unknown in OpenMetrics */
        r = type_rules(c, f);
    }
    line[n] = save;
    char *val = r >= 0 ? next_token(&p) : NULL, *ts = val ? next_token(&p) : NULL;
    const char *om_val = NULL;
    if (r >= 0 && !val)
        r = fail(c, "%s: no value", f->name);
    if (r >= 0)
        r = take_value(c, val, f->name, f->type == T_COUNTER, &om_val);
    if (r >= 0 && next_token(&p))
        r = fail(c, "%s: text after the timestamp", f->name);
    if (r >= 0) {
        om_meta(c, f);
        f->samples = true;
        c->keys = grow_array(c->keys, sizeof(*c->keys), c->nkeys, &c->kcap);
        c->keys[c->nkeys++] =
            (struct series_key){.labels = xstrdup(strbuf_str(&key)), .line = c->line};
        strbuf_append(&c->om, f->name);
        strbuf_append(&c->om, strbuf_str(&labels));
        strbuf_putc(&c->om, ' ');
        strbuf_append(&c->om, om_val);
        if (ts)
            r = put_timestamp(c, ts, &c->om);
        strbuf_putc(&c->om, '\n');
    }
    strbuf_free(&labels);
    strbuf_free(&key);
    return r;
}

static int on_line(struct conv *c, char *line)
{
    if (!*line)
        return 0; /* OpenMetrics has no blank lines; the text format ignores them */
    const char *orig = xstrdup(line);
    int r = 0;
    if (strncmp(line, "# HELP ", 7) == 0)
        r = on_help(c, line + 7);
    else if (strncmp(line, "# TYPE ", 7) == 0)
        r = on_type(c, line + 7);
    else if (line[0] == '#')
        r = 1; /* a comment: dropped from both, OpenMetrics has none */
    else
        r = on_sample(c, line);
    if (r == 0) {
        strbuf_append(&c->text, orig);
        strbuf_putc(&c->text, '\n');
    }
    free((char *)orig);
    return r < 0 ? r : 0;
}

int fleet_doc_convert(const char *buf, size_t len, char **ret_text, char **ret_om, char **ret_err)
{
    struct conv c = {0};
    int r = check_utf8(&c, (const unsigned char *)buf, len);
    char *copy = xstrndup(buf, len);
    c.line = 0;
    for (char *s = copy; r >= 0 && s && (s < copy + len);) {
        char *nl = strchr(s, '\n');
        if (nl)
            *nl = '\0';
        c.line++;
        r = on_line(&c, s);
        s = nl ? nl + 1 : NULL;
    }
    if (r >= 0 && c.cur) {
        om_meta(&c, c.cur);
        r = check_series(&c);
    }
    keys_clear(&c);
    free(c.keys);
    for (size_t i = 0; i < c.n; i++)
        free(c.v[i].name);
    free(c.v);
    if (r < 0) {
        strbuf_free(&c.text);
        strbuf_free(&c.om);
        free(copy);
        *ret_err = c.err;
        return r;
    }
    *ret_text = c.text.s ? strbuf_steal(&c.text) : xstrdup("");
    *ret_om = c.om.s ? strbuf_steal(&c.om) : xstrdup("");
    free(copy);
    return 0;
}
