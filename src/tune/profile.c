/* Tuning profiles: the INI parser (inih, with our own line reader so every
 * value keeps its file:line), includes and the list of profiles. The key
 * table and the checks of one value are in profile_keys.c. */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ini.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/parse.h"
#include "base/strbuf.h"
#include "base/util.h"
#include "tune/profile.h"
#include "tune/profile_internal.h"

/* ---- names ------------------------------------------------------------ */

bool profile_name_ok(const char *name)
{
    size_t n = name ? strlen(name) : 0;
    if (n == 0 || n > 64 || strstr(name, ".."))
        return false;
    if (!islower((unsigned char)name[0]) && !isdigit((unsigned char)name[0]))
        return false;
    for (size_t i = 1; i < n; i++) {
        unsigned char c = (unsigned char)name[i];
        if (!islower(c) && !isdigit(c) && c != '_' && c != '.' && c != '-')
            return false;
    }
    return true;
}

void profile_names_free(char **v, size_t n)
{
    if (!v)
        return;
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

/* ---- one file --------------------------------------------------------- */

struct parse {
    const char *origin;
    /* our line reader: inih numbers nothing for its handler */
    const char *pos;
    int line;          /* the line inih works on, from 1 */
    bool indented;     /* it starts with blank space */
    int key_line;      /* the last key = value line, 0 before any */
    int header_line;   /* the last [section] line, 0 before any */
    int latency_line;  /* the last [latency] line, 0 when none */
    struct profile *p; /* own values; "" is a removal */
    size_t cap;
    long pending; /* index of the value a continuation would extend, -1 */
    int pending_line;
    char *err; /* the first error (lowest line), without origin */
    int err_line;
};

static void set_err(struct parse *ps, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void set_err(struct parse *ps, int line, const char *fmt, ...)
{
    if (ps->err && ps->err_line <= line)
        return;
    free(ps->err);
    va_list ap;
    va_start(ap, fmt);
    if (vasprintf(&ps->err, fmt, ap) < 0)
        abort();
    va_end(ap);
    ps->err_line = line;
}

/* Check the value that just stopped growing. */
static void finalize(struct parse *ps)
{
    if (ps->pending < 0)
        return;
    const struct profile_value *v = &ps->p->v[ps->pending];
    const struct profile_key *k = profile_key_find(v->section, v->key);
    char *why = NULL;
    if (*v->value && profile_value_check(k, v->value, &why) < 0) {
        set_err(ps, ps->pending_line, "%s", why);
        free(why);
    } else if (k->kind == PROFILE_KEY_CPUS) {
        /* "0-3, 8" is stored as the kernel writes it, "0-3,8" */
        char *out = v->value;
        for (const char *c = v->value; *c; c++)
            if (!isspace((unsigned char)*c))
                *out++ = *c;
        *out = '\0';
    }
    ps->pending = -1;
}

static void check_section(struct parse *ps, const char *name)
{
    for (size_t i = 0; profile_sections[i]; i++)
        if (streq(name, profile_sections[i]))
            return;
    const char *near = profile_closest(name, profile_sections);
    if (near) {
        set_err(ps, ps->line, "unknown section [%s]: did you mean [%s]?", name, near);
        return;
    }
    _cleanup_free_ char *want = profile_join_words(profile_sections, " or ");
    set_err(ps, ps->line, "unknown section [%s] (want %s)", name, want);
}

/* What inih will do with this line, as far as we need to know. */
static void scan_line(struct parse *ps, const char *line)
{
    const char *s = line;
    if (ps->line == 1 && (unsigned char)s[0] == 0xEF && (unsigned char)s[1] == 0xBB &&
        (unsigned char)s[2] == 0xBF)
        s += 3;
    const char *t = s;
    while (isspace((unsigned char)*t))
        t++;
    ps->indented = t > s && *t;
    bool continuation = ps->indented && ps->key_line > ps->header_line;
    if (ps->err || continuation || *t != '[')
        return;
    const char *close = strchr(t, ']');
    if (!close)
        return; /* inih reports the line */
    finalize(ps);
    ps->header_line = ps->line;
    _cleanup_free_ char *name = xmalloc((size_t)(close - t));
    memcpy(name, t + 1, (size_t)(close - t - 1));
    name[close - t - 1] = '\0';
    if (streq(name, "latency"))
        ps->latency_line = ps->line;
    check_section(ps, name);
}

static char *reader(char *str, int num, void *stream)
{
    struct parse *ps = stream;
    if (!*ps->pos)
        return NULL;
    const char *nl = strchr(ps->pos, '\n');
    size_t n = nl ? (size_t)(nl - ps->pos) : strlen(ps->pos);
    ps->line++;
    if (n > (size_t)num - 1) {
        set_err(ps, ps->line, "line is longer than %d characters", num - 1);
        return NULL;
    }
    memcpy(str, ps->pos, n);
    str[n] = '\0';
    ps->pos += n + (nl != NULL);
    scan_line(ps, str);
    return str;
}

static void unknown_key(struct parse *ps, const char *section, const char *key)
{
    _cleanup_free_ const char **names = xcalloc(profile_nkeys + 1, sizeof(*names));
    size_t n = 0;
    const char *elsewhere = NULL;
    for (size_t i = 0; i < profile_nkeys; i++) {
        if (streq(profile_keys[i].section, section))
            names[n++] = profile_keys[i].key;
        else if (streq(profile_keys[i].key, key) && !elsewhere)
            elsewhere = profile_keys[i].section;
    }
    names[n] = NULL;
    const char *near = profile_closest(key, names);
    if (!*key)
        set_err(ps, ps->line, "a line with no key before '='");
    else if (elsewhere)
        set_err(ps, ps->line, "'%s' belongs in [%s], not [%s]", key, elsewhere, section);
    else if (near)
        set_err(ps, ps->line, "unknown key '%s' in [%s]: did you mean '%s'?", key, section, near);
    else {
        _cleanup_free_ char *want = profile_join_words(names, " or ");
        set_err(ps, ps->line, "unknown key '%s' in [%s] (want %s)", key, section, want);
    }
}

static void add_value(struct parse *ps, const char *section, const char *key, const char *value)
{
    if (!*section) {
        const char *home = NULL;
        for (size_t i = 0; i < profile_nkeys && !home; i++)
            if (streq(profile_keys[i].key, key))
                home = profile_keys[i].section;
        if (home)
            set_err(ps, ps->line, "'%s' is outside a section (put it under [%s])", key, home);
        else
            set_err(ps, ps->line, "'%s' is outside a section", key);
        return;
    }
    if (!profile_key_find(section, key)) {
        unknown_key(ps, section, key);
        return;
    }
    struct profile *p = ps->p;
    size_t i;
    for (i = 0; i < p->n; i++)
        if (streq(p->v[i].section, section) && streq(p->v[i].key, key))
            break;
    if (i == p->n) {
        p->v = grow_array(p->v, sizeof(*p->v), p->n, &ps->cap);
        p->v[p->n++] = (struct profile_value){xstrdup(section), xstrdup(key), NULL, NULL};
    }
    free(p->v[i].value);
    free(p->v[i].origin);
    p->v[i].value = xstrdup(value);
    p->v[i].origin = xasprintf("%s:%d", ps->origin, ps->line);
    ps->pending = (long)i;
    ps->pending_line = ps->line;
}

/* An indented line after a key: inih hands it over as more of that key. */
static void continue_value(struct parse *ps, const char *key, const char *line)
{
    if (ps->pending < 0)
        return; /* the key it continues was refused */
    /* inih (r55) leaves inline comments on continuation lines */
    _cleanup_free_ char *more = xstrdup(line);
    for (char *c = more; *c; c++) {
        if (c > more && *c == ';' && isspace((unsigned char)c[-1])) {
            *c = '\0';
            strip_trailing(more);
            break;
        }
    }
    struct profile_value *v = &ps->p->v[ps->pending];
    const struct profile_key *k = profile_key_find(v->section, v->key);
    if (more[0] == '[' || strchr(more, '=')) {
        set_err(ps, ps->line,
                "indented line is read as more of '%s' (line %d): remove the indentation", key,
                ps->pending_line);
        return;
    }
    if (!k->list && k->kind != PROFILE_KEY_TEXT) {
        set_err(ps, ps->line,
                "'%s' takes one value, and this indented line would continue it (line %d): "
                "remove the indentation or join the lines",
                key, ps->pending_line);
        return;
    }
    /* "a," + "b" and "a" + "b" both give "a, b" */
    size_t n = strlen(v->value);
    const char *sep = !k->list ? " " : n && v->value[n - 1] == ',' ? " " : ", ";
    char *joined = n ? xasprintf("%s%s%s", v->value, sep, more) : xstrdup(more);
    free(v->value);
    v->value = joined;
}

static int on_entry(void *user, const char *section, const char *key, const char *value)
{
    struct parse *ps = user;
    if (ps->err)
        return 1;
    if (ps->indented && ps->key_line > ps->header_line) {
        continue_value(ps, key, value);
        return 1;
    }
    finalize(ps);
    ps->key_line = ps->line;
    if (!ps->err)
        add_value(ps, section, key, value);
    return 1; /* errors are ours: inih's own are syntax only */
}

/* Describe the line inih refused. */
static char *syntax_error(const char *text, int line)
{
    const char *s = text;
    for (int i = 1; i < line && s; i++) {
        s = strchr(s, '\n');
        if (s)
            s++;
    }
    if (!s)
        return xstrdup("syntax error");
    size_t n = strcspn(s, "\n");
    _cleanup_free_ char *t = profile_trimmed(s, n);
    if (t[0] == '[')
        return xstrdup("section header without a closing ']'");
    if (strlen(t) > 40)
        strcpy(t + 37, "...");
    return xasprintf("'%s' is not 'key = value', a [section] or a comment", t);
}

struct file {
    struct profile *p; /* own values, [profile] ones taken out */
    char **inc;
    size_t ninc;
    char *inc_origin; /* FILE:LINE of the include line */
    int latency_line;
};

static void file_free(struct file *f)
{
    profile_free(f->p);
    profile_names_free(f->inc, f->ninc);
    free(f->inc_origin);
    *f = (struct file){0};
}

/* Move [profile] description and include out of the values. */
static void take_profile_keys(struct file *f)
{
    struct profile *p = f->p;
    size_t out = 0;
    for (size_t i = 0; i < p->n; i++) {
        struct profile_value *v = &p->v[i];
        if (!streq(v->section, "profile")) {
            p->v[out++] = *v;
            continue;
        }
        if (streq(v->key, "description")) {
            free(p->description);
            p->description = *v->value ? TAKE_PTR(v->value) : NULL;
        } else if (*v->value) {
            /* finalize() checked it: the split cannot fail */
            if (profile_split_list(v->value, &f->inc, &f->ninc) < 0)
                abort();
            f->inc_origin = TAKE_PTR(v->origin);
        }
        free(v->section);
        free(v->key);
        free(v->value);
        free(v->origin);
    }
    p->n = out;
}

static int parse_file(const char *text, const char *origin, struct file *ret, char **ret_err)
{
    struct parse ps = {.origin = origin, .pos = text, .pending = -1};
    ps.p = xcalloc(1, sizeof(*ps.p));
    int r = ini_parse_stream(reader, &ps, on_entry, &ps);
    finalize(&ps);
    if (r > 0 && (!ps.err || r < ps.err_line)) {
        free(ps.err);
        ps.err = syntax_error(text, r);
        ps.err_line = r;
    } else if (r < 0 && !ps.err) {
        ps.err = xstrdup("out of memory");
    }
    if (ps.err) {
        *ret_err = xasprintf("%s:%d: %s", origin, ps.err_line, ps.err);
        free(ps.err);
        profile_free(ps.p);
        return -EINVAL;
    }
    ps.p->name = xstrdup(origin);
    ps.p->origin = xstrdup(origin);
    struct file f = {.p = ps.p, .latency_line = ps.latency_line};
    take_profile_keys(&f);
    *ret = f;
    return 0;
}

int profile_parse_text(const char *text, const char *origin, struct profile **ret,
                       char ***ret_includes, size_t *ret_nincludes, char **ret_err)
{
    struct file f;
    int r = parse_file(text, origin, &f, ret_err);
    if (r < 0)
        return r;
    if (ret_includes) {
        *ret_includes = TAKE_PTR(f.inc);
        *ret_nincludes = f.ninc;
        f.ninc = 0;
    }
    *ret = TAKE_PTR(f.p);
    file_free(&f);
    return 0;
}

/* ---- files and built-ins ---------------------------------------------- */

/* 0 with the text, -ENOENT when there is no such file (ret_err unset),
 * another -errno with ret_err. */
static int read_profile_file(const char *path, char **ret, char **ret_err)
{
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0) {
        int e = errno;
        if (e == ENOENT || e == ENOTDIR)
            return -ENOENT;
        *ret_err = xasprintf("cannot read %s: %s", path, strerror(e));
        return -e;
    }
    struct stat st;
    if (fstat(fd, &st) < 0) {
        int e = errno;
        *ret_err = xasprintf("cannot read %s: %s", path, strerror(e));
        return -e;
    }
    if (!S_ISREG(st.st_mode)) {
        *ret_err = xasprintf("%s is not a regular file", path);
        return -EINVAL;
    }
    /* read up to one byte past the limit: the file may grow under us */
    size_t cap = st.st_size < PROFILE_MAX_BYTES ? (size_t)st.st_size + 2 : PROFILE_MAX_BYTES + 2;
    _cleanup_free_ char *buf = xmalloc(cap);
    size_t n = 0;
    while (n <= PROFILE_MAX_BYTES) {
        if (n + 1 >= cap) {
            cap = cap * 2 < PROFILE_MAX_BYTES + 2 ? cap * 2 : PROFILE_MAX_BYTES + 2;
            buf = xrealloc(buf, cap);
        }
        ssize_t k = read(fd, buf + n, cap - 1 - n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0) {
            int e = errno;
            *ret_err = xasprintf("cannot read %s: %s", path, strerror(e));
            return -e;
        }
        if (k == 0)
            break;
        n += (size_t)k;
    }
    if (n > PROFILE_MAX_BYTES) {
        *ret_err = xasprintf("%s is larger than 1 MiB: not a profile", path);
        return -EFBIG;
    }
    const char *nul = memchr(buf, '\0', n);
    if (nul) {
        *ret_err = xasprintf("%s has a NUL byte at offset %zu: not a text file", path,
                             (size_t)(nul - buf));
        return -EINVAL;
    }
    buf[n] = '\0';
    *ret = TAKE_PTR(buf);
    return 0;
}

static char *user_path(const char *confdir, const char *name)
{
    return xasprintf("%s/profiles.d/%s.conf", confdir, name);
}

/* ---- resolution ------------------------------------------------------- */

struct node {
    const char *name; /* borrowed from the file that includes it */
    bool builtin;
};

struct resolve {
    const char *confdir;
    struct node stack[PROFILE_MAX_DEPTH + 2];
    size_t depth;
    struct profile *acc;
    size_t cap;
    char *latency_origin; /* the last [latency] header applied */
    char *err;
    bool missing; /* the named profile itself does not exist */
};

static void chain(const struct resolve *rs, size_t from, const struct node *last, struct strbuf *b)
{
    for (size_t i = from; i <= rs->depth; i++) {
        const struct node *n = i < rs->depth ? &rs->stack[i] : last;
        bool shadowed = false;
        for (size_t j = 0; j < rs->depth && n->builtin; j++)
            shadowed |= !rs->stack[j].builtin && streq(rs->stack[j].name, n->name);
        strbuf_appendf(b, "%s%s%s", i > from ? " -> " : "", n->name, shadowed ? " (built-in)" : "");
    }
}

static void acc_apply(struct resolve *rs, const struct profile_value *v)
{
    struct profile *p = rs->acc;
    size_t i;
    for (i = 0; i < p->n; i++)
        if (streq(p->v[i].section, v->section) && streq(p->v[i].key, v->key))
            break;
    if (!*v->value) { /* removal */
        if (i == p->n)
            return;
        struct profile_value *gone = &p->v[i];
        free(gone->section);
        free(gone->key);
        free(gone->value);
        free(gone->origin);
        memmove(gone, gone + 1, (p->n - i - 1) * sizeof(*gone));
        p->n--;
        return;
    }
    if (i == p->n) {
        p->v = grow_array(p->v, sizeof(*p->v), p->n, &rs->cap);
        p->v[p->n++] = (struct profile_value){xstrdup(v->section), xstrdup(v->key), NULL, NULL};
    }
    free(p->v[i].value);
    free(p->v[i].origin);
    p->v[i].value = xstrdup(v->value);
    p->v[i].origin = xstrdup(v->origin);
}

/* Find NAME's text: the user file unless BUILTIN_ONLY, else the built-in. */
static int find_source(struct resolve *rs, const char *name, bool builtin_only, const char *from,
                       char **ret_text, char **ret_origin, bool *ret_builtin)
{
    _cleanup_free_ char *path = user_path(rs->confdir, name);
    if (!builtin_only) {
        char *err = NULL;
        int r = read_profile_file(path, ret_text, &err);
        if (r == 0) {
            *ret_origin = TAKE_PTR(path);
            *ret_builtin = false;
            return 0;
        }
        if (r != -ENOENT) {
            rs->err = from ? xasprintf("%s: %s", from, err) : TAKE_PTR(err);
            free(err);
            return r;
        }
    }
    const char *text = profile_builtin_text(name);
    if (text) {
        *ret_text = xstrdup(text);
        *ret_origin = xasprintf("built-in %s", name);
        *ret_builtin = true;
        return 0;
    }
    if (builtin_only)
        rs->err = xasprintf("%s: there is no built-in profile '%s' (an include of a profile's "
                            "own name means the built-in it shadows)",
                            from, name);
    else
        rs->err = xasprintf("%s%sno profile '%s': not built in, and no %s", from ? from : "",
                            from ? ": " : "", name, path);
    rs->missing = !from;
    return -ENOENT;
}

static int resolve_one(struct resolve *rs, const char *name, bool builtin_only, const char *from);

static int resolve_includes(struct resolve *rs, const struct file *f, const char *name,
                            bool builtin)
{
    for (size_t i = 0; i < f->ninc; i++) {
        /* a built-in means built-ins; a user file's own name means the built-in */
        bool child_builtin = builtin || streq(f->inc[i], name);
        int r = resolve_one(rs, f->inc[i], child_builtin, f->inc_origin);
        if (r < 0)
            return r;
    }
    return 0;
}

static int resolve_one(struct resolve *rs, const char *name, bool builtin_only, const char *from)
{
    _cleanup_free_ char *text = NULL, *origin = NULL;
    bool builtin;
    int r = find_source(rs, name, builtin_only, from, &text, &origin, &builtin);
    if (r < 0)
        return r;
    struct node me = {name, builtin};
    for (size_t i = 0; i < rs->depth; i++) {
        if (streq(rs->stack[i].name, name) && rs->stack[i].builtin == builtin) {
            struct strbuf b = {0};
            chain(rs, i, &me, &b);
            rs->err = xasprintf("%s: include cycle %s", from, strbuf_str(&b));
            strbuf_free(&b);
            return -ELOOP;
        }
    }
    if (rs->depth > PROFILE_MAX_DEPTH) {
        struct strbuf b = {0};
        chain(rs, 0, &me, &b);
        rs->err = xasprintf("%s: includes nest deeper than %d levels (%s)", from, PROFILE_MAX_DEPTH,
                            strbuf_str(&b));
        strbuf_free(&b);
        return -ELOOP;
    }
    struct file f;
    r = parse_file(text, origin, &f, &rs->err);
    if (r < 0)
        return r;
    rs->stack[rs->depth++] = me;
    r = resolve_includes(rs, &f, name, builtin);
    rs->depth--;
    if (r >= 0) {
        for (size_t i = 0; i < f.p->n; i++)
            acc_apply(rs, &f.p->v[i]);
        if (f.latency_line) {
            free(rs->latency_origin);
            rs->latency_origin = xasprintf("%s:%d", origin, f.latency_line);
        }
        if (rs->depth == 0) {
            rs->acc->origin = TAKE_PTR(origin);
            rs->acc->description = TAKE_PTR(f.p->description);
        }
    }
    file_free(&f);
    return r;
}

/* min_freq above max_freq, where the two can be compared without the machine. */
static int check_freq_order(const struct profile *p, char **ret_err)
{
    const struct profile_value *lo = profile_get(p, "cpufreq", "min_freq");
    const struct profile_value *hi = profile_get(p, "cpufreq", "max_freq");
    struct profile_freq a, b;
    if (!lo || !hi || profile_parse_freq(lo->value, &a) < 0 ||
        profile_parse_freq(hi->value, &b) < 0)
        return 0;
    bool bad = (a.kind == PROFILE_FREQ_MAX && b.kind != PROFILE_FREQ_MAX) ||
               (b.kind == PROFILE_FREQ_MIN && a.kind != PROFILE_FREQ_MIN) ||
               (a.kind == b.kind && a.value > b.value);
    if (!bad)
        return 0;
    *ret_err = xasprintf("%s: min_freq %s is above max_freq %s (set at %s)", lo->origin, lo->value,
                         hi->value, hi->origin);
    return -EINVAL;
}

static int check_latency_section(const struct resolve *rs, char **ret_err)
{
    if (!profile_has_section(rs->acc, "latency"))
        return 0;
    if (!profile_get(rs->acc, "latency", "workload")) {
        *ret_err = xasprintf("%s: [latency] needs workload = cgroup:PATH, process:NAME or port:N",
                             rs->latency_origin ? rs->latency_origin : rs->acc->origin);
        return -EINVAL;
    }
    if (!profile_get(rs->acc, "latency", "latency_us")) {
        *ret_err = xasprintf("%s: [latency] needs latency_us = the limit in µs to hold while "
                             "the workload is busy",
                             rs->latency_origin ? rs->latency_origin : rs->acc->origin);
        return -EINVAL;
    }
    return 0;
}

/* "did you mean 'latency'?" for a name that is not there. */
static char *name_hint(const char *name, const char *confdir)
{
    size_t n = strlen(name);
    if (n > 5 && streq(name + n - 5, ".conf")) {
        _cleanup_free_ char *stem = strndup(name, n - 5);
        if (stem && profile_name_ok(stem))
            return xasprintf(" (did you mean '%s'?)", stem);
    }
    char **names;
    size_t nn;
    if (profile_list(confdir, &names, &nn) < 0)
        return xstrdup("");
    char *hint = NULL;
    names = xrealloc(names, (nn + 1) * sizeof(*names));
    names[nn] = NULL;
    const char *near = profile_closest(name, (const char *const *)names);
    hint = near ? xasprintf(" (did you mean '%s'?)", near) : xstrdup("");
    profile_names_free(names, nn);
    return hint;
}

int profile_load(const char *name, const char *confdir, struct profile **ret, char **ret_err)
{
    if (!confdir)
        confdir = PROFILE_CONFDIR_DEFAULT;
    if (!profile_name_ok(name)) {
        _cleanup_free_ char *hint = name_hint(name ? name : "", confdir);
        *ret_err = xasprintf("'%s' is not a profile name (want a-z, 0-9, '_', '.', '-', at most "
                             "64, no '/' or '..')%s",
                             name ? name : "", hint);
        return -EINVAL;
    }
    struct resolve rs = {.confdir = confdir};
    rs.acc = xcalloc(1, sizeof(*rs.acc));
    rs.acc->name = xstrdup(name);
    int r = resolve_one(&rs, name, false, NULL);
    if (r == -ENOENT && rs.missing) {
        _cleanup_free_ char *hint = name_hint(name, confdir);
        char *e = xasprintf("%s%s", rs.err, hint);
        free(rs.err);
        rs.err = e;
    }
    if (r >= 0)
        r = check_latency_section(&rs, &rs.err);
    if (r >= 0)
        r = check_freq_order(rs.acc, &rs.err);
    free(rs.latency_origin);
    if (r < 0) {
        profile_free(rs.acc);
        *ret_err = rs.err;
        return r;
    }
    *ret = rs.acc;
    return 0;
}

/* ---- access ----------------------------------------------------------- */

void profile_free(struct profile *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->n; i++) {
        free(p->v[i].section);
        free(p->v[i].key);
        free(p->v[i].value);
        free(p->v[i].origin);
    }
    free(p->v);
    free(p->name);
    free(p->description);
    free(p->origin);
    free(p);
}

const struct profile_value *profile_get(const struct profile *p, const char *section,
                                        const char *key)
{
    for (size_t i = 0; p && i < p->n; i++)
        if (streq(p->v[i].section, section) && streq(p->v[i].key, key))
            return &p->v[i];
    return NULL;
}

bool profile_has_section(const struct profile *p, const char *section)
{
    for (size_t i = 0; p && i < p->n; i++)
        if (streq(p->v[i].section, section))
            return true;
    return false;
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int profile_list(const char *confdir, char ***ret, size_t *ret_n)
{
    char **v = NULL;
    size_t n = 0, cap = 0;
    for (size_t i = 0; profile_builtin_names[i]; i++) {
        v = grow_array(v, sizeof(*v), n, &cap);
        v[n++] = xstrdup(profile_builtin_names[i]);
    }
    _cleanup_free_ char *dir =
        xasprintf("%s/profiles.d", confdir ? confdir : PROFILE_CONFDIR_DEFAULT);
    _cleanup_closedir_ DIR *d = opendir(dir);
    if (!d && errno != ENOENT && errno != ENOTDIR) {
        int e = errno;
        profile_names_free(v, n);
        return -e;
    }
    for (struct dirent *de; d && (de = readdir(d));) {
        size_t len = strlen(de->d_name);
        if (de->d_type == DT_DIR || len <= 5 || !streq(de->d_name + len - 5, ".conf"))
            continue;
        char *stem = strndup(de->d_name, len - 5);
        if (!stem || !profile_name_ok(stem)) {
            free(stem);
            continue;
        }
        v = grow_array(v, sizeof(*v), n, &cap);
        v[n++] = stem;
    }
    qsort(v, n, sizeof(*v), cmp_names);
    size_t out = 0;
    for (size_t i = 0; i < n; i++) {
        if (out && streq(v[out - 1], v[i]))
            free(v[i]);
        else
            v[out++] = v[i];
    }
    *ret = v;
    *ret_n = out;
    return 0;
}
