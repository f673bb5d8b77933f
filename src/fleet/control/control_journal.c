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
 * blanks, '%', '=' and bytes outside ASCII as %XX (ctl_journal_word).
 *
 * One writer at a time: the migration threads append concurrently, so a
 * number is taken, the line written and fdatasync'd under one lock, and
 * the file's lines are in the order of their numbers. A number is taken
 * for good: an append that fails (a short or failed write, a failed
 * fdatasync) cuts the file back to the end of the last good record and
 * its number is never given again, in this run nor, when any of the
 * line reached the file, after a restart. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
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

/* Every field below the lock is read and written under it. */
struct ctl_journal {
    bool read_only; /* a dry run's: never written, a torn tail left alone */
    char *path;
    struct ctl_journal_io io;
    pthread_mutex_t lock;
    int fd;
    struct rec *r;
    size_t n, cap;
    size_t *open; /* indices into r of the begins no end closes, in file order */
    size_t n_open, cap_open;
    long next_seq;  /* never given before: not even by an append that failed */
    off_t good_end; /* the file's size up to its last whole record */
    bool cut_due;   /* a failed append's bytes may be past good_end */
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

/* The open begins are few (the migrations in flight, what a crash left
 * open): a list of them keeps every add() short however long the file. */
static void add(struct ctl_journal *j, struct rec r)
{
    if (r.begin) {
        if (j->n_open == j->cap_open)
            j->open = grow_array(j->open, sizeof(*j->open), j->n_open, &j->cap_open);
        j->open[j->n_open++] = j->n;
    } else {
        for (size_t i = 0; i < j->n_open; i++)
            if (j->r[j->open[i]].seq == r.ref) {
                memmove(j->open + i, j->open + i + 1, (j->n_open - i - 1) * sizeof(*j->open));
                j->n_open--;
                break;
            }
    }
    if (j->n == j->cap)
        j->r = grow_array(j->r, sizeof(*j->r), j->n, &j->cap);
    j->r[j->n++] = r;
    if (r.seq >= j->next_seq)
        j->next_seq = r.seq + 1;
}

/* A torn tail's number, if it got that far, is not given again either. */
static void burn_torn(struct ctl_journal *j, const char *tail, size_t len)
{
    long seq = 0;
    size_t i = 0;
    while (i < len && tail[i] >= '0' && tail[i] <= '9' && seq < LONG_MAX / 10 - 1)
        seq = seq * 10 + (tail[i++] - '0');
    if (i > 0 && i < len && tail[i] == ' ' && seq >= j->next_seq)
        j->next_seq = seq + 1;
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
    j->good_end = (off_t)keep;
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
    burn_torn(j, buf + keep, len - keep);
    return 0;
}

static void fsync_parent(const char *path)
{
    _cleanup_free_ char *parent = xstrdup(path);
    char *slash = strrchr(parent, '/');
    if (!slash)
        return;
    if (slash == parent)
        slash[1] = '\0';
    else
        *slash = '\0';
    _cleanup_close_ int fd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0)
        fsync(fd);
}

int ctl_journal_mkdir(const char *dir, struct fleet_error *err)
{
    if (mkdir(dir, 0700) == 0) {
        fsync_parent(dir); /* best effort: the next start makes it again */
        return 0;
    }
    if (errno == EEXIST)
        return 0;
    int e = errno;
    fleet_error_set(err, "cannot create %s: %s", dir, strerror(e));
    return -e;
}

/* The journal for appending. A file made here has its name fsynced into
 * DIR before any record is written, or a crash could lose the file with
 * the records fdatasync said were safe. */
static int open_rw(struct ctl_journal *j, const char *dir)
{
    _cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return -errno;
    int flags = O_RDWR | O_APPEND | O_CLOEXEC;
    j->fd = openat(dfd, "journal", flags | O_CREAT | O_EXCL, 0600);
    if (j->fd >= 0)
        return fsync(dfd) < 0 ? -errno : 0;
    if (errno != EEXIST)
        return -errno;
    j->fd = openat(dfd, "journal", flags);
    return j->fd < 0 ? -errno : 0;
}

static ssize_t sys_write(int fd, const void *buf, size_t len)
{
    return write(fd, buf, len);
}

int ctl_journal_open(const char *dir, bool read_only, struct ctl_journal **ret,
                     struct fleet_error *err)
{
    if (!read_only) {
        int r = ctl_journal_mkdir(dir, err);
        if (r < 0)
            return r;
    }
    struct ctl_journal *j = xcalloc(1, sizeof(*j));
    j->path = xasprintf("%s/journal", dir);
    j->fd = -1;
    j->next_seq = 1;
    j->read_only = read_only;
    j->io = (struct ctl_journal_io){sys_write, fdatasync, ftruncate};
    pthread_mutex_init(&j->lock, NULL);
    int r;
    if (read_only) {
        j->fd = open(j->path, O_RDONLY | O_CLOEXEC);
        r = j->fd < 0 ? -errno : 0;
    } else {
        r = open_rw(j, dir);
    }
    if (r == 0)
        r = load(j, err);
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
    free(j->open);
    free(j->path);
    pthread_mutex_destroy(&j->lock);
    free(j);
}

void ctl_journal_set_io(struct ctl_journal *j, const struct ctl_journal_io *io)
{
    pthread_mutex_lock(&j->lock);
    j->io = *io;
    pthread_mutex_unlock(&j->lock);
}

size_t ctl_journal_n_open(struct ctl_journal *j)
{
    pthread_mutex_lock(&j->lock);
    size_t n = j->n_open;
    pthread_mutex_unlock(&j->lock);
    return n;
}

size_t ctl_journal_open_actions(struct ctl_journal *j, char ***ret_lines)
{
    pthread_mutex_lock(&j->lock);
    size_t n = j->n_open;
    char **v = n ? xcalloc(n, sizeof(*v)) : NULL;
    for (size_t i = 0; i < n; i++) {
        const struct rec *r = &j->r[j->open[i]];
        v[i] = xasprintf("%ld %s", r->seq, r->text);
    }
    pthread_mutex_unlock(&j->lock);
    *ret_lines = v;
    return n;
}

static int write_all(struct ctl_journal *j, const char *p, size_t len)
{
    while (len > 0) {
        ssize_t n = j->io.write(j->fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return n < 0 && errno ? -errno : -EIO;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

static int sync_file(struct ctl_journal *j)
{
    int r;
    do
        r = j->io.fdatasync(j->fd);
    while (r < 0 && errno == EINTR);
    return r < 0 ? (errno ? -errno : -EIO) : 0;
}

/* Back to the end of the last whole record, so that the next record
 * starts a line of its own. Tried again before the next append when it
 * fails. */
static int cut_back(struct ctl_journal *j)
{
    if (j->io.ftruncate(j->fd, j->good_end) < 0) {
        j->cut_due = true;
        return -errno;
    }
    j->cut_due = false;
    return 0;
}

/* Under the lock. The number is taken before anything is written and
 * never given back: a record that could not be written leaves a gap. */
static long append_locked(struct ctl_journal *j, bool begin, long ref, char *text)
{
    if (j->cut_due) {
        int r = cut_back(j);
        if (r < 0)
            return r;
    }
    if (j->next_seq == LONG_MAX)
        return -EOVERFLOW;
    long seq = j->next_seq++;
    double t = now_unix();
    _cleanup_free_ char *line = begin ? xasprintf("%ld %.3f begin %s\n", seq, t, text)
                                      : xasprintf("%ld %.3f end %ld %s\n", seq, t, ref, text);
    size_t len = strlen(line);
    int r = write_all(j, line, len);
    if (r == 0)
        r = sync_file(j);
    if (r < 0) {
        cut_back(j);
        return r;
    }
    j->good_end += (off_t)len;
    add(j, (struct rec){.seq = seq, .t = t, .begin = begin, .ref = ref, .text = text});
    return seq;
}

static long append(struct ctl_journal *j, bool begin, long ref, const char *fmt, va_list ap)
{
    char *text = NULL;
    if (vasprintf(&text, fmt, ap) < 0)
        abort();
    if (j->read_only) {
        free(text);
        return -EROFS;
    }
    pthread_mutex_lock(&j->lock);
    long r = append_locked(j, begin, ref, text);
    pthread_mutex_unlock(&j->lock);
    if (r < 0)
        free(text);
    return r;
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

void ctl_journal_migrations_since(struct ctl_journal *j, double since_unix_s,
                                  void (*fn)(void *ctx, const char *vm), void *ctx)
{
    char word[FLEET_NAME_MAX * 6], vm[FLEET_NAME_MAX * 2];
    pthread_mutex_lock(&j->lock);
    for (size_t i = j->n; i-- > 0 && j->r[i].t >= since_unix_s;)
        if (j->r[i].begin && sscanf(j->r[i].text, "migrate vm=%287s", word) == 1 &&
            ctl_journal_unword(word, vm, sizeof(vm)) == 0)
            fn(ctx, vm);
    pthread_mutex_unlock(&j->lock);
}
