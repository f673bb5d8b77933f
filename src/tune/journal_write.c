/* The open journal (journal.h): lock, append, rewrite, change, roll back.
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
#include "tune/journal_internal.h"
#include "tune/knob.h"
#include "tune/knob_io.h"

/* ---- the open journal ------------------------------------------------- */

const char *journal_path(const struct journal *j)
{
    return j->display;
}

int journal_write_all(int fd, const char *buf, size_t len)
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
    int r = journal_write_all(j->fd, line, len);
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

int journal_append_record(struct journal *j, struct journal_entry *e)
{
    e->seq = j->seq + 1;
    _cleanup_free_ char *line = journal_format_record(e);
    int r = append_line(j, line);
    if (r < 0)
        return r;
    j->seq++;
    return 0;
}

/* Replace the file by the header, KEEP (in order) and RAW, atomically:
 * a crash leaves the old file or the new one, never a mix. */
int journal_rewrite(struct journal *j, const struct journal_entry *keep, size_t nkeep,
                    char *const *raw, size_t nraw)
{
    struct strbuf b = {0};
    strbuf_append(&b, JOURNAL_HEADER "\n");
    for (size_t i = 0; i < nkeep; i++) {
        _cleanup_free_ char *line = journal_format_record(&keep[i]);
        strbuf_append(&b, line);
    }
    for (size_t i = 0; i < nraw; i++)
        strbuf_appendf(&b, "%s\n", raw[i]);
    _cleanup_close_ int fd = host_state_open(j->h, j->tmp_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int r = fd < 0 ? fd : journal_write_all(fd, strbuf_str(&b), b.len);
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
    j->nproblems = nraw;
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
/* Whether the space-separated LIST holds WORD. */
static bool has_word(const char *list, const char *word, size_t n)
{
    for (const char *s = list; *s;) {
        s += strspn(s, " \n");
        size_t k = strcspn(s, " \n");
        if (k == n && !memcmp(s, word, n))
            return true;
        s += k;
    }
    return false;
}

char *journal_controllers_undo(const char *old, const char *now)
{
    struct strbuf b = {0};
    for (int pass = 0; pass < 2; pass++) {
        /* pass 0: what is on now and was not ("-x"); pass 1: the reverse */
        const char *from = pass ? old : now, *other = pass ? now : old;
        for (const char *s = from; *s;) {
            s += strspn(s, " \n");
            size_t k = strcspn(s, " \n");
            if (k && !has_word(other, s, k))
                strbuf_appendf(&b, "%s%c%.*s", b.len ? " " : "", pass ? '+' : '-', (int)k, s);
            s += k;
        }
    }
    return strbuf_steal(&b);
}

int journal_write_back(struct host *h, const struct journal_entry *e)
{
    _cleanup_free_ char *word = NULL;
    const struct knob *k = knob_find(e->dir, e->path);
    if (h->live && k && (k->values & KNOB_V_CONTROLLERS)) {
        /* cgroup.subtree_control takes "+x -y", not the list it shows */
        _cleanup_free_ char *now = NULL;
        int r = knob_io_read_str(h, e->dir, e->path, &now);
        if (r < 0)
            return r;
        _cleanup_free_ char *ops = journal_controllers_undo(e->old_value, now);
        return *ops ? knob_io_write(h, e->dir, e->path, ops) : 0;
    }
    if (h->live && journal_choice_word(e->old_value, &word) == 0)
        return knob_io_write(h, e->dir, e->path, word);
    return knob_io_write_raw(h, e->dir, e->path, e->old_value, strlen(e->old_value));
}

char *journal_describe_failure(struct host *h, const struct journal_entry *e, int err)
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
    if (journal_parse_num(buf, strlen(buf), &pid) < 0 || pid == 0)
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
    struct journal_scan sc;
    int r = journal_read_fd(j->fd, &buf, &len);
    if (r == 0 && (r = journal_parse_buffer(buf, len, &log, &sc)) == -EBADMSG) {
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
        r = journal_write_all(j->fd, JOURNAL_HEADER "\n", strlen(JOURNAL_HEADER) + 1);
        if (r == 0 && fdatasync(j->fd) < 0)
            r = -errno;
        if (r == 0) /* the new file's name must survive a power cut too */
            r = host_state_fsync_dir(j->h, j->path);
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
    /* Before anything is created or written: a journal someone else could
     * have written may name any file and any value. */
    _cleanup_free_ char *lock = xasprintf("%s.lock", path);
    int r = host_state_check(h, path, ret_err);
    if (r == 0)
        r = host_state_check(h, lock, ret_err);
    if (r == 0)
        r = take_lock(j, ret_err);
    if (r == 0)
        r = load(j, ret_err);
    if (r == 0)
        j->boot = journal_boot_id(h);
    if (r < 0) {
        journal_close(j);
        return r;
    }
    *ret = j;
    return 0;
}

void journal_clear_changes(struct journal *j)
{
    for (size_t i = 0; i < j->ncur; i++)
        journal_entry_clear(&j->cur[i].e);
    j->ncur = 0;
}

void journal_close(struct journal *j)
{
    if (!j)
        return;
    journal_clear_changes(j);
    free(j->cur);
    knob_io_release(); /* NVML, when a record needed it */
    if (j->fd >= 0)
        close(j->fd);
    if (j->lock_fd >= 0)
        close(j->lock_fd); /* releases the flock */
    free(j->path);
    free(j->tmp_path);
    free(j->display);
    free(j->owner);
    free(j->boot);
    free(j);
}

/* ---- changes ------------------------------------------------------------ */

void journal_begin(struct journal *j)
{
    journal_clear_changes(j);
    j->cur_tx = ++j->tx;
}

char *journal_value_active(const char *raw)
{
    const char *open = raw ? strchr(raw, '[') : NULL;
    const char *close = open ? strchr(open, ']') : NULL;
    if (close && close > open + 1)
        return xstrndup(open + 1, (size_t)(close - open - 1));
    char *s = xstrdup(raw ? raw : "");
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\n' || s[n - 1] == '\t'))
        s[--n] = '\0';
    return s;
}

/* After a write: where the kernel shows another value than written (a
 * frequency clamped to the policy's limits), an R record says which, so
 * that a restore knows the value is still watt's. Best effort: without
 * it, a restore sees the value as changed and leaves it. */
static void note_shown(struct journal *j, struct journal_change *c)
{
    _cleanup_free_ char *raw = NULL;
    if (knob_io_read_str(j->h, c->e.dir, c->e.path, &raw) < 0)
        return;
    _cleanup_free_ char *now = journal_value_active(raw);
    _cleanup_free_ char *want = journal_value_active(c->e.new_value);
    if (streq(now, want))
        return;
    struct journal_entry r = {.kind = 'R', .tx = c->e.tx, .ref = c->e.seq, .shown = raw};
    if (journal_append_record(j, &r) == 0)
        c->e.shown = TAKE_PTR(raw);
}

int journal_set(struct journal *j, enum host_dir d, const char *path, const char *new_value,
                char **ret_old)
{
    if (!journal_dir_word(d) || !journal_path_ok(path))
        return -EINVAL;
    /* Only what the knob table declares: the journal could not put back
     * anything else (journal_entry_refusal()). */
    const struct knob *k = knob_find(d, path);
    if (!k || !knob_value_ok(k, new_value))
        return -EPERM;
    char *old;
    size_t len;
    int r = knob_io_read(j->h, d, path, &old, &len);
    if (r < 0)
        return r;
    if (strlen(old) != len || !knob_value_ok(k, old)) {
        /* a NUL inside, or a value the knob does not take: not one a
         * restore could write back */
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
        .boot = j->boot ? xstrdup(j->boot) : NULL,
        .kind = 'W',
    };
    r = journal_append_record(j, &e);
    if (r < 0) {
        journal_entry_clear(&e);
        return r;
    }
    j->live++;
    j->cur = grow_array(j->cur, sizeof(*j->cur), j->ncur, &j->capcur);
    struct journal_change *c = &j->cur[j->ncur++];
    *c = (struct journal_change){.e = e};
    journal_crash_point("before host_write");
    r = knob_io_write(j->h, d, path, new_value);
    journal_crash_point("after host_write");
    if (r < 0)
        return r; /* the record stays: restoring it writes what is there */
    c->applied = true;
    note_shown(j, c);
    if (ret_old)
        *ret_old = xstrdup(old);
    return 0;
}

void journal_add_line(char ***lines, size_t *n, size_t *cap, char *line)
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
        int r = journal_write_back(j->h, &j->cur[i].e);
        journal_crash_point("after host_write");
        if (r < 0) {
            _cleanup_free_ char *msg = journal_describe_failure(j->h, &j->cur[i].e, r);
            strbuf_appendf(&errs, "%s%s", errs.len ? "; " : "", msg);
            first = first ? first : r;
        }
    }
    /* Values that could not be put back stay live: no U record. */
    int r = first;
    if (!first) {
        struct journal_entry u = {.kind = 'U', .tx = j->cur_tx};
        r = journal_append_record(j, &u);
        if (r == 0) {
            j->live -= j->ncur;
            if (j->live == 0 && j->nproblems == 0) /* keep the file small */
                r = journal_rewrite(j, NULL, 0, NULL, 0);
        }
        if (r < 0)
            strbuf_appendf(&errs, "cannot write the journal %s: %s", j->display, strerror(-r));
    }
    journal_clear_changes(j);
    j->cur_tx = 0;
    if (r < 0 && ret_err)
        *ret_err = strbuf_steal(&errs);
    strbuf_free(&errs);
    return r;
}
