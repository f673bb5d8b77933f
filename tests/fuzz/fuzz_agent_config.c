/* Fuzz target: agent/agent.h, agent_config_parse() (the agent's INI file,
 * [agent] section) over the defaults.
 *
 * Refused: -EINVAL, a message "fuzz.conf:LINE: ..." and the config exactly
 * as it was. Accepted: every field in its documented range (docs/agent.md),
 * the journal path without a ".." component, fleet_metrics absolute, a
 * valid profile name; and the parse is idempotent: the same text read
 * again over its own result changes nothing (every key assigns, nothing
 * accumulates). */
#include <errno.h>
#include <math.h>
#include <stdbool.h>

#include "agent/agent.h"
#include "fuzz.h"
#include "tune/profile.h"

#define ORIGIN "fuzz.conf"

static bool str_eq(const char *a, const char *b)
{
    return a == b || (a && b && strcmp(a, b) == 0);
}

static bool config_eq(const struct agent_config *a, const struct agent_config *b)
{
    return str_eq(a->listen_host, b->listen_host) && a->port == b->port &&
           a->interval_s == b->interval_s && str_eq(a->root, b->root) && a->rapl == b->rapl &&
           a->pue == b->pue && str_eq(a->model, b->model) &&
           a->max_connections == b->max_connections && a->timeout_s == b->timeout_s &&
           a->max_request_bytes == b->max_request_bytes && str_eq(a->control, b->control) &&
           str_eq(a->tls_cert, b->tls_cert) && str_eq(a->tls_key, b->tls_key) &&
           str_eq(a->auth_user, b->auth_user) &&
           str_eq(a->auth_password_file, b->auth_password_file) && a->insecure == b->insecure &&
           str_eq(a->profile, b->profile) && str_eq(a->config_dir, b->config_dir) &&
           str_eq(a->journal, b->journal) && a->restore_on_exit == b->restore_on_exit &&
           a->wakeups == b->wakeups && a->cgroups == b->cgroups &&
           str_eq(a->fleet_metrics, b->fleet_metrics);
}

static bool has_dotdot(const char *path)
{
    for (const char *s = path; *s;) {
        size_t n = strcspn(s, "/");
        if (n == 2 && s[0] == '.' && s[1] == '.')
            return true;
        s += n;
        s += strspn(s, "/");
    }
    return false;
}

static void check_ranges(const struct agent_config *c)
{
    FUZZ_CHECK(c->listen_host && c->listen_host[0] && c->port >= 1);
    FUZZ_CHECK(isfinite(c->interval_s) && c->interval_s >= 0.1 && c->interval_s <= 3600);
    FUZZ_CHECK(c->rapl == AGENT_RAPL_EXACT || c->rapl == AGENT_RAPL_COARSE ||
               c->rapl == AGENT_RAPL_OFF);
    FUZZ_CHECK(isfinite(c->pue) && c->pue >= 1 && c->pue <= 10);
    FUZZ_CHECK(c->max_connections >= 1 && c->max_connections <= 4096);
    FUZZ_CHECK(c->timeout_s >= 1 && c->timeout_s <= 3600);
    FUZZ_CHECK(c->max_request_bytes >= 2048 && c->max_request_bytes <= 1u << 20);
    FUZZ_CHECK(c->control != NULL);
    FUZZ_CHECK(c->wakeups == AGENT_WAKEUPS_AUTO || c->wakeups == AGENT_WAKEUPS_BPF ||
               c->wakeups == AGENT_WAKEUPS_TRACE || c->wakeups == AGENT_WAKEUPS_PROC ||
               c->wakeups == AGENT_WAKEUPS_OFF);
    FUZZ_CHECK(c->cgroups <= 1000);
    FUZZ_CHECK(!c->journal || (c->journal[0] && !has_dotdot(c->journal)));
    FUZZ_CHECK(!c->fleet_metrics || c->fleet_metrics[0] == '/');
    FUZZ_CHECK(!c->profile || profile_name_ok(c->profile));
    /* "" means "none" and is stored as NULL */
    const char *opt[] = {c->root,      c->model,     c->tls_cert,
                         c->tls_key,   c->auth_user, c->auth_password_file,
                         c->config_dir};
    for (size_t i = 0; i < sizeof(opt) / sizeof(opt[0]); i++)
        FUZZ_CHECK(!opt[i] || opt[i][0]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = fuzz_strndup(data, size);
    struct agent_config c, before;
    agent_config_default(&c);
    agent_config_default(&before);
    char *err = (char *)0x1;
    int r = agent_config_parse(text, ORIGIN, &c, &err);
    if (r < 0) {
        FUZZ_CHECK(r == -EINVAL);
        FUZZ_CHECK(err != (char *)0x1 && strncmp(err, ORIGIN ":", strlen(ORIGIN ":")) == 0);
        FUZZ_CHECK(config_eq(&c, &before));
        free(err);
    } else {
        FUZZ_CHECK(r == 0 && err == (char *)0x1);
        check_ranges(&c);
        struct agent_config again; /* defaults, then the text twice */
        agent_config_default(&again);
        FUZZ_CHECK(agent_config_parse(text, ORIGIN, &again, &err) == 0);
        FUZZ_CHECK(agent_config_parse(text, ORIGIN, &again, &err) == 0);
        FUZZ_CHECK(config_eq(&c, &again));
        agent_config_free(&again);
    }
    agent_config_free(&c);
    agent_config_free(&before);
    free(text);
    return 0;
}
