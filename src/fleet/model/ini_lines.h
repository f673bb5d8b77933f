/* The line reader in front of inih for the fleet's INI files (fleet.ini,
 * `watt fleet sim --constraints`; docs/config.md). inih (r55) numbers
 * nothing for its handler, has no callback for a section header and reads
 * a line longer than its buffer as two lines; this reader numbers every
 * line, drops indentation (an indented line is a line of its own, not a
 * continuation), may take the section headers itself, and hands inih a
 * long key line as "KEY=" with the value kept in long_value, split as inih
 * splits a key line (the first '=' or ':', the value ending at a " ;"
 * comment). Pure. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

struct fleet_ini_lines {
    const char *pos; /* the text still to read (NUL-terminated); set before reading */
    /* A "[...]" line (trimmed), taken here instead of by inih (which then
     * sees a blank line); NULL: inih reads the headers. < 0 stops the
     * reading, with why set by the callback. */
    int (*on_section)(void *user, char *header);
    void *user;
    int line;         /* the line read last, from 1 */
    char *long_value; /* the value of the long line just read; the handler takes it */
    bool failed;      /* stop: set by the reader on a bad line, by the user on an error */
    char why[160];    /* the reader's own error, on line */
};

/* inih's ini_reader: ini_parse_stream(fleet_ini_read, &lines, handler, ...). */
char *fleet_ini_read(char *str, int num, void *stream);
/* For the handler: the long line's value (the caller frees it), or NULL
 * when the line was short and inih's value is the value. */
char *fleet_ini_take_long(struct fleet_ini_lines *l);
void fleet_ini_lines_free(struct fleet_ini_lines *l);
