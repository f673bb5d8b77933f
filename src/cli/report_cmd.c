/* `watt report`: its command line; the document is view/report.c. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/parse.h"
#include "base/text.h"
#include "base/util.h"
#include "cli/bmc_opts.h"
#include "cli/outfile.h"
#include "cli/verbs.h"
#include "config.h"
#include "sense/clock.h"
#include "sense/devpolicy.h"
#include "sense/memory.h"
#include "tune/profile.h"
#include "view/report.h"
#include "view/report_power.h"
#include "view/top_collect.h"
#include "view/window.h"

static void report_usage(FILE *f)
{
    fputs(
        "usage: watt report [--interval SECONDS] [--json | --html FILE] [--root DIR] [--per-cpu]\n"
        "                   [--model FILE|NAME] [--pue X] [--config-dir DIR]\n"
        "                   [--bmc HOST[:PORT] [--bmc-user U] [--bmc-password-file F]]\n"
        "\n"
        "Two samples SECONDS apart (default 1; 0 = one snapshot, no rates) of power\n"
        "(measured or estimated, and which), C-states, frequency, utilisation, wake-ups,\n"
        "devices that never sleep, latency constraints and the TSC, with what you could do.\n"
        "\n"
        "  -i, --interval S   seconds between the two samples (0..3600)\n"
        "  -j, --json         one JSON document (schema: docs/report-json.md)\n"
        "      --html FILE    one self-contained HTML page with plots, written to FILE\n"
        "  -r, --root DIR     read a recorded tree instead of / (also $WATT_ROOT)\n"
        "  -p, --per-cpu      text: a line per CPU even on large machines\n"
        "  -m, --model M      power model: a built-in (specpower-2023, vm-vcpu, seed-2011),\n"
        "                     fitted (the one the agent fitted to this machine's meter)\n"
        "                     or an INI file (docs/power-model.md)\n"
        "      --pue X        facility watts per IT watt (default from the model, 1.5)\n"
        "  -c, --config-dir D where devices.conf, the device allow/deny list shared with\n"
        "                     `watt tune`, is (default /etc/watt; also "
        "$WATT_CONFIG_DIR)\n" CLI_BMC_USAGE,
        f);
}

struct report_opts {
    double interval;
    bool json, per_cpu;
    const char *root, *model;
    const char *html;       /* --html FILE; NULL: text or JSON on stdout */
    const char *config_dir; /* NULL: $WATT_CONFIG_DIR, else /etc/watt */
    double pue;
    struct cli_bmc bmc; /* --bmc: the wall power from a BMC over the LAN */
};

static int parse_opts(int argc, char **argv, struct report_opts *o)
{
    static const struct option opts[] = {
        {"interval", required_argument, NULL, 'i'},
        {"json", no_argument, NULL, 'j'},
        {"root", required_argument, NULL, 'r'},
        {"per-cpu", no_argument, NULL, 'p'},
        {"model", required_argument, NULL, 'm'},
        {"pue", required_argument, NULL, 'P'},
        {"config-dir", required_argument, NULL, 'c'},
        {"html", required_argument, NULL, 'H'},
        {"help", no_argument, NULL, 'h'},
        CLI_BMC_LONGOPTS,
        {0},
    };
    *o = (struct report_opts){.interval = 1.0, .pue = NAN};
    int ch;
    optind = 1;
    while ((ch = getopt_long(argc, argv, "i:jr:pm:c:h", opts, NULL)) != -1) {
        switch (ch) {
        case 'i':
            if (parse_double(optarg, &o->interval) < 0 || o->interval < 0 || o->interval > 3600) {
                fprintf(stderr, "watt report: --interval '%s': want seconds in 0..3600\n", optarg);
                return -EINVAL;
            }
            break;
        case 'j':
            o->json = true;
            break;
        case 'r':
            o->root = optarg;
            break;
        case 'p':
            o->per_cpu = true;
            break;
        case 'm':
            o->model = optarg;
            break;
        case 'P':
            if (parse_double(optarg, &o->pue) < 0 || o->pue < 1.0 || o->pue > 10.0) {
                fprintf(stderr, "watt report: --pue '%s': want a number in 1.0..10.0\n", optarg);
                return -EINVAL;
            }
            break;
        case 'c':
            o->config_dir = optarg;
            break;
        case 'H':
            o->html = optarg;
            break;
        case 'h':
            report_usage(stdout);
            return 1;
        default:
            if (cli_bmc_option(&o->bmc, ch, optarg))
                break;
            report_usage(stderr);
            return -EINVAL;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "watt report: unexpected argument '%s'\n", argv[optind]);
        return -EINVAL;
    }
    if (o->html && (o->json || !*o->html)) {
        fprintf(stderr, "watt report: %s\n",
                o->json ? "--html and --json: choose one" : "--html wants a file name");
        return -EINVAL;
    }
    return 0;
}

static bool wants_fitted(const struct report_opts *o)
{
    return o->model && streq(o->model, "fitted");
}

static int load_model(const struct report_opts *o, bool vm, struct power_model *m)
{
    if (wants_fitted(o)) { /* under the root: loaded once it is open */
        model_default(m);
        return 0;
    }
    return cli_load_model("report", o->model, vm, o->pue, m);
}

/* The agent's fitted model: the node's model with --model fitted (an
 * error when there is none), else shown beside a measurement when there
 * is one (a broken one is said, and left out). */
static int load_fitted(const struct report_opts *o, struct host *h, struct power_model *model,
                       struct power_model *fitted, bool *ret_have)
{
    _cleanup_free_ char *err = NULL;
    int r = cli_load_fitted(h, fitted, &err);
    *ret_have = r == 0;
    if (wants_fitted(o)) {
        if (r < 0) {
            text_printf(stderr, "watt report: %s\n", err);
            return r;
        }
        *model = *fitted;
        if (!isnan(o->pue))
            model->pue = o->pue;
        *ret_have = false; /* it is the node's model: shown as such */
    } else if (r < 0 && r != -ENOENT)
        text_printf(stderr, "watt report: the fitted model is left out: %s\n", err);
    return 0;
}

/* CONFDIR/devices.conf, the device policy `watt tune` applies too. A
 * missing file is fine (*ret NULL: built-in rules); a bad one is an error
 * naming file:line, before any sampling. */
static int load_devpolicy(const struct report_opts *o, struct devpolicy **ret)
{
    const char *dir = o->config_dir ? o->config_dir : getenv("WATT_CONFIG_DIR");
    if (!dir || !*dir)
        dir = PROFILE_CONFDIR_DEFAULT;
    _cleanup_free_ char *err = NULL;
    if (devpolicy_load(dir, ret, &err) < 0) {
        text_printf(stderr, "watt report: %s\n", err);
        return -EINVAL;
    }
    return 0;
}

int verb_report(int argc, char **argv)
{
    struct report_opts o;
    int r = parse_opts(argc, argv, &o);
    if (r != 0)
        return r > 0 ? 0 : 2;
    struct power_model model;
    if (load_model(&o, false, &model) < 0)
        return 2; /* a broken model file fails before any sampling */
    if (cli_bmc_apply("report", &o.bmc) < 0)
        return 2;
    struct devpolicy *pol = NULL;
    if (load_devpolicy(&o, &pol) < 0)
        return 2;
    /* made before sampling: a bad path fails now, not after the interval */
    struct cli_outfile ho = {0};
    if (o.html && cli_outfile_open("report", o.html, &ho) < 0) {
        devpolicy_free(pol);
        return 1;
    }
    struct host *h;
    if (cli_open_host(o.root, &h) < 0) {
        cli_outfile_abort(&ho);
        devpolicy_free(pol);
        return 1;
    }
    struct power_model fitted;
    bool have_fitted;
    if (load_fitted(&o, h, &model, &fitted, &have_fitted) < 0) {
        cli_outfile_abort(&ho);
        host_close(h);
        devpolicy_free(pol);
        return 2;
    }
    struct sense *sense;
    sense_open(h, &sense);
    /* who wakes the CPUs over the interval: the tracer starts first */
    struct top_collector *top = NULL;
    if (o.interval > 0) {
        struct top_collector_opts to = {.model = &model,
                                        .devpolicy = pol,
                                        .interval_s = o.interval,
                                        .external_samples = true,
                                        .precise_tasks = true};
        top_collector_open(h, &to, &top);
    }
    /* A recorded root does not change with time: its second sample
     * differs only where watt-faults says so, and the interval is the
     * nominal one, so replays are reproducible (view/window.h). */
    struct window w;
    if (window_take(sense, h->live, o.interval, &w) < 0) {
        fprintf(stderr, "watt report: sampling failed\n");
        cli_outfile_abort(&ho);
        top_collector_close(top);
        sense_close(sense);
        host_close(h);
        devpolicy_free(pol);
        return 1;
    }
    const struct sample *a = w.a, *b = w.b;

    /* VM or not is known only after sampling /proc/cpuinfo. */
    if (!o.model)
        load_model(&o, clock_is_vm((b ? b : a)->clock), &model);

    struct diags diags = {0};
    struct report_ctx c = {
        .h = h,
        .sense = sense,
        .a = a,
        .b = b,
        .cur = b ? b : a,
        .interval_s = w.seconds,
        .per_cpu = o.per_cpu,
        .diags = &diags,
        .devpolicy = pol,
        .fitted = have_fitted ? &fitted : NULL,
    };
    /* Node memory and DIMMs: levels and static facts, read once here. */
    struct memory_info mem;
    if (memory_read(h, &mem) == 0)
        c.memory = &mem;
    struct power_summary ps;
    report_power_build(&c, &model, &ps);
    c.power = &ps;
    struct top_frame *frame = NULL;
    if (top && b) {
        top_collector_set_model(top, &model);
        if (top_collector_frame_from(top, a, b, c.interval_s, &frame) == 0) {
            top_frame_sort(frame, TOP_SORT_WAKEUPS);
            c.top = frame;
        }
    }

    int rc = 0;
    if (o.html) {
        struct strbuf page = {0};
        report_render_html(&c, &page);
        fputs(strbuf_str(&page), ho.f);
        rc = cli_outfile_commit("report", &ho) < 0 ? 1 : 0;
        if (!rc)
            text_printf(stdout, "watt report: wrote %s\n", o.html);
        strbuf_free(&page);
    } else if (o.json) {
        struct json j;
        json_init(&j, true);
        report_render_json(&c, &j);
        fputs(strbuf_str(&j.out), stdout);
        fputc('\n', stdout);
        json_free(&j);
    } else {
        struct strbuf out = {0};
        report_render_text(&c, &out);
        text_fputs(strbuf_str(&out), stdout); /* names from outside: printable */
        strbuf_free(&out);
    }
    power_summary_free(&ps);
    if (c.memory)
        memory_info_free(&mem);
    if (frame)
        top_frame_free(frame);
    top_collector_close(top);
    diags_free(&diags);
    window_clear(&w);
    sense_close(sense);
    host_close(h);
    devpolicy_free(pol);
    return rc;
}
