/* Shared by profile.c (the file parser) and profile_keys.c (the key table
 * and value checks); not part of the tune layer's interface. */
#pragma once

#include <stddef.h>

/* The known [section] names, NULL-terminated. */
extern const char *const profile_sections[];

/* The word of WORDS (NULL-terminated) closest to S, within an edit
 * distance of 2 (a swap of neighbours costs 1), or NULL: the "did you
 * mean" of error messages. */
const char *profile_closest(const char *s, const char *const *words);
/* "a, b or c" (LAST_SEP " or "); owned. */
char *profile_join_words(const char *const *words, const char *last_sep);
/* The N bytes at S without leading and trailing blanks; owned. */
char *profile_trimmed(const char *s, size_t n);
