/* `watt top`: options, then either one window printed (--once, text or
 * --json) or the ncurses TUI (top_tui.c) driving the collector (top.c). */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/parse.h"
#include "base/text.h"
#include "base/util.h"
#include "cli/bmc_opts.h"
#include "cli/top_view.h"
#include "cli/verbs.h"
#include "config.h"
#include "sense/devpolicy.h"
#include "tune/profile.h"
#include "view/top_collect.h"

struct top_opts {
    double interval;
    bool once, json, no_trace;
    enum wake_mode wakeups;
    enum top_sort sort;
    enum top_view view;
    size_t limit;
    const char *root, *model, *config_dir;
    struct cli_bmc bmc; /* --bmc: the wall power from a BMC over the LAN */
};

static void top_usage(FILE *f)
{
    fputs("usage: watt top [--interval SECONDS] [--once] [--json] [--sort KEY] [--limit N]\n"
          "                [--view VIEW] [--wakeups MODE] [--no-trace] [--model NAME|FILE]\n"
          "                [--config-dir DIR]\n"
          "                [--bmc HOST[:PORT] [--bmc-user U] [--bmc-password-file F]]\n"
          "                [--root DIR]\n"
          "\n"
          "Who keeps the CPUs awake and who uses the power, live: wake-ups per process,\n"
          "IRQ, timer and work item (perf tracepoints; /proc without them), and the node's\n"
          "power split over processes and cgroups so that the lines add up to the node.\n"
          "\n"
          "  --interval S    refresh every S seconds (default 2; --once: the window measured)\n"
          "  --once          measure one window, print it and exit (no terminal needed)\n"
          "  --json          with --once: one JSON document (docs/top.md)\n"
          "  --sort KEY      wakeups (default), power, cpu, idle (idle wake-ups) or gpu\n"
          "  --limit N       with --once: at most N processes, cgroups and sources (0: all)\n"
          "  --view VIEW     the TUI's first view: processes, cgroups, sources, cstates, devices\n"
          "  --wakeups MODE  auto (default: BPF counters, else the tracepoint ring, else\n"
          "                  /proc), bpf, trace or proc\n"
          "  --no-trace      do not use tracepoints: wake-ups from /proc only (--wakeups proc)\n"
          "  --model M       the power model where no meter exists (as for watt report)\n"
          "  --config-dir D  where devices.conf is (default /etc/watt, or $WATT_CONFIG_DIR)\n"
          "  --root DIR      read a recorded tree instead of this machine (no "
          "tracing)\n" CLI_BMC_USAGE "\n"
          "Keys in the TUI: 1-5 or Tab views, w/p/c/i/u sort, +/- interval, space refresh,\n"
          "h help, q quit. Tracing needs root (or CAP_PERFMON and tracefs access).\n"
          "Exit status: 0 done, 1 error, 2 usage. See docs/top.md.\n",
          f);
}

static int usage_error(const char *msg, const char *arg)
{
    fprintf(stderr, "watt top: %s%s%s\n", msg, arg ? " " : "", arg ? arg : "");
    fputs("Try 'watt top --help'.\n", stderr);
    return -EINVAL;
}

static int parse_sort(const char *s, enum top_sort *ret)
{
    static const char *const names[] = {"wakeups", "power", "cpu", "idle", "gpu"};
    for (size_t i = 0; i < ARRAY_SIZE(names); i++)
        if (streq(s, names[i])) {
            *ret = (enum top_sort)i;
            return 0;
        }
    return usage_error("--sort wants wakeups, power, cpu, idle or gpu, not", s);
}

static int parse_view(const char *s, enum top_view *ret)
{
    /* the names the TUI's tabs show, and short forms */
    static const char *const alias[] = {"procs", "cgroups", "sources", "cpus", "devices"};
    for (int i = 0; i < _TOP_VIEW_MAX; i++)
        if (streq(s, top_view_name((enum top_view)i)) || streq(s, alias[i])) {
            *ret = (enum top_view)i;
            return 0;
        }
    return usage_error("--view wants processes, cgroups, sources, cstates or devices, not", s);
}

static int parse_opts(int argc, char **argv, struct top_opts *o)
{
    static const struct option longopts[] = {
        {"interval", required_argument, NULL, 'i'},
        {"once", no_argument, NULL, '1'},
        {"json", no_argument, NULL, 'j'},
        {"sort", required_argument, NULL, 's'},
        {"limit", required_argument, NULL, 'l'},
        {"view", required_argument, NULL, 'V'},
        {"no-trace", no_argument, NULL, 'T'},
        {"wakeups", required_argument, NULL, 'W'},
        {"model", required_argument, NULL, 'm'},
        {"config-dir", required_argument, NULL, 'C'},
        {"root", required_argument, NULL, 'r'},
        {"help", no_argument, NULL, 'h'},
        CLI_BMC_LONGOPTS,
        {0},
    };
    *o = (struct top_opts){.interval = 2};
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "i:hj", longopts, NULL)) != -1) {
        switch (c) {
        case 'i': {
            double v;
            if (parse_double(optarg, &v) < 0 || !(v >= 0.1 && v <= 3600))
                return usage_error("--interval wants seconds in [0.1, 3600], not", optarg);
            o->interval = v;
            break;
        }
        case '1':
            o->once = true;
            break;
        case 'j':
            o->json = true;
            break;
        case 's':
            if (parse_sort(optarg, &o->sort) < 0)
                return -EINVAL;
            break;
        case 'l': {
            uint64_t v;
            if (parse_u64(optarg, &v) < 0 || v > 1000000)
                return usage_error("--limit wants a count (0: all), not", optarg);
            o->limit = (size_t)v;
            break;
        }
        case 'V':
            if (parse_view(optarg, &o->view) < 0)
                return -EINVAL;
            break;
        case 'T':
            o->no_trace = true;
            break;
        case 'W':
            if (wake_mode_from_string(optarg, &o->wakeups) < 0 || o->wakeups == WAKE_MODE_OFF)
                return usage_error("--wakeups wants auto, bpf, trace or proc, not", optarg);
            break;
        case 'm':
            o->model = optarg;
            break;
        case 'C':
            o->config_dir = optarg;
            break;
        case 'r':
            o->root = optarg;
            break;
        case 'h':
            top_usage(stdout);
            return 1;
        default:
            if (cli_bmc_option(&o->bmc, c, optarg))
                break;
            top_usage(stderr);
            return -EINVAL;
        }
    }
    if (optind < argc)
        return usage_error("unexpected argument", argv[optind]);
    if (o->json && !o->once)
        return usage_error("--json goes with --once (the TUI is for a terminal)", NULL);
    return 0;
}

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Sleep for the window while keeping the trace rings drained: poll()
 * returns when a ring passes its watermark, never on a timer tick. */
static void wait_window(struct top_collector *c, double secs)
{
    const int *fds;
    size_t n = top_collector_fds(c, &fds);
    struct pollfd *p = xcalloc(n ? n : 1, sizeof(*p));
    for (size_t i = 0; i < n; i++)
        p[i] = (struct pollfd){.fd = fds[i], .events = POLLIN};
    uint64_t end = mono_ns() + (uint64_t)(secs * 1e9);
    for (uint64_t now; (now = mono_ns()) < end;) {
        int ms = (int)((end - now + 999999) / 1000000);
        int r = poll(p, n, ms);
        if (r > 0)
            top_collector_drain(c);
        else if (r < 0 && errno != EINTR)
            break;
    }
    free(p);
}

static int load_policy(const struct top_opts *o, struct devpolicy **ret)
{
    const char *dir = o->config_dir ? o->config_dir : getenv("WATT_CONFIG_DIR");
    if (!dir || !*dir)
        dir = PROFILE_CONFDIR_DEFAULT;
    _cleanup_free_ char *err = NULL;
    if (devpolicy_load(dir, ret, &err) < 0) {
        text_printf(stderr, "watt top: %s\n", err);
        return -EINVAL;
    }
    return 0;
}

static int run_once(struct top_collector *c, const struct top_opts *o, bool live)
{
    if (live)
        wait_window(c, o->interval);
    struct top_frame *f;
    int r = top_collector_frame(c, &f);
    if (r < 0) {
        fprintf(stderr, "watt top: cannot take a sample: %s\n", strerror(-r));
        return 1;
    }
    top_frame_sort(f, o->sort);
    if (o->json)
        top_print_json(f, stdout, o->limit);
    else
        top_print_text(f, stdout, o->limit);
    top_frame_free(f);
    return fflush(stdout) == 0 ? 0 : 1;
}

#ifdef WATT_HAVE_CURSES
#define NO_CURSES_NOTE ""
#else
#define NO_CURSES_NOTE " (watt was built without ncurses)"
#endif

/* What the TUI's failure means to the user. */
static int tui_error(int r)
{
    if (r >= 0)
        return 0;
    if (r == -ENOTTY)
        fputs("watt top: the TUI needs a terminal; use --once (with --json for scripts)\n", stderr);
    else if (r == -ENOTSUP)
        fprintf(stderr, "watt top: this terminal (TERM=%s) cannot be drawn on%s; use --once\n",
                getenv("TERM") ? getenv("TERM") : "unset", NO_CURSES_NOTE);
    else
        fprintf(stderr, "watt top: the terminal went away: %s\n", strerror(-r));
    return 1;
}

int verb_top(int argc, char **argv)
{
    struct top_opts o;
    int r = parse_opts(argc, argv, &o);
    if (r != 0)
        return r > 0 ? 0 : 2;
    if (!o.once && (!isatty(STDOUT_FILENO) || !isatty(STDIN_FILENO))) {
        fputs("watt top: the TUI needs a terminal; use --once (with --json for scripts)\n", stderr);
        return 2;
    }
    if (cli_bmc_apply("top", &o.bmc) < 0)
        return 2;
    struct power_model model;
    bool fitted = o.model && streq(o.model, "fitted"); /* under the root: below */
    if (!fitted && cli_load_model("top", o.model, false, NAN, &model) < 0)
        return 2;
    struct devpolicy *pol = NULL;
    if (load_policy(&o, &pol) < 0)
        return 2;
    struct host *h;
    if (cli_open_host(o.root, &h) < 0) {
        devpolicy_free(pol);
        return 1;
    }
    _cleanup_free_ char *err = NULL;
    if (fitted && cli_load_fitted(h, &model, &err) < 0) {
        text_printf(stderr, "watt top: %s\n", err);
        host_close(h);
        devpolicy_free(pol);
        return 2;
    }
    struct top_collector_opts co = {.model = &model,
                                    .devpolicy = pol,
                                    .interval_s = o.interval,
                                    .no_trace = o.no_trace,
                                    .wakeups = o.wakeups,
                                    .precise_tasks = o.once,
                                    .model_auto = o.model == NULL};
    struct top_collector *c;
    r = top_collector_open(h, &co, &c);
    if (r < 0) {
        fprintf(stderr, "watt top: cannot start: %s\n", strerror(-r));
    } else {
        if (o.once) {
            r = run_once(c, &o, h->live);
        } else {
            struct top_tui_opts to = {.interval_s = o.interval, .sort = o.sort, .view = o.view};
            r = tui_error(top_tui_run(c, &to));
        }
        top_collector_close(c);
    }
    host_close(h);
    devpolicy_free(pol);
    return r < 0 ? 1 : r;
}
