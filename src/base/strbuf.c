#include "strbuf.h"

#include <stdio.h>
#include <string.h>

#include "util.h"

static void reserve(struct strbuf *b, size_t extra)
{
    if (b->len + extra + 1 <= b->cap)
        return;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < b->len + extra + 1)
        cap *= 2;
    b->s = xrealloc(b->s, cap);
    b->cap = cap;
}

void strbuf_append_n(struct strbuf *b, const char *s, size_t n)
{
    reserve(b, n);
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = '\0';
}

void strbuf_append(struct strbuf *b, const char *s)
{
    strbuf_append_n(b, s, strlen(s));
}

void strbuf_putc(struct strbuf *b, char c)
{
    strbuf_append_n(b, &c, 1);
}

void strbuf_pad(struct strbuf *b, char c, size_t n)
{
    reserve(b, n);
    memset(b->s + b->len, c, n);
    b->len += n;
    b->s[b->len] = '\0';
}

void strbuf_vappendf(struct strbuf *b, const char *fmt, va_list ap)
{
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    if (n < 0)
        return;
    reserve(b, (size_t)n);
    vsnprintf(b->s + b->len, (size_t)n + 1, fmt, ap);
    b->len += (size_t)n;
}

void strbuf_appendf(struct strbuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    strbuf_vappendf(b, fmt, ap);
    va_end(ap);
}

const char *strbuf_str(const struct strbuf *b)
{
    return b->s ? b->s : "";
}

char *strbuf_steal(struct strbuf *b)
{
    char *s = b->s ? b->s : xstrdup("");
    b->s = NULL;
    b->len = b->cap = 0;
    return s;
}

void strbuf_reset(struct strbuf *b)
{
    b->len = 0;
    if (b->s)
        b->s[0] = '\0';
}

void strbuf_free(struct strbuf *b)
{
    free(b->s);
    b->s = NULL;
    b->len = b->cap = 0;
}
