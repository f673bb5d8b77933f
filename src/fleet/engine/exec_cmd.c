/* The exec engine: the operator's command templates ([exec] in fleet.ini)
 * as a VM engine and a power engine, the escape hatch for OpenStack,
 * Kubernetes, Redfish scripts and anything else.
 *
 * Each call turns one template, split into words when fleet.ini was read
 * (exec_tmpl.h), into an argv with the call's values, each placeholder
 * one word, and runs it with posix_spawnp(), no shell: stdin empty, stdout
 * captured (at most 1 MiB),
 * the last 512 bytes of stderr kept for the error message, no fd of ours
 * inherited, its own process group, default signal dispositions. Past its
 * deadline the group gets SIGTERM, SIGKILL 2 s later, and is reaped.
 *
 * No global state and no SIGCHLD handler: each call waits for its own pid
 * (a pidfd wakes the poll loop; without one it polls every 10 ms), so
 * several threads may run commands at once. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/util.h"
#include "fleet/engine/exec.h"
#include "fleet/engine/exec_cmd.h"
#include "fleet/engine/exec_tmpl.h"

#define CMD_OUT_MAX       (1u << 20)    /* bytes of stdout a command may print */
#define CMD_TAIL_MAX      512           /* bytes of stderr kept for messages */
#define CMD_TIMEOUT_S     60.0          /* [exec] timeout_s when unset */
#define CMD_TIMEOUT_MAX_S 1e7           /* longer is "never" (and keeps ns in range) */
#define CMD_GRACE_NS      2000000000ull /* SIGTERM -> SIGKILL, ns */
#define CMD_POLL_MS       10            /* without a pidfd: how often to look for the exit */
#define NS_PER_S          1e9

/* ---- a growable byte buffer, always NUL-terminated ---------------------- */

struct buf {
    char *p;
    size_t n, cap;
};

static void buf_add(struct buf *b, const char *s, size_t n)
{
    if (b->n + n + 1 > b->cap) {
        b->cap = (b->n + n + 1) * 2;
        b->p = xrealloc(b->p, b->cap);
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}

/* ---- running one command --------------------------------------------------- */

struct run {
    pid_t pid;
    int pidfd; /* -1: none, poll every CMD_POLL_MS */
    int fd_out, fd_err;
    struct buf out;
    bool over; /* stdout passed CMD_OUT_MAX */
    char tail[CMD_TAIL_MAX];
    size_t n_tail;
    int status; /* waitpid()'s, once reaped */
};

static void fd_close(int *fd)
{
    if (*fd >= 0)
        close(*fd);
    *fd = -1;
}

static void tail_add(struct run *r, const char *s, size_t n)
{
    if (n >= CMD_TAIL_MAX) {
        memcpy(r->tail, s + n - CMD_TAIL_MAX, CMD_TAIL_MAX);
        r->n_tail = CMD_TAIL_MAX;
        return;
    }
    size_t keep = r->n_tail < CMD_TAIL_MAX - n ? r->n_tail : CMD_TAIL_MAX - n;
    memmove(r->tail, r->tail + r->n_tail - keep, keep);
    memcpy(r->tail + keep, s, n);
    r->n_tail = keep + n;
}

/* One read from *FD. Returns true when it got bytes; at EOF or on an error
 * closes *FD. */
static bool read_once(struct run *r, int *fd)
{
    char b[16384];
    ssize_t n;
    do
        n = read(*fd, b, sizeof(b));
    while (n < 0 && errno == EINTR);
    if (n < 0 && errno == EAGAIN)
        return false;
    if (n <= 0) {
        fd_close(fd);
        return false;
    }
    if (fd == &r->fd_err) {
        tail_add(r, b, (size_t)n);
    } else if (r->out.n + (size_t)n > CMD_OUT_MAX) {
        r->over = true;
    } else {
        buf_add(&r->out, b, (size_t)n);
    }
    return true;
}

/* Whether the child has exited, without reaping it (its pid, and so its
 * process group id, stay ours until then). */
static bool run_exited(const struct run *r)
{
    siginfo_t si = {0};
    if (waitid(P_PID, (id_t)r->pid, &si, WEXITED | WNOHANG | WNOWAIT) < 0)
        return errno == ECHILD; /* someone else reaped it: gone */
    return si.si_pid != 0;
}

static int ms_until(uint64_t deadline_ns, uint64_t now_ns)
{
    uint64_t ms = (deadline_ns - now_ns + 999999) / 1000000;
    return ms > INT_MAX ? INT_MAX : (int)ms;
}

/* Wait for the child's exit until DEADLINE_NS, reading its output. Returns
 * 0 when it exited, -ETIMEDOUT, -EMSGSIZE when stdout grew too big. */
static int run_wait(struct run *r, uint64_t deadline_ns)
{
    for (;;) {
        if (r->over)
            return -EMSGSIZE;
        if (run_exited(r))
            return 0;
        uint64_t now = now_monotonic_ns();
        if (now >= deadline_ns)
            return -ETIMEDOUT;
        struct pollfd pf[3];
        nfds_t n = 0;
        if (r->fd_out >= 0)
            pf[n++] = (struct pollfd){.fd = r->fd_out, .events = POLLIN};
        if (r->fd_err >= 0)
            pf[n++] = (struct pollfd){.fd = r->fd_err, .events = POLLIN};
        if (r->pidfd >= 0)
            pf[n++] = (struct pollfd){.fd = r->pidfd, .events = POLLIN};
        int ms = ms_until(deadline_ns, now);
        if (r->pidfd < 0 && ms > CMD_POLL_MS)
            ms = CMD_POLL_MS;
        if (poll(pf, n, ms) < 0 && errno != EINTR)
            return -errno;
        for (nfds_t i = 0; i < n; i++) {
            if (!pf[i].revents || pf[i].fd == r->pidfd)
                continue;
            read_once(r, pf[i].fd == r->fd_out ? &r->fd_out : &r->fd_err);
        }
    }
}

/* After the exit: what is left in the pipes (a background job that holds
 * them does not hold us up). */
static int run_drain(struct run *r, uint64_t deadline_ns)
{
    while (r->fd_out >= 0 && read_once(r, &r->fd_out) && !r->over)
        if (now_monotonic_ns() >= deadline_ns)
            break;
    while (r->fd_err >= 0 && read_once(r, &r->fd_err))
        if (now_monotonic_ns() >= deadline_ns)
            break;
    return r->over ? -EMSGSIZE : 0;
}

/* SIGTERM the child's group, SIGKILL it CMD_GRACE_NS later or as soon as
 * the child is gone (for what it left behind). Does not reap. */
static void run_kill(struct run *r)
{
    kill(-r->pid, SIGTERM);
    uint64_t until = now_monotonic_ns() + CMD_GRACE_NS;
    for (;;) {
        if (run_exited(r))
            break;
        uint64_t now = now_monotonic_ns();
        if (now >= until)
            break;
        int ms = ms_until(until, now);
        struct pollfd pf = {.fd = r->pidfd, .events = POLLIN};
        poll(&pf, r->pidfd >= 0 ? 1 : 0,
             r->pidfd >= 0 ? ms : (ms < CMD_POLL_MS ? ms : CMD_POLL_MS));
    }
    kill(-r->pid, SIGKILL);
}

/* -ECHILD when someone else reaped it (SIGCHLD set to SIG_IGN does that):
 * its exit status is lost. */
static int run_reap(struct run *r)
{
    pid_t w;
    do
        w = waitpid(r->pid, &r->status, 0);
    while (w < 0 && errno == EINTR);
    return w < 0 ? -errno : 0;
}

/* ARGV[0] found in $PATH (or a path), run with ARGV: no shell. */
static int spawn_argv(char *const *argv, char *const *envp, int in, int out, int err, pid_t *ret)
{
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    sigset_t none, all;

    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in, 0);
    posix_spawn_file_actions_adddup2(&fa, out, 1);
    posix_spawn_file_actions_adddup2(&fa, err, 2);
#ifdef __GLIBC__
#if __GLIBC_PREREQ(2, 34)
    /* our pipes are O_CLOEXEC; this also covers fds another thread opened
     * without it */
    posix_spawn_file_actions_addclosefrom_np(&fa, 3);
#endif
#endif
    posix_spawnattr_init(&at);
    sigemptyset(&none);
    sigfillset(&all);
    posix_spawnattr_setsigmask(&at, &none);
    posix_spawnattr_setsigdefault(&at, &all);
    posix_spawnattr_setpgroup(&at, 0);
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK |
                                      POSIX_SPAWN_SETSIGDEF);
    pid_t pid;
    int r = posix_spawnp(&pid, argv[0], &fa, &at, argv, envp);
    posix_spawnattr_destroy(&at);
    posix_spawn_file_actions_destroy(&fa);
    if (r != 0)
        return -r;
    *ret = pid;
    return 0;
}

/* Three pipes: stdin (its write end closed at once: the child reads EOF, as
 * from an empty file), stdout and stderr (our ends non-blocking). */
static int pipes_open(int p[3][2])
{
    for (int i = 0; i < 3; i++)
        p[i][0] = p[i][1] = -1;
    for (int i = 0; i < 3; i++)
        if (pipe2(p[i], O_CLOEXEC) < 0)
            return -errno;
    fd_close(&p[0][1]);
    if (fcntl(p[1][0], F_SETFL, O_NONBLOCK) < 0 || fcntl(p[2][0], F_SETFL, O_NONBLOCK) < 0)
        return -errno;
    return 0;
}

static void pipes_close(int p[3][2])
{
    for (int i = 0; i < 3; i++) {
        fd_close(&p[i][0]);
        fd_close(&p[i][1]);
    }
}

/* Run ARGV to its end or its deadline. Returns 0 when it exited by
 * itself (its status in R->status; R->out, R->tail filled), -ETIMEDOUT or
 * -EMSGSIZE when it was killed, -errno when it could not start. The child
 * is always reaped. */
static int run_cmd(struct run *r, char *const *argv, char *const *envp, double timeout_s)
{
    int p[3][2];
    *r = (struct run){.pid = -1, .pidfd = -1, .fd_out = -1, .fd_err = -1};
    int k = pipes_open(p);
    if (k >= 0)
        k = spawn_argv(argv, envp, p[0][0], p[1][1], p[2][1], &r->pid);
    if (k < 0) {
        pipes_close(p);
        return k;
    }
    uint64_t deadline = now_monotonic_ns() + (uint64_t)(timeout_s * NS_PER_S);
    r->fd_out = TAKE_FD(p[1][0]);
    r->fd_err = TAKE_FD(p[2][0]);
    pipes_close(p);
#ifdef SYS_pidfd_open
    r->pidfd = (int)syscall(SYS_pidfd_open, r->pid, 0); /* -1 before Linux 5.3: polling */
#endif
    k = run_wait(r, deadline);
    if (k == 0)
        k = run_drain(r, deadline);
    if (k < 0)
        run_kill(r);
    int reaped = run_reap(r);
    if (k == 0 && reaped < 0)
        k = reaped;
    fd_close(&r->pidfd);
    fd_close(&r->fd_out);
    fd_close(&r->fd_err);
    if (k < 0)
        free(TAKE_PTR(r->out.p));
    return k;
}

/* ---- one templated call ---------------------------------------------------- */

struct job {
    const struct site *site;
    const struct site_host *host;
    const char *key;            /* "list", "migrate", ... */
    const struct fx_tmpl *tmpl; /* NULL: not configured */
    const char *vals[FX_VAR_N]; /* each placeholder's value, NULL: "" */
    bool creds;                 /* the BMC credentials in the environment */
    double timeout_s;
    char who[256]; /* "host h1: list command" */
};

/* ---- fleet.ini's [exec] -------------------------------------------------- */

enum exec_key { K_LIST, K_MIGRATE, K_POWER_ON, K_POWER_OFF, K_POWER_STATUS, K_POWER_READING, K_N };

static const char *const exec_key_names[K_N] = {"list",      "migrate",      "power_on",
                                                "power_off", "power_status", "power_reading"};

/* What [exec] says to one of the two engines (each reads its own keys,
 * and timeout_s): the templates split into words, once. */
struct exec_conf {
    struct fx_tmpl tmpl[K_N]; /* n == 0: not configured */
    double timeout_s;         /* 0: CMD_TIMEOUT_S */
};

static int exec_parse(void **conf, enum fx_where where, size_t hi, const char *key, const char *val,
                      char *why, size_t size)
{
    struct exec_conf *c = *conf ? *conf : (*conf = xcalloc(1, sizeof(struct exec_conf)));
    if (streq(key, "timeout_s")) {
        char *end;
        errno = 0;
        double v = strtod(val, &end);
        if (end == val || *end || errno || !(v >= 0.1 && v <= 86400)) {
            snprintf(why, size, "%s = '%.60s': want a number 0.1..86400", key, val);
            return -EINVAL;
        }
        c->timeout_s = v;
        return 0;
    }
    for (int k = 0; k < K_N; k++)
        if (streq(key, exec_key_names[k])) {
            struct fx_tmpl t;
            char e[300];
            if (fx_tmpl_split(val, fx_exec_allowed(key), &t, e, sizeof(e)) < 0) {
                snprintf(why, size, "[exec] %s: %s", key, e);
                return -EINVAL;
            }
            fx_tmpl_free(&c->tmpl[k]);
            c->tmpl[k] = t;
            return 0;
        }
    snprintf(why, size, "[exec] %s: not a key of the exec engine", key);
    return -EINVAL;
}

static void exec_conf_free(void *conf)
{
    struct exec_conf *c = conf;
    for (int k = 0; c && k < K_N; k++)
        fx_tmpl_free(&c->tmpl[k]);
    free(c);
}

/* The keys of S's engine of that kind: the template of each, timeout_s. */
static const struct exec_conf *exec_conf(const struct site *s, bool power)
{
    return fx_engine_conf(s, power ? &fx_engine_exec_power : &fx_engine_exec_vms);
}

static void job_init(struct job *j, const struct site *s, size_t hi, bool power, enum exec_key k)
{
    const struct site_host *h = &s->hosts[hi];
    const struct exec_conf *c = exec_conf(s, power);
    const char *key = exec_key_names[k];
    *j = (struct job){.site = s,
                      .host = h,
                      .key = key,
                      .tmpl = c && c->tmpl[k].n ? &c->tmpl[k] : NULL,
                      .timeout_s = c && c->timeout_s > 0 ? c->timeout_s : CMD_TIMEOUT_S};
    j->vals[FX_VAR_HOST] = h->name;
    j->vals[FX_VAR_URI] = h->uri;
    j->vals[FX_VAR_BMC] = h->bmc;
    snprintf(j->who, sizeof(j->who), "host %s: %s command", h->name, key);
}

static bool env_ours(const char *e)
{
    return strncmp(e, "WATT_BMC_USER=", 14) == 0 || strncmp(e, "WATT_BMC_PASSWORD=", 18) == 0;
}

/* The process's environment without WATT_BMC_*, plus the host's
 * credentials when J asks for them. V[0..n) point into environ, the rest
 * is owned. */
struct env {
    char **v;
    size_t n_borrowed, n;
};

static void env_build(const struct job *j, struct env *e)
{
    size_t n = 0;
    while (environ && environ[n])
        n++;
    *e = (struct env){.v = xcalloc(n + 3, sizeof(char *))};
    for (size_t i = 0; i < n; i++)
        if (!env_ours(environ[i]))
            e->v[e->n++] = environ[i];
    e->n_borrowed = e->n;
    if (j->creds && j->host->bmc_user)
        e->v[e->n++] = xasprintf("WATT_BMC_USER=%s", j->host->bmc_user);
    if (j->creds && j->host->bmc_password)
        e->v[e->n++] = xasprintf("WATT_BMC_PASSWORD=%s", j->host->bmc_password);
}

static void env_free(struct env *e)
{
    for (size_t i = e->n_borrowed; i < e->n; i++)
        free(e->v[i]);
    free(e->v);
}

/* The stderr tail on one line: controls as spaces, runs of spaces as one,
 * no cut UTF-8 sequence at the start. */
static void tail_clean(const struct run *r, char *out, size_t size)
{
    size_t i = 0, o = 0;
    while (i < r->n_tail && ((unsigned char)r->tail[i] & 0xc0) == 0x80)
        i++;
    for (; i < r->n_tail && o + 1 < size; i++) {
        unsigned char c = (unsigned char)r->tail[i];
        if (c < 0x20 || c == 0x7f)
            c = ' ';
        if (c == ' ' && (o == 0 || out[o - 1] == ' '))
            continue;
        out[o++] = (char)c;
    }
    while (o > 0 && out[o - 1] == ' ')
        o--;
    out[o] = '\0';
}

/* ERR = "WHO WHAT: TAIL", the tail cut at its start to fit. */
static void fail_with_tail(struct fleet_error *err, const struct job *j, const struct run *r,
                           const char *what)
{
    char tail[CMD_TAIL_MAX + 1];
    if (!err)
        return;
    tail_clean(r, tail, sizeof(tail));
    int n = snprintf(err->msg, sizeof(err->msg), "%s %s", j->who, what);
    size_t room = n >= 0 && (size_t)n + 3 < sizeof(err->msg) ? sizeof(err->msg) - (size_t)n - 3 : 0;
    size_t len = strlen(tail);
    if (len > 0 && room > 0)
        snprintf(err->msg + n, sizeof(err->msg) - (size_t)n, ": %s",
                 tail + (len > room ? len - room : 0));
}

static int job_fail(const struct job *j, const struct run *r, const char *prog, int k,
                    struct fleet_error *err)
{
    char what[96];
    if (k == -ETIMEDOUT) {
        snprintf(what, sizeof(what), "timed out after %g s and was killed", j->timeout_s);
    } else if (k == -EMSGSIZE) {
        snprintf(what, sizeof(what), "printed more than %u bytes and was killed", CMD_OUT_MAX);
    } else if (k < 0) {
        fleet_error_set(err, "%s could not run %s: %s", j->who, prog, strerror(-k));
        return k;
    } else if (WIFEXITED(r->status)) {
        snprintf(what, sizeof(what), "exited %d", WEXITSTATUS(r->status));
        k = -EIO;
    } else {
        int sig = WIFSIGNALED(r->status) ? WTERMSIG(r->status) : 0;
        snprintf(what, sizeof(what), "was killed by signal %d (%s)", sig, strsignal(sig));
        k = -EIO;
    }
    fail_with_tail(err, j, r, what);
    return k;
}

/* Run J; on success its stdout (NUL-terminated, owned) in RET. */
static int job_run(struct job *j, struct buf *ret, struct fleet_error *err)
{
    if (!j->tmpl) {
        fleet_error_set(err, "host %s: no %s command configured (%s in %s's [exec] section)",
                        j->host->name, j->key, j->key,
                        j->site->origin ? j->site->origin : "fleet.ini");
        return -EOPNOTSUPP;
    }
    char **argv = fx_tmpl_argv(j->tmpl, j->vals);
    struct env env;
    struct run r;
    double t = j->timeout_s > CMD_TIMEOUT_MAX_S ? CMD_TIMEOUT_MAX_S : j->timeout_s;
    env_build(j, &env);
    int k = run_cmd(&r, argv, env.v, t);
    env_free(&env);
    if (k < 0 || !WIFEXITED(r.status) || WEXITSTATUS(r.status) != 0) {
        free(r.out.p);
        k = job_fail(j, &r, argv[0], k, err);
        fx_argv_free(argv);
        return k;
    }
    fx_argv_free(argv);
    if (!r.out.p)
        buf_add(&r.out, "", 0);
    if (memchr(r.out.p, '\0', r.out.n)) {
        fleet_error_set(err, "%s printed a NUL byte", j->who);
        free(r.out.p);
        return -EINVAL;
    }
    *ret = r.out;
    return 0;
}

static int host_check(const struct site *s, size_t hi, const char *key, struct fleet_error *err)
{
    if (hi < s->n_hosts)
        return 0;
    fleet_error_set(err, "exec %s: no host #%zu (the site has %zu)", key, hi, s->n_hosts);
    return -EINVAL;
}

/* ---- parsing what the commands print -------------------------------------- */

/* A decimal number without sign or spaces. */
static int parse_u64(const char *s, uint64_t max, uint64_t *ret)
{
    if (!isdigit((unsigned char)*s))
        return -EINVAL;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (*end)
        return -EINVAL;
    if (errno == ERANGE || v > max)
        return -ERANGE;
    *ret = v;
    return 0;
}

static int parse_state(const char *s, struct fx_domain *d)
{
    if (streq(s, "running"))
        d->running = d->active = true;
    else if (streq(s, "paused") || streq(s, "other"))
        d->active = true;
    else if (!streq(s, "shutoff"))
        return -EINVAL;
    return 0;
}

/* A name the engine's commands get: the rule of every engine
 * (fx_vm_name_check()), and no '-' first, which a command would read as
 * one of its options (virsh migrate --live {vm}: a VM named
 * --desturi=... would choose the destination). */
static int exec_name_check(const char *name, char *why, size_t size)
{
    int k = fx_vm_name_check(name, why, size);
    if (k == 0 && name[0] == '-') {
        char shown[160];
        fx_name_escape(name, shown, sizeof(shown));
        snprintf(why, size, "VM name '%s' starts with '-' (a command would take it for an option)",
                 shown);
        return -EINVAL;
    }
    return k;
}

/* Fill D from the four fields after the name; on error WHY says what is
 * wrong. */
static int list_fields(char **f, struct fx_domain *d, char *why, size_t size)
{
    static const char *const names[] = {"CPU_NS", "MEM_KIB", "VCPUS"};
    uint64_t v[3];
    if (parse_state(f[0], d) < 0) {
        snprintf(why, size, "STATE '%.40s' is not running, paused, shutoff or other", f[0]);
        return -EINVAL;
    }
    for (int i = 0; i < 3; i++) {
        int k = parse_u64(f[1 + i], i == 2 ? UINT_MAX : UINT64_MAX, &v[i]);
        if (k < 0) {
            snprintf(why, size, "%s '%.40s' is %s", names[i], f[1 + i],
                     k == -ERANGE ? "out of range" : "not a number");
            return k;
        }
    }
    d->cpu_ns = v[0];
    d->mem_kib = v[1];
    d->vcpus = (unsigned)v[2];
    d->persistent = true;
    return 0;
}

static bool blank(char c)
{
    return c == ' ' || c == '\t' || c == '\r';
}

/* "NAME STATE CPU_NS MEM_KIB VCPUS": the last four fields, and the name
 * before them, blanks inside it kept ("web 1 running 5 1024 1"). */
static int list_line(char *line, struct fx_list *l, size_t *cap, char *why, size_t size)
{
    char *end = line + strlen(line), *f[4];
    while (*line && blank(*line))
        line++;
    if (!*line || *line == '#')
        return 0;
    for (int i = 3; i >= 0; i--) { /* the fields, from the right */
        while (end > line && blank(end[-1]))
            *--end = '\0';
        while (end > line && !blank(end[-1]))
            end--;
        if (end == line) { /* this field is the first: no name */
            snprintf(why, size, "expected 5 fields NAME STATE CPU_NS MEM_KIB VCPUS, found %d",
                     4 - i);
            return -EINVAL;
        }
        f[i] = end;
    }
    while (end > line && blank(end[-1]))
        *--end = '\0';
    struct fx_domain d = {0};
    int k = list_fields(f, &d, why, size);
    if (k == 0)
        k = exec_name_check(line, why, size);
    if (k < 0)
        return k;
    d.name = xstrdup(line);
    l->v = grow_array(l->v, sizeof(*l->v), l->n, cap);
    l->v[l->n++] = d;
    return 0;
}

struct named_line {
    const char *name;
    int line;
};

static int cmp_named_line(const void *a, const void *b)
{
    const struct named_line *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    return c ? c : (x->line > y->line) - (x->line < y->line);
}

/* The first line that lists a VM an earlier line listed (0: none), and its
 * name. Sorted, not a scan per line: a 1 MiB list holds 50,000 VMs. */
static int first_repeat(const struct fx_list *l, const int *lines, const char **ret_name)
{
    if (l->n < 2)
        return 0;
    struct named_line *v = xcalloc(l->n, sizeof(*v));
    for (size_t i = 0; i < l->n; i++)
        v[i] = (struct named_line){l->v[i].name, lines[i]};
    qsort(v, l->n, sizeof(*v), cmp_named_line);
    int first = 0;
    for (size_t i = 1; i < l->n; i++)
        if (streq(v[i].name, v[i - 1].name) && (i < 2 || !streq(v[i].name, v[i - 2].name)) &&
            (!first || v[i].line < first)) {
            first = v[i].line;
            *ret_name = v[i].name;
        }
    free(v);
    return first;
}

int fx_exec_list_parse(char *text, const char *who, struct fx_list *ret, struct fleet_error *err)
{
    struct fx_list l = {0};
    size_t cap = 0, lines_cap = 0;
    _cleanup_free_ int *lines = NULL; /* the line of each VM */
    int line = 0, k = 0;
    char why[400];
    char *save = NULL;
    for (char *p = text; p; p = save) {
        save = strchr(p, '\n');
        if (save)
            *save++ = '\0';
        line++;
        size_t n = l.n;
        k = list_line(p, &l, &cap, why, sizeof(why));
        if (k < 0)
            break;
        if (l.n > n) {
            lines = grow_array(lines, sizeof(*lines), n, &lines_cap);
            lines[n] = line;
        }
    }
    /* a VM listed twice on an earlier line is the first error */
    const char *name = NULL;
    int repeat = first_repeat(&l, lines, &name);
    if (repeat) {
        char shown[200];
        fx_name_escape(name, shown, sizeof(shown));
        fleet_error_set(err, "%s output line %d: VM '%s' listed twice", who, repeat, shown);
        k = -EINVAL;
    } else if (k < 0) {
        fleet_error_set(err, "%s output line %d: %s", who, line, why);
    }
    if (k < 0) {
        fx_list_free(&l);
        return -EINVAL;
    }
    l.t_ns = now_monotonic_ns();
    *ret = l;
    return 0;
}

/* TEXT without the white space around it, in place. */
static char *strip(char *text)
{
    while (isspace((unsigned char)*text))
        text++;
    size_t n = strlen(text);
    while (n > 0 && isspace((unsigned char)text[n - 1]))
        text[--n] = '\0';
    return text;
}

/* ---- the VM engine ----------------------------------------------------------- */

struct exec_vms {
    struct fx_vms pub; /* first: the engine is cast from it */
    const struct site *site;
};

static int exec_list(struct fx_vms *x, size_t hi, struct fx_list *ret, struct fleet_error *err)
{
    const struct site *s = ((struct exec_vms *)x)->site;
    struct job j;
    struct buf out;
    int k = host_check(s, hi, "list", err);
    if (k < 0)
        return k;
    job_init(&j, s, hi, false, K_LIST);
    k = job_run(&j, &out, err);
    if (k < 0)
        return k;
    k = fx_exec_list_parse(out.p, j.who, ret, err);
    free(out.p);
    return k;
}

static int exec_migrate(struct fx_vms *x, const char *vm, size_t src, size_t dst, double timeout_s,
                        struct fleet_error *err)
{
    const struct site *s = ((struct exec_vms *)x)->site;
    struct job j;
    struct buf out;
    int k = host_check(s, src, "migrate", err);
    if (k >= 0)
        k = host_check(s, dst, "migrate", err);
    if (k < 0)
        return k;
    char why[300];
    if (exec_name_check(vm, why, sizeof(why)) < 0) {
        fleet_error_set(err, "host %s: migrate command: %s, not passed on", s->hosts[src].name,
                        why);
        return -EINVAL;
    }
    job_init(&j, s, src, false, K_MIGRATE);
    /* {host} and {uri}: the source's; no {bmc} */
    j.vals[FX_VAR_VM] = vm;
    j.vals[FX_VAR_SRC] = s->hosts[src].name;
    j.vals[FX_VAR_DST] = s->hosts[dst].name;
    j.vals[FX_VAR_DST_URI] = s->hosts[dst].uri;
    snprintf(j.who, sizeof(j.who), "host %s: migrate command for VM '%s' to %s", s->hosts[src].name,
             vm, s->hosts[dst].name); /* the rule: printable, < 96 bytes */
    if (timeout_s > 0)
        j.timeout_s = timeout_s;
    k = job_run(&j, &out, err);
    if (k < 0)
        return k;
    free(out.p);
    return 0;
}

static void exec_vms_close(struct fx_vms *x)
{
    free(x);
}

int fx_exec_vms_open(const struct site *site, struct fx_vms **ret, struct fleet_error *err)
{
    struct exec_vms *e = xcalloc(1, sizeof(*e));
    e->pub = (struct fx_vms){
        .name = "exec", .list = exec_list, .migrate = exec_migrate, .close = exec_vms_close};
    e->site = site;
    *ret = &e->pub;
    return 0;
}

/* ---- the power engine ---------------------------------------------------- */

struct exec_power {
    struct fx_power pub; /* first: the engine is cast from it */
    const struct site *site;
};

/* Run KEY's command for host HI; its stdout, stripped, in RET (owned). */
static int power_run(struct fx_power *x, size_t hi, enum exec_key key, struct job *j,
                     struct buf *ret, struct fleet_error *err)
{
    const struct site *s = ((struct exec_power *)x)->site;
    int k = host_check(s, hi, exec_key_names[key], err);
    if (k < 0)
        return k;
    job_init(j, s, hi, true, key);
    j->creds = true;
    return job_run(j, ret, err);
}

static int exec_status(struct fx_power *x, size_t hi, enum fx_power_state *ret,
                       struct fleet_error *err)
{
    struct job j;
    struct buf out;
    int k = power_run(x, hi, K_POWER_STATUS, &j, &out, err);
    if (k < 0)
        return k;
    const char *v = strip(out.p);
    if (strcasecmp(v, "on") == 0 || strcasecmp(v, "off") == 0) {
        *ret = strcasecmp(v, "on") == 0 ? FX_POWER_ON : FX_POWER_OFF;
    } else {
        fleet_error_set(err, "%s printed '%.60s%s', expected on or off", j.who, v,
                        strlen(v) > 60 ? "..." : "");
        k = -EINVAL;
    }
    free(out.p);
    return k;
}

static int exec_set(struct fx_power *x, size_t hi, bool on, struct fleet_error *err)
{
    struct job j;
    struct buf out;
    int k = power_run(x, hi, on ? K_POWER_ON : K_POWER_OFF, &j, &out, err);
    if (k < 0)
        return k;
    free(out.p);
    return 0;
}

static int exec_reading(struct fx_power *x, size_t hi, double *watts, struct fleet_error *err)
{
    struct job j;
    struct buf out;
    int k = power_run(x, hi, K_POWER_READING, &j, &out, err);
    if (k < 0)
        return k;
    const char *v = strip(out.p);
    char *end;
    errno = 0;
    double w = strtod(v, &end);
    if (*v && !*end && errno == 0 && isfinite(w) && w >= 0) {
        *watts = w;
    } else {
        fleet_error_set(err, "%s printed '%.60s%s', expected watts (a number >= 0)", j.who, v,
                        strlen(v) > 60 ? "..." : "");
        k = -EINVAL;
    }
    free(out.p);
    return k;
}

static void exec_power_close(struct fx_power *x)
{
    free(x);
}

int fx_exec_power_open(const struct site *site, struct fx_power **ret, struct fleet_error *err)
{
    struct exec_power *e = xcalloc(1, sizeof(*e));
    e->pub = (struct fx_power){.name = "exec",
                               .status = exec_status,
                               .set = exec_set,
                               .reading = exec_reading,
                               .close = exec_power_close};
    e->site = site;
    *ret = &e->pub;
    return 0;
}

/* ---- the two rows of the table of engines ---------------------------------- */

/* What each engine needs configured. */
static int exec_check(const struct site *s, const void *conf, bool power, char *why, size_t size)
{
    const struct exec_conf *c = conf;
    static const enum exec_key vms[] = {K_LIST, K_MIGRATE},
                               pw[] = {K_POWER_ON, K_POWER_OFF, K_POWER_STATUS};
    const enum exec_key *need = power ? pw : vms;
    size_t n = power ? ARRAY_SIZE(pw) : ARRAY_SIZE(vms);
    for (size_t i = 0; i < n; i++)
        if (!c || !c->tmpl[need[i]].n) {
            snprintf(why, size, "%s",
                     power ? "power = exec needs power_on, power_off and power_status in [exec]"
                           : "vm_engine = exec needs list and migrate in [exec]");
            return -EINVAL;
        }
    return 0;
}

static int exec_vms_check(const struct site *s, const void *conf, char *why, size_t size, int *line)
{
    return exec_check(s, conf, false, why, size);
}

static int exec_power_check(const struct site *s, const void *conf, char *why, size_t size,
                            int *line)
{
    return exec_check(s, conf, true, why, size);
}

static const struct fx_key exec_vms_keys[] = {
    {FX_IN_SECTION, "list"},
    {FX_IN_SECTION, "migrate"},
    {FX_IN_SECTION, "timeout_s"},
    {0, NULL},
};

static const struct fx_key exec_power_keys[] = {
    {FX_IN_SECTION, "power_on"},      {FX_IN_SECTION, "power_off"}, {FX_IN_SECTION, "power_status"},
    {FX_IN_SECTION, "power_reading"}, {FX_IN_SECTION, "timeout_s"}, {0, NULL},
};

const struct fx_engine fx_engine_exec_vms = {
    .name = "exec",
    .section = "exec",
    .keys = exec_vms_keys,
    .parse = exec_parse,
    .free_conf = exec_conf_free,
    .check = exec_vms_check,
    .open_vms = fx_exec_vms_open,
};

const struct fx_engine fx_engine_exec_power = {
    .name = "exec",
    .power = true,
    .section = "exec",
    .keys = exec_power_keys,
    .parse = exec_parse,
    .free_conf = exec_conf_free,
    .check = exec_power_check,
    .open_power = fx_exec_power_open,
};
