/* DCMI power reading through libfreeipmi, in-band or over the LAN
 * (dcmi_power.h). The fleet's engine (src/fleet/engine/ipmi.c) reads the
 * same command for each host of a site, with its own retries and locking;
 * this is the node's own reader. */
#include "sense/dcmi_power.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <freeipmi/freeipmi.h>

#define DCMI_DEFAULT_CIPHER    3
#define DCMI_DEFAULT_TIMEOUT_S 5.0
#define DCMI_MIN_RETRANSMIT_MS 100

struct dcmi_conn {
    ipmi_ctx_t ctx;
    char name[80]; /* "in-band", "lan 127.0.0.1:9623" */
};

static void say(char *why, size_t size, const char *fmt, ...)
{
    va_list ap;

    if (!why || size == 0)
        return;
    va_start(ap, fmt);
    vsnprintf(why, size, fmt, ap);
    va_end(ap);
}

/* freeipmi's error, as a negative errno. */
static int ipmi_errno(int errnum)
{
    switch (errnum) {
    case IPMI_ERR_DEVICE_NOT_FOUND:
        return -ENOENT;
    case IPMI_ERR_PERMISSION:
    case IPMI_ERR_USERNAME_INVALID:
    case IPMI_ERR_PASSWORD_INVALID:
    case IPMI_ERR_K_G_INVALID:
    case IPMI_ERR_PRIVILEGE_LEVEL_INSUFFICIENT:
    case IPMI_ERR_PRIVILEGE_LEVEL_CANNOT_BE_OBTAINED:
        return -EACCES;
    case IPMI_ERR_CONNECTION_TIMEOUT:
    case IPMI_ERR_SESSION_TIMEOUT:
    case IPMI_ERR_DRIVER_TIMEOUT:
    case IPMI_ERR_MESSAGE_TIMEOUT:
        return -ETIMEDOUT;
    case IPMI_ERR_DRIVER_BUSY:
    case IPMI_ERR_BMC_BUSY:
        return -EBUSY;
    case IPMI_ERR_COMMAND_INVALID_OR_UNSUPPORTED:
    case IPMI_ERR_COMMAND_INVALID_FOR_SELECTED_INTERFACE:
    case IPMI_ERR_DEVICE_NOT_SUPPORTED:
    case IPMI_ERR_IPMI_2_0_UNAVAILABLE:
    case IPMI_ERR_CIPHER_SUITE_ID_UNAVAILABLE:
    case IPMI_ERR_AUTHENTICATION_TYPE_UNAVAILABLE:
        return -EOPNOTSUPP;
    case IPMI_ERR_HOSTNAME_INVALID:
    case IPMI_ERR_PARAMETERS:
        return -EINVAL;
    case IPMI_ERR_OUT_OF_MEMORY:
        return -ENOMEM;
    default:
        return -EIO;
    }
}

static struct dcmi_conn *conn_new(void)
{
    struct dcmi_conn *c = calloc(1, sizeof(*c));

    if (!c)
        return NULL;
    if (!(c->ctx = ipmi_ctx_create())) {
        free(c);
        return NULL;
    }
    return c;
}

int dcmi_open_inband(struct dcmi_conn **ret, char *why, size_t size)
{
    struct dcmi_conn *c = conn_new();
    int errnum, r;

    if (!c) {
        say(why, size, "in-band: out of memory");
        return -ENOMEM;
    }
    snprintf(c->name, sizeof(c->name), "in-band");
    /* The OpenIPMI driver's device (freeipmi's default path, ipmi0); no
     * KCS/SSIF port I/O of our own, which would race the kernel's driver. */
    if (ipmi_ctx_open_inband(c->ctx, IPMI_DEVICE_OPENIPMI, 0, 0, 0, NULL, 0, IPMI_FLAGS_DEFAULT) ==
        0) {
        *ret = c;
        return 0;
    }
    errnum = ipmi_ctx_errnum(c->ctx);
    r = ipmi_errno(errnum);
    if (errnum == IPMI_ERR_DEVICE_NOT_FOUND)
        say(why, size, "in-band: no /dev/ipmi0 (load ipmi_si or ipmi_ssif, and ipmi_devintf)");
    else if (errnum == IPMI_ERR_PERMISSION)
        say(why, size, "in-band: /dev/ipmi0: permission denied (needs root or the device's group)");
    else
        say(why, size, "in-band: cannot open /dev/ipmi0: %s", ipmi_ctx_errormsg(c->ctx));
    dcmi_close(c);
    return r;
}

static int open_lan_2_0(struct dcmi_conn *c, const struct dcmi_lan *lan, bool open_priv)
{
    double t = lan->timeout_s > 0 ? lan->timeout_s : DCMI_DEFAULT_TIMEOUT_S;
    unsigned timeout_ms = (unsigned)(t * 1000);
    unsigned retrans_ms = timeout_ms / 4;

    if (retrans_ms < DCMI_MIN_RETRANSMIT_MS)
        retrans_ms = DCMI_MIN_RETRANSMIT_MS;
    /* ADMIN privilege, as ipmitool and the fleet's engine ask: DCMI says
     * User is enough for Get Power Reading, but BMCs that route the group
     * extension by netfn (ipmi_sim's loadlib) want Administrator. */
    return ipmi_ctx_open_outofband_2_0(
        c->ctx, lan->host, lan->user, lan->password, NULL, 0, IPMI_PRIVILEGE_LEVEL_ADMIN,
        lan->cipher ? lan->cipher : DCMI_DEFAULT_CIPHER, timeout_ms, retrans_ms,
        open_priv ? IPMI_WORKAROUND_FLAGS_OUTOFBAND_2_0_OPEN_SESSION_PRIVILEGE
                  : IPMI_WORKAROUND_FLAGS_DEFAULT,
        IPMI_FLAGS_DEFAULT);
}

int dcmi_open_lan(const struct dcmi_lan *lan, struct dcmi_conn **ret, char *why, size_t size)
{
    static bool crypto_ready;
    struct dcmi_conn *c;
    int errnum, r;

    if (!lan || !lan->host || !*lan->host || !lan->user || !lan->password) {
        say(why, size, "lan: no BMC host, user or password given");
        return -EINVAL;
    }
    if (!crypto_ready) {
        /* libgcrypt for RMCP+; freeipmi wants it before threads start. */
        if (ipmi_rmcpplus_init() < 0) {
            say(why, size, "lan %s: cannot initialise freeipmi's crypto library", lan->host);
            return -EIO;
        }
        crypto_ready = true;
    }
    if (!(c = conn_new())) {
        say(why, size, "lan %s: out of memory", lan->host);
        return -ENOMEM;
    }
    snprintf(c->name, sizeof(c->name), "lan %.70s", lan->host);
    r = open_lan_2_0(c, lan, false);
    /* A BMC that answers "the highest privilege" in Open Session with
     * level 0 (ipmi_sim does) gets the level asked for, as ipmitool sends
     * it: the fleet's engine learns the same. */
    if (r < 0 && ipmi_ctx_errnum(c->ctx) == IPMI_ERR_PRIVILEGE_LEVEL_CANNOT_BE_OBTAINED) {
        ipmi_ctx_destroy(c->ctx);
        if (!(c->ctx = ipmi_ctx_create())) {
            free(c);
            say(why, size, "lan %s: out of memory", lan->host);
            return -ENOMEM;
        }
        r = open_lan_2_0(c, lan, true);
    }
    if (r == 0) {
        *ret = c;
        return 0;
    }
    errnum = ipmi_ctx_errnum(c->ctx);
    say(why, size, "lan %s: cannot open an IPMI 2.0 session: %s", lan->host,
        ipmi_ctx_errormsg(c->ctx));
    dcmi_close(c);
    return ipmi_errno(errnum);
}

static int get_u(fiid_obj_t rs, const char *field, uint64_t *v)
{
    return FIID_OBJ_GET(rs, field, v) > 0 ? 0 : -EBADMSG;
}

static int decode(fiid_obj_t rs, struct dcmi_power *p)
{
    uint64_t cur, min, max, avg, ts, period, state;

    if (get_u(rs, "current_power", &cur) < 0 ||
        get_u(rs, "minimum_power_over_sampling_duration", &min) < 0 ||
        get_u(rs, "maximum_power_over_sampling_duration", &max) < 0 ||
        get_u(rs, "average_power_over_sampling_duration", &avg) < 0 ||
        get_u(rs, "time_stamp", &ts) < 0 ||
        get_u(rs, "statistics_reporting_time_period", &period) < 0 ||
        get_u(rs, "power_reading_state.power_measurement", &state) < 0)
        return -EBADMSG;
    *p = (struct dcmi_power){
        .current_w = (double)cur,
        .min_w = (double)min,
        .max_w = (double)max,
        .average_w = (double)avg,
        .period_ms = (uint32_t)period,
        .timestamp = (uint32_t)ts,
        .active = state == IPMI_DCMI_POWER_READING_STATE_POWER_MEASUREMENT_ACTIVE,
    };
    return 0;
}

/* A failed command: the completion code named when there is one. */
static int command_failed(struct dcmi_conn *c, fiid_obj_t rs, char *why, size_t size)
{
    int errnum = ipmi_ctx_errnum(c->ctx);
    char cc[IPMI_ERR_STR_MAX_LEN];

    if (errnum == IPMI_ERR_BAD_COMPLETION_CODE &&
        ipmi_completion_code_dcmi_strerror_cmd_r(rs, IPMI_NET_FN_GROUP_EXTENSION_RQ, cc,
                                                 sizeof(cc)) == 0) {
        say(why, size, "%s: Get Power Reading: %s", c->name, cc);
        return -EOPNOTSUPP;
    }
    if (errnum == IPMI_ERR_COMMAND_INVALID_OR_UNSUPPORTED) {
        say(why, size, "%s: the BMC does not support DCMI Get Power Reading", c->name);
        return -EOPNOTSUPP;
    }
    say(why, size, "%s: Get Power Reading: %s", c->name, ipmi_ctx_errormsg(c->ctx));
    return ipmi_errno(errnum);
}

int dcmi_power_read(struct dcmi_conn *c, struct dcmi_power *ret, char *why, size_t size)
{
    struct dcmi_power p;
    fiid_obj_t rs;
    int r;

    if (!(rs = fiid_obj_create(tmpl_cmd_dcmi_get_power_reading_rs))) {
        say(why, size, "%s: out of memory", c->name);
        return -ENOMEM;
    }
    if (ipmi_cmd_dcmi_get_power_reading(
            c->ctx, IPMI_DCMI_POWER_READING_MODE_SYSTEM_POWER_STATISTICS, 0, rs) < 0)
        r = command_failed(c, rs, why, size);
    else if ((r = decode(rs, &p)) < 0)
        say(why, size, "%s: Get Power Reading: the answer lacks a field", c->name);
    fiid_obj_destroy(rs);
    if (r == 0)
        *ret = p;
    return r;
}

const char *dcmi_conn_name(const struct dcmi_conn *c)
{
    return c->name;
}

void dcmi_close(struct dcmi_conn *c)
{
    if (!c)
        return;
    ipmi_ctx_close(c->ctx);
    ipmi_ctx_destroy(c->ctx);
    free(c);
}
