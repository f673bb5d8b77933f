/* Fuzz target: fleet/site.h, site_parse() (fleet.ini of `watt fleet run`).
 *
 * Accepted: 1..SITE_MAX_HOSTS hosts with valid names and a type in range,
 * every host has what its engines need (a URI for libvirt, a BMC with
 * credentials for IPMI), limits in their documented ranges.
 * Refused: -EINVAL and a message that starts with the file's name. */
#include <errno.h>
#include <math.h>

#include "fleet/control/site.h"
#include "fleet/engine/exec.h"
#include "fuzz.h"

#define ORIGIN "fuzz.ini"

static void check_site(const struct site *s)
{
    FUZZ_CHECK(s->n_hosts >= 1 && s->n_hosts <= SITE_MAX_HOSTS);
    FUZZ_CHECK(s->types.n_hosts == s->n_hosts);
    for (size_t i = 0; i < s->n_hosts; i++) {
        const struct site_host *h = &s->hosts[i];
        FUZZ_CHECK(h->name[0] && memchr(h->name, '\0', sizeof(h->name)));
        FUZZ_CHECK(h->type < s->types.n_types);
        FUZZ_CHECK(s->vm_engine != &fx_engine_libvirt || h->uri);
        /* a bmc_password_file is read by site_load(), not by the parser */
        FUZZ_CHECK(s->power_engine != &fx_engine_ipmi ||
                   (h->bmc && h->bmc_user && (h->bmc_password || h->bmc_password_file)));
        FUZZ_CHECK(!h->bmc_password || !h->bmc_password_file);
        FUZZ_CHECK(site_host_find(s, h->name) == (ssize_t)i);
    }
    FUZZ_CHECK(s->vm_engine && !s->vm_engine->power && s->vm_engine->open_vms);
    FUZZ_CHECK(s->power_engine && s->power_engine->power && s->power_engine->open_power);
    const struct site_limits *l = &s->limits;
    FUZZ_CHECK(l->interval_s >= 1 && l->max_concurrent >= 1 && l->per_host >= 1);
    FUZZ_CHECK(isfinite(l->vm_mips) && l->vm_mips > 0);
    FUZZ_CHECK(l->min_hosts_on <= s->n_hosts);
    FUZZ_CHECK(s->state_dir && s->state_dir[0] == '/');
    for (size_t i = 0; i < s->n_vms; i++)
        FUZZ_CHECK(site_vm_find(s, s->vms[i].name) == (ssize_t)i);
    /* constraints: one rule per VM, hosts and groups in range, each group
     * no larger than the fleet */
    for (size_t i = 0; i < s->n_rules; i++) {
        const struct site_rule *r = &s->rules[i];
        FUZZ_CHECK(site_rule_find(s, r->vm) == r);
        FUZZ_CHECK(r->pin >= -1 && r->pin < (int32_t)s->n_hosts);
        FUZZ_CHECK(r->group >= -1 && r->group < (int32_t)s->n_groups);
        FUZZ_CHECK(r->pin >= 0 || r->group >= 0);
        FUZZ_CHECK(!s->vms_listed || site_vm_find(s, r->vm) >= 0);
    }
    for (size_t g = 0; g < s->n_groups; g++)
        FUZZ_CHECK(s->groups[g].n_vms >= 2 && s->groups[g].n_vms <= s->n_hosts);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct site s;
    struct fleet_error err = {{0}};
    int r = site_parse((const char *)data, size, ORIGIN, &s, &err);
    if (r < 0) {
        FUZZ_CHECK(r == -EINVAL);
        FUZZ_CHECK(strncmp(err.msg, ORIGIN, strlen(ORIGIN)) == 0 && err.msg[strlen(ORIGIN)]);
        return 0;
    }
    check_site(&s);
    site_free(&s);
    return 0;
}
