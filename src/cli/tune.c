/* `watt tune` and `watt restore`: apply a profile through the undo
 * journal (printing the diff first), show what differs from the original
 * values, list and show profiles, and put every value back. */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/json.h"
#include "base/jsondoc.h"
#include "base/parse.h"
#include "base/text.h"
#include "base/util.h"
#include "cli/tune_workload.h"
#include "cli/verbs.h"
#include "host/host.h"
#include "sense/devpolicy.h"
#include "tune/journal.h"
#include "tune/plan.h"
#include "tune/profile.h"
#include "tune/recommend.h"
#include "tune/verify.h"
#include "view/report.h"

enum tune_mode {
    MODE_APPLY,
    MODE_STATUS,
    MODE_LIST,
    MODE_SHOW,
    MODE_RESTORE,
    MODE_RECOMMEND,
};

struct tune_opts {
    enum tune_mode mode;
    const char *profile, *root, *confdir, *journal, *owner;
    bool dry_run, json, verify, verbose, force;
    double verify_s;
    const char *workload; /* --workload CMD: run during each verify window */
};

/* Everything one run holds, freed in one place. */
struct tune_run {
    struct tune_opts o;
    const char *verb; /* "tune", "restore": for messages */
    struct host *h;
    char *journal_shown; /* display path of the journal; owned */
};

static void tune_usage(FILE *f)
{
    fputs("usage: watt tune PROFILE [--dry-run] [--verify[=SECONDS] [--workload CMD]]\n"
          "       watt tune --status | --list | --show PROFILE | --recommend\n"
          "\n"
          "Apply a tuning profile: print what changes (path: old -> new, and why), then\n"
          "write it through the undo journal, all or nothing. A profile is applied over\n"
          "the machine's original values: what an earlier profile set and this one does\n"
          "not goes back. `watt restore` puts every value back.\n"
          "\n"
          "  -n, --dry-run          print the changes, change nothing\n"
          "  -v, --verbose          every file (else files with the same change are folded:\n"
          "                         cpufreq/policy{0-39}/scaling_governor)\n"
          "      --verify[=S]       measure S seconds (default 5) before and after, print both\n"
          "      --workload CMD     with --verify: run CMD (sh -c) back to back in each window;\n"
          "                         its completed runs per second are its throughput\n"
          "      --status           what differs from the original values, and the journal\n"
          "      --list             the profiles: built-in and in CONFDIR/profiles.d\n"
          "      --show PROFILE     a profile's settings, includes resolved, with origins\n"
          "      --recommend        the built-in profile that fits this machine, and why\n"
          "  -r, --root DIR         a recorded tree instead of / (also $WATT_ROOT)\n"
          "  -c, --config-dir DIR   profiles.d/ and devices.conf (default /etc/watt;\n"
          "                         also $WATT_CONFIG_DIR)\n"
          "      --journal PATH     the journal, relative to the root\n"
          "                         (default var/lib/watt/journal)\n"
          "  -j, --json             one JSON document\n"
          "\n"
          "Exit status: 0 done, 1 error (nothing changed), 2 usage. See docs/tune.md.\n",
          f);
}

static void restore_usage(FILE *f)
{
    fputs("usage: watt restore [--dry-run] [--force] [--owner OWNER] [--root DIR] "
          "[--journal PATH] [--json]\n"
          "\n"
          "Put back every value watt changed, newest first, from the undo journal, and clear\n"
          "the journal. Only files of watt's knob table are ever written. A value someone\n"
          "changed since watt wrote it is left as it is (and kept in the journal); a record\n"
          "of an earlier boot is not written (the boot set the file) and is moved to\n"
          "JOURNAL.earlier-boot; a corrupt line is moved to JOURNAL.corrupt.\n"
          "\n"
          "  -n, --dry-run      print what would be written, write nothing\n"
          "  -f, --force        also write values changed since, and an earlier boot's\n"
          "      --owner OWNER  only the values OWNER changed (cli, agent)\n"
          "  -r, --root DIR     a recorded tree instead of / (also $WATT_ROOT)\n"
          "      --journal PATH the journal, relative to the root (default var/lib/watt/journal)\n"
          "  -j, --json         one JSON document\n"
          "\n"
          "Exit status: 0 everything restored (or of an earlier boot), 1 something failed,\n"
          "was refused, left as changed or skipped as corrupt, 2 usage.\n",
          f);
}

enum {
    OPT_STATUS = 0x100,
    OPT_LIST,
    OPT_SHOW,
    OPT_VERIFY,
    OPT_JOURNAL,
    OPT_OWNER,
    OPT_FORCE,
    OPT_RECOMMEND,
    OPT_WORKLOAD,
};

static int usage_error(const char *verb, const char *msg, const char *arg)
{
    text_printf(stderr, "watt %s: %s%s%s%s (see watt %s --help)\n", verb, msg, arg ? " '" : "",
                arg ? arg : "", arg ? "'" : "", verb);
    return -EINVAL;
}

static int set_mode(struct tune_opts *o, enum tune_mode m, const char *verb)
{
    if (o->mode != MODE_APPLY && o->mode != m)
        return usage_error(verb, "--status, --list, --show and --recommend go alone", NULL);
    o->mode = m;
    return 0;
}

static int parse_one(struct tune_opts *o, int ch, const char *verb)
{
    switch (ch) {
    case 'n':
        o->dry_run = true;
        return 0;
    case 'j':
        o->json = true;
        return 0;
    case 'v':
        o->verbose = true;
        return 0;
    case 'r':
        o->root = optarg;
        return 0;
    case 'c':
        o->confdir = optarg;
        return 0;
    case OPT_JOURNAL:
        o->journal = optarg;
        while (*o->journal == '/')
            o->journal++; /* root-relative: "/var/lib/watt/journal" means the same */
        return *o->journal ? 0 : usage_error(verb, "--journal wants a file path", NULL);
    case OPT_OWNER:
        o->owner = optarg;
        return 0;
    case 'f':
        o->force = true;
        return 0;
    case OPT_STATUS:
        return set_mode(o, MODE_STATUS, verb);
    case OPT_LIST:
        return set_mode(o, MODE_LIST, verb);
    case OPT_SHOW:
        o->profile = optarg;
        return set_mode(o, MODE_SHOW, verb);
    case OPT_RECOMMEND:
        return set_mode(o, MODE_RECOMMEND, verb);
    case OPT_WORKLOAD:
        o->workload = optarg;
        return *optarg ? 0 : usage_error(verb, "--workload wants a command", NULL);
    case OPT_VERIFY:
        o->verify = true;
        if (optarg &&
            (parse_double(optarg, &o->verify_s) < 0 || !(o->verify_s > 0) || o->verify_s > 3600))
            return usage_error(verb, "--verify wants seconds in (0, 3600], not", optarg);
        return 0;
    case 'h':
        (streq(verb, "tune") ? tune_usage : restore_usage)(stdout);
        return 1;
    default:
        (streq(verb, "tune") ? tune_usage : restore_usage)(stderr);
        return -EINVAL;
    }
}

static int check_tune_opts(struct tune_opts *o, int argc, char **argv)
{
    if (o->mode == MODE_APPLY || o->mode == MODE_SHOW) {
        if (o->mode == MODE_APPLY && optind < argc)
            o->profile = argv[optind++];
        if (!o->profile)
            return usage_error("tune", "which profile? (watt tune --list shows them)", NULL);
    }
    if (optind < argc)
        return usage_error("tune", "unexpected argument", argv[optind]);
    if (o->mode != MODE_APPLY && (o->dry_run || o->verify))
        return usage_error("tune", "--dry-run and --verify go with a profile to apply", NULL);
    if (o->workload && !o->verify)
        return usage_error("tune", "--workload runs during --verify's windows: add --verify", NULL);
    if (o->dry_run && o->verify)
        return usage_error("tune", "--verify measures a change: it cannot go with --dry-run", NULL);
    if (o->owner || o->force)
        return usage_error("tune", "--owner and --force are for watt restore", NULL);
    return 0;
}

static int parse_opts(int argc, char **argv, const char *verb, struct tune_opts *o)
{
    static const struct option opts[] = {
        {"dry-run", no_argument, NULL, 'n'},
        {"json", no_argument, NULL, 'j'},
        {"verbose", no_argument, NULL, 'v'},
        {"root", required_argument, NULL, 'r'},
        {"config-dir", required_argument, NULL, 'c'},
        {"journal", required_argument, NULL, OPT_JOURNAL},
        {"owner", required_argument, NULL, OPT_OWNER},
        {"force", no_argument, NULL, 'f'},
        {"status", no_argument, NULL, OPT_STATUS},
        {"list", no_argument, NULL, OPT_LIST},
        {"show", required_argument, NULL, OPT_SHOW},
        {"verify", optional_argument, NULL, OPT_VERIFY},
        {"workload", required_argument, NULL, OPT_WORKLOAD},
        {"recommend", no_argument, NULL, OPT_RECOMMEND},
        {"help", no_argument, NULL, 'h'},
        {0},
    };
    *o = (struct tune_opts){.verify_s = 5.0};
    int ch, r;
    optind = 1;
    opterr = 1;
    while ((ch = getopt_long(argc, argv, "njvfr:c:h", opts, NULL)) != -1)
        if ((r = parse_one(o, ch, verb)) != 0)
            return r;
    if (!o->confdir)
        o->confdir = getenv("WATT_CONFIG_DIR");
    if (!o->confdir || !*o->confdir)
        o->confdir = PROFILE_CONFDIR_DEFAULT;
    if (!o->journal)
        o->journal = JOURNAL_DEFAULT_PATH;
    if (streq(verb, "tune"))
        return check_tune_opts(o, argc, argv);
    if (o->mode != MODE_APPLY || o->verify || o->workload)
        return usage_error(
            verb,
            "--status, --list, --show, --recommend, --verify and --workload are for watt tune",
            NULL);
    if (optind < argc)
        return usage_error(verb, "unexpected argument", argv[optind]);
    o->mode = MODE_RESTORE;
    return 0;
}

static void print_json(struct json *j)
{
    fputs(strbuf_str(&j->out), stdout);
    fputc('\n', stdout);
    json_free(j);
}

static void json_strings(struct json *j, const char *key, char *const *v, size_t n)
{
    json_key(j, key);
    json_array_begin(j);
    for (size_t i = 0; i < n; i++)
        json_string(j, v[i]);
    json_array_end(j);
}

/* ---------------------------------------------------------------- the diff */

/* Paths that differ only in decimal numbers ("policy0" .. "policy39") as
 * one pattern: "cpufreq/policy{0-39}/scaling_governor". Every number
 * position lists its values; the pattern is used only when it stands for
 * exactly these paths (their count is the product of the value counts).
 * NULL when they do not fold. Owned. */
struct path_tokens {
    size_t n;
    const char *tok[32];
    size_t len[32];
};

static bool tokenize(const char *s, struct path_tokens *t)
{
    t->n = 0;
    while (*s) {
        if (t->n == ARRAY_SIZE(t->tok))
            return false;
        bool digit = isdigit((unsigned char)*s);
        size_t l = 0;
        while (s[l] && !!isdigit((unsigned char)s[l]) == digit)
            l++;
        if (digit && l > 1 && s[0] == '0')
            return false; /* "0000:00:17.0": an address, not a count */
        t->tok[t->n] = s;
        t->len[t->n++] = l;
        s += l;
    }
    return true;
}

static int cmp_ul(const void *a, const void *b)
{
    unsigned long x = *(const unsigned long *)a, y = *(const unsigned long *)b;
    return (x > y) - (x < y);
}

/* The sorted distinct numbers at token K of every path, as "3" or "{0-3,8}". */
static void fold_position(struct path_tokens *t, size_t n, size_t k, struct strbuf *out,
                          size_t *ret_distinct)
{
    _cleanup_free_ unsigned long *v = xcalloc(n, sizeof(*v));
    for (size_t i = 0; i < n; i++)
        v[i] = strtoul(t[i].tok[k], NULL, 10);
    qsort(v, n, sizeof(*v), cmp_ul);
    size_t d = 0;
    for (size_t i = 0; i < n; i++)
        if (i == 0 || v[i] != v[d - 1])
            v[d++] = v[i];
    *ret_distinct = d;
    if (d == 1) {
        strbuf_appendf(out, "%lu", v[0]);
        return;
    }
    strbuf_append(out, "{");
    for (size_t i = 0; i < d;) {
        size_t j = i;
        while (j + 1 < d && v[j + 1] == v[j] + 1)
            j++;
        strbuf_appendf(out, i ? ",%lu" : "%lu", v[i]);
        if (j > i)
            strbuf_appendf(out, j == i + 1 ? ",%lu" : "-%lu", v[j]);
        i = j + 1;
    }
    strbuf_append(out, "}");
}

static char *fold_paths(char **paths, size_t n)
{
    _cleanup_free_ struct path_tokens *t = xcalloc(n, sizeof(*t));
    for (size_t i = 0; i < n; i++)
        if (!tokenize(paths[i], &t[i]) || t[i].n != t[0].n)
            return NULL;
    struct strbuf out = {0};
    double combos = 1;
    for (size_t k = 0; k < t[0].n; k++) {
        bool digit = isdigit((unsigned char)t[0].tok[k][0]);
        for (size_t i = 1; !digit && i < n; i++)
            if (t[i].len[k] != t[0].len[k] || memcmp(t[i].tok[k], t[0].tok[k], t[0].len[k])) {
                strbuf_free(&out);
                return NULL;
            }
        if (!digit) {
            strbuf_append_n(&out, t[0].tok[k], t[0].len[k]);
            continue;
        }
        size_t d;
        fold_position(t, n, k, &out, &d);
        combos *= (double)d;
    }
    if (combos != (double)n) { /* not a full product, or a path listed twice */
        strbuf_free(&out);
        return NULL;
    }
    return strbuf_steal(&out);
}

static bool same_change(const struct tune_change *a, const struct tune_change *b)
{
    return a->dir == b->dir && streq(a->knob, b->knob) && streq(a->new_value, b->new_value) &&
           streq(a->why, b->why) && streq(a->origin, b->origin) &&
           streq(a->old_value ? a->old_value : "?", b->old_value ? b->old_value : "?");
}

static void print_change(const struct tune_change *c, const char *kpath, size_t nfiles)
{
    text_printf(stdout, "    %s: %s -> %s  (%s; %s)", kpath, c->old_value ? c->old_value : "?",
                c->new_value, c->why, c->origin);
    if (nfiles > 1)
        text_printf(stdout, "  [%zu files]", nfiles);
    putchar('\n');
}

/* The changes of one knob: with VERBOSE every file, else changes that are
 * the same but for a number in their path folded into one line. */
static void print_knob(const struct tune_plan *p, size_t first, bool verbose)
{
    const char *knob = p->v[first].knob;
    _cleanup_free_ bool *done = xcalloc(p->n, sizeof(*done));
    _cleanup_free_ char **paths = xcalloc(p->n, sizeof(*paths));
    _cleanup_free_ size_t *idx = xcalloc(p->n, sizeof(*idx));
    for (size_t i = first; i < p->n; i++) {
        if (done[i] || !streq(p->v[i].knob, knob))
            continue;
        size_t n = 0;
        for (size_t k = i; k < p->n; k++)
            if (!done[k] && (k == i || (!verbose && same_change(&p->v[i], &p->v[k])))) {
                done[k] = true;
                idx[n] = k;
                paths[n++] = host_kernel_path(p->v[k].dir, p->v[k].path);
            }
        _cleanup_free_ char *folded = n > 1 ? fold_paths(paths, n) : NULL;
        if (folded)
            print_change(&p->v[i], folded, n);
        for (size_t m = 0; m < n; m++) {
            if (!folded)
                print_change(&p->v[idx[m]], paths[m], 1);
            free(paths[m]);
        }
    }
}

static void print_changes(const struct tune_plan *p, bool verbose)
{
    for (size_t i = 0; i < p->n; i++) {
        bool first = true;
        for (size_t k = 0; k < i && first; k++)
            first = !streq(p->v[k].knob, p->v[i].knob);
        if (!first)
            continue; /* printed with its knob's group */
        size_t count = 0;
        for (size_t k = i; k < p->n; k++)
            count += streq(p->v[k].knob, p->v[i].knob);
        text_printf(stdout, "  %s (%zu)\n", p->v[i].knob, count);
        print_knob(p, i, verbose);
    }
}

static void print_plan(const struct profile *pr, const struct tune_plan *p, bool verbose)
{
    text_printf(stdout, "Profile %s (%s)%s%s\n", pr->name, pr->origin, pr->description ? ": " : "",
                pr->description ? pr->description : "");
    if (p->n) {
        text_printf(stdout, "\nChanges (%zu):\n", p->n);
        print_changes(p, verbose);
    } else {
        text_printf(stdout, "\nNo changes: the machine already has every value of %s.\n", pr->name);
    }
    if (p->nnotes) {
        text_printf(stdout, "\nNotes (%zu):\n", p->nnotes);
        for (size_t i = 0; i < p->nnotes; i++)
            text_printf(stdout, "  %s\n", p->notes[i]);
    }
}

static void plan_json(struct json *j, const struct profile *pr, const struct tune_plan *p)
{
    json_kv_string(j, "profile", pr->name);
    json_kv_string(j, "profile_origin", pr->origin);
    json_kv_string(j, "description", pr->description);
    json_key(j, "changes");
    json_array_begin(j);
    for (size_t i = 0; i < p->n; i++) {
        const struct tune_change *c = &p->v[i];
        _cleanup_free_ char *kpath = host_kernel_path(c->dir, c->path);
        json_object_begin(j);
        json_kv_string(j, "knob", c->knob);
        json_kv_string(j, "path", kpath);
        json_kv_string(j, "old", c->old_value);
        json_kv_string(j, "new", c->new_value);
        json_kv_string(j, "why", c->why);
        json_kv_string(j, "origin", c->origin);
        json_object_end(j);
    }
    json_array_end(j);
    json_strings(j, "notes", p->notes, p->nnotes);
}

/* ---------------------------------------------------------------- apply */

static int load_profile(struct tune_run *t, struct profile **ret)
{
    _cleanup_free_ char *err = NULL;
    int r = profile_load(t->o.profile, t->o.confdir, ret, &err);
    if (r < 0)
        text_printf(stderr, "watt tune: %s\n", err ? err : strerror(-r));
    return r;
}

/* The journal as it is (empty when there is none yet); problems to stderr. */
static int read_journal(struct tune_run *t, struct journal_log *log)
{
    _cleanup_free_ char *err = NULL;
    int r = journal_read_err(t->h, t->o.journal, log, &err);
    if (r == -ENOENT) {
        *log = (struct journal_log){0};
        return 0;
    }
    if (r < 0) {
        text_printf(stderr, "watt %s: cannot read the journal %s: %s\n", t->verb, t->journal_shown,
                    err ? err : strerror(-r));
        return r;
    }
    for (size_t i = 0; i < log->nproblems; i++)
        text_printf(stderr, "watt %s: %s\n", t->verb, log->problems[i]);
    return 0;
}

static int build_plan(struct tune_run *t, const struct profile *pr, struct tune_plan *plan)
{
    struct devpolicy *dp = NULL;
    _cleanup_free_ char *err = NULL;
    int r = devpolicy_load(t->o.confdir, &dp, &err);
    if (r < 0) {
        text_printf(stderr, "watt tune: %s\n", err ? err : strerror(-r));
        return r;
    }
    r = tune_plan_build(t->h, pr, dp, plan, &err);
    devpolicy_free(dp);
    if (r < 0) {
        text_printf(stderr, "watt tune: %s\n", err ? err : strerror(-r));
        return r;
    }
    struct journal_log log;
    if ((r = read_journal(t, &log)) < 0) {
        tune_plan_free(plan);
        return r;
    }
    tune_plan_add_reverts(t->h, plan, &log, "cli", pr->name, t->journal_shown);
    journal_log_free(&log);
    return 0;
}

static int measure(struct tune_run *t, const char *when, struct tune_verify_window **ret)
{
    _cleanup_free_ char *err = NULL;
    if (t->o.workload && !t->h->live) {
        text_printf(stderr, "watt tune: --workload needs the live machine: a recorded root's "
                            "window replays its recorded second\n");
        return -EINVAL;
    }
    if (!t->o.json)
        text_printf(stderr, "watt tune: measuring %g s %s the change...\n", t->o.verify_s, when);
    struct tune_workload wl = {0};
    int r = t->o.workload ? tune_workload_start(t->o.workload, &wl) : 0;
    if (r < 0) {
        text_printf(stderr, "watt tune: --workload: cannot start it: %s\n", strerror(-r));
        return r;
    }
    r = tune_verify_measure(t->h, t->o.verify_s, ret, &err);
    if (t->o.workload) {
        uint64_t ok, failed;
        double s;
        tune_workload_stop(&wl, &ok, &failed, &s);
        if (r >= 0) {
            (*ret)->workload_runs = ok;
            (*ret)->workload_failed = failed;
            (*ret)->workload_runs_per_s = (double)ok / s;
        }
    }
    if (r < 0)
        text_printf(stderr, "watt tune: --verify: %s\n", err ? err : strerror(-r));
    return r;
}

/* Apply under the journal's lock; notes from reading back. */
/* Ctrl-C, SIGTERM or SIGHUP during the writes would leave half of a
 * profile applied (the journal covers it, but "all or nothing" would not
 * hold). They are held back while the transaction runs; one that came
 * meanwhile rolls the whole transaction back. */
static int interrupted(struct journal *j, const sigset_t *stop)
{
    const struct timespec now = {0};
    int sig = sigtimedwait(stop, NULL, &now);
    if (sig <= 0)
        return 0;
    _cleanup_free_ char *err = NULL;
    int r = journal_rollback(j, &err);
    text_printf(stderr, "watt tune: interrupted by %s during the apply; %s\n", strsignal(sig),
                r < 0 ? (err ? err : "the rollback failed: run watt restore")
                      : "every value was rolled back, nothing was changed");
    return -EINTR;
}

static int apply(struct tune_run *t, struct journal *j, const struct tune_plan *plan,
                 struct tune_plan *after)
{
    _cleanup_free_ char *err = NULL;
    sigset_t stop, old;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGHUP);
    sigprocmask(SIG_BLOCK, &stop, &old);
    int r = tune_plan_apply_checked(j, t->h, plan, &after->notes, &after->nnotes, &err);
    if (r < 0)
        text_printf(stderr, "watt tune: %s\n", err ? err : strerror(-r));
    else
        r = interrupted(j, &stop);
    sigprocmask(SIG_SETMASK, &old, NULL);
    return r;
}

struct apply_result {
    bool applied;
    struct tune_plan readback; /* notes only */
    struct tune_verify_window *before, *after;
};

static void print_result(struct tune_run *t, const struct tune_plan *plan,
                         const struct apply_result *res)
{
    if (res->readback.nnotes)
        text_printf(stdout, "\nRead back (%zu):\n", res->readback.nnotes);
    for (size_t i = 0; i < res->readback.nnotes; i++)
        text_printf(stdout, "  %s\n", res->readback.notes[i]);
    if (t->o.dry_run)
        text_printf(stdout, "\nDry run: nothing was changed.\n");
    else if (res->applied && plan->n)
        text_printf(stdout,
                    "\nApplied %zu change%s; the journal %s holds the original values "
                    "(watt restore puts them back).\n",
                    plan->n, plan->n == 1 ? "" : "s", t->journal_shown);
    if (res->before && res->after) {
        text_printf(stdout, "\nMeasured before and after:\n");
        tune_verify_print(stdout, res->before, res->after);
    }
}

static void result_json(struct tune_run *t, const struct profile *pr, const struct tune_plan *plan,
                        const struct apply_result *res)
{
    struct json j;
    json_init(&j, true);
    json_doc_begin(&j, "watt-tune/2", doc_time_now());
    json_kv_string(&j, "root", t->h->root);
    json_kv_bool(&j, "dry_run", t->o.dry_run);
    plan_json(&j, pr, plan);
    json_kv_bool(&j, "applied", res->applied);
    json_strings(&j, "readback", res->readback.notes, res->readback.nnotes);
    json_kv_string(&j, "journal", t->journal_shown);
    if (res->before && res->after) {
        json_key(&j, "verify");
        tune_verify_json(&j, res->before, res->after);
    }
    json_object_end(&j);
    print_json(&j);
}

static int do_apply(struct tune_run *t, const struct profile *pr, struct tune_plan *plan,
                    struct apply_result *res)
{
    struct journal *j = NULL;
    _cleanup_free_ char *err = NULL;
    /* The "before" window is measured without the lock: it lasts seconds
     * (up to an hour), and the agent's guard must be able to hold and
     * release meanwhile. */
    int r = t->o.verify ? measure(t, "before", &res->before) : 0;
    if (r < 0)
        return r;
    r = journal_open(t->h, t->o.journal, "cli", &j, &err);
    if (r < 0) {
        text_printf(stderr, "watt tune: %s\n", err ? err : strerror(-r));
        return r;
    }
    /* Plan under the lock, so no other tuner moves a value in between. */
    r = build_plan(t, pr, plan);
    if (r >= 0 && !t->o.json)
        print_plan(pr, plan, t->o.verbose);
    /* The diff is out before anything changes: a reader that has gone
     * (watt tune X | head -1) ends the run here by SIGPIPE, with nothing
     * changed, not after the apply with an exit status that says failed. */
    if (r >= 0 && fflush(stdout) != 0) {
        r = -errno;
        text_printf(stderr, "watt tune: cannot print the changes: %s; nothing was changed\n",
                    strerror(-r));
    }
    if (r >= 0 && plan->n) {
        r = apply(t, j, plan, &res->readback);
        res->applied = r >= 0;
    }
    /* Applied: the exit status says so even if the reader goes now. */
    if (res->applied)
        signal(SIGPIPE, SIG_IGN);
    journal_close(j);
    /* The changes stand whatever the "after" window gives: a failed
     * measurement is reported (by measure()) but the exit status stays 0,
     * which means "applied". */
    if (r >= 0 && t->o.verify && measure(t, "after", &res->after) < 0)
        res->after = NULL;
    return r;
}

static int run_apply(struct tune_run *t)
{
    struct profile *pr;
    if (load_profile(t, &pr) < 0)
        return 1;
    struct tune_plan plan = {0};
    struct apply_result res = {0};
    int r;
    if (t->o.dry_run) {
        r = build_plan(t, pr, &plan);
        if (r >= 0 && !t->o.json)
            print_plan(pr, &plan, t->o.verbose);
    } else {
        r = do_apply(t, pr, &plan, &res);
    }
    if (r >= 0 || res.applied) {
        if (t->o.json)
            result_json(t, pr, &plan, &res);
        else
            print_result(t, &plan, &res);
    }
    tune_verify_window_free(res.before);
    tune_verify_window_free(res.after);
    tune_plan_free(&res.readback);
    tune_plan_free(&plan);
    profile_free(pr);
    return r < 0 ? 1 : 0;
}

/* ---------------------------------------------------------------- status */

/* The first record of each path (its original value) and the newest
 * (what watt last wrote there). */
struct path_records {
    const struct journal_entry *first, *last;
};

static size_t path_records(const struct journal_log *log, struct path_records **ret)
{
    struct path_records *v = xcalloc(log->n ? log->n : 1, sizeof(*v));
    size_t n = 0;
    for (size_t i = 0; i < log->n; i++) {
        const struct journal_entry *e = &log->v[i];
        size_t k = 0;
        while (k < n && !(v[k].first->dir == e->dir && streq(v[k].first->path, e->path)))
            k++;
        if (k == n)
            v[n++] = (struct path_records){e, e};
        else
            v[k].last = e;
    }
    *ret = v;
    return n;
}

struct status_row {
    const struct journal_entry *e, *last;
    enum journal_verdict verdict;
    char *orig, *now, *wrote; /* active values, escaped; now NULL when unreadable */
    const char *why;          /* REFUSED: why */
};

/* One row per path the journal holds whose value is not its original:
 * watt's (the file shows what watt wrote), someone else's since, an
 * earlier boot's, or a record the journal refuses. */
static size_t status_rows(struct tune_run *t, const struct journal_log *log,
                          struct status_row **ret)
{
    struct path_records *v;
    size_t n = path_records(log, &v), nrows = 0;
    struct status_row *rows = xcalloc(n ? n : 1, sizeof(*rows));
    for (size_t i = 0; i < n; i++) {
        char *now = NULL;
        const char *why = NULL;
        enum journal_verdict verdict = journal_judge(t->h, log, v[i].last, &now, &why);
        _cleanup_free_ char *orig = journal_value_active(v[i].first->old_value);
        if (verdict == JOURNAL_GONE || (now && streq(now, orig) && verdict != JOURNAL_REFUSED)) {
            free(now);
            continue;
        }
        _cleanup_free_ char *wrote = journal_value_active(journal_entry_written(v[i].last));
        rows[nrows++] = (struct status_row){
            .e = v[i].first,
            .last = v[i].last,
            .verdict = verdict,
            .orig = journal_escape(orig),
            .now = now ? journal_escape(now) : NULL,
            .wrote = journal_escape(wrote),
            .why = why,
        };
        free(now);
    }
    free(v);
    *ret = rows;
    return nrows;
}

static const char *verdict_word(enum journal_verdict v)
{
    switch (v) {
    case JOURNAL_OURS:
        return "watt";
    case JOURNAL_CHANGED:
        return "changed-since";
    case JOURNAL_EARLIER_BOOT:
        return "earlier-boot";
    case JOURNAL_REFUSED:
        return "refused";
    case JOURNAL_GONE:
        return "gone";
    default:
        return "unreadable";
    }
}

static size_t count_rows(const struct status_row *rows, size_t n, enum journal_verdict v)
{
    size_t c = 0;
    for (size_t i = 0; i < n; i++)
        c += rows[i].verdict == v;
    return c;
}

static void status_section(const struct status_row *rows, size_t n, enum journal_verdict v,
                           const char *title)
{
    size_t c = count_rows(rows, n, v);
    if (!c)
        return;
    text_printf(stdout, "%s (%zu):\n", title, c);
    for (size_t i = 0; i < n; i++) {
        if (rows[i].verdict != v)
            continue;
        const struct journal_entry *e = rows[i].e;
        if (v == JOURNAL_REFUSED) {
            _cleanup_free_ char *path = journal_escape(e->path);
            text_printf(stdout, "  journal line %u: %s/%s: %s\n", rows[i].last->line,
                        host_dir_name(e->dir), path, rows[i].why);
            continue;
        }
        _cleanup_free_ char *kpath = host_kernel_path(e->dir, e->path);
        const char *knob = tune_knob_for_path(e->dir, e->path);
        const char *now = rows[i].now ? rows[i].now : "unreadable";
        if (v == JOURNAL_CHANGED || v == JOURNAL_EARLIER_BOOT)
            text_printf(stdout, "  %s: %s, watt wrote %s, now %s  (%s%s%s)\n", kpath, rows[i].orig,
                        rows[i].wrote, now, knob ? knob : "", knob ? ", " : "",
                        e->owner ? e->owner : "?");
        else
            text_printf(stdout, "  %s: %s -> %s  (%s%s%s)\n", kpath, rows[i].orig, now,
                        knob ? knob : "", knob ? ", " : "", e->owner ? e->owner : "?");
    }
}

static void status_text(struct tune_run *t, const struct journal_log *log,
                        const struct status_row *rows, size_t n)
{
    size_t ours = count_rows(rows, n, JOURNAL_OURS) + count_rows(rows, n, JOURNAL_UNREADABLE);
    if (!n)
        text_printf(stdout, "Nothing differs from the original values.\n");
    else if (!ours)
        text_printf(stdout, "Nothing watt changed differs from the original values.\n");
    status_section(rows, n, JOURNAL_OURS, "Changed from the original values");
    status_section(rows, n, JOURNAL_UNREADABLE, "Changed by watt, now unreadable");
    status_section(rows, n, JOURNAL_CHANGED,
                   "Changed since by someone else (watt restore leaves these; --force puts the "
                   "originals back)");
    status_section(rows, n, JOURNAL_EARLIER_BOOT,
                   "From an earlier boot (watt restore moves these records aside)");
    status_section(rows, n, JOURNAL_REFUSED,
                   "Refused records (no knob of watt's: never written back)");
    text_printf(stdout, "\nJournal %s: %zu record%s", t->journal_shown, log->n,
                log->n == 1 ? "" : "s");
    if (log->nproblems)
        text_printf(stdout, ", %zu line%s skipped", log->nproblems, log->nproblems == 1 ? "" : "s");
    text_printf(stdout, ".\n");
    for (size_t i = 0; i < log->nproblems; i++)
        text_printf(stdout, "  %s\n", log->problems[i]);
}

static void status_json(struct tune_run *t, const struct journal_log *log,
                        const struct status_row *rows, size_t n)
{
    struct json j;
    json_init(&j, true);
    json_doc_begin(&j, "watt-tune-status/2", doc_time_now());
    json_kv_string(&j, "journal", t->journal_shown);
    json_kv_u64(&j, "records", log->n);
    json_key(&j, "changed");
    json_array_begin(&j);
    for (size_t pass = 0; pass < 2; pass++) /* watt's first, then the others */
        for (size_t i = 0; i < n; i++) {
            const struct status_row *r = &rows[i];
            bool ours = r->verdict == JOURNAL_OURS || r->verdict == JOURNAL_UNREADABLE;
            if (ours != (pass == 0))
                continue;
            _cleanup_free_ char *kpath = host_kernel_path(r->e->dir, r->e->path);
            json_object_begin(&j);
            json_kv_string(&j, "path", kpath);
            json_kv_string(&j, "knob", tune_knob_for_path(r->e->dir, r->e->path));
            json_kv_string(&j, "original", r->orig);
            json_kv_string(&j, "wrote", r->wrote);
            json_kv_string(&j, "now", r->now);
            json_kv_string(&j, "by", verdict_word(r->verdict));
            json_kv_string(&j, "error", r->verdict == JOURNAL_UNREADABLE ? "unreadable" : NULL);
            json_kv_string(&j, "refused", r->why);
            json_kv_string(&j, "owner", r->e->owner);
            json_kv_u64(&j, "line", r->last->line);
            json_object_end(&j);
        }
    json_array_end(&j);
    json_strings(&j, "problems", log->problems, log->nproblems);
    json_object_end(&j);
    print_json(&j);
}

static int run_status(struct tune_run *t)
{
    struct journal_log log;
    if (read_journal(t, &log) < 0)
        return 1;
    struct status_row *rows;
    size_t n = status_rows(t, &log, &rows);
    if (t->o.json)
        status_json(t, &log, rows, n);
    else
        status_text(t, &log, rows, n);
    for (size_t i = 0; i < n; i++) {
        free(rows[i].orig);
        free(rows[i].now);
        free(rows[i].wrote);
    }
    free(rows);
    journal_log_free(&log);
    return 0;
}

/* ---------------------------------------------------------------- list, show */

static int run_list(struct tune_run *t)
{
    char **names;
    size_t n;
    int r = profile_list(t->o.confdir, &names, &n);
    if (r < 0) {
        text_printf(stderr, "watt tune: cannot list the profiles in %s/profiles.d: %s\n",
                    t->o.confdir, strerror(-r));
        return 1;
    }
    struct json j;
    json_init(&j, true);
    json_doc_begin(&j, "watt-tune-list/1", doc_time_now());
    json_key(&j, "profiles");
    json_array_begin(&j);
    if (!t->o.json)
        text_printf(stdout, "Profiles (built-in, and in %s/profiles.d):\n", t->o.confdir);
    for (size_t i = 0; i < n; i++) {
        struct profile *p = NULL;
        _cleanup_free_ char *err = NULL;
        r = profile_load(names[i], t->o.confdir, &p, &err);
        const char *desc = r < 0 ? NULL : p->description;
        bool builtin = r >= 0 && strncmp(p->origin, "built-in", 8) == 0;
        const char *kind = r < 0 ? "broken" : builtin ? "built-in" : "user";
        json_object_begin(&j);
        json_kv_string(&j, "name", names[i]);
        json_kv_string(&j, "kind", kind);
        json_kv_string(&j, "origin", r < 0 ? NULL : p->origin);
        json_kv_string(&j, "description", desc);
        json_kv_string(&j, "error", r < 0 ? err : NULL);
        json_object_end(&j);
        if (!t->o.json && r < 0)
            text_printf(stdout, "  %-14s %-9s %s\n", names[i], kind, err);
        else if (!t->o.json)
            text_printf(stdout, "  %-14s %-9s %s%s%s%s\n", names[i], kind, desc ? desc : "",
                        builtin ? "" : " (", builtin ? "" : p->origin, builtin ? "" : ")");
        profile_free(p);
        free(names[i]);
    }
    json_array_end(&j);
    json_object_end(&j);
    free(names);
    if (t->o.json)
        print_json(&j);
    else
        json_free(&j);
    return 0;
}

static void show_text(const struct profile *p)
{
    text_printf(stdout, "Profile %s (%s)%s%s\n", p->name, p->origin, p->description ? ": " : "",
                p->description ? p->description : "");
    const char *section = NULL;
    for (size_t i = 0; i < p->n; i++) {
        const struct profile_value *v = &p->v[i];
        bool shown = false; /* sections in first-set order, keys under theirs */
        for (size_t k = 0; k < i && !shown; k++)
            shown = streq(p->v[k].section, v->section);
        if (shown)
            continue;
        section = v->section;
        text_printf(stdout, "\n[%s]\n", section);
        for (size_t k = i; k < p->n; k++)
            if (streq(p->v[k].section, section)) {
                _cleanup_free_ char *kv = xasprintf("%s = %s", p->v[k].key, p->v[k].value);
                text_printf(stdout, "  %-36s ; %s\n", kv, p->v[k].origin);
            }
    }
    if (!p->n)
        text_printf(stdout, "\n(no settings)\n");
}

static int run_show(struct tune_run *t)
{
    struct profile *p;
    if (load_profile(t, &p) < 0)
        return 1;
    if (!t->o.json) {
        show_text(p);
    } else {
        struct json j;
        json_init(&j, true);
        json_doc_begin(&j, "watt-tune-show/1", doc_time_now());
        json_kv_string(&j, "name", p->name);
        json_kv_string(&j, "origin", p->origin);
        json_kv_string(&j, "description", p->description);
        json_key(&j, "settings");
        json_array_begin(&j);
        for (size_t i = 0; i < p->n; i++) {
            json_object_begin(&j);
            json_kv_string(&j, "section", p->v[i].section);
            json_kv_string(&j, "key", p->v[i].key);
            json_kv_string(&j, "value", p->v[i].value);
            json_kv_string(&j, "origin", p->v[i].origin);
            json_object_end(&j);
        }
        json_array_end(&j);
        json_object_end(&j);
        print_json(&j);
    }
    profile_free(p);
    return 0;
}

/* ---------------------------------------------------------------- restore */

static void restore_print(struct tune_run *t, const struct journal_restore_report *rep, int r)
{
    if (t->o.json) {
        struct json j;
        json_init(&j, true);
        json_doc_begin(&j, "watt-restore/2", doc_time_now());
        json_kv_string(&j, "journal", t->journal_shown);
        json_kv_bool(&j, "dry_run", t->o.dry_run);
        json_kv_bool(&j, "force", t->o.force);
        json_kv_u64(&j, "restored", rep->restored);
        json_kv_u64(&j, "failed", rep->failed);
        json_kv_u64(&j, "skipped", rep->skipped);
        json_kv_u64(&j, "gone", rep->gone);
        json_kv_u64(&j, "refused", rep->refused);
        json_kv_u64(&j, "changed", rep->changed);
        json_kv_u64(&j, "earlier_boot", rep->earlier_boot);
        json_kv_string(&j, "corrupt_file", rep->corrupt_file);
        json_kv_string(&j, "earlier_boot_file", rep->boot_file);
        json_strings(&j, "lines", rep->lines, rep->nlines);
        json_kv_bool(&j, "ok", r >= 0);
        json_object_end(&j);
        print_json(&j);
        return;
    }
    for (size_t i = 0; i < rep->nlines; i++)
        text_printf(stdout, "  %s\n", rep->lines[i]);
    text_printf(stdout, "%s %zu value%s from %s; %zu failed, %zu skipped",
                t->o.dry_run ? "Would restore" : "Restored", rep->restored,
                rep->restored == 1 ? "" : "s", t->journal_shown, rep->failed, rep->skipped);
    if (rep->gone)
        text_printf(stdout, ", %zu gone", rep->gone);
    if (rep->refused)
        text_printf(stdout, ", %zu refused", rep->refused);
    if (rep->changed)
        text_printf(stdout, ", %zu changed since (left)", rep->changed);
    if (rep->earlier_boot)
        text_printf(stdout, ", %zu of an earlier boot (left)", rep->earlier_boot);
    text_printf(stdout, ".\n");
}

/* What could not be done, on stderr, one sentence each. */
static void restore_explain(struct tune_run *t, const struct journal_restore_report *rep, int r)
{
    const char *me = "watt restore";
    if (r < 0 && r != -EIO)
        text_printf(stderr, "%s: %s: %s\n", me, t->journal_shown, strerror(-r));
    if (rep->failed)
        text_printf(stderr,
                    "%s: %zu value%s not restored (see above); the journal keeps %s for "
                    "another try\n",
                    me, rep->failed, rep->failed == 1 ? "" : "s", rep->failed == 1 ? "it" : "them");
    if (rep->refused)
        text_printf(stderr,
                    "%s: %zu journal record%s refused: %s no file watt changes (see above); "
                    "kept in the journal, never written\n",
                    me, rep->refused, rep->refused == 1 ? "" : "s",
                    rep->refused == 1 ? "it names" : "they name");
    if (rep->changed)
        text_printf(stderr,
                    "%s: %zu value%s changed since watt wrote %s: left as %s, kept in the "
                    "journal (watt restore --force puts the original%s back)\n",
                    me, rep->changed, rep->changed == 1 ? "" : "s",
                    rep->changed == 1 ? "it" : "them", rep->changed == 1 ? "it is" : "they are",
                    rep->changed == 1 ? "" : "s");
    if (rep->earlier_boot)
        text_printf(stderr,
                    "%s: the journal holds %zu value%s of an earlier boot, which set %s anew: "
                    "not written%s%s (watt restore --force writes them)\n",
                    me, rep->earlier_boot, rep->earlier_boot == 1 ? "" : "s",
                    rep->earlier_boot == 1 ? "it" : "them", rep->boot_file ? "; moved to " : "",
                    rep->boot_file ? rep->boot_file : "");
    if (rep->skipped)
        text_printf(stderr, "%s: %zu journal line%s skipped as corrupt (see above)%s%s\n", me,
                    rep->skipped, rep->skipped == 1 ? "" : "s",
                    rep->corrupt_file ? "; moved to " : "",
                    rep->corrupt_file ? rep->corrupt_file : "");
}

static int run_restore(struct tune_run *t)
{
    if (!host_exists(t->h, HOST_ROOTDIR, t->o.journal)) {
        struct journal_restore_report none = {0};
        if (!t->o.json)
            text_printf(stdout, "Nothing to restore: there is no journal at %s.\n",
                        t->journal_shown);
        else
            restore_print(t, &none, 0);
        return 0;
    }
    struct journal *j;
    _cleanup_free_ char *err = NULL;
    int r = journal_open(t->h, t->o.journal, "cli", &j, &err);
    if (r < 0) {
        text_printf(stderr, "watt restore: %s\n", err ? err : strerror(-r));
        return 1;
    }
    struct journal_restore_report rep = {0};
    unsigned flags = (t->o.dry_run ? JOURNAL_DRY_RUN : 0) | (t->o.force ? JOURNAL_FORCE : 0);
    r = journal_restore(j, t->o.owner, flags, &rep);
    journal_close(j);
    restore_print(t, &rep, r);
    restore_explain(t, &rep, r);
    journal_restore_report_free(&rep);
    return r < 0 ? 1 : 0;
}

/* ---------------------------------------------------------------- recommend */

/* The commands to run, for the machine the facts came from: with --root
 * they name the same tree, so they can be tried on it. */
static char *recommend_command(const struct tune_run *t, const char *profile, const char *extra)
{
    return t->h->live ? xasprintf("watt tune %s%s", profile, extra)
                      : xasprintf("watt tune %s%s --root %s", profile, extra, t->h->root);
}

static void recommend_json(struct tune_run *t, const struct recommendation *rec, const char *desc)
{
    struct json j;
    json_init(&j, true);
    json_doc_begin(&j, "watt-tune-recommend/1", doc_time_now());
    json_kv_string(&j, "root", t->h->root);
    json_key(&j, "profile");
    json_object_begin(&j);
    json_kv_string(&j, "name", rec->profile);
    json_kv_string(&j, "description", desc);
    _cleanup_free_ char *dry = recommend_command(t, rec->profile, " --dry-run");
    _cleanup_free_ char *apply = recommend_command(t, rec->profile, "");
    json_kv_string(&j, "dry_run", dry);
    json_kv_string(&j, "apply", apply);
    json_kv_string(&j, "undo", t->h->live ? "watt restore" : NULL);
    json_object_end(&j);
    json_key(&j, "reasons");
    json_array_begin(&j);
    for (size_t i = 0; i < rec->n; i++) {
        json_object_begin(&j);
        json_kv_string(&j, "check", rec->v[i].check);
        json_kv_string(&j, "found", rec->v[i].found);
        json_kv_string(&j, "means", rec->v[i].means);
        json_kv_bool(&j, "decides", rec->v[i].decides);
        json_object_end(&j);
    }
    json_array_end(&j);
    json_object_end(&j);
    print_json(&j);
}

static void recommend_text(struct tune_run *t, const struct recommendation *rec, const char *desc)
{
    struct strbuf out = {0};
    strbuf_appendf(&out, "Recommended profile: %s%s%s%s\n\nWhy (* decided it):\n", rec->profile,
                   desc ? " (" : "", desc ? desc : "", desc ? ")" : "");
    for (size_t i = 0; i < rec->n; i++) {
        _cleanup_free_ char *first =
            xasprintf("  %c %-15s ", rec->v[i].decides ? '*' : '-', rec->v[i].check);
        report_wrap(&out, first, 20, rec->v[i].found);
        _cleanup_free_ char *means = xasprintf("-> %s", rec->v[i].means);
        report_wrap(&out, "                    ", 23, means);
    }
    _cleanup_free_ char *dry = recommend_command(t, rec->profile, " --dry-run");
    _cleanup_free_ char *apply = recommend_command(t, rec->profile, "");
    strbuf_appendf(&out, "\nSee what it changes, then apply it:\n  %s\n  %s\n", dry, apply);
    if (t->h->live)
        strbuf_append(&out, "Undo with: watt restore\n");
    text_fputs(strbuf_str(&out), stdout); /* DMI strings and comms: printable */
    strbuf_free(&out);
}

static int run_recommend(struct tune_run *t)
{
    struct recommend_facts f;
    if (recommend_facts_read(t->h, &f) < 0) {
        text_printf(stderr, "watt tune: cannot read the machine under %s\n", t->h->root);
        return 1;
    }
    struct recommendation rec;
    recommend_pick(&f, &rec);
    struct profile *p = NULL;
    _cleanup_free_ char *err = NULL;
    /* What `watt tune NAME` would apply: a user file of the same name in
     * CONFDIR/profiles.d shadows the built-in (its description shows it). */
    profile_load(rec.profile, t->o.confdir, &p, &err);
    const char *desc = p ? p->description : NULL;
    if (t->o.json)
        recommend_json(t, &rec, desc);
    else
        recommend_text(t, &rec, desc);
    profile_free(p);
    recommendation_free(&rec);
    recommend_facts_free(&f);
    return 0;
}

/* ---------------------------------------------------------------- verbs */

static int run(const char *verb, int argc, char **argv)
{
    struct tune_run t = {.verb = verb};
    int r = parse_opts(argc, argv, verb, &t.o);
    if (r != 0)
        return r > 0 ? 0 : 2;
    if (t.o.mode == MODE_LIST || t.o.mode == MODE_SHOW)
        return t.o.mode == MODE_LIST ? run_list(&t) : run_show(&t);
    if (cli_open_host(t.o.root, &t.h) < 0)
        return 1;
    t.journal_shown = host_display_path(t.h, HOST_ROOTDIR, t.o.journal);
    switch (t.o.mode) {
    case MODE_STATUS:
        r = run_status(&t);
        break;
    case MODE_RESTORE:
        r = run_restore(&t);
        break;
    case MODE_RECOMMEND:
        r = run_recommend(&t);
        break;
    default:
        r = run_apply(&t);
        break;
    }
    free(t.journal_shown);
    host_close(t.h);
    return r;
}

int verb_tune(int argc, char **argv)
{
    return run("tune", argc, argv);
}

int verb_restore(int argc, char **argv)
{
    return run("restore", argc, argv);
}
