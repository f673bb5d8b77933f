/* watt fleet sim | compare: the consolidation simulator's command line.
 * Loads traces and the host spec (the fleet layer's only I/O), runs the
 * simulations in parallel (traces x policies, one thread each up to the
 * number of CPUs), prints a table, JSON, a CSV time series or an SVG. */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/json.h"
#include "base/jsondoc.h"
#include "base/strbuf.h"
#include "base/text.h"
#include "base/util.h"
#include "cli/fleet_out.h"
#include "cli/outfile.h"
#include "cli/verbs.h"
#include "config.h"
#include "fleet/model/fleet.h"
#include "host/host.h"

#define DEFAULT_DAY "planetlab/20110303"

struct fleet_cli {
    bool compare;
    char **paths;
    size_t n_paths, cap_paths;
    char **policies;
    size_t n_policies, cap_policies;
    const char *hosts_spec;
    const char *constraints;
    const char *csv, *plot;
    bool json, markdown, quiet, series;
    size_t synthetic;
    unsigned jobs;
    struct fleet_options opt;
};

struct job {
    const struct fleet_scenario *sc;
    struct fleet_policy pol;
    const char *label;
    struct fleet_result res;
    struct fleet_error err;
    int rc;
    double cpu_s;
};

struct pool {
    struct job *jobs;
    size_t n;
    atomic_size_t next, done;
    const struct fleet_options *opt;
    bool quiet;
    pthread_mutex_t lock;
};

static void usage(FILE *f)
{
    fprintf(f,
            "usage: watt fleet sim [--trace DIR|FILE.csv] [--synthetic VMS] [--policy P]\n"
            "                      [--compat cloudsim] [--hosts SPEC|FILE] [--seed N]\n"
            "                      [--json] [--csv FILE] [--plot FILE.svg]\n"
            "       watt fleet compare [--trace DIR ...] [--policies P,P,...] [same options]\n"
            "       watt fleet run|plan|check|host|approve --config FLEET.INI ...  (a real fleet:\n"
            "                      see watt fleet run --help)\n"
            "\n"
            "Simulate VM consolidation on a fleet over CPU traces (CloudSim's PlanetLab\n"
            "benchmark by default) and report energy, SLA violations and migrations.\n"
            "\n"
            "  --trace PATH       a PlanetLab folder (one VM per file), a CSV file\n"
            "                     (vm,time_s,cpu_pct[,mem_mb]) or a folder of day folders;\n"
            "                     repeatable. Default: the day shipped with watt (%s)\n"
            "  --synthetic VMS    a seeded synthetic day of VMS VMs instead of a trace\n"
            "  --policy P         npa, dvfs, watt or DET-SEL-PARAM: DET thr|iqr|mad|lr|lrr,\n"
            "                     SEL mmt|mc|mu|rs (e.g. iqr-mmt-1.5). Default: watt\n"
            "  --policies LIST    for compare (default: npa,dvfs,thr-mmt-1.0,thr-mmt-0.8,\n"
            "                     iqr-mmt-1.5,mad-mmt-2.5,lr-mmt-1.2,lrr-mmt-1.2,watt)\n"
            "  --compat cloudsim  reproduce CloudSim 3.0.3, artefacts included; default is\n"
            "                     the realistic mode (boot time and energy, standby power,\n"
            "                     VMs persist at zero load, migration limits)\n"
            "  --hosts SPEC       cloudsim (800 hosts, default), 400xg4,400xg5[,alternate]\n"
            "                     or an INI file (docs/fleet-formats.md)\n"
            "  --boot-s S, --boot-j J, --off-w W   override the host types' boot time,\n"
            "                     boot energy and standby power (realistic mode)\n"
            "  --max-migrations N concurrent migrations per host (realistic, default 2)\n"
            "  --hard-ram         a VM holds its whole RAM on its host (CloudSim and the\n"
            "                     default check RAM only when a VM is created)\n"
            "  --constraints FILE hosts in maintenance, pinned VMs, anti-affinity groups\n"
            "                     (watt policy only; docs/fleet-formats.md)\n"
            "  --seed N           seed for RS selection and --synthetic (default 1)\n"
            "  --jobs N           parallel runs (default: the number of CPUs)\n"
            "  --json             one JSON document (docs/fleet-json.md)\n"
            "  --markdown         the table as GitHub markdown\n"
            "  --csv FILE         the per-interval time series of every run\n"
            "  --plot FILE.svg    active hosts, power and SLA violation over time\n"
            "  --quiet            no progress on stderr\n",
            DEFAULT_DAY);
}

static void push(char ***arr, size_t *n, size_t *cap, const char *s)
{
    if (*n == *cap)
        *arr = grow_array(*arr, sizeof(**arr), *n, cap);
    (*arr)[(*n)++] = xstrdup(s);
}

static void push_list(char ***arr, size_t *n, size_t *cap, const char *list)
{
    _cleanup_free_ char *copy = xstrdup(list);
    char *save = NULL;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
        if (*tok)
            push(arr, n, cap, tok);
}

static int parse_number(const char *opt, const char *arg, double min, double *ret)
{
    char *end;
    errno = 0;
    double v = strtod(arg, &end);
    if (errno || end == arg || *end || !(v >= min) || v > 1e12) {
        text_printf(stderr, "watt fleet: %s '%s' is not a number >= %g\n", opt, arg, min);
        return -EINVAL;
    }
    *ret = v;
    return 0;
}

static int parse_args(int argc, char **argv, struct fleet_cli *c)
{
    static const struct option opts[] = {
        {"trace", required_argument, NULL, 't'},
        {"synthetic", required_argument, NULL, 'S'},
        {"policy", required_argument, NULL, 'p'},
        {"policies", required_argument, NULL, 'P'},
        {"compat", required_argument, NULL, 'c'},
        {"hosts", required_argument, NULL, 'H'},
        {"seed", required_argument, NULL, 's'},
        {"json", no_argument, NULL, 'j'},
        {"markdown", no_argument, NULL, 'm'},
        {"csv", required_argument, NULL, 'C'},
        {"plot", required_argument, NULL, 'o'},
        {"jobs", required_argument, NULL, 'J'},
        {"boot-s", required_argument, NULL, 'b'},
        {"boot-j", required_argument, NULL, 'e'},
        {"off-w", required_argument, NULL, 'w'},
        {"max-migrations", required_argument, NULL, 'M'},
        {"hard-ram", no_argument, NULL, 'R'},
        {"quiet", no_argument, NULL, 'q'},
        {"constraints", required_argument, NULL, 'K'},
        {"help", no_argument, NULL, 'h'},
        {0},
    };
    double v;
    int ch;

    fleet_options_default(&c->opt);
    c->opt.watt_params = getenv("WATT_FLEET_PARAMS");
    c->opt.check = getenv("WATT_FLEET_CHECK") != NULL; /* tests: verify invariants */
    optind = 1;
    while ((ch = getopt_long(argc, argv, "t:p:jqh", opts, NULL)) != -1) {
        switch (ch) {
        case 't':
            push(&c->paths, &c->n_paths, &c->cap_paths, optarg);
            break;
        case 'S':
            if (parse_number("--synthetic", optarg, 1, &v) < 0)
                return -EINVAL;
            if (v > 1000000 || v != floor(v)) {
                fprintf(stderr,
                        "watt fleet: --synthetic '%s': want a whole number of VMs, "
                        "1..1000000\n",
                        optarg);
                return -EINVAL;
            }
            c->synthetic = (size_t)v;
            break;
        case 'p':
        case 'P':
            push_list(&c->policies, &c->n_policies, &c->cap_policies, optarg);
            break;
        case 'c':
            if (!streq(optarg, "cloudsim")) {
                text_printf(stderr, "watt fleet: --compat knows only 'cloudsim', not '%s'\n",
                            optarg);
                return -EINVAL;
            }
            c->opt.compat = true;
            break;
        case 'H':
            c->hosts_spec = optarg;
            break;
        case 'K':
            c->constraints = optarg;
            break;
        case 's':
            if (parse_number("--seed", optarg, 0, &v) < 0)
                return -EINVAL;
            c->opt.seed = (uint64_t)v;
            break;
        case 'j':
            c->json = true;
            break;
        case 'm':
            c->markdown = true;
            break;
        case 'C':
            c->csv = optarg;
            break;
        case 'o':
            c->plot = optarg;
            break;
        case 'J':
            if (parse_number("--jobs", optarg, 1, &v) < 0)
                return -EINVAL;
            c->jobs = (unsigned)v;
            break;
        case 'b':
            if (parse_number("--boot-s", optarg, 0, &c->opt.boot_s) < 0)
                return -EINVAL;
            break;
        case 'e':
            if (parse_number("--boot-j", optarg, 0, &c->opt.boot_j) < 0)
                return -EINVAL;
            break;
        case 'w':
            if (parse_number("--off-w", optarg, 0, &c->opt.off_w) < 0)
                return -EINVAL;
            break;
        case 'M':
            if (parse_number("--max-migrations", optarg, 1, &v) < 0)
                return -EINVAL;
            c->opt.max_migrations_per_host = (unsigned)v;
            break;
        case 'R':
            c->opt.hard_ram = true;
            break;
        case 'q':
            c->quiet = true;
            break;
        case 'h':
            usage(stdout);
            return 1;
        default:
            usage(stderr);
            return -EINVAL;
        }
    }
    if (optind < argc) {
        text_printf(stderr, "watt fleet: unexpected argument '%s'\n", argv[optind]);
        return -EINVAL;
    }
    return 0;
}

/* The data folder: $WATT_DATADIR where set (the build tree: the tests and
 * `meson devenv` set it to the source tree's data/), else the one this
 * watt was built for (meson's datadir/watt, /usr/share/watt installed).
 * No source-tree path is compiled in: an installed watt reads only what
 * was installed with it. */
static const char *data_dir(void)
{
    const char *env = getenv("WATT_DATADIR");
    return env && *env ? env : WATT_DATADIR;
}

/* The day shipped with watt, or NULL (and RET_TRIED, the path looked at). */
static char *default_trace(char **ret_tried)
{
    char *p = xasprintf("%s/%s", data_dir(), DEFAULT_DAY);
    struct stat st;
    if (stat(p, &st) == 0 && S_ISDIR(st.st_mode))
        return p;
    *ret_tried = p;
    return NULL;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* A folder of day folders (and no files) stands for each of its days. */
static int expand_path(const char *path, char ***out, size_t *n, size_t *cap)
{
    _cleanup_closedir_ DIR *d = opendir(path);
    char **days = NULL;
    size_t nd = 0, cd = 0;
    bool files = false;
    struct dirent *de;

    if (!d) {
        push(out, n, cap, path);
        return 0;
    }
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        char *p = xasprintf("%s/%s", path, de->d_name);
        struct stat st;
        if (stat(p, &st) == 0 && S_ISDIR(st.st_mode)) {
            if (nd == cd)
                days = grow_array(days, sizeof(*days), nd, &cd);
            days[nd++] = p;
            continue;
        }
        if (strncmp(de->d_name, "README", 6) && strncmp(de->d_name, "LICENSE", 7))
            files = true;
        free(p);
    }
    if (files || !nd) {
        push(out, n, cap, path);
    } else {
        qsort(days, nd, sizeof(*days), cmp_str);
        for (size_t i = 0; i < nd; i++)
            push(out, n, cap, days[i]);
    }
    for (size_t i = 0; i < nd; i++)
        free(days[i]);
    free(days);
    return 0;
}

static int load_hosts(const char *spec, struct fleet_hosts *ret)
{
    struct fleet_error err = {{0}};
    struct stat st;
    _cleanup_free_ char *text = NULL;
    const char *origin = "--hosts";
    size_t len;

    if (!spec)
        spec = "cloudsim";
    bool looks_like_path = strchr(spec, '/') || strstr(spec, ".ini");
    if (looks_like_path && stat(spec, &st) < 0) {
        text_printf(stderr, "watt fleet: cannot read host spec %s: %s\n", spec, strerror(errno));
        return -EINVAL;
    }
    if (stat(spec, &st) == 0 && S_ISREG(st.st_mode)) {
        _cleanup_fclose_ FILE *f = fopen(spec, "re");
        if (!f || st.st_size > 16 << 20) {
            text_printf(stderr, "watt fleet: cannot read host spec %s: %s\n", spec,
                        f ? "bigger than 16 MiB" : strerror(errno));
            return -EINVAL;
        }
        text = xmalloc((size_t)st.st_size + 1);
        len = fread(text, 1, (size_t)st.st_size, f);
        text[len] = '\0';
        origin = spec;
    } else {
        text = xstrdup(spec);
        len = strlen(text);
    }
    int r = fleet_hosts_parse(text, len, origin, ret, &err);
    if (r < 0)
        text_printf(stderr, "watt fleet: %s\n", err.msg);
    return r;
}

/* --constraints FILE for each trace (VM names differ from trace to trace). */
static int load_constraints(const struct fleet_cli *c, const struct fleet_hosts *hosts,
                            const struct fleet_trace *traces, size_t n_traces,
                            struct fleet_constraints *ret)
{
    struct stat st;
    _cleanup_fclose_ FILE *f = fopen(c->constraints, "re");
    if (!f || fstat(fileno(f), &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > 64 << 20) {
        text_printf(stderr, "watt fleet: cannot read constraints %s: %s\n", c->constraints,
                    !f ? strerror(errno) : "not a regular file of at most 64 MiB");
        return -EINVAL;
    }
    _cleanup_free_ char *text = xmalloc((size_t)st.st_size + 1);
    size_t len = fread(text, 1, (size_t)st.st_size, f);
    text[len] = '\0';
    for (size_t t = 0; t < n_traces; t++) {
        struct fleet_error err = {{0}};
        if (fleet_constraints_parse(text, len, c->constraints, &traces[t], hosts->n_hosts,
                                    c->opt.seed, &ret[t], &err) < 0) {
            text_printf(stderr, "watt fleet: %s (trace %s)\n", err.msg, traces[t].origin);
            return -EINVAL;
        }
    }
    return 0;
}

static double thread_cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void *worker(void *arg)
{
    struct pool *p = arg;
    for (;;) {
        size_t i = atomic_fetch_add(&p->next, 1);
        if (i >= p->n)
            return NULL;
        struct job *j = &p->jobs[i];
        double t0 = thread_cpu_s();
        j->rc = fleet_sim_run(j->sc, &j->pol, p->opt, &j->res, &j->err);
        j->cpu_s = thread_cpu_s() - t0;
        size_t done = atomic_fetch_add(&p->done, 1) + 1;
        if (!p->quiet) {
            pthread_mutex_lock(&p->lock);
            text_printf(stderr, "[%zu/%zu] %s %s: %s (%.2f s CPU)\n", done, p->n, j->label,
                        j->pol.name, j->rc < 0 ? "failed" : "done", j->cpu_s);
            pthread_mutex_unlock(&p->lock);
        }
    }
}

static int run_pool(struct job *jobs, size_t n, const struct fleet_cli *c)
{
    struct pool p = {.jobs = jobs, .n = n, .opt = &c->opt, .quiet = c->quiet};
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    size_t threads = c->jobs ? c->jobs : (cpus > 0 ? (size_t)cpus : 1);
    if (threads > n)
        threads = n;
    pthread_mutex_init(&p.lock, NULL);
    _cleanup_free_ pthread_t *tids = xcalloc(threads, sizeof(*tids));
    size_t started = 0;
    for (; started < threads; started++)
        if (pthread_create(&tids[started], NULL, worker, &p) != 0)
            break;
    if (!started)
        worker(&p);
    for (size_t i = 0; i < started; i++)
        pthread_join(tids[i], NULL);
    pthread_mutex_destroy(&p.lock);
    int rc = 0;
    for (size_t i = 0; i < n; i++)
        if (jobs[i].rc < 0) {
            text_printf(stderr, "watt fleet: %s %s: %s\n", jobs[i].label, jobs[i].pol.name,
                        jobs[i].err.msg);
            rc = jobs[i].rc;
        }
    return rc;
}

static const char *label_of(const char *path)
{
    const char *end = path + strlen(path);
    while (end > path && end[-1] == '/')
        end--;
    const char *b = end;
    while (b > path && b[-1] != '/')
        b--;
    return b;
}

/* The plot's title from the command and its data: the verb, the policies,
 * the trace days and the hosts ("watt fleet compare: 9 policies on
 * 20110303, 800 hosts"). Owned. */
static char *plot_title(const struct fleet_cli *c, const struct fleet_hosts *hosts,
                        char *const *origins, size_t n_traces)
{
    struct strbuf t = {0};
    strbuf_appendf(&t, "watt fleet %s: ", c->compare ? "compare" : "sim");
    if (c->n_policies <= 3)
        for (size_t i = 0; i < c->n_policies; i++)
            strbuf_appendf(&t, "%s%s", i ? (i + 1 == c->n_policies ? " and " : ", ") : "",
                           c->policies[i]);
    else
        strbuf_appendf(&t, "%zu policies", c->n_policies);
    if (n_traces <= 3)
        for (size_t i = 0; i < n_traces; i++)
            strbuf_appendf(&t, "%s%s", i ? (i + 1 == n_traces ? " and " : ", ") : " on ",
                           label_of(origins[i]));
    else
        strbuf_appendf(&t, " on %zu days (%s .. %s)", n_traces, label_of(origins[0]),
                       label_of(origins[n_traces - 1]));
    strbuf_appendf(&t, ", %zu hosts", hosts->n_hosts);
    return strbuf_steal(&t);
}

/* --csv and --plot are made before the simulation (a bad path fails at
 * once) and filled after it; a failure to fill one is said, and the table
 * is still printed. */
struct fleet_files {
    struct cli_outfile csv, plot;
};

static int open_outputs(const struct fleet_cli *c, struct fleet_files *ff)
{
    *ff = (struct fleet_files){0};
    if (c->csv && cli_outfile_open("fleet", c->csv, &ff->csv) < 0)
        return -EIO;
    if (c->plot && cli_outfile_open("fleet", c->plot, &ff->plot) < 0) {
        cli_outfile_abort(&ff->csv);
        return -EIO;
    }
    return 0;
}

static int write_outputs(const struct fleet_cli *c, struct job *jobs, size_t n,
                         char *const *origins, struct fleet_files *ff, const char *title)
{
    _cleanup_free_ const struct fleet_result **runs = xcalloc(n, sizeof(*runs));
    _cleanup_free_ const char **labels = xcalloc(n, sizeof(*labels));
    for (size_t i = 0; i < n; i++) {
        runs[i] = &jobs[i].res;
        labels[i] = jobs[i].label;
    }
    int rc = 0;
    if (ff->csv.f) {
        int e = fleet_out_series_csv(ff->csv.f, runs, n, labels);
        if (e < 0) {
            text_printf(stderr, "watt fleet: cannot write %s: %s\n", c->csv, strerror(-e));
            cli_outfile_abort(&ff->csv);
            rc = -EIO;
        } else if (cli_outfile_commit("fleet", &ff->csv) < 0) {
            rc = -EIO;
        }
    }
    if (ff->plot.f) {
        int e = fleet_out_svg(ff->plot.f, runs, n, labels, title);
        if (e < 0) {
            text_printf(stderr, "watt fleet: cannot write %s: %s\n", c->plot, strerror(-e));
            cli_outfile_abort(&ff->plot);
            rc = -EIO;
        } else if (cli_outfile_commit("fleet", &ff->plot) < 0) {
            rc = -EIO;
        }
    }
    struct strbuf out = {0};
    if (c->json) {
        struct json j;
        json_init(&j, true);
        fleet_out_json_doc(&j, c->compare ? "watt-fleet-compare/2" : "watt-fleet-sim/2",
                           doc_time_now(), runs, origins, n, c->series);
        fputs(strbuf_str(&j.out), stdout);
        fputc('\n', stdout);
        json_free(&j);
    } else if (c->markdown) {
        fleet_out_markdown(&out, runs, n, labels);
    } else {
        fleet_out_table(&out, runs, n, labels);
    }
    if (out.len)
        text_fputs(strbuf_str(&out), stdout);
    strbuf_free(&out);
    return rc;
}

static const char *const compare_default[] = {
    "npa",         "dvfs",       "thr-mmt-1.0", "thr-mmt-0.8", "iqr-mmt-1.5",
    "mad-mmt-2.5", "lr-mmt-1.2", "lrr-mmt-1.2", "watt",
};

static void cli_free(struct fleet_cli *c)
{
    for (size_t i = 0; i < c->n_paths; i++)
        free(c->paths[i]);
    free(c->paths);
    for (size_t i = 0; i < c->n_policies; i++)
        free(c->policies[i]);
    free(c->policies);
}

/* Load every trace (or generate the synthetic one). */
static int load_traces(struct fleet_cli *c, struct fleet_trace **ret, size_t *ret_n,
                       char ***ret_origin)
{
    char **paths = NULL;
    size_t n = 0, cap = 0;
    struct fleet_error err = {{0}};

    if (c->synthetic) {
        struct fleet_synth syn = {.n_vms = c->synthetic,
                                  .n_steps = 288,
                                  .step_s = 300,
                                  .seed = c->opt.seed,
                                  .mean_pct = 12};
        *ret = xcalloc(1, sizeof(**ret));
        if (fleet_trace_synth(&syn, *ret, &err) < 0) {
            text_printf(stderr, "watt fleet: %s\n", err.msg);
            free(*ret);
            return -EINVAL;
        }
        *ret_origin = xcalloc(1, sizeof(char *));
        (*ret_origin)[0] =
            xasprintf("synthetic-%zu-seed%llu", c->synthetic, (unsigned long long)c->opt.seed);
        *ret_n = 1;
        return 0;
    }
    if (!c->n_paths) {
        _cleanup_free_ char *tried = NULL;
        char *def = default_trace(&tried);
        if (!def) {
            text_printf(stderr,
                        "watt fleet: the default trace %s is not installed (no folder %s); "
                        "give --trace, or set WATT_DATADIR to the folder that holds planetlab/\n",
                        DEFAULT_DAY, tried);
            return -ENOENT;
        }
        push(&c->paths, &c->n_paths, &c->cap_paths, def);
        free(def);
    }
    for (size_t i = 0; i < c->n_paths; i++)
        expand_path(c->paths[i], &paths, &n, &cap);
    struct fleet_trace *tr = xcalloc(n, sizeof(*tr));
    for (size_t i = 0; i < n; i++) {
        if (fleet_trace_load(paths[i], &tr[i], &err) < 0) {
            text_printf(stderr, "watt fleet: %s\n", err.msg);
            for (size_t k = 0; k < i; k++)
                fleet_trace_free(&tr[k]);
            for (size_t k = 0; k < n; k++)
                free(paths[k]);
            free(paths);
            free(tr);
            return -EINVAL;
        }
    }
    *ret = tr;
    *ret_n = n;
    *ret_origin = paths;
    return 0;
}

/* watt fleet run|plan|check|host|approve: in watt-fleet, the one binary that
 * links the fleet engines (libvirt, libfreeipmi), so that watt, and its
 * agent, maps neither. Exec it with the same arguments, ARGV[0] being the
 * verb: from the folder of this binary (the build tree: build/watt and
 * build/watt-fleet), else from libexecdir/watt (installed). Returns only on
 * failure, having said why. */
static int exec_fleet_engines(int argc, char **argv)
{
#ifndef WATT_HAVE_FLEET
    text_printf(stderr,
                "watt fleet %s: this watt was built without the fleet engines "
                "(-Dfleet=disabled, or libvirt or libfreeipmi missing when it was built)\n",
                argv[0]);
    return 1;
#else
    _cleanup_free_ char *self = NULL, *near = NULL;
    if (host_self_exe(&self) == 0) {
        char *slash = strrchr(self, '/');
        if (slash) {
            *slash = '\0';
            near = xasprintf("%s/watt-fleet", self);
        }
    }
    const char *paths[] = {near, WATT_LIBEXECDIR "/watt-fleet"};
    _cleanup_free_ char **args = xcalloc((size_t)argc + 2, sizeof(*args));
    for (int i = 0; i < argc; i++)
        args[i + 1] = argv[i];
    int err[ARRAY_SIZE(paths)] = {0};
    for (size_t i = 0; i < ARRAY_SIZE(paths); i++) {
        if (!paths[i])
            continue;
        args[0] = (char *)paths[i];
        execv(paths[i], args);
        err[i] = errno;
    }
    struct strbuf msg = {0};
    strbuf_appendf(&msg, "watt fleet %s: cannot run watt-fleet, the binary of the fleet engines (",
                   argv[0]);
    for (size_t i = 0, k = 0; i < ARRAY_SIZE(paths); i++)
        if (paths[i])
            strbuf_appendf(&msg, "%s%s: %s", k++ ? ", " : "", paths[i], strerror(err[i]));
    strbuf_append(&msg, "); install it with watt (meson install, -Dfleet=enabled)\n");
    text_fputs(strbuf_str(&msg), stderr);
    strbuf_free(&msg);
    return 1;
#endif
}

int verb_fleet(int argc, char **argv)
{
    struct fleet_cli c = {0};
    struct fleet_hosts hosts = {0};
    struct fleet_trace *traces = NULL;
    char **origins = NULL;
    size_t n_traces = 0;
    int r;

    if (argc < 2 || streq(argv[1], "--help") || streq(argv[1], "-h")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (streq(argv[1], "run") || streq(argv[1], "plan") || streq(argv[1], "check") ||
        streq(argv[1], "host") || streq(argv[1], "approve"))
        return exec_fleet_engines(argc - 1, argv + 1);
    if (!streq(argv[1], "sim") && !streq(argv[1], "compare")) {
        text_printf(stderr,
                    "watt fleet: unknown command '%s' (sim, compare, run, plan, check, host, "
                    "approve)\n",
                    argv[1]);
        return 2;
    }
    c.compare = streq(argv[1], "compare");
    r = parse_args(argc - 1, argv + 1, &c);
    if (r != 0) {
        cli_free(&c);
        return r > 0 ? 0 : 2;
    }
    c.series = !c.compare && c.json;
    c.opt.series = true;
    if (!c.n_policies) {
        if (c.compare)
            for (size_t i = 0; i < ARRAY_SIZE(compare_default); i++)
                push(&c.policies, &c.n_policies, &c.cap_policies, compare_default[i]);
        else
            push(&c.policies, &c.n_policies, &c.cap_policies, "watt");
    }
    _cleanup_free_ struct fleet_policy *pols = xcalloc(c.n_policies, sizeof(*pols));
    for (size_t i = 0; i < c.n_policies; i++) {
        struct fleet_error err = {{0}};
        if (fleet_policy_parse(c.policies[i], &pols[i], &err) < 0) {
            text_printf(stderr, "watt fleet: %s\n", err.msg);
            cli_free(&c);
            return 2;
        }
    }
    struct fleet_files ff;
    if (open_outputs(&c, &ff) < 0) {
        cli_free(&c);
        return 1;
    }
    _cleanup_free_ char *synth_hosts = NULL;
    if (c.synthetic && !c.hosts_spec) {
        /* about 4 hosts per 5 VMs, like the PlanetLab setup (800 for 1052) */
        size_t nh = (c.synthetic * 4 + 4) / 5;
        synth_hosts = xasprintf("%zuxg4,%zuxg5,alternate", nh - nh / 2, nh / 2);
        c.hosts_spec = synth_hosts;
    }
    if (load_hosts(c.hosts_spec, &hosts) < 0 || load_traces(&c, &traces, &n_traces, &origins) < 0) {
        fleet_hosts_free(&hosts);
        cli_outfile_abort(&ff.csv);
        cli_outfile_abort(&ff.plot);
        cli_free(&c);
        return 1;
    }
    _cleanup_free_ struct fleet_scenario *scs = xcalloc(n_traces, sizeof(*scs));
    _cleanup_free_ struct fleet_constraints *cons = xcalloc(n_traces ? n_traces : 1, sizeof(*cons));
    if (c.constraints && load_constraints(&c, &hosts, traces, n_traces, cons) < 0) {
        for (size_t t = 0; t < n_traces; t++)
            fleet_constraints_free(&cons[t]);
        r = -EINVAL;
    }
    size_t n_jobs = r == 0 ? n_traces * c.n_policies : 0; /* bad constraints: nothing runs */
    _cleanup_free_ struct job *jobs = xcalloc(n_jobs, sizeof(*jobs));
    for (size_t t = 0; t < n_traces && n_jobs; t++) {
        scs[t] = (struct fleet_scenario){.hosts = &hosts,
                                         .trace = &traces[t],
                                         .vm_types = fleet_vm_types_cloudsim,
                                         .n_vm_types = 4,
                                         .constraints = c.constraints ? &cons[t] : NULL};
        for (size_t p = 0; p < c.n_policies; p++) {
            struct job *j = &jobs[t * c.n_policies + p];
            j->sc = &scs[t];
            j->pol = pols[p];
            j->label = label_of(origins[t]);
        }
    }
    if (r == 0)
        r = run_pool(jobs, n_jobs, &c);
    _cleanup_free_ char **job_origins = xcalloc(n_jobs, sizeof(char *));
    for (size_t i = 0; i < n_jobs; i++)
        job_origins[i] = origins[i / c.n_policies];
    for (size_t i = 0; i < n_jobs && r == 0; i++)
        if (jobs[i].res.vms_failed)
            text_printf(stderr,
                        "watt fleet: %s %s: %zu VMs fit no host when created and never ran\n",
                        jobs[i].label, jobs[i].pol.name, jobs[i].res.vms_failed);
    if (r == 0) {
        _cleanup_free_ char *title = plot_title(&c, &hosts, origins, n_traces);
        r = write_outputs(&c, jobs, n_jobs, job_origins, &ff, title);
    }
    cli_outfile_abort(&ff.csv); /* not filled: a failed run leaves no file */
    cli_outfile_abort(&ff.plot);
    for (size_t i = 0; i < n_jobs; i++)
        fleet_result_free(&jobs[i].res);
    for (size_t t = 0; t < n_traces; t++) {
        fleet_constraints_free(&cons[t]);
        fleet_trace_free(&traces[t]);
        free(origins[t]);
    }
    free(traces);
    free(origins);
    fleet_hosts_free(&hosts);
    cli_free(&c);
    return r < 0 ? 1 : 0;
}
