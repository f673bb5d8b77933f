#include "model/model.h"

#include <errno.h>
#include <ini.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/parse.h"
#include "base/util.h"

/* Built-ins, identical to data/models/NAME.ini (a test checks it); the
 * files explain where each coefficient comes from. */
static const struct power_model builtins[] = {
    {
        .name = "specpower-2023",
        .source = "built-in",
        .description = "x86/Arm servers in SPECpower_ssj2008 results 2021-2023 (least-squares fit)",
        .idle_base_w = 56.5,
        .idle_per_core_w = 0.222,
        .active_per_core_w = 1.83,
        .ref_ghz = 2.4,
        .error_pct = 50,
        .pue = 1.5,
    },
    {
        .name = "seed-2011",
        .source = "built-in",
        .description = "48-core server of 2011: 350 W idle, 960 W busy (LCA 2011)",
        .idle_per_core_w = 7.29,
        .active_per_core_w = 12.7,
        .ref_ghz = 2.2,
        .error_pct = 30,
        .pue = 2.0,
    },
    {
        .name = "vm-vcpu",
        .source = "built-in",
        .description = "share of the host per vCPU (CCF Skylake coefficients: 0.64-4.05 W/vCPU)",
        .idle_per_core_w = 0.64,
        .active_per_core_w = 3.41,
        .ref_ghz = 2.5,
        .error_pct = 50,
        .pue = 1.5,
    },
};

void model_default(struct power_model *m)
{
    *m = builtins[0];
}

int model_builtin(const char *name, struct power_model *ret)
{
    for (size_t i = 0; i < ARRAY_SIZE(builtins); i++)
        if (streq(builtins[i].name, name)) {
            *ret = builtins[i];
            return 0;
        }
    return -ENOENT;
}

struct parse_ctx {
    struct power_model *m;
    const char *origin;
    char *err;
};

static int set_double(struct parse_ctx *p, const char *key, const char *val, double *dst, double lo,
                      double hi)
{
    double v;
    if (parse_double(val, &v) < 0 || v < lo || v > hi) {
        p->err = xasprintf("%s = '%s': want a number in %g..%g", key, val, lo, hi);
        return 0;
    }
    *dst = v;
    return 1;
}

static int on_entry(void *user, const char *section, const char *key, const char *val)
{
    struct parse_ctx *p = user;
    struct power_model *m = p->m;
    if (p->err)
        return 0;
    if (!streq(section, "model")) {
        p->err = xasprintf("unknown section [%s] (want [model])", section);
        return 0;
    }
    if (streq(key, "fit_time")) {
        if (strlen(val) >= sizeof(m->fit.time)) {
            p->err = xasprintf("fit_time: longer than %zu characters", sizeof(m->fit.time) - 1);
            return 0;
        }
        memcpy(m->fit.time, val, strlen(val) + 1);
        return 1;
    }
    if (streq(key, "fit_n") || streq(key, "fit_cpus")) {
        double v;
        if (set_double(p, key, val, &v, 0, 1e9) && v == floor(v)) {
            *(streq(key, "fit_n") ? &m->fit.n : &m->fit.cpus) = (unsigned)v;
            return 1;
        }
        if (!p->err)
            p->err = xasprintf("fit_n = '%s': want a whole number", val);
        return 0;
    }
    if (streq(key, "name") || streq(key, "description")) {
        char *dst = streq(key, "name") ? m->name : m->description;
        size_t size = streq(key, "name") ? sizeof(m->name) : sizeof(m->description);
        if (!*val || strlen(val) >= size) {
            p->err = xasprintf("%s: empty or longer than %zu characters", key, size - 1);
            return 0;
        }
        memcpy(dst, val, strlen(val) + 1);
        return 1;
    }
    static const struct {
        const char *key;
        size_t off;
        double lo, hi;
    } nums[] = {
        {"idle_base_w", offsetof(struct power_model, idle_base_w), 0, 100000},
        {"idle_per_core_w", offsetof(struct power_model, idle_per_core_w), 0, 1000},
        {"active_per_core_w", offsetof(struct power_model, active_per_core_w), 0, 1000},
        {"ref_ghz", offsetof(struct power_model, ref_ghz), 0.1, 10},
        {"ghz_exponent", offsetof(struct power_model, ghz_exponent), 0, 4},
        {"error_pct", offsetof(struct power_model, error_pct), 0, 1000},
        {"pue", offsetof(struct power_model, pue), 1, 10},
        {"fit_rmse_w", offsetof(struct power_model, fit.rmse_w), 0, 100000},
        {"fit_mape_pct", offsetof(struct power_model, fit.mape_pct), 0, 100000},
        {"fit_r2", offsetof(struct power_model, fit.r2), -1e6, 1},
        {"fit_busy_min", offsetof(struct power_model, fit.busy_min), 0, 1e6},
        {"fit_busy_max", offsetof(struct power_model, fit.busy_max), 0, 1e6},
    };
    for (size_t i = 0; i < ARRAY_SIZE(nums); i++)
        if (streq(key, nums[i].key))
            return set_double(p, key, val, (double *)((char *)m + nums[i].off), nums[i].lo,
                              nums[i].hi);
    p->err = xasprintf("unknown key '%s'", key);
    return 0;
}

int model_parse(const char *text, const char *origin, struct power_model *ret, char **ret_err)
{
    struct power_model m;
    model_default(&m);
    m.fit.r2 = NAN;
    snprintf(m.source, sizeof(m.source), "%s", origin);
    struct parse_ctx p = {.m = &m, .origin = origin};
    int r = ini_parse_string(text, on_entry, &p);
    if (!p.err && r > 0)
        p.err = xstrdup("syntax error (want key = value under [model])");
    if (p.err) {
        /* inih returns the line where the handler refused */
        *ret_err = xasprintf("%s:%d: %s", origin, r, p.err);
        free(p.err);
        return -EINVAL;
    }
    *ret = m;
    return 0;
}

int model_load(const char *path, struct power_model *ret, char **ret_err)
{
    FILE *f = fopen(path, "re");
    if (!f) {
        *ret_err = xasprintf("cannot read model file %s: %s", path, strerror(errno));
        return -errno;
    }
    char buf[65536];
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    bool too_big = !feof(f);
    fclose(f);
    if (too_big) {
        *ret_err = xasprintf("model file %s: larger than 64 KiB", path);
        return -EFBIG;
    }
    buf[n] = '\0';
    if (memchr(buf, '\0', n)) {
        *ret_err = xasprintf("model file %s: binary content", path);
        return -EINVAL;
    }
    return model_parse(buf, path, ret, ret_err);
}

double model_estimate(const struct power_model *m, unsigned cores, double busy_cores, double ghz)
{
    if (busy_cores < 0)
        busy_cores = 0;
    if (busy_cores > cores)
        busy_cores = cores;
    double f = 1.0;
    if (m->ghz_exponent > 0 && ghz > 0 && m->ref_ghz > 0)
        f = pow(ghz / m->ref_ghz, m->ghz_exponent);
    return m->idle_base_w + m->idle_per_core_w * cores + m->active_per_core_w * busy_cores * f;
}

void model_format(const struct power_model *m, const char *comment, struct strbuf *out)
{
    for (const char *c = comment; c && *c;) {
        const char *nl = strchr(c, '\n');
        size_t len = nl ? (size_t)(nl - c) : strlen(c);
        strbuf_appendf(out, "# %.*s\n", (int)len, c);
        c += len + (nl ? 1 : 0);
    }
    strbuf_appendf(out, "[model]\nname = %s\ndescription = %s\n", m->name, m->description);
    strbuf_appendf(out,
                   "idle_base_w = %.6g\nidle_per_core_w = %.6g\nactive_per_core_w = %.6g\n"
                   "ref_ghz = %.6g\nghz_exponent = %.6g\nerror_pct = %.6g\npue = %.6g\n",
                   m->idle_base_w, m->idle_per_core_w, m->active_per_core_w, m->ref_ghz,
                   m->ghz_exponent, m->error_pct, m->pue);
    if (!m->fit.n)
        return;
    strbuf_appendf(out, "fit_n = %u\nfit_rmse_w = %.6g\nfit_mape_pct = %.6g\n", m->fit.n,
                   m->fit.rmse_w, m->fit.mape_pct);
    if (isfinite(m->fit.r2))
        strbuf_appendf(out, "fit_r2 = %.6g\n", fmax(-1e6, m->fit.r2));
    strbuf_appendf(out, "fit_busy_min = %.6g\nfit_busy_max = %.6g\n", m->fit.busy_min,
                   m->fit.busy_max);
    if (m->fit.cpus)
        strbuf_appendf(out, "fit_cpus = %u\n", m->fit.cpus);
    if (m->fit.time[0])
        strbuf_appendf(out, "fit_time = %s\n", m->fit.time);
}
