/* Policy names: "npa", "dvfs", "watt" and CloudSim's DETECTOR-SELECTION-PARAM
 * ("thr-mmt-0.8", "iqr-mc-1.5", "lrr-rs-1.2"), case-insensitive. Pure. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "fleet/model/fleet.h"

#define POLICY_HELP                                                                        \
    "want npa, dvfs, watt or DETECTOR-SELECTION[-PARAM] with DETECTOR thr|iqr|mad|lr|lrr " \
    "and SELECTION mmt|mc|mu|rs, e.g. thr-mmt-0.8"

/* The example parameters of CloudSim's power package (PlanetLab runners). */
static const struct {
    const char *name;
    enum fleet_detector det;
    double default_param;
} detectors[] = {
    {"thr", FLEET_THR, 0.8}, {"iqr", FLEET_IQR, 1.5}, {"mad", FLEET_MAD, 2.5},
    {"lr", FLEET_LR, 1.2},   {"lrr", FLEET_LRR, 1.2},
};

static const struct {
    const char *name;
    enum fleet_selection sel;
} selections[] = {
    {"mmt", FLEET_MMT},
    {"mc", FLEET_MC},
    {"mu", FLEET_MU},
    {"rs", FLEET_RS},
};

/* A plain decimal: digits, '.', an exponent; no hex, inf or nan. */
static int parse_param(const char *s, double *ret)
{
    if (!*s || strspn(s, "0123456789.eE+-") != strlen(s) ||
        !(isdigit((unsigned char)*s) || *s == '.'))
        return -EINVAL;
    char *end;
    double v = strtod(s, &end);
    if (*end || !isfinite(v) || v <= 0)
        return -EINVAL;
    *ret = v;
    return 0;
}

static int parse_migrate(char *s, const char *orig, struct fleet_policy *p, struct fleet_error *err)
{
    char *sel = strchr(s, '-');
    if (!sel)
        goto unknown;
    *sel++ = '\0';
    char *param = strchr(sel, '-');
    if (param)
        *param++ = '\0';
    size_t d = 0, k = 0;
    while (d < ARRAY_SIZE(detectors) && !streq(detectors[d].name, s))
        d++;
    while (k < ARRAY_SIZE(selections) && !streq(selections[k].name, sel))
        k++;
    if (d == ARRAY_SIZE(detectors) || k == ARRAY_SIZE(selections))
        goto unknown;
    double v = detectors[d].default_param;
    if (param && (parse_param(param, &v) < 0 || (detectors[d].det == FLEET_THR && v > 1))) {
        fleet_error_set(err, "policy '%s': parameter '%s' must be a number %s", orig, param,
                        detectors[d].det == FLEET_THR ? "in (0, 1] (the utilisation threshold)"
                                                      : "> 0");
        return -EINVAL;
    }
    *p = (struct fleet_policy){
        .alloc = FLEET_MIGRATE,
        .detector = detectors[d].det,
        .selection = selections[k].sel,
        .param = v,
    };
    /* "thr-mmt-1.0" as the literature writes it, "iqr-mmt-1.5", "thr-mmt-0.85" */
    snprintf(p->name, sizeof(p->name), v == floor(v) ? "%s-%s-%.1f" : "%s-%s-%g", detectors[d].name,
             selections[k].name, v);
    return 0;

unknown:
    fleet_error_set(err, "unknown policy '%s' (" POLICY_HELP ")", orig);
    return -EINVAL;
}

int fleet_policy_parse(const char *s, struct fleet_policy *ret, struct fleet_error *err)
{
    char buf[FLEET_NAME_MAX];
    size_t n = s ? strlen(s) : 0;
    if (n == 0 || n >= sizeof(buf)) {
        fleet_error_set(err, "policy name %s (" POLICY_HELP ")", n ? "too long" : "empty");
        return -EINVAL;
    }
    for (size_t i = 0; i <= n; i++)
        buf[i] = (char)tolower((unsigned char)s[i]);

    static const struct {
        const char *name;
        enum fleet_alloc alloc;
    } plain[] = {{"npa", FLEET_NPA}, {"dvfs", FLEET_DVFS}, {"watt", FLEET_WATT}};
    for (size_t i = 0; i < ARRAY_SIZE(plain); i++)
        if (streq(buf, plain[i].name)) {
            *ret = (struct fleet_policy){.alloc = plain[i].alloc};
            snprintf(ret->name, sizeof(ret->name), "%s", plain[i].name);
            return 0;
        }
    struct fleet_policy p;
    int r = parse_migrate(buf, s, &p, err);
    if (r < 0)
        return r;
    *ret = p;
    return 0;
}
