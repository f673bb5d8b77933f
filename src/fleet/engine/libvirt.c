/* The libvirt VM engine: one connection per host, opened lazily, and every
 * call bounded in time.
 *
 * A libvirt call can block for ever: a daemon that is SIGSTOPped or a host
 * that vanished keeps the TCP connection open and never answers, and a
 * virConnectOpen to an address that drops packets waits for the kernel's
 * SYN retries (~2 min). So every call that talks to a daemon runs on its
 * own short-lived worker thread, and the caller waits for it with a
 * deadline. A worker that misses its deadline is abandoned: it keeps its
 * own references (connection, domain) and frees them when libvirt finally
 * returns; the host's connection is dropped and made again on the next
 * call. Client keepalive (on libvirt's default event loop, run by one
 * thread for the whole process) makes such calls fail after ~8 s anyway.
 *
 * libvirt's errors are thread-local, so the worker copies the message into
 * its job; its default printing to stderr is switched off (libraries never
 * print). */
#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>

#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include "base/util.h"
#include "fleet/engine/exec.h"

/* Keepalive: a ping every 2 s, the connection closed after 3 unanswered
 * ones, so a hung daemon fails the calls on it within ~8 s. */
#define LV_KA_INTERVAL_S    2
#define LV_KA_COUNT         3u
#define LV_OPEN_TIMEOUT_S   20.0 /* ssh or TCP, then auth, to one host */
#define LV_CALL_TIMEOUT_S   30.0 /* one list or lookup */
#define LV_ABORT_GRACE_S    6.0  /* after the timeout: abort, and the job's end */
#define LV_LOCATE_TIMEOUT_S 3.0  /* per host, open and lookup: where is the VM after a failure */

#define LV_MIGRATE_FLAGS                                                         \
    (VIR_MIGRATE_LIVE | VIR_MIGRATE_PERSIST_DEST | VIR_MIGRATE_UNDEFINE_SOURCE | \
     VIR_MIGRATE_ABORT_ON_ERROR)

struct lv_host {
    pthread_mutex_t lock;
    virConnectPtr conn; /* NULL: not open (yet, or dropped) */
};

struct lv {
    struct fx_vms pub; /* first: the engine is handed out as &pub */
    const struct site *site;
    struct lv_host *hosts;
};

/* What fleet.ini says to the libvirt engine: [controller] migrate = and
 * each host's migrate_uri =. */
struct lv_conf {
    bool managed;       /* migrate = managed; default p2p */
    char **migrate_uri; /* [n_hosts]: where the migration stream goes
                         * (VIR_MIGRATE_PARAM_URI, "tcp://10.0.0.2"); NULL: libvirt's choice */
    size_t n_hosts;
};

static const struct lv_conf *lv_conf(const struct lv *lv)
{
    return fx_engine_conf(lv->site, &fx_engine_libvirt);
}

static const char *lv_host_migrate_uri(const struct lv *lv, size_t hi)
{
    const struct lv_conf *c = lv_conf(lv);
    return c && hi < c->n_hosts ? c->migrate_uri[hi] : NULL;
}

/* ---- process-wide: libvirt's init, error printing and event loop -------- */

static pthread_once_t lv_once = PTHREAD_ONCE_INIT;
static int lv_init_r;
static pthread_mutex_t lv_loop_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned lv_loop_users; /* engines open */
static pthread_t lv_loop_thread;
static atomic_bool lv_loop_quit;

static void lv_error_ignore(void *data, virErrorPtr e)
{
}

static void lv_init(void)
{
    virSetErrorFunc(NULL, lv_error_ignore);
    if (virInitialize() < 0 || virEventRegisterDefaultImpl() < 0)
        lv_init_r = -EIO;
}

static void *lv_loop_run(void *arg)
{
    while (!atomic_load(&lv_loop_quit))
        if (virEventRunDefaultImpl() < 0)
            break;
    return NULL;
}

static void lv_loop_wake(int timer, void *opaque)
{
    virEventRemoveTimeout(timer);
}

static int lv_loop_start(void)
{
    pthread_mutex_lock(&lv_loop_lock);
    int r = 0;
    if (lv_loop_users == 0) {
        atomic_store(&lv_loop_quit, false);
        r = -pthread_create(&lv_loop_thread, NULL, lv_loop_run, NULL);
    }
    if (r == 0)
        lv_loop_users++;
    pthread_mutex_unlock(&lv_loop_lock);
    return r;
}

static void lv_loop_stop(void)
{
    pthread_mutex_lock(&lv_loop_lock);
    if (--lv_loop_users == 0) {
        atomic_store(&lv_loop_quit, true);
        /* A timer due now wakes the loop out of its poll. */
        virEventAddTimeout(0, lv_loop_wake, NULL, NULL);
        pthread_join(lv_loop_thread, NULL);
    }
    pthread_mutex_unlock(&lv_loop_lock);
}

/* ---- jobs: one libvirt call on a worker thread, waited for with a deadline */

struct lv_job;
typedef int (*lv_job_fn)(struct lv_job *j);

struct lv_job {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    unsigned refs; /* the caller's and the worker's */
    bool done;
    lv_job_fn fn;
    int r;         /* fn's result, valid once done */
    char msg[256]; /* libvirt's message when r < 0 */
    /* inputs and outputs, owned by the job */
    char *uri;           /* open: the URI; p2p migration: the destination */
    char *vm;            /* lookup */
    virConnectPtr conn;  /* the host's connection (a reference) */
    virConnectPtr dconn; /* managed migration: the destination's */
    virDomainPtr dom;    /* lookup's result; migrate and abort: the domain */
    virTypedParameterPtr params;
    int nparams;
    unsigned flags;
    bool found, active, running; /* lookup */
    struct fx_list list;         /* list */
};

static struct lv_job *lv_job_new(lv_job_fn fn)
{
    struct lv_job *j = xcalloc(1, sizeof(*j));
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&j->cond, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&j->lock, NULL);
    j->refs = 2;
    j->fn = fn;
    return j;
}

static void lv_job_unref(struct lv_job *j)
{
    pthread_mutex_lock(&j->lock);
    bool last = --j->refs == 0;
    pthread_mutex_unlock(&j->lock);
    if (!last)
        return;
    free(j->uri);
    free(j->vm);
    if (j->dom)
        virDomainFree(j->dom);
    if (j->conn)
        virConnectClose(j->conn);
    if (j->dconn)
        virConnectClose(j->dconn);
    virTypedParamsFree(j->params, j->nparams);
    fx_list_free(&j->list);
    pthread_cond_destroy(&j->cond);
    pthread_mutex_destroy(&j->lock);
    free(j);
}

static int lv_errno(int code)
{
    switch (code) {
    case VIR_ERR_NO_DOMAIN:
        return -ENOENT;
    case VIR_ERR_AUTH_FAILED:
    case VIR_ERR_AUTH_CANCELLED:
    case VIR_ERR_AUTH_UNAVAILABLE:
    case VIR_ERR_ACCESS_DENIED:
        return -EACCES;
    case VIR_ERR_SYSTEM_ERROR:
    case VIR_ERR_RPC:
    case VIR_ERR_NO_CONNECT:
    case VIR_ERR_INVALID_CONN:
        return -EHOSTUNREACH;
    case VIR_ERR_NO_SUPPORT:
        return -EOPNOTSUPP;
    case VIR_ERR_OPERATION_INVALID:
        return -EINVAL;
    case VIR_ERR_OPERATION_TIMEOUT:
        return -ETIMEDOUT;
    default:
        return -EIO;
    }
}

/* In the worker, after a libvirt call failed: keep its message. */
static int lv_fail(struct lv_job *j)
{
    virErrorPtr e = virGetLastError();
    snprintf(j->msg, sizeof(j->msg), "%s", e && e->message ? e->message : "unknown libvirt error");
    return e ? lv_errno(e->code) : -EIO;
}

static void *lv_job_run(void *arg)
{
    struct lv_job *j = arg;
    virResetLastError();
    int r = j->fn(j);
    pthread_mutex_lock(&j->lock);
    j->r = r;
    j->done = true;
    pthread_cond_broadcast(&j->cond);
    pthread_mutex_unlock(&j->lock);
    virResetLastError();
    lv_job_unref(j);
    return NULL;
}

static struct timespec lv_deadline(double timeout_s)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t ns = (uint64_t)ts.tv_nsec + (uint64_t)(timeout_s * 1e9);
    ts.tv_sec += (time_t)(ns / 1000000000u);
    ts.tv_nsec = (long)(ns % 1000000000u);
    return ts;
}

/* Wait for J until DEADLINE: true when it is done (J->r valid). */
static bool lv_job_wait(struct lv_job *j, const struct timespec *deadline)
{
    pthread_mutex_lock(&j->lock);
    while (!j->done)
        if (pthread_cond_timedwait(&j->cond, &j->lock, deadline) == ETIMEDOUT)
            break;
    bool done = j->done;
    pthread_mutex_unlock(&j->lock);
    return done;
}

/* Start J on a detached worker. On failure J is done with an error. */
static void lv_job_start(struct lv_job *j)
{
    pthread_attr_t a;
    pthread_t t;
    pthread_attr_init(&a);
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    int r = pthread_create(&t, &a, lv_job_run, j);
    pthread_attr_destroy(&a);
    if (r == 0)
        return;
    j->r = -r;
    j->done = true;
    snprintf(j->msg, sizeof(j->msg), "cannot start a thread: %s", strerror(r));
    j->refs--; /* the worker's, which never ran */
}

/* Run J and wait up to TIMEOUT_S: true when it finished in time. */
static bool lv_job_call(struct lv_job *j, double timeout_s)
{
    struct timespec deadline = lv_deadline(timeout_s);
    lv_job_start(j);
    return lv_job_wait(j, &deadline);
}

/* ---- connections ---------------------------------------------------------- */

static const char *lv_host_name(const struct lv *lv, size_t hi)
{
    return lv->site->hosts[hi].name;
}

static const char *lv_host_uri(const struct lv *lv, size_t hi)
{
    return lv->site->hosts[hi].uri ? lv->site->hosts[hi].uri : "(no uri)";
}

static int lv_open_fn(struct lv_job *j)
{
    virConnectPtr c = virConnectOpenAuth(j->uri, virConnectAuthPtrDefault, 0);
    if (!c)
        return lv_fail(j);
    /* 1: the daemon cannot do keepalive; the job deadlines still hold. */
    if (virConnectSetKeepAlive(c, LV_KA_INTERVAL_S, LV_KA_COUNT) < 0) {
        int r = lv_fail(j);
        virConnectClose(c);
        return r;
    }
    j->conn = c;
    return 0;
}

/* Drop host HI's connection if it is CONN (a newer one may have replaced it). */
static void lv_host_drop(struct lv *lv, size_t hi, virConnectPtr conn)
{
    struct lv_host *h = &lv->hosts[hi];
    pthread_mutex_lock(&h->lock);
    if (h->conn && (h->conn == conn || !conn)) {
        virConnectClose(h->conn);
        h->conn = NULL;
    }
    pthread_mutex_unlock(&h->lock);
}

/* After a call on CONN failed with R: when the connection broke (an RPC
 * error, a keepalive timeout), drop it and say the host does not answer. */
static int lv_host_check(struct lv *lv, size_t hi, virConnectPtr conn, int r)
{
    if (r == -EHOSTUNREACH || virConnectIsAlive(conn) != 1) {
        lv_host_drop(lv, hi, conn);
        return -EHOSTUNREACH;
    }
    return r;
}

static int lv_host_open(struct lv *lv, size_t hi, double timeout_s, struct fleet_error *err)
{
    struct lv_job *j = lv_job_new(lv_open_fn);
    j->uri = xstrdup(lv->site->hosts[hi].uri);
    int r;
    if (!lv_job_call(j, timeout_s)) {
        fleet_error_set(err, "host %s (%s): cannot connect: no answer within %.0f s",
                        lv_host_name(lv, hi), j->uri, timeout_s);
        r = -EHOSTUNREACH;
    } else if ((r = j->r) < 0) {
        fleet_error_set(err, "host %s (%s): cannot connect: %s", lv_host_name(lv, hi), j->uri,
                        j->msg);
        if (r != -EACCES)
            r = -EHOSTUNREACH;
    } else {
        lv->hosts[hi].conn = TAKE_PTR(j->conn);
    }
    lv_job_unref(j);
    return r;
}

/* A reference to host HI's connection, opened when needed; the caller
 * closes it. */
static int lv_host_conn(struct lv *lv, size_t hi, double timeout_s, virConnectPtr *ret,
                        struct fleet_error *err)
{
    if (hi >= lv->site->n_hosts || !lv->site->hosts[hi].uri) {
        fleet_error_set(err, "libvirt: no host %zu, or it has no uri", hi);
        return -EINVAL;
    }
    struct lv_host *h = &lv->hosts[hi];
    pthread_mutex_lock(&h->lock);
    if (h->conn && virConnectIsAlive(h->conn) != 1) {
        virConnectClose(h->conn);
        h->conn = NULL;
    }
    int r = h->conn ? 0 : lv_host_open(lv, hi, timeout_s, err);
    if (r == 0) {
        virConnectRef(h->conn);
        *ret = h->conn;
    }
    pthread_mutex_unlock(&h->lock);
    return r;
}

/* Run J (holding a reference to host HI's connection) with a deadline;
 * on failure ERR says "host h1 (uri): WHAT: why". */
static int lv_host_call(struct lv *lv, size_t hi, struct lv_job *j, double timeout_s,
                        const char *what, struct fleet_error *err)
{
    virConnectPtr conn = j->conn;
    if (!lv_job_call(j, timeout_s)) {
        fleet_error_set(err, "host %s (%s): %s: no answer within %.0f s", lv_host_name(lv, hi),
                        lv_host_uri(lv, hi), what, timeout_s);
        lv_host_drop(lv, hi, conn);
        return -EHOSTUNREACH;
    }
    if (j->r < 0) {
        fleet_error_set(err, "host %s (%s): %s: %s", lv_host_name(lv, hi), lv_host_uri(lv, hi),
                        what, j->msg);
        return lv_host_check(lv, hi, conn, j->r);
    }
    return 0;
}

/* ---- list ------------------------------------------------------------------ */

static bool lv_is_persistent(virDomainPtr dom, virDomainPtr *pers, int n_pers)
{
    const char *name = virDomainGetName(dom);
    for (int i = 0; i < n_pers; i++)
        if (streq(virDomainGetName(pers[i]), name))
            return true;
    return false;
}

/* One domain from its stats record; what the record lacks (older daemons
 * give no vcpu.current or balloon.* for a shut-off domain) comes from
 * virDomainGetInfo. mem_kib is the configured size for a shut-off domain. */

static int lv_fill(struct lv_job *j, virDomainStatsRecordPtr rec, virDomainPtr *pers, int n_pers,
                   struct fx_domain *d)
{
    virTypedParameterPtr p = rec->params;
    int n = rec->nparams;
    int state = -1;
    unsigned long long cpu = 0, mem = 0;
    unsigned vcpus = 0;
    bool have_mem = virTypedParamsGetULLong(p, n, "balloon.current", &mem) == 1 ||
                    virTypedParamsGetULLong(p, n, "balloon.maximum", &mem) == 1;
    virTypedParamsGetULLong(p, n, "cpu.time", &cpu);
    virTypedParamsGetUInt(p, n, "vcpu.current", &vcpus);
    if (virTypedParamsGetInt(p, n, "state.state", &state) != 1 || vcpus == 0 || !have_mem) {
        virDomainInfo info;
        if (virDomainGetInfo(rec->dom, &info) < 0)
            return lv_fail(j);
        state = state < 0 ? info.state : state;
        vcpus = vcpus ? vcpus : info.nrVirtCpu;
        mem = have_mem ? mem : info.memory ? info.memory : info.maxMem;
        cpu = cpu ? cpu : info.cpuTime;
    }
    d->name = xstrdup(virDomainGetName(rec->dom));
    if (virDomainGetUUIDString(rec->dom, d->uuid) < 0)
        d->uuid[0] = '\0';
    d->active = state != VIR_DOMAIN_SHUTOFF && state != VIR_DOMAIN_NOSTATE;
    d->running = state == VIR_DOMAIN_RUNNING || state == VIR_DOMAIN_BLOCKED;
    d->persistent = lv_is_persistent(rec->dom, pers, n_pers);
    /* A session daemon reports a cpu.time for shut-off domains too (its own,
     * read without a process): only a domain with a process has used CPU. */
    d->cpu_ns = d->active ? cpu : 0;
    d->vcpus = vcpus;
    d->mem_kib = mem;
    return 0;
}

static int lv_node(struct lv_job *j)
{
    virNodeInfo ni;
    if (virNodeGetInfo(j->conn, &ni) < 0)
        return lv_fail(j);
    j->list.node.mem_kib = ni.memory;
    j->list.node.cpus = ni.cpus;
    j->list.node.mhz = ni.mhz;
    unsigned long long free_b = virNodeGetFreeMemory(j->conn);
    if (free_b == 0 && virGetLastError())
        return lv_fail(j);
    j->list.node.free_kib = free_b / 1024;
    return 0;
}

static int lv_list_fn(struct lv_job *j)
{
    const unsigned stats = VIR_DOMAIN_STATS_STATE | VIR_DOMAIN_STATS_CPU_TOTAL |
                           VIR_DOMAIN_STATS_VCPU | VIR_DOMAIN_STATS_BALLOON;
    const unsigned which =
        VIR_CONNECT_GET_ALL_DOMAINS_STATS_ACTIVE | VIR_CONNECT_GET_ALL_DOMAINS_STATS_INACTIVE;
    virDomainStatsRecordPtr *recs = NULL;
    virDomainPtr *pers = NULL;
    int n_pers = -1, r;
    int n = virConnectGetAllDomainStats(j->conn, stats, &recs, which);
    if (n < 0)
        return lv_fail(j);
    n_pers = virConnectListAllDomains(j->conn, &pers, VIR_CONNECT_LIST_DOMAINS_PERSISTENT);
    if (n_pers < 0) {
        r = lv_fail(j);
        goto cleanup;
    }
    j->list.v = xcalloc((size_t)n + 1, sizeof(*j->list.v));
    for (r = 0; r == 0 && j->list.n < (size_t)n; j->list.n++)
        r = lv_fill(j, recs[j->list.n], pers, n_pers, &j->list.v[j->list.n]);
    r = r < 0 ? r : lv_node(j);
    j->list.t_ns = now_monotonic_ns();
cleanup:
    for (int i = 0; i < n_pers; i++)
        virDomainFree(pers[i]);
    free(pers);
    virDomainStatsRecordListFree(recs);
    return r;
}

static int lv_list(struct fx_vms *x, size_t hi, struct fx_list *ret, struct fleet_error *err)
{
    struct lv *lv = (struct lv *)x;
    virConnectPtr conn;
    int r = lv_host_conn(lv, hi, LV_OPEN_TIMEOUT_S, &conn, err);
    if (r < 0)
        return r;
    struct lv_job *j = lv_job_new(lv_list_fn);
    j->conn = conn;
    r = lv_host_call(lv, hi, j, LV_CALL_TIMEOUT_S, "cannot list domains", err);
    for (size_t i = 0; r == 0 && i < j->list.n; i++) {
        char why[300];
        if (fx_vm_name_check(j->list.v[i].name, why, sizeof(why)) < 0) {
            fleet_error_set(err, "host %s (%s): %s; the list is refused", lv_host_name(lv, hi),
                            lv_host_uri(lv, hi), why);
            fx_list_free(&j->list);
            r = -EINVAL;
        }
    }
    if (r == 0) {
        *ret = j->list;
        j->list = (struct fx_list){0};
    }
    lv_job_unref(j);
    return r;
}

/* ---- lookup: is VM on the host, and active ---------------------------------- */

static int lv_lookup_fn(struct lv_job *j)
{
    virDomainPtr d = virDomainLookupByName(j->conn, j->vm);
    if (!d) {
        virErrorPtr e = virGetLastError();
        return e && e->code == VIR_ERR_NO_DOMAIN ? 0 : lv_fail(j);
    }
    int state, reason;
    if (virDomainGetState(d, &state, &reason, 0) < 0) {
        int r = lv_fail(j);
        virDomainFree(d);
        return r;
    }
    j->found = true;
    j->active = state != VIR_DOMAIN_SHUTOFF && state != VIR_DOMAIN_NOSTATE;
    j->running = state == VIR_DOMAIN_RUNNING || state == VIR_DOMAIN_BLOCKED;
    j->dom = d;
    return 0;
}

/* On success *RET is the finished job: found, active, running, dom. */
static int lv_lookup(struct lv *lv, size_t hi, const char *vm, double timeout_s,
                     struct lv_job **ret, struct fleet_error *err)
{
    virConnectPtr conn;
    int r = lv_host_conn(lv, hi, timeout_s, &conn, err);
    if (r < 0)
        return r;
    struct lv_job *j = lv_job_new(lv_lookup_fn);
    j->conn = conn;
    j->vm = xstrdup(vm);
    r = lv_host_call(lv, hi, j, timeout_s, "cannot look up the vm", err);
    if (r < 0) {
        lv_job_unref(j);
        return r;
    }
    *ret = j;
    return 0;
}

/* Where the VM is on one host, after a failed migration. */
struct lv_where {
    struct lv *lv;
    size_t hi;
    const char *vm;
    int r;
    bool found, active, running;
    struct fleet_error err;
};

static void *lv_where_run(void *arg)
{
    struct lv_where *w = arg;
    struct lv_job *j;
    w->r = lv_lookup(w->lv, w->hi, w->vm, LV_LOCATE_TIMEOUT_S, &j, &w->err);
    if (w->r == 0) {
        w->found = j->found;
        w->active = j->active;
        w->running = j->running;
        lv_job_unref(j);
    }
    return NULL;
}

static const char *lv_where_word(const struct lv_where *w)
{
    if (w->r < 0)
        return "does not answer";
    if (w->running)
        return "runs there";
    if (w->active)
        return "is paused there";
    return w->found ? "is defined but shut off there" : "is not there";
}

/* Where the VM is after a migration, from both hosts at once (each bounded):
 * "the VM still runs on h1" into BUF. True when it runs on DST and SRC
 * answered that it has no live copy. After a failure one side may hold a
 * paused copy: "runs" means running, on one host only. */
static bool lv_locate(struct lv *lv, const char *vm, size_t src, size_t dst, char *buf, size_t len)
{
    struct lv_where w[2] = {{.lv = lv, .hi = src, .vm = vm}, {.lv = lv, .hi = dst, .vm = vm}};
    pthread_t t[2];
    bool started[2];
    for (int i = 0; i < 2; i++)
        started[i] = pthread_create(&t[i], NULL, lv_where_run, &w[i]) == 0;
    for (int i = 0; i < 2; i++) {
        if (started[i])
            pthread_join(t[i], NULL);
        else
            w[i].r = -EAGAIN;
    }
    int on = w[0].running && !w[1].running ? 0 : w[1].running && !w[0].running ? 1 : -1;
    if (on < 0) {
        snprintf(buf, len, "where the VM runs is unclear: on %s it %s, on %s it %s",
                 lv_host_name(lv, src), lv_where_word(&w[0]), lv_host_name(lv, dst),
                 lv_where_word(&w[1]));
        return false;
    }
    const struct lv_where *o = &w[!on];
    snprintf(buf, len, "the VM %s on %s%s%s%s", on ? "now runs" : "still runs",
             lv_host_name(lv, w[on].hi),
             o->r < 0    ? "; "
             : o->active ? "; a paused copy is left on "
                         : "",
             o->r < 0 || o->active ? lv_host_name(lv, o->hi) : "",
             o->r < 0 ? " does not answer" : "");
    return on == 1 && o->r == 0 && !o->active;
}

/* ---- migrate ---------------------------------------------------------------- */

/* "tcp://ADDR" with no port becomes "tcp://ADDR:PORT" with a port that is
 * free on ADDR now, when ADDR is a numeric address of this machine. That is
 * the lab, where every daemon shares 127.0.0.1 and two migrations at once
 * would both take libvirt's first migration port (49152). Elsewhere the URI
 * is kept and the destination's libvirt picks a port. */
static char *lv_migrate_uri(const char *uri)
{
    if (!uri || strncmp(uri, "tcp://", 6) != 0)
        return uri ? xstrdup(uri) : NULL;
    const char *addr = uri + 6;
    bool bracket = addr[0] == '[';
    if (strchr(addr, '/') || (bracket ? !!strstr(addr, "]:") : !!strchr(addr, ':')))
        return xstrdup(uri);
    _cleanup_free_ char *host = xstrdup(addr + bracket);
    if (bracket)
        host[strcspn(host, "]")] = '\0';
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV};
    struct addrinfo *ai = NULL;
    if (getaddrinfo(host, "0", &hints, &ai) != 0)
        return xstrdup(uri);
    _cleanup_close_ int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    bool ok = fd >= 0 && bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 &&
              getsockname(fd, (struct sockaddr *)&ss, &sl) == 0;
    freeaddrinfo(ai);
    if (!ok)
        return xstrdup(uri);
    unsigned port = ss.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
                                             : ntohs(((struct sockaddr_in *)&ss)->sin_port);
    return xasprintf("%s:%u", uri, port);
}

static int lv_migrate_fn(struct lv_job *j)
{
    if (j->dconn) {
        virDomainPtr d =
            virDomainMigrate3(j->dom, j->dconn, j->params, (unsigned)j->nparams, j->flags);
        if (!d)
            return lv_fail(j);
        virDomainFree(d);
        return 0;
    }
    if (virDomainMigrateToURI3(j->dom, j->uri, j->params, (unsigned)j->nparams, j->flags) < 0)
        return lv_fail(j);
    return 0;
}

static int lv_abort_fn(struct lv_job *j)
{
    return virDomainAbortJob(j->dom) < 0 ? lv_fail(j) : 0;
}

/* The migration job for DOM from SRC to DST, in the site's mode. */
static struct lv_job *lv_migrate_job(struct lv *lv, virDomainPtr dom, virConnectPtr dconn,
                                     size_t dst)
{
    struct lv_job *j = lv_job_new(lv_migrate_fn);
    virDomainRef(dom);
    j->dom = dom;
    j->flags = LV_MIGRATE_FLAGS;
    const struct lv_conf *conf = lv_conf(lv);
    if (conf && conf->managed) {
        j->dconn = dconn;
    } else {
        j->flags |= VIR_MIGRATE_PEER2PEER;
        j->uri = xstrdup(lv->site->hosts[dst].uri);
        virConnectClose(dconn);
    }
    _cleanup_free_ char *muri = lv_migrate_uri(lv_host_migrate_uri(lv, dst));
    int max = 0;
    if (muri)
        virTypedParamsAddString(&j->params, &j->nparams, &max, VIR_MIGRATE_PARAM_URI, muri);
    return j;
}

/* Past the timeout: abort the job on the source (bounded too) and give the
 * migration LV_ABORT_GRACE_S to end. "" or what went wrong into BUF; true
 * when the migration job ended. */
static bool lv_migrate_abort(struct lv_job *mj, char *buf, size_t len)
{
    struct timespec deadline = lv_deadline(LV_ABORT_GRACE_S);
    struct lv_job *a = lv_job_new(lv_abort_fn);
    virDomainRef(mj->dom);
    a->dom = mj->dom;
    lv_job_start(a);
    bool a_done = lv_job_wait(a, &deadline);
    bool m_done = lv_job_wait(mj, &deadline);
    if (!a_done)
        snprintf(buf, len, "; the abort got no answer within %.0f s", LV_ABORT_GRACE_S);
    else if (a->r < 0 && !m_done)
        snprintf(buf, len, "; the abort failed: %.170s", a->msg);
    else if (!m_done)
        snprintf(buf, len, "; the job did not end within %.0f s of the abort", LV_ABORT_GRACE_S);
    else
        buf[0] = '\0';
    lv_job_unref(a);
    return m_done;
}

/* Run the migration job, abort it past TIMEOUT_S; then check where the VM
 * is. libvirt can report success when the source daemon died half-way
 * (the destination finished) and leave a paused copy there: 0 only when
 * the VM runs on DST and SRC says it has no live copy. */
static int lv_migrate_run(struct lv *lv, struct lv_job *mj, const char *vm, size_t src, size_t dst,
                          double timeout_s, struct fleet_error *err)
{
    char why[300], where[300];
    int r;
    if (lv_job_call(mj, timeout_s)) {
        r = mj->r == -ENOENT ? -EIO : mj->r;
        if (r < 0)
            r = lv_host_check(lv, src, virDomainGetConnect(mj->dom), r);
        snprintf(why, sizeof(why), "%s", r < 0 ? mj->msg : "libvirt reported success");
    } else {
        char abort_msg[200];
        bool ended = lv_migrate_abort(mj, abort_msg, sizeof(abort_msg));
        r = ended && mj->r == 0 ? 0 : -ETIMEDOUT; /* 0: it finished as the abort came */
        if (r == 0)
            snprintf(why, sizeof(why),
                     "not finished after %.0f s; libvirt reported success "
                     "after the abort",
                     timeout_s);
        else
            snprintf(why, sizeof(why), "not finished after %.0f s, aborted%s", timeout_s,
                     abort_msg);
    }
    if (lv_locate(lv, vm, src, dst, where, sizeof(where)) && r == 0)
        return 0;
    fleet_error_set(err, "vm '%s': migration from host %s to host %s failed: %s; %s", vm,
                    lv_host_name(lv, src), lv_host_name(lv, dst), why, where);
    return r < 0 ? r : -EIO;
}

static int lv_migrate(struct fx_vms *x, const char *vm, size_t src, size_t dst, double timeout_s,
                      struct fleet_error *err)
{
    struct lv *lv = (struct lv *)x;
    if (src >= lv->site->n_hosts || dst >= lv->site->n_hosts) {
        fleet_error_set(err, "vm '%s': no host %zu", vm, src >= lv->site->n_hosts ? src : dst);
        return -EINVAL;
    }
    if (src == dst) {
        fleet_error_set(err, "vm '%s': cannot migrate from host %s to itself", vm,
                        lv_host_name(lv, src));
        return -EINVAL;
    }
    struct lv_job *look;
    int r = lv_lookup(lv, src, vm, LV_CALL_TIMEOUT_S, &look, err);
    if (r < 0)
        return r;
    if (!look->found || !look->active) {
        if (look->found)
            fleet_error_set(err, "vm '%s' on host %s is not running: cannot live-migrate it", vm,
                            lv_host_name(lv, src));
        else
            fleet_error_set(err, "vm '%s' is not on host %s", vm, lv_host_name(lv, src));
        r = look->found ? -EINVAL : -ENOENT;
        lv_job_unref(look);
        return r;
    }
    virConnectPtr dconn;
    r = lv_host_conn(lv, dst, LV_OPEN_TIMEOUT_S, &dconn, err);
    if (r == 0) {
        struct lv_job *mj = lv_migrate_job(lv, look->dom, dconn, dst);
        r = lv_migrate_run(lv, mj, vm, src, dst, timeout_s, err);
        lv_job_unref(mj);
    }
    lv_job_unref(look);
    return r;
}

/* ---- destroy a paused copy ------------------------------------------------------ */

/* The state is read again right before the destroy, on the worker: a
 * copy that was resumed meanwhile is left alone. */
static int lv_destroy_fn(struct lv_job *j)
{
    virDomainPtr d = virDomainLookupByName(j->conn, j->vm);
    if (!d)
        return lv_fail(j);
    int state, reason, r = 0;
    if (virDomainGetState(d, &state, &reason, 0) < 0) {
        r = lv_fail(j);
    } else if (state == VIR_DOMAIN_SHUTOFF || state == VIR_DOMAIN_NOSTATE) {
        snprintf(j->msg, sizeof(j->msg), "it is not active");
        r = -ENOENT;
    } else if (state != VIR_DOMAIN_PAUSED) {
        snprintf(j->msg, sizeof(j->msg), "it is not paused (state %d): left alone", state);
        r = -EBUSY;
    } else if (virDomainDestroy(d) < 0) {
        r = lv_fail(j);
    }
    virDomainFree(d);
    return r;
}

static int lv_destroy_paused(struct fx_vms *x, const char *vm, size_t hi, struct fleet_error *err)
{
    struct lv *lv = (struct lv *)x;
    virConnectPtr conn;
    int r = lv_host_conn(lv, hi, LV_OPEN_TIMEOUT_S, &conn, err);
    if (r < 0)
        return r;
    struct lv_job *j = lv_job_new(lv_destroy_fn);
    j->conn = conn;
    j->vm = xstrdup(vm);
    r = lv_host_call(lv, hi, j, LV_CALL_TIMEOUT_S, "cannot destroy the paused copy", err);
    lv_job_unref(j);
    return r;
}

/* ---- open and close ------------------------------------------------------------ */

static void lv_close(struct fx_vms *x)
{
    struct lv *lv = (struct lv *)x;
    if (!lv)
        return;
    for (size_t i = 0; i < lv->site->n_hosts; i++) {
        if (lv->hosts[i].conn)
            virConnectClose(lv->hosts[i].conn);
        pthread_mutex_destroy(&lv->hosts[i].lock);
    }
    free(lv->hosts);
    lv_loop_stop();
    free(lv);
}

int fx_libvirt_open(const struct site *site, struct fx_vms **ret, struct fleet_error *err)
{
    pthread_once(&lv_once, lv_init);
    if (lv_init_r < 0) {
        fleet_error_set(err, "libvirt: cannot initialise the library or its event loop");
        return lv_init_r;
    }
    int r = lv_loop_start();
    if (r < 0) {
        fleet_error_set(err, "libvirt: cannot start the event loop thread: %s", strerror(-r));
        return r;
    }
    struct lv *lv = xcalloc(1, sizeof(*lv));
    lv->pub = (struct fx_vms){.name = "libvirt",
                              .list = lv_list,
                              .migrate = lv_migrate,
                              .close = lv_close,
                              .destroy_paused = lv_destroy_paused};
    lv->site = site;
    lv->hosts = xcalloc(site->n_hosts + 1, sizeof(*lv->hosts));
    for (size_t i = 0; i < site->n_hosts; i++)
        pthread_mutex_init(&lv->hosts[i].lock, NULL);
    *ret = &lv->pub;
    return 0;
}

/* ---- fleet.ini ------------------------------------------------------------------ */

static int lv_parse(void **conf, enum fx_where where, size_t hi, const char *key, const char *val,
                    char *why, size_t size)
{
    struct lv_conf *c = *conf ? *conf : (*conf = xcalloc(1, sizeof(struct lv_conf)));
    if (where == FX_IN_CONTROLLER) { /* migrate = p2p | managed */
        if (strcasecmp(val, "p2p") != 0 && strcasecmp(val, "managed") != 0) {
            snprintf(why, size, "%s = '%.40s': want p2p|managed", key, val);
            return -EINVAL;
        }
        c->managed = strcasecmp(val, "managed") == 0;
        return 0;
    }
    if (hi >= c->n_hosts) { /* migrate_uri = */
        c->migrate_uri = xrealloc(c->migrate_uri, (hi + 1) * sizeof(*c->migrate_uri));
        memset(c->migrate_uri + c->n_hosts, 0, (hi + 1 - c->n_hosts) * sizeof(*c->migrate_uri));
        c->n_hosts = hi + 1;
    }
    free(c->migrate_uri[hi]);
    c->migrate_uri[hi] = xstrdup(val);
    return 0;
}

static void lv_conf_free(void *conf)
{
    struct lv_conf *c = conf;
    for (size_t i = 0; c && i < c->n_hosts; i++)
        free(c->migrate_uri[i]);
    if (c)
        free(c->migrate_uri);
    free(c);
}

static int lv_check(const struct site *s, const void *conf, char *why, size_t size, int *line)
{
    for (size_t i = 0; i < s->n_hosts; i++)
        if (!s->hosts[i].uri) {
            snprintf(why, size,
                     "[host %s] has no uri = (its libvirt URI, e.g. qemu+ssh://%s/system)",
                     s->hosts[i].name, s->hosts[i].name);
            *line = s->hosts[i].line;
            return -EINVAL;
        }
    return 0;
}

static const struct fx_key lv_keys[] = {
    {FX_IN_CONTROLLER, "migrate"},
    {FX_IN_HOST, "migrate_uri"},
    {0, NULL},
};

const struct fx_engine fx_engine_libvirt = {
    .name = "libvirt",
    .keys = lv_keys,
    .parse = lv_parse,
    .free_conf = lv_conf_free,
    .check = lv_check,
    .open_vms = fx_libvirt_open,
};
