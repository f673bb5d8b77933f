/* An output file named on the command line (--html, --csv, --plot): made
 * before the work that fills it, so a bad path fails at once and not after
 * a long interval or simulation, and put in place whole or not at all.
 *
 * cli_outfile_open() creates a temporary file ".NAME.XXXXXX" in PATH's
 * directory; the caller writes to ->f; cli_outfile_commit() flushes,
 * fsyncs and renames it over PATH (mode 0666 less the umask, as any file
 * the user writes). On any failure the temporary file is removed, an
 * older PATH is left as it was, and one line naming VERB and PATH says
 * why on stderr. */
#pragma once

#include <stdio.h>

struct cli_outfile {
    const char *path; /* borrowed */
    char *tmp;        /* owned; NULL when not open */
    FILE *f;          /* write here; NULL when not open */
};

int cli_outfile_open(const char *verb, const char *path, struct cli_outfile *ret);
int cli_outfile_commit(const char *verb, struct cli_outfile *o);
/* Remove the temporary file (nothing is written to PATH); NULL-safe, and
 * safe on a closed or never-opened one. */
void cli_outfile_abort(struct cli_outfile *o);
