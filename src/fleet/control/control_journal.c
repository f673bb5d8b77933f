/* The fleet controller's journal: what it began and how it ended.
 *
 *   17 1764790000.123 begin migrate vm=web1 src=h1 dst=h2
 *   18 1764790002.611 end 17 ok vm=web1 on=h2
 *
 * A record is appended and fsynced before the action starts ("begin") and
 * after it was verified ("end"). A begin without an end is an action a
 * crash interrupted: the controller does not do it again, it looks at the
 * fleet and closes the record with what it found ("end 17 recovered ...").
 * A torn last line (no newline: the crash came during the write, before
 * the action could start) is cut off. VM names are written as words:
 * blanks, '%', '=' and bytes outside ASCII as %XX (ctl_journal_word). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/util.h"
#include "fleet/control/control.h"

struct rec {
    long seq;
    double t;
    bool begin;
    long ref;   /* end: the begin it closes */
    char *text; /* after "begin " / "end N " */
};

struct ctl_journal {
    int fd;
    bool read_only; /* a dry run's: never written, a torn tail left alone */
    char *path;
    struct rec *r;
    size_t n, cap;
    long next_seq;
};

static double now_unix(void)
{
    return (double)now_realtime_ns() / 1e9;
}

static int parse_line(char *line, struct rec *ret)
{
    char *end;
    struct rec r = {0};
    errno = 0;
    r.seq = strtol(line, &end, 10);
    /* LONG_MAX (or out of range) would make the next sequence number overflow */
    if (end == line || *end != ' ' || r.seq <= 0 || errno || r.seq == LONG_MAX)
        return -EINVAL;
    char *p = end + 1;
    r.t = strtod(p, &end);
    if (end == p || *end != ' ')
        return -EINVAL;
    p = end + 1;
    if (strncmp(p, "begin ", 6) == 0) {
        r.begin = true;
        p += 6;
    } else if (strncmp(p, "end ", 4) == 0) {
        p += 4;
        errno = 0;
        r.ref = strtol(p, &end, 10);
        if (end == p || *end != ' ' || r.ref <= 0 || errno)
            return -EINVAL;
        p = end + 1;
    } else {
        return -EINVAL;
    }
    r.text = xstrdup(p);
    *ret = r;
    return 0;
}

static void add(struct ctl_journal *j, struct rec r)
{
    if (j->n == j->cap)
        j->r = grow_array(j->r, sizeof(*j->r), j->n, &j->cap);
    j->r[j->n++] = r;
    if (r.seq >= j->next_seq)
        j->next_seq = r.seq + 1;
}

/* Read every record; cut a torn tail. */
static int load(struct ctl_journal *j, struct fleet_error *err)
{
    struct stat st;
    if (fstat(j->fd, &st) < 0)
        return -errno;
    if (st.st_size > (off_t)256 << 20) {
        fleet_error_set(err, "%s: %lld bytes, more than a journal can be (256 MiB)", j->path,
                        (long long)st.st_size);
        return -EFBIG;
    }
    size_t len = (size_t)st.st_size;
    _cleanup_free_ char *buf = xmalloc(len + 1);
    ssize_t got = pread(j->fd, buf, len, 0);
    if (got != (ssize_t)len)
        return got < 0 ? -errno : -EIO;
    buf[len] = '\0';
    size_t keep = len;
    while (keep > 0 && buf[keep - 1] != '\n')
        keep--;
    if (keep < len && !j->read_only && ftruncate(j->fd, (off_t)keep) < 0)
        return -errno;
    buf[keep] = '\0';
    int lineno = 0;
    /* every line ends in '\n' (buf[keep - 1]); one may hold a NUL byte */
    for (char *line = buf, *next; line < buf + keep; line = next) {
        next = memchr(line, '\n', (size_t)(buf + keep - line));
        *next++ = '\0';
        lineno++;
        if (strlen(line) != (size_t)(next - 1 - line)) {
            fleet_error_set(err, "%s line %d: a NUL byte; move the file away to start afresh",
                            j->path, lineno);
            return -EINVAL;
        }
        struct rec r;
        if (parse_line(line, &r) < 0) {
            fleet_error_set(err,
                            "%s line %d: not a journal record (want 'SEQ TIME begin ...' or "
                            "'SEQ TIME end REF ...'); move the file away to start afresh",
                            j->path, lineno);
            return -EINVAL;
        }
        add(j, r);
    }
    return 0;
}

int ctl_journal_open(const char *dir, bool read_only, struct ctl_journal **ret,
                     struct fleet_error *err)
{
    if (!read_only && mkdir(dir, 0700) < 0 && errno != EEXIST) {
        int e = errno;
        fleet_error_set(err, "cannot create %s: %s", dir, strerror(e));
        return -e;
    }
    struct ctl_journal *j = xcalloc(1, sizeof(*j));
    j->path = xasprintf("%s/journal", dir);
    j->next_seq = 1;
    j->read_only = read_only;
    j->fd = read_only ? open(j->path, O_RDONLY | O_CLOEXEC)
                      : open(j->path, O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    int r = j->fd < 0 ? -errno : load(j, err);
    if (r < 0) {
        if (j->fd < 0 || !err->msg[0])
            fleet_error_set(err, "cannot open %s: %s", j->path, strerror(-r));
        ctl_journal_close(j);
        return r;
    }
    *ret = j;
    return 0;
}

void ctl_journal_close(struct ctl_journal *j)
{
    if (!j)
        return;
    if (j->fd >= 0)
        close(j->fd);
    for (size_t i = 0; i < j->n; i++)
        free(j->r[i].text);
    free(j->r);
    free(j->path);
    free(j);
}

static bool closed(const struct ctl_journal *j, long seq)
{
    for (size_t i = 0; i < j->n; i++)
        if (!j->r[i].begin && j->r[i].ref == seq)
            return true;
    return false;
}

size_t ctl_journal_open_actions(const struct ctl_journal *j, char ***ret_lines)
{
    char **v = NULL;
    size_t n = 0;
    for (size_t i = 0; i < j->n; i++)
        if (j->r[i].begin && !closed(j, j->r[i].seq)) {
            v = xrealloc(v, (n + 1) * sizeof(*v));
            v[n++] = xasprintf("%ld %s", j->r[i].seq, j->r[i].text);
        }
    *ret_lines = v;
    return n;
}

static long append(struct ctl_journal *j, bool begin, long ref, const char *fmt, va_list ap)
{
    _cleanup_free_ char *text = NULL;
    if (vasprintf(&text, fmt, ap) < 0)
        abort();
    if (j->read_only)
        return -EROFS;
    long seq = j->next_seq;
    double t = now_unix();
    _cleanup_free_ char *line = begin ? xasprintf("%ld %.3f begin %s\n", seq, t, text)
                                      : xasprintf("%ld %.3f end %ld %s\n", seq, t, ref, text);
    size_t len = strlen(line);
    errno = 0;
    if (write(j->fd, line, len) != (ssize_t)len || fdatasync(j->fd) < 0)
        return errno ? -errno : -EIO;
    add(j, (struct rec){.seq = seq, .t = t, .begin = begin, .ref = ref, .text = TAKE_PTR(text)});
    return seq;
}

long ctl_journal_begin(struct ctl_journal *j, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    long r = append(j, true, 0, fmt, ap);
    va_end(ap);
    return r;
}

int ctl_journal_end(struct ctl_journal *j, long seq, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    long r = append(j, false, seq, fmt, ap);
    va_end(ap);
    return r < 0 ? (int)r : 0;
}

char *ctl_journal_word(const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    char *out = xmalloc(strlen(s) * 3 + 1), *o = out;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p <= ' ' || *p >= 0x7f || *p == '%' || *p == '=') {
            *o++ = '%';
            *o++ = hex[*p >> 4];
            *o++ = hex[*p & 15];
        } else {
            *o++ = (char)*p;
        }
    }
    *o = '\0';
    return out;
}

static int hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

int ctl_journal_unword(const char *s, char *out, size_t size)
{
    size_t n = 0;
    for (const char *p = s; *p; p++) {
        int c = (unsigned char)*p;
        if (c == '%') { /* exactly two hex digits: not sscanf's blanks, signs or 0x */
            int hi = hex_digit(p[1]), lo = hi < 0 ? -1 : hex_digit(p[2]);
            if (lo < 0)
                return -EINVAL;
            c = hi * 16 + lo;
            p += 2;
        }
        if (n + 1 >= size)
            return -ENAMETOOLONG;
        out[n++] = (char)c;
    }
    out[n] = '\0';
    return 0;
}

void ctl_journal_migrations_since(const struct ctl_journal *j, double since_unix_s,
                                  void (*fn)(void *ctx, const char *vm), void *ctx)
{
    char word[FLEET_NAME_MAX * 6], vm[FLEET_NAME_MAX * 2];
    for (size_t i = j->n; i-- > 0 && j->r[i].t >= since_unix_s;)
        if (j->r[i].begin && sscanf(j->r[i].text, "migrate vm=%287s", word) == 1 &&
            ctl_journal_unword(word, vm, sizeof(vm)) == 0)
            fn(ctx, vm);
}
