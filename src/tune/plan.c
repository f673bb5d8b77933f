/* The tuning plan: the changes a profile means on this machine, the
 * changes back to the original values when switching profiles, and the
 * all-or-nothing apply through the journal. The knob planners themselves
 * are in knobs.c. */
#include "tune/plan.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "base/strbuf.h"
#include "base/util.h"
#include "tune/journal.h"
#include "tune/knob.h"
#include "tune/knob_io.h"
#include "tune/knobs.h"
#include "tune/profile.h"

int tune_plan_add(struct tune_plan *p, enum host_dir d, const char *path, const char *old_value,
                  const char *new_value, const char *knob, const char *why, const char *origin)
{
    if (!path || !new_value || !knob)
        return -EINVAL;
    /* Grow by one: plans hold at most a few thousand changes. */
    p->v = xrealloc(p->v, (p->n + 1) * sizeof(*p->v));
    p->v[p->n++] = (struct tune_change){
        .dir = d,
        .path = xstrdup(path),
        .old_value = old_value ? xstrdup(old_value) : NULL,
        .new_value = xstrdup(new_value),
        .knob = xstrdup(knob),
        .why = xstrdup(why ? why : ""),
        .origin = xstrdup(origin ? origin : ""),
    };
    tune_plan_cover(p, d, path, NULL);
    return 0;
}

static char *cover_key(enum host_dir d, const char *path, const char *knob)
{
    return path ? xasprintf("%s:%s", host_dir_name(d), path) : xasprintf("knob:%s", knob);
}

void tune_plan_cover(struct tune_plan *p, enum host_dir d, const char *path, const char *knob)
{
    if (!path && !knob)
        return;
    p->covered = xrealloc(p->covered, (p->ncovered + 1) * sizeof(*p->covered));
    p->covered[p->ncovered++] = cover_key(d, path, knob);
}

int tune_plan_note(struct tune_plan *p, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    struct strbuf b = {0};
    strbuf_vappendf(&b, fmt, ap);
    va_end(ap);
    _cleanup_free_ char *note = strbuf_steal(&b);
    /* The same sentence for 40 policies is one note. */
    for (size_t i = 0; i < p->nnotes; i++)
        if (streq(p->notes[i], note))
            return 0;
    p->notes = xrealloc(p->notes, (p->nnotes + 1) * sizeof(*p->notes));
    p->notes[p->nnotes++] = TAKE_PTR(note);
    return 0;
}

static void change_clear(struct tune_change *c)
{
    free(c->path);
    free(c->old_value);
    free(c->new_value);
    free(c->knob);
    free(c->why);
    free(c->origin);
}

void tune_plan_free(struct tune_plan *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->n; i++)
        change_clear(&p->v[i]);
    free(p->v);
    for (size_t i = 0; i < p->nnotes; i++)
        free(p->notes[i]);
    free(p->notes);
    for (size_t i = 0; i < p->ncovered; i++)
        free(p->covered[i]);
    free(p->covered);
    *p = (struct tune_plan){0};
}

char *tune_value_active(const char *raw)
{
    return journal_value_active(raw);
}

const char *tune_knob_for_path(enum host_dir d, const char *path)
{
    const struct knob *k = knob_find(d, path);
    return k ? k->name : NULL;
}

/* The device planner changes only devices that never suspend; one that
 * an earlier profile set to suspend is no candidate now, yet covered: the
 * knob covers every device file it names. */
static void cover_device_knobs(const struct profile *p, struct tune_plan *plan)
{
    const struct profile_value *rpm = profile_get(p, "devices", "runtime_pm");
    const struct profile_value *delay = profile_get(p, "devices", "autosuspend_delay_ms");
    bool rpm_auto = rpm && streq(rpm->value, "auto");
    if (rpm_auto)
        tune_plan_cover(plan, HOST_SYS, NULL, "devices.runtime_pm");
    if (rpm_auto || (delay && *delay->value))
        tune_plan_cover(plan, HOST_SYS, NULL, "devices.autosuspend_delay_ms");
}

int tune_plan_build(struct host *h, const struct profile *p, const struct devpolicy *dp,
                    struct tune_plan *ret, char **ret_err)
{
    struct tune_plan plan = {0};
    struct knob_ctx c = {.h = h, .p = p, .plan = &plan};
    int r = knobs_begin(&c);
    /* Order of changes = order of writes: the governor before the EPP
     * written under it (knobs.c), cpufreq before cpuidle before pm_qos. */
    if (r >= 0)
        r = knobs_cpufreq(&c);
    if (r >= 0)
        r = knobs_cpuidle(&c);
    if (r >= 0)
        r = knobs_pm_qos(&c);
    if (r >= 0 && profile_has_section(p, "devices")) {
        cover_device_knobs(p, &plan);
        _cleanup_free_ char *err = NULL;
        r = tune_plan_devices(h, p, dp, &plan, &err);
        if (r < 0)
            c.err = err ? TAKE_PTR(err) : xasprintf("devices: %s", strerror(-r));
    }
    if (r >= 0)
        r = knobs_sata(&c);
    if (r >= 0)
        r = knobs_pcie_aspm(&c);
    if (r >= 0)
        r = knobs_kernel(&c);
    if (r >= 0)
        r = knobs_gpu(&c);
    knobs_end(&c);
    if (r < 0) {
        tune_plan_free(&plan);
        if (ret_err)
            *ret_err = c.err ? TAKE_PTR(c.err) : xasprintf("cannot plan: %s", strerror(-r));
        free(c.err);
        return r;
    }
    free(c.err);
    *ret = plan;
    return 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool is_covered(const struct tune_plan *p, const char *key)
{
    return p->ncovered && bsearch(&key, p->covered, p->ncovered, sizeof(char *), cmp_str);
}

/* Does the profile set this file, or its knob as a whole? (covered is
 * sorted.) */
static bool plan_covers(const struct tune_plan *p, enum host_dir d, const char *path)
{
    _cleanup_free_ char *key = cover_key(d, path, NULL);
    const char *knob = tune_knob_for_path(d, path);
    _cleanup_free_ char *kkey = knob ? cover_key(d, NULL, knob) : NULL;
    return is_covered(p, key) || (kkey && is_covered(p, kkey));
}

/* Index of the first record of (d, path) among v[0..n), or n. */
static size_t first_record(const struct journal_entry *v, size_t n, const char *owner,
                           enum host_dir d, const char *path)
{
    for (size_t i = 0; i < n; i++)
        if (v[i].path && v[i].dir == d && streq(v[i].path, path) &&
            (!owner || streq(v[i].owner, owner)))
            return i;
    return n;
}

/* The change back to E's original, when the value now differs from it. */
static int add_revert(struct host *h, struct tune_plan *out, const struct journal_entry *e,
                      const char *profile, const char *journal)
{
    _cleanup_free_ char *raw = NULL;
    if (knob_io_read_str(h, e->dir, e->path, &raw) < 0)
        return 0; /* gone (a device unplugged): nothing to put back */
    _cleanup_free_ char *now = tune_value_active(raw);
    _cleanup_free_ char *orig = tune_value_active(e->old_value);
    if (streq(now, orig))
        return 0;
    const char *knob = tune_knob_for_path(e->dir, e->path);
    _cleanup_free_ char *why = xasprintf("not set by %s: back to its original value", profile);
    _cleanup_free_ char *origin = xasprintf("%s:%u", journal, e->line);
    return tune_plan_add(out, e->dir, e->path, now, orig, knob ? knob : "journal", why, origin);
}

/* Whether the path of LOG's record I (its first) is still watt's to put
 * back: judged at its newest record. A value someone else changed since,
 * one an earlier boot set, or a record the journal may not write, is
 * left as it is, with a note. */
static bool revert_ok(struct host *h, struct tune_plan *p, const struct journal_log *log, size_t i,
                      const char *owner, const char *journal)
{
    const struct journal_entry *e = &log->v[i], *last = e;
    for (size_t k = i + 1; k < log->n; k++)
        if (log->v[k].dir == e->dir && streq(log->v[k].path, e->path) &&
            (!owner || streq(log->v[k].owner, owner)))
            last = &log->v[k];
    _cleanup_free_ char *now = NULL;
    const char *why = NULL;
    enum journal_verdict v = journal_judge(h, log, last, &now, &why);
    _cleanup_free_ char *kpath = host_kernel_path(e->dir, e->path);
    switch (v) {
    case JOURNAL_OURS:
        return true;
    case JOURNAL_CHANGED: {
        _cleanup_free_ char *shown = journal_escape(now ? now : "");
        tune_plan_note(p,
                       "%s shows '%s', not what watt wrote (%s:%u): changed since by someone "
                       "else, so it is not put back",
                       kpath, shown, journal, last->line);
        return false;
    }
    case JOURNAL_EARLIER_BOOT:
        tune_plan_note(p,
                       "%s: %s:%u is from an earlier boot, which set the file anew: not put "
                       "back (watt restore moves such records aside)",
                       kpath, journal, last->line);
        return false;
    case JOURNAL_REFUSED:
        tune_plan_note(p, "%s:%u refused: %s", journal, last->line, why);
        return false;
    default:
        return false; /* gone or unreadable: nothing to put back */
    }
}

int tune_plan_add_reverts(struct host *h, struct tune_plan *p, const struct journal_log *log,
                          const char *owner, const char *profile, const char *journal)
{
    struct tune_plan back = {0};
    if (p->ncovered)
        qsort(p->covered, p->ncovered, sizeof(*p->covered), cmp_str);
    for (size_t i = 0; log && i < log->n; i++) {
        const struct journal_entry *e = &log->v[i];
        if (!e->path || (owner && !streq(e->owner, owner)))
            continue;
        if (first_record(log->v, i, owner, e->dir, e->path) < i)
            continue; /* not its first record: the original is older */
        if (plan_covers(p, e->dir, e->path))
            continue;
        if (revert_ok(h, p, log, i, owner, journal))
            add_revert(h, &back, e, profile, journal);
    }
    if (!back.n) {
        tune_plan_free(&back);
        return 0;
    }
    /* The reverts first, then the profile's own changes. */
    back.v = xrealloc(back.v, (back.n + p->n) * sizeof(*back.v));
    memcpy(back.v + back.n, p->v, p->n * sizeof(*p->v));
    size_t added = back.n;
    free(p->v);
    p->v = back.v;
    p->n += added;
    back.v = NULL;
    back.n = 0;
    tune_plan_free(&back);
    return (int)added;
}

/* "cpufreq.governor: the kernel refused 'x' for /sys/...: Invalid argument
 * (EINVAL); nothing was changed (3 values rolled back)". */
static char *refusal(const struct tune_change *c, int err, size_t undone, const char *rb_err)
{
    _cleanup_free_ char *kpath = host_kernel_path(c->dir, c->path);
    if (rb_err)
        return xasprintf("%s: %s refused '%s' for %s: %s (%s); rolling back failed too: "
                         "%s (watt restore retries)",
                         c->knob, c->dir == HOST_NVML ? "NVML" : "the kernel", c->new_value, kpath,
                         strerror(-err), errno_name(-err), rb_err);
    return xasprintf("%s: %s refused '%s' for %s: %s (%s); nothing was changed (%zu "
                     "value%s rolled back)",
                     c->knob, c->dir == HOST_NVML ? "NVML" : "the kernel", c->new_value, kpath,
                     strerror(-err), errno_name(-err), undone, undone == 1 ? "" : "s");
}

/* After a write: a note when the kernel shows another value (a frequency
 * clamped to the policy's limits, a word it normalised). */
static void read_back(struct host *h, const struct tune_change *c, struct tune_plan *notes)
{
    _cleanup_free_ char *raw = NULL;
    if (knob_io_read_str(h, c->dir, c->path, &raw) < 0)
        return;
    _cleanup_free_ char *now = tune_value_active(raw);
    if (streq(now, c->new_value))
        return;
    _cleanup_free_ char *kpath = host_kernel_path(c->dir, c->path);
    tune_plan_note(notes, "%s: wrote '%s' to %s, the kernel shows '%s'", c->knob, c->new_value,
                   kpath, now);
}

int tune_plan_apply_checked(struct journal *j, struct host *h, const struct tune_plan *p,
                            char ***ret_notes, size_t *ret_nnotes, char **ret_err)
{
    struct tune_plan notes = {0};
    journal_begin(j);
    for (size_t i = 0; i < p->n; i++) {
        const struct tune_change *c = &p->v[i];
        int r = journal_set(j, c->dir, c->path, c->new_value, NULL);
        if (r < 0) {
            _cleanup_free_ char *rb_err = NULL;
            int rr = journal_rollback(j, &rb_err);
            if (rr < 0 && !rb_err)
                rb_err = xstrdup(strerror(-rr));
            if (ret_err)
                *ret_err = refusal(c, r, i, rr < 0 ? rb_err : NULL);
            tune_plan_free(&notes);
            return r;
        }
        if (h)
            read_back(h, c, &notes);
    }
    if (ret_notes) {
        *ret_notes = TAKE_PTR(notes.notes);
        *ret_nnotes = notes.nnotes;
        notes.nnotes = 0;
    }
    tune_plan_free(&notes);
    return 0;
}

int tune_plan_apply(struct journal *j, const struct tune_plan *p, char **ret_err)
{
    return tune_plan_apply_checked(j, NULL, p, NULL, NULL, ret_err);
}
