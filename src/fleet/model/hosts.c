/* Host types and host specs: the built-in HP ProLiant ML110 G4 and G5 of
 * CloudSim's PlanetLab experiments, and the parser of --hosts specs
 * ("cloudsim", "400xg4,400xg5[,alternate]" or an INI text). Pure. */
#include <ctype.h>
#include <errno.h>
#include <ini.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/parse.h"
#include "base/util.h"
#include "fleet/model/fleet.h"
#include "fleet/model/ini_lines.h"

#define MAX_HOSTS 10000000u
#define MAX_TYPES 65535u

/* CloudSim's PowerModelSpecPowerHpProLiantMl110G4Xeon3040 and ...G5Xeon3075
 * (SPECpower_ssj2008 results), with CloudSim's host sizes. The realistic-mode
 * extras are typical values, not CloudSim's (it models no boot and no off
 * state): 5 W for the BMC of a switched-off server, 300 s from power-on to
 * running VMs, and a boot draws about idle power for its duration, so
 * boot_j = boot_s x power_w[0]. */
static const struct fleet_host_type builtins[] = {
    {
        .name = "g4",
        .cores = 2,
        .mips_per_core = 1860,
        .ram_mb = 4096,
        .bw_mbit = 1000,
        .power_w = {86, 89.4, 92.6, 96, 99.5, 102, 106, 108, 112, 114, 117},
        .off_w = 5,
        .boot_s = 300,
        .boot_j = 300 * 86.0,
    },
    {
        .name = "g5",
        .cores = 2,
        .mips_per_core = 2660,
        .ram_mb = 4096,
        .bw_mbit = 1000,
        .power_w = {93.7, 97, 101, 105, 110, 116, 121, 125, 129, 133, 135},
        .off_w = 5,
        .boot_s = 300,
        .boot_j = 300 * 93.7,
    },
};

const struct fleet_host_type *fleet_host_type_builtin(const char *name)
{
    for (size_t i = 0; i < ARRAY_SIZE(builtins); i++)
        if (name && strcasecmp(builtins[i].name, name) == 0)
            return &builtins[i];
    return NULL;
}

void fleet_hosts_free(struct fleet_hosts *h)
{
    if (!h)
        return;
    free(h->types);
    free(h->type_of);
    *h = (struct fleet_hosts){0};
}

/* ---- the host list: "400 x g4, 400 x g5" -------------------------------- */

struct group {
    size_t type;
    size_t count;
};

/* Types being built: the INI's [type] sections, then builtins as used. */
struct types {
    struct fleet_host_type *v;
    size_t n, cap;
};

bool fleet_type_name_ok(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > FLEET_TYPE_NAME_MAX)
        return false;
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && !strchr("_-.", *s))
            return false;
    return true;
}

static ssize_t types_find(const struct types *ts, const char *name)
{
    for (size_t i = 0; i < ts->n; i++)
        if (strcasecmp(ts->v[i].name, name) == 0)
            return (ssize_t)i;
    return -1;
}

static struct fleet_host_type *types_add(struct types *ts)
{
    ts->v = grow_array(ts->v, sizeof(*ts->v), ts->n, &ts->cap);
    ts->v[ts->n] = (struct fleet_host_type){0};
    return &ts->v[ts->n++];
}

/* A type by name: defined in the INI, or a builtin added on first use. */
static ssize_t type_lookup(struct types *ts, const char *name)
{
    ssize_t i = types_find(ts, name);
    if (i >= 0)
        return i;
    const struct fleet_host_type *b = fleet_host_type_builtin(name);
    if (!b || ts->n >= MAX_TYPES)
        return -1;
    *types_add(ts) = *b;
    return (ssize_t)ts->n - 1;
}

/* One item "COUNT x NAME" (spaces optional, x or X). */
static int parse_group(char *item, struct types *ts, struct group *ret, char *msg, size_t msg_size)
{
    const char *s = str_trim(item);
    char *end;
    if (!isdigit((unsigned char)*s)) {
        snprintf(msg, msg_size, "'%s': want COUNT x TYPE (e.g. 400xg4)", s);
        return -EINVAL;
    }
    errno = 0;
    unsigned long long count = strtoull(s, &end, 10);
    const char *p = end;
    while (isspace((unsigned char)*p))
        p++;
    if (*p != 'x' && *p != 'X') {
        snprintf(msg, msg_size, "'%s': want COUNT x TYPE (e.g. 400xg4)", s);
        return -EINVAL;
    }
    p++;
    while (isspace((unsigned char)*p))
        p++;
    if (errno == ERANGE || count == 0 || count > MAX_HOSTS) {
        snprintf(msg, msg_size, "'%s': the count must be 1..%u", s, MAX_HOSTS);
        return -EINVAL;
    }
    ssize_t t = type_lookup(ts, p);
    if (t < 0) {
        snprintf(msg, msg_size, "'%s': unknown host type '%s' (built-in: g4, g5)", s, p);
        return -EINVAL;
    }
    *ret = (struct group){.type = (size_t)t, .count = count};
    return 0;
}

/* Hosts in blocks (in the order given) or round-robin over the groups,
 * like CloudSim's "host i has type i % 2". */
static int build_hosts(const struct group *g, size_t n_groups, bool alternate, uint16_t **ret,
                       size_t *ret_n, char *msg, size_t msg_size)
{
    size_t total = 0;
    for (size_t i = 0; i < n_groups; i++) {
        total += g[i].count;
        if (total > MAX_HOSTS) {
            snprintf(msg, msg_size, "more than %u hosts", MAX_HOSTS);
            return -EINVAL;
        }
    }
    if (total == 0) {
        snprintf(msg, msg_size, "no hosts");
        return -EINVAL;
    }
    uint16_t *type_of = xmalloc(total * sizeof(*type_of));
    size_t k = 0;
    if (!alternate) {
        for (size_t i = 0; i < n_groups; i++)
            for (size_t j = 0; j < g[i].count; j++)
                type_of[k++] = (uint16_t)g[i].type;
    } else {
        for (size_t round = 0; k < total; round++)
            for (size_t i = 0; i < n_groups; i++)
                if (round < g[i].count)
                    type_of[k++] = (uint16_t)g[i].type;
    }
    *ret = type_of;
    *ret_n = total;
    return 0;
}

/* "400xg4, 400xg5[, alternate|block]": groups into *ret. */
static int parse_list(char *list, struct types *ts, bool *alternate, uint16_t **ret, size_t *ret_n,
                      char *msg, size_t msg_size)
{
    _cleanup_free_ struct group *g = NULL;
    size_t n = 0, cap = 0;
    char *save = NULL;
    for (char *item = strtok_r(list, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        const char *word = str_trim(item);
        if (strcasecmp(word, "alternate") == 0 || strcasecmp(word, "block") == 0) {
            *alternate = strcasecmp(word, "alternate") == 0;
            continue;
        }
        g = grow_array(g, sizeof(*g), n, &cap);
        int r = parse_group(item, ts, &g[n], msg, msg_size);
        if (r < 0)
            return r;
        n++;
    }
    return build_hosts(g, n, *alternate, ret, ret_n, msg, msg_size);
}

/* ---- INI ---------------------------------------------------------------- */

enum {
    SET_CORES = 1 << 0,
    SET_MIPS = 1 << 1,
    SET_RAM = 1 << 2,
    SET_BW = 1 << 3,
    SET_POWER = 1 << 4,
    SET_OFF = 1 << 5,
    SET_BOOT_S = 1 << 6,
    SET_BOOT_J = 1 << 7,
};

struct ini_ctx {
    struct fleet_type_spec *types;
    size_t n_types, cap_types;
    ssize_t cur;                  /* the section read: a [type] index, or -1 [fleet], -2 none yet */
    struct fleet_ini_lines lines; /* the reader in front of inih */
    char *hosts;
    int hosts_line;
    bool alternate;
    bool has_fleet;
    int line; /* of the error, 0: none */
    char msg[400];
};

static bool section_type_name(const char *section, char *name, size_t size)
{
    if (strncasecmp(section, "type", 4) != 0 || !isspace((unsigned char)section[4]))
        return false;
    snprintf(name, size, "%s", section + 5);
    char *p = name;
    while (isspace((unsigned char)*p))
        memmove(p, p + 1, strlen(p));
    return true;
}

static int by_name(const void *a, const void *b)
{
    const struct fleet_type_spec *x = a, *y = b;
    int r = strcasecmp(x->t.name, y->t.name);
    return r ? r : (x->line > y->line) - (x->line < y->line);
}

/* A "[...]" line, from the reader (ini_lines.h: inih has no callback
 * for a section without keys, nor tells a second [type a] from the first). */
static int on_header(void *user, char *s)
{
    struct ini_ctx *c = user;
    c->line = c->lines.line; /* kept only when this fails */
    char *close = strchr(s, ']');
    if (!close) {
        snprintf(c->msg, sizeof(c->msg), "section header without ']'");
        return -EINVAL;
    }
    *close = '\0';
    char name[256];
    if (strcasecmp(s + 1, "fleet") == 0) {
        if (c->has_fleet) {
            snprintf(c->msg, sizeof(c->msg), "a second [fleet] section");
            return -EINVAL;
        }
        c->has_fleet = true;
        c->cur = -1;
    } else if (section_type_name(s + 1, name, sizeof(name))) {
        if (!fleet_type_name_ok(name)) {
            snprintf(c->msg, sizeof(c->msg),
                     "type name '%.60s' must be 1..%d letters, digits, '_', '-' or '.'", name,
                     FLEET_TYPE_NAME_MAX);
            return -EINVAL;
        }
        if (c->n_types >= MAX_TYPES) {
            snprintf(c->msg, sizeof(c->msg), "more than %u host types", MAX_TYPES);
            return -EINVAL;
        }
        c->types = grow_array(c->types, sizeof(*c->types), c->n_types, &c->cap_types);
        struct fleet_type_spec *it = &c->types[c->n_types];
        *it = (struct fleet_type_spec){.line = c->lines.line};
        memcpy(it->t.name, name, strlen(name) + 1); /* fleet_type_name_ok(): short */
        c->cur = (ssize_t)c->n_types++;
    } else {
        snprintf(c->msg, sizeof(c->msg), "unknown section [%.60s] (want [type NAME] or [fleet])",
                 s + 1);
        return -EINVAL;
    }
    c->line = 0;
    return 0;
}

static int check_duplicates(struct ini_ctx *c)
{
    if (c->n_types < 2)
        return 0;
    _cleanup_free_ struct fleet_type_spec *sorted = xmalloc(c->n_types * sizeof(*sorted));
    memcpy(sorted, c->types, c->n_types * sizeof(*sorted));
    qsort(sorted, c->n_types, sizeof(*sorted), by_name);
    for (size_t i = 1; i < c->n_types; i++)
        if (strcasecmp(sorted[i].t.name, sorted[i - 1].t.name) == 0) {
            snprintf(c->msg, sizeof(c->msg), "type '%s' is already defined on line %d",
                     sorted[i].t.name, sorted[i - 1].line);
            c->line = sorted[i].line;
            return -EINVAL;
        }
    return 0;
}

static int set_number(const char *key, const char *val, double lo, double hi, bool integer,
                      double *ret, char *why, size_t size)
{
    double v;
    if (parse_double(val, &v) < 0 || !(v >= lo && v <= hi) || (integer && v != floor(v))) {
        snprintf(why, size, "%s = '%.40s': want %s %g..%g", key, val,
                 integer ? "an integer" : "a number", lo, hi);
        return -EINVAL;
    }
    *ret = v;
    return 0;
}

static int set_power(const char *val, double *ret, char *why, size_t size)
{
    char buf[512];
    snprintf(buf, sizeof(buf), "%s", val);
    double w[FLEET_POWER_POINTS];
    size_t n = 0;
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (n == FLEET_POWER_POINTS || parse_double(tok, &w[n]) < 0 || w[n] < 0 || w[n] > 1e6) {
            snprintf(why, size,
                     "power_w: want %d comma-separated watts 0..1e6 (at 0, 10, ..., 100 %% load)",
                     FLEET_POWER_POINTS);
            return -EINVAL;
        }
        if (n > 0 && w[n] < w[n - 1]) {
            snprintf(why, size, "power_w: %g W at %zu %% is less than %g W at %zu %%", w[n], n * 10,
                     w[n - 1], (n - 1) * 10);
            return -EINVAL;
        }
        n++;
    }
    if (n != FLEET_POWER_POINTS) {
        snprintf(why, size, "power_w: %zu values, want %d (at 0, 10, ..., 100 %% load)", n,
                 FLEET_POWER_POINTS);
        return -EINVAL;
    }
    memcpy(ret, w, sizeof(w));
    return 0;
}

int fleet_type_spec_key(struct fleet_type_spec *it, const char *key, const char *val, char *why,
                        size_t size)
{
    struct fleet_host_type *t = &it->t;
    double v = 0;
    if (streq(key, "base")) {
        it->base = fleet_host_type_builtin(val);
        if (!it->base) {
            snprintf(why, size, "base = '%.40s': unknown built-in type (want g4 or g5)", val);
            return -EINVAL;
        }
        return 0;
    }
    if (streq(key, "power_w")) {
        it->set |= SET_POWER;
        return set_power(val, t->power_w, why, size);
    }
    static const struct {
        const char *key;
        unsigned bit;
        double lo, hi;
        bool integer;
    } nums[] = {
        {"cores", SET_CORES, 1, 1000000, true},     {"mips_per_core", SET_MIPS, 1e-3, 1e9, false},
        {"ram_mb", SET_RAM, 1, 4294967295.0, true}, {"bw_mbit", SET_BW, 1e-3, 1e9, false},
        {"off_w", SET_OFF, 0, 1e6, false},          {"boot_s", SET_BOOT_S, 0, 1e6, false},
        {"boot_j", SET_BOOT_J, 0, 1e12, false},
    };
    for (size_t i = 0; i < ARRAY_SIZE(nums); i++) {
        if (!streq(key, nums[i].key))
            continue;
        int r = set_number(key, val, nums[i].lo, nums[i].hi, nums[i].integer, &v, why, size);
        it->set |= nums[i].bit;
        if (nums[i].bit == SET_CORES)
            t->cores = (unsigned)v;
        else if (nums[i].bit == SET_RAM)
            t->ram_mb = (unsigned)v;
        else if (nums[i].bit == SET_MIPS)
            t->mips_per_core = v;
        else if (nums[i].bit == SET_BW)
            t->bw_mbit = v;
        else if (nums[i].bit == SET_OFF)
            t->off_w = v;
        else if (nums[i].bit == SET_BOOT_S)
            t->boot_s = v;
        else
            t->boot_j = v;
        return r;
    }
    snprintf(why, size,
             "unknown key '%.40s' in [type %s] (want base, cores, mips_per_core, ram_mb, bw_mbit, "
             "power_w, off_w, boot_s, boot_j)",
             key, t->name);
    return -EINVAL;
}

static int on_fleet_key(struct ini_ctx *c, const char *key, const char *val)
{
    if (streq(key, "hosts")) {
        free(c->hosts);
        c->hosts = xstrdup(val);
        return 1;
    }
    if (streq(key, "order")) {
        if (strcasecmp(val, "alternate") != 0 && strcasecmp(val, "block") != 0) {
            snprintf(c->msg, sizeof(c->msg), "order = '%.40s': want alternate or block", val);
            return 0;
        }
        c->alternate = strcasecmp(val, "alternate") == 0;
        return 1;
    }
    snprintf(c->msg, sizeof(c->msg), "unknown key '%.40s' in [fleet] (want hosts, order)", key);
    return 0;
}

static int on_key(struct ini_ctx *c, const char *key, const char *val)
{
    if (c->cur == -1)
        return on_fleet_key(c, key, val);
    if (c->cur >= 0)
        return fleet_type_spec_key(&c->types[c->cur], key, val, c->msg, sizeof(c->msg)) == 0;
    snprintf(c->msg, sizeof(c->msg), "'%.40s' outside [type NAME] or [fleet]", key);
    return 0;
}

/* inih's handler: its section is ignored (the reader keeps ours). */
static int on_entry(void *user, const char *section, const char *key, const char *val)
{
    struct ini_ctx *c = user;
    (void)section;
    if (c->msg[0])
        return 0;
    _cleanup_free_ char *long_value = fleet_ini_take_long(&c->lines);
    if (on_key(c, key, long_value ? long_value : val))
        return 1;
    c->line = c->lines.line;
    c->lines.failed = true; /* the first error is the one to report */
    return 0;
}

/* Base, then explicit keys; the derived defaults; the required keys. */
int fleet_type_spec_finish(const struct fleet_type_spec *it, struct fleet_host_type *ret, char *why,
                           size_t size)
{
    struct fleet_host_type t =
        it->base ? *it->base : (struct fleet_host_type){.bw_mbit = 1000, .off_w = 5, .boot_s = 300};
    snprintf(t.name, sizeof(t.name), "%s", it->t.name);
    unsigned need = SET_CORES | SET_MIPS | SET_RAM | SET_POWER;
    if (!it->base && (it->set & need) != need) {
        snprintf(why, size,
                 "[type %s] needs cores, mips_per_core, ram_mb and power_w (or base = g4|g5)",
                 t.name);
        return -EINVAL;
    }
#define TAKE(bit, field) \
    if (it->set & (bit)) \
        t.field = it->t.field;
    TAKE(SET_CORES, cores)
    TAKE(SET_MIPS, mips_per_core)
    TAKE(SET_RAM, ram_mb)
    TAKE(SET_BW, bw_mbit)
    TAKE(SET_OFF, off_w)
    TAKE(SET_BOOT_S, boot_s)
#undef TAKE
    if (it->set & SET_POWER)
        memcpy(t.power_w, it->t.power_w, sizeof(t.power_w));
    /* a boot draws about idle power for its duration */
    t.boot_j = (it->set & SET_BOOT_J) ? it->t.boot_j : t.boot_s * t.power_w[0];
    *ret = t;
    return 0;
}

static int ini_build(struct ini_ctx *c, struct fleet_hosts *ret)
{
    struct types ts = {0};
    uint16_t *type_of = NULL;
    size_t n_hosts = 0;
    int r = 0;
    for (size_t i = 0; i < c->n_types && r == 0; i++) {
        r = fleet_type_spec_finish(&c->types[i], types_add(&ts), c->msg, sizeof(c->msg));
        if (r < 0)
            c->line = c->types[i].line;
    }
    if (r == 0 && !c->hosts) {
        snprintf(c->msg, sizeof(c->msg), "no hosts = COUNT x TYPE, ... in a [fleet] section");
        r = -EINVAL;
    }
    if (r == 0) {
        char msg[sizeof(c->msg) - 20];
        r = parse_list(c->hosts, &ts, &c->alternate, &type_of, &n_hosts, msg, sizeof(msg));
        if (r < 0)
            snprintf(c->msg, sizeof(c->msg), "[fleet] hosts: %s", msg);
    }
    if (r < 0) {
        free(ts.v);
        return r;
    }
    *ret = (struct fleet_hosts){
        .types = ts.v, .n_types = ts.n, .type_of = type_of, .n_hosts = n_hosts};
    return 0;
}

static int parse_ini(const char *text, const char *origin, struct fleet_hosts *ret,
                     struct fleet_error *err)
{
    struct ini_ctx c = {.cur = -2};
    c.lines = (struct fleet_ini_lines){.pos = text, .on_section = on_header, .user = &c};
    int line = ini_parse_stream(fleet_ini_read, &c.lines, on_entry, &c);
    fleet_ini_lines_free(&c.lines);
    int r = 0;
    if (c.lines.why[0]) {
        c.line = c.lines.line;
        snprintf(c.msg, sizeof(c.msg), "%s", c.lines.why);
    }
    /* inih's own errors are lines that are no key = value; it goes on
     * after one, so a handler may have failed on a later line */
    if (line > 0 && (!c.msg[0] || line < c.line)) {
        c.line = line;
        snprintf(c.msg, sizeof(c.msg), "want key = value or [section]");
    }
    if (line < 0 && !c.msg[0])
        snprintf(c.msg, sizeof(c.msg), "out of memory");
    if (c.msg[0])
        r = -EINVAL;
    if (r == 0)
        r = check_duplicates(&c);
    if (r == 0)
        r = ini_build(&c, ret);
    if (r < 0 && c.line > 0)
        fleet_error_set(err, "%s line %d: %s", origin, c.line, c.msg);
    else if (r < 0)
        fleet_error_set(err, "%s: %s", origin, c.msg);
    free(c.types);
    free(c.hosts);
    return r;
}

int fleet_hosts_parse(const char *text, size_t len, const char *origin, struct fleet_hosts *ret,
                      struct fleet_error *err)
{
    if (!origin)
        origin = "hosts";
    if (memchr(text, '\0', len)) {
        fleet_error_set(err, "%s: contains a NUL byte", origin);
        return -EINVAL;
    }
    _cleanup_free_ char *s = xmalloc(len + 1);
    memcpy(s, text, len);
    s[len] = '\0';
    /* "400xg4\n" from a file is still a list */
    size_t n = len;
    while (n > 0 && isspace((unsigned char)s[n - 1]))
        n--;
    if (memchr(s, '[', n) || memchr(s, '=', n) || memchr(s, '\n', n))
        return parse_ini(s, origin, ret, err);

    struct types ts = {0};
    bool alternate = false;
    uint16_t *type_of = NULL;
    size_t n_hosts = 0;
    char msg[400];
    int r;
    if (strcasecmp(str_trim(s), "cloudsim") == 0) {
        char list[] = "400xg4,400xg5";
        alternate = true;
        r = parse_list(list, &ts, &alternate, &type_of, &n_hosts, msg, sizeof(msg));
    } else {
        r = parse_list(s, &ts, &alternate, &type_of, &n_hosts, msg, sizeof(msg));
    }
    if (r < 0) {
        free(ts.v);
        fleet_error_set(err, "%s: %s", origin, msg);
        return r;
    }
    *ret = (struct fleet_hosts){
        .types = ts.v, .n_types = ts.n, .type_of = type_of, .n_hosts = n_hosts};
    return 0;
}
