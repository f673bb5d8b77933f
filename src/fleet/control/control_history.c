/* The controller's memory across restarts, and the gate that makes a
 * controller without it observe before it consolidates.
 *
 * With no CPU sample a VM used to count at its whole size: a restarted
 * controller switched on every host that was off and spread the VMs, then
 * undid it all a few ticks later. So each tick writes every VM's recent
 * samples to state_dir/history, with the wall-clock time of each:
 *
 *   watt-fleet-history 1
 *   vm web%201 1764790300.123 2 1764790300.123:0.052100 1764790000.101:0.061000
 *   end 1 crc32=89abcdef
 *
 * One line per VM: its name as a journal word (ctl_journal_word), when it
 * was last seen active and how many samples follow (at most CTL_HISTORY),
 * then TIME:SHARE pairs, most recent first (unix seconds; share of its
 * vCPUs). The last line counts the VM lines and gives the CRC-32 of every
 * byte before it. The file is written whole (a temporary file, fsynced,
 * renamed, the directory fsynced), holds only VMs seen in the last day,
 * and is read as hostile input: it must be a regular file owned by root or
 * by us and writable by no one else, in a directory of the same kind, and
 * parse strictly; otherwise it is refused, naming the file and the line,
 * and the controller starts cold. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/crc32.h"
#include "base/strbuf.h"
#include "base/util.h"
#include "fleet/control/control.h"
#include "fleet/control/opstate.h"

#define MAGIC     "watt-fleet-history 1"
#define MAX_BYTES ((size_t)64 << 20)
#define MAX_VMS   1000000
#define DAY_S     86400.0

/* ---- the gate -------------------------------------------------------- */

/* The policy's tunables (site_parse() checked them; the defaults are for a
 * site built by hand). */
static void policy(const struct controller *c, struct fleet_watt_params *ret)
{
    struct fleet_error err;
    if (ctl_policy_params(c->site, ret, &err) < 0)
        fleet_watt_params_parse(NULL, ret, &err);
}

bool ctl_warm(const struct controller *c, unsigned *ret_have, unsigned *ret_need)
{
    struct fleet_watt_params wp;
    policy(c, &wp);
    unsigned need = wp.window < CTL_HISTORY ? (unsigned)wp.window : CTL_HISTORY;
    unsigned long have = c->hist_loaded + (c->observations ? c->observations - 1 : 0);
    if (have > need)
        have = need;
    if (ret_have)
        *ret_have = (unsigned)have;
    if (ret_need)
        *ret_need = need;
    return have >= need;
}

double ctl_vm_demand(const struct controller *c, const struct ctl_vm *v)
{
    if (!isnan(v->util))
        return v->util;
    if (v->hist_n)
        return v->hist[0];
    return ctl_warm(c, NULL, NULL) ? 1.0 : 0.0;
}

static bool planned_too(const struct ctl_plan *p, const struct ctl_action *a)
{
    for (size_t i = 0; i < p->n; i++)
        if (p->v[i].kind == a->kind && p->v[i].vm == a->vm && p->v[i].host == a->host &&
            p->v[i].dst == a->dst)
            return true;
    return false;
}

void ctl_warm_notes(struct controller *c, const struct ctl_plan *would, struct ctl_plan *p)
{
    unsigned have, need;
    if (ctl_warm(c, &have, &need))
        return;
    const struct site *s = c->site;
    if (c->history_error[0])
        ctl_plan_note(p, "%s", c->history_error);
    ctl_plan_note(p, "observing: %u of %u samples since start; only overloads act until %u", have,
                  need, need);
    struct strbuf held = {0};
    for (size_t i = 0; i < would->n; i++) {
        const struct ctl_action *a = &would->v[i];
        if (planned_too(p, a))
            continue;
        if (a->kind == CTL_MIGRATE)
            strbuf_appendf(&held, "%smigrate %s %s -> %s", held.len ? ", " : "", c->vm[a->vm].name,
                           s->hosts[a->src].name, s->hosts[a->dst].name);
        else if (a->kind == CTL_POWER_ON)
            strbuf_appendf(&held, "%sswitch on %s", held.len ? ", " : "", s->hosts[a->host].name);
    }
    if (held.len)
        ctl_plan_note(p, "observing: held back %s", strbuf_str(&held));
    strbuf_free(&held);
}

/* ---- samples --------------------------------------------------------- */

void ctl_history_push(struct ctl_vm *v, double u, double t_unix_s)
{
    memmove(v->hist + 1, v->hist, (CTL_HISTORY - 1) * sizeof(double));
    memmove(v->hist_t + 1, v->hist_t, (CTL_HISTORY - 1) * sizeof(double));
    v->hist[0] = u;
    v->hist_t[0] = t_unix_s;
    if (v->hist_n < CTL_HISTORY)
        v->hist_n++;
}

/* ---- reading --------------------------------------------------------- */

struct vm_line {
    char name[FLEET_NAME_MAX * 2];
    double seen;
    unsigned n;
    double t[CTL_HISTORY], u[CTL_HISTORY];
};

/* A number as this file writes it: digits, at most one '.', nothing else
 * (no sign, exponent, blank, "inf" or "nan" that strtod would take). */
static bool number(const char *s, size_t len, double *ret)
{
    size_t dots = 0;
    if (len == 0 || len > 32 || s[0] < '0' || s[0] > '9' || s[len - 1] == '.')
        return false;
    for (size_t i = 0; i < len; i++) {
        if (s[i] == '.')
            dots++;
        else if (s[i] < '0' || s[i] > '9')
            return false;
    }
    if (dots > 1)
        return false;
    char buf[33];
    memcpy(buf, s, len);
    buf[len] = '\0';
    *ret = strtod(buf, NULL);
    return isfinite(*ret);
}

/* The next word of *P (words are split by exactly one space). */
static bool word(const char **p, const char **ret, size_t *ret_len)
{
    const char *s = *p;
    if (!s)
        return false;
    const char *sp = strchr(s, ' ');
    size_t len = sp ? (size_t)(sp - s) : strlen(s);
    if (len == 0)
        return false;
    *ret = s;
    *ret_len = len;
    *p = sp ? sp + 1 : NULL;
    return true;
}

/* "vm WORD SEEN N T:U ..." into RET; NULL, or what is wrong. */
static const char *parse_vm(const char *line, struct vm_line *ret)
{
    const char *p = line, *w;
    size_t len;
    double x;
    if (!word(&p, &w, &len) || len != 2 || strncmp(w, "vm", 2))
        return "want 'vm NAME SEEN N TIME:SHARE...' or 'end N crc32=X'";
    char name[sizeof(ret->name) * 3];
    if (!word(&p, &w, &len) || len >= sizeof(name))
        return "no VM name, or one too long";
    memcpy(name, w, len);
    name[len] = '\0';
    if (ctl_journal_unword(name, ret->name, sizeof(ret->name)) < 0 || !ret->name[0])
        return "not a VM name (%XX escapes, at most 95 bytes)";
    if (!word(&p, &w, &len) || !number(w, len, &ret->seen) || ret->seen <= 0)
        return "SEEN: want unix seconds";
    if (!word(&p, &w, &len) || !number(w, len, &x) || x != floor(x) || x < 1 || x > CTL_HISTORY)
        return "N: want 1 to 30 samples";
    ret->n = (unsigned)x;
    for (unsigned k = 0; k < ret->n; k++) {
        if (!word(&p, &w, &len))
            return "fewer samples than N";
        const char *colon = memchr(w, ':', len);
        if (!colon || !number(w, (size_t)(colon - w), &ret->t[k]) ||
            !number(colon + 1, len - (size_t)(colon + 1 - w), &ret->u[k]))
            return "a sample: want TIME:SHARE";
        if (ret->t[k] <= 0 || ret->u[k] > 1)
            return "a sample: time not positive, or share above 1";
        if ((k == 0 && ret->t[0] > ret->seen) || (k > 0 && ret->t[k] > ret->t[k - 1]))
            return "samples not most recent first, or after SEEN";
    }
    if (p)
        return "more samples than N";
    return NULL;
}

/* "end N crc32=XXXXXXXX", exactly. */
static bool parse_end(const char *line, size_t *ret_n, uint32_t *ret_crc)
{
    const char *p = line + 4, *w;
    size_t len;
    double n;
    if (!word(&p, &w, &len) || !number(w, len, &n) || n != floor(n) || n > MAX_VMS)
        return false;
    if (!word(&p, &w, &len) || p || len != 14 || strncmp(w, "crc32=", 6) ||
        strspn(w + 6, "0123456789abcdef") != 8)
        return false;
    *ret_n = (size_t)n;
    *ret_crc = (uint32_t)strtoul(w + 6, NULL, 16);
    return true;
}

struct entry {
    uint64_t hash; /* of the VM's name */
    size_t off;    /* where its line starts */
    size_t lineno;
};

struct parsed {
    char *buf; /* the file; parse() ends each line with a NUL */
    size_t len;
    struct entry *v;
    size_t n;
};

static int line_error(struct fleet_error *err, const char *path, size_t lineno, const char *what)
{
    fleet_error_set(err, "%s line %zu: %s", path, lineno, what);
    return -EINVAL;
}

static uint64_t name_hash(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static int cmp_entry(const void *a, const void *b)
{
    const struct entry *x = a, *y = b;
    if (x->hash != y->hash)
        return (x->hash > y->hash) - (x->hash < y->hash);
    return (x->lineno > y->lineno) - (x->lineno < y->lineno);
}

/* A VM named twice: refused (the writer never does it). Equal hashes are
 * compared by name. Sorts P->v. */
static int no_twice(struct parsed *p, const char *path, struct fleet_error *err)
{
    if (p->n < 2)
        return 0; /* and qsort() takes no NULL array, even empty */
    qsort(p->v, p->n, sizeof(*p->v), cmp_entry);
    for (size_t i = 1; i < p->n; i++)
        for (size_t k = i; k-- > 0 && p->v[k].hash == p->v[i].hash;) {
            struct vm_line a, b;
            if (!parse_vm(p->buf + p->v[k].off, &a) && !parse_vm(p->buf + p->v[i].off, &b) &&
                streq(a.name, b.name))
                return line_error(err, path, p->v[i].lineno, "this VM has a line already");
        }
    return 0;
}

/* Check every line of P->buf, and note where the VM lines are. */
static int parse(struct parsed *p, const char *path, struct fleet_error *err)
{
    size_t lineno = 0, cap = 0, count = 0;
    uint32_t crc = 0, want = 0;
    char *line = p->buf, *end = p->buf + p->len;
    if (p->len == 0 || end[-1] != '\n')
        return line_error(err, path, 1, "empty, or the last line is cut short");
    bool ended = false;
    for (char *next; line < end; line = next) {
        next = (char *)memchr(line, '\n', (size_t)(end - line)) + 1;
        lineno++;
        if (ended)
            return line_error(err, path, lineno, "text after the end line");
        want = crc; /* the checksum of every byte before this line */
        crc = crc32_update(crc, line, (size_t)(next - line));
        next[-1] = '\0';
        if (strlen(line) != (size_t)(next - 1 - line))
            return line_error(err, path, lineno, "a NUL byte");
        if (lineno == 1) {
            if (!streq(line, MAGIC))
                return line_error(err, path, 1, "not '" MAGIC "' (another version, or not ours)");
            continue;
        }
        if (strncmp(line, "end ", 4) == 0) {
            uint32_t got;
            if (!parse_end(line, &count, &got))
                return line_error(err, path, lineno, "want 'end N crc32=X' (8 hex digits)");
            if (count != p->n)
                return line_error(err, path, lineno, "N is not the count of VM lines");
            if (got != want)
                return line_error(err, path, lineno, "the checksum does not match (damaged)");
            ended = true;
            continue;
        }
        struct vm_line v;
        const char *bad = parse_vm(line, &v);
        if (bad)
            return line_error(err, path, lineno, bad);
        if (p->n >= MAX_VMS)
            return line_error(err, path, lineno, "more than 1000000 VMs");
        if (p->n == cap)
            p->v = grow_array(p->v, sizeof(*p->v), p->n, &cap);
        p->v[p->n++] = (struct entry){name_hash(v.name), (size_t)(line - p->buf), lineno};
    }
    if (!ended)
        return line_error(err, path, lineno, "no 'end N crc32=X' line after it");
    return no_twice(p, path, err);
}

/* Put the samples young enough into the VMs. */
static void apply(struct controller *c, const struct parsed *p, double now_unix_s)
{
    struct fleet_watt_params wp;
    policy(c, &wp);
    double interval = c->site->limits.interval_s, max_age = wp.window * interval;
    c->hist_loaded = 0;
    for (size_t i = 0; i < p->n; i++) {
        struct vm_line v;
        if (parse_vm(p->buf + p->v[i].off, &v))
            continue; /* parse() checked it */
        struct ctl_vm keep = {.hist_n = 0};
        for (unsigned k = 0; k < v.n && keep.hist_n < CTL_HISTORY; k++) {
            double age = now_unix_s - v.t[k];
            /* too old, or from a clock that was ahead of this one */
            if (age > max_age || age < -interval)
                continue;
            keep.hist[keep.hist_n] = v.u[k];
            keep.hist_t[keep.hist_n++] = v.t[k];
        }
        if (!keep.hist_n)
            continue;
        int32_t vi = ctl_vm_index(c, v.name, true);
        struct ctl_vm *cv = &c->vm[vi];
        memcpy(cv->hist, keep.hist, sizeof(cv->hist));
        memcpy(cv->hist_t, keep.hist_t, sizeof(cv->hist_t));
        cv->hist_n = keep.hist_n;
        cv->seen_unix_s = v.seen;
        if (keep.hist_n > c->hist_loaded)
            c->hist_loaded = keep.hist_n;
    }
}

static int read_all(int fd, const char *path, char **ret, size_t *ret_len, struct fleet_error *err)
{
    struct stat st;
    if (fstat(fd, &st) < 0) {
        int e = errno;
        fleet_error_set(err, "cannot stat %s: %s", path, strerror(e));
        return -e;
    }
    if (!S_ISREG(st.st_mode)) {
        fleet_error_set(err, "%s is not a regular file: refused", path);
        return -EPERM;
    }
    int r = opstate_trusted(path, &st, err);
    if (r < 0)
        return r;
    if ((size_t)st.st_size > MAX_BYTES) {
        fleet_error_set(err, "%s: %lld bytes, more than a history can be (64 MiB)", path,
                        (long long)st.st_size);
        return -EFBIG;
    }
    size_t len = (size_t)st.st_size;
    char *buf = xmalloc(len + 1);
    ssize_t got = pread(fd, buf, len, 0);
    if (got != (ssize_t)len) {
        int e = got < 0 ? errno : EIO;
        fleet_error_set(err, "cannot read %s: %s", path, strerror(e));
        free(buf);
        return -e;
    }
    buf[len] = '\0';
    *ret = buf;
    *ret_len = len;
    return 0;
}

int ctl_history_load(struct controller *c, double now_unix_s, struct fleet_error *err)
{
    const char *dir = c->site->state_dir;
    _cleanup_free_ char *path = xasprintf("%s/history", dir);
    _cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    struct stat st;
    if (dfd < 0 && errno == ENOENT)
        return 0;
    if (dfd < 0 || fstat(dfd, &st) < 0) {
        int e = errno;
        fleet_error_set(err, "cannot open %s: %s", dir, strerror(e));
        return -e;
    }
    int r = opstate_trusted(dir, &st, err);
    if (r < 0)
        return r;
    _cleanup_close_ int fd =
        openat(dfd, "history", O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT)
        return 0;
    if (fd < 0) {
        int e = errno;
        fleet_error_set(err, "cannot open %s: %s", path,
                        e == ELOOP ? "a symbolic link, refused" : strerror(e));
        return -e;
    }
    struct parsed p = {0};
    r = read_all(fd, path, &p.buf, &p.len, err);
    if (r == 0)
        r = parse(&p, path, err);
    if (r == 0)
        apply(c, &p, now_unix_s);
    free(p.buf);
    free(p.v);
    return r;
}

/* ---- writing --------------------------------------------------------- */

static int write_all(int fd, const char *s, size_t len)
{
    while (len) {
        ssize_t w = write(fd, s, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return w < 0 ? -errno : -EIO;
        s += w;
        len -= (size_t)w;
    }
    return 0;
}

int ctl_history_save(const struct controller *c, double now_unix_s, struct fleet_error *err)
{
    const char *dir = c->site->state_dir;
    struct strbuf b = {0};
    strbuf_append(&b, MAGIC "\n");
    size_t n = 0;
    for (size_t i = 0; i < c->n_vm; i++) {
        const struct ctl_vm *v = &c->vm[i];
        if (!v->hist_n || now_unix_s - v->seen_unix_s > DAY_S)
            continue;
        _cleanup_free_ char *w = ctl_journal_word(v->name);
        strbuf_appendf(&b, "vm %s %.3f %u", w, v->seen_unix_s, v->hist_n);
        for (unsigned k = 0; k < v->hist_n; k++)
            strbuf_appendf(&b, " %.3f:%.6f", v->hist_t[k], v->hist[k]);
        strbuf_putc(&b, '\n');
        n++;
    }
    strbuf_appendf(&b, "end %zu crc32=%08x\n", n, crc32_update(0, b.s, b.len));
    const char *what = "open";
    bool renamed = false;
    _cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    _cleanup_close_ int fd = -1;
    int r = dfd < 0 ? -errno : 0;
    /* a file of that name left by a crash, or put there: never written through */
    if (r == 0 && unlinkat(dfd, "history.tmp", 0) < 0 && errno != ENOENT)
        r = -errno;
    if (r == 0 && (fd = openat(dfd, "history.tmp",
                               O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600)) < 0)
        r = -errno;
    if (r == 0 && (what = "write", r = write_all(fd, b.s, b.len)) == 0 && fsync(fd) < 0)
        r = -errno;
    if (r == 0 && (what = "rename", renameat(dfd, "history.tmp", dfd, "history") < 0))
        r = -errno;
    renamed = r == 0;
    if (r == 0 && (what = "fsync the folder of", fsync(dfd) < 0))
        r = -errno;
    if (r < 0) {
        fleet_error_set(err, "cannot %s %s/history: %s", what, dir, strerror(-r));
        if (dfd >= 0 && fd >= 0 && !renamed)
            unlinkat(dfd, "history.tmp", 0);
    }
    strbuf_free(&b);
    return r;
}
