/* What the engines share: names, lists, the "none" power engine and the
 * choice of engines a site's configuration makes. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "fleet/engine/exec.h"

const char *fx_power_name(enum fx_power_state p)
{
    switch (p) {
    case FX_POWER_ON:
        return "on";
    case FX_POWER_OFF:
        return "off";
    case FX_POWER_UNKNOWN:
    default:
        return "unknown";
    }
}

void fx_list_free(struct fx_list *l)
{
    if (!l)
        return;
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i].name);
    free(l->v);
    *l = (struct fx_list){0};
}

const struct fx_domain *fx_list_find(const struct fx_list *l, const char *name)
{
    for (size_t i = 0; i < l->n; i++)
        if (streq(l->v[i].name, name))
            return &l->v[i];
    return NULL;
}

/* ---- no power control: every host is on, for ever ---------------------- */

static int none_status(struct fx_power *x, size_t hi, enum fx_power_state *ret,
                       struct fleet_error *err)
{
    *ret = FX_POWER_ON;
    return 0;
}

static int none_set(struct fx_power *x, size_t hi, bool on, struct fleet_error *err)
{
    fleet_error_set(err, "no power control configured (power = none): cannot switch a host %s",
                    on ? "on" : "off");
    return -EOPNOTSUPP;
}

static int none_reading(struct fx_power *x, size_t hi, double *watts, struct fleet_error *err)
{
    fleet_error_set(err, "no power control configured (power = none): no power reading");
    return -EOPNOTSUPP;
}

static void none_close(struct fx_power *x)
{
    free(x);
}

int fx_none_power_open(const struct site *site, struct fx_power **ret, struct fleet_error *err)
{
    struct fx_power *x = xcalloc(1, sizeof(*x));
    *x = (struct fx_power){.name = "none",
                           .status = none_status,
                           .set = none_set,
                           .reading = none_reading,
                           .close = none_close};
    *ret = x;
    return 0;
}

int fx_open(const struct site *site, struct fx_vms **ret_vms, struct fx_power **ret_power,
            struct fleet_error *err)
{
    struct fx_vms *vms = NULL;
    struct fx_power *pw = NULL;
    int r = site->vm_engine == SITE_VMS_EXEC ? fx_exec_vms_open(site, &vms, err)
                                             : fx_libvirt_open(site, &vms, err);
    if (r < 0)
        return r;
    switch (site->power_engine) {
    case SITE_POWER_IPMI:
        r = fx_ipmi_open(site, &pw, err);
        break;
    case SITE_POWER_EXEC:
        r = fx_exec_power_open(site, &pw, err);
        break;
    case SITE_POWER_NONE:
    default:
        r = fx_none_power_open(site, &pw, err);
        break;
    }
    if (r < 0) {
        vms->close(vms);
        return r;
    }
    *ret_vms = vms;
    *ret_power = pw;
    return 0;
}
