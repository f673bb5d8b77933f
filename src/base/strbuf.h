/* A growable, always NUL-terminated string buffer. */
#pragma once

#include <stdarg.h>
#include <stddef.h>

struct strbuf {
    char *s; /* owned; NULL until the first append */
    size_t len;
    size_t cap;
};

void strbuf_append(struct strbuf *b, const char *s);
void strbuf_append_n(struct strbuf *b, const char *s, size_t n);
void strbuf_appendf(struct strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void strbuf_vappendf(struct strbuf *b, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));
void strbuf_putc(struct strbuf *b, char c);
void strbuf_pad(struct strbuf *b, char c, size_t n);
/* The text so far ("" when empty); stays owned by b. */
const char *strbuf_str(const struct strbuf *b);
/* Hand the text to the caller; b is empty afterwards. */
char *strbuf_steal(struct strbuf *b);
void strbuf_reset(struct strbuf *b);
void strbuf_free(struct strbuf *b);
