/* The line reader in front of inih for the fleet's INI files (ini_lines.h). */
#include "fleet/model/ini_lines.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/parse.h"
#include "base/util.h"

/* S, longer than inih's NUM: "KEY=" into STR, the value into long_value. */
static int long_line(struct fleet_ini_lines *l, const char *s, char *str, int num)
{
    size_t k = 0;
    while (s[k] && s[k] != '=' && s[k] != ':' &&
           !(s[k] == ';' && k > 0 && isspace((unsigned char)s[k - 1])))
        k++;
    if (s[k] != '=' && s[k] != ':') {
        snprintf(l->why, sizeof(l->why), "want key = value or [section]");
        return -1;
    }
    if (k + 2 > (size_t)num) {
        snprintf(l->why, sizeof(l->why), "a key longer than %d characters", num - 2);
        return -1;
    }
    _cleanup_free_ char *val = xstrdup(s + k + 1);
    for (char *p = val; *p; p++)
        if (*p == ';' && p > val && isspace((unsigned char)p[-1])) {
            *p = '\0';
            break;
        }
    free(l->long_value);
    l->long_value = xstrdup(str_trim(val));
    memcpy(str, s, k);
    str[k] = '=';
    str[k + 1] = '\0';
    return 0;
}

char *fleet_ini_read(char *str, int num, void *stream)
{
    struct fleet_ini_lines *l = stream;
    if (l->failed || !*l->pos)
        return NULL;
    const char *nl = strchr(l->pos, '\n');
    size_t n = nl ? (size_t)(nl - l->pos) : strlen(l->pos);
    _cleanup_free_ char *copy = xstrndup(l->pos, n);
    l->pos += n + (nl != NULL);
    l->line++;
    char *s = copy;
    if (l->line == 1 && strncmp(s, "\xEF\xBB\xBF", 3) == 0)
        s += 3; /* a UTF-8 byte order mark, as inih skips it */
    s = str_trim(s);
    str[0] = '\0';
    int r = 0;
    if (*s == '[' && l->on_section)
        r = l->on_section(l->user, s);
    else if (*s == ';' || *s == '#' || !*s)
        ; /* a comment or a blank line */
    else if (strlen(s) < (size_t)num)
        memcpy(str, s, strlen(s) + 1);
    else if (*s == '[') {
        snprintf(l->why, sizeof(l->why), "a section header longer than %d characters", num - 1);
        r = -1;
    } else
        r = long_line(l, s, str, num);
    if (r < 0)
        l->failed = true;
    return r < 0 ? NULL : str;
}

char *fleet_ini_take_long(struct fleet_ini_lines *l)
{
    return TAKE_PTR(l->long_value);
}

void fleet_ini_lines_free(struct fleet_ini_lines *l)
{
    free(l->long_value);
    l->long_value = NULL;
}
