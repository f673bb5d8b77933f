/* The undo journal's format (journal.h): records, checksums, escapes,
 * parsing a whole file, crash points. The open journal is in
 * journal_write.c, restore in journal_restore.c. */
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

#include "base/crc32.h"
#include "base/parse.h"
#include "base/strbuf.h"
#include "base/util.h"
#include "tune/journal_internal.h"
#include "tune/knob.h"

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
    return crc32_update(0, buf, len);
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
    free(e->shown);
    free(e->boot);
    *e = (struct journal_entry){0};
}

const char *journal_dir_word(enum host_dir d)
{
    return d == HOST_SYS    ? "sys"
           : d == HOST_PROC ? "proc"
           : d == HOST_DEV  ? "dev"
           : d == HOST_NVML ? "nvml"
                            : NULL;
}

/* A path a record may name: relative, no "..", no empty component, so a
 * journal can never point a restore outside sys/, proc/ or dev/. */
bool journal_path_ok(const char *p)
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
char *journal_format_record(const struct journal_entry *e)
{
    struct strbuf b = {0};
    if (e->kind == 'W') {
        _cleanup_free_ char *owner = journal_escape(e->owner);
        _cleanup_free_ char *path = journal_escape(e->path);
        _cleanup_free_ char *old = journal_escape(e->old_value);
        _cleanup_free_ char *new = journal_escape(e->new_value);
        strbuf_appendf(&b, "W seq=%llu tx=%llu t=%llu pid=%d owner=%s dir=%s path=%s old=%s new=%s",
                       (unsigned long long)e->seq, (unsigned long long)e->tx,
                       (unsigned long long)e->time_ns, e->pid, owner, journal_dir_word(e->dir),
                       path, old, new);
        if (e->shown) {
            _cleanup_free_ char *shown = journal_escape(e->shown);
            strbuf_appendf(&b, " shown=%s", shown);
        }
        if (e->boot) {
            _cleanup_free_ char *boot = journal_escape(e->boot);
            strbuf_appendf(&b, " boot=%s", boot);
        }
    } else if (e->kind == 'R') {
        _cleanup_free_ char *shown = journal_escape(e->shown);
        strbuf_appendf(&b, "R seq=%llu tx=%llu ref=%llu shown=%s", (unsigned long long)e->seq,
                       (unsigned long long)e->tx, (unsigned long long)e->ref, shown);
    } else {
        strbuf_appendf(&b, "U seq=%llu tx=%llu", (unsigned long long)e->seq,
                       (unsigned long long)e->tx);
    }
    strbuf_appendf(&b, " crc=%08x\n", journal_crc32(strbuf_str(&b), b.len));
    return strbuf_steal(&b);
}

/* ---- parsing ---------------------------------------------------------- */

int journal_parse_num(const char *s, size_t len, uint64_t *ret)
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

/* Fields a W record must have: F_SEQ..F_NEW; then the optional ones
 * (shown, boot), and R's own (ref; shown). */
enum field {
    F_SEQ,
    F_TX,
    F_T,
    F_PID,
    F_OWNER,
    F_DIR,
    F_PATH,
    F_OLD,
    F_NEW,
    F_SHOWN,
    F_BOOT,
    F_REF,
    _F_MAX
};
static const char *const field_names[_F_MAX] = {
    "seq", "tx", "t", "pid", "owner", "dir", "path", "old", "new", "shown", "boot", "ref",
};

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
    for (int k = 0; k <= F_NEW; k++)
        if (!val[k])
            return refuse(ret_why, "missing field");
    if (val[F_REF])
        return refuse(ret_why, "unknown field");
    if (journal_parse_num(val[F_T], vlen[F_T], &e->time_ns) < 0 ||
        journal_parse_num(val[F_PID], vlen[F_PID], &pid) < 0 || pid > INT32_MAX)
        return refuse(ret_why, "bad number");
    e->pid = (int)pid;
    static const enum host_dir dirs[] = {HOST_SYS, HOST_PROC, HOST_DEV, HOST_NVML};
    bool dir_found = false;
    for (size_t i = 0; i < ARRAY_SIZE(dirs); i++)
        if (strlen(journal_dir_word(dirs[i])) == vlen[F_DIR] &&
            !memcmp(val[F_DIR], journal_dir_word(dirs[i]), vlen[F_DIR])) {
            e->dir = dirs[i];
            dir_found = true;
        }
    if (!dir_found)
        return refuse(ret_why, "bad directory");
    if (journal_unescape(val[F_OWNER], vlen[F_OWNER], &e->owner) < 0 ||
        journal_unescape(val[F_PATH], vlen[F_PATH], &e->path) < 0 ||
        journal_unescape(val[F_OLD], vlen[F_OLD], &e->old_value) < 0 ||
        journal_unescape(val[F_NEW], vlen[F_NEW], &e->new_value) < 0 ||
        (val[F_SHOWN] && journal_unescape(val[F_SHOWN], vlen[F_SHOWN], &e->shown) < 0) ||
        (val[F_BOOT] && journal_unescape(val[F_BOOT], vlen[F_BOOT], &e->boot) < 0))
        return refuse(ret_why, "bad escape");
    if (!journal_path_ok(e->path))
        return refuse(ret_why, "bad path");
    return 0;
}

/* R: the kernel showed SHOWN after the write of record REF. */
static int parse_r_fields(const char *val[_F_MAX], const size_t vlen[_F_MAX],
                          struct journal_entry *e, const char **ret_why)
{
    for (int k = F_T; k < _F_MAX; k++)
        if (val[k] && k != F_REF && k != F_SHOWN)
            return refuse(ret_why, "unknown field");
    if (!val[F_REF] || !val[F_SHOWN])
        return refuse(ret_why, "missing field");
    if (journal_parse_num(val[F_REF], vlen[F_REF], &e->ref) < 0)
        return refuse(ret_why, "bad number");
    if (journal_unescape(val[F_SHOWN], vlen[F_SHOWN], &e->shown) < 0)
        return refuse(ret_why, "bad escape");
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
    if (len < 3 || (line[0] != 'W' && line[0] != 'U' && line[0] != 'R') || line[1] != ' ')
        goto bad;
    const char *val[_F_MAX] = {0};
    size_t vlen[_F_MAX] = {0};
    if (split_fields(line + 2, len - 2, val, vlen, &why) < 0)
        goto bad;
    struct journal_entry e = {.kind = line[0]};
    why = "missing field";
    if (!val[F_SEQ] || !val[F_TX])
        goto bad;
    why = "bad number";
    if (journal_parse_num(val[F_SEQ], vlen[F_SEQ], &e.seq) < 0 ||
        journal_parse_num(val[F_TX], vlen[F_TX], &e.tx) < 0)
        goto bad;
    int r = 0;
    if (e.kind == 'U') {
        why = "unknown field";
        for (int k = F_T; k < _F_MAX; k++)
            if (val[k])
                goto bad;
    } else if (e.kind == 'R') {
        r = parse_r_fields(val, vlen, &e, &why);
    } else {
        r = parse_w_fields(val, vlen, &e, &why);
    }
    if (r < 0) {
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
    for (size_t i = 0; i < l->nproblems; i++) {
        free(l->problems[i]);
        free(l->bad ? l->bad[i] : NULL);
    }
    free(l->problems);
    free(l->bad);
    free(l->boot_now);
    *l = (struct journal_log){0};
}

static void log_problem(struct journal_log *l, size_t *cap, unsigned line, const char *why,
                        const char *text, size_t len)
{
    size_t c = *cap;
    l->problems = grow_array(l->problems, sizeof(*l->problems), l->nproblems, &c);
    l->bad = grow_array(l->bad, sizeof(*l->bad), l->nproblems, cap);
    l->problems[l->nproblems] = xasprintf("journal line %u: %s; not restored", line, why);
    l->bad[l->nproblems++] = xstrndup(text, len);
}

/* An R record: the kernel showed another value after W record REF's
 * write. */
static void apply_shown(struct journal_log *l, struct journal_entry *r)
{
    for (size_t i = l->n; i-- > 0;)
        if (l->v[i].seq == r->ref && l->v[i].tx == r->tx) {
            free(l->v[i].shown);
            l->v[i].shown = TAKE_PTR(r->shown);
            break;
        }
    journal_entry_clear(r);
}

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
int journal_parse_buffer(const char *buf, size_t len, struct journal_log *ret,
                         struct journal_scan *sc)
{
    const char *nl = memchr(buf, '\n', len);
    *sc = (struct journal_scan){0};
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
            log_problem(&l, &pcap, lineno, why, p, (size_t)(e - p));
        } else {
            ent.line = lineno;
            sc->max_seq = ent.seq > sc->max_seq ? ent.seq : sc->max_seq;
            sc->max_tx = ent.tx > sc->max_tx ? ent.tx : sc->max_tx;
            if (ent.kind == 'W') {
                l.v = grow_array(l.v, sizeof(*l.v), l.n, &cap);
                l.v[l.n++] = ent;
            } else if (ent.kind == 'R') {
                apply_shown(&l, &ent);
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
int journal_read_fd(int fd, char **ret, size_t *ret_len)
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

/* This boot's boot_id (proc/sys/kernel/random/boot_id), or NULL where
 * the root has none (most recorded trees) or it is not a UUID. */
char *journal_boot_id(struct host *h)
{
    char *id = NULL;
    if (host_read_str(h, HOST_PROC, "sys/kernel/random/boot_id", &id) < 0)
        return NULL;
    size_t n = strlen(id);
    bool ok = n == 36;
    for (size_t i = 0; ok && i < n; i++)
        ok = (i == 8 || i == 13 || i == 18 || i == 23) ? id[i] == '-' : hex_digit_value(id[i]) >= 0;
    if (!ok) {
        free(id);
        return NULL;
    }
    return id;
}

int journal_read_err(struct host *h, const char *path, struct journal_log *ret_log, char **ret_err)
{
    if (!path)
        path = JOURNAL_DEFAULT_PATH;
    int r = host_state_check(h, path, ret_err);
    if (r < 0)
        return r;
    _cleanup_close_ int fd = host_state_open(h, path, O_RDONLY, 0);
    if (fd == -ENOENT) {
        *ret_log = (struct journal_log){.boot_now = journal_boot_id(h)};
        return 0;
    }
    if (fd < 0)
        return fd;
    _cleanup_free_ char *buf = NULL;
    size_t len;
    r = journal_read_fd(fd, &buf, &len);
    if (r < 0)
        return r;
    struct journal_scan sc;
    r = journal_parse_buffer(buf, len, ret_log, &sc);
    if (r == 0)
        ret_log->boot_now = journal_boot_id(h);
    return r;
}

int journal_read(struct host *h, const char *path, struct journal_log *ret_log)
{
    return journal_read_err(h, path, ret_log, NULL);
}

static void copy_entry(const struct journal_entry *e, struct journal_entry *ret)
{
    *ret = *e;
    ret->owner = xstrdup(e->owner);
    ret->path = xstrdup(e->path);
    ret->old_value = xstrdup(e->old_value);
    ret->new_value = xstrdup(e->new_value);
    ret->shown = e->shown ? xstrdup(e->shown) : NULL;
    ret->boot = e->boot ? xstrdup(e->boot) : NULL;
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
