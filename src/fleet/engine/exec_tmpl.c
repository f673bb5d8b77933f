/* The exec engine's command templates: the split into words, once, and
 * the argv of each call (exec_tmpl.h has the rule). */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/strbuf.h"
#include "base/util.h"
#include "fleet/engine/exec_tmpl.h"

#define TMPL_SHOWN 80 /* bytes of a template quoted in a message */

static const char *const var_names[FX_VAR_N] = {"host", "uri", "bmc",    "vm",
                                                "src",  "dst", "dst_uri"};

const char *fx_var_name(enum fx_var v)
{
    return (unsigned)v < FX_VAR_N ? var_names[v] : "?";
}

unsigned fx_exec_allowed(const char *key)
{
    static const char *const host_keys[] = {"list", "power_on", "power_off", "power_status",
                                            "power_reading"};
    if (streq(key, "migrate"))
        return FX_VARS_MIGRATE;
    for (size_t i = 0; i < ARRAY_SIZE(host_keys); i++)
        if (streq(key, host_keys[i]))
            return FX_VARS_HOST;
    return 0;
}

/* The length of the NAME of a placeholder whose '{' is at P, 0 when P
 * starts none ("{}", "{ print }", the shell's "${x}"). */
static size_t placeholder_len(const char *text, const char *p)
{
    if (p > text && p[-1] == '$')
        return 0;
    size_t n = 0;
    while (isalnum((unsigned char)p[1 + n]) || p[1 + n] == '_')
        n++;
    return n > 0 && p[1 + n] == '}' ? n : 0;
}

static int var_of(const char *name, size_t n)
{
    for (int v = 0; v < FX_VAR_N; v++)
        if (strlen(var_names[v]) == n && memcmp(var_names[v], name, n) == 0)
            return v;
    return -1;
}

/* The state of one split. */
struct split {
    const char *text;
    struct fx_tmpl t;
    size_t cap_w, cap_p;
    struct strbuf lit; /* literal text of the current part */
    bool in_word, lit_open;
    char *why;
    size_t size;
};

static int fail(struct split *s, const char *after, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* WHY = "WHAT in 'TEMPLATE'AFTER", WHAT from FMT. */
static int fail(struct split *s, const char *after, const char *fmt, ...)
{
    char what[128];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    snprintf(s->why, s->size, "%s in '%.*s%s'%s", what, TMPL_SHOWN, s->text,
             strlen(s->text) > TMPL_SHOWN ? "..." : "", after);
    return -EINVAL;
}

static struct fx_word *cur_word(struct split *s)
{
    return &s->t.w[s->t.n - 1];
}

static void part_add(struct split *s, struct fx_part p)
{
    struct fx_word *w = cur_word(s);
    w->v = grow_array(w->v, sizeof(*w->v), w->n, &s->cap_p);
    w->v[w->n++] = p;
}

static void lit_flush(struct split *s)
{
    if (s->lit_open)
        part_add(s, (struct fx_part){.text = strbuf_steal(&s->lit), .var = -1});
    s->lit_open = false;
}

static void word_begin(struct split *s)
{
    if (s->in_word)
        return;
    s->t.w = grow_array(s->t.w, sizeof(*s->t.w), s->t.n, &s->cap_w);
    s->t.w[s->t.n++] = (struct fx_word){0};
    s->cap_p = 0;
    s->in_word = true;
}

static void word_end(struct split *s)
{
    if (!s->in_word)
        return;
    lit_flush(s);
    if (cur_word(s)->n == 0) /* '' or "": one empty word */
        part_add(s, (struct fx_part){.text = xstrdup(""), .var = -1});
    s->in_word = false;
}

static void lit_add(struct split *s, const char *p, size_t n)
{
    strbuf_append_n(&s->lit, p, n);
    s->lit_open = true;
}

/* A '{' inside quotes at P: refused when it starts a placeholder. */
static int quoted_brace(struct split *s, const char *p)
{
    size_t n = placeholder_len(s->text, p);
    if (n == 0)
        return 0;
    return fail(s,
                ": a placeholder stands outside quotes, where it is one word whatever its "
                "value holds",
                "placeholder {%.*s} inside quotes", (int)n, p + 1);
}

/* '...' from P (its opening quote); returns the closing quote. */
static const char *single_quoted(struct split *s, const char *p, int *r)
{
    const char *end = strchr(p + 1, '\'');
    if (!end) {
        *r = fail(s, "", "unterminated ' quote");
        return NULL;
    }
    for (const char *b = memchr(p + 1, '{', (size_t)(end - p - 1)); b && b < end;
         b = memchr(b + 1, '{', (size_t)(end - b - 1)))
        if ((*r = quoted_brace(s, b)) < 0)
            return NULL;
    lit_add(s, p + 1, (size_t)(end - p - 1));
    return end;
}

/* "..." from P; returns the closing quote. */
static const char *double_quoted(struct split *s, const char *p, int *r)
{
    for (p++; *p && *p != '"'; p++) {
        if (*p == '\\' && p[1] && strchr("\"\\$`", p[1])) {
            lit_add(s, ++p, 1);
            continue;
        }
        if (*p == '{' && (*r = quoted_brace(s, p)) < 0)
            return NULL;
        lit_add(s, p, 1);
    }
    if (!*p) {
        *r = fail(s, "", "unterminated \" quote");
        return NULL;
    }
    return p;
}

/* The placeholder {NAME} (N bytes) at P, outside quotes. */
static int placeholder(struct split *s, const char *p, size_t n, unsigned allowed)
{
    int v = var_of(p + 1, n);
    if (v < 0 || !(allowed & FX_VARS(v))) {
        char known[128] = " (known:";
        for (int k = 0; k < FX_VAR_N; k++)
            if (allowed & FX_VARS(k))
                snprintf(known + strlen(known), sizeof(known) - strlen(known), " {%s}",
                         var_names[k]);
        strcat(known, ")");
        return fail(s, known, "unknown placeholder {%.*s}", (int)n, p + 1);
    }
    if (s->t.n == 1)
        return fail(s, ": the program to run is written out, its arguments may hold placeholders",
                    "placeholder {%.*s} in the first word", (int)n, p + 1);
    lit_flush(s);
    part_add(s, (struct fx_part){.text = NULL, .var = v});
    return 0;
}

static int split_all(struct split *s, unsigned allowed)
{
    int r = 0;
    for (const char *p = s->text; *p; p++) {
        if (*p == ' ' || *p == '\t' || *p == '\n') {
            word_end(s);
            continue;
        }
        word_begin(s);
        size_t n;
        if (*p == '\'')
            p = single_quoted(s, p, &r);
        else if (*p == '"')
            p = double_quoted(s, p, &r);
        else if (*p == '\\' && !p[1])
            return fail(s, "", "a backslash at the end");
        else if (*p == '\\')
            lit_add(s, ++p, 1);
        else if (*p == '{' && (n = placeholder_len(s->text, p)) > 0) {
            r = placeholder(s, p, n, allowed);
            p += n + 1;
        } else
            lit_add(s, p, 1);
        if (r < 0 || !p)
            return r < 0 ? r : -EINVAL;
    }
    word_end(s);
    if (s->t.n == 0)
        return fail(s, "", "no command");
    if (s->t.w[0].n == 1 && !s->t.w[0].v[0].text[0])
        return fail(s, "", "an empty program name");
    return 0;
}

int fx_tmpl_split(const char *text, unsigned allowed, struct fx_tmpl *ret, char *why, size_t size)
{
    struct split s = {.text = text, .why = why, .size = size};
    int r = split_all(&s, allowed);
    strbuf_free(&s.lit);
    if (r < 0) {
        fx_tmpl_free(&s.t);
        return r;
    }
    *ret = s.t;
    return 0;
}

void fx_tmpl_free(struct fx_tmpl *t)
{
    if (!t)
        return;
    for (size_t i = 0; i < t->n; i++) {
        for (size_t k = 0; k < t->w[i].n; k++)
            free(t->w[i].v[k].text);
        free(t->w[i].v);
    }
    free(t->w);
    *t = (struct fx_tmpl){0};
}

char **fx_tmpl_argv(const struct fx_tmpl *t, const char *const values[FX_VAR_N])
{
    char **argv = xcalloc(t->n + 1, sizeof(*argv));
    for (size_t i = 0; i < t->n; i++) {
        struct strbuf b = {0};
        for (size_t k = 0; k < t->w[i].n; k++) {
            const struct fx_part *p = &t->w[i].v[k];
            const char *v = p->var < 0 ? p->text : values[p->var];
            strbuf_append(&b, v ? v : "");
        }
        argv[i] = strbuf_steal(&b);
    }
    return argv;
}

void fx_argv_free(char **argv)
{
    for (size_t i = 0; argv && argv[i]; i++)
        free(argv[i]);
    free(argv);
}
