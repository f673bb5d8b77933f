/* Restoring (journal.h): judge each record against the machine, write
 * back what is still watt's, move what cannot be restored aside. */
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

/* ---- judging a record ---------------------------------------------- */

const char *journal_entry_refusal(const struct journal_entry *e)
{
    const struct knob *k = knob_find(e->dir, e->path);
    if (!k)
        return "it names no file watt changes (no row of the knob table matches)";
    if (!knob_value_ok(k, e->old_value))
        return "its old value is not one that knob takes";
    return NULL;
}

const char *journal_entry_written(const struct journal_entry *e)
{
    return e->shown ? e->shown : e->new_value;
}

static bool earlier_boot(const struct journal_log *log, const struct journal_entry *e)
{
    return e->boot && log->boot_now && !streq(e->boot, log->boot_now);
}

/* cgroup.subtree_control: whether the "+x -y" watt wrote (OPS) is still
 * in force in the list the file shows (LIST): every x there, no y. */
static bool ops_in_force(const char *ops, const char *list)
{
    for (const char *o = ops; *o;) {
        o += strspn(o, " \n");
        size_t n = strcspn(o, " \n");
        if (!n)
            break;
        bool add = o[0] != '-';
        const char *w = o + (o[0] == '+' || o[0] == '-');
        size_t wn = n - (size_t)(w - o);
        bool there = false;
        for (const char *l = list; *l && !there;) {
            l += strspn(l, " \n");
            size_t k = strcspn(l, " \n");
            there = k == wn && !memcmp(l, w, wn);
            l += k;
        }
        if (there != add)
            return false;
        o += n;
    }
    return true;
}

enum journal_verdict journal_judge(struct host *h, const struct journal_log *log,
                                   const struct journal_entry *e, char **ret_now,
                                   const char **ret_why)
{
    if (ret_now)
        *ret_now = NULL;
    const char *why = journal_entry_refusal(e);
    if (why) { /* not even read: a FIFO or a device would be opened */
        if (ret_why)
            *ret_why = why;
        return JOURNAL_REFUSED;
    }
    _cleanup_free_ char *raw = NULL;
    int r = knob_io_read_str(h, e->dir, e->path, &raw);
    if (r == -ENOENT)
        return JOURNAL_GONE;
    if (r < 0)
        return JOURNAL_UNREADABLE;
    char *now = journal_value_active(raw);
    _cleanup_free_ char *want = journal_value_active(journal_entry_written(e));
    _cleanup_free_ char *old = journal_value_active(e->old_value);
    /* It shows what watt wrote; or still the old value: the write never
     * happened (a crash between the record and the write), and writing
     * it back changes nothing; or no value the knob takes at all (a
     * kernel file never shows one): a write torn by a crash on a recorded
     * tree, whose writes truncate and then write. Nobody set that. */
    const struct knob *k = knob_find(e->dir, e->path);
    bool ours = streq(now, want) || streq(now, old) || !knob_value_ok(k, raw);
    if (!ours && (k->values & KNOB_V_CONTROLLERS))
        ours = ops_in_force(want, raw);
    if (ret_now)
        *ret_now = now;
    else
        free(now);
    if (earlier_boot(log, e))
        return JOURNAL_EARLIER_BOOT;
    return ours ? JOURNAL_OURS : JOURNAL_CHANGED;
}

/* ---- restore -------------------------------------------------------- */

void journal_restore_report_free(struct journal_restore_report *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->nlines; i++)
        free(r->lines[i]);
    free(r->lines);
    free(r->corrupt_file);
    free(r->boot_file);
    *r = (struct journal_restore_report){0};
}

struct restore {
    struct journal *j;
    struct journal_log *log;
    const char *owner;
    bool dry_run, force;
    bool *done;    /* leaves the journal: restored, gone, superseded, or moved */
    bool *to_boot; /* goes to the .earlier-boot journal */
    bool *kept;    /* left in the journal on purpose: older records of its path wait */
    bool *handled; /* written back (or tried, or would be): older records of its
                    * path follow it, whatever the file shows now */
    struct journal_restore_report *rep;
    size_t cap;
};

static void say(struct restore *x, char *line)
{
    journal_add_line(&x->rep->lines, &x->rep->nlines, &x->cap, line);
}

/* Restoring one owner's records (the agent's guard, say) when another
 * owner changed the same file later (`watt tune` with a [pm_qos]
 * section): writing the old value back would undo the later change, and
 * the later record would then restore the guard's value for good. So the
 * value is left as it is, and the later record takes over the original
 * value: undoing it later goes all the way back. Returns whether it did. */
static bool hand_over(struct restore *x, size_t i)
{
    const struct journal_entry *e = &x->log->v[i];
    for (size_t k = i + 1; k < x->log->n; k++) {
        struct journal_entry *later = &x->log->v[k];
        if (x->done[k] || later->dir != e->dir || !streq(later->path, e->path) ||
            streq(later->owner, e->owner))
            continue;
        _cleanup_free_ char *where = host_display_path(x->j->h, e->dir, e->path);
        say(x, xasprintf("%s %s as it is: %s changed it later, and restoring that now "
                         "goes back to the original",
                         x->dry_run ? "would leave" : "left", where, later->owner));
        if (!x->dry_run) {
            free(later->old_value);
            later->old_value = xstrdup(e->old_value);
        }
        return true;
    }
    return false;
}

/* Whether a newer record of E's path was marked in MARKS: kept (its value
 * is not watt's to undo, so neither is an older one), or handled (the
 * older one continues the chain: the file shows the newer one's old value,
 * or its refused new one, or, in a dry run, nothing was written yet). */
static bool newer_marked(const struct restore *x, size_t i, const bool *marks)
{
    const struct journal_entry *e = &x->log->v[i];
    for (size_t k = i + 1; k < x->log->n; k++)
        if (marks[k] && x->log->v[k].dir == e->dir && streq(x->log->v[k].path, e->path))
            return true;
    return false;
}

static char *shown_value(const char *v)
{
    _cleanup_free_ char *s = journal_value_active(v);
    return journal_escape(s); /* a value in a message is printable */
}

/* A record not to be written now: say why. Returns true when it stays. */
static bool hold_back(struct restore *x, size_t i, enum journal_verdict v, const char *now,
                      const char *why)
{
    const struct journal_entry *e = &x->log->v[i];
    _cleanup_free_ char *where = host_display_path(x->j->h, e->dir, e->path);
    _cleanup_free_ char *old = shown_value(e->old_value);
    if (v == JOURNAL_REFUSED) {
        _cleanup_free_ char *epath = journal_escape(e->path);
        say(x, xasprintf("journal line %u refused: %s/%s: %s; never written, kept in the journal",
                         e->line, journal_dir_word(e->dir), epath, why));
        x->rep->refused++;
        x->kept[i] = true;
        return true;
    }
    if (x->force)
        return false;
    if (v == JOURNAL_EARLIER_BOOT) {
        say(x, xasprintf("%s: journal line %u is from an earlier boot, which set this file "
                         "anew: %s, not '%s' (--force writes it)",
                         where, e->line, x->dry_run ? "would leave it" : "left it", old));
        x->rep->earlier_boot++;
        x->done[i] = x->to_boot[i] = true;
        return true;
    }
    if (v == JOURNAL_CHANGED) {
        _cleanup_free_ char *wrote = shown_value(journal_entry_written(e));
        _cleanup_free_ char *n = journal_escape(now ? now : "");
        say(x, xasprintf("%s %s as it is: it shows '%s', not '%s' that watt wrote (journal "
                         "line %u): someone changed it since; --force puts back '%s'",
                         x->dry_run ? "would leave" : "left", where, n, wrote, e->line, old));
        x->rep->changed++;
        x->kept[i] = true;
        return true;
    }
    return false;
}

/* Write record I back (or say what a dry run would). */
static void write_one(struct restore *x, size_t i)
{
    const struct journal_entry *e = &x->log->v[i];
    x->handled[i] = true;
    if (x->dry_run) {
        _cleanup_free_ char *where = host_display_path(x->j->h, e->dir, e->path);
        _cleanup_free_ char *old = shown_value(e->old_value);
        say(x, xasprintf("would restore %s to '%s'", where, old));
        x->done[i] = true;
        x->rep->restored++;
        return;
    }
    journal_crash_point("before host_write");
    int r = journal_write_back(x->j->h, e);
    journal_crash_point("after host_write");
    if (r == -ENOENT) {
        _cleanup_free_ char *where = host_display_path(x->j->h, e->dir, e->path);
        say(x, xasprintf("%s is gone (device removed or CPU offline): nothing to restore, the "
                         "record is dropped",
                         where));
        x->done[i] = true;
        x->rep->gone++;
        return;
    }
    if (r < 0) {
        say(x, journal_describe_failure(x->j->h, e, r));
        x->rep->failed++;
        return;
    }
    x->done[i] = true;
    x->rep->restored++;
    /* A newer record of this path that failed is superseded: the value is
     * now older than its old value, and keeping it would have the next
     * restore write that in-between value back. */
    for (size_t k = i + 1; k < x->log->n; k++)
        if (!x->done[k] && x->log->v[k].dir == e->dir && streq(x->log->v[k].path, e->path) &&
            (!x->owner || streq(x->owner, x->log->v[k].owner)))
            x->done[k] = true;
}

static void restore_values(struct restore *x)
{
    for (size_t i = x->log->n; i-- > 0;) {
        const struct journal_entry *e = &x->log->v[i];
        if ((x->owner && !streq(x->owner, e->owner)) || x->done[i])
            continue;
        if (newer_marked(x, i, x->kept)) {
            x->kept[i] = true;
            continue;
        }
        if (x->owner && hand_over(x, i)) {
            x->done[i] = true;
            x->rep->restored++;
            continue;
        }
        _cleanup_free_ char *now = NULL;
        const char *why = NULL;
        enum journal_verdict v = journal_judge(x->j->h, x->log, e, &now, &why);
        if (v == JOURNAL_CHANGED && newer_marked(x, i, x->handled))
            v = JOURNAL_OURS;
        if (hold_back(x, i, v, now, why))
            continue;
        if (v == JOURNAL_UNREADABLE && !x->force) {
            say(x, journal_describe_failure(x->j->h, e, -EIO));
            x->rep->failed++;
            continue;
        }
        write_one(x, i); /* OURS, GONE, or forced */
    }
}

/* Append TEXT to the side file PATH (created 0600 with HEADER when new),
 * durably. */
static int side_append(struct journal *j, const char *path, const char *header, const char *text)
{
    int r = host_state_check(j->h, path, NULL);
    if (r < 0)
        return r;
    _cleanup_close_ int fd = host_state_open(j->h, path, O_RDWR | O_CREAT | O_APPEND, 0600);
    if (fd < 0)
        return fd;
    struct stat st;
    if (fstat(fd, &st) < 0)
        return -errno;
    if (st.st_size == 0 && header && (r = journal_write_all(fd, header, strlen(header))) < 0)
        return r;
    if ((r = journal_write_all(fd, text, strlen(text))) < 0)
        return r;
    if (fsync(fd) < 0)
        return -errno;
    return st.st_size == 0 ? host_state_fsync_dir(j->h, path) : 0;
}

/* The earlier boot's records into "<journal>.earlier-boot" (a journal
 * itself: `watt restore --journal ....earlier-boot --force` writes them).
 * On failure they stay in the journal. */
static void move_earlier_boot(struct restore *x)
{
    struct strbuf b = {0};
    for (size_t i = 0; i < x->log->n; i++)
        if (x->to_boot[i]) {
            _cleanup_free_ char *line = journal_format_record(&x->log->v[i]);
            strbuf_append(&b, line);
        }
    if (!b.len)
        return;
    _cleanup_free_ char *side = xasprintf("%s.earlier-boot", x->j->path);
    int r = side_append(x->j, side, JOURNAL_HEADER "\n", strbuf_str(&b));
    strbuf_free(&b);
    x->rep->boot_file = host_state_display_path(x->j->h, side);
    if (r == 0)
        return;
    say(x, xasprintf("cannot move the earlier boot's records to %s: %s; they stay in the journal",
                     x->rep->boot_file, strerror(-r)));
    for (size_t i = 0; i < x->log->n; i++)
        if (x->to_boot[i])
            x->done[i] = false;
    free(x->rep->boot_file);
    x->rep->boot_file = NULL;
}

/* Corrupt lines into "<journal>.corrupt", each after a comment saying
 * where it was and why. Returns whether they went (else they stay). */
static bool move_corrupt(struct restore *x)
{
    if (!x->log->nproblems)
        return true;
    struct strbuf b = {0};
    for (size_t i = 0; i < x->log->nproblems; i++)
        strbuf_appendf(&b, "# %s (from %s)\n%s\n", x->log->problems[i], x->j->display,
                       x->log->bad[i]);
    _cleanup_free_ char *side = xasprintf("%s.corrupt", x->j->path);
    int r = side_append(x->j, side, NULL, strbuf_str(&b));
    strbuf_free(&b);
    _cleanup_free_ char *shown = host_state_display_path(x->j->h, side);
    if (r < 0) {
        say(x, xasprintf("cannot move the corrupt lines to %s: %s; they stay in the journal", shown,
                         strerror(-r)));
        return false;
    }
    x->rep->corrupt_file = TAKE_PTR(shown);
    return true;
}

int journal_restore(struct journal *j, const char *owner, unsigned flags,
                    struct journal_restore_report *ret)
{
    struct journal_log log;
    _cleanup_free_ char *err = NULL;
    int r = journal_read_err(j->h, j->path, &log, &err);
    if (r < 0)
        return r;
    struct journal_restore_report rep = {0};
    _cleanup_free_ bool *done = xcalloc(log.n + 1, sizeof(*done));
    _cleanup_free_ bool *to_boot = xcalloc(log.n + 1, sizeof(*to_boot));
    _cleanup_free_ bool *kept = xcalloc(log.n + 1, sizeof(*kept));
    _cleanup_free_ bool *handled = xcalloc(log.n + 1, sizeof(*handled));
    struct restore x = {
        .j = j,
        .log = &log,
        .owner = owner,
        .dry_run = flags & JOURNAL_DRY_RUN,
        .force = flags & JOURNAL_FORCE,
        .done = done,
        .to_boot = to_boot,
        .kept = kept,
        .handled = handled,
        .rep = &rep,
    };
    restore_values(&x);
    rep.skipped = log.nproblems;
    for (size_t i = 0; i < log.nproblems; i++)
        say(&x, xstrdup(log.problems[i]));
    if (!x.dry_run) {
        journal_clear_changes(j); /* an open transaction ends with the restore */
        j->cur_tx = 0;
        move_earlier_boot(&x);
        bool moved = move_corrupt(&x);
        size_t k = 0;
        for (size_t i = 0; i < log.n; i++) { /* keep the rest, in order */
            if (done[i]) {
                journal_entry_clear(&log.v[i]);
                continue;
            }
            log.v[k++] = log.v[i];
        }
        /* Nothing left the journal: leave the file as it is. */
        bool changed = k < log.n || (moved && log.nproblems);
        log.n = k;
        if (changed)
            r = journal_rewrite(j, log.v, log.n, moved ? NULL : log.bad, moved ? 0 : log.nproblems);
        if (r < 0)
            say(&x, xasprintf("cannot rewrite the journal %s: %s", j->display, strerror(-r)));
    }
    journal_log_free(&log);
    *ret = rep;
    if (r < 0)
        return r;
    return rep.failed || rep.skipped || rep.refused || rep.changed ? -EIO : 0;
}
