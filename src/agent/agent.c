/* The agent's loop: see agent.h. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/conns.h"
#include "agent/ctlsock.h"
#include "agent/fleet_doc.h"
#include "agent/gzip.h"
#include "agent/metrics_cstate.h"
#include "agent/metrics_memory.h"
#include "agent/model_fit.h"
#include "agent/tuning.h"
#include "base/json.h"
#include "base/jsondoc.h"
#include "base/util.h"
#include "host/host.h"
#include "model/model.h"
#include "sense/clock.h"
#include "sense/dcmi.h"
#include "sense/devpolicy.h"
#include "view/report.h"
#include "view/report_power.h"
#include "view/window.h"

#define CT_TEXT        "text/plain; version=0.0.4; charset=utf-8"
#define CT_OPENMETRICS "application/openmetrics-text; version=1.0.0; charset=utf-8"
#define CT_JSON        "application/json"

enum { DOC_TEXT, DOC_OPENMETRICS, DOC_STATUS, _DOC_MAX };

/* One sample's output, shared by the responses still sending it: each
 * document rendered, and gzipped, at most once per sample. */
struct snapshot {
    unsigned refs;
    char *doc[_DOC_MAX], *gz[_DOC_MAX];
    size_t len[_DOC_MAX], gz_len[_DOC_MAX];
};

struct agent {
    struct agent_config cfg;
    const char *config_path;
    bool config_optional; /* config_path is the default file: may be missing */
    const struct agent_config *overrides;
    unsigned override_mask;
    struct host *h;
    struct sense *sense;
    struct power_model model;
    struct sample *prev;
    /* device_interval on a live root: device runtime PM is read afresh
     * only every so often (host_cache_slow); dev_before is the fresh read
     * before the last one (owned), which samples between two fresh reads
     * are judged against; dev_steal: the view's older sample holds it. */
    uint64_t dev_fresh_ns;
    struct devices_sample *dev_before;
    bool dev_steal;
    struct agent_energy *energy;
    struct agent_cstate *cstate; /* package and core C-state seconds */
    struct agent_memory *memory; /* nodes and EDAC, read once; meminfo per sample */
    struct agent_attrib *attrib; /* wake-ups and energy per cgroup; NULL: off */
    struct agent_fit *fit;       /* the model fitted to the meter; NULL: fit_interval_s 0 */
    bool is_vm;                  /* the first sample's /proc/cpuinfo said so */
    struct agent_self self;
    struct snapshot *snap;
    struct MHD_Daemon *mhd; /* owned by conns */
    struct conns *conns;    /* the HTTP connections; NULL before listening */
    int lfd;                /* the HTTP socket until conns takes it */
    char *tls_cert_pem, *tls_key_pem, *auth_password;
    int epfd, tfd, sfd, cfd; /* cfd: the control socket, -1 without */
    struct ctlsock ctl;      /* the control socket's path and inode */
    int gfd;                 /* the guard's 1-s timer, armed only when the
                              * sampling interval is longer */
    struct agent_tuning tune;
    bool tune_started;
    int pfd;           /* the packer's timer ([pack] interval_s), -1 before start */
    double pack_every; /* the interval it is armed at; 0: disarmed */
    int *pack_fds;     /* the packer's PSI trigger fds in the epoll set (EPOLLPRI) */
    size_t npack_fds;
    /* CONFDIR/devices.conf, the policy `watt report` and `watt tune` use:
     * read at start and on SIGHUP; NULL: none, built-in rules only. */
    char *confdir;
    struct devpolicy *devpolicy;
    /* CPU time of the agent's own parts of a sample, summed and last */
    uint64_t cost_ns[3], cost_last_ns[3];
    struct agent_costs costs;
    bool stop;
};

enum { COST_WAKEUPS, COST_MODEL, COST_RENDER };

/* systemd's readiness protocol (sd_notify(3)) without libsystemd: one
 * datagram to $NOTIFY_SOCKET. Nothing happens outside systemd. */
static void notify(const char *state)
{
    const char *path = getenv("NOTIFY_SOCKET");
    if (!path || (path[0] != '/' && path[0] != '@') || strlen(path) >= 108)
        return;
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    memcpy(sa.sun_path, path, strlen(path));
    if (sa.sun_path[0] == '@')
        sa.sun_path[0] = '\0'; /* abstract namespace */
    _cleanup_close_ int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return;
    socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(path));
    (void)sendto(fd, state, strlen(state), MSG_NOSIGNAL, (struct sockaddr *)&sa, len);
}

static void snapshot_unref(struct snapshot *s)
{
    if (!s || --s->refs > 0)
        return;
    for (int i = 0; i < _DOC_MAX; i++) {
        free(s->doc[i]);
        free(s->gz[i]);
    }
    free(s);
}

static void response_done(void *cls)
{
    snapshot_unref(cls);
}

static double timespec_s(const struct timeval *tv)
{
    return (double)tv->tv_sec + (double)tv->tv_usec / 1e6;
}

static void self_update(struct agent *a, uint64_t sample_ns)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) == 0) {
        a->self.cpu_s = timespec_s(&ru.ru_utime) + timespec_s(&ru.ru_stime);
        a->self.wakeups = (uint64_t)ru.ru_nvcsw + (uint64_t)ru.ru_nivcsw;
    }
    uint64_t rss;
    if (host_self_rss(&rss) == 0)
        a->self.rss_bytes = rss;
    a->self.sample_s = (double)sample_ns / 1e9;
    if (a->conns) {
        struct conns_stats st;
        conns_get_stats(a->conns, &st);
        a->self.http_open = st.open;
        a->self.http_accepted = st.accepted;
        a->self.http_evicted = st.evicted;
        a->self.http_timed_out = st.timed_out;
    }
}

static char *steal(struct strbuf *b, size_t *ret_len)
{
    *ret_len = b->len;
    char *s = strbuf_steal(b);
    return s ? s : xstrdup("");
}

static int load_model(struct agent *a);

static uint64_t thread_cpu_ns(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) < 0)
        return 0;
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void cost_add(struct agent *a, int which, uint64_t ns)
{
    a->cost_ns[which] += ns;
    a->cost_last_ns[which] = ns;
}

/* Which way per-cgroup wake-ups are counted (attrib.h). */
static const char *wakeups_path(const struct agent *a)
{
    if (!a->attrib)
        return "off";
    return wake_path_name(a->attrib->path);
}

/* The per-sampler costs for the metrics and /status: the sense samplers
 * and the topology (sense->cpu_ns), then the agent's own parts. */
static void costs_update(struct agent *a)
{
    struct agent_costs *c = &a->costs;
    const struct sense *s = a->sense;
    c->n = 0;
    for (unsigned i = 0; i <= _SAMPLER_MAX && c->n < AGENT_COSTS_MAX; i++) {
        if (i < _SAMPLER_MAX && !s->usable[i])
            continue;
        c->v[c->n++] = (struct agent_cost){.sampler = sense_cost_name(i),
                                           .path = sense_read_path(s),
                                           .up = i < _SAMPLER_MAX ? s->ok[i] : -1,
                                           .cpu_s = (double)s->cpu_ns[i] / 1e9,
                                           .last_s = (double)s->last_ns[i] / 1e9};
    }
    static const char *const names[] = {"wakeups", "model", "render"};
    for (int i = 0; i < 3 && c->n < AGENT_COSTS_MAX; i++)
        c->v[c->n++] = (struct agent_cost){.sampler = names[i],
                                           .up = -1,
                                           .path = i == COST_WAKEUPS ? wakeups_path(a)
                                                   : i == COST_MODEL ? "memory"
                                                                     : "snapshot",
                                           .cpu_s = (double)a->cost_ns[i] / 1e9,
                                           .last_s = (double)a->cost_last_ns[i] / 1e9};
    struct host_cache_stats st;
    host_cache_stats(a->h, &st);
    c->cache = st.enabled;
    c->cache_files = st.entries;
    c->cache_fds = st.kept_fds;
    c->rescans = s->rescans;
}

/* /status: the report document with the agent's costs as its "agent"
 * member, spliced in before the document's closing brace. */
static void status_add_costs(struct agent *a, struct json *doc)
{
    struct strbuf *b = &doc->out;
    while (b->len && (b->s[b->len - 1] == '\n' || b->s[b->len - 1] == ' '))
        b->len--;
    if (!b->len || b->s[b->len - 1] != '}')
        return;
    b->len--;
    b->s[b->len] = '\0';
    struct json j;
    json_init(&j, false);
    agent_costs_json(&a->costs, &j);
    strbuf_appendf(b, "%s\"agent\":%s}", b->len && b->s[b->len - 1] != '{' ? "," : "",
                   strbuf_str(&j.out));
    json_free(&j);
}

/* The fleet controller's metrics file (watt fleet run --metrics), read
 * once per sample, never at a scrape. It is written by rename, so it is
 * whole; it is checked and converted for OpenMetrics (fleet_doc.h). One
 * that is missing (no controller on this host yet), too large or
 * malformed is not served (watt_agent_fleet_metrics_up 0), and said once
 * per change of the reason on stderr. */
static void read_fleet_metrics(const char *path, struct agent_fleet *out)
{
    static char *last_err;
    _cleanup_free_ char *err = NULL;
    struct strbuf buf = {0};
    _cleanup_fclose_ FILE *f = fopen(path, "re");
    if (!f) {
        err = xstrdup(strerror(errno));
    } else {
        char chunk[65536];
        size_t n;
        while (buf.len <= (1u << 20) && (n = fread(chunk, 1, sizeof(chunk), f)) > 0)
            strbuf_append_n(&buf, chunk, n);
        if (buf.len > (1u << 20))
            err = xstrdup("larger than 1 MiB");
        else if (ferror(f))
            err = xstrdup(strerror(EIO));
    }
    *out = (struct agent_fleet){0};
    if (!err && fleet_doc_convert(buf.s ? buf.s : "", buf.len, &out->text, &out->om, &err) == 0)
        out->ok = true;
    strbuf_free(&buf);
    if (err && (!last_err || !streq(err, last_err)))
        fprintf(stderr, "watt agent: fleet_metrics %s: %s; not served\n", path, err);
    else if (!err && last_err)
        fprintf(stderr, "watt agent: fleet_metrics %s: served again\n", path);
    free(last_err);
    last_err = err ? xstrdup(err) : NULL;
}

/* What the current snapshot is rendered from, kept until the next sample:
 * the two samples, the power summary, the problems, the guard's status and
 * the agent's own figures as of the sample. Rendering reads memory only
 * (never sysfs), so a scrape may do it: each of the three documents is
 * rendered at the first request for it, once per sample, and not at all
 * when nobody asks (an idle agent, or a Prometheus that wants one format). */
struct view {
    bool valid;
    struct report_ctx c;
    struct sample *older; /* c.a when there were two samples; owned */
    struct power_summary ps;
    struct diags diags;
    struct guard_status gs;
    struct pack_status pk; /* numbers only: its strings are not kept */
    struct agent_self self;
    struct agent_fleet fleet; /* the fleet controller's metrics, read at the sample; owned */
};

static struct view view_of_agent; /* the agent runs once per process */

static void view_clear(struct view *v)
{
    if (!v->valid)
        return;
    power_summary_free(&v->ps);
    diags_free(&v->diags);
    sample_free(v->older);
    free(v->fleet.text);
    free(v->fleet.om);
    *v = (struct view){0};
}

/* Render one document of the current snapshot into it, unless done. */
static void snapshot_fill(struct agent *a, struct snapshot *s, int doc)
{
    struct view *v = &view_of_agent;
    char **dst = &s->doc[doc];
    size_t *len = &s->len[doc];
    if (*dst)
        return;
    if (!v->valid || a->snap != s) { /* cannot happen: only the current one is served */
        *dst = xstrdup("");
        *len = 0;
        return;
    }
    uint64_t t0 = thread_cpu_ns();
    struct strbuf buf = {0};
    if (doc == DOC_STATUS) {
        struct json j;
        json_init(&j, false);
        report_render_json(&v->c, &j);
        status_add_costs(a, &j);
        *dst = steal(&j.out, len);
        json_free(&j);
    } else {
        agent_metrics_render(&v->c, a->energy, &v->self, a->cfg.rapl, a->cfg.pue,
                             doc == DOC_OPENMETRICS, &buf);
        *dst = steal(&buf, len);
    }
    cost_add(a, COST_RENDER, thread_cpu_ns() - t0);
}

/* Take a sample and replace the snapshot. A failed sample keeps the old
 * snapshot (and says so on stderr). */
static void devices_drop(struct devices_sample *ds)
{
    struct sample s = {.devices = ds};
    if (ds)
        sampler_table[SAMPLER_DEVICES]->free_sample(&s);
}

static void take_sample(struct agent *a)
{
    uint64_t t0 = now_monotonic_ns();
    struct sample *b = NULL;
    /* Device runtime PM afresh every device_interval on a live root (its
     * times are cumulative: rates stay exact), else its last read. */
    double every = a->cfg.device_interval_s >= 0 ? a->cfg.device_interval_s : a->h->live ? 10 : 0;
    bool slow = every > 0;
    bool fresh = !slow || !a->dev_fresh_ns ||
                 (double)(t0 - a->dev_fresh_ns) / 1e9 >= every - a->cfg.interval_s / 2;
    if (slow)
        host_cache_slow(a->h, fresh ? 1 : UINT64_MAX);
    /* between fresh reads the devices are the last read's: not walked
     * again, moved from the previous sample (below) */
    a->sense->skip = slow && !fresh && a->prev && a->prev->devices ? 1u << SAMPLER_DEVICES : 0;
    if (sense_sample(a->sense, &b) < 0 || !b) {
        fprintf(stderr, "watt agent: sampling failed; keeping the last snapshot\n");
        return;
    }
    if (!a->prev && !a->is_vm && clock_is_vm(b->clock)) {
        a->is_vm = true;
        load_model(a); /* a configured model loaded before: cannot fail now */
        if (a->attrib)
            agent_attrib_set_model(a->attrib, &a->model);
    }
    /* the old snapshot's view goes; responses still sending keep their text */
    snapshot_unref(a->snap);
    a->snap = NULL;
    struct view *v = &view_of_agent;
    if (a->dev_steal && v->valid && v->older) { /* it holds the fresh read before */
        devices_drop(a->dev_before);
        a->dev_before = v->older->devices;
        v->older->devices = NULL;
    }
    a->dev_steal = false;
    view_clear(v);
    if (a->sense->skip & (1u << SAMPLER_DEVICES)) {
        b->devices = a->prev->devices;
        a->prev->devices = NULL;
    }
    v->valid = true;
    v->older = a->prev;
    v->c = (struct report_ctx){
        .h = a->h,
        .sense = a->sense,
        .a = a->prev,
        .b = a->prev ? b : NULL,
        .cur = b,
        /* no nominal interval: the time between the ticks, on a recorded root too */
        .interval_s = window_interval(a->prev, b, a->h->live, 0),
        .diags = &v->diags,
        .devpolicy = a->devpolicy,
    };
    if (!a->prev) /* a single sample: report's convention is a = it, b = NULL */
        v->c.a = b;
    if (slow && fresh) {
        a->dev_fresh_ns = t0;
        a->dev_steal = a->prev != NULL; /* a->prev holds the read before this */
    } else if (slow) {
        v->c.dev_prev_set = true;
        v->c.dev_prev = a->dev_before;
    }
    uint64_t t1 = thread_cpu_ns();
    v->c.fitted = agent_fit_model(a->fit);
    report_power_build(&v->c, &a->model, &v->ps);
    v->c.power = &v->ps;
    agent_fit_update(a->fit, &v->ps, a->cfg.pue, now_monotonic_ns());
    v->c.fitted = agent_fit_model(a->fit);
    agent_energy_update(a->energy, a->prev, b);
    agent_cstate_update(a->cstate, &v->c);
    agent_memory_update(a->memory, a->h, &v->c);
    v->c.memory = agent_memory_info(a->memory);
    uint64_t t2 = thread_cpu_ns();
    cost_add(a, COST_MODEL, t2 - t1);
    if (a->attrib && a->prev)
        agent_attrib_update(a->attrib, a->prev, b, v->c.interval_s);
    cost_add(a, COST_WAKEUPS, thread_cpu_ns() - t2);
    a->self.attrib = a->attrib;
    a->self.cstate = a->cstate;
    a->self.memory = a->memory;
    v->c.top = a->attrib ? agent_attrib_frame(a->attrib) : NULL;
    a->self.samples++;
    a->prev = b;

    self_update(a, now_monotonic_ns() - t0);
    costs_update(a);
    a->self.costs = &a->costs;
    v->self = a->self; /* as of this sample: scrapes counted so far */
    if (a->tune.packer) {
        packer_get_status(a->tune.packer, &v->pk);
        v->pk.cgroups = NULL, v->pk.ncgroups = 0;
        v->pk.state = v->pk.cpus = v->pk.hierarchy = v->pk.pressure_source = v->pk.note = NULL;
        v->self.pack = &v->pk;
    }
    if (a->tune.guard) {
        guard_get_status(a->tune.guard, now_monotonic_ns(), &v->gs);
        v->self.guard = &v->gs;
    }
    if (a->cfg.fleet_metrics) { /* read at the sample, never at a scrape */
        read_fleet_metrics(a->cfg.fleet_metrics, &v->fleet);
        v->self.fleet = &v->fleet;
    }
    struct snapshot *s = xcalloc(1, sizeof(*s));
    s->refs = 1;
    a->snap = s;
    a->self.sample_s = (double)(now_monotonic_ns() - t0) / 1e9;
}

static bool wants_openmetrics(struct MHD_Connection *conn)
{
    const char *accept = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Accept");
    return accept && strstr(accept, "application/openmetrics-text");
}

static enum MHD_Result reply_text(struct MHD_Connection *conn, unsigned status, const char *text)
{
    struct MHD_Response *r =
        MHD_create_response_from_buffer(strlen(text), (void *)text, MHD_RESPMEM_PERSISTENT);
    MHD_add_response_header(r, "Content-Type", "text/plain; charset=utf-8");
    enum MHD_Result ret = MHD_queue_response(conn, status, r);
    MHD_destroy_response(r);
    return ret;
}

/* The document gzipped, once per sample; false when zlib failed (said
 * once: the document then goes uncompressed). */
static bool snapshot_gzip(struct agent *a, struct snapshot *s, int doc)
{
    static bool said;
    uint64_t t0 = thread_cpu_ns();
    if (!s->gz[doc] && agent_gzip(s->doc[doc], s->len[doc], &s->gz[doc], &s->gz_len[doc]) < 0) {
        if (!said)
            fprintf(stderr, "watt agent: gzip failed; answering uncompressed\n");
        said = true;
        return false;
    }
    cost_add(a, COST_RENDER, thread_cpu_ns() - t0);
    return true;
}

/* Document DOC of the current snapshot, gzipped when the client accepts it
 * (Vary: Accept-Encoding either way: caches must not mix the two). */
static enum MHD_Result reply_snapshot(struct agent *a, struct MHD_Connection *conn, int doc,
                                      const char *type)
{
    struct snapshot *s = a->snap;
    snapshot_fill(a, s, doc);
    const char *ae = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Accept-Encoding");
    bool gz = agent_accepts_gzip(ae) && snapshot_gzip(a, s, doc);
    const char *body = gz ? s->gz[doc] : s->doc[doc];
    size_t len = gz ? s->gz_len[doc] : s->len[doc];
    s->refs++;
    struct MHD_Response *r =
        MHD_create_response_from_buffer_with_free_callback_cls(len, (void *)body, response_done, s);
    if (!r) {
        snapshot_unref(s);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", type);
    MHD_add_response_header(r, "Vary", "Accept-Encoding");
    if (gz)
        MHD_add_response_header(r, "Content-Encoding", "gzip");
    enum MHD_Result ret = MHD_queue_response(conn, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return ret;
}

/* Compare in time independent of where the strings differ. */
static bool same_secret(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    unsigned char diff = (unsigned char)(la != lb);
    for (size_t i = 0; i < la; i++)
        diff |= (unsigned char)(a[i] ^ b[i % (lb ? lb : 1)]);
    return diff == 0;
}

static bool authorised(struct agent *a, struct MHD_Connection *conn)
{
    char *pass = NULL;
    char *user = MHD_basic_auth_get_username_password(conn, &pass);
    bool ok =
        user && pass && same_secret(user, a->cfg.auth_user) && same_secret(pass, a->auth_password);
    MHD_free(user);
    MHD_free(pass);
    return ok;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_size, void **con_cls)
{
    struct agent *a = cls;
    (void)version;
    (void)upload_data;
    conns_request_head(conn); /* the head is in: no header deadline now */

    if (!streq(method, "GET") && !streq(method, "HEAD"))
        return reply_text(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "only GET and HEAD\n");
    if (a->cfg.auth_user && !authorised(a, conn)) {
        struct MHD_Response *r = MHD_create_response_from_buffer(
            strlen("authentication required\n"), (void *)"authentication required\n",
            MHD_RESPMEM_PERSISTENT);
        enum MHD_Result ret = MHD_queue_basic_auth_fail_response(conn, "watt", r);
        MHD_destroy_response(r);
        return ret;
    }
    if (*upload_size) /* a GET with a body: refuse it rather than buffer it */
        return reply_text(conn, MHD_HTTP_BAD_REQUEST, "GET takes no body\n");
    (void)con_cls;
    if (streq(url, "/healthz"))
        return reply_text(conn, a->snap ? MHD_HTTP_OK : MHD_HTTP_SERVICE_UNAVAILABLE,
                          a->snap ? "ok\n" : "no sample yet\n");
    if (streq(url, "/"))
        return reply_text(conn, MHD_HTTP_OK,
                          "watt agent: /metrics (Prometheus text or OpenMetrics), /status "
                          "(watt report --json), /healthz\n");
    if (!streq(url, "/metrics") && !streq(url, "/status"))
        return reply_text(conn, MHD_HTTP_NOT_FOUND, "not found: try /metrics\n");
    if (!a->snap)
        return reply_text(conn, MHD_HTTP_SERVICE_UNAVAILABLE, "no sample yet\n");
    if (streq(url, "/status"))
        return reply_snapshot(a, conn, DOC_STATUS, CT_JSON);
    a->self.scrapes++;
    if (wants_openmetrics(conn))
        return reply_snapshot(a, conn, DOC_OPENMETRICS, CT_OPENMETRICS);
    return reply_snapshot(a, conn, DOC_TEXT, CT_TEXT);
}

/* No model configured: vm-vcpu in a VM (its share of the host), as watt
 * report and watt top choose; known from the first sample on. */
static int load_model(struct agent *a)
{
    model_default(&a->model);
    if (!a->cfg.model) {
        if (a->is_vm)
            model_builtin("vm-vcpu", &a->model);
        return 0;
    }
    if (!strchr(a->cfg.model, '/') && model_builtin(a->cfg.model, &a->model) == 0)
        return 0;
    _cleanup_free_ char *err = NULL;
    if (model_load(a->cfg.model, &a->model, &err) < 0) {
        fprintf(stderr, "watt agent: %s\n", err ? err : a->cfg.model);
        return -EINVAL;
    }
    return 0;
}

/* A PEM file or a password file, up to 64 KiB, judged on the opened file
 * (fstat, no window between the check and the read): a regular file; a
 * secret one (SECRET) also owned by root or by the agent's user and closed
 * to group and others, as ssh wants of a private key. KEY names the
 * setting in messages. */
static char *read_small(const char *path, const char *key, bool secret)
{
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0) {
        fprintf(stderr, "watt agent: cannot read %s %s: %s\n", key, path, strerror(errno));
        return NULL;
    }
    if (!S_ISREG(st.st_mode)) {
        fprintf(stderr, "watt agent: %s %s is not a regular file\n", key, path);
        return NULL;
    }
    if (secret && st.st_uid != 0 && st.st_uid != geteuid()) {
        fprintf(stderr,
                "watt agent: %s %s is owned by uid %u, not by root or the agent's user (uid %u): "
                "chown it\n",
                key, path, (unsigned)st.st_uid, (unsigned)geteuid());
        return NULL;
    }
    if (secret && (st.st_mode & 077)) {
        fprintf(stderr, "watt agent: %s %s is %s by group/others (mode %04o): chmod 600 it\n", key,
                path, (st.st_mode & 044) ? "readable" : "writable", (unsigned)(st.st_mode & 07777));
        return NULL;
    }
    char *buf = xmalloc(65536);
    size_t n = 0;
    ssize_t r;
    while (n < 65535 && (r = read(fd, buf + n, 65535 - n)) != 0) {
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            fprintf(stderr, "watt agent: cannot read %s %s: %s\n", key, path, strerror(errno));
            free(buf);
            return NULL;
        }
        n += (size_t)r;
    }
    buf[n] = '\0';
    return buf;
}

/* The BMC read over the LAN (bmc =): its password file is a secret, as
 * auth_password_file is. Set before sense_open(), whose "dcmi" probe
 * opens the session; without bmc the sampler reads in-band. Read at start
 * only: a SIGHUP does not reopen the sampler. */
static int configure_bmc(const struct agent_config *c)
{
    if (!c->bmc) {
        if (c->bmc_user || c->bmc_password_file) {
            fprintf(stderr, "watt agent: bmc_user and bmc_password_file go with bmc\n");
            return -EINVAL;
        }
        dcmi_sampler_configure(NULL);
        return 0;
    }
    _cleanup_free_ char *password = NULL;
    if (c->bmc_password_file) {
        password = read_small(c->bmc_password_file, "bmc_password_file", true);
        if (!password)
            return -EINVAL;
        password[strcspn(password, "\r\n")] = '\0';
    }
    dcmi_sampler_configure(&(struct dcmi_lan){
        .host = c->bmc,
        .user = c->bmc_user ? c->bmc_user : "",
        .password = password ? password : "",
    });
    if (password)
        explicit_bzero(password, strlen(password));
    return 0;
}

/* TLS and basic auth: loaded before listening; listening beyond loopback
 * without both is refused unless `insecure = yes`. */
static int load_secrets(struct agent *a)
{
    const struct agent_config *c = &a->cfg;
    if (!!c->tls_cert != !!c->tls_key) {
        fprintf(stderr, "watt agent: tls_cert and tls_key go together\n");
        return -EINVAL;
    }
    if (!!c->auth_user != !!c->auth_password_file) {
        fprintf(stderr, "watt agent: auth_user and auth_password_file go together\n");
        return -EINVAL;
    }
    if (!agent_host_is_loopback(c->listen_host) && !c->insecure &&
        (!c->tls_cert || !c->auth_user)) {
        fprintf(stderr,
                "watt agent: listening on %s, beyond this machine, needs tls_cert, "
                "tls_key, auth_user and auth_password_file (or insecure = yes)\n",
                c->listen_host);
        return -EPERM;
    }
    if (c->tls_cert) {
        if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES) {
            fprintf(stderr, "watt agent: this libmicrohttpd has no TLS\n");
            return -EOPNOTSUPP;
        }
        a->tls_cert_pem = read_small(c->tls_cert, "tls_cert", false);
        a->tls_key_pem = a->tls_cert_pem ? read_small(c->tls_key, "tls_key", true) : NULL;
        if (!a->tls_cert_pem || !a->tls_key_pem)
            return -EINVAL;
    }
    if (c->auth_user) {
        a->auth_password = read_small(c->auth_password_file, "auth_password_file", true);
        if (!a->auth_password)
            return -EINVAL;
        a->auth_password[strcspn(a->auth_password, "\r\n")] = '\0';
        if (!*a->auth_password) {
            fprintf(stderr, "watt agent: %s: empty password\n", c->auth_password_file);
            return -EINVAL;
        }
    }
    return 0;
}

/* Bind the HTTP socket: first of all that another agent could own (the
 * control socket, the journal), so that a second agent on the same port
 * stops here and touches nothing of the first one's. */
static int listen_http(struct agent *a)
{
    int r = conns_listen(a->cfg.listen_host, a->cfg.port, &a->lfd);
    if (r == -EINVAL)
        fprintf(stderr, "watt agent: listen address '%s' is not an IPv4 or IPv6 address\n",
                a->cfg.listen_host);
    else if (r < 0)
        fprintf(stderr, "watt agent: cannot listen on %s:%u: %s\n", a->cfg.listen_host, a->cfg.port,
                strerror(-r));
    return r;
}

/* Enough file descriptors for max_connections (plus a batch on its way
 * out) over what the agent holds already: the soft limit is raised up to
 * the hard one, and max_connections lowered (said once) where even that is
 * too little. RESERVE: the descriptors the rest of the agent may hold. */
static void fit_nofile(struct agent *a, unsigned reserve)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
        return;
    rlim_t need = (rlim_t)a->cfg.max_connections + CONNS_BATCH + reserve;
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < need) {
        rlim_t old = rl.rlim_cur;
        rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= need ? need : rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
            rl.rlim_cur = old;
    }
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < need) {
        unsigned room = rl.rlim_cur > (rlim_t)CONNS_BATCH + reserve + 1
                            ? (unsigned)(rl.rlim_cur - CONNS_BATCH - reserve)
                            : 1;
        fprintf(stderr,
                "watt agent: RLIMIT_NOFILE is %llu (hard limit): max_connections lowered from %u "
                "to %u\n",
                (unsigned long long)rl.rlim_cur, a->cfg.max_connections, room);
        a->cfg.max_connections = room;
    }
}

/* The read cache (sense_cache): the files kept open get what the soft
 * RLIMIT_NOFILE leaves over HTTP's share (fit_nofile), raised toward the
 * hard limit by up to CACHE_FDS; without room every moving file is opened
 * each sample, as before. */
#define CACHE_FDS 16384u
static void enable_read_cache(struct agent *a)
{
    unsigned trace_fds = 0;
    if (a->attrib) {
        const int *fds;
        trace_fds = (unsigned)agent_attrib_fds(a->attrib, &fds);
    }
    rlim_t http = (rlim_t)a->cfg.max_connections + CONNS_BATCH + 64 + trace_fds;
    struct rlimit rl;
    unsigned budget = CACHE_FDS;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
        rlim_t want = http + CACHE_FDS;
        if (rl.rlim_cur < want) {
            rlim_t old = rl.rlim_cur;
            rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= want ? want : rl.rlim_max;
            if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
                rl.rlim_cur = old;
        }
        budget = rl.rlim_cur > http ? (unsigned)(rl.rlim_cur - http) : 0;
        if (budget > CACHE_FDS)
            budget = CACHE_FDS;
    }
    sense_cache(a->sense, budget);
}

static int start_http(struct agent *a)
{
    unsigned flags = MHD_USE_EPOLL; /* driven from our loop; the agent accepts (conns.c) */
    /* the HTTPS options only with TLS: MHD refuses them otherwise */
    struct MHD_OptionItem opts[] = {
        {MHD_OPTION_CONNECTION_TIMEOUT, (intptr_t)a->cfg.timeout_s, NULL},
        {MHD_OPTION_CONNECTION_MEMORY_LIMIT, (intptr_t)a->cfg.max_request_bytes, NULL},
        {MHD_OPTION_HTTPS_MEM_CERT, 0, a->tls_cert_pem},
        {MHD_OPTION_HTTPS_MEM_KEY, 0, a->tls_key_pem},
        {MHD_OPTION_END, 0, NULL},
    };
    if (a->tls_cert_pem)
        flags |= MHD_USE_TLS;
    else
        opts[2].option = MHD_OPTION_END;
    unsigned trace_fds = 0;
    if (a->attrib) {
        const int *fds;
        trace_fds = (unsigned)agent_attrib_fds(a->attrib, &fds);
    }
    fit_nofile(a, 64 + trace_fds);
    struct conns_limits lim = {
        .max = a->cfg.max_connections,
        .per_client = a->cfg.max_per_client,
        .header_timeout_s = a->cfg.header_timeout_s,
    };
    int r = conns_new(a->lfd, a->epfd, &lim, &a->conns);
    if (r < 0)
        return r;
    a->lfd = -1; /* conns has it */
    if (conns_start(a->conns, flags, on_request, a, opts, &a->mhd) < 0) {
        fprintf(stderr, "watt agent: cannot start libmicrohttpd on %s:%u\n", a->cfg.listen_host,
                a->cfg.port);
        return -EINVAL;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(a->mhd, MHD_DAEMON_INFO_EPOLL_FD);
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = info->epoll_fd};
    if (epoll_ctl(a->epfd, EPOLL_CTL_ADD, info->epoll_fd, &ev) < 0)
        return -errno;
    return 0;
}

static int arm_timer(struct agent *a)
{
    double s = a->cfg.interval_s;
    struct itimerspec its = {
        .it_interval = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)},
        .it_value = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)},
    };
    if (timerfd_settime(a->tfd, 0, &its, NULL) < 0)
        return -errno;
    return 0;
}

/* The guard's period is min(interval, 1 s): up to 1 s it ticks on the
 * sampling timer (no extra wake-up); beyond, on its own 1-s timer. */
static bool guard_timer_needed(const struct agent *a)
{
    return a->tune.has_gc && a->cfg.interval_s > 1;
}

static void arm_guard_timer(struct agent *a)
{
    struct itimerspec its = {{0, 0}, {0, 0}};
    if (guard_timer_needed(a))
        its.it_interval.tv_sec = its.it_value.tv_sec = 1;
    (void)timerfd_settime(a->gfd, 0, &its, NULL);
}

/* The packer's timer and PSI triggers follow the packer: it may start
 * late (a locked journal) or change with a reload. */
static void sync_pack(struct agent *a)
{
    double every = agent_tuning_pack_interval(&a->tune);
    if (every != a->pack_every && a->pfd >= 0) {
        struct itimerspec its = {{0, 0}, {0, 0}};
        if (every > 0) {
            its.it_interval.tv_sec = (time_t)every;
            its.it_interval.tv_nsec = (long)((every - (double)(time_t)every) * 1e9);
            its.it_value = its.it_interval;
        }
        (void)timerfd_settime(a->pfd, 0, &its, NULL);
        a->pack_every = every;
    }
    const int *fds;
    size_t n = agent_tuning_pack_fds(&a->tune, &fds);
    if (n == a->npack_fds && (!n || !memcmp(fds, a->pack_fds, n * sizeof(*fds))))
        return;
    for (size_t i = 0; i < a->npack_fds; i++)
        (void)epoll_ctl(a->epfd, EPOLL_CTL_DEL, a->pack_fds[i], NULL);
    free(a->pack_fds);
    a->pack_fds = NULL;
    a->npack_fds = 0;
    if (!n)
        return;
    a->pack_fds = xcalloc(n, sizeof(*fds));
    for (size_t i = 0; i < n; i++) {
        struct epoll_event ev = {.events = EPOLLPRI, .data.fd = fds[i]};
        if (epoll_ctl(a->epfd, EPOLL_CTL_ADD, fds[i], &ev) == 0)
            a->pack_fds[a->npack_fds++] = fds[i];
        else
            fprintf(stderr, "watt agent: packer: cannot poll its PSI trigger: %s\n",
                    strerror(errno));
    }
}

static bool is_pack_fd(const struct agent *a, int fd)
{
    for (size_t i = 0; i < a->npack_fds; i++)
        if (a->pack_fds[i] == fd)
            return true;
    return false;
}

static void apply_overrides(struct agent_config *c, const struct agent_config *o, unsigned mask)
{
    if (mask & AGENT_OVR_LISTEN) {
        free(c->listen_host);
        c->listen_host = xstrdup(o->listen_host);
        c->port = o->port;
    }
    if (mask & AGENT_OVR_INTERVAL)
        c->interval_s = o->interval_s;
    if (mask & AGENT_OVR_ROOT) {
        free(c->root);
        c->root = o->root ? xstrdup(o->root) : NULL;
    }
    if (mask & AGENT_OVR_PROFILE) {
        free(c->profile);
        c->profile = o->profile ? xstrdup(o->profile) : NULL;
    }
}

/* Started without --config, and the default file is (still) missing. */
static bool no_config_file(const struct agent *a)
{
    return !a->config_path ||
           (a->config_optional && access(a->config_path, F_OK) < 0 && errno == ENOENT);
}

/* SIGHUP: re-read the config; a broken one leaves the running one as it
 * is. Listen address and root need a restart (said so). */
static void reload_config(struct agent *a)
{
    if (!a->config_path) {
        fprintf(stderr, "watt agent: SIGHUP: no --config to reload\n");
        return;
    }
    if (no_config_file(a)) {
        fprintf(stderr, "watt agent: SIGHUP: no %s: keeping the built-in defaults\n",
                a->config_path);
        return;
    }
    struct agent_config c;
    agent_config_default(&c);
    _cleanup_free_ char *err = NULL;
    if (agent_config_load(a->config_path, &c, &err) < 0) {
        fprintf(stderr, "watt agent: reload refused, keeping the running config: %s\n", err);
        agent_config_free(&c);
        return;
    }
    apply_overrides(&c, a->overrides, a->override_mask);
    if (!streq(c.listen_host, a->cfg.listen_host) || c.port != a->cfg.port ||
        !streq(c.root ? c.root : "", a->cfg.root ? a->cfg.root : ""))
        fprintf(stderr, "watt agent: reload: listen and root changes need a restart\n");
    a->cfg.interval_s = c.interval_s;
    a->cfg.rapl = c.rapl;
    a->cfg.pue = c.pue;
    free(a->cfg.model);
    a->cfg.model = c.model ? xstrdup(c.model) : NULL;
    agent_tuning_reload(&a->tune, &c);
    free(a->cfg.profile);
    a->cfg.profile = c.profile ? xstrdup(c.profile) : NULL;
    a->cfg.restore_on_exit = c.restore_on_exit;
    a->cfg.device_interval_s = c.device_interval_s;
    if (c.fit_interval_s != a->cfg.fit_interval_s) { /* the points so far go */
        agent_fit_free(a->fit);
        a->fit = c.fit_interval_s > 0 ? agent_fit_new(a->h, c.fit_interval_s) : NULL;
    }
    a->cfg.fit_interval_s = c.fit_interval_s;
    agent_config_free(&c);
    if (load_model(a) < 0)
        model_default(&a->model);
    if (a->attrib)
        agent_attrib_set_model(a->attrib, &a->model);
    arm_timer(a);
    arm_guard_timer(a);
    sync_pack(a);
    fprintf(stderr, "watt agent: config reloaded from %s\n", a->config_path);
}

/* CONFDIR/devices.conf for the device metrics and /status, judged as
 * `watt report --config-dir` does. At start a broken file is an error (as
 * in report and tune); on SIGHUP it keeps the running policy. The
 * directory is the one of the start: config_dir changes need a restart. */
static int load_devpolicy(struct agent *a, bool reload)
{
    struct devpolicy *p = NULL;
    _cleanup_free_ char *err = NULL;
    int r = devpolicy_load(a->confdir, &p, &err);
    if (r < 0) {
        fprintf(stderr, "watt agent: %s%s\n",
                reload ? "reload: keeping the running device policy: " : "", err);
        return r;
    }
    if (p)
        fprintf(stderr, "watt agent: device policy: %zu rule%s from %s\n", p->n,
                p->n == 1 ? "" : "s", p->file);
    else if (a->devpolicy)
        fprintf(stderr, "watt agent: device policy: %s/%s is gone, built-in rules only\n",
                a->confdir, DEVPOLICY_FILE);
    devpolicy_free(a->devpolicy);
    a->devpolicy = p;
    return 0;
}

static void reload(struct agent *a)
{
    notify("RELOADING=1");
    /* the current snapshot's view points into the guard and the device
     * policy a reload replaces: render what was not asked for yet now */
    if (a->snap)
        for (int doc = DOC_TEXT; doc <= DOC_STATUS; doc++)
            snapshot_fill(a, a->snap, doc);
    sense_refresh(a->sense); /* topology, devices, names: read anew */
    agent_memory_reload(a->memory, a->h);
    load_devpolicy(a, true); /* with or without --config */
    reload_config(a);
    notify("READY=1");
}

static void on_signal(struct agent *a)
{
    struct signalfd_siginfo si;
    while (read(a->sfd, &si, sizeof(si)) == sizeof(si)) {
        if (si.ssi_signo == SIGHUP)
            reload(a);
        else
            a->stop = true;
    }
}

/* The control socket: root only (SO_PEERCRED), one command per
 * connection, answered at once. Opened after the HTTP socket is bound, and
 * without it the agent still serves: metrics matter more. */
static int open_control(struct agent *a)
{
    if (!a->cfg.control || !*a->cfg.control)
        return 0;
    int r = ctlsock_open(a->cfg.control, &a->ctl);
    if (r < 0 || a->ctl.fd < 0)
        return r;
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = a->ctl.fd};
    if (epoll_ctl(a->epfd, EPOLL_CTL_ADD, a->ctl.fd, &ev) < 0)
        return -errno;
    a->cfd = a->ctl.fd;
    return 0;
}

static void ctl_status(struct agent *a, struct strbuf *out)
{
    struct json j;
    json_init(&j, false);
    json_doc_begin(&j, "watt-ctl-status/1", doc_time_now());
    json_kv_string(&j, "listen", a->cfg.listen_host);
    json_kv_u64(&j, "port", a->cfg.port);
    json_kv_double(&j, "interval_s", a->cfg.interval_s);
    json_kv_string(&j, "root", a->cfg.root ? a->cfg.root : "/");
    json_kv_u64(&j, "samples", a->self.samples);
    json_kv_u64(&j, "scrapes", a->self.scrapes);
    json_kv_double(&j, "uptime_s", (double)now_realtime_ns() / 1e9 - a->self.start_time_s);
    json_kv_double(&j, "cpu_s", a->self.cpu_s);
    json_kv_u64(&j, "rss_bytes", a->self.rss_bytes);
    json_kv_u64(&j, "wakeups", a->self.wakeups);
    agent_tuning_status(&a->tune, now_monotonic_ns(), &j);
    json_object_end(&j);
    strbuf_append(out, strbuf_str(&j.out));
    strbuf_append(out, "\n");
    json_free(&j);
}

static void reload(struct agent *a);

static void on_control(struct agent *a)
{
    _cleanup_close_ int fd = accept4(a->cfd, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0)
        return;
    struct ucred cred;
    socklen_t len = sizeof(cred);
    struct strbuf out = {0};
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 || cred.uid != 0) {
        strbuf_append(&out, "error: the control socket answers root only\n");
    } else {
        /* root only, and a short timeout: a stalled client costs 200 ms */
        struct timeval tv = {0, 200000};
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        char cmd[64];
        ssize_t n = read(fd, cmd, sizeof(cmd) - 1);
        cmd[n > 0 ? n : 0] = '\0';
        cmd[strcspn(cmd, "\r\n")] = '\0';
        if (streq(cmd, "status")) {
            ctl_status(a, &out);
        } else if (streq(cmd, "sample")) {
            take_sample(a);
            strbuf_appendf(&out, "ok: sample %llu taken\n", (unsigned long long)a->self.samples);
        } else if (streq(cmd, "reload")) {
            if (!a->config_path) {
                strbuf_append(&out, "error: started without --config: nothing to reload\n");
            } else if (no_config_file(a)) {
                strbuf_appendf(&out, "error: no --config and no %s: nothing to reload\n",
                               a->config_path);
            } else {
                reload(a);
                strbuf_append(&out, "ok: reloaded (see the agent's log for the outcome)\n");
            }
        } else {
            strbuf_appendf(&out, "error: unknown command '%.40s' (status, reload, sample)\n", cmd);
        }
    }
    (void)send(fd, strbuf_str(&out), out.len, MSG_NOSIGNAL);
    strbuf_free(&out);
}

static int open_fds(struct agent *a)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    sigaddset(&set, SIGPIPE);
    if (sigprocmask(SIG_BLOCK, &set, NULL) < 0)
        return -errno;
    sigdelset(&set, SIGPIPE); /* blocked only: MHD writes to closed sockets */
    a->epfd = epoll_create1(EPOLL_CLOEXEC);
    a->sfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
    a->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
    a->gfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
    a->pfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
    if (a->epfd < 0 || a->sfd < 0 || a->tfd < 0 || a->gfd < 0 || a->pfd < 0)
        return -errno;
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = a->sfd};
    if (epoll_ctl(a->epfd, EPOLL_CTL_ADD, a->sfd, &ev) < 0)
        return -errno;
    ev.data.fd = a->tfd;
    if (epoll_ctl(a->epfd, EPOLL_CTL_ADD, a->tfd, &ev) < 0)
        return -errno;
    ev.data.fd = a->gfd;
    if (epoll_ctl(a->epfd, EPOLL_CTL_ADD, a->gfd, &ev) < 0)
        return -errno;
    ev.data.fd = a->pfd;
    if (epoll_ctl(a->epfd, EPOLL_CTL_ADD, a->pfd, &ev) < 0)
        return -errno;
    return arm_timer(a);
}

static void agent_close(struct agent *a)
{
    if (a->tune_started)
        agent_tuning_stop(&a->tune);
    conns_free(a->conns); /* stops libmicrohttpd */
    if (a->lfd >= 0)
        close(a->lfd);
    snapshot_unref(a->snap);
    view_clear(&view_of_agent);
    sample_free(a->prev);
    devices_drop(a->dev_before);
    agent_energy_free(a->energy);
    agent_cstate_free(a->cstate);
    agent_memory_free(a->memory);
    agent_fit_free(a->fit);
    agent_attrib_free(a->attrib);
    if (a->sense)
        sense_close(a->sense);
    if (a->h)
        host_close(a->h);
    if (a->epfd >= 0)
        close(a->epfd);
    if (a->sfd >= 0)
        close(a->sfd);
    if (a->tfd >= 0)
        close(a->tfd);
    if (a->gfd >= 0)
        close(a->gfd);
    if (a->pfd >= 0)
        close(a->pfd);
    free(a->pack_fds);
    if (a->cfd >= 0)
        ctlsock_close(a->cfg.control, &a->ctl);
    free(a->tls_cert_pem);
    if (a->tls_key_pem)
        explicit_bzero(a->tls_key_pem, strlen(a->tls_key_pem));
    free(a->tls_key_pem);
    if (a->auth_password)
        explicit_bzero(a->auth_password, strlen(a->auth_password));
    free(a->auth_password);
    devpolicy_free(a->devpolicy);
    free(a->confdir);
    agent_config_free(&a->cfg);
}

static bool is_trace_fd(struct agent *a, int fd)
{
    const int *fds;
    size_t n = a->attrib ? agent_attrib_fds(a->attrib, &fds) : 0;
    for (size_t i = 0; i < n; i++)
        if (fds[i] == fd)
            return true;
    return false;
}

/* Wake-ups and energy per cgroup: the trace rings join the loop, each
 * waking it only when a quarter full. */
static int open_attrib(struct agent *a)
{
    int r = agent_attrib_open(a->h, &a->model, a->cfg.wakeups, a->cfg.cgroups, &a->attrib);
    if (r < 0) {
        fprintf(stderr, "watt agent: wake-up accounting: %s\n", strerror(-r));
        return r;
    }
    if (!a->attrib)
        return 0;
    const int *fds;
    size_t n = agent_attrib_fds(a->attrib, &fds);
    for (size_t i = 0; i < n; i++) {
        struct epoll_event ev = {.events = EPOLLIN, .data.fd = fds[i]};
        if (epoll_ctl(a->epfd, EPOLL_CTL_ADD, fds[i], &ev) < 0)
            return -errno;
    }
    if (n == 0 && a->cfg.wakeups == AGENT_WAKEUPS_TRACE)
        fprintf(stderr, "watt agent: wake-ups from /proc: %s\n",
                a->attrib->why_not_traced ? a->attrib->why_not_traced : "no tracepoints");
    return 0;
}

static void loop(struct agent *a)
{
    struct epoll_event evs[16];
    int lfd = conns_listen_fd(a->conns);
    while (!a->stop) {
        /* the next header deadline or libmicrohttpd's idle timeout; none
         * without connections: an idle agent wakes only to sample */
        MHD_UNSIGNED_LONG_LONG mhd_ms;
        int timeout = conns_timeout_ms(a->conns, now_monotonic_ns());
        if (MHD_get_timeout(a->mhd, &mhd_ms) == MHD_YES &&
            (timeout < 0 || mhd_ms < (MHD_UNSIGNED_LONG_LONG)timeout))
            timeout = mhd_ms > 60000 ? 60000 : (int)mhd_ms;
        int n = epoll_wait(a->epfd, evs, ARRAY_SIZE(evs), timeout);
        if (n < 0 && errno != EINTR)
            break;
        uint64_t woke = now_monotonic_ns();
        for (int i = 0; i < n; i++) {
            uint64_t ticks;
            if (evs[i].data.fd == lfd) {
                conns_accept(a->conns);
            } else if (evs[i].data.fd == a->tfd) {
                if (read(a->tfd, &ticks, sizeof(ticks)) != sizeof(ticks))
                    continue;
                if (!guard_timer_needed(a)) { /* the guard first: the sample shows it */
                    agent_tuning_tick(&a->tune, now_monotonic_ns());
                    sync_pack(a);
                }
                take_sample(a);
                conns_tick(a->conns);
            } else if (evs[i].data.fd == a->gfd) {
                if (read(a->gfd, &ticks, sizeof(ticks)) == sizeof(ticks)) {
                    agent_tuning_tick(&a->tune, now_monotonic_ns());
                    sync_pack(a);
                }
            } else if (evs[i].data.fd == a->pfd) {
                if (read(a->pfd, &ticks, sizeof(ticks)) == sizeof(ticks))
                    agent_tuning_pack_tick(&a->tune, now_monotonic_ns());
            } else if (is_pack_fd(a, evs[i].data.fd)) {
                /* CPU pressure on the packed set: grow now, not at the tick */
                agent_tuning_pack_pressure(&a->tune, evs[i].data.fd, woke);
            } else if (evs[i].data.fd == a->sfd) {
                on_signal(a);
            } else if (evs[i].data.fd == a->cfd) {
                on_control(a);
            } else if (is_trace_fd(a, evs[i].data.fd)) {
                agent_attrib_drain(a->attrib);
            }
        }
        /* Every wake-up: new connections are read before the limits are
         * enforced, so each gets its chance; what the limits close is let
         * go at once (its file descriptor is needed for the next one). */
        MHD_run(a->mhd);
        if (conns_enforce(a->conns, now_monotonic_ns()) > 0)
            MHD_run(a->mhd);
    }
}

int agent_run(const struct agent_config *start, const char *config_path, bool config_optional,
              const struct agent_config *overrides, unsigned override_mask)
{
    struct agent a = {.epfd = -1,
                      .sfd = -1,
                      .tfd = -1,
                      .gfd = -1,
                      .pfd = -1,
                      .cfd = -1,
                      .ctl = {.fd = -1},
                      .lfd = -1,
                      .config_path = config_path,
                      .config_optional = config_optional,
                      .overrides = overrides,
                      .override_mask = override_mask};
    a.cfg = *start;
    a.cfg.listen_host = xstrdup(start->listen_host);
    a.cfg.root = start->root ? xstrdup(start->root) : NULL;
    a.cfg.model = start->model ? xstrdup(start->model) : NULL;
    a.cfg.control = start->control ? xstrdup(start->control) : NULL;
    a.cfg.tls_cert = start->tls_cert ? xstrdup(start->tls_cert) : NULL;
    a.cfg.tls_key = start->tls_key ? xstrdup(start->tls_key) : NULL;
    a.cfg.auth_user = start->auth_user ? xstrdup(start->auth_user) : NULL;
    a.cfg.auth_password_file =
        start->auth_password_file ? xstrdup(start->auth_password_file) : NULL;
    a.cfg.profile = start->profile ? xstrdup(start->profile) : NULL;
    a.cfg.config_dir = start->config_dir ? xstrdup(start->config_dir) : NULL;
    a.cfg.journal = start->journal ? xstrdup(start->journal) : NULL;
    a.cfg.fleet_metrics = start->fleet_metrics ? xstrdup(start->fleet_metrics) : NULL;
    a.cfg.bmc = start->bmc ? xstrdup(start->bmc) : NULL;
    a.cfg.bmc_user = start->bmc_user ? xstrdup(start->bmc_user) : NULL;
    a.cfg.bmc_password_file = start->bmc_password_file ? xstrdup(start->bmc_password_file) : NULL;
    a.self.start_time_s = (double)now_realtime_ns() / 1e9;
    a.confdir = xstrdup(agent_tuning_confdir(&a.cfg));

    int r = load_devpolicy(&a, false);
    if (r >= 0)
        r = load_model(&a);
    _cleanup_free_ char *root_err = NULL;
    if (r >= 0 && (r = host_open_err(a.cfg.root, &a.h, &root_err)) < 0)
        fprintf(stderr, "watt agent: cannot open root %s: %s\n", a.cfg.root ? a.cfg.root : "/",
                root_err ? root_err : strerror(-r));
    if (r >= 0)
        r = configure_bmc(&a.cfg);
    if (r >= 0 && (r = sense_open(a.h, &a.sense)) < 0)
        fprintf(stderr, "watt agent: cannot start sampling: %s\n", strerror(-r));
    if (r >= 0)
        r = agent_energy_new(&a.energy);
    if (r >= 0)
        r = agent_cstate_new(&a.cstate);
    if (r >= 0) /* nodes and DIMMs: read once, again on SIGHUP */
        r = agent_memory_new(a.h, &a.memory);
    if (r >= 0 && a.cfg.fit_interval_s > 0) /* the power model fitted to the meter */
        a.fit = agent_fit_new(a.h, a.cfg.fit_interval_s);
    if (r >= 0 && (r = open_fds(&a)) < 0)
        fprintf(stderr, "watt agent: %s\n", strerror(-r));
    if (r >= 0)
        r = open_attrib(&a);
    if (r >= 0)
        r = load_secrets(&a);
    if (r >= 0) /* before anything another agent could own */
        r = listen_http(&a);
    if (r >= 0)
        r = open_control(&a);
    if (r >= 0) {
        /* restore what a crash left, apply the profile, start its guard */
        a.tune_started = true;
        r = agent_tuning_start(&a.tune, a.h, &a.cfg);
        arm_guard_timer(&a);
        sync_pack(&a);
    }
    if (r >= 0)
        r = start_http(&a);
    if (r >= 0)
        enable_read_cache(&a);
    if (r < 0) {
        agent_close(&a);
        return r;
    }
    take_sample(&a); /* serve something from the first second */
    fprintf(stderr, "watt agent: listening on %s://%s:%u/metrics, sampling every %g s\n",
            a.tls_cert_pem ? "https" : "http", a.cfg.listen_host, a.cfg.port, a.cfg.interval_s);
    notify("READY=1\nSTATUS=serving /metrics");
    loop(&a);
    notify("STOPPING=1");
    agent_close(&a);
    return 0;
}
