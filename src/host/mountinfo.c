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
static bool split_line_super(char *line, char **ret_root, char **ret_point, char **ret_fstype,
                             char **ret_super);

static bool split_line(char *line, char **ret_root, char **ret_point, char **ret_fstype)
{
    return split_line_super(line, ret_root, ret_point, ret_fstype, NULL);
}

/* split_line(), and the super options (the last field; "" when missing). */
static bool split_line_super(char *line, char **ret_root, char **ret_point, char **ret_fstype,
                             char **ret_super)
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
    if (ret_super) {
        char *source = fstype ? strtok_r(NULL, " ", &save) : NULL;
        char *super = source ? strtok_r(NULL, " ", &save) : NULL;
        *ret_super = super ? super : (char *)"";
    }
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

/* Whether the comma-separated OPTS holds WORD. */
static bool has_option(const char *opts, const char *word)
{
    size_t n = strlen(word);
    for (const char *o = opts; *o;) {
        size_t k = strcspn(o, ",");
        if (k == n && !memcmp(o, word, n))
            return true;
        o += k + (o[k] == ',');
    }
    return false;
}

int mountinfo_find_cgroup(const char *text, size_t len, char **ret_v2, char **ret_v1_cpuset,
                          unsigned *ret_line)
{
    _cleanup_free_ char *copy = xstrndup(text, len);
    _cleanup_free_ char *v2 = NULL, *v1 = NULL;
    unsigned lineno = 0;
    for (char *line = copy, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        lineno++;
        if (!*line)
            continue;
        char *root, *point, *fstype, *super;
        if (!split_line_super(line, &root, &point, &fstype, &super)) {
            if (ret_line)
                *ret_line = lineno;
            return -EBADMSG;
        }
        if (!streq(root, "/"))
            continue; /* a bind mount of a subtree (a container's view) */
        if (streq(fstype, "cgroup2") && !v2)
            v2 = xstrdup(point);
        else if (streq(fstype, "cgroup") && !v1 && has_option(super, "cpuset"))
            v1 = xstrdup(point);
    }
    *ret_v2 = TAKE_PTR(v2);
    *ret_v1_cpuset = TAKE_PTR(v1);
    return (*ret_v2 ? 1 : 0) + (*ret_v1_cpuset ? 2 : 0);
}

char *mountinfo_under_sys(const char *mount)
{
    if (strncmp(mount, "/sys/", 5) != 0 || !mount[5])
        return NULL;
    size_t n = strlen(mount);
    while (n > 5 && mount[n - 1] == '/')
        n--;
    return xstrndup(mount + 5, n - 5);
}
