/* Plain-text tables for reports: columns sized to their widest cell, left
 * or right aligned, the whole line clipped to a maximum width (columns). */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "base/strbuf.h"

#define TABLE_MAX_COLS 16

struct table {
    size_t ncols;
    const char *head[TABLE_MAX_COLS];
    bool right[TABLE_MAX_COLS]; /* right-align (numbers) */
    char **cells;               /* nrows * ncols, owned */
    size_t nrows, cap;
};

/* Columns as "name" (left) or ">name" (right-aligned), NULL-terminated. */
void table_init(struct table *t, ...);
/* One row: ncols cells given as already-built strings (NULL: "-"). A cell
 * can be a name from outside: it is stored printable (base/text.h), and
 * columns are sized in display columns, so such a row still aligns. */
void table_add(struct table *t, ...);
void table_render(const struct table *t, struct strbuf *out, size_t max_width);
void table_free(struct table *t);
