#include "json.h"

#include <assert.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/text.h"

void json_init(struct json *j, bool pretty)
{
    *j = (struct json){.pretty = pretty};
}

void json_free(struct json *j)
{
    strbuf_free(&j->out);
}

static void newline(struct json *j)
{
    if (!j->pretty)
        return;
    strbuf_putc(&j->out, '\n');
    strbuf_pad(&j->out, ' ', (size_t)j->depth * 2);
}

/* Before any value or key: the comma and indentation it needs. */
static void before_item(struct json *j)
{
    if (j->after_key) {
        j->after_key = false;
        return;
    }
    if (j->depth > 0) {
        if (j->need_comma[j->depth])
            strbuf_putc(&j->out, ',');
        newline(j);
        j->need_comma[j->depth] = true;
    }
}

static void open_container(struct json *j, char c)
{
    before_item(j);
    strbuf_putc(&j->out, c);
    assert(j->depth + 1 < JSON_MAX_DEPTH);
    j->depth++;
    j->need_comma[j->depth] = false;
}

static void close_container(struct json *j, char c)
{
    assert(j->depth > 0);
    bool had_items = j->need_comma[j->depth];
    j->depth--;
    if (had_items)
        newline(j);
    strbuf_putc(&j->out, c);
}

void json_object_begin(struct json *j)
{
    open_container(j, '{');
}

void json_object_end(struct json *j)
{
    close_container(j, '}');
}

void json_array_begin(struct json *j)
{
    open_container(j, '[');
}

void json_array_end(struct json *j)
{
    close_container(j, ']');
}

/* RFC 8259 strings, and more: C0, DEL and C1 controls as \u escapes, so
 * that no escape sequence reaches a terminal that shows the document;
 * U+2028/U+2029 too (JavaScript); each byte of invalid UTF-8 as U+FFFD,
 * so the document stays valid UTF-8 whatever a name held. */
static void put_escaped(struct strbuf *b, const char *s)
{
    strbuf_putc(b, '"');
    size_t n = strlen(s);
    for (const unsigned char *p = (const unsigned char *)s; *p;) {
        unsigned c;
        size_t used = text_utf8_decode(p, n - (size_t)(p - (const unsigned char *)s), &c);
        if (!used) {
            strbuf_append(b, "\\ufffd");
            p++;
            continue;
        }
        switch (c) {
        case '"':
            strbuf_append(b, "\\\"");
            break;
        case '\\':
            strbuf_append(b, "\\\\");
            break;
        case '\n':
            strbuf_append(b, "\\n");
            break;
        case '\t':
            strbuf_append(b, "\\t");
            break;
        case '\r':
            strbuf_append(b, "\\r");
            break;
        default:
            if (c < 0x20 || (c >= 0x7f && c <= 0x9f) || c == 0x2028 || c == 0x2029)
                strbuf_appendf(b, "\\u%04x", c);
            else
                strbuf_append_n(b, (const char *)p, used);
        }
        p += used;
    }
    strbuf_putc(b, '"');
}

void json_key(struct json *j, const char *key)
{
    before_item(j);
    put_escaped(&j->out, key);
    strbuf_append(&j->out, j->pretty ? ": " : ":");
    j->after_key = true;
}

void json_string(struct json *j, const char *s)
{
    before_item(j);
    if (s)
        put_escaped(&j->out, s);
    else
        strbuf_append(&j->out, "null");
}

void json_u64(struct json *j, uint64_t v)
{
    before_item(j);
    strbuf_appendf(&j->out, "%" PRIu64, v);
}

void json_i64(struct json *j, int64_t v)
{
    before_item(j);
    strbuf_appendf(&j->out, "%" PRId64, v);
}

void format_double(char *buf, size_t size, double v)
{
    snprintf(buf, size, "%.15g", v);
    if (strtod(buf, NULL) != v)
        snprintf(buf, size, "%.17g", v);
}

void json_double(struct json *j, double v)
{
    before_item(j);
    if (!isfinite(v)) {
        strbuf_append(&j->out, "null");
        return;
    }
    char buf[40];
    format_double(buf, sizeof(buf), v);
    strbuf_append(&j->out, buf);
}

void json_bool(struct json *j, bool v)
{
    before_item(j);
    strbuf_append(&j->out, v ? "true" : "false");
}

void json_null(struct json *j)
{
    before_item(j);
    strbuf_append(&j->out, "null");
}

void json_kv_string(struct json *j, const char *key, const char *s)
{
    json_key(j, key);
    json_string(j, s);
}

void json_kv_u64(struct json *j, const char *key, uint64_t v)
{
    json_key(j, key);
    json_u64(j, v);
}

void json_kv_i64(struct json *j, const char *key, int64_t v)
{
    json_key(j, key);
    json_i64(j, v);
}

void json_kv_double(struct json *j, const char *key, double v)
{
    json_key(j, key);
    json_double(j, v);
}

void json_kv_bool(struct json *j, const char *key, bool v)
{
    json_key(j, key);
    json_bool(j, v);
}

void json_kv_null(struct json *j, const char *key)
{
    json_key(j, key);
    json_null(j);
}
