/* Text from outside made safe to show on a terminal (text.h). */
#include "base/text.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"

size_t text_utf8_decode(const unsigned char *s, size_t n, unsigned *cp)
{
    static const uint32_t min[5] = {0, 0, 0x80, 0x800, 0x10000};
    size_t len = s[0] < 0x80       ? 1
                 : s[0] >> 5 == 6  ? 2
                 : s[0] >> 4 == 14 ? 3
                 : s[0] >> 3 == 30 ? 4
                                   : 0;
    if (!len || len > n)
        return 0;
    uint32_t c = len == 1 ? s[0] : s[0] & (0x7f >> len);
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        c = c << 6 | (s[i] & 0x3f);
    }
    if (c < min[len] || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
        return 0;
    *cp = c;
    return len;
}

struct range {
    uint32_t lo, hi;
};

static bool in_ranges(uint32_t c, const struct range *r, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (c >= r[i].lo && c <= r[i].hi)
            return true;
    return false;
}

/* Characters that would change how the rest of the line looks (C1
 * controls, bidi overrides, zero-width and invisible format characters). */
static bool is_hidden(uint32_t c)
{
    static const struct range r[] = {
        {0x80, 0x9f},     {0xad, 0xad},     {0x200b, 0x200f}, {0x2028, 0x202e},
        {0x2060, 0x206f}, {0xfeff, 0xfeff}, {0xfff9, 0xfffb},
    };
    return in_ranges(c, r, ARRAY_SIZE(r));
}

/* Display columns of a printable character: combining marks 0, East Asian
 * wide and emoji 2 (the main blocks of Unicode's EastAsianWidth W/F; an
 * approximation of wcwidth() that does not depend on the locale). */
static size_t char_width(uint32_t c)
{
    static const struct range zero[] = {
        {0x0300, 0x036f}, {0x0483, 0x0489}, {0x0591, 0x05bd},   {0x0610, 0x061a},
        {0x064b, 0x065f}, {0x1ab0, 0x1aff}, {0x1dc0, 0x1dff},   {0x20d0, 0x20ff},
        {0xfe00, 0xfe0f}, {0xfe20, 0xfe2f}, {0xe0100, 0xe01ef},
    };
    static const struct range wide[] = {
        {0x1100, 0x115f},   {0x231a, 0x231b},   {0x2329, 0x232a},   {0x23e9, 0x23ec},
        {0x25fd, 0x25fe},   {0x2614, 0x2615},   {0x2648, 0x2653},   {0x26aa, 0x26ab},
        {0x26bd, 0x26be},   {0x26c4, 0x26c5},   {0x2705, 0x2705},   {0x270a, 0x270b},
        {0x2728, 0x2728},   {0x274c, 0x274c},   {0x2753, 0x2757},   {0x2795, 0x2797},
        {0x2b1b, 0x2b1c},   {0x2e80, 0x303e},   {0x3041, 0x33ff},   {0x3400, 0x4dbf},
        {0x4e00, 0x9fff},   {0xa000, 0xa4cf},   {0xa960, 0xa97f},   {0xac00, 0xd7a3},
        {0xf900, 0xfaff},   {0xfe10, 0xfe19},   {0xfe30, 0xfe6f},   {0xff00, 0xff60},
        {0xffe0, 0xffe6},   {0x16fe0, 0x18cff}, {0x1b000, 0x1b2ff}, {0x1f004, 0x1f004},
        {0x1f0cf, 0x1f0cf}, {0x1f18e, 0x1f18e}, {0x1f191, 0x1f19a}, {0x1f200, 0x1f251},
        {0x1f300, 0x1f64f}, {0x1f680, 0x1f6ff}, {0x1f7e0, 0x1f7eb}, {0x1f900, 0x1f9ff},
        {0x1fa70, 0x1faff}, {0x20000, 0x3fffd},
    };
    if (in_ranges(c, zero, ARRAY_SIZE(zero)))
        return 0;
    return in_ranges(c, wide, ARRAY_SIZE(wide)) ? 2 : 1;
}

/* The next character of S (N bytes) as printable bytes in OUT (at most 4):
 * returns the bytes of S used (>= 1) and sets *OUT_LEN and *WIDTH. LINES:
 * '\n' and '\t' pass as they are. */
static size_t next_printable(const unsigned char *s, size_t n, bool utf8, bool lines, char out[4],
                             size_t *out_len, size_t *width)
{
    unsigned c;
    size_t used = text_utf8_decode(s, n, &c);
    *out_len = 1;
    *width = 1;
    if (!used) { /* an invalid byte: one '?' each, then resync */
        out[0] = '?';
        return 1;
    }
    if (lines && (c == '\t' || c == '\n'))
        out[0] = (char)c;
    else if (c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f')
        out[0] = ' ';
    else if (c < 0x20 || c == 0x7f || (c >= 0x80 && (!utf8 || is_hidden(c))))
        out[0] = '?';
    else {
        memcpy(out, s, used);
        *out_len = used;
        *width = char_width(c);
    }
    return used;
}

size_t text_printable(char *dst, size_t size, const char *src, size_t len, size_t max_cols,
                      bool utf8)
{
    const char *mark = utf8 ? "\u2026" : ">";
    size_t mark_len = strlen(mark), o = 0, cols = 0, fit_o = 0, fit_cols = 0;
    const unsigned char *s = (const unsigned char *)(src ? src : "");
    if (!src)
        len = 0;
    if (!size)
        return 0;
    for (size_t i = 0; i < len && s[i];) {
        char ch[4];
        size_t ch_len, w;
        i += next_printable(s + i, len - i, utf8, false, ch, &ch_len, &w);
        if (cols + w > max_cols || o + ch_len >= size) {
            /* cut: back to where the mark fits */
            o = fit_o;
            cols = fit_cols;
            if (max_cols >= 1 && o + mark_len < size) {
                memcpy(dst + o, mark, mark_len);
                o += mark_len;
                cols++;
            }
            break;
        }
        memcpy(dst + o, ch, ch_len);
        o += ch_len;
        cols += w;
        /* the last point where the mark would still fit */
        if (cols + 1 <= max_cols && o + mark_len < size) {
            fit_o = o;
            fit_cols = cols;
        }
    }
    dst[o] = '\0';
    return cols;
}

size_t text_width(const char *s)
{
    size_t cols = 0, n = strlen(s);
    for (size_t i = 0; i < n;) {
        char ch[4];
        size_t ch_len, w;
        i += next_printable((const unsigned char *)s + i, n - i, true, false, ch, &ch_len, &w);
        cols += w;
    }
    return cols;
}

char *text_utf8_valid(const char *s, size_t len)
{
    char *buf = xmalloc(len * 3 + 1);
    size_t o = 0;
    for (size_t i = 0; i < len;) {
        unsigned c;
        size_t used = text_utf8_decode((const unsigned char *)s + i, len - i, &c);
        if (used) {
            memcpy(buf + o, s + i, used);
            o += used;
            i += used;
        } else {
            memcpy(buf + o, "\xef\xbf\xbd", 3);
            o += 3;
            i++;
        }
    }
    buf[o] = '\0';
    return buf;
}

void text_append(struct strbuf *b, const char *s, size_t len, bool lines)
{
    const unsigned char *p = (const unsigned char *)(s ? s : "");
    if (!s)
        len = 0;
    for (size_t i = 0; i < len;) {
        char ch[4];
        size_t ch_len, w;
        i += next_printable(p + i, len - i, true, lines, ch, &ch_len, &w);
        strbuf_append_n(b, ch, ch_len);
    }
}

char *text_dup(const char *s)
{
    struct strbuf b = {0};
    s = s ? s : "-";
    text_append(&b, s, strlen(s), false);
    return strbuf_steal(&b);
}

char *text_pad(const char *s, size_t cols)
{
    struct strbuf b = {0};
    s = s ? s : "-";
    text_append(&b, s, strlen(s), false);
    size_t w = text_width(strbuf_str(&b));
    if (w < cols)
        strbuf_pad(&b, ' ', cols - w);
    return strbuf_steal(&b);
}

int text_fputs(const char *s, FILE *f)
{
    struct strbuf b = {0};
    text_append(&b, s, strlen(s), true);
    int r = fputs(strbuf_str(&b), f);
    strbuf_free(&b);
    return r;
}

int text_printf(FILE *f, const char *fmt, ...)
{
    struct strbuf b = {0};
    va_list ap;
    va_start(ap, fmt);
    strbuf_vappendf(&b, fmt, ap);
    va_end(ap);
    int r = text_fputs(strbuf_str(&b), f);
    strbuf_free(&b);
    return r;
}

size_t text_fit(const char *s, size_t max_cols)
{
    size_t cols = 0, n = strlen(s);
    for (size_t i = 0; i < n;) {
        char ch[4];
        size_t ch_len, w;
        size_t used =
            next_printable((const unsigned char *)s + i, n - i, true, true, ch, &ch_len, &w);
        if (cols + w > max_cols)
            return i;
        cols += w;
        i += used;
    }
    return n;
}

/* Bytes of the UTF-8 sequence at S (valid: text_dup made it so). */
static size_t seq_len(const char *s)
{
    size_t n = 1;
    while (s[n] && ((unsigned char)s[n] & 0xC0) == 0x80)
        n++;
    return n;
}

size_t text_wrap(const char *s, size_t cols, char ***ret)
{
    _cleanup_free_ char *p = text_dup(s ? s : "");
    char **v = NULL;
    size_t n = 0, cap = 0;
    if (!cols)
        cols = 1;
    for (const char *c = p; *c;) {
        while (*c == ' ')
            c++;
        if (!*c)
            break;
        size_t fit = text_fit(c, cols), take = fit;
        if (c[fit] && c[fit] != ' ') { /* mid-word: break at the last blank, if any */
            size_t sp = fit;
            while (sp > 0 && c[sp] != ' ')
                sp--;
            take = sp ? sp : fit;
        }
        if (!take)
            take = seq_len(c); /* a character wider than the line: alone on it */
        size_t len = take;
        while (len && c[len - 1] == ' ')
            len--;
        v = grow_array(v, sizeof(*v), n, &cap);
        v[n++] = xstrndup(c, len);
        c += take;
    }
    *ret = v;
    return n;
}

void text_wrap_free(char **lines, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(lines[i]);
    free(lines);
}
