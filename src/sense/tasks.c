/* tasks: the /proc/PID scan (tasks.h).
 *
 * Cost is what matters here: `watt top` and the agent scan every one or
 * two seconds. A process costs one file (stat) per scan; its cmdline and
 * cgroup are read once per identity and copied from the previous scan
 * after that; the per-thread status walk is opt-in. Paths are built on the
 * stack, and prev and the new scan are merged by ascending pid, so nothing
 * is searched. */
#include "sense/tasks.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/parse.h"
#include "base/util.h"
#include "sense/procstat.h" /* PROCSTAT_USER_HZ: utime and stime are in USER_HZ too */
#include "sense/sample.h"   /* VAL_NONE */

#define TASKS_MAX_DEFAULT 65536
#define TASKS_CMDLINE_MAX 256         /* bytes, with the NUL (tasks.h) */
#define TASKS_CGROUP_MAX  4096        /* a longer "path" is garbage */
#define TASKS_MAX_DIAGS   8           /* per scan or diff: then one line with the count */
#define PF_KTHREAD        0x00200000u /* include/linux/sched.h */
/* Fields 3..39 of stat: what follows the comm's ')'. */
#define STAT_FIRST 3
#define STAT_LAST  39

static void add_diag(struct diags *d, unsigned *count, const char *where, int err, const char *what)
{
    if (d && (*count)++ < TASKS_MAX_DIAGS)
        diags_add(d, where, err, "%s", what);
}

/* A whole token of decimal digits, without overflow. */
static bool tok_u64(const char *s, size_t n, uint64_t *ret)
{
    if (n == 0)
        return false;
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        unsigned dg = (unsigned)(s[i] - '0');
        if (v > (UINT64_MAX - dg) / 10)
            return false;
        v = v * 10 + dg;
    }
    *ret = v;
    return true;
}

/* Copy SRC (N bytes) into DST of size CAP as a display string: control
 * bytes become '?' (a comm or an argument may hold an escape sequence,
 * and these strings go to a terminal), and a cut never splits a UTF-8
 * sequence. */
static void copy_display(char *dst, size_t cap, const char *src, size_t n)
{
    if (n >= cap) {
        /* src[n] is the first byte left out: back off while it continues a
         * sequence, at most 3 bytes (the longest sequence is 4) */
        n = cap - 1;
        for (size_t k = 0; k < 3 && n > 0 && ((unsigned char)src[n] & 0xC0) == 0x80; k++)
            n--;
    }
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)src[i];
        dst[i] = c < 0x20 || c == 0x7f ? '?' : (char)c;
    }
    dst[n] = '\0';
}

/* Split what follows ')' into fields 3..39; returns how many were found. */
static unsigned split_fields(const char *p, const char *end, const char **tok, size_t *tlen)
{
    unsigned k = 0;
    while (k < STAT_LAST - STAT_FIRST + 1) {
        while (p < end && *p == ' ')
            p++;
        if (p >= end || *p == '\n')
            break;
        const char *s = p;
        while (p < end && *p != ' ' && *p != '\n')
            p++;
        tok[k] = s;
        tlen[k++] = (size_t)(p - s);
    }
    return k;
}

/* "PID (COMM) S ..." The comm is anything (prctl(PR_SET_NAME) takes any
 * bytes, "a) b (c" included), so it ends at the LAST ')' of the text: all
 * later fields are numbers. Fields up to starttime (22) are required;
 * processor (39) reads as -1 when absent. Fills the stat fields only. */
int tasks_parse_stat(const char *text, size_t len, struct task_info *ret)
{
    const char *end = text + len, *close = NULL;
    for (const char *s = end; s > text; s--)
        if (s[-1] == ')') {
            close = s - 1;
            break;
        }
    const char *open = memchr(text, '(', len);
    if (!open || !close || close < open || open < text + 2 || open[-1] != ' ')
        return -EINVAL;
    uint64_t pid;
    if (!tok_u64(text, (size_t)(open - 1 - text), &pid) || pid == 0 || pid > INT32_MAX)
        return -EINVAL;
    const char *tok[STAT_LAST - STAT_FIRST + 1];
    size_t tlen[STAT_LAST - STAT_FIRST + 1];
    unsigned nf = split_fields(close + 1, end, tok, tlen);
#define F(n) ((n)-STAT_FIRST)
    uint64_t flags, utime, stime, threads, start, cpu = 0;
    if (nf < 22 - STAT_FIRST + 1 || tlen[F(3)] != 1 || !tok_u64(tok[F(9)], tlen[F(9)], &flags) ||
        !tok_u64(tok[F(14)], tlen[F(14)], &utime) || !tok_u64(tok[F(15)], tlen[F(15)], &stime) ||
        !tok_u64(tok[F(20)], tlen[F(20)], &threads) || !tok_u64(tok[F(22)], tlen[F(22)], &start) ||
        utime > UINT64_MAX - stime)
        return -EINVAL;
    char state = tok[F(3)][0];
    bool have_cpu = nf > F(39);
    if (!((state >= 'A' && state <= 'Z') || (state >= 'a' && state <= 'z')) ||
        (have_cpu && (!tok_u64(tok[F(39)], tlen[F(39)], &cpu) || cpu > INT32_MAX)))
        return -EINVAL;
    ret->pid = (int32_t)pid;
    copy_display(ret->comm, sizeof(ret->comm), open + 1, (size_t)(close - open - 1));
    ret->state = state;
    ret->kthread = flags & PF_KTHREAD;
    ret->utime = utime;
    ret->stime = stime;
    ret->nthreads = threads > UINT32_MAX ? UINT32_MAX : (unsigned)threads;
    ret->start_ticks = start;
    ret->last_cpu = have_cpu ? (int)cpu : -1;
#undef F
    return 0;
}

/* "Key:\tVALUE" lines; a key listed twice counts the first time. */
int tasks_parse_status(const char *text, size_t len, uint64_t *vol, uint64_t *invol, int32_t *tgid)
{
    static const char *const keys[] = {"voluntary_ctxt_switches", "nonvoluntary_ctxt_switches",
                                       "Tgid"};
    uint64_t v[3] = {VAL_NONE, VAL_NONE, VAL_NONE};
    const char *end = text + len;
    for (const char *l = text; l < end;) {
        const char *nl = memchr(l, '\n', (size_t)(end - l)), *le = nl ? nl : end;
        const char *colon = memchr(l, ':', (size_t)(le - l));
        for (size_t k = 0; colon && k < ARRAY_SIZE(keys); k++) {
            if (v[k] != VAL_NONE || strlen(keys[k]) != (size_t)(colon - l) ||
                memcmp(l, keys[k], (size_t)(colon - l)) != 0)
                continue;
            const char *s = colon + 1, *e = le;
            while (s < e && (*s == ' ' || *s == '\t'))
                s++;
            while (e > s && (e[-1] == ' ' || e[-1] == '\t'))
                e--;
            if (!tok_u64(s, (size_t)(e - s), &v[k]) || v[k] == VAL_NONE)
                return -EINVAL;
        }
        l = nl ? nl + 1 : end;
    }
    if (v[2] != VAL_NONE && (v[2] == 0 || v[2] > INT32_MAX))
        return -EINVAL;
    if (vol)
        *vol = v[0];
    if (invol)
        *invol = v[1];
    if (tgid)
        *tgid = v[2] == VAL_NONE ? -1 : (int32_t)v[2];
    return 0;
}

/* Whether a v1 controller list ("cpu,cpuacct", "name=systemd") names the
 * cpu or cpuacct controller. */
static bool lists_cpu(const char *s, const char *e)
{
    while (s < e) {
        const char *c = memchr(s, ',', (size_t)(e - s)), *te = c ? c : e;
        size_t n = (size_t)(te - s);
        if ((n == 3 && memcmp(s, "cpu", 3) == 0) || (n == 7 && memcmp(s, "cpuacct", 7) == 0))
            return true;
        s = c ? c + 1 : e;
    }
    return false;
}

/* "ID:CONTROLLERS:PATH" lines (cgroups(7)); the path is the rest of the
 * line and may hold ':'. v2's line is "0::PATH". */
char *tasks_parse_cgroup(const char *text, size_t len)
{
    const char *end = text + len, *v1 = NULL, *v1e = NULL;
    for (const char *l = text; l < end;) {
        const char *nl = memchr(l, '\n', (size_t)(end - l)), *le = nl ? nl : end;
        const char *c1 = memchr(l, ':', (size_t)(le - l));
        const char *c2 = c1 ? memchr(c1 + 1, ':', (size_t)(le - c1 - 1)) : NULL;
        bool v2 = c1 == l + 1 && *l == '0' && c2 == c1 + 1;
        const char *path = c2 ? c2 + 1 : NULL;
        size_t plen = path ? (size_t)(le - path) : 0;
        l = nl ? nl + 1 : end;
        if (!plen || plen >= TASKS_CGROUP_MAX || memchr(path, '\0', plen))
            continue;
        if (v2) {
            char *r = xmalloc(plen + 1);
            copy_display(r, plen + 1, path, plen);
            return r;
        }
        if (!v1 && lists_cpu(c1 + 1, c2)) {
            v1 = path;
            v1e = le;
        }
    }
    if (!v1)
        return NULL;
    size_t n = (size_t)(v1e - v1);
    char *r = xmalloc(n + 1);
    copy_display(r, n + 1, v1, n);
    return r;
}

/* argv as one line: the NULs between arguments become spaces, trailing
 * NULs and spaces go (a process that rewrote its argv pads with either),
 * and at most TASKS_CMDLINE_MAX - 1 bytes are kept. NULL when empty (a
 * kernel thread, a zombie). */
static char *cmdline_join(const char *text, size_t len)
{
    while (len > 0 && (text[len - 1] == '\0' || text[len - 1] == ' '))
        len--;
    if (len == 0)
        return NULL;
    char *r = xmalloc(len < TASKS_CMDLINE_MAX ? len + 1 : TASKS_CMDLINE_MAX);
    copy_display(r, TASKS_CMDLINE_MAX, text, len);
    for (size_t i = 0; r[i]; i++)
        if (r[i] == '?' && text[i] == '\0')
            r[i] = ' ';
    return r;
}

struct scan {
    struct host *h;
    const struct tasks_opts *o;
    const struct tasks_snapshot *prev;
    size_t pi; /* merge cursor in prev->t */
    struct diags *d;
    unsigned ndiags;
    size_t unreadable; /* stat files that exist but could not be read */
    int unreadable_err;
    char unreadable_path[64];
};

/* The previous scan's entry for the same process, to copy its cmdline and
 * cgroup from. Same pid and start time is the same process; the same comm
 * too means it has not exec()ed since, which would change its cmdline. */
static const struct task_info *prev_same(struct scan *sc, const struct task_info *t)
{
    const struct tasks_snapshot *p = sc->prev;
    if (!p)
        return NULL;
    while (sc->pi < p->n && p->t[sc->pi].pid < t->pid)
        sc->pi++;
    if (sc->pi >= p->n)
        return NULL;
    const struct task_info *o = &p->t[sc->pi];
    return o->pid == t->pid && o->start_ticks == t->start_ticks && streq(o->comm, t->comm) ? o
                                                                                           : NULL;
}

static void garbage(struct scan *sc, const char *path, const char *what)
{
    _cleanup_free_ char *where = host_display_path(sc->h, HOST_PROC, path);
    add_diag(sc->d, &sc->ndiags, where, 0, what);
}

/* One status file's switches added to *vol and *invol; false when they
 * are not in it (the thread is gone, or the file is not a status file). */
static bool add_status(struct scan *sc, const char *path, uint64_t *vol, uint64_t *invol)
{
    _cleanup_free_ char *text = NULL;
    size_t len;
    uint64_t v, iv;
    if (host_read(sc->h, HOST_PROC, path, &text, &len) < 0)
        return false;
    if (tasks_parse_status(text, len, &v, &iv, NULL) < 0 || v == VAL_NONE || iv == VAL_NONE) {
        garbage(sc, path, "no voluntary_ctxt_switches or nonvoluntary_ctxt_switches number");
        return false;
    }
    *vol += v;
    *invol += iv;
    return true;
}

/* Context switches summed over the live threads. A process with one
 * thread is its leader, whose PID/status has the same counters, so the
 * task/ listing is skipped (unless the leader is a zombie: then the one
 * live thread is another). */
static void read_ctxsw(struct scan *sc, const char *name, struct task_info *t)
{
    char path[64];
    uint64_t vol = 0, invol = 0;
    bool any = false;
    if (t->nthreads <= 1 && t->state != 'Z') {
        snprintf(path, sizeof(path), "%s/status", name);
        any = add_status(sc, path, &vol, &invol);
    } else {
        char **tids;
        size_t n;
        snprintf(path, sizeof(path), "%s/task", name);
        if (host_list(sc->h, HOST_PROC, path, &tids, &n) < 0)
            return;
        for (size_t i = 0; i < n; i++) {
            if (!str_all_digits(tids[i]) || strlen(tids[i]) > 10)
                continue;
            snprintf(path, sizeof(path), "%s/task/%s/status", name, tids[i]);
            any |= add_status(sc, path, &vol, &invol); /* a thread that exited: skipped */
        }
        host_free_list(tids, n);
    }
    if (any) {
        t->vol_ctxsw = vol;
        t->invol_ctxsw = invol;
    }
}

static char *read_cgroup(struct scan *sc, const char *name)
{
    char path[64];
    _cleanup_free_ char *text = NULL;
    size_t len;
    snprintf(path, sizeof(path), "%s/cgroup", name);
    int r = host_read(sc->h, HOST_PROC, path, &text, &len);
    if (r == -ENOENT || r == -ESRCH)
        return NULL; /* gone meanwhile, or no cgroup support */
    if (r < 0) {
        _cleanup_free_ char *where = host_display_path(sc->h, HOST_PROC, path);
        add_diag(sc->d, &sc->ndiags, where, -r, "cannot read the process's cgroup");
        return NULL;
    }
    char *cg = tasks_parse_cgroup(text, len);
    if (!cg && len > 0)
        garbage(sc, path, "no \"0::PATH\" line and no cpu or cpuacct controller line");
    return cg;
}

static char *read_cmdline(struct scan *sc, const char *name)
{
    char path[64];
    _cleanup_free_ char *text = NULL;
    size_t len;
    snprintf(path, sizeof(path), "%s/cmdline", name);
    if (host_read(sc->h, HOST_PROC, path, &text, &len) < 0)
        return NULL;
    return cmdline_join(text, len);
}

/* One process into T: 0, -ENOENT when it is gone, -EBADMSG for garbage,
 * or another -errno when its stat cannot be read. */
static int scan_one(struct scan *sc, const char *name, int32_t pid, struct task_info *t)
{
    char path[64];
    _cleanup_free_ char *text = NULL;
    size_t len;
    snprintf(path, sizeof(path), "%s/stat", name);
    int r = host_read(sc->h, HOST_PROC, path, &text, &len);
    if (r == -ENOENT || r == -ESRCH)
        return -ENOENT; /* exited between the listing and the read */
    if (r < 0) {
        if (sc->unreadable++ == 0) {
            sc->unreadable_err = -r;
            snprintf(sc->unreadable_path, sizeof(sc->unreadable_path), "%s", path);
        }
        return r;
    }
    *t = (struct task_info){.vol_ctxsw = VAL_NONE, .invol_ctxsw = VAL_NONE};
    if (tasks_parse_stat(text, len, t) < 0 || t->pid != pid) {
        garbage(sc, path,
                t->pid && t->pid != pid ? "the pid in it is not the directory's"
                                        : "not \"PID (COMM) STATE ...\" with 22 fields");
        return -EBADMSG;
    }
    const struct task_info *old = prev_same(sc, t);
    if (sc->o->cmdline && !t->kthread)
        t->cmdline = old && old->cmdline ? xstrdup(old->cmdline) : read_cmdline(sc, name);
    if (sc->o->cgroups)
        t->cgroup = old && old->cgroup ? xstrdup(old->cgroup) : read_cgroup(sc, name);
    if (sc->o->ctxsw)
        read_ctxsw(sc, name, t);
    return 0;
}

/* A /proc entry that is a process: digits, no leading zero, a pid. */
static int32_t name_pid(const char *name)
{
    if (!str_all_digits(name) || name[0] == '0' || strlen(name) > 10)
        return 0;
    uint64_t v;
    return parse_u64(name, &v) == 0 && v <= INT32_MAX ? (int32_t)v : 0;
}

static int task_cmp(const void *a, const void *b)
{
    int32_t x = ((const struct task_info *)a)->pid, y = ((const struct task_info *)b)->pid;
    return (x > y) - (x < y);
}

static void scan_report(struct scan *sc)
{
    if (sc->ndiags > TASKS_MAX_DIAGS && sc->d) {
        _cleanup_free_ char *where = host_display_path(sc->h, HOST_PROC, "*");
        diags_add(sc->d, where, 0, "%u more problems like the above not listed",
                  sc->ndiags - TASKS_MAX_DIAGS);
    }
    if (sc->unreadable && sc->d) {
        _cleanup_free_ char *where = host_display_path(sc->h, HOST_PROC, sc->unreadable_path);
        diags_add(sc->d, where, sc->unreadable_err, "%zu process%s left out: %s", sc->unreadable,
                  sc->unreadable == 1 ? "" : "es", strerror(sc->unreadable_err));
    }
}

int tasks_scan(struct host *h, const struct tasks_opts *o, const struct tasks_snapshot *prev,
               struct tasks_snapshot *ret, struct diags *d)
{
    static const struct tasks_opts defaults = {0};
    if (!o)
        o = &defaults;
    struct tasks_snapshot s = {.mono_ns = now_monotonic_ns()};
    size_t max = o->max_tasks ? o->max_tasks : TASKS_MAX_DEFAULT;
    char **names;
    size_t n;
    int r = host_list(h, HOST_PROC, ".", &names, &n);
    if (r < 0) {
        if (d) {
            _cleanup_free_ char *where = host_display_path(h, HOST_PROC, "");
            diags_add(d, where, r, "cannot list the processes: %s", strerror(-r));
        }
        return r;
    }
    size_t npids = 0;
    for (size_t i = 0; i < n; i++)
        npids += name_pid(names[i]) > 0;
    s.t = xcalloc(npids < max ? (npids ? npids : 1) : max, sizeof(*s.t));
    struct scan sc = {.h = h, .o = o, .prev = prev, .d = d};
    bool sorted = true;
    for (size_t i = 0; i < n; i++) {
        int32_t pid = name_pid(names[i]);
        if (pid <= 0)
            continue;
        if (s.n == max) {
            s.truncated = true;
            break;
        }
        r = scan_one(&sc, names[i], pid, &s.t[s.n]);
        if (r == -ENOENT)
            s.vanished++;
        if (r < 0)
            continue;
        sorted &= s.n == 0 || s.t[s.n - 1].pid < pid;
        s.n++;
    }
    host_free_list(names, n);
    /* host_list sorts naturally, so only a tree with odd names gets here;
     * the cache merge above then found less, which costs reads only. */
    if (!sorted)
        qsort(s.t, s.n, sizeof(*s.t), task_cmp);
    scan_report(&sc);
    *ret = s;
    return 0;
}

void tasks_snapshot_clear(struct tasks_snapshot *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->n; i++) {
        free(s->t[i].cmdline);
        free(s->t[i].cgroup);
    }
    free(s->t);
    *s = (struct tasks_snapshot){0};
}

const struct task_info *tasks_find(const struct tasks_snapshot *s, int32_t pid)
{
    if (!s || !s->n)
        return NULL;
    struct task_info key = {.pid = pid};
    return bsearch(&key, s->t, s->n, sizeof(*s->t), task_cmp);
}

int tasks_tgid_of(struct host *h, int32_t tid, int32_t *ret)
{
    if (tid <= 0)
        return -EINVAL;
    char path[32];
    _cleanup_free_ char *text = NULL;
    size_t len;
    int32_t tgid;
    snprintf(path, sizeof(path), "%d/status", tid);
    int r = host_read(h, HOST_PROC, path, &text, &len);
    if (r == -ESRCH)
        return -ENOENT;
    if (r < 0)
        return r;
    r = tasks_parse_status(text, len, NULL, NULL, &tgid);
    if (r < 0 || tgid < 0)
        return -EINVAL;
    *ret = tgid;
    return 0;
}

struct diff {
    struct tasks_diff_stats st;
    struct diags *d;
    unsigned ndiags;
};

/* A process seen in both snapshots: its counters' differences. */
static void delta_same(struct diff *df, const struct task_info *x, const struct task_info *y,
                       struct task_delta *dl)
{
    uint64_t cx = x->utime + x->stime, cy = y->utime + y->stime;
    dl->vol_ctxsw = VAL_NONE;
    if (cy < cx) {
        char where[64];
        char what[128];
        snprintf(where, sizeof(where), "process %d (%s)", y->pid, y->comm);
        snprintf(what, sizeof(what), "CPU time went backwards (%llu to %llu ticks): left out",
                 (unsigned long long)cx, (unsigned long long)cy);
        df->st.backwards++;
        add_diag(df->d, &df->ndiags, where, 0, what);
        return;
    }
    dl->cpu_s = (double)(cy - cx) / PROCSTAT_USER_HZ;
    /* The sum over live threads drops when a thread exits with its
     * switches: unknown then, and not garbage, so no diag. */
    if (x->vol_ctxsw != VAL_NONE && y->vol_ctxsw != VAL_NONE && y->vol_ctxsw >= x->vol_ctxsw)
        dl->vol_ctxsw = y->vol_ctxsw - x->vol_ctxsw;
}

int tasks_diff(const struct tasks_snapshot *a, const struct tasks_snapshot *b,
               struct task_delta **ret, size_t *ret_n, struct tasks_diff_stats *st, struct diags *d)
{
    if (!a || !b || b->mono_ns < a->mono_ns)
        return -EINVAL;
    struct diff df = {.d = d};
    struct task_delta *v = b->n ? xcalloc(b->n, sizeof(*v)) : NULL;
    int32_t a_last = a->n ? a->t[a->n - 1].pid : 0, b_last = b->n ? b->t[b->n - 1].pid : 0;
    /* The youngest process a read: one missing from a that started no
     * later was alive then, only unreadable (EACCES, garbage): its whole
     * lifetime is not this window's. */
    uint64_t a_youngest = 0;
    for (size_t k = 0; k < a->n; k++)
        if (a->t[k].start_ticks > a_youngest)
            a_youngest = a->t[k].start_ticks;
    size_t i = 0, matched = 0, unknown = 0;
    for (size_t k = 0; k < b->n; k++) {
        const struct task_info *y = &b->t[k];
        struct task_delta *dl = &v[k];
        while (i < a->n && a->t[i].pid < y->pid)
            i++;
        const struct task_info *x = i < a->n && a->t[i].pid == y->pid ? &a->t[i] : NULL;
        dl->t = y;
        if (x && x->start_ticks == y->start_ticks) {
            matched++;
            delta_same(&df, x, y, dl);
        } else if (!x &&
                   ((a->truncated && y->pid > a_last) || (a->n && y->start_ticks <= a_youngest))) {
            /* beyond where a stopped, or unreadable in a: not known to be new */
            unknown++;
            dl->vol_ctxsw = VAL_NONE;
        } else {
            df.st.reused += x != NULL;
            df.st.born++;
            dl->is_new = true;
            dl->cpu_s = (double)(y->utime + y->stime) / PROCSTAT_USER_HZ;
            dl->vol_ctxsw = y->vol_ctxsw;
        }
    }
    /* exited: a's processes not matched in b, counting only those b could
     * have listed (a truncated b stopped at b_last) */
    size_t a_seen = a->n;
    if (b->truncated)
        for (a_seen = 0; a_seen < a->n && a->t[a_seen].pid <= b_last; a_seen++)
            ;
    df.st.exited = a_seen - matched;
    if (df.ndiags > TASKS_MAX_DIAGS && d)
        diags_add(d, "processes", 0, "%u more counters went backwards",
                  df.ndiags - TASKS_MAX_DIAGS);
    if (unknown && d)
        diags_add(d, "processes", 0,
                  "%zu processes were not read in the earlier scan (it stopped at %zu "
                  "processes, or they were unreadable): they have no difference",
                  unknown, a->n);
    *ret = v;
    *ret_n = b->n;
    if (st)
        *st = df.st;
    return 0;
}
