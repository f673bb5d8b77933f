/* The IPMI power engine: chassis status, power up, soft shutdown and the
 * DCMI power reading of each host's BMC, over the LAN through libfreeipmi.
 *
 * One session per call, not one kept per host. A call costs seven UDP
 * round trips (five to open an RMCP+ session, the command, the close):
 * about 5 ms against ipmi_sim on loopback, tens of ms over a LAN. The
 * controller calls a BMC a few times per interval (300 s by default),
 * while a BMC drops an idle session after 30-60 s and then ignores it: a
 * kept session would mostly be a dead one, and finding out would cost a
 * full bmc_timeout_s before the reconnect. Kept sessions would also hold
 * one of the BMC's few session slots (often 4) for ever, locking out an
 * administrator's ipmitool. So each call opens, sends one command, closes.
 *
 * Retries: a try that gets no answer (or "busy") is repeated, up to
 * bmc_retries more times, after a short backoff (0.2 s, 0.4 s,
 * ...); refused credentials and unsupported commands are not. Within a try
 * freeipmi retransmits every bmc_timeout_s / 4 and gives up after
 * bmc_timeout_s, so a dead BMC costs (1 + retries) * timeout + backoff:
 * 15.6 s with the defaults. Power up and soft shutdown are idempotent, so
 * repeating one whose answer was lost is harmless. */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <freeipmi/freeipmi.h>

#include "base/parse.h"
#include "base/util.h"
#include "fleet/engine/exec.h"

#define IPMI_BACKOFF_S         0.2 /* before the second try; doubles after */
#define IPMI_MIN_RETRANSMIT_MS 100
#define IPMI_DEFAULT_TIMEOUT_S 5.0
#define IPMI_DEFAULT_CIPHER    3
#define IPMI_DEFAULT_RETRIES   2
/* Sessions ask for ADMINISTRATOR, as ipmitool does by default: chassis
 * control needs OPERATOR, but some BMCs (ipmi_sim among them) put the DCMI
 * group extension at ADMINISTRATOR. */
#define IPMI_PRIV IPMI_PRIVILEGE_LEVEL_ADMIN

/* What fleet.ini says to the IPMI engine: [controller] bmc_timeout_s and
 * bmc_retries, each host's bmc_cipher and bmc_protocol. */
struct ipmi_conf {
    double timeout_s; /* one session, 0: IPMI_DEFAULT_TIMEOUT_S */
    unsigned retries; /* per call, after the first try */
    bool retries_set;
    struct ipmi_host_conf {
        unsigned cipher; /* IPMI 2.0 cipher suite id, 0: IPMI_DEFAULT_CIPHER */
        bool lan15;      /* IPMI 1.5 LAN instead of 2.0 lanplus */
    } * hosts;
    size_t n_hosts;
};

struct ipmi_host {
    pthread_mutex_t lock; /* one call at a time per BMC */
    unsigned cipher;      /* from the configuration, at open */
    bool lan15;
    /* The BMC answers an Open Session that asks for "the highest
     * privilege" (freeipmi's default) with level 0, which freeipmi takes
     * as a refusal (ipmi_sim does this); such a BMC gets the level asked
     * for in the Open Session too, as ipmitool sends it. Learnt on the
     * first refusal, under LOCK. */
    bool open_priv;
};

struct ipmi_engine {
    struct fx_power pub; /* first: the engine is passed as a struct fx_power */
    const struct site *site;
    struct ipmi_host *hosts; /* site->n_hosts */
    double timeout_s;        /* bmc_timeout_s */
    unsigned retries;        /* bmc_retries */
};

/* One command, run in an open session. RUN returns 0, or -1 with the
 * failure in the context's errnum (the response, if any, left in RS), or
 * -EBADMSG when the answer lacks a field. */
struct ipmi_op {
    const char *what; /* "Get Chassis Status", for messages */
    uint8_t netfn;    /* of the command, to name a completion code */
    int (*run)(ipmi_ctx_t ctx, struct ipmi_op *op);
    fiid_obj_t rs;
    uint8_t control; /* set: IPMI_CHASSIS_CONTROL_* */
    bool on;         /* status: power is on */
    double watts;    /* reading */
    bool active;     /* reading: "power measurement active" */
};

/* What went wrong in a try, as the caller will report it. */
struct ipmi_fail {
    int errnum;   /* enum ipmi_errnum, or IPMI_ERR_SUCCESS */
    bool opening; /* while opening the session */
    int local;    /* a negative errno not from freeipmi, 0: none */
    char cc[96];  /* completion code, described */
};

static struct ipmi_engine *engine(struct fx_power *x)
{
    return (struct ipmi_engine *)x;
}

/* ---- the three commands ------------------------------------------------ */

static int run_status(ipmi_ctx_t ctx, struct ipmi_op *op)
{
    uint64_t v;

    if (ipmi_cmd_get_chassis_status(ctx, op->rs) < 0)
        return -1;
    if (FIID_OBJ_GET(op->rs, "current_power_state.power_is_on", &v) <= 0)
        return -EBADMSG;
    op->on = v;
    return 0;
}

static int run_control(ipmi_ctx_t ctx, struct ipmi_op *op)
{
    return ipmi_cmd_chassis_control(ctx, op->control, op->rs) < 0 ? -1 : 0;
}

static int run_reading(ipmi_ctx_t ctx, struct ipmi_op *op)
{
    uint64_t w, state;

    if (ipmi_cmd_dcmi_get_power_reading(ctx, IPMI_DCMI_POWER_READING_MODE_SYSTEM_POWER_STATISTICS,
                                        0, op->rs) < 0)
        return -1;
    if (FIID_OBJ_GET(op->rs, "current_power", &w) <= 0 ||
        FIID_OBJ_GET(op->rs, "power_reading_state.power_measurement", &state) <= 0)
        return -EBADMSG;
    op->watts = (double)w;
    op->active = state == IPMI_DCMI_POWER_READING_STATE_POWER_MEASUREMENT_ACTIVE;
    return 0;
}

/* ---- one try: open a session, run the command, close ------------------- */

static int open_session(ipmi_ctx_t ctx, const struct ipmi_engine *e, const struct site_host *h,
                        const struct ipmi_host *ih, bool open_priv)
{
    double t = e->timeout_s;
    unsigned timeout_ms = (unsigned)(t * 1000);
    /* Retransmit four times per timeout, so one lost UDP packet costs a
     * quarter of it, not all of it. */
    unsigned retrans_ms = timeout_ms / 4;

    if (retrans_ms < IPMI_MIN_RETRANSMIT_MS)
        retrans_ms = IPMI_MIN_RETRANSMIT_MS;
    if (ih->lan15)
        return ipmi_ctx_open_outofband(
            ctx, h->bmc, h->bmc_user, h->bmc_password, IPMI_AUTHENTICATION_TYPE_MD5, IPMI_PRIV,
            timeout_ms, retrans_ms, IPMI_WORKAROUND_FLAGS_DEFAULT, IPMI_FLAGS_DEFAULT);
    return ipmi_ctx_open_outofband_2_0(
        ctx, h->bmc, h->bmc_user, h->bmc_password, NULL, 0, IPMI_PRIV, ih->cipher, timeout_ms,
        retrans_ms,
        open_priv ? IPMI_WORKAROUND_FLAGS_OUTOFBAND_2_0_OPEN_SESSION_PRIVILEGE
                  : IPMI_WORKAROUND_FLAGS_DEFAULT,
        IPMI_FLAGS_DEFAULT);
}

static void describe_cc(struct ipmi_op *op, struct ipmi_fail *f)
{
    char buf[IPMI_ERR_STR_MAX_LEN];
    int r;

    if (op->netfn == IPMI_NET_FN_GROUP_EXTENSION_RQ)
        r = ipmi_completion_code_dcmi_strerror_cmd_r(op->rs, op->netfn, buf, sizeof(buf));
    else
        r = ipmi_completion_code_strerror_cmd_r(op->rs, op->netfn, buf, sizeof(buf));
    if (r == 0)
        snprintf(f->cc, sizeof(f->cc), "%.*s", (int)sizeof(f->cc) - 1, buf);
}

static void try_once(const struct ipmi_engine *e, const struct site_host *h, struct ipmi_host *ih,
                     struct ipmi_op *op, struct ipmi_fail *f)
{
    ipmi_ctx_t ctx = ipmi_ctx_create();
    int r;

    *f = (struct ipmi_fail){0};
    if (!ctx) {
        f->local = -ENOMEM;
        return;
    }
    r = open_session(ctx, e, h, ih, ih->open_priv);
    if (r < 0 && !ih->lan15 && !ih->open_priv &&
        ipmi_ctx_errnum(ctx) == IPMI_ERR_PRIVILEGE_LEVEL_CANNOT_BE_OBTAINED) {
        ipmi_ctx_destroy(ctx);
        if (!(ctx = ipmi_ctx_create())) {
            f->local = -ENOMEM;
            return;
        }
        r = open_session(ctx, e, h, ih, true);
        if (r == 0)
            ih->open_priv = true;
    }
    if (r < 0) {
        f->errnum = ipmi_ctx_errnum(ctx);
        f->opening = true;
        ipmi_ctx_destroy(ctx);
        return;
    }
    fiid_obj_clear(op->rs);
    r = op->run(ctx, op);
    if (r == -1) {
        f->errnum = ipmi_ctx_errnum(ctx);
        if (f->errnum == IPMI_ERR_BAD_COMPLETION_CODE)
            describe_cc(op, f);
    } else if (r < 0)
        f->local = r;
    ipmi_ctx_close(ctx);
    ipmi_ctx_destroy(ctx);
}

/* ---- failures: retry or not, and what to say --------------------------- */

static bool retryable(const struct ipmi_fail *f)
{
    switch (f->errnum) {
    case IPMI_ERR_CONNECTION_TIMEOUT:
    case IPMI_ERR_SESSION_TIMEOUT:
    case IPMI_ERR_MESSAGE_TIMEOUT:
    case IPMI_ERR_BMC_BUSY:
    case IPMI_ERR_DRIVER_BUSY:
    case IPMI_ERR_SYSTEM_ERROR:
        return true;
    default:
        return false;
    }
}

static bool refused(int errnum)
{
    switch (errnum) {
    case IPMI_ERR_USERNAME_INVALID:
    case IPMI_ERR_PASSWORD_INVALID:
    case IPMI_ERR_K_G_INVALID:
    case IPMI_ERR_PERMISSION:
    case IPMI_ERR_PRIVILEGE_LEVEL_INSUFFICIENT:
    case IPMI_ERR_PRIVILEGE_LEVEL_CANNOT_BE_OBTAINED:
    case IPMI_ERR_AUTHENTICATION_TYPE_UNAVAILABLE:
    case IPMI_ERR_PASSWORD_VERIFICATION_TIMEOUT:
        return true;
    default:
        return false;
    }
}

/* Report failure F of OP on host H after TRIES tries; returns -errno. */
static int report(const struct ipmi_engine *e, const struct site_host *h,
                  const struct ipmi_host *ih, const struct ipmi_op *op, const struct ipmi_fail *f,
                  unsigned tries, struct fleet_error *err)
{
    const char *why = ipmi_ctx_strerror(f->errnum);

    if (f->local == -ENOMEM) {
        fleet_error_set(err, "host %s: BMC %s: out of memory", h->name, h->bmc);
        return -ENOMEM;
    }
    if (f->local) {
        fleet_error_set(err, "host %s: BMC %s: malformed answer to %s", h->name, h->bmc, op->what);
        return -EBADMSG;
    }
    switch (f->errnum) {
    case IPMI_ERR_CONNECTION_TIMEOUT:
    case IPMI_ERR_SESSION_TIMEOUT:
    case IPMI_ERR_MESSAGE_TIMEOUT:
        fleet_error_set(err, "host %s: BMC %s does not answer (timeout %g s, %u tr%s)", h->name,
                        h->bmc, e->timeout_s, tries, tries == 1 ? "y" : "ies");
        return -EHOSTUNREACH;
    case IPMI_ERR_HOSTNAME_INVALID:
        fleet_error_set(err, "host %s: BMC address '%s' cannot be resolved", h->name, h->bmc);
        return -EHOSTUNREACH;
    case IPMI_ERR_BMC_BUSY:
    case IPMI_ERR_DRIVER_BUSY:
        fleet_error_set(err, "host %s: BMC %s stays busy (%u tries): %s", h->name, h->bmc, tries,
                        op->what);
        return -EBUSY;
    case IPMI_ERR_CIPHER_SUITE_ID_UNAVAILABLE:
    case IPMI_ERR_IPMI_2_0_UNAVAILABLE:
        fleet_error_set(err, "host %s: BMC %s does not offer IPMI 2.0 cipher suite %u (%s)",
                        h->name, h->bmc, ih->cipher, why);
        return -EPROTONOSUPPORT;
    case IPMI_ERR_COMMAND_INVALID_OR_UNSUPPORTED:
        fleet_error_set(err, "host %s: BMC %s does not support %s", h->name, h->bmc, op->what);
        return -EOPNOTSUPP;
    case IPMI_ERR_PARAMETERS:
        fleet_error_set(err, "host %s: BMC %s: invalid address, user or password (%s)", h->name,
                        h->bmc, why);
        return -EINVAL;
    case IPMI_ERR_BAD_COMPLETION_CODE:
        fleet_error_set(err, "host %s: BMC %s failed %s: %s", h->name, h->bmc, op->what,
                        f->cc[0] ? f->cc : why);
        return -EIO;
    default:
        break;
    }
    if (refused(f->errnum)) {
        bool priv = f->errnum == IPMI_ERR_PRIVILEGE_LEVEL_INSUFFICIENT ||
                    f->errnum == IPMI_ERR_PRIVILEGE_LEVEL_CANNOT_BE_OBTAINED;

        fleet_error_set(err, "host %s: BMC %s refused the credentials of user '%s' (%s%s)", h->name,
                        h->bmc, h->bmc_user ? h->bmc_user : "", why,
                        priv ? "; the engine needs ADMINISTRATOR privilege" : "");
        return -EACCES;
    }
    if (f->opening && ih->lan15)
        fleet_error_set(err, "host %s: BMC %s: cannot open an IPMI 1.5 session for %s: %s", h->name,
                        h->bmc, op->what, why);
    else if (f->opening)
        fleet_error_set(err,
                        "host %s: BMC %s: cannot open an IPMI 2.0 session (cipher suite %u) for "
                        "%s: %s",
                        h->name, h->bmc, ih->cipher, op->what, why);
    else
        fleet_error_set(err, "host %s: BMC %s failed %s: %s", h->name, h->bmc, op->what, why);
    return -EIO;
}

static void sleep_s(double s)
{
    struct timespec ts = {.tv_sec = (time_t)s, .tv_nsec = (long)((s - (time_t)s) * 1e9)};

    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

/* Run OP on host HI's BMC, with retries, under the host's lock. */
static int ipmi_call(struct ipmi_engine *e, size_t hi, struct ipmi_op *op, fiid_template_t tmpl,
                     struct fleet_error *err)
{
    const struct site *s = e->site;
    const struct site_host *h;
    struct ipmi_fail f = {0};
    unsigned tries = 0;
    double backoff = IPMI_BACKOFF_S;

    if (hi >= s->n_hosts) {
        fleet_error_set(err, "ipmi: no host %zu (the site has %zu)", hi, s->n_hosts);
        return -EINVAL;
    }
    h = &s->hosts[hi];
    if (!h->bmc || !h->bmc[0]) {
        fleet_error_set(err,
                        "host %s: no BMC configured (bmc = ...): cannot read or switch "
                        "its power",
                        h->name);
        return -EOPNOTSUPP;
    }
    op->rs = fiid_obj_create(tmpl);
    if (!op->rs) {
        fleet_error_set(err, "host %s: BMC %s: out of memory", h->name, h->bmc);
        return -ENOMEM;
    }
    pthread_mutex_lock(&e->hosts[hi].lock);
    for (;;) {
        tries++;
        try_once(e, h, &e->hosts[hi], op, &f);
        if (f.errnum == IPMI_ERR_SUCCESS && !f.local)
            break;
        if (!retryable(&f) || tries > e->retries)
            break;
        sleep_s(backoff);
        backoff *= 2;
    }
    pthread_mutex_unlock(&e->hosts[hi].lock);
    fiid_obj_destroy(op->rs);
    op->rs = NULL;
    if (f.errnum == IPMI_ERR_SUCCESS && !f.local)
        return 0;
    return report(e, h, &e->hosts[hi], op, &f, tries, err);
}

/* ---- the engine -------------------------------------------------------- */

static int ipmi_status(struct fx_power *x, size_t hi, enum fx_power_state *ret,
                       struct fleet_error *err)
{
    struct ipmi_op op = {
        .what = "Get Chassis Status", .netfn = IPMI_NET_FN_CHASSIS_RQ, .run = run_status};
    int r = ipmi_call(engine(x), hi, &op, tmpl_cmd_get_chassis_status_rs, err);

    if (r < 0)
        return r;
    *ret = op.on ? FX_POWER_ON : FX_POWER_OFF;
    return 0;
}

static int ipmi_set(struct fx_power *x, size_t hi, bool on, struct fleet_error *err)
{
    struct ipmi_op op = {.what = on ? "Chassis Control power up" : "Chassis Control soft shutdown",
                         .netfn = IPMI_NET_FN_CHASSIS_RQ,
                         .run = run_control,
                         .control = on ? IPMI_CHASSIS_CONTROL_POWER_UP
                                       : IPMI_CHASSIS_CONTROL_INITIATE_SOFT_SHUTDOWN};

    return ipmi_call(engine(x), hi, &op, tmpl_cmd_chassis_control_rs, err);
}

static int ipmi_reading(struct fx_power *x, size_t hi, double *watts, struct fleet_error *err)
{
    struct ipmi_op op = {.what = "DCMI Get Power Reading",
                         .netfn = IPMI_NET_FN_GROUP_EXTENSION_RQ,
                         .run = run_reading};
    const struct site_host *h;
    int r = ipmi_call(engine(x), hi, &op, tmpl_cmd_dcmi_get_power_reading_rs, err);

    if (r < 0)
        return r;
    if (!op.active) {
        h = &engine(x)->site->hosts[hi];
        fleet_error_set(err,
                        "host %s: BMC %s has no active power measurement (DCMI reading "
                        "state not active)",
                        h->name, h->bmc);
        return -EOPNOTSUPP;
    }
    *watts = op.watts;
    return 0;
}

static void ipmi_close(struct fx_power *x)
{
    struct ipmi_engine *e = engine(x);

    if (!e)
        return;
    for (size_t i = 0; i < e->site->n_hosts; i++)
        pthread_mutex_destroy(&e->hosts[i].lock);
    free(e->hosts);
    free(e);
}

int fx_ipmi_open(const struct site *site, struct fx_power **ret, struct fleet_error *err)
{
    struct ipmi_engine *e;

    /* Initialises libgcrypt for RMCP+; freeipmi asks for it before any
     * thread starts, so here rather than lazily in a call. */
    if (ipmi_rmcpplus_init() < 0) {
        int r = errno > 0 ? -errno : -EIO;

        fleet_error_set(err, "ipmi: cannot initialise freeipmi's crypto library: %s", strerror(-r));
        return r;
    }
    const struct ipmi_conf *c = fx_engine_conf(site, &fx_engine_ipmi);
    e = xcalloc(1, sizeof(*e));
    e->site = site;
    e->timeout_s = c && c->timeout_s > 0 ? c->timeout_s : IPMI_DEFAULT_TIMEOUT_S;
    e->retries = c && c->retries_set ? c->retries : IPMI_DEFAULT_RETRIES;
    e->hosts = xcalloc(site->n_hosts ? site->n_hosts : 1, sizeof(*e->hosts));
    for (size_t i = 0; i < site->n_hosts; i++) {
        const struct ipmi_host_conf *hc = c && i < c->n_hosts ? &c->hosts[i] : NULL;
        pthread_mutex_init(&e->hosts[i].lock, NULL);
        e->hosts[i].cipher = hc && hc->cipher ? hc->cipher : IPMI_DEFAULT_CIPHER;
        e->hosts[i].lan15 = hc && hc->lan15;
    }
    e->pub = (struct fx_power){.name = "ipmi",
                               .status = ipmi_status,
                               .set = ipmi_set,
                               .reading = ipmi_reading,
                               .close = ipmi_close};
    *ret = &e->pub;
    return 0;
}

/* ---- fleet.ini ------------------------------------------------------------ */

/* VAL as a number LO..HI (an integer when INTEGER), or -EINVAL and WHY. */
static int ipmi_num(const char *key, const char *val, double lo, double hi, bool integer,
                    double *ret, char *why, size_t size)
{
    double v;
    if (parse_double(val, &v) < 0 || !(v >= lo && v <= hi) || (integer && v != floor(v))) {
        snprintf(why, size, "%s = '%.60s': want %s %g..%g", key, val,
                 integer ? "an integer" : "a number", lo, hi);
        return -EINVAL;
    }
    *ret = v;
    return 0;
}

static struct ipmi_host_conf *ipmi_host_conf(struct ipmi_conf *c, size_t hi)
{
    if (hi >= c->n_hosts) {
        c->hosts = xrealloc(c->hosts, (hi + 1) * sizeof(*c->hosts));
        memset(c->hosts + c->n_hosts, 0, (hi + 1 - c->n_hosts) * sizeof(*c->hosts));
        c->n_hosts = hi + 1;
    }
    return &c->hosts[hi];
}

static int ipmi_parse(void **conf, enum fx_where where, size_t hi, const char *key, const char *val,
                      char *why, size_t size)
{
    struct ipmi_conf *c = *conf ? *conf : (*conf = xcalloc(1, sizeof(struct ipmi_conf)));
    double v;
    int r;
    if (streq(key, "bmc_timeout_s"))
        return ipmi_num(key, val, 0.1, 600, false, &c->timeout_s, why, size);
    if (streq(key, "bmc_retries")) {
        r = ipmi_num(key, val, 0, 1000, true, &v, why, size);
        c->retries = r < 0 ? c->retries : (unsigned)v;
        c->retries_set |= r == 0;
        return r;
    }
    if (streq(key, "bmc_cipher")) {
        r = ipmi_num(key, val, 0, 17, true, &v, why, size);
        if (r == 0)
            ipmi_host_conf(c, hi)->cipher = (unsigned)v;
        return r;
    }
    /* bmc_protocol */
    if (strcasecmp(val, "lanplus") != 0 && strcasecmp(val, "lan") != 0) {
        snprintf(why, size, "bmc_protocol = '%.40s': want lanplus or lan", val);
        return -EINVAL;
    }
    ipmi_host_conf(c, hi)->lan15 = strcasecmp(val, "lan") == 0;
    return 0;
}

static void ipmi_conf_free(void *conf)
{
    struct ipmi_conf *c = conf;
    if (c)
        free(c->hosts);
    free(c);
}

/* Every host has a BMC, a user and a password (or its file). */
static int ipmi_check(const struct site *s, const void *conf, char *why, size_t size, int *line)
{
    for (size_t i = 0; i < s->n_hosts; i++) {
        const struct site_host *h = &s->hosts[i];
        *line = h->line;
        if (!h->bmc) {
            snprintf(why, size, "[host %s] has no bmc = HOST[:PORT] (power = ipmi)", h->name);
            return -EINVAL;
        }
        if (!h->bmc_user || !h->bmc_password_line) {
            snprintf(why, size,
                     "[host %s] needs bmc_user and bmc_password (or bmc_password_file) "
                     "(power = ipmi)",
                     h->name);
            return -EINVAL;
        }
    }
    *line = 0;
    return 0;
}

static const struct fx_key ipmi_keys[] = {
    {FX_IN_CONTROLLER, "bmc_timeout_s"},
    {FX_IN_CONTROLLER, "bmc_retries"},
    {FX_IN_HOST, "bmc_cipher"},
    {FX_IN_HOST, "bmc_protocol"},
    {0, NULL},
};

const struct fx_engine fx_engine_ipmi = {
    .name = "ipmi",
    .power = true,
    .keys = ipmi_keys,
    .parse = ipmi_parse,
    .free_conf = ipmi_conf_free,
    .check = ipmi_check,
    .open_power = fx_ipmi_open,
};
