/* Text from outside shown on a terminal: process names and command lines,
 * cgroup paths, VM, device, driver, IRQ and profile names, journal paths.
 * Any of them can hold an escape sequence (ESC, CSI 0x9b, BEL, ...) that
 * would retitle, clear or reprogram the terminal of whoever reads watt's
 * output, or invalid UTF-8 that eats the characters after it. Every text
 * writer passes such names, or its whole output, through these functions:
 * one rule, one place.
 *
 * The rule: printable ASCII and valid UTF-8 pass; C0 controls, DEL, C1
 * controls (U+0080..U+009F), bidirectional overrides, zero-width and
 * other invisible format characters and each byte of invalid UTF-8 become
 * '?' (as ps and ls show them); in a name, tabs and line breaks become
 * spaces. Widths are display columns, not bytes, so tables still align. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "base/strbuf.h"

/* Copy LEN bytes of SRC into DST (SIZE bytes, NUL-terminated) by the rule
 * above; with UTF8 false, any non-ASCII character is '?' too. At most
 * MAX_COLS display columns: a longer text is cut and ends in "…" ('>' in
 * ASCII). Returns the columns used. SRC NULL: "". */
size_t text_printable(char *dst, size_t size, const char *src, size_t len, size_t max_cols,
                      bool utf8);

/* Append LEN bytes of S to B by the rule above, uncut. LINES: S is a whole
 * output, whose '\n' and '\t' pass; else they become spaces. */
void text_append(struct strbuf *b, const char *s, size_t len, bool lines);

/* S as one printable name (text_append, LINES false); NULL: "-". Caller
 * frees. */
char *text_dup(const char *s);

/* text_dup(S) padded with spaces to COLS display columns (not cut): for
 * a name in a column of a hand-made table. Caller frees. */
char *text_pad(const char *s, size_t cols);

/* Write S, a whole text output, to F through text_append (LINES true).
 * Returns what fputs returns. */
int text_fputs(const char *s, FILE *f);
/* printf through text_fputs: for lines that hold names. */
int text_printf(FILE *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Display columns of S, a string these functions produced: combining
 * marks 0, East Asian wide characters 2, others 1. */
size_t text_width(const char *s);
/* Bytes of the longest start of S (printable) that fits MAX_COLS columns,
 * never cutting a character. */
size_t text_fit(const char *s, size_t max_cols);

/* S as one printable name (text_dup) in lines of at most COLS (>= 1)
 * display columns, broken at blanks; a word longer than a line is broken
 * inside it, never inside a character. Nothing is dropped but the blanks
 * at the breaks. Returns the number of lines (0 for an empty or blank S);
 * *RET is an owned array of owned lines: free with text_wrap_free(). */
size_t text_wrap(const char *s, size_t cols, char ***ret);
void text_wrap_free(char **lines, size_t n);

/* A copy of LEN bytes of S as valid UTF-8: each byte that is not part of
 * a valid sequence becomes U+FFFD. Caller frees. */
char *text_utf8_valid(const char *s, size_t len);
/* One UTF-8 sequence at S (N bytes): its length and *CP, or 0 when it is
 * not valid UTF-8 (overlong forms, surrogates and > U+10FFFF included). */
size_t text_utf8_decode(const unsigned char *s, size_t n, unsigned *cp);
