/* Fuzz target: fleet/control/opstate.h, the operator's files in state_dir:
 * opstate_maint_parse() (maintenance), opstate_approvals_parse()
 * (approvals), and opstate_plan_serial() / opstate_plan_pending() (what
 * watt fleet approve reads of plan.json), each on the same input.
 *
 * Refused: -EINVAL and a message that starts with the origin. Accepted:
 * every record is a valid host name with a finite time, each host once
 * (maintenance), or "all" or 8 hex digits with a finite time
 * (approvals); formatting the records and parsing that again gives the
 * same records. A "what" copied out of a plan always fits its buffer. */
#include <errno.h>
#include <math.h>
#include <stdbool.h>

#include "fleet/control/opstate.h"
#include "fuzz.h"

static void maintenance(const uint8_t *data, size_t size)
{
    struct opstate_maint *v = NULL, *w = NULL;
    size_t n = 0, m = 0;
    struct fleet_error err = {{0}};
    int r = opstate_maint_parse((const char *)data, size, "m", &v, &n, &err);
    if (r < 0) {
        FUZZ_CHECK(r == -EINVAL && strncmp(err.msg, "m", 1) == 0);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        FUZZ_CHECK(v[i].host[0] && strlen(v[i].host) < sizeof(v[i].host));
        FUZZ_CHECK(isfinite(v[i].since) && v[i].since >= 0);
        for (size_t k = 0; k < i; k++)
            FUZZ_CHECK(strcmp(v[i].host, v[k].host) != 0);
    }
    char *text = opstate_maint_format(v, n);
    FUZZ_CHECK(opstate_maint_parse(text, strlen(text), "m", &w, &m, &err) == 0 && m == n);
    for (size_t i = 0; i < n; i++)
        FUZZ_CHECK(strcmp(v[i].host, w[i].host) == 0);
    free(text);
    free(v);
    free(w);
}

static void approvals(const uint8_t *data, size_t size)
{
    struct opstate_approval *v = NULL, *w = NULL;
    size_t n = 0, m = 0;
    struct fleet_error err = {{0}};
    int r = opstate_approvals_parse((const char *)data, size, "a", &v, &n, &err);
    if (r < 0) {
        FUZZ_CHECK(r == -EINVAL && strncmp(err.msg, "a", 1) == 0);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        FUZZ_CHECK(strcmp(v[i].id, "all") == 0 || opstate_id_valid(v[i].id));
        FUZZ_CHECK(isfinite(v[i].time) && v[i].time >= 0);
    }
    char *text = opstate_approvals_format(v, n);
    FUZZ_CHECK(opstate_approvals_parse(text, strlen(text), "a", &w, &m, &err) == 0 && m == n);
    for (size_t i = 0; i < n; i++)
        FUZZ_CHECK(strcmp(v[i].id, w[i].id) == 0 && v[i].plan == w[i].plan);
    free(text);
    free(v);
    free(w);
}

static void plan(const uint8_t *data, size_t size)
{
    char *text = fuzz_strndup(data, size);
    uint64_t serial;
    (void)opstate_plan_serial(text, &serial);
    /* the IDs the input names, as watt fleet approve would look them up */
    for (const char *p = text; (p = strstr(p, "{\"id\":\"")); p++) {
        char id[OPSTATE_ID_LEN + 1], what[16];
        snprintf(id, sizeof(id), "%s", p + 7);
        memset(what, 'x', sizeof(what));
        if (opstate_plan_pending(text, id, what, sizeof(what)))
            FUZZ_CHECK(memchr(what, '\0', sizeof(what)) != NULL);
    }
    free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    maintenance(data, size);
    approvals(data, size);
    plan(data, size);
    return 0;
}
