/* watt top's views as rows of printable cells (top_view.c), shared by the
 * --once text output and the TUI (top_tui.c), so both show the same
 * columns, the same number formats and the same escaping of names. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "base/text.h"
#include "view/top.h"

#define TOP_MAX_COLS   16  /* = TABLE_MAX_COLS */
#define TOP_CELL       256 /* bytes of one cell, NUL included */
#define TOP_LINE       512 /* bytes of one header line */
#define TOP_HEADER     4   /* lines of top_header_lines() */
#define TOP_TEXT_WIDTH 100 /* columns: --once's notes are wrapped at this, never cut */

/* Not a tab of its own: the per-state summary shown above the per-CPU
 * grid in the C-states view (and before it in the text output). */
#define TOP_VIEW_CSTATES ((enum top_view)_TOP_VIEW_MAX)
/* Not a tab either: the package rows (top_pkg) between the summary and
 * the per-CPU grid of the C-states view, and in the text output. */
#define TOP_VIEW_PKGS ((enum top_view)(_TOP_VIEW_MAX + 1))

struct top_col {
    char head[40];
    unsigned width; /* display columns in the TUI; the minimum for flex */
    bool right;     /* numbers: right-aligned */
    bool flex;      /* the last column: takes the rest of the line */
};

/* "Processes", "Cgroups", "IRQs/timers/work", "C-states", "Devices" */
const char *top_view_title(enum top_view v);
/* "processes", "cgroups", "sources", "cstates", "devices" (for --view) */
const char *top_view_name(enum top_view v);
/* "wake-ups", "power", "CPU", "idle wake-ups" */
const char *top_sort_title(enum top_sort s);

/* The columns of view V (C-states: one per state of the first CPU, at
 * most TOP_MAX_COLS - 5 of them). Returns how many. */
size_t top_view_cols(const struct top_frame *f, enum top_view v, struct top_col cols[TOP_MAX_COLS]);
size_t top_view_nrows(const struct top_frame *f, enum top_view v);
/* Row ROW of view V as printable cells, one per column: names escaped by
 * text_printable() (UTF8 false: ASCII only), flex cells clipped to
 * FLEX_COLS display columns, unknown numbers as "-". */
void top_view_row(const struct top_frame *f, enum top_view v, size_t row, bool utf8,
                  size_t flex_cols, char cells[TOP_MAX_COLS][TOP_CELL]);

/* The header block under the title, each line with a 10-column label
 * ("Power", "", "Wake-ups", "CPUs"): node power, its split, wake-ups,
 * busy CPUs. */
void top_header_lines(const struct top_frame *f, bool utf8, char lines[TOP_HEADER][TOP_LINE]);

/* "task", "irq", "timer", "hrtimer", "work", "other" */
const char *top_kind_name(enum wake_kind k);
