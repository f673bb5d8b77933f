/* Strict parsers for the values the kernel prints. Each accepts one value
 * with optional surrounding whitespace (sysfs ends values with '\n') and
 * returns 0, or -EINVAL for empty or garbage text, -ERANGE for overflow.
 * ret_* is set only on success. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

int parse_u64(const char *s, uint64_t *ret);
int parse_i64(const char *s, int64_t *ret);
/* Like parse_u64, with base 0 semantics: "0x0c0330" and "12" both work. */
int parse_u64_any(const char *s, uint64_t *ret);
int parse_double(const char *s, double *ret);
int parse_bool01(const char *s, int *ret); /* "0"/"1", "N"/"Y" */

/* The one boolean of every config file (agent.ini, profiles, fleet.ini;
 * docs/config.md): yes/no, true/false, on/off, 1/0, in any case, with
 * optional surrounding whitespace. 0, or -EINVAL for anything else; put
 * PARSE_BOOL_WORDS in the error so the user sees what is accepted. */
int parse_bool(const char *s, bool *ret);
#define PARSE_BOOL_WORDS "yes/no, true/false, on/off or 1/0"
/* The value of one hexadecimal digit (either case), -1 when C is not one. */
int hex_digit_value(char c);
/* Whether S is one or more decimal digits and nothing else (a /proc PID). */
bool str_all_digits(const char *s);

/* Remove trailing whitespace in place; returns s. */
char *strip_trailing(char *s);
/* S without its leading and trailing white space (isspace), cut in place. */
char *str_trim(char *s);

/* Skip leading whitespace. */
const char *skip_space(const char *s);

/* Spans [p, e) of kernel text that need not end in NUL (/proc/interrupts
 * rows, tracefs format lines): a blank is a space, tab or CR. */
bool span_is_blank(char c);
/* The first non-blank at or after p (e when none). */
const char *span_skip_blanks(const char *p, const char *e);
/* The end of [p, e) without its trailing blanks. */
const char *span_trim_end(const char *p, const char *e);
