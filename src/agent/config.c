/* The agent's INI configuration (inih). */
#include <ctype.h>
#include <errno.h>
#include <ini.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/agent.h"
#include "base/parse.h"
#include "base/util.h"
#include "tune/profile.h"

void agent_config_default(struct agent_config *c)
{
    *c = (struct agent_config){
        .listen_host = xstrdup("127.0.0.1"),
        .port = AGENT_DEFAULT_PORT,
        .interval_s = 1,
        .rapl = AGENT_RAPL_EXACT,
        .pue = 1.5,
        .max_connections = 128,
        .max_per_client = 16,
        .timeout_s = 10,
        .header_timeout_s = 5,
        .max_request_bytes = 16384,
        .control = xstrdup(AGENT_DEFAULT_CONTROL),
        .restore_on_exit = true,
        .cgroups = 10,
        .device_interval_s = -1, /* 10 on a live root, 0 on a recorded one */
        .fit_interval_s = 300,
    };
}

void agent_config_free(struct agent_config *c)
{
    free(c->listen_host);
    free(c->root);
    free(c->model);
    free(c->control);
    free(c->tls_cert);
    free(c->tls_key);
    free(c->auth_user);
    free(c->auth_password_file);
    free(c->profile);
    free(c->config_dir);
    free(c->journal);
    free(c->fleet_metrics);
    free(c->bmc);
    free(c->bmc_user);
    free(c->bmc_password_file);
    c->fleet_metrics = c->bmc = c->bmc_user = c->bmc_password_file = NULL;
    c->listen_host = c->root = c->model = c->control = NULL;
    c->tls_cert = c->tls_key = c->auth_user = c->auth_password_file = NULL;
    c->profile = c->config_dir = c->journal = NULL;
}

int agent_parse_listen(const char *s, char **ret_host, uint16_t *ret_port)
{
    const char *colon = strrchr(s, ':');
    const char *port = colon ? colon + 1 : s;
    char *end;
    errno = 0;
    unsigned long p = strtoul(port, &end, 10);
    if (errno || end == port || *end || p == 0 || p > 65535)
        return -EINVAL;
    char *host;
    if (colon && colon > s) {
        const char *h = s, *he = colon;
        if (*h == '[' && he[-1] == ']') { /* [::1]:9723 */
            h++;
            he--;
        }
        host = strndup(h, (size_t)(he - h));
    } else {
        host = xstrdup("127.0.0.1");
    }
    if (!host || !*host) {
        free(host);
        return -EINVAL;
    }
    *ret_host = host;
    *ret_port = (uint16_t)p;
    return 0;
}

bool agent_host_is_loopback(const char *host)
{
    return strncmp(host, "127.", 4) == 0 || streq(host, "::1") || streq(host, "localhost");
}

struct parse {
    struct agent_config c;
    const char *origin;
    char *err;
    /* our line reader: inih numbers nothing for its handler */
    const char *pos;
    int line;     /* the line inih works on, from 1 */
    int err_line; /* where err was found */
};

/* Keys renamed to carry their unit (docs/config.md): the old name is
 * still read, with a one-line note naming the file, the line and the new
 * name, so that no existing agent.ini breaks. */
static const struct {
    const char *old, *now;
} renamed[] = {
    {"interval", "interval_s"},
    {"device_interval", "device_interval_s"},
    {"timeout", "timeout_s"},
    {"header_timeout", "header_timeout_s"},
};

/* The key's current name; a deprecated one is noted on stderr. */
static const char *current_key(const struct parse *p, const char *key)
{
    for (size_t i = 0; i < ARRAY_SIZE(renamed); i++)
        if (streq(key, renamed[i].old)) {
            fprintf(stderr, "watt agent: %s:%d: '%s' is deprecated: write %s (same value)\n",
                    p->origin, p->line, key, renamed[i].now);
            return renamed[i].now;
        }
    return key;
}

/* inih's reader, counting lines. A line longer than inih's buffer would
 * come in pieces, the second one read as a line of its own: refused. */
static char *reader(char *str, int num, void *stream)
{
    struct parse *p = stream;
    if (!*p->pos || p->err)
        return NULL;
    const char *nl = strchr(p->pos, '\n');
    size_t n = nl ? (size_t)(nl - p->pos) : strlen(p->pos);
    p->line++;
    if (n > (size_t)num - 1) {
        p->err = xasprintf("line is longer than %d characters", num - 1);
        p->err_line = p->line;
        return NULL;
    }
    memcpy(str, p->pos, n);
    str[n] = '\0';
    p->pos += n + (nl != NULL);
    return str;
}

static bool num(const char *v, double min, double max, double *ret)
{
    char *end;
    errno = 0;
    double d = strtod(v, &end);
    if (errno || end == v || *end || !isfinite(d) || d < min || d > max)
        return false;
    *ret = d;
    return true;
}

/* A path with a ".." component could leave the root. */
static bool journal_path_bad(const char *v)
{
    for (const char *s = v; *s;) {
        size_t n = strcspn(s, "/");
        if (n == 2 && s[0] == '.' && s[1] == '.')
            return true;
        s += n;
        s += strspn(s, "/");
    }
    return !*v;
}

/* Messages get "FILE:LINE: " prepended by agent_config_parse(), the
 * line from our reader. */
static int on_key(struct parse *p, const char *section, const char *key, const char *value);

static int on_entry(void *user, const char *section, const char *key, const char *value)
{
    struct parse *p = user;
    if (p->err)
        return 0;
    int r = on_key(p, section, key, value);
    if (p->err)
        p->err_line = p->line;
    return r;
}

static int on_key(struct parse *p, const char *section, const char *key, const char *value)
{
    double d;
    bool b;

    if (!streq(section, "agent")) {
        p->err = *section ? xasprintf("unknown section [%s] (want [agent])", section)
                          : xasprintf("'%s' outside [agent]", key);
        return 0;
    }
    /* inih's inline comment is " ;" only (docs/config.md); a " #" meant
     * as one would end up in the value */
    for (const char *c = value; *c; c++)
        if (*c == '#' && c > value && isspace((unsigned char)c[-1])) {
            p->err = xasprintf("%s '%s': ' #' does not start a comment after a value (only ' ;' "
                               "does): write ' ;' there, or leave the '#' out",
                               key, value);
            return 0;
        }
    if (streq(key, "listen")) {
        char *host;
        uint16_t port;
        if (agent_parse_listen(value, &host, &port) < 0) {
            p->err = xasprintf("listen '%s': want HOST:PORT (port 1..65535)", value);
            return 0;
        }
        free(p->c.listen_host);
        p->c.listen_host = host;
        p->c.port = port;
        return 1;
    }
    const char *written = key;
    key = current_key(p, key);
    if (streq(key, "interval_s")) {
        if (!num(value, 0.1, 3600, &d))
            goto bad_range;
        p->c.interval_s = d;
    } else if (streq(key, "root")) {
        free(p->c.root);
        p->c.root = *value ? xstrdup(value) : NULL;
    } else if (streq(key, "rapl_energy")) {
        if (streq(value, "exact"))
            p->c.rapl = AGENT_RAPL_EXACT;
        else if (streq(value, "coarse"))
            p->c.rapl = AGENT_RAPL_COARSE;
        else if (streq(value, "off"))
            p->c.rapl = AGENT_RAPL_OFF;
        else {
            p->err = xasprintf("rapl_energy '%s': want exact, coarse or off", value);
            return 0;
        }
    } else if (streq(key, "pue")) {
        if (!num(value, 1, 10, &d))
            goto bad_range;
        p->c.pue = d;
    } else if (streq(key, "bmc") || streq(key, "bmc_user") || streq(key, "bmc_password_file")) {
        char **f = streq(key, "bmc")        ? &p->c.bmc
                   : streq(key, "bmc_user") ? &p->c.bmc_user
                                            : &p->c.bmc_password_file;
        free(*f);
        *f = *value ? xstrdup(value) : NULL;
    } else if (streq(key, "tls_cert") || streq(key, "tls_key") || streq(key, "auth_user") ||
               streq(key, "auth_password_file")) {
        char **f = streq(key, "tls_cert")    ? &p->c.tls_cert
                   : streq(key, "tls_key")   ? &p->c.tls_key
                   : streq(key, "auth_user") ? &p->c.auth_user
                                             : &p->c.auth_password_file;
        free(*f);
        *f = *value ? xstrdup(value) : NULL;
    } else if (streq(key, "insecure") || streq(key, "restore_on_exit")) {
        if (parse_bool(value, &b) < 0) {
            p->err = xasprintf("%s '%s': want " PARSE_BOOL_WORDS, key, value);
            return 0;
        }
        *(streq(key, "insecure") ? &p->c.insecure : &p->c.restore_on_exit) = b;
    } else if (streq(key, "profile")) {
        if (*value && !profile_name_ok(value)) {
            p->err = xasprintf("profile '%s': a profile name is [a-z0-9][a-z0-9_.-]*", value);
            return 0;
        }
        free(p->c.profile);
        p->c.profile = *value ? xstrdup(value) : NULL;
    } else if (streq(key, "config_dir") || streq(key, "journal")) {
        char **f = streq(key, "journal") ? &p->c.journal : &p->c.config_dir;
        if (*value && f == &p->c.journal && journal_path_bad(value)) {
            p->err = xasprintf("%s '%s': want a path without '..'", key, value);
            return 0;
        }
        free(*f);
        *f = *value ? xstrdup(value) : NULL;
    } else if (streq(key, "fleet_metrics")) {
        if (*value && *value != '/') {
            p->err = xasprintf("fleet_metrics '%s': want an absolute path", value);
            return 0;
        }
        free(p->c.fleet_metrics);
        p->c.fleet_metrics = *value ? xstrdup(value) : NULL;
    } else if (streq(key, "control")) {
        free(p->c.control);
        p->c.control = xstrdup(value);
    } else if (streq(key, "model")) {
        free(p->c.model);
        p->c.model = *value ? xstrdup(value) : NULL;
    } else if (streq(key, "wakeups")) {
        enum wake_mode m;
        if (wake_mode_from_string(value, &m) < 0) {
            p->err = xasprintf("wakeups '%s': want auto, bpf, trace, proc or off", value);
            return 0;
        }
        p->c.wakeups = (enum agent_wakeups_mode)m;
    } else if (streq(key, "cgroups")) {
        if (!num(value, 0, 1000, &d) || d != floor(d))
            goto bad_range;
        p->c.cgroups = (unsigned)d;
    } else if (streq(key, "device_interval_s")) {
        if (!num(value, 0, 3600, &d))
            goto bad_range;
        p->c.device_interval_s = d;
    } else if (streq(key, "fit_interval_s")) {
        if (!num(value, 0, 86400, &d))
            goto bad_range;
        p->c.fit_interval_s = d;
    } else if (streq(key, "max_connections")) {
        if (!num(value, 1, 4096, &d) || d != floor(d))
            goto bad_range;
        p->c.max_connections = (unsigned)d;
    } else if (streq(key, "max_connections_per_client")) {
        if (!num(value, 1, 4096, &d) || d != floor(d))
            goto bad_range;
        p->c.max_per_client = (unsigned)d;
    } else if (streq(key, "timeout_s") || streq(key, "header_timeout_s")) {
        if (!num(value, 1, 3600, &d) || d != floor(d))
            goto bad_range;
        *(streq(key, "timeout_s") ? &p->c.timeout_s : &p->c.header_timeout_s) = (unsigned)d;
    } else if (streq(key, "max_request_bytes")) {
        if (!num(value, 2048, 1 << 20, &d) || d != floor(d))
            goto bad_range;
        p->c.max_request_bytes = (unsigned)d;
    } else {
        p->err = xasprintf("unknown key '%s' in [agent]", key);
        return 0;
    }
    return 1;
bad_range:
    p->err = xasprintf("%s '%s' is not a number in range (see docs/agent.md)", written, value);
    return 0;
}

static char *dup_or_null(const char *s)
{
    return s ? xstrdup(s) : NULL;
}

int agent_config_parse(const char *text, const char *origin, struct agent_config *c, char **ret_err)
{
    struct parse p = {.c = *c, .origin = origin, .pos = text};
    /* work on a deep copy so that *c stays as it was on any error */
    p.c.listen_host = dup_or_null(c->listen_host);
    p.c.root = dup_or_null(c->root);
    p.c.model = dup_or_null(c->model);
    p.c.control = dup_or_null(c->control);
    p.c.tls_cert = dup_or_null(c->tls_cert);
    p.c.tls_key = dup_or_null(c->tls_key);
    p.c.auth_user = dup_or_null(c->auth_user);
    p.c.auth_password_file = dup_or_null(c->auth_password_file);
    p.c.profile = dup_or_null(c->profile);
    p.c.config_dir = dup_or_null(c->config_dir);
    p.c.journal = dup_or_null(c->journal);
    p.c.fleet_metrics = dup_or_null(c->fleet_metrics);
    p.c.bmc = dup_or_null(c->bmc);
    p.c.bmc_user = dup_or_null(c->bmc_user);
    p.c.bmc_password_file = dup_or_null(c->bmc_password_file);
    int r = ini_parse_stream(reader, &p, on_entry, &p);
    if (!p.err && r > 0) {
        p.err = xstrdup("not INI (want key = value lines under [agent])");
        p.err_line = r;
    }
    if (p.err) {
        agent_config_free(&p.c);
        *ret_err = xasprintf("%s:%d: %s", origin, p.err_line, p.err);
        free(p.err);
        return -EINVAL;
    }
    agent_config_free(c);
    *c = p.c;
    return 0;
}

int agent_config_load(const char *path, struct agent_config *c, char **ret_err)
{
    _cleanup_fclose_ FILE *f = fopen(path, "re");
    if (!f) {
        int r = -errno; /* before xasprintf, which may set errno */
        *ret_err = xasprintf("cannot read config %s: %s", path, strerror(-r));
        return r;
    }
    char buf[65536];
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    if (!feof(f)) {
        *ret_err = xasprintf("%s: longer than 64 KiB: not a config file", path);
        return -EFBIG;
    }
    buf[n] = '\0';
    if (strlen(buf) != n) {
        *ret_err = xasprintf("%s: contains a NUL byte", path);
        return -EINVAL;
    }
    return agent_config_parse(buf, path, c, ret_err);
}
