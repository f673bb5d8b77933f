/* fleet.ini: the real fleet the controller drives (see site.h).
 *
 * One inih pass over the file (docs/config.md has the grammar), with a
 * handler per section: [controller], [type NAME] (the simulator's keys,
 * fleet_type_spec_key()), [host NAME], [pin] and [anti-affinity]
 * (site_rules.c), and the engines' own sections and keys (fx_engines[]
 * says which). The line reader in front of inih (fleet/model/ini_lines.h)
 * numbers every line (inih numbers nothing for its handler), hands us the
 * section headers (inih r55 has no callback for a section without keys
 * and keeps 50 bytes of a name), and passes a line longer than inih's
 * buffer (a long vms = list) whole. Indentation is not significant: an
 * indented line is a line of its own, not the continuation inih makes of
 * it. */
#include <ctype.h>
#include <errno.h>
#include <ini.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/parse.h"
#include "base/strbuf.h"
#include "base/util.h"
#include "fleet/control/site.h"
#include "fleet/control/site_rules.h"
#include "fleet/engine/exec.h"
#include "fleet/model/ini_lines.h"

enum sect { S_NONE, S_CONTROLLER, S_TYPE, S_HOST, S_ENGINE, S_PIN, S_AFFINITY };

#define MAX_ENGINE_SECTIONS 16

struct ctx {
    struct site *s;
    enum sect sect;
    struct site_host *host; /* current [host NAME] */
    int line;               /* the line read, then the line of the error */
    char msg[400];
    bool failed;                  /* msg holds the first error: read no more */
    struct fleet_ini_lines lines; /* the reader in front of inih */
    bool seen_controller;
    const char *engine_section;                     /* current [NAME] of an engine */
    const char *seen_sections[MAX_ENGINE_SECTIONS]; /* the engines' sections found so far */
    size_t n_seen_sections;
    int vms_line;
    char (*host_type)[FLEET_NAME_MAX]; /* per host: its type = NAME */
    int *host_type_line;
    struct fleet_type_spec *types; /* the [type NAME] sections */
    size_t n_types, cap_types;
    struct site_rules_pending *rules; /* [pin], [anti-affinity] (site_rules.c) */
};

static bool valid_name(const char *s, size_t max)
{
    size_t n = strlen(s);
    if (n == 0 || n >= max)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)s[i]) && !strchr("_-.", s[i]))
            return false;
    return true;
}

#define FAIL(c, ...)                                       \
    ({                                                     \
        snprintf((c)->msg, sizeof((c)->msg), __VA_ARGS__); \
        (c)->failed = true;                                \
        -EINVAL;                                           \
    })

static int set_num(struct ctx *c, const char *key, const char *val, double lo, double hi,
                   bool integer, double *ret)
{
    double v;
    if (parse_double(val, &v) < 0 || !(v >= lo && v <= hi) || (integer && v != floor(v)))
        return FAIL(c, "%s = '%.60s': want %s %g..%g", key, val,
                    integer ? "an integer" : "a number", lo, hi);
    *ret = v;
    return 0;
}

static int set_str(char **dst, const char *val)
{
    free(*dst);
    *dst = xstrdup(val);
    return 0;
}

/* ---- the engines' keys ------------------------------------------------- */

static size_t n_engines(void)
{
    size_t n = 0;
    while (fx_engines[n])
        n++;
    return n;
}

static bool engine_reads(const struct fx_engine *e, enum fx_where where, const char *section,
                         const char *key)
{
    if (where == FX_IN_SECTION && (!e->section || strcasecmp(e->section, section) != 0))
        return false;
    for (const struct fx_key *k = e->keys; k && k->name; k++)
        if (k->where == where && (!key || streq(k->name, key)))
            return true;
    return false;
}

/* Hand KEY = VAL to every engine that reads it WHERE (in SECTION, for
 * FX_IN_SECTION). 1: one took it; 0: none reads it; -EINVAL: WHY. */
static int engines_take(struct site *s, enum fx_where where, const char *section, size_t hi,
                        const char *key, const char *val, char *why, size_t size)
{
    int took = 0;
    for (size_t i = 0; fx_engines[i]; i++) {
        const struct fx_engine *e = fx_engines[i];
        if (!engine_reads(e, where, section, key))
            continue;
        if (!s->engine_conf)
            s->engine_conf = xcalloc(n_engines(), sizeof(*s->engine_conf));
        int r = e->parse(&s->engine_conf[i], where, hi, key, val, why, size);
        if (r < 0)
            return r;
        took = 1;
    }
    return took;
}

/* ", migrate_uri, bmc_cipher": the engines' keys WHERE, each once, after
 * what OUT holds. */
static void engine_keys(enum fx_where where, const char *section, char *out, size_t size)
{
    for (size_t i = 0; fx_engines[i]; i++)
        for (const struct fx_key *k = fx_engines[i]->keys; k && k->name; k++) {
            if (!engine_reads(fx_engines[i], where, section, k->name))
                continue;
            bool dup = false;
            for (size_t j = 0; j < i && !dup; j++)
                dup = engine_reads(fx_engines[j], where, section, k->name);
            for (const struct fx_key *o = fx_engines[i]->keys; o < k && !dup; o++)
                dup = o->where == where && streq(o->name, k->name);
            size_t n = strlen(out);
            if (!dup)
                snprintf(out + n, size - n, "%s%s", n ? ", " : "", k->name);
        }
}

/* An engine's key, or the error for a key nobody reads (WANT: the keys
 * of the section that are not the engines', after "want "). */
static int on_engine_key(struct ctx *c, enum fx_where where, const char *key, const char *val,
                         const char *where_name, const char *want)
{
    size_t hi = c->host ? (size_t)(c->host - c->s->hosts) : 0;
    int r = engines_take(c->s, where, c->engine_section, hi, key, val, c->msg, sizeof(c->msg));
    if (r != 0)
        return r < 0 ? r : 0;
    char keys[300];
    snprintf(keys, sizeof(keys), "%s", want);
    engine_keys(where, c->engine_section, keys, sizeof(keys));
    return FAIL(c, "unknown key '%.40s' in %s (want %s%s)", key, where_name, keys,
                where == FX_IN_CONTROLLER ? ", ...: docs/fleet-run.md has them all" : "");
}

int site_engine_key(struct site *s, const char *section, size_t hi, const char *key,
                    const char *val, struct fleet_error *err)
{
    enum fx_where where = streq(section, "host")         ? FX_IN_HOST
                          : streq(section, "controller") ? FX_IN_CONTROLLER
                                                         : FX_IN_SECTION;
    char why[400] = "";
    int r = engines_take(s, where, section, hi, key, val, why, sizeof(why));
    if (r == 0)
        fleet_error_set(err, "no engine reads %s in [%s]", key, section);
    else if (r < 0)
        fleet_error_set(err, "%s", why);
    return r > 0 ? 0 : -EINVAL;
}

void site_engines_free(struct site *s)
{
    for (size_t i = 0; s->engine_conf && fx_engines[i]; i++)
        if (s->engine_conf[i] && fx_engines[i]->free_conf)
            fx_engines[i]->free_conf(s->engine_conf[i]);
    free(s->engine_conf);
    s->engine_conf = NULL;
}

/* vm_engine = NAME, power = NAME: a row of fx_engines[] of that kind. */
static int pick_engine(struct ctx *c, const char *key, const char *val, bool power,
                       const struct fx_engine **ret)
{
    const struct fx_engine *e = fx_engine_find(val, power);
    if (e) {
        *ret = e;
        return 0;
    }
    char want[160] = "";
    for (size_t i = 0; fx_engines[i]; i++)
        if (fx_engines[i]->power == power)
            snprintf(want + strlen(want), sizeof(want) - strlen(want), "%s%s", want[0] ? "|" : "",
                     fx_engines[i]->name);
    return FAIL(c, "%s = '%.40s': want %s", key, val, want);
}

static int on_vms(struct ctx *c, const char *val)
{
    struct site *s = c->s;
    _cleanup_free_ char *copy = xstrdup(val);
    char *save = NULL;
    c->vms_line = c->line;
    for (char *tok = strtok_r(copy, ", \t", &save); tok; tok = strtok_r(NULL, ", \t", &save)) {
        if (strlen(tok) >= sizeof(s->vms[0].name))
            return FAIL(c, "vms: name '%.40s...' is too long", tok);
        char why[300];
        if (fx_vm_name_check(tok, why, sizeof(why)) < 0)
            return FAIL(c, "vms: %s", why);
        if (s->n_vms >= SITE_MAX_VMS)
            return FAIL(c, "vms: more than %d VMs", SITE_MAX_VMS);
        s->vms = xrealloc(s->vms, (s->n_vms + 1) * sizeof(*s->vms));
        struct site_vm *v = &s->vms[s->n_vms++];
        *v = (struct site_vm){.line = c->line};
        snprintf(v->name, sizeof(v->name), "%s", tok);
        s->vms_listed = true;
    }
    return 0;
}

/* VAL, one of WORDS (any case), as its index in *RET. */
static int pick(struct ctx *c, const char *key, const char *val, const char *const *words, size_t n,
                int *ret)
{
    for (size_t i = 0; i < n; i++)
        if (strcasecmp(val, words[i]) == 0) {
            *ret = (int)i;
            return 0;
        }
    char want[160] = "";
    for (size_t i = 0; i < n; i++)
        snprintf(want + strlen(want), sizeof(want) - strlen(want), "%s%s", i ? "|" : "", words[i]);
    return FAIL(c, "%s = '%.40s': want %s", key, val, want);
}

static int on_controller(struct ctx *c, const char *key, const char *val)
{
    struct site *s = c->s;
    struct site_limits *l = &s->limits;
    double v;
    int r, e = 0;
    static const struct {
        const char *key;
        size_t off;
        double lo, hi;
    } nums[] = {
        {"interval_s", offsetof(struct site_limits, interval_s), 1, 86400},
        {"migrations_per_vm_day", offsetof(struct site_limits, per_vm_day), 0, 1000},
        {"spare", offsetof(struct site_limits, spare), 0, 10},
        {"migration_timeout_s", offsetof(struct site_limits, migration_timeout_s), 1, 86400},
        {"boot_timeout_s", offsetof(struct site_limits, boot_timeout_s), 1, 86400},
        {"off_timeout_s", offsetof(struct site_limits, off_timeout_s), 1, 86400},
        {"vm_mips", offsetof(struct site_limits, vm_mips), 1e-3, 1e9},
    };
    for (size_t i = 0; i < ARRAY_SIZE(nums); i++)
        if (streq(key, nums[i].key))
            return set_num(c, key, val, nums[i].lo, nums[i].hi, false,
                           (double *)((char *)l + nums[i].off));
    if (streq(key, "max_concurrent_migrations") || streq(key, "migrations_per_host") ||
        streq(key, "min_hosts_on")) {
        r = set_num(c, key, val, streq(key, "max_concurrent_migrations") ? 1 : 0, 1000, true, &v);
        if (r == 0 && streq(key, "migrations_per_host") && v < 1)
            r = FAIL(c, "migrations_per_host = %g: want at least 1", v);
        if (r < 0)
            return r;
        unsigned *dst = streq(key, "max_concurrent_migrations") ? &l->max_concurrent
                        : streq(key, "migrations_per_host")     ? &l->per_host
                                                                : &l->min_hosts_on;
        *dst = (unsigned)v;
        return 0;
    }
    if (streq(key, "vms"))
        return on_vms(c, val);
    if (streq(key, "mode")) {
        static const char *const run_modes[] = {"automatic", "manual"};
        r = pick(c, key, val, run_modes, ARRAY_SIZE(run_modes), &e);
        s->mode = (enum site_mode)e;
        return r;
    }
    if (streq(key, "destroy_stale_copy")) {
        bool b;
        if (parse_bool(val, &b) < 0)
            return FAIL(c, "%s = '%.40s': want " PARSE_BOOL_WORDS, key, val);
        s->destroy_stale_copy = b;
        return 0;
    }
    if (streq(key, "policy")) {
        struct fleet_watt_params wp;
        struct fleet_error pe;
        if (fleet_watt_params_parse(val, &wp, &pe) < 0)
            return FAIL(c, "policy: %.300s", pe.msg);
        return set_str(&s->policy, val);
    }
    if (streq(key, "state_dir"))
        return *val == '/' ? set_str(&s->state_dir, val)
                           : FAIL(c, "state_dir = '%.60s': want an absolute path", val);
    if (streq(key, "vm_engine") || streq(key, "power"))
        return pick_engine(c, key, val, streq(key, "power"),
                           streq(key, "power") ? &s->power_engine : &s->vm_engine);
    return on_engine_key(c, FX_IN_CONTROLLER, key, val, "[controller]",
                         "interval_s, vms, policy, spare, min_hosts_on, state_dir, vm_engine, "
                         "power, mode, destroy_stale_copy");
}

static int on_host(struct ctx *c, const char *key, const char *val)
{
    struct site_host *h = c->host;
    if (streq(key, "type")) {
        if (!valid_name(val, FLEET_NAME_MAX))
            return FAIL(c, "type = '%.40s': not a type name", val);
        /* resolved against the [type] sections at the end */
        snprintf(c->host_type[h - c->s->hosts], FLEET_NAME_MAX, "%s", val);
        c->host_type_line[h - c->s->hosts] = c->line;
        return 0;
    }
    if (streq(key, "uri"))
        return set_str(&h->uri, val);
    if (streq(key, "bmc"))
        return set_str(&h->bmc, val);
    if (streq(key, "bmc_user"))
        return set_str(&h->bmc_user, val);
    if (streq(key, "bmc_password") || streq(key, "bmc_password_file")) {
        bool file = streq(key, "bmc_password_file");
        if (h->bmc_password_line)
            return FAIL(c,
                        "[host %s] has a password already (line %d): give bmc_password or "
                        "bmc_password_file, once",
                        h->name, h->bmc_password_line);
        if (file && !*val)
            return FAIL(c, "bmc_password_file is empty: want the path of a file");
        h->bmc_password_line = c->line;
        if (!file && !c->s->password_line)
            c->s->password_line = c->line;
        return set_str(file ? &h->bmc_password_file : &h->bmc_password, val);
    }
    char where[80];
    snprintf(where, sizeof(where), "[host %s]", h->name);
    return on_engine_key(c, FX_IN_HOST, key, val, where,
                         "type, uri, bmc, bmc_user, bmc_password, bmc_password_file");
}

/* A [type NAME] section's key: the simulator's own parser. */
static int on_type(struct ctx *c, const char *key, const char *val)
{
    return fleet_type_spec_key(&c->types[c->n_types - 1], key, val, c->msg, sizeof(c->msg));
}

static int on_key(struct ctx *c, const char *key, const char *val)
{
    if (!*key)
        return FAIL(c, "a key is missing before '='");
    /* inih's inline comment is " ;" only (docs/config.md); a " #" that
     * used to end a value is refused rather than read into it */
    for (const char *p = val; *p; p++)
        if (*p == '#' && p > val && isspace((unsigned char)p[-1]) && !streq(key, "bmc_password"))
            return FAIL(c,
                        "%.40s = '%.60s': ' #' does not start a comment after a value (only "
                        "' ;' does): write ' ;' there, or leave the '#' out",
                        key, val);
    switch (c->sect) {
    case S_CONTROLLER:
        return on_controller(c, key, val);
    case S_HOST:
        return on_host(c, key, val);
    case S_ENGINE: {
        char where[80];
        snprintf(where, sizeof(where), "[%s]", c->engine_section);
        return on_engine_key(c, FX_IN_SECTION, key, val, where, "");
    }
    case S_PIN:
    case S_AFFINITY:
        return c->sect == S_PIN
                   ? site_rules_pin(&c->rules, key, val, c->line, c->msg, sizeof(c->msg))
                   : site_rules_group(&c->rules, c->s, key, val, c->line, c->msg, sizeof(c->msg));
    case S_TYPE:
        return on_type(c, key, val);
    case S_NONE:
    default:
        return FAIL(c, "'%.40s' before any section", key);
    }
}

/* inih's handler: its section is ignored (the reader keeps ours). */
static int on_entry(void *user, const char *section, const char *key, const char *val)
{
    struct ctx *c = user;
    (void)section;
    if (c->failed)
        return 0;
    c->line = c->lines.line;
    _cleanup_free_ char *long_value = fleet_ini_take_long(&c->lines);
    if (on_key(c, key, long_value ? long_value : val) == 0)
        return 1;
    c->failed = c->lines.failed = true; /* c->msg says why */
    return 0;
}

static int new_host(struct ctx *c, const char *name)
{
    struct site *s = c->s;
    if (!valid_name(name, FLEET_NAME_MAX) || name[0] == '-') /* '-': a command's option */
        return FAIL(c,
                    "host name '%.60s' must be 1..%d letters, digits, '_', '-' or '.', not "
                    "starting with '-'",
                    name, FLEET_NAME_MAX - 1);
    ssize_t dup = site_host_find(s, name);
    if (dup >= 0)
        return FAIL(c, "host '%s' is already defined on line %d", name, s->hosts[dup].line);
    if (s->n_hosts >= SITE_MAX_HOSTS)
        return FAIL(c, "more than %d hosts", SITE_MAX_HOSTS);
    s->hosts = xrealloc(s->hosts, (s->n_hosts + 1) * sizeof(*s->hosts));
    c->host_type = xrealloc(c->host_type, (s->n_hosts + 1) * sizeof(*c->host_type));
    c->host_type_line = xrealloc(c->host_type_line, (s->n_hosts + 1) * sizeof(int));
    c->host_type[s->n_hosts][0] = '\0';
    c->host_type_line[s->n_hosts] = 0;
    c->host = &s->hosts[s->n_hosts++];
    *c->host = (struct site_host){.line = c->line};
    snprintf(c->host->name, sizeof(c->host->name), "%s", name);
    return 0;
}

/* [type NAME]: a type of the simulator's, named once. */
static int new_type(struct ctx *c, const char *name)
{
    if (!fleet_type_name_ok(name))
        return FAIL(c, "type name '%.60s' must be 1..%d letters, digits, '_', '-' or '.'", name,
                    FLEET_TYPE_NAME_MAX);
    for (size_t i = 0; i < c->n_types; i++)
        if (strcasecmp(c->types[i].t.name, name) == 0)
            return FAIL(c, "type '%s' is already defined on line %d", name, c->types[i].line);
    /* a type per host at most: the duplicate check above stays cheap */
    if (c->n_types >= SITE_MAX_HOSTS)
        return FAIL(c, "more than %d host types", SITE_MAX_HOSTS);
    c->types = grow_array(c->types, sizeof(*c->types), c->n_types, &c->cap_types);
    struct fleet_type_spec *t = &c->types[c->n_types++];
    *t = (struct fleet_type_spec){.line = c->line};
    snprintf(t->t.name, sizeof(t->t.name), "%s", name);
    c->sect = S_TYPE;
    return 0;
}

/* [exec]: a section of the engines', once, without a name. */
static int on_engine_section(struct ctx *c, const char *sec, const char *arg)
{
    for (size_t i = 0; i < c->n_seen_sections; i++)
        if (strcasecmp(c->seen_sections[i], sec) == 0)
            return FAIL(c, "a second [%s] section", sec);
    if (*arg)
        return FAIL(c, "[%s] takes no name", sec);
    if (c->n_seen_sections < MAX_ENGINE_SECTIONS)
        c->seen_sections[c->n_seen_sections++] = sec;
    c->engine_section = sec;
    c->sect = S_ENGINE;
    return 0;
}

static int on_section(struct ctx *c, char *line)
{
    char *close = strchr(line, ']');
    if (!close)
        return FAIL(c, "section header without ']'");
    *close = '\0';
    char *name = str_trim(line + 1), *arg = name;
    while (*arg && !isspace((unsigned char)*arg))
        arg++;
    if (*arg)
        *arg++ = '\0';
    arg = str_trim(arg);
    if (strcasecmp(name, "controller") == 0) {
        if (c->seen_controller)
            return FAIL(c, "a second [%s] section", name);
        if (*arg)
            return FAIL(c, "[%s] takes no name", name);
        c->seen_controller = true;
        c->sect = S_CONTROLLER;
        return 0;
    }
    if (strcasecmp(name, "type") == 0)
        return new_type(c, arg);
    if (strcasecmp(name, "host") == 0) {
        c->sect = S_HOST;
        return new_host(c, arg);
    }
    if (strcasecmp(name, "pin") == 0 || strcasecmp(name, "anti-affinity") == 0) {
        if (*arg)
            return FAIL(c, "[%s] takes no name", name);
        c->sect = strcasecmp(name, "pin") == 0 ? S_PIN : S_AFFINITY;
        return 0;
    }
    char want[200] = "";
    for (size_t i = 0; fx_engines[i]; i++) {
        const char *sec = fx_engines[i]->section;
        if (!sec)
            continue;
        if (strcasecmp(name, sec) == 0)
            return on_engine_section(c, sec, arg);
        if (!strstr(want, sec))
            snprintf(want + strlen(want), sizeof(want) - strlen(want), ", [%s]", sec);
    }
    return FAIL(c,
                "unknown section [%.60s] (want [controller], [type NAME], [host NAME], [pin], "
                "[anti-affinity]%s)",
                name, want);
}

static int on_header(void *user, char *header)
{
    struct ctx *c = user;
    c->line = c->lines.line;
    return on_section(c, header);
}

/* Every line, through inih. */
static int scan(struct ctx *c, const char *text)
{
    c->lines = (struct fleet_ini_lines){.pos = text, .on_section = on_header, .user = c};
    int r = ini_parse_stream(fleet_ini_read, &c->lines, on_entry, c);
    fleet_ini_lines_free(&c->lines);
    c->line = c->lines.line;
    if (c->lines.why[0])
        return FAIL(c, "%s", c->lines.why);
    if (r < 0)
        return FAIL(c, "out of memory");
    /* inih's own errors are lines that are no key = value; it goes on
     * after one, so the handler may have failed on a later line */
    if (r > 0 && (!c->failed || r < c->line)) {
        c->line = r;
        return FAIL(c, "want key = value or [section]");
    }
    return c->failed ? -EINVAL : 0;
}

static void defaults(struct site *s)
{
    s->limits = (struct site_limits){
        .interval_s = 300,
        .max_concurrent = 2,
        .per_host = 1,
        .per_vm_day = 4,
        .min_hosts_on = 1,
        .spare = 0.10,
        .migration_timeout_s = 120,
        .boot_timeout_s = 600,
        .off_timeout_s = 300,
    };
    s->vm_engine = fx_engine_default(false);
    s->power_engine = fx_engine_default(true);
}

/* The [type NAME] section named NAME, or -1. */
static ssize_t type_defined(const struct ctx *c, const char *name)
{
    for (size_t k = 0; k < c->n_types; k++)
        if (strcasecmp(c->types[k].t.name, name) == 0)
            return (ssize_t)k;
    return -1;
}

/* Types: each [type NAME] section finished (in file order), then the
 * built-ins that hosts name (in the order first named); each host's type
 * found by name, a defined type before a built-in. */
static int build_types(struct ctx *c)
{
    struct site *s = c->s;
    if (s->n_hosts == 0)
        return FAIL(c, "no [host NAME] sections");
    struct fleet_hosts *h = &s->types;
    h->types = xcalloc(c->n_types + 2, sizeof(*h->types));
    for (size_t k = 0; k < c->n_types; k++) {
        if (fleet_type_spec_finish(&c->types[k], &h->types[k], c->msg, sizeof(c->msg)) < 0) {
            c->line = c->types[k].line;
            c->failed = true;
            return -EINVAL;
        }
        h->n_types++;
    }
    h->type_of = xcalloc(s->n_hosts, sizeof(*h->type_of));
    h->n_hosts = s->n_hosts;
    for (size_t i = 0; i < s->n_hosts; i++) {
        const char *t = c->host_type[i];
        if (!t[0]) {
            c->line = s->hosts[i].line;
            return FAIL(c, "[host %s] has no type = NAME (a [type NAME] section, or g4/g5)",
                        s->hosts[i].name);
        }
        ssize_t k = type_defined(c, t);
        const struct fleet_host_type *b = fleet_host_type_builtin(t);
        if (k < 0 && !b) {
            c->line = c->host_type_line[i];
            return FAIL(c, "type = %s: no [type %s] section (and not a built-in: g4, g5)", t, t);
        }
        if (k < 0) {
            for (k = (ssize_t)c->n_types; k < (ssize_t)h->n_types; k++)
                if (strcasecmp(h->types[k].name, b->name) == 0)
                    break;
            if (k == (ssize_t)h->n_types)
                h->types[h->n_types++] = *b;
        }
        h->type_of[i] = (uint16_t)k;
        s->hosts[i].type = (uint16_t)k;
    }
    return 0;
}

static int by_vm_name(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* A VM listed twice: sorted names, so that 65536 VMs cost no more than a sort. */
static int check_vm_duplicates(struct ctx *c)
{
    struct site *s = c->s;
    if (s->n_vms < 2)
        return 0;
    _cleanup_free_ const char **names = xmalloc(s->n_vms * sizeof(*names));
    for (size_t i = 0; i < s->n_vms; i++)
        names[i] = s->vms[i].name;
    qsort(names, s->n_vms, sizeof(*names), by_vm_name);
    for (size_t i = 1; i < s->n_vms; i++)
        if (streq(names[i], names[i - 1])) {
            c->line = c->vms_line;
            return FAIL(c, "vms: '%.60s' is listed twice", names[i]);
        }
    return 0;
}

/* What the chosen engines need (each host's uri for libvirt, ...). */
static int check_engine(struct ctx *c, const struct fx_engine *e)
{
    c->line = 0;
    if (!e->check)
        return 0;
    return e->check(c->s, fx_engine_conf(c->s, e), c->msg, sizeof(c->msg), &c->line);
}

static int validate(struct ctx *c)
{
    struct site *s = c->s;
    int r = check_vm_duplicates(c);
    if (r == 0)
        r = check_engine(c, s->vm_engine);
    if (r == 0)
        r = check_engine(c, s->power_engine);
    if (r < 0)
        return r;
    c->line = 0;
    if (s->limits.min_hosts_on > s->n_hosts)
        return FAIL(c, "min_hosts_on = %u, but there are %zu hosts", s->limits.min_hosts_on,
                    s->n_hosts);
    if (s->limits.vm_mips == 0) { /* a vCPU: a core of the slowest type */
        double m = INFINITY;
        for (size_t i = 0; i < s->types.n_types; i++)
            m = fmin(m, s->types.types[i].mips_per_core);
        s->limits.vm_mips = m;
    }
    if (!s->state_dir)
        s->state_dir = xstrdup("/var/lib/watt/fleet");
    return site_rules_finish(&c->rules, s, c->msg, sizeof(c->msg), &c->line);
}

int site_parse(const char *text, size_t len, const char *origin, struct site *ret,
               struct fleet_error *err)
{
    if (!origin)
        origin = "fleet.ini";
    if (memchr(text, '\0', len)) {
        fleet_error_set(err, "%s: contains a NUL byte", origin);
        return -EINVAL;
    }
    _cleanup_free_ char *t = xmalloc(len + 1);
    memcpy(t, text, len);
    t[len] = '\0';
    struct site s = {.origin = xstrdup(origin)};
    defaults(&s);
    struct ctx c = {.s = &s};
    int r = scan(&c, t);
    if (r == 0) {
        c.line = 0;
        r = build_types(&c);
    }
    if (r == 0)
        r = validate(&c);
    if (r < 0 && c.msg[0]) {
        if (c.line > 0)
            fleet_error_set(err, "%s line %d: %s", origin, c.line, c.msg);
        else
            fleet_error_set(err, "%s: %s", origin, c.msg);
    }
    free(c.host_type);
    free(c.host_type_line);
    free(c.types);
    site_rules_pending_free(c.rules);
    if (r < 0) {
        site_free(&s);
        return r;
    }
    *ret = s;
    return 0;
}

void site_free(struct site *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->n_hosts; i++) {
        struct site_host *h = &s->hosts[i];
        free(h->uri);
        free(h->bmc);
        free(h->bmc_user);
        if (h->bmc_password)
            explicit_bzero(h->bmc_password, strlen(h->bmc_password));
        free(h->bmc_password);
        free(h->bmc_password_file);
    }
    free(s->hosts);
    free(s->vms);
    fleet_hosts_free(&s->types);
    site_engines_free(s);
    free(s->policy);
    free(s->state_dir);
    free(s->origin);
    free(s->rules);
    free(s->groups);
    *s = (struct site){0};
}

ssize_t site_host_find(const struct site *s, const char *name)
{
    for (size_t i = 0; i < s->n_hosts; i++)
        if (streq(s->hosts[i].name, name))
            return (ssize_t)i;
    return -1;
}

ssize_t site_vm_find(const struct site *s, const char *name)
{
    for (size_t i = 0; i < s->n_vms; i++)
        if (streq(s->vms[i].name, name))
            return (ssize_t)i;
    return -1;
}
