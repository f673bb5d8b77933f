/* The agent's fitted power model: see model_fit.h. */
#include "agent/model_fit.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/jsondoc.h"
#include "base/strbuf.h"
#include "base/util.h"
#include "model/fit.h"
#include "model/fit_store.h"

struct agent_fit {
    struct host *h;
    double every_s;
    uint64_t last_ns; /* the last fit's time; 0: none yet */
    struct fit_store store;
    struct power_model model;
    bool have;         /* model holds a fitted model (written or loaded) */
    unsigned loaded_n; /* the points of the file found at start; 0 once replaced */
    char *last_why;    /* the last reason said on stderr */
    char meter[96];    /* the power summary's source of the last point kept */
};

/* Say WHY once, until it changes (NULL: all is well again). */
static void say(struct agent_fit *f, char *why)
{
    if (why && (!f->last_why || !streq(why, f->last_why)))
        fprintf(stderr, "watt agent: fitted model: %s\n", why);
    free(f->last_why);
    f->last_why = why;
}

/* The fitted file as it is at start: shown until the first fit. */
static void load_existing(struct agent_fit *f)
{
    _cleanup_free_ char *shown = host_state_display_path(f->h, FIT_MODEL_PATH);
    char *why = NULL;
    if (host_state_check(f->h, FIT_MODEL_PATH, &why) < 0) {
        say(f, why);
        return;
    }
    _cleanup_close_ int fd = host_state_open(f->h, FIT_MODEL_PATH, O_RDONLY, 0);
    if (fd < 0)
        return; /* none yet: the normal first start */
    char buf[8192];
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    if (n < 0)
        return;
    buf[n] = '\0';
    struct power_model m;
    if (model_parse(buf, shown, &m, &why) < 0 || !m.fit.n) {
        say(f, why ? why : xasprintf("%s: not a fitted model (no fit_n): replacing it", shown));
        return;
    }
    f->model = m;
    f->have = true;
    f->loaded_n = m.fit.n;
}

struct agent_fit *agent_fit_new(struct host *h, double every_s)
{
    struct agent_fit *f = xcalloc(1, sizeof(*f));
    f->h = h;
    f->every_s = every_s;
    load_existing(f);
    return f;
}

void agent_fit_free(struct agent_fit *f)
{
    if (!f)
        return;
    free(f->last_why);
    free(f);
}

/* Write TEXT to FIT_MODEL_PATH: a temporary file beside it, fsync, rename
 * (host_state_*: resolved beneath the root, no links followed, in
 * directories only root may write). */
static int write_atomic(struct agent_fit *f, const char *text, char **ret_why)
{
    _cleanup_free_ char *shown = host_state_display_path(f->h, FIT_MODEL_PATH);
    int r = host_state_check(f->h, FIT_MODEL_PATH, ret_why);
    if (r < 0)
        return r;
    const char *tmp = FIT_MODEL_PATH ".tmp";
    int fd = host_state_open(f->h, tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
        *ret_why = xasprintf("cannot write %s.tmp: %s", shown, strerror(-fd));
        return fd;
    }
    size_t len = strlen(text), off = 0;
    while (off < len) {
        ssize_t n = write(fd, text + off, len - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        off += (size_t)n;
    }
    r = off == len ? 0 : -EIO;
    if (r == 0 && fsync(fd) < 0)
        r = -errno;
    close(fd);
    if (r == 0)
        r = host_state_rename(f->h, tmp, FIT_MODEL_PATH);
    if (r < 0)
        *ret_why = xasprintf("cannot write %s: %s", shown, strerror(-r));
    return r;
}

static void fit_now(struct agent_fit *f, double pue)
{
    struct fit_point pts[FIT_STORE_MAX];
    size_t n = fit_store_points(&f->store, pts);
    struct fit_result res;
    char *why = NULL;
    if (fit_power(pts, n, &res, &why) < 0) {
        char *s = xasprintf("not fitted yet: %s (%llu samples seen)", why,
                            (unsigned long long)f->store.seen);
        free(why);
        say(f, s);
        return;
    }
    /* after a restart, the file's fit stands until this one is as good */
    if (f->loaded_n && res.n < f->loaded_n && res.n < FIT_STORE_MAX / 4)
        return;
    char when[64];
    doc_time_format(doc_time_now(), when, sizeof(when));
    struct power_model m;
    fit_to_model(&res, pue, when, &m);
    _cleanup_free_ char *shown = host_state_display_path(f->h, FIT_MODEL_PATH);
    snprintf(m.source, sizeof(m.source), "%s", shown);
    /* what the meter covers is what the model estimates: RAPL package+dram
     * is CPUs and memory only */
    snprintf(m.description, sizeof(m.description),
             "fitted on this machine against %s: %zu points, %.2f..%.2f busy CPUs", f->meter, res.n,
             res.busy_min, res.busy_max);
    struct strbuf text = {0};
    _cleanup_free_ char *comment = xasprintf(
        "The power model watt agent fitted against this machine's meter (docs/power-model.md).\n"
        "Rewritten every few minutes; %llu samples seen, %zu kept (bucketed by load).%s",
        (unsigned long long)f->store.seen, n,
        res.cpus_fixed ? "\nOne CPU count: idle_base_w holds the idle power of all CPUs." : "");
    model_format(&m, comment, &text);
    int r = write_atomic(f, strbuf_str(&text), &why);
    strbuf_free(&text);
    if (r < 0) {
        say(f, why);
        return;
    }
    if (!f->have || f->loaded_n)
        fprintf(stderr, "watt agent: fitted model: wrote %s (RMSE %.1f W over %zu points)\n", shown,
                res.rmse_w, res.n);
    f->model = m;
    f->have = true;
    f->loaded_n = 0;
    say(f, NULL);
}

void agent_fit_update(struct agent_fit *f, const struct power_summary *ps, double pue,
                      uint64_t now_ns)
{
    if (!f)
        return;
    if (ps->measured && !isnan(ps->it_w) && !isnan(ps->fit_busy_cores)) {
        struct fit_point p = {ps->cores, ps->fit_busy_cores, ps->ghz, ps->it_w};
        if (fit_store_add(&f->store, &p) == 0)
            snprintf(f->meter, sizeof(f->meter), "%s", ps->source);
    }
    if (f->last_ns && (double)(now_ns - f->last_ns) / 1e9 < f->every_s)
        return;
    if (!f->last_ns) { /* the first fit is due every_s after the start */
        f->last_ns = now_ns;
        return;
    }
    f->last_ns = now_ns;
    fit_now(f, pue);
}

const struct power_model *agent_fit_model(const struct agent_fit *f)
{
    return f && f->have ? &f->model : NULL;
}
