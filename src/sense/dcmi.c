/* The "dcmi" sampler: the BMC's wall power (dcmi.h). */
#include "sense/dcmi.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"

/* The LAN BMC dcmi_sampler_configure() named; host[0] == 0: in-band. */
static struct {
    char host[256], user[64], password[128];
    unsigned cipher;
} lan_cfg;

struct dcmi_state {
    struct dcmi_conn *conn; /* NULL after a failure, until the back-off ends */
    bool lan;
    uint64_t next_open_ns; /* no open before this (back-off) */
    uint64_t next_read_ns; /* no read before this (the BMC's period) */
    uint64_t last_io_ns;   /* the last answer from the BMC (open or read) */
    struct dcmi_sample last;
};

void dcmi_sampler_configure(const struct dcmi_lan *lan)
{
    memset(&lan_cfg, 0, sizeof(lan_cfg));
    if (!lan || !lan->host)
        return;
    snprintf(lan_cfg.host, sizeof(lan_cfg.host), "%s", lan->host);
    snprintf(lan_cfg.user, sizeof(lan_cfg.user), "%s", lan->user ? lan->user : "");
    snprintf(lan_cfg.password, sizeof(lan_cfg.password), "%s", lan->password ? lan->password : "");
    lan_cfg.cipher = lan->cipher;
}

static int open_conn(struct dcmi_state *st, char *why, size_t size)
{
    if (!st->lan)
        return dcmi_open_inband(&st->conn, why, size);
    struct dcmi_lan lan = {
        .host = lan_cfg.host,
        .user = lan_cfg.user,
        .password = lan_cfg.password,
        .cipher = lan_cfg.cipher,
        .timeout_s = DCMI_LAN_TIMEOUT_S,
    };
    return dcmi_open_lan(&lan, &st->conn, why, size);
}

/* In-band needs the live kernel's /dev/ipmi0 (looked up through the host,
 * so a recorded root answers for itself); the LAN needs only the library
 * and the BMC. The connection is opened here, so a BMC that cannot be
 * reached is "unavailable" with its reason, like any missing sampler. */
static int dcmi_probe(struct host *h, void **ret_state, char **ret_reason)
{
    char why[256];
    bool lan = lan_cfg.host[0] != 0;
    int r = dcmi_library_load(why, sizeof(why));
    if (r < 0) {
        *ret_reason = xstrdup(why);
        return 0;
    }
    if (!lan && !host_exists(h, HOST_DEV, "ipmi0")) {
        *ret_reason = xstrdup("no /dev/ipmi0 (load ipmi_si or ipmi_ssif, and ipmi_devintf); "
                              "or name a BMC on the LAN with --bmc");
        return 0;
    }
    if (!lan && !h->live) {
        *ret_reason = xstrdup("a recorded root: its /dev/ipmi0 is not this machine's BMC");
        return 0;
    }
    struct dcmi_state *st = xcalloc(1, sizeof(*st));
    st->lan = lan;
    if ((r = open_conn(st, why, sizeof(why))) < 0) {
        free(st);
        *ret_reason = xstrdup(why);
        return 0;
    }
    st->last_io_ns = now_monotonic_ns();
    *ret_state = st;
    return 1;
}

static uint64_t read_every_ns(const struct dcmi_power *p)
{
    uint64_t ns = (uint64_t)p->period_ms * 1000000ull;
    if (ns < DCMI_MIN_READ_NS)
        ns = DCMI_MIN_READ_NS;
    return ns > DCMI_MAX_READ_NS ? DCMI_MAX_READ_NS : ns;
}

/* A failure drops the connection (a LAN session may be dead) and leaves
 * the BMC alone for the back-off. */
static void failed(struct dcmi_state *st, struct sample *s, uint64_t now, const char *why, int r)
{
    diags_add(&s->diags, st->lan ? lan_cfg.host : "dcmi", r, "%s", why);
    dcmi_close(st->conn);
    st->conn = NULL;
    st->next_open_ns = now + DCMI_BACKOFF_NS;
}

/* freeipmi counts a LAN session dead once nothing came back for its
 * session timeout, which is also the bound on one command: so a session
 * idle for longer than DCMI_LAN_TIMEOUT_S is closed and a fresh one
 * opened (Close Session sent, no BMC session slot left behind). */
static bool session_stale(const struct dcmi_state *st, uint64_t now)
{
    return st->lan && st->conn &&
           now - st->last_io_ns >= (uint64_t)(DCMI_LAN_TIMEOUT_S * 1e9) * 9 / 10;
}

static void read_now(struct dcmi_state *st, struct sample *s, uint64_t now)
{
    char why[256];
    struct dcmi_power p;
    int r;

    if (!st->conn && now < st->next_open_ns) {
        diags_add(&s->diags, st->lan ? lan_cfg.host : "dcmi", 0,
                  "the BMC failed: left alone for %.0f s more",
                  (double)(st->next_open_ns - now) / 1e9);
        return;
    }
    if (session_stale(st, now)) {
        dcmi_close(st->conn);
        st->conn = NULL;
    }
    uint64_t t0 = now_monotonic_ns();
    if (!st->conn && (r = open_conn(st, why, sizeof(why))) < 0) {
        failed(st, s, now, why, r);
        return;
    }
    if ((r = dcmi_power_read(st->conn, &p, why, sizeof(why))) < 0) {
        failed(st, s, now, why, r);
        return;
    }
    uint64_t t1 = now_monotonic_ns();
    st->last_io_ns = t1;
    st->last = (struct dcmi_sample){
        .have = true,
        .fresh = true,
        .p = p,
        .read_mono_ns = t1,
        .read_ms = (double)(t1 - t0) / 1e6,
    };
    snprintf(st->last.via, sizeof(st->last.via), "%s", st->lan ? "lan" : "inband");
    snprintf(st->last.name, sizeof(st->last.name), "%s", dcmi_conn_name(st->conn));
    st->next_read_ns = t0 + read_every_ns(&p);
}

static int dcmi_collect(struct host *h, void *state, struct sample *s)
{
    (void)h;
    struct dcmi_state *st = state;
    uint64_t now = now_monotonic_ns();
    st->last.fresh = false;
    if (!st->last.have || now >= st->next_read_ns)
        read_now(st, s, now);
    /* an old reading is no longer the wall's power */
    if (st->last.have && now > st->last.read_mono_ns + DCMI_STALE_NS)
        st->last.have = false;
    if (!st->last.have)
        return -EIO;
    s->dcmi = xcalloc(1, sizeof(*s->dcmi));
    *s->dcmi = st->last;
    return 0;
}

static void dcmi_free_sample(struct sample *s)
{
    free(s->dcmi);
    s->dcmi = NULL;
}

static void dcmi_free_state(void *state)
{
    struct dcmi_state *st = state;
    if (!st)
        return;
    dcmi_close(st->conn);
    free(st);
}

const struct sampler dcmi_sampler = {
    .name = "dcmi",
    .probe = dcmi_probe,
    .collect = dcmi_collect,
    .free_sample = dcmi_free_sample,
    .free_state = dcmi_free_state,
};

int dcmi_power(const struct dcmi_sample *a, const struct dcmi_sample *b, struct power_readings *out,
               struct diags *d)
{
    const struct dcmi_sample *s = b ? b : a;
    if (!s || !s->have)
        return 0;
    struct power_reading *p = power_readings_add(out);
    snprintf(p->source, sizeof(p->source), "dcmi");
    snprintf(p->via, sizeof(p->via), "%s", s->via);
    snprintf(p->domain, sizeof(p->domain), "bmc");
    p->scope = POWER_SCOPE_PLATFORM;
    p->period = s->p.period_ms / 1000.0;
    if (!s->p.active) {
        diags_add(d, s->name, 0, "the BMC says its power measurement is not active: no wall power");
        snprintf(p->label, sizeof(p->label), "BMC: measurement not active");
        return 1;
    }
    p->watts = s->p.current_w;
    snprintf(p->label, sizeof(p->label), "BMC: average %.0f W over %.1f s", s->p.average_w,
             p->period);
    return 1;
}
