#include "parse.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

char *strip_trailing(char *s)
{
    size_t n = 0;
    while (s[n])
        n++;
    while (n > 0 && isspace((unsigned char)s[n - 1]))
        s[--n] = '\0';
    return s;
}

const char *skip_space(const char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    return s;
}

bool span_is_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\r';
}

const char *span_skip_blanks(const char *p, const char *e)
{
    while (p < e && span_is_blank(*p))
        p++;
    return p;
}

char *str_trim(char *s)
{
    return strip_trailing(s + (skip_space(s) - s));
}

const char *span_trim_end(const char *p, const char *e)
{
    while (e > p && span_is_blank(e[-1]))
        e--;
    return e;
}

static int only_space(const char *end)
{
    return *skip_space(end) == '\0';
}

static int parse_unsigned(const char *s, int base, uint64_t *ret)
{
    s = skip_space(s);
    if (!isdigit((unsigned char)*s))
        return -EINVAL; /* rejects "", "-1", "+1", "garbage" */
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, base);
    if (errno == ERANGE)
        return -ERANGE;
    if (end == s || !only_space(end))
        return -EINVAL;
    *ret = v;
    return 0;
}

int parse_u64(const char *s, uint64_t *ret)
{
    return parse_unsigned(s, 10, ret);
}

int parse_u64_any(const char *s, uint64_t *ret)
{
    return parse_unsigned(s, 0, ret);
}

int parse_i64(const char *s, int64_t *ret)
{
    s = skip_space(s);
    const char *d = (*s == '-' || *s == '+') ? s + 1 : s;
    if (!isdigit((unsigned char)*d))
        return -EINVAL;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno == ERANGE)
        return -ERANGE;
    if (!only_space(end))
        return -EINVAL;
    *ret = v;
    return 0;
}

int parse_double(const char *s, double *ret)
{
    s = skip_space(s);
    if (!*s)
        return -EINVAL;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno == ERANGE)
        return -ERANGE;
    if (end == s || !only_space(end) || !isfinite(v))
        return -EINVAL;
    *ret = v;
    return 0;
}

int parse_bool01(const char *s, int *ret)
{
    s = skip_space(s);
    int v;
    if (*s == '1' || *s == 'Y' || *s == 'y')
        v = 1;
    else if (*s == '0' || *s == 'N' || *s == 'n')
        v = 0;
    else
        return -EINVAL;
    if (!only_space(s + 1))
        return -EINVAL;
    *ret = v;
    return 0;
}

int parse_bool(const char *s, bool *ret)
{
    static const char *const words[][2] = {
        {"no", "yes"}, {"false", "true"}, {"off", "on"}, {"0", "1"}};
    if (!s)
        return -EINVAL;
    s = skip_space(s);
    size_t n = strlen(s);
    while (n > 0 && isspace((unsigned char)s[n - 1]))
        n--;
    for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++)
        for (size_t v = 0; v < 2; v++)
            if (strlen(words[i][v]) == n && strncasecmp(s, words[i][v], n) == 0) {
                *ret = v == 1;
                return 0;
            }
    return -EINVAL;
}

int hex_digit_value(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

bool str_all_digits(const char *s)
{
    if (!*s)
        return false;
    for (; *s; s++)
        if (*s < '0' || *s > '9')
            return false;
    return true;
}
