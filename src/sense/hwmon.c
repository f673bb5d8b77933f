#include "sense/hwmon.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"

#define HWMON "class/hwmon"

/* ---- pure parser ---- */

static const struct {
    const char *name;
    enum hwmon_field field;
    bool energy; /* also valid for energyK_ */
} hwmon_fields[] = {
    {"input", HWMON_INPUT, true},      {"label", HWMON_LABEL, true},
    {"average", HWMON_AVERAGE, false}, {"average_interval", HWMON_AVERAGE_INTERVAL, false},
    {"cap", HWMON_CAP, false},         {"is_battery", HWMON_IS_BATTERY, false},
};

int hwmon_parse_attr(const char *text, size_t len, struct hwmon_attr *ret)
{
    char buf[64];
    if (!text || memchr(text, '\0', len))
        return -EINVAL;
    if (len >= sizeof(buf))
        return -ENOENT; /* longer than any name we read */
    memcpy(buf, text, len);
    buf[len] = '\0';
    enum hwmon_kind kind;
    const char *p;
    if (strncmp(buf, "power", 5) == 0) {
        kind = HWMON_POWER;
        p = buf + 5;
    } else if (strncmp(buf, "energy", 6) == 0) {
        kind = HWMON_ENERGY;
        p = buf + 6;
    } else {
        return -ENOENT;
    }
    /* sysfs-interface: sensors are numbered from 1 */
    if (*p < '1' || *p > '9')
        return -ENOENT;
    unsigned index = 0;
    for (; isdigit((unsigned char)*p); p++) {
        index = index * 10 + (unsigned)(*p - '0');
        if (index > 9999)
            return -ENOENT;
    }
    if (*p++ != '_')
        return -ENOENT;
    for (size_t i = 0; i < ARRAY_SIZE(hwmon_fields); i++)
        if (streq(p, hwmon_fields[i].name) && (kind == HWMON_POWER || hwmon_fields[i].energy)) {
            *ret =
                (struct hwmon_attr){.kind = kind, .index = index, .field = hwmon_fields[i].field};
            return 0;
        }
    return -ENOENT;
}

/* ---- discovery ---- */

static bool has_sensor_attr(char **names, size_t n)
{
    struct hwmon_attr a;
    for (size_t i = 0; i < n; i++)
        if (hwmon_parse_attr(names[i], strlen(names[i]), &a) == 0)
            return true;
    return false;
}

static bool has_name(char **names, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (streq(names[i], "name"))
            return true;
    return false;
}

/* The directory holding a chip's attributes: hwmonN itself, or hwmonN/device
 * on drivers older than hwmon_device_register_with_info (no name in hwmonN).
 * Lists it into *ret. */
static int chip_dir(struct host *h, const char *chip, char *dir, size_t size, char ***ret,
                    size_t *ret_n)
{
    snprintf(dir, size, HWMON "/%s", chip);
    int r = host_list(h, HOST_SYS, dir, ret, ret_n);
    if (r < 0 || has_name(*ret, *ret_n))
        return r;
    char **names;
    size_t n;
    char dev[160];
    snprintf(dev, sizeof(dev), "%s/device", dir);
    if (host_list(h, HOST_SYS, dev, &names, &n) < 0)
        return 0;
    if (!has_name(names, n)) {
        host_free_list(names, n);
        return 0;
    }
    host_free_list(*ret, *ret_n);
    snprintf(dir, size, "%s", dev);
    *ret = names;
    *ret_n = n;
    return 0;
}

static int hwmon_probe(struct host *h, void **ret_state, char **ret_reason)
{
    char **chips;
    size_t nchips;
    bool found = false;
    if (host_list(h, HOST_SYS, HWMON, &chips, &nchips) < 0) {
        *ret_reason = xstrdup("no hwmon class (kernel without CONFIG_HWMON)");
        return 0;
    }
    for (size_t i = 0; i < nchips && !found; i++) {
        char dir[160], **names;
        size_t n;
        if (chip_dir(h, chips[i], dir, sizeof(dir), &names, &n) < 0)
            continue;
        found = has_sensor_attr(names, n);
        host_free_list(names, n);
    }
    host_free_list(chips, nchips);
    if (found)
        return 1;
    *ret_reason = xstrdup("no hwmon power or energy sensor (no ACPI power meter, "
                          "or its acpi_power_meter module is not loaded)");
    return 0;
}

/* ---- collect ---- */

static struct hwmon_sensor *sensor_for(struct hwmon_sample *hs, size_t *cap, size_t first,
                                       const char *chip, const struct hwmon_attr *a)
{
    for (size_t i = first; i < hs->n; i++)
        if (hs->v[i].kind == a->kind && hs->v[i].index == a->index)
            return &hs->v[i];
    hs->v = grow_array(hs->v, sizeof(*hs->v), hs->n, cap);
    struct hwmon_sensor *x = &hs->v[hs->n++];
    *x = (struct hwmon_sensor){
        .kind = a->kind,
        .index = a->index,
        .input = VAL_NONE,
        .average_uw = VAL_NONE,
        .average_interval_ms = VAL_NONE,
        .cap_uw = VAL_NONE,
        .is_battery = -1,
    };
    snprintf(x->chip, sizeof(x->chip), "%s", chip);
    return x;
}

/* Whether the chip's device is runtime-suspended now
 * (Documentation/power/runtime_pm.rst: power/runtime_status). Reading
 * that file does not resume the device; reading a sensor may: i915 and xe
 * take a runtime-PM reference for every energy or power read, and amdgpu
 * before 6.x resumed the GPU, so an agent sampling every second would keep
 * a discrete GPU from ever suspending. A device without runtime PM, or
 * whose status cannot be read, counts as awake. */
static bool chip_suspended(struct host *h, const char *chip)
{
    char path[192];
    snprintf(path, sizeof(path), HWMON "/%s/device/power/runtime_status", chip);
    _cleanup_free_ char *v = NULL;
    enum host_cache_mode m = host_cache_mode(h, HOST_CACHE_DYNAMIC);
    int r = host_read_str(h, HOST_SYS, path, &v);
    host_cache_mode(h, m);
    return r >= 0 && streq(v, "suspended");
}

static void read_field(struct host *h, struct sample *s, const char *dir, const char *file,
                       const struct hwmon_attr *a, struct hwmon_sensor *x)
{
    char path[224];
    snprintf(path, sizeof(path), "%s/%s", dir, file);
    uint64_t v;
    int r;
    if (a->field == HWMON_LABEL) {
        free(x->label);
        x->label = NULL;
        r = host_read_str(h, HOST_SYS, path, &x->label);
    } else { /* a reading: it moves (the rest of the chip is static) */
        enum host_cache_mode m = host_cache_mode(h, HOST_CACHE_DYNAMIC);
        r = host_read_u64(h, HOST_SYS, path, &v);
        host_cache_mode(h, m);
    }
    if (r < 0) {
        sample_diag_read(s, h, HOST_SYS, path, r);
        return;
    }
    switch (a->field) {
    case HWMON_INPUT:
        x->input = v;
        break;
    case HWMON_AVERAGE:
        x->average_uw = v;
        break;
    case HWMON_AVERAGE_INTERVAL:
        x->average_interval_ms = v;
        break;
    case HWMON_CAP:
        x->cap_uw = v;
        break;
    case HWMON_IS_BATTERY:
        x->is_battery = v != 0;
        break;
    case HWMON_LABEL:
        break;
    }
}

static int sensor_cmp(const void *pa, const void *pb)
{
    const struct hwmon_sensor *a = pa, *b = pb;
    if (a->kind != b->kind)
        return a->kind < b->kind ? -1 : 1;
    return a->index < b->index ? -1 : a->index > b->index;
}

static void collect_chip(struct host *h, struct sample *s, struct hwmon_sample *hs, size_t *cap,
                         const char *chip)
{
    char dir[160], **names;
    size_t n;
    int r = chip_dir(h, chip, dir, sizeof(dir), &names, &n);
    if (r < 0) {
        char path[160];
        snprintf(path, sizeof(path), HWMON "/%s", chip);
        if (r != -ENOENT) /* a dangling link: the device went away */
            sample_diag_read(s, h, HOST_SYS, path, r);
        return;
    }
    size_t first = hs->n;
    bool asleep = chip_suspended(h, chip);
    for (size_t i = 0; i < n; i++) {
        struct hwmon_attr a;
        if (hwmon_parse_attr(names[i], strlen(names[i]), &a) < 0)
            continue;
        struct hwmon_sensor *x = sensor_for(hs, cap, first, chip, &a);
        x->suspended = asleep;
        if (!asleep || a.field == HWMON_LABEL)
            read_field(h, s, dir, names[i], &a, x);
    }
    host_free_list(names, n);
    if (hs->n == first)
        return;
    char path[176];
    snprintf(path, sizeof(path), "%s/name", dir);
    char *name = NULL;
    r = host_read_str(h, HOST_SYS, path, &name);
    if (r < 0)
        sample_diag_read(s, h, HOST_SYS, path, r);
    for (size_t i = first; i < hs->n; i++)
        hs->v[i].name = name ? xstrdup(name) : NULL;
    free(name);
    qsort(hs->v + first, hs->n - first, sizeof(*hs->v), sensor_cmp);
}

static int hwmon_collect(struct host *h, void *state, struct sample *s)
{
    struct hwmon_sample *hs = xcalloc(1, sizeof(*hs));
    s->hwmon = hs;
    char **chips;
    size_t nchips, cap = 0;
    /* chips, their files, names and labels: static under the agent's cache */
    enum host_cache_mode m = host_cache_mode(h, HOST_CACHE_STATIC);
    int r = host_list(h, HOST_SYS, HWMON, &chips, &nchips);
    if (r < 0) {
        sample_diag_read(s, h, HOST_SYS, HWMON, r);
        host_cache_mode(h, m);
        return r;
    }
    for (size_t i = 0; i < nchips; i++)
        collect_chip(h, s, hs, &cap, chips[i]);
    host_free_list(chips, nchips);
    host_cache_mode(h, m);
    return 0;
}

static void hwmon_free_sample(struct sample *s)
{
    struct hwmon_sample *hs = s->hwmon;
    if (!hs)
        return;
    for (unsigned i = 0; i < hs->n; i++) {
        free(hs->v[i].name);
        free(hs->v[i].label);
    }
    free(hs->v);
    free(hs);
    s->hwmon = NULL;
}

/* ---- power ---- */

const struct hwmon_sensor *hwmon_find(const struct hwmon_sample *s, const char *chip,
                                      enum hwmon_kind kind, unsigned index)
{
    if (!s)
        return NULL;
    for (unsigned i = 0; i < s->n; i++)
        if (s->v[i].kind == kind && s->v[i].index == index && streq(s->v[i].chip, chip))
            return &s->v[i];
    return NULL;
}

static bool label_says_system(const char *label)
{
    char l[64];
    size_t i = 0;
    for (; label[i] && i + 1 < sizeof(l); i++)
        l[i] = (char)tolower((unsigned char)label[i]);
    l[i] = '\0';
    if (strstr(l, "system agent")) /* Intel's uncore "SA" rail */
        return false;
    return strstr(l, "system") || strstr(l, "platform") || strstr(l, "chassis");
}

enum power_scope hwmon_scope(const struct hwmon_sensor *s)
{
    if (streq(s->name, "power_meter"))
        return POWER_SCOPE_PLATFORM;
    if (s->label && label_says_system(s->label))
        return POWER_SCOPE_PLATFORM;
    return POWER_SCOPE_DEVICE;
}

static void fill_reading(struct power_reading *p, const struct hwmon_sensor *y)
{
    bool meter = streq(y->name, "power_meter");
    snprintf(p->source, sizeof(p->source), "%s", meter ? "acpi_power_meter" : "hwmon");
    snprintf(p->via, sizeof(p->via), "sysfs");
    snprintf(p->domain, sizeof(p->domain), "%s/%s%u", y->chip,
             y->kind == HWMON_POWER ? "power" : "energy", y->index);
    snprintf(p->label, sizeof(p->label), "%s", y->label ? y->label : y->name ? y->name : "");
    snprintf(p->chip, sizeof(p->chip), "%s", y->name ? y->name : "");
    p->scope = hwmon_scope(y);
}

static void energy_delta(const struct hwmon_sensor *x, const struct hwmon_sensor *y,
                         double interval_s, struct power_reading *p, struct diags *d)
{
    char where[96];
    snprintf(where, sizeof(where), "hwmon %s", p->domain);
    if (!x) {
        diags_add(d, where, 0, "no energy: the sensor is not in the earlier sample");
        return;
    }
    if (x->suspended) {
        diags_add(d, where, 0,
                  "no energy over the interval: its device was runtime-suspended at the start, "
                  "so the counter was not read");
        return;
    }
    if (x->input == VAL_NONE || y->input == VAL_NONE)
        return; /* the failed read is in the sample's diags */
    if (y->input < x->input) {
        diags_add(d, where, 0,
                  "no energy over the interval: the counter went backwards (%llu to %llu µJ)",
                  (unsigned long long)x->input, (unsigned long long)y->input);
        return;
    }
    p->delta_j = (double)(y->input - x->input) / 1e6;
    if (interval_s > 0)
        p->watts = p->delta_j / interval_s;
}

int hwmon_power(const struct hwmon_sample *a, const struct hwmon_sample *b, double interval_s,
                struct power_readings *out, struct diags *d)
{
    const struct hwmon_sample *cur = b ? b : a;
    if (!cur)
        return 0;
    for (unsigned i = 0; i < cur->n; i++) {
        const struct hwmon_sensor *y = &cur->v[i];
        struct power_reading *p = power_readings_add(out);
        fill_reading(p, y);
        if (y->suspended) {
            char where[96];
            snprintf(where, sizeof(where), "hwmon %s", p->domain);
            diags_add(d, where, 0,
                      "not read: its device is runtime-suspended, and reading the sensor "
                      "would wake it");
            continue;
        }
        if (y->kind == HWMON_POWER) {
            uint64_t uw = y->average_uw != VAL_NONE ? y->average_uw : y->input;
            if (uw != VAL_NONE)
                p->watts = (double)uw / 1e6;
            continue;
        }
        if (y->input != VAL_NONE)
            p->joules = (double)y->input / 1e6;
        if (b)
            energy_delta(hwmon_find(a, y->chip, y->kind, y->index), y, interval_s, p, d);
    }
    return (int)cur->n;
}

const struct sampler hwmon_sampler = {
    .name = "hwmon",
    .probe = hwmon_probe,
    .collect = hwmon_collect,
    .free_sample = hwmon_free_sample,
};
