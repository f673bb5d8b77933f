/* What the engines share: names, lists, the "none" power engine, and the
 * table of engines from which a site's configuration chooses. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/text.h"
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

/* ---- names from outside ------------------------------------------------- */

/* The length of the character at P (N bytes left) that may stand in a
 * name, and *CP; 0: not UTF-8, or a control character. */
static size_t name_char(const char *p, size_t n, unsigned *cp)
{
    size_t k = text_utf8_decode((const unsigned char *)p, n, cp);
    if (k == 0 || *cp < 0x20 || *cp == 0x7f || (*cp >= 0x80 && *cp <= 0x9f))
        return 0;
    return k;
}

void fx_name_escape(const char *name, char *out, size_t size)
{
    size_t n = strlen(name), o = 0;
    if (size == 0)
        return;
    for (size_t i = 0; i < n;) {
        unsigned cp;
        size_t k = name_char(name + i, n - i, &cp);
        char esc[8];
        const char *piece = name + i;
        size_t len = k;
        if (k == 0 || name[i] == '\\') {
            snprintf(esc, sizeof(esc), name[i] == '\\' ? "\\\\" : "\\x%02x",
                     (unsigned char)name[i]);
            piece = esc;
            len = strlen(esc);
            k = 1;
        }
        if (o + len + 4 > size) { /* room for "..." and the NUL */
            snprintf(out + o, size - o, "...");
            return;
        }
        memcpy(out + o, piece, len);
        o += len;
        i += k;
    }
    out[o] = '\0';
}

int fx_vm_name_check(const char *name, char *why, size_t size)
{
    char shown[200];
    size_t n = strlen(name);
    fx_name_escape(name, shown, sizeof(shown));
    if (n == 0) {
        snprintf(why, size, "an empty VM name");
        return -EINVAL;
    }
    if (n >= FX_VM_NAME_MAX) {
        snprintf(why, size, "VM name '%s' is longer than %d bytes", shown, FX_VM_NAME_MAX - 1);
        return -EINVAL;
    }
    for (size_t i = 0; i < n;) {
        unsigned cp;
        size_t k = name_char(name + i, n - i, &cp);
        if (k == 0 && text_utf8_decode((const unsigned char *)name + i, n - i, &cp) == 0) {
            snprintf(why, size, "VM name '%s' is not UTF-8 (byte \\x%02x)", shown,
                     (unsigned char)name[i]);
            return -EINVAL;
        }
        if (k == 0) {
            snprintf(why, size, "VM name '%s' holds a control character (U+%04X)", shown, cp);
            return -EINVAL;
        }
        if (name[i] == '/') {
            snprintf(why, size, "VM name '%s' holds '/' (libvirt refuses it)", shown);
            return -EINVAL;
        }
        i += k;
    }
    return 0;
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

const struct fx_engine fx_engine_none = {
    .name = "none",
    .power = true,
    .open_power = fx_none_power_open,
};

/* ---- the table ------------------------------------------------------------ */

/* A new engine: its file (a struct fx_engine like fx_engine_ipmi), its
 * extern line in exec.h, and a row here. The first VM and the first power
 * engine are fleet.ini's defaults. */
const struct fx_engine *const fx_engines[] = {
    &fx_engine_libvirt,    &fx_engine_exec_vms, &fx_engine_ipmi,
    &fx_engine_exec_power, &fx_engine_none,     NULL,
};

const struct fx_engine *fx_engine_find(const char *name, bool power)
{
    for (size_t i = 0; fx_engines[i]; i++)
        if (fx_engines[i]->power == power && strcasecmp(fx_engines[i]->name, name) == 0)
            return fx_engines[i];
    return NULL;
}

const void *fx_engine_conf(const struct site *s, const struct fx_engine *e)
{
    for (size_t i = 0; s->engine_conf && fx_engines[i]; i++)
        if (fx_engines[i] == e)
            return s->engine_conf[i];
    return NULL;
}

const struct fx_engine *fx_engine_default(bool power)
{
    for (size_t i = 0; fx_engines[i]; i++)
        if (fx_engines[i]->power == power)
            return fx_engines[i];
    return NULL;
}

/* The site's engine of that kind, or the default one. */
static const struct fx_engine *chosen(const struct fx_engine *e, bool power)
{
    return e ? e : fx_engine_default(power);
}

int fx_open(const struct site *site, struct fx_vms **ret_vms, struct fx_power **ret_power,
            struct fleet_error *err)
{
    struct fx_vms *vms = NULL;
    struct fx_power *pw = NULL;
    int r = chosen(site->vm_engine, false)->open_vms(site, &vms, err);
    if (r < 0)
        return r;
    r = chosen(site->power_engine, true)->open_power(site, &pw, err);
    if (r < 0) {
        vms->close(vms);
        return r;
    }
    *ret_vms = vms;
    *ret_power = pw;
    return 0;
}
