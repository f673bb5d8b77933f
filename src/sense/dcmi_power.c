/* DCMI power reading through libfreeipmi, in-band or over the LAN
 * (dcmi_power.h). The fleet's engine (src/fleet/engine/ipmi.c) reads the
 * same command for each host of a site, with its own retries and locking;
 * this is the node's own reader. libfreeipmi is loaded at run time
 * (dlopen, sense/freeipmi_abi.h), once per process, so `watt` and its
 * agent do not link it and run without it: only the BMC source is then
 * absent, with the reason. */
#include "sense/dcmi_power.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sense/freeipmi_abi.h"

#define DCMI_DEFAULT_CIPHER    3
#define DCMI_DEFAULT_TIMEOUT_S 5.0
#define DCMI_MIN_RETRANSMIT_MS 100

/* The library's calls, resolved once. */
static struct {
    void *dl;
    fi_ctx_create_fn ctx_create;
    fi_ctx_errnum_fn ctx_errnum;
    fi_ctx_errormsg_fn ctx_errormsg;
    fi_ctx_open_inband_fn ctx_open_inband;
    fi_ctx_open_outofband_2_0_fn ctx_open_outofband_2_0;
    fi_ctx_close_fn ctx_close;
    fi_ctx_destroy_fn ctx_destroy;
    fi_rmcpplus_init_fn rmcpplus_init;
    fi_obj_create_fn obj_create;
    fi_obj_destroy_fn obj_destroy;
    fi_obj_get_fn obj_get;
    fi_cmd_dcmi_get_power_reading_fn cmd_get_power_reading;
    fi_completion_code_dcmi_strerror_cmd_r_fn cc_strerror;
    fi_template_ptr tmpl_power_reading_rs;
} fi;

struct dcmi_conn {
    fi_ctx_t ctx;
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

const char *dcmi_library_name(void)
{
    const char *env = getenv(DCMI_ENV_LIBRARY);
    return env && *env ? env : FI_LIBRARY;
}

/* One symbol, or the name of the first one missing. */
static void *sym(const char *name, const char **missing)
{
    void *p = dlsym(fi.dl, name);
    if (!p && !*missing)
        *missing = name;
    return p;
}

int dcmi_library_load(char *why, size_t size)
{
    const char *name = dcmi_library_name(), *missing = NULL;

    if (fi.dl)
        return 0;
    if (!(fi.dl = dlopen(name, RTLD_NOW | RTLD_LOCAL))) {
        say(why, size, "%s not found: install libfreeipmi17", name);
        return -ENOENT;
    }
    fi.ctx_create = (fi_ctx_create_fn)sym("ipmi_ctx_create", &missing);
    fi.ctx_errnum = (fi_ctx_errnum_fn)sym("ipmi_ctx_errnum", &missing);
    fi.ctx_errormsg = (fi_ctx_errormsg_fn)sym("ipmi_ctx_errormsg", &missing);
    fi.ctx_open_inband = (fi_ctx_open_inband_fn)sym("ipmi_ctx_open_inband", &missing);
    fi.ctx_open_outofband_2_0 =
        (fi_ctx_open_outofband_2_0_fn)sym("ipmi_ctx_open_outofband_2_0", &missing);
    fi.ctx_close = (fi_ctx_close_fn)sym("ipmi_ctx_close", &missing);
    fi.ctx_destroy = (fi_ctx_destroy_fn)sym("ipmi_ctx_destroy", &missing);
    fi.rmcpplus_init = (fi_rmcpplus_init_fn)sym("ipmi_rmcpplus_init", &missing);
    fi.obj_create = (fi_obj_create_fn)sym("fiid_obj_create", &missing);
    fi.obj_destroy = (fi_obj_destroy_fn)sym("fiid_obj_destroy", &missing);
    fi.obj_get = (fi_obj_get_fn)sym("FIID_OBJ_GET", &missing);
    fi.cmd_get_power_reading =
        (fi_cmd_dcmi_get_power_reading_fn)sym("ipmi_cmd_dcmi_get_power_reading", &missing);
    fi.cc_strerror = (fi_completion_code_dcmi_strerror_cmd_r_fn)sym(
        "ipmi_completion_code_dcmi_strerror_cmd_r", &missing);
    fi.tmpl_power_reading_rs = sym("tmpl_cmd_dcmi_get_power_reading_rs", &missing);
    if (missing) {
        say(why, size, "%s has no %s: not the FreeIPMI 1.x library", name, missing);
        dlclose(fi.dl);
        fi.dl = NULL;
        return -ENOSYS;
    }
    return 0;
}

/* freeipmi's error, as a negative errno. */
static int ipmi_errno(int errnum)
{
    switch (errnum) {
    case FI_ERR_DEVICE_NOT_FOUND:
        return -ENOENT;
    case FI_ERR_PERMISSION:
    case FI_ERR_USERNAME_INVALID:
    case FI_ERR_PASSWORD_INVALID:
    case FI_ERR_K_G_INVALID:
    case FI_ERR_PRIVILEGE_LEVEL_INSUFFICIENT:
    case FI_ERR_PRIVILEGE_LEVEL_CANNOT_BE_OBTAINED:
        return -EACCES;
    case FI_ERR_CONNECTION_TIMEOUT:
    case FI_ERR_SESSION_TIMEOUT:
    case FI_ERR_DRIVER_TIMEOUT:
    case FI_ERR_MESSAGE_TIMEOUT:
        return -ETIMEDOUT;
    case FI_ERR_DRIVER_BUSY:
    case FI_ERR_BMC_BUSY:
        return -EBUSY;
    case FI_ERR_COMMAND_INVALID_OR_UNSUPPORTED:
    case FI_ERR_COMMAND_INVALID_FOR_SELECTED_INTERFACE:
    case FI_ERR_DEVICE_NOT_SUPPORTED:
    case FI_ERR_IPMI_2_0_UNAVAILABLE:
    case FI_ERR_CIPHER_SUITE_ID_UNAVAILABLE:
    case FI_ERR_AUTHENTICATION_TYPE_UNAVAILABLE:
        return -EOPNOTSUPP;
    case FI_ERR_HOSTNAME_INVALID:
    case FI_ERR_PARAMETERS:
        return -EINVAL;
    case FI_ERR_OUT_OF_MEMORY:
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
    if (!(c->ctx = fi.ctx_create())) {
        free(c);
        return NULL;
    }
    return c;
}

int dcmi_open_inband(struct dcmi_conn **ret, char *why, size_t size)
{
    struct dcmi_conn *c;
    int errnum, r;

    if ((r = dcmi_library_load(why, size)) < 0)
        return r;
    if (!(c = conn_new())) {
        say(why, size, "in-band: out of memory");
        return -ENOMEM;
    }
    snprintf(c->name, sizeof(c->name), "in-band");
    /* The OpenIPMI driver's device (freeipmi's default path, ipmi0); no
     * KCS/SSIF port I/O of our own, which would race the kernel's driver. */
    if (fi.ctx_open_inband(c->ctx, FI_DEVICE_OPENIPMI, 0, 0, 0, NULL, 0, FI_FLAGS_DEFAULT) == 0) {
        *ret = c;
        return 0;
    }
    errnum = fi.ctx_errnum(c->ctx);
    r = ipmi_errno(errnum);
    if (errnum == FI_ERR_DEVICE_NOT_FOUND)
        say(why, size, "in-band: no /dev/ipmi0 (load ipmi_si or ipmi_ssif, and ipmi_devintf)");
    else if (errnum == FI_ERR_PERMISSION)
        say(why, size, "in-band: /dev/ipmi0: permission denied (needs root or the device's group)");
    else
        say(why, size, "in-band: cannot open /dev/ipmi0: %s", fi.ctx_errormsg(c->ctx));
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
    return fi.ctx_open_outofband_2_0(
        c->ctx, lan->host, lan->user, lan->password, NULL, 0, FI_PRIVILEGE_LEVEL_ADMIN,
        (uint8_t)(lan->cipher ? lan->cipher : DCMI_DEFAULT_CIPHER), timeout_ms, retrans_ms,
        open_priv ? FI_WORKAROUND_FLAGS_OUTOFBAND_2_0_OPEN_SESSION_PRIV
                  : FI_WORKAROUND_FLAGS_DEFAULT,
        FI_FLAGS_DEFAULT);
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
    if ((r = dcmi_library_load(why, size)) < 0)
        return r;
    if (!crypto_ready) {
        /* libgcrypt for RMCP+; freeipmi wants it before threads start. */
        if (fi.rmcpplus_init() < 0) {
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
    if (r < 0 && fi.ctx_errnum(c->ctx) == FI_ERR_PRIVILEGE_LEVEL_CANNOT_BE_OBTAINED) {
        fi.ctx_destroy(c->ctx);
        if (!(c->ctx = fi.ctx_create())) {
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
    errnum = fi.ctx_errnum(c->ctx);
    say(why, size, "lan %s: cannot open an IPMI 2.0 session: %s", lan->host,
        fi.ctx_errormsg(c->ctx));
    dcmi_close(c);
    return ipmi_errno(errnum);
}

static int get_u(fi_obj_t rs, const char *field, uint64_t *v)
{
    return fi.obj_get(rs, field, v) > 0 ? 0 : -EBADMSG;
}

static int decode(fi_obj_t rs, struct dcmi_power *p)
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
        .active = state == FI_DCMI_POWER_READING_STATE_POWER_MEASUREMENT_ACTIVE,
    };
    return 0;
}

/* A failed command: the completion code named when there is one. */
static int command_failed(struct dcmi_conn *c, fi_obj_t rs, char *why, size_t size)
{
    int errnum = fi.ctx_errnum(c->ctx);
    char cc[FI_ERR_STR_MAX_LEN];

    if (errnum == FI_ERR_BAD_COMPLETION_CODE &&
        fi.cc_strerror(rs, FI_NET_FN_GROUP_EXTENSION_RQ, cc, sizeof(cc)) == 0) {
        say(why, size, "%s: Get Power Reading: %s", c->name, cc);
        return -EOPNOTSUPP;
    }
    if (errnum == FI_ERR_COMMAND_INVALID_OR_UNSUPPORTED) {
        say(why, size, "%s: the BMC does not support DCMI Get Power Reading", c->name);
        return -EOPNOTSUPP;
    }
    say(why, size, "%s: Get Power Reading: %s", c->name, fi.ctx_errormsg(c->ctx));
    return ipmi_errno(errnum);
}

int dcmi_power_read(struct dcmi_conn *c, struct dcmi_power *ret, char *why, size_t size)
{
    struct dcmi_power p;
    fi_obj_t rs;
    int r;

    if (!(rs = fi.obj_create(fi.tmpl_power_reading_rs))) {
        say(why, size, "%s: out of memory", c->name);
        return -ENOMEM;
    }
    if (fi.cmd_get_power_reading(c->ctx, FI_DCMI_POWER_READING_MODE_SYSTEM_POWER_STATISTICS, 0,
                                 rs) < 0)
        r = command_failed(c, rs, why, size);
    else if ((r = decode(rs, &p)) < 0)
        say(why, size, "%s: Get Power Reading: the answer lacks a field", c->name);
    fi.obj_destroy(rs);
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
    fi.ctx_close(c->ctx);
    fi.ctx_destroy(c->ctx);
    free(c);
}
