#include "host/mountinfo.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"

#define CANONICAL "/sys/kernel/tracing"

/* Decode the kernel's octal escapes (show_mountinfo() escapes space, tab,
 * newline and backslash as \ooo) in place; false on a stray backslash. */
static bool unescape(char *s)
{
    char *w = s;
    for (const char *r = s; *r; r++) {
        if (*r != '\\') {
            *w++ = *r;
            continue;
        }
        if (r[1] < '0' || r[1] > '3' || r[2] < '0' || r[2] > '7' || r[3] < '0' || r[3] > '7')
            return false;
        *w++ = (char)((r[1] - '0') * 64 + (r[2] - '0') * 8 + (r[3] - '0'));
        r += 3;
    }
    *w = '\0';
    return true;
}

/* One line: "36 35 98:0 /root /mount/point opts [optional...] - fstype
 * source superopts". Sets the root, mount point and fstype (pointers into
 * the line, which it cuts); false when the line has not that shape. */
static bool split_line(char *line, char **ret_root, char **ret_point, char **ret_fstype)
{
    char *field[6], *save = NULL, *tok;
    size_t n = 0;
    while (n < 6 && (tok = strtok_r(n ? NULL : line, " ", &save)))
        field[n++] = tok;
    if (n < 6)
        return false;
    /* field[5] is the mount options; then optional fields up to "-" */
    while ((tok = strtok_r(NULL, " ", &save)) && !streq(tok, "-"))
        ;
    char *fstype = tok ? strtok_r(NULL, " ", &save) : NULL;
    if (!fstype || !unescape(field[3]) || !unescape(field[4]) || field[4][0] != '/')
        return false;
    *ret_root = field[3];
    *ret_point = field[4];
    *ret_fstype = fstype;
    return true;
}

int mountinfo_find_tracing(const char *text, size_t len, char **ret_path, unsigned *ret_line)
{
    _cleanup_free_ char *copy = xstrndup(text, len);
    _cleanup_free_ char *best = NULL;
    int kind = MOUNTINFO_TRACE_NONE;
    unsigned lineno = 0;
    for (char *line = copy, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        lineno++;
        if (!*line)
            continue;
        char *root, *point, *fstype;
        if (!split_line(line, &root, &point, &fstype)) {
            if (ret_line)
                *ret_line = lineno;
            return -EBADMSG;
        }
        if (!streq(root, "/"))
            continue;
        int k = MOUNTINFO_TRACE_NONE;
        if (streq(fstype, "tracefs"))
            k = streq(point, CANONICAL) ? MOUNTINFO_TRACE_CANONICAL : MOUNTINFO_TRACE_TRACEFS;
        else if (streq(fstype, "debugfs"))
            k = MOUNTINFO_TRACE_DEBUGFS;
        if (k <= kind)
            continue; /* the first of a kind wins: later ones are stacked */
        free(best);
        best = k == MOUNTINFO_TRACE_DEBUGFS
                   ? xasprintf("%s%stracing", point, point[strlen(point) - 1] == '/' ? "" : "/")
                   : xstrdup(point);
        kind = k;
    }
    if (kind != MOUNTINFO_TRACE_NONE)
        *ret_path = TAKE_PTR(best);
    return kind;
}
