/* The undo journal (journal.h): records, checks, lock, restore.
 *
 * Every change is a W record appended and fdatasync()ed before the value
 * is written; a rollback appends a U record; a restore writes the old
 * values back newest first and replaces the file (new file, fsync,
 * rename, fsync of the directory) by what remains. At no instant can a
 * SIGKILL leave a value changed without a record that puts it back. */
#include "journal.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/parse.h"
#include "base/strbuf.h"
#include "base/util.h"

#define JOURNAL_HEADER     "watt-journal 1"
#define JOURNAL_MAX_SIZE   (64u << 20) /* bytes; a journal is a few KiB */
#define JOURNAL_CRC_SUFFIX 13          /* " crc=" and 8 hex digits */

/* A change of the current transaction, for journal_rollback(). */
struct journal_change {
    struct journal_entry e;
    bool applied; /* host_write() succeeded: roll it back */
};

struct journal {
    struct host *h;
    char *path;      /* relative to the root */
    char *tmp_path;  /* "<path>.tmp": the rewrite before its rename */
    char *display;   /* "/var/lib/watt/journal" */
    char *owner;     /* tags this handle's records */
    int fd;          /* the journal, O_RDWR | O_APPEND */
    int lock_fd;     /* "<path>.lock", flock()ed */
    uint64_t size;   /* bytes in the file: where a failed append is cut back to */
    uint64_t seq;    /* the last record's number */
    uint64_t tx;     /* the last transaction's number */
    uint64_t cur_tx; /* the open transaction; 0 when none */
    struct journal_change *cur;
    size_t ncur, capcur;
    size_t live;      /* W records in the file not rolled back */
    size_t nproblems; /* corrupt lines found at open: keep them for restore */
    bool broken;      /* a failed append could not be cut back */
};

/* ---- crash points ---------------------------------------------------- */

static struct {
    bool init;
    uint64_t at, count;
    const char *count_file;
} crash;

/* $WATT_TUNE_CRASH_COUNT_FILE gets the number of points this process
 * passed, so the kill test knows how many there are to enumerate. */
static void crash_write_count(void)
{
    int fd = open(crash.count_file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return;
    dprintf(fd, "%llu\n", (unsigned long long)crash.count); /* a missing count fails the test */
    close(fd);
}

void journal_crash_point(const char *what)
{
    (void)what; /* named for readers and debuggers: "after fdatasync" */
    if (!crash.init) {
        crash.init = true;
        const char *at = getenv("WATT_TUNE_CRASH_AT");
        if (at && *at && parse_u64(at, &crash.at) < 0)
            crash.at = 0;
        crash.count_file = getenv("WATT_TUNE_CRASH_COUNT_FILE");
        if (crash.count_file && *crash.count_file)
            atexit(crash_write_count);
    }
    crash.count++;
    if (crash.at && crash.count == crash.at)
        raise(SIGKILL);
}

/* ---- pure helpers ---------------------------------------------------- */

uint32_t journal_crc32(const void *buf, size_t len)
{
    static uint32_t table[256];
    if (!table[1])
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t c = i;
            for (int k = 0; k < 8; k++)
                c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1;
            table[i] = c;
        }
    const unsigned char *p = buf;
    uint32_t crc = 0xffffffffu;
    for (size_t i = 0; i < len; i++)
        crc = table[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
    return crc ^ 0xffffffffu;
}

static bool plain_byte(unsigned char c)
{
    return c >= 0x21 && c <= 0x7e && c != '%';
}

char *journal_escape(const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t len = strlen(s);
    char *out = xmalloc(3 * len + 1), *o = out;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (plain_byte(*p)) {
            *o++ = (char)*p;
        } else {
            *o++ = '%';
            *o++ = hex[*p >> 4];
            *o++ = hex[*p & 15];
        }
    }
    *o = '\0';
    return out;
}

int journal_unescape(const char *s, size_t len, char **ret)
{
    _cleanup_free_ char *out = xmalloc(len + 1);
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '%') {
            int hi = i + 2 < len ? hex_digit_value(s[i + 1]) : -1;
            int lo = hi >= 0 ? hex_digit_value(s[i + 2]) : -1;
            if (lo < 0 || (hi | lo) == 0) /* %00 cannot be in a C string */
                return -EINVAL;
            out[o++] = (char)(hi << 4 | lo);
            i += 2;
        } else if (plain_byte(c)) {
            out[o++] = (char)c;
        } else {
            return -EINVAL;
        }
    }
    out[o] = '\0';
    *ret = TAKE_PTR(out);
    return 0;
}

void journal_entry_clear(struct journal_entry *e)
{
    if (!e)
        return;
    free(e->owner);
    free(e->path);
    free(e->old_value);
    free(e->new_value);
    *e = (struct journal_entry){0};
}

static const char *dir_word(enum host_dir d)
{
    return d == HOST_SYS ? "sys" : d == HOST_PROC ? "proc" : d == HOST_DEV ? "dev" : NULL;
}

/* A path a record may name: relative, no "..", no empty component, so a
 * journal can never point a restore outside sys/, proc/ or dev/. */
static bool path_ok(const char *p)
{
    if (!*p || *p == '/')
        return false;
    for (const char *c = p; *c;) {
        size_t n = strcspn(c, "/");
        if (n == 0 || (n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.'))
            return false;
        c += n;
        if (*c == '/')
            c++;
        if (!*c && c[-1] == '/')
            return false;
    }
    return true;
}

/* The line for a record, with its checksum and newline. */
static char *format_record(const struct journal_entry *e)
{
    struct strbuf b = {0};
    if (e->path) {
        _cleanup_free_ char *owner = journal_escape(e->owner);
        _cleanup_free_ char *path = journal_escape(e->path);
        _cleanup_free_ char *old = journal_escape(e->old_value);
        _cleanup_free_ char *new = journal_escape(e->new_value);
        strbuf_appendf(&b, "W seq=%llu tx=%llu t=%llu pid=%d owner=%s dir=%s path=%s old=%s new=%s",
                       (unsigned long long)e->seq, (unsigned long long)e->tx,
                       (unsigned long long)e->time_ns, e->pid, owner, dir_word(e->dir), path, old,
                       new);
    } else {
        strbuf_appendf(&b, "U seq=%llu tx=%llu", (unsigned long long)e->seq,
                       (unsigned long long)e->tx);
    }
    strbuf_appendf(&b, " crc=%08x\n", journal_crc32(strbuf_str(&b), b.len));
    return strbuf_steal(&b);
}

/* ---- parsing ---------------------------------------------------------- */

static int parse_num(const char *s, size_t len, uint64_t *ret)
{
    if (len == 0 || len > 20)
        return -EINVAL;
    char buf[24];
    for (size_t i = 0; i < len; i++)
        if (s[i] < '0' || s[i] > '9')
            return -EINVAL;
    memcpy(buf, s, len);
    buf[len] = '\0';
    return parse_u64(buf, ret);
}

/* Refuse a line, saying why. */
static int refuse(const char **ret_why, const char *why)
{
    *ret_why = why;
    return -EBADMSG;
}

enum field { F_SEQ, F_TX, F_T, F_PID, F_OWNER, F_DIR, F_PATH, F_OLD, F_NEW, _F_MAX };
static const char *const field_names[_F_MAX] = {"seq", "tx",   "t",   "pid", "owner",
                                                "dir", "path", "old", "new"};

/* Split "k=v k=v ..." into fields[]; every key known and seen once. */
static int split_fields(const char *s, size_t len, const char *val[_F_MAX], size_t vlen[_F_MAX],
                        const char **ret_why)
{
    for (size_t i = 0; i < len;) {
        size_t tl = 0;
        while (i + tl < len && s[i + tl] != ' ')
            tl++;
        const char *tok = s + i, *eq = memchr(tok, '=', tl);
        int f = -1;
        for (int k = 0; eq && k < _F_MAX; k++)
            if (strlen(field_names[k]) == (size_t)(eq - tok) &&
                !memcmp(tok, field_names[k], (size_t)(eq - tok)))
                f = k;
        if (f < 0 || val[f])
            return refuse(ret_why, f < 0 ? "unknown field" : "repeated field");
        val[f] = eq + 1;
        vlen[f] = tl - (size_t)(eq + 1 - tok);
        i += tl + 1;
        if (i == len) /* a trailing space: an empty token */
            return refuse(ret_why, "unknown field");
    }
    return 0;
}

static int parse_w_fields(const char *val[_F_MAX], const size_t vlen[_F_MAX],
                          struct journal_entry *e, const char **ret_why)
{
    uint64_t pid;
    for (int k = 0; k < _F_MAX; k++)
        if (!val[k])
            return refuse(ret_why, "missing field");
    if (parse_num(val[F_T], vlen[F_T], &e->time_ns) < 0 ||
        parse_num(val[F_PID], vlen[F_PID], &pid) < 0 || pid > INT32_MAX)
        return refuse(ret_why, "bad number");
    e->pid = (int)pid;
    static const enum host_dir dirs[] = {HOST_SYS, HOST_PROC, HOST_DEV};
    bool dir_found = false;
    for (size_t i = 0; i < ARRAY_SIZE(dirs); i++)
        if (strlen(dir_word(dirs[i])) == vlen[F_DIR] &&
            !memcmp(val[F_DIR], dir_word(dirs[i]), vlen[F_DIR])) {
            e->dir = dirs[i];
            dir_found = true;
        }
    if (!dir_found)
        return refuse(ret_why, "bad directory");
    if (journal_unescape(val[F_OWNER], vlen[F_OWNER], &e->owner) < 0 ||
        journal_unescape(val[F_PATH], vlen[F_PATH], &e->path) < 0 ||
        journal_unescape(val[F_OLD], vlen[F_OLD], &e->old_value) < 0 ||
        journal_unescape(val[F_NEW], vlen[F_NEW], &e->new_value) < 0)
        return refuse(ret_why, "bad escape");
    if (!path_ok(e->path))
        return refuse(ret_why, "bad path");
    return 0;
}

/* The checksum: the line ends in " crc=" and 8 lowercase hex digits, the
 * CRC-32 of everything before the space. */
static int check_crc(const char *line, size_t len, const char **ret_why)
{
    if (len < JOURNAL_CRC_SUFFIX + 1 || memcmp(line + len - JOURNAL_CRC_SUFFIX, " crc=", 5) != 0)
        return refuse(ret_why, "no checksum");
    uint32_t want = 0;
    for (size_t i = len - 8; i < len; i++) {
        int v = hex_digit_value(line[i]);
        if (v < 0 || (line[i] >= 'A' && line[i] <= 'F'))
            return refuse(ret_why, "no checksum");
        want = want << 4 | (uint32_t)v;
    }
    if (journal_crc32(line, len - JOURNAL_CRC_SUFFIX) != want)
        return refuse(ret_why, "checksum mismatch");
    return 0;
}

int journal_parse_line(const char *line, size_t len, struct journal_entry *ret,
                       const char **ret_why)
{
    const char *why = "not a record";
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)line[i] < 0x20 || (unsigned char)line[i] > 0x7e)
            goto bad;
    if (check_crc(line, len, &why) < 0)
        goto bad;
    len -= JOURNAL_CRC_SUFFIX;
    why = "not a record";
    if (len < 3 || (line[0] != 'W' && line[0] != 'U') || line[1] != ' ')
        goto bad;
    const char *val[_F_MAX] = {0};
    size_t vlen[_F_MAX] = {0};
    if (split_fields(line + 2, len - 2, val, vlen, &why) < 0)
        goto bad;
    struct journal_entry e = {0};
    why = "missing field";
    if (!val[F_SEQ] || !val[F_TX])
        goto bad;
    why = "bad number";
    if (parse_num(val[F_SEQ], vlen[F_SEQ], &e.seq) < 0 ||
        parse_num(val[F_TX], vlen[F_TX], &e.tx) < 0)
        goto bad;
    if (line[0] == 'U') {
        why = "unknown field";
        for (int k = F_T; k < _F_MAX; k++)
            if (val[k])
                goto bad;
    } else if (parse_w_fields(val, vlen, &e, &why) < 0) {
        journal_entry_clear(&e);
        goto bad;
    }
    *ret = e;
    return 0;
bad:
    if (ret_why)
        *ret_why = why;
    return -EBADMSG;
}

/* ---- reading a whole journal ----------------------------------------- */

void journal_log_free(struct journal_log *l)
{
    if (!l)
        return;
    for (size_t i = 0; i < l->n; i++)
        journal_entry_clear(&l->v[i]);
    free(l->v);
    for (size_t i = 0; i < l->nproblems; i++)
        free(l->problems[i]);
    free(l->problems);
    *l = (struct journal_log){0};
}

static void log_problem(struct journal_log *l, size_t *cap, unsigned line, const char *why)
{
    l->problems = grow_array(l->problems, sizeof(*l->problems), l->nproblems, cap);
    l->problems[l->nproblems++] = xasprintf("journal line %u: %s; not restored", line, why);
}

/* What a scan of the file found besides the log. */
struct scan {
    uint64_t max_seq, max_tx;
    size_t complete; /* bytes up to the last newline: a torn tail is cut there */
};

static bool tx_undone(const uint64_t *undone, size_t n, uint64_t tx)
{
    for (size_t i = 0; i < n; i++)
        if (undone[i] == tx)
            return true;
    return false;
}

/* Keep the W records of transactions that no U record undid. */
static void drop_undone(struct journal_log *l, const uint64_t *undone, size_t nundone)
{
    size_t k = 0;
    for (size_t i = 0; i < l->n; i++) {
        if (tx_undone(undone, nundone, l->v[i].tx))
            journal_entry_clear(&l->v[i]);
        else
            l->v[k++] = l->v[i];
    }
    l->n = k;
}

/* Whether BUF (no newline yet) could still become the header: a crash
 * while the journal was being created. */
static bool torn_header(const char *buf, size_t len)
{
    return len <= strlen(JOURNAL_HEADER) && !memcmp(buf, JOURNAL_HEADER, len);
}

/* Parse a journal's bytes. -EBADMSG when the first line is not the
 * header. A last line without its newline is left out (torn). */
static int parse_buffer(const char *buf, size_t len, struct journal_log *ret, struct scan *sc)
{
    const char *nl = memchr(buf, '\n', len);
    *sc = (struct scan){0};
    if (!nl && torn_header(buf, len)) {
        *ret = (struct journal_log){0};
        return 0;
    }
    if (!nl)
        return -EBADMSG;
    if ((size_t)(nl - buf) != strlen(JOURNAL_HEADER) ||
        memcmp(buf, JOURNAL_HEADER, strlen(JOURNAL_HEADER)))
        return -EBADMSG;
    struct journal_log l = {0};
    size_t cap = 0, pcap = 0, nundone = 0, ucap = 0;
    _cleanup_free_ uint64_t *undone = NULL;
    unsigned lineno = 1;
    const char *p = nl + 1, *end = buf + len;
    while (p < end) {
        const char *e = memchr(p, '\n', (size_t)(end - p));
        if (!e)
            break; /* torn: its write never happened */
        lineno++;
        struct journal_entry ent;
        const char *why;
        if (journal_parse_line(p, (size_t)(e - p), &ent, &why) < 0) {
            log_problem(&l, &pcap, lineno, why);
        } else {
            ent.line = lineno;
            sc->max_seq = ent.seq > sc->max_seq ? ent.seq : sc->max_seq;
            sc->max_tx = ent.tx > sc->max_tx ? ent.tx : sc->max_tx;
            if (ent.path) {
                l.v = grow_array(l.v, sizeof(*l.v), l.n, &cap);
                l.v[l.n++] = ent;
            } else {
                undone = grow_array(undone, sizeof(*undone), nundone, &ucap);
                undone[nundone++] = ent.tx;
            }
        }
        p = e + 1;
    }
    sc->complete = (size_t)(p - buf);
    drop_undone(&l, undone, nundone);
    *ret = l;
    return 0;
}

/* The whole file into memory, from an open fd. */
static int read_fd(int fd, char **ret, size_t *ret_len)
{
    struct strbuf b = {0};
    char chunk[16384];
    for (;;) {
        ssize_t n = pread(fd, chunk, sizeof(chunk), (off_t)b.len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 || b.len + (size_t)n > JOURNAL_MAX_SIZE) {
            int r = n < 0 ? -errno : -EFBIG;
            strbuf_free(&b);
            return r;
        }
        if (n == 0)
            break;
        strbuf_append_n(&b, chunk, (size_t)n);
    }
    *ret_len = b.len;
    *ret = strbuf_steal(&b);
    return 0;
}

int journal_read(struct host *h, const char *path, struct journal_log *ret_log)
{
    _cleanup_close_ int fd = host_state_open(h, path ? path : JOURNAL_DEFAULT_PATH, O_RDONLY, 0);
    if (fd == -ENOENT) {
        *ret_log = (struct journal_log){0};
        return 0;
    }
    if (fd < 0)
        return fd;
    _cleanup_free_ char *buf = NULL;
    size_t len;
    int r = read_fd(fd, &buf, &len);
    if (r < 0)
        return r;
    struct scan sc;
    return parse_buffer(buf, len, ret_log, &sc);
}

static void copy_entry(const struct journal_entry *e, struct journal_entry *ret)
{
    *ret = *e;
    ret->owner = xstrdup(e->owner);
    ret->path = xstrdup(e->path);
    ret->old_value = xstrdup(e->old_value);
    ret->new_value = xstrdup(e->new_value);
}

int journal_originals(const struct journal_log *log, struct journal_log *ret)
{
    struct journal_log o = {0};
    size_t cap = 0;
    for (size_t i = 0; i < log->n; i++) {
        const struct journal_entry *e = &log->v[i];
        bool seen = false;
        for (size_t k = 0; k < o.n && !seen; k++)
            seen = o.v[k].dir == e->dir && streq(o.v[k].path, e->path);
        if (seen)
            continue;
        o.v = grow_array(o.v, sizeof(*o.v), o.n, &cap);
        copy_entry(e, &o.v[o.n++]);
    }
    *ret = o;
    return 0;
}

/* ---- the open journal ------------------------------------------------- */

const char *journal_path(const struct journal *j)
{
    return j->display;
}

static int write_all(int fd, const char *buf, size_t len)
{
    for (size_t done = 0; done < len;) {
        ssize_t n = write(fd, buf + done, len - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return n < 0 ? -errno : -EIO;
        done += (size_t)n;
    }
    return 0;
}

/* Append one record and make it durable. A failed write is cut back, so
 * the next record never follows half a line. */
static int append_line(struct journal *j, const char *line)
{
    size_t len = strlen(line);
    if (j->broken)
        return -EIO;
    journal_crash_point("before append");
    int r = write_all(j->fd, line, len);
    /* Were the cut to fail too, the next record would follow half a line
     * and fail its checksum: append nothing more. */
    if (r < 0 && ftruncate(j->fd, (off_t)j->size) < 0)
        j->broken = true;
    if (r < 0)
        return r;
    journal_crash_point("after append");
    if (fdatasync(j->fd) < 0) {
        /* The caller writes nothing for this record: take it back, so that
         * j->size stays the file's size and a later cut-back cuts there. */
        r = -errno;
        if (ftruncate(j->fd, (off_t)j->size) < 0)
            j->broken = true;
        return r;
    }
    journal_crash_point("after fdatasync");
    j->size += len;
    return 0;
}

static int append_record(struct journal *j, struct journal_entry *e)
{
    e->seq = j->seq + 1;
    _cleanup_free_ char *line = format_record(e);
    int r = append_line(j, line);
    if (r < 0)
        return r;
    j->seq++;
    return 0;
}

/* Replace the file by the header and KEEP (in order), atomically: a
 * crash leaves the old file or the new one, never a mix. */
static int rewrite(struct journal *j, const struct journal_entry *keep, size_t nkeep)
{
    struct strbuf b = {0};
    strbuf_append(&b, JOURNAL_HEADER "\n");
    for (size_t i = 0; i < nkeep; i++) {
        _cleanup_free_ char *line = format_record(&keep[i]);
        strbuf_append(&b, line);
    }
    _cleanup_close_ int fd = host_state_open(j->h, j->tmp_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int r = fd < 0 ? fd : write_all(fd, strbuf_str(&b), b.len);
    if (r == 0 && fsync(fd) < 0)
        r = -errno;
    size_t size = b.len;
    strbuf_free(&b);
    if (r < 0)
        return r;
    journal_crash_point("before rename");
    r = host_state_rename(j->h, j->tmp_path, j->path);
    journal_crash_point("after rename");
    if (r < 0)
        return r;
    int nfd = host_state_open(j->h, j->path, O_WRONLY | O_APPEND, 0);
    if (nfd < 0) {
        j->broken = true; /* j->fd is the replaced file: appends there would be lost */
        return nfd;
    }
    close(j->fd);
    j->fd = nfd;
    j->size = size;
    j->live = nkeep;
    j->nproblems = 0;
    j->broken = false;
    return 0;
}

int journal_choice_word(const char *value, char **ret)
{
    const char *open = strchr(value, '['), *close = open ? strchr(open, ']') : NULL;
    if (!close || close == open + 1 || strchr(open + 1, '[') || strchr(close + 1, ']') ||
        (size_t)(close - open - 1) != strcspn(open + 1, " ]\n"))
        return -ENOMSG;
    size_t n = (size_t)(close - open - 1);
    char *w = xmalloc(n + 1);
    memcpy(w, open + 1, n);
    w[n] = '\0';
    *ret = w;
    return 0;
}

/* The value to write back: the bytes read, except a choice list on a
 * live machine, which takes only the word. */
static int write_back(struct host *h, const struct journal_entry *e)
{
    _cleanup_free_ char *word = NULL;
    if (h->live && journal_choice_word(e->old_value, &word) == 0)
        return host_write(h, e->dir, e->path, word);
    return host_write_raw(h, e->dir, e->path, e->old_value, strlen(e->old_value));
}

static char *describe_failure(struct host *h, const struct journal_entry *e, int err)
{
    _cleanup_free_ char *where = host_display_path(h, e->dir, e->path);
    _cleanup_free_ char *val = xstrdup(e->old_value);
    return xasprintf("cannot restore %s to '%s': %s", where, strip_trailing(val), strerror(-err));
}

/* ---- open, lock, close ------------------------------------------------ */

/* "pid 4242 (watt tune powersave)": who holds the lock, from its file. */
static char *lock_holder(int fd)
{
    char buf[600];
    ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
    if (n <= 0)
        return NULL;
    buf[n] = '\0';
    strip_trailing(buf);
    char *sp = strchr(buf, ' ');
    uint64_t pid;
    if (sp)
        *sp = '\0';
    if (parse_num(buf, strlen(buf), &pid) < 0 || pid == 0)
        return NULL;
    if (!sp || !sp[1])
        return xasprintf("pid %llu", (unsigned long long)pid);
    return xasprintf("pid %llu (%s)", (unsigned long long)pid, sp + 1);
}

/* Our pid and command line ("watt tune powersave --root /tmp/x"), one
 * line of printable text, for the next tuner's refusal. */
static void write_holder(int fd)
{
    _cleanup_free_ char *cmd = NULL;
    if (host_self_cmdline(&cmd) < 0)
        cmd = xstrdup("");
    char *first = cmd, *sp = strchr(cmd, ' ');
    if (sp)
        *sp = '\0';
    const char *slash = strrchr(first, '/');
    _cleanup_free_ char *text = xasprintf("%d %s%s%s\n", (int)getpid(), slash ? slash + 1 : first,
                                          sp ? " " : "", sp ? sp + 1 : "");
    for (char *c = text; c[1]; c++)
        if ((unsigned char)*c < 0x20 || (unsigned char)*c > 0x7e)
            *c = '?';
    size_t len = strlen(text);
    if (ftruncate(fd, 0) < 0 || pwrite(fd, text, len, 0) != (ssize_t)len)
        return; /* only a message depends on it */
}

static int take_lock(struct journal *j, char **ret_err)
{
    _cleanup_free_ char *lp = xasprintf("%s.lock", j->path);
    int fd = host_state_open(j->h, lp, O_RDWR | O_CREAT, 0644);
    if (fd < 0) {
        _cleanup_free_ char *where = host_state_display_path(j->h, lp);
        *ret_err = xasprintf("cannot open the journal lock %s: %s", where, strerror(-fd));
        return fd;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
        int r = errno == EWOULDBLOCK ? -EBUSY : -errno;
        _cleanup_free_ char *who = r == -EBUSY ? lock_holder(fd) : NULL;
        _cleanup_free_ char *where = host_state_display_path(j->h, lp);
        if (r != -EBUSY)
            *ret_err = xasprintf("cannot lock %s: %s", where, strerror(-r));
        else if (who)
            *ret_err = xasprintf("another tuner is running: %s; try again when it ends", who);
        else
            *ret_err = xasprintf("another tuner holds %s; try again when it ends", where);
        close(fd);
        return r;
    }
    write_holder(fd);
    j->lock_fd = fd;
    return 0;
}

/* Open the file, check it, cut a torn tail, write the header if new. */
static int load(struct journal *j, char **ret_err)
{
    j->fd = host_state_open(j->h, j->path, O_RDWR | O_CREAT | O_APPEND, 0644);
    if (j->fd < 0) {
        *ret_err = xasprintf("cannot open the journal %s: %s", j->display, strerror(-j->fd));
        return j->fd;
    }
    _cleanup_free_ char *buf = NULL;
    size_t len;
    struct journal_log log;
    struct scan sc;
    int r = read_fd(j->fd, &buf, &len);
    if (r == 0 && (r = parse_buffer(buf, len, &log, &sc)) == -EBADMSG) {
        *ret_err = xasprintf("%s is not a watt journal (its first line is not \"" JOURNAL_HEADER
                             "\"); nothing was changed",
                             j->display);
        return r;
    }
    if (r < 0) {
        *ret_err = xasprintf("cannot read the journal %s: %s", j->display, strerror(-r));
        return r;
    }
    j->seq = sc.max_seq;
    j->tx = sc.max_tx;
    j->live = log.n;
    j->nproblems = log.nproblems;
    journal_log_free(&log);
    j->size = sc.complete;
    if (sc.complete < len && (ftruncate(j->fd, (off_t)sc.complete) < 0 || fsync(j->fd) < 0))
        r = -errno;
    /* A new journal, or one torn while it was being created. No crash
     * point here: the kill test's count of points must not depend on
     * whether the file existed. */
    if (r == 0 && sc.complete == 0) {
        r = write_all(j->fd, JOURNAL_HEADER "\n", strlen(JOURNAL_HEADER) + 1);
        if (r == 0 && fdatasync(j->fd) < 0)
            r = -errno;
        j->size = strlen(JOURNAL_HEADER) + 1;
    }
    if (r < 0)
        *ret_err = xasprintf("cannot write the journal %s: %s", j->display, strerror(-r));
    return r;
}

int journal_open(struct host *h, const char *path, const char *owner, struct journal **ret,
                 char **ret_err)
{
    if (!path)
        path = JOURNAL_DEFAULT_PATH;
    struct journal *j = xcalloc(1, sizeof(*j));
    j->h = h;
    j->path = xstrdup(path);
    j->tmp_path = xasprintf("%s.tmp", path);
    j->display = host_state_display_path(h, path);
    j->owner = xstrdup(owner ? owner : "cli");
    j->fd = j->lock_fd = -1;
    int r = take_lock(j, ret_err);
    if (r == 0)
        r = load(j, ret_err);
    if (r < 0) {
        journal_close(j);
        return r;
    }
    *ret = j;
    return 0;
}

static void clear_changes(struct journal *j)
{
    for (size_t i = 0; i < j->ncur; i++)
        journal_entry_clear(&j->cur[i].e);
    j->ncur = 0;
}

void journal_close(struct journal *j)
{
    if (!j)
        return;
    clear_changes(j);
    free(j->cur);
    if (j->fd >= 0)
        close(j->fd);
    if (j->lock_fd >= 0)
        close(j->lock_fd); /* releases the flock */
    free(j->path);
    free(j->tmp_path);
    free(j->display);
    free(j->owner);
    free(j);
}

/* ---- changes ------------------------------------------------------------ */

void journal_begin(struct journal *j)
{
    clear_changes(j);
    j->cur_tx = ++j->tx;
}

int journal_set(struct journal *j, enum host_dir d, const char *path, const char *new_value,
                char **ret_old)
{
    if (!dir_word(d) || !path_ok(path))
        return -EINVAL;
    char *old;
    size_t len;
    int r = host_read(j->h, d, path, &old, &len);
    if (r < 0)
        return r;
    if (strlen(old) != len) { /* a NUL inside: not a value we could put back */
        free(old);
        return -EINVAL;
    }
    if (!j->cur_tx)
        journal_begin(j);
    struct journal_entry e = {
        .tx = j->cur_tx,
        .time_ns = now_realtime_ns(),
        .pid = (int)getpid(),
        .owner = xstrdup(j->owner),
        .dir = d,
        .path = xstrdup(path),
        .old_value = old,
        .new_value = xstrdup(new_value),
    };
    r = append_record(j, &e);
    if (r < 0) {
        journal_entry_clear(&e);
        return r;
    }
    j->live++;
    j->cur = grow_array(j->cur, sizeof(*j->cur), j->ncur, &j->capcur);
    struct journal_change *c = &j->cur[j->ncur++];
    *c = (struct journal_change){.e = e};
    journal_crash_point("before host_write");
    r = host_write(j->h, d, path, new_value);
    journal_crash_point("after host_write");
    if (r < 0)
        return r; /* the record stays: restoring it writes what is there */
    c->applied = true;
    if (ret_old)
        *ret_old = xstrdup(old);
    return 0;
}

static void add_line(char ***lines, size_t *n, size_t *cap, char *line)
{
    *lines = grow_array(*lines, sizeof(**lines), *n, cap);
    (*lines)[(*n)++] = line;
}

int journal_rollback(struct journal *j, char **ret_err)
{
    if (!j->cur_tx)
        return 0;
    int first = 0;
    struct strbuf errs = {0};
    for (size_t i = j->ncur; i-- > 0;) {
        if (!j->cur[i].applied)
            continue;
        journal_crash_point("before host_write");
        int r = write_back(j->h, &j->cur[i].e);
        journal_crash_point("after host_write");
        if (r < 0) {
            _cleanup_free_ char *msg = describe_failure(j->h, &j->cur[i].e, r);
            strbuf_appendf(&errs, "%s%s", errs.len ? "; " : "", msg);
            first = first ? first : r;
        }
    }
    /* Values that could not be put back stay live: no U record. */
    int r = first;
    if (!first) {
        struct journal_entry u = {.tx = j->cur_tx};
        r = append_record(j, &u);
        if (r == 0) {
            j->live -= j->ncur;
            if (j->live == 0 && j->nproblems == 0) /* keep the file small */
                r = rewrite(j, NULL, 0);
        }
        if (r < 0)
            strbuf_appendf(&errs, "cannot write the journal %s: %s", j->display, strerror(-r));
    }
    clear_changes(j);
    j->cur_tx = 0;
    if (r < 0 && ret_err)
        *ret_err = strbuf_steal(&errs);
    strbuf_free(&errs);
    return r;
}

/* ---- restore -------------------------------------------------------- */

void journal_restore_report_free(struct journal_restore_report *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->nlines; i++)
        free(r->lines[i]);
    free(r->lines);
    *r = (struct journal_restore_report){0};
}

/* Write back LOG's values of OWNER newest first; done[i] marks those
 * written (or, in a dry run, that would be). */
/* Restoring one owner's records (the agent's guard, say) when another
 * owner changed the same file later (`watt tune` with a [pm_qos]
 * section): writing the old value back would undo the later change, and
 * the later record would then restore the guard's value for good. So the
 * value is left as it is, and the later record takes over the original
 * value: undoing it later goes all the way back. Returns whether it did. */
static bool hand_over(struct journal *j, struct journal_log *log, size_t i, const bool *done,
                      bool dry_run, struct journal_restore_report *rep, size_t *cap)
{
    const struct journal_entry *e = &log->v[i];
    for (size_t k = i + 1; k < log->n; k++) {
        struct journal_entry *later = &log->v[k];
        if (done[k] || later->dir != e->dir || !streq(later->path, e->path) ||
            streq(later->owner, e->owner))
            continue;
        _cleanup_free_ char *where = host_display_path(j->h, e->dir, e->path);
        add_line(&rep->lines, &rep->nlines, cap,
                 xasprintf("%s %s as it is: %s changed it later, and restoring that now "
                           "goes back to the original",
                           dry_run ? "would leave" : "left", where, later->owner));
        if (!dry_run) {
            free(later->old_value);
            later->old_value = xstrdup(e->old_value);
        }
        return true;
    }
    return false;
}

static void restore_values(struct journal *j, struct journal_log *log, const char *owner,
                           bool dry_run, bool *done, struct journal_restore_report *rep,
                           size_t *cap)
{
    for (size_t i = log->n; i-- > 0;) {
        const struct journal_entry *e = &log->v[i];
        if (owner && !streq(owner, e->owner))
            continue;
        if (owner && hand_over(j, log, i, done, dry_run, rep, cap)) {
            done[i] = true;
            rep->restored++;
            continue;
        }
        if (dry_run) {
            _cleanup_free_ char *where = host_display_path(j->h, e->dir, e->path);
            _cleanup_free_ char *val = xstrdup(e->old_value);
            add_line(&rep->lines, &rep->nlines, cap,
                     xasprintf("would restore %s to '%s'", where, strip_trailing(val)));
            rep->restored++;
            continue;
        }
        journal_crash_point("before host_write");
        int r = write_back(j->h, e);
        journal_crash_point("after host_write");
        if (r == -ENOENT) {
            _cleanup_free_ char *where = host_display_path(j->h, e->dir, e->path);
            add_line(&rep->lines, &rep->nlines, cap,
                     xasprintf("%s is gone (device removed or CPU offline): nothing to "
                               "restore, the record is dropped",
                               where));
            done[i] = true;
            rep->gone++;
            continue;
        }
        if (r < 0) {
            add_line(&rep->lines, &rep->nlines, cap, describe_failure(j->h, e, r));
            rep->failed++;
            continue;
        }
        done[i] = true;
        rep->restored++;
        /* A newer record of this path that failed is superseded: the
         * value is now older than its old value, and keeping it would have
         * the next restore write that in-between value back. */
        for (size_t k = i + 1; k < log->n; k++)
            if (!done[k] && log->v[k].dir == e->dir && streq(log->v[k].path, e->path) &&
                (!owner || streq(owner, log->v[k].owner)))
                done[k] = true;
    }
}

int journal_restore(struct journal *j, const char *owner, bool dry_run,
                    struct journal_restore_report *ret)
{
    struct journal_log log;
    int r = journal_read(j->h, j->path, &log);
    if (r < 0)
        return r;
    struct journal_restore_report rep = {0};
    size_t cap = 0;
    _cleanup_free_ bool *done = xcalloc(log.n + 1, sizeof(*done));
    restore_values(j, &log, owner, dry_run, done, &rep, &cap);
    rep.skipped = log.nproblems;
    for (size_t i = 0; i < log.nproblems; i++)
        add_line(&rep.lines, &rep.nlines, &cap, TAKE_PTR(log.problems[i]));
    if (!dry_run) {
        clear_changes(j); /* an open transaction ends with the restore */
        j->cur_tx = 0;
        size_t k = 0;
        for (size_t i = 0; i < log.n; i++) { /* keep the rest, in order */
            if (done[i]) {
                journal_entry_clear(&log.v[i]);
                continue;
            }
            log.v[k++] = log.v[i];
        }
        log.n = k;
        r = rewrite(j, log.v, log.n);
        if (r < 0)
            add_line(&rep.lines, &rep.nlines, &cap,
                     xasprintf("cannot rewrite the journal %s: %s", j->display, strerror(-r)));
    }
    journal_log_free(&log);
    *ret = rep;
    if (r < 0)
        return r;
    return rep.failed || rep.skipped ? -EIO : 0;
}
