#include "base/table.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "base/text.h"
#include "base/util.h"

void table_init(struct table *t, ...)
{
    *t = (struct table){0};
    va_list ap;
    va_start(ap, t);
    const char *h;
    while ((h = va_arg(ap, const char *)) && t->ncols < TABLE_MAX_COLS) {
        t->right[t->ncols] = h[0] == '>';
        t->head[t->ncols++] = h[0] == '>' ? h + 1 : h;
    }
    va_end(ap);
}

void table_add(struct table *t, ...)
{
    size_t need = (t->nrows + 1) * t->ncols;
    if (need > t->cap) {
        t->cap = need * 2;
        t->cells = xrealloc(t->cells, t->cap * sizeof(char *));
    }
    va_list ap;
    va_start(ap, t);
    for (size_t c = 0; c < t->ncols; c++) {
        /* a cell can hold a name from outside: printable, whatever it is */
        t->cells[t->nrows * t->ncols + c] = text_dup(va_arg(ap, const char *));
    }
    va_end(ap);
    t->nrows++;
}

static void put_cell(struct strbuf *line, const char *s, size_t w, bool right, bool last)
{
    size_t len = text_width(s);
    if (len > w)
        len = w;
    if (right)
        strbuf_pad(line, ' ', w - len);
    strbuf_append(line, s);
    if (!right && !last)
        strbuf_pad(line, ' ', w - len);
}

void table_render(const struct table *t, struct strbuf *out, size_t max_width)
{
    size_t w[TABLE_MAX_COLS];
    for (size_t c = 0; c < t->ncols; c++) {
        w[c] = text_width(t->head[c]);
        for (size_t r = 0; r < t->nrows; r++) {
            size_t l = text_width(t->cells[r * t->ncols + c]);
            if (l > w[c])
                w[c] = l;
        }
    }
    for (size_t r = 0; r <= t->nrows; r++) {
        struct strbuf line = {0};
        strbuf_append(&line, "  ");
        for (size_t c = 0; c < t->ncols; c++) {
            const char *s = r == 0 ? t->head[c] : t->cells[(r - 1) * t->ncols + c];
            if (c)
                strbuf_append(&line, "  ");
            put_cell(&line, s, w[c], t->right[c], c + 1 == t->ncols);
        }
        if (max_width && text_width(strbuf_str(&line)) > max_width) {
            /* cut at a character, in columns, and mark the cut */
            line.len = text_fit(strbuf_str(&line), max_width - 1);
            line.s[line.len] = '\0';
            strbuf_putc(&line, '>');
        }
        strbuf_append(out, strbuf_str(&line));
        strbuf_putc(out, '\n');
        strbuf_free(&line);
    }
}

void table_free(struct table *t)
{
    for (size_t i = 0; i < t->nrows * t->ncols; i++)
        free(t->cells[i]);
    free(t->cells);
    *t = (struct table){0};
}
