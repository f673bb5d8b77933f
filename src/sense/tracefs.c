#include "sense/tracefs.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/parse.h"
#include "base/util.h"

/* A raw trace record fits in one ring-buffer page, and a __data_loc holds
 * 16-bit offsets: anything beyond is garbage, not a field. */
#define TRACEFS_MAX_OFFSET 65535u
/* Malformed lines named one by one before the rest are only counted. */
#define TRACEFS_MAX_DIAGS 8

struct line_parse {
    struct diags *d;
    unsigned lineno, nbad;
};

static bool starts_with(const char *p, const char *e, const char *prefix)
{
    size_t n = strlen(prefix);
    return (size_t)(e - p) >= n && memcmp(p, prefix, n) == 0;
}

static void bad_line(struct line_parse *lp, const char *why)
{
    if (lp->d && lp->nbad < TRACEFS_MAX_DIAGS) {
        char where[32];
        snprintf(where, sizeof(where), "line %u", lp->lineno);
        diags_add(lp->d, where, 0, "%s: field skipped", why);
    }
    lp->nbad++;
}

/* "offset:12" in [p, e): the decimal value after "key:". */
static int parse_attr(const char *p, const char *e, const char *key, unsigned *ret)
{
    p = span_skip_blanks(p, e);
    e = span_trim_end(p, e);
    if (!starts_with(p, e, key))
        return -EINVAL;
    p += strlen(key);
    if (p >= e || *p != ':')
        return -EINVAL;
    p++;
    if (p >= e)
        return -EINVAL;
    unsigned v = 0;
    for (; p < e; p++) {
        if (!isdigit((unsigned char)*p))
            return -EINVAL;
        v = v * 10 + (unsigned)(*p - '0');
        if (v > TRACEFS_MAX_OFFSET)
            return -ERANGE;
    }
    *ret = v;
    return 0;
}

static bool is_ident(char c)
{
    return isalnum((unsigned char)c) || c == '_';
}

/* The declaration "char comm[16]", "__data_loc char[] name", "void * function":
 * the name is the last identifier, an array when "[...]" follows it. */
static int parse_decl(const char *p, const char *e, struct tracefs_field *f)
{
    p = span_skip_blanks(p, e);
    e = span_trim_end(p, e);
    if (starts_with(p, e, "__rel_loc"))
        return -EOPNOTSUPP; /* offsets relative to the field's end: no event of ours */
    f->dynamic = starts_with(p, e, "__data_loc") && (p + 10 == e || span_is_blank(p[10]));
    const char *ne = e;
    if (ne > p && ne[-1] == ']') { /* "comm[16]" */
        const char *open = memrchr(p, '[', (size_t)(ne - p));
        if (!open)
            return -EINVAL;
        f->is_array = true;
        ne = span_trim_end(p, open);
    }
    const char *ns = ne;
    while (ns > p && is_ident(ns[-1]))
        ns--;
    if (ns == ne || isdigit((unsigned char)*ns))
        return -EINVAL;
    if (ns == p)
        return -EINVAL; /* a name without a type */
    if ((size_t)(ne - ns) >= sizeof(f->name))
        return -ENAMETOOLONG;
    memcpy(f->name, ns, (size_t)(ne - ns));
    f->name[ne - ns] = '\0';
    return 0;
}

/* One "field:DECL;\toffset:N;\tsize:N;\tsigned:N;" line (signed: absent
 * before 2.6.33). p is just past "field:". */
static int parse_field(const char *p, const char *e, struct tracefs_field *ret)
{
    struct tracefs_field f = {0};
    const char *parts[5];
    size_t nparts = 0;
    parts[nparts++] = p;
    for (const char *q = p; q < e && nparts < ARRAY_SIZE(parts); q++)
        if (*q == ';')
            parts[nparts++] = q + 1;
    if (nparts < 4)
        return -EINVAL;
    int r = parse_decl(parts[0], parts[1] - 1, &f);
    if (r < 0)
        return r;
    if ((r = parse_attr(parts[1], parts[2] - 1, "offset", &f.offset)) < 0 ||
        (r = parse_attr(parts[2], parts[3] - 1, "size", &f.size)) < 0)
        return r;
    if (nparts == 5) {
        unsigned sgn;
        if (parse_attr(parts[3], parts[4] - 1, "signed", &sgn) < 0 || sgn > 1)
            return -EINVAL;
        f.is_signed = sgn;
    }
    if (f.size == 0 || f.offset + f.size > TRACEFS_MAX_OFFSET + 1)
        return -ERANGE;
    if (f.dynamic && f.size != 4)
        return -EINVAL; /* a __data_loc is one u32 */
    *ret = f;
    return 0;
}

static const char *field_error(int r)
{
    switch (r) {
    case -EOPNOTSUPP:
        return "__rel_loc fields are not supported";
    case -ENAMETOOLONG:
        return "field name longer than 63 bytes";
    case -ERANGE:
        return "offset or size out of range";
    default:
        return "malformed (want \"field:TYPE NAME; offset:N; size:N; signed:N;\")";
    }
}

static void parse_line(const char *p, const char *e, struct tracefs_format *f, size_t *cap,
                       struct line_parse *lp)
{
    p = span_skip_blanks(p, e);
    e = span_trim_end(p, e);
    if (starts_with(p, e, "name:")) {
        const char *v = span_skip_blanks(p + 5, e);
        size_t n = (size_t)(e - v) < sizeof(f->name) ? (size_t)(e - v) : sizeof(f->name) - 1;
        memcpy(f->name, v, n);
        f->name[n] = '\0';
    } else if (starts_with(p, e, "ID:")) {
        char buf[16];
        const char *v = span_skip_blanks(p + 3, e);
        uint64_t id = 0;
        bool ok = (size_t)(e - v) < sizeof(buf) && v < e;
        for (const char *q = v; ok && q < e; q++) {
            ok = isdigit((unsigned char)*q);
            id = id * 10 + (uint64_t)(*q - '0');
        }
        if (ok && id <= UINT32_MAX)
            f->id = (unsigned)id;
    } else if (starts_with(p, e, "field:")) {
        struct tracefs_field fl;
        int r = parse_field(p + 6, e, &fl);
        if (r < 0) {
            bad_line(lp, field_error(r));
            return;
        }
        f->fields = grow_array(f->fields, sizeof(*f->fields), f->nfields, cap);
        f->fields[f->nfields++] = fl;
    }
}

int tracefs_parse_format(const char *text, size_t len, struct tracefs_format *ret, struct diags *d)
{
    struct tracefs_format f = {0};
    struct line_parse lp = {.d = d};
    size_t cap = 0;
    const char *p = text, *end = text + len;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *e = nl ? nl : end;
        lp.lineno++;
        parse_line(p, e, &f, &cap, &lp);
        p = nl ? nl + 1 : end;
    }
    if (d && lp.nbad > TRACEFS_MAX_DIAGS)
        diags_add(d, "lines", 0, "%u more malformed fields skipped", lp.nbad - TRACEFS_MAX_DIAGS);
    if (f.nfields == 0) {
        if (d)
            diags_add(d, "format", 0, "no field could be read");
        free(f.fields);
        return -EBADMSG;
    }
    *ret = f;
    return 0;
}

void tracefs_format_clear(struct tracefs_format *f)
{
    if (!f)
        return;
    free(f->fields);
    *f = (struct tracefs_format){0};
}

const struct tracefs_field *tracefs_find_field(const struct tracefs_format *f, const char *name)
{
    for (unsigned i = 0; i < f->nfields; i++)
        if (streq(f->fields[i].name, name))
            return &f->fields[i];
    return NULL;
}

int tracefs_field_u64(const struct tracefs_field *fl, const void *raw, size_t len, uint64_t *ret)
{
    if ((size_t)fl->offset + fl->size > len)
        return -ERANGE;
    /* memcpy: records are only 4-byte aligned in a perf sample */
    const unsigned char *p = (const unsigned char *)raw + fl->offset;
    switch (fl->size) {
    case 1: {
        uint8_t v = p[0];
        *ret = fl->is_signed ? (uint64_t)(int64_t)(int8_t)v : v;
        return 0;
    }
    case 2: {
        uint16_t v;
        memcpy(&v, p, sizeof(v));
        *ret = fl->is_signed ? (uint64_t)(int64_t)(int16_t)v : v;
        return 0;
    }
    case 4: {
        uint32_t v;
        memcpy(&v, p, sizeof(v));
        *ret = fl->is_signed ? (uint64_t)(int64_t)(int32_t)v : v;
        return 0;
    }
    case 8:
        memcpy(ret, p, sizeof(*ret));
        return 0;
    default:
        return -EINVAL; /* an array or a struct: not one integer */
    }
}

int tracefs_field_str(const struct tracefs_field *fl, const void *raw, size_t len, const char **ret,
                      size_t *ret_len)
{
    const char *base = raw;
    size_t off, n;
    if (fl->dynamic) {
        uint64_t loc;
        int r = tracefs_field_u64(fl, raw, len, &loc);
        if (r < 0)
            return r;
        off = loc & 0xffff;
        n = (loc >> 16) & 0xffff;
    } else if (fl->is_array) {
        off = fl->offset;
        n = fl->size;
    } else {
        return -EINVAL;
    }
    if (off > len || n > len - off)
        return -ERANGE;
    *ret = base + off;
    *ret_len = strnlen(base + off, n);
    return 0;
}
