/* `watt model fit FILE`: the power model fitted offline from a file of
 * points (one per line: CPUs, busy CPUs, GHz or "-", measured watts), as
 * the agent fits it from its samples (model/fit.h, docs/power-model.md).
 * Prints the coefficients and the fit's error; --output writes a model
 * file that --model FILE reads. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "base/jsondoc.h"
#include "base/parse.h"
#include "base/strbuf.h"
#include "base/text.h"
#include "base/util.h"
#include "cli/outfile.h"
#include "cli/verbs.h"
#include "model/fit.h"
#include "model/model.h"

static void model_usage(FILE *f)
{
    fputs("usage: watt model fit [--json] [--output MODEL.ini] [--pue X] FILE\n"
          "\n"
          "Fit the power model (docs/power-model.md) to measured points by least squares,\n"
          "as the agent does against a meter: prints the coefficients and the fit's error\n"
          "(RMSE, mean absolute %, R², N), or why the points cannot identify the model.\n"
          "FILE: one point a line, CPUS BUSY_CPUS GHZ WATTS (blanks or commas between;\n"
          "GHZ '-' when unknown; '#' starts a comment); '-' reads standard input.\n"
          "\n"
          "  -j, --json         one JSON document (schema/watt-model-fit.json)\n"
          "  -o, --output FILE  also write the fitted model file (a model file watt report reads)\n"
          "      --pue X        facility watts per IT watt written to the model (default 1.5)\n",
          f);
}

static int read_points(const char *path, struct fit_point **ret, size_t *ret_n)
{
    bool stdin_ = streq(path, "-");
    FILE *f = stdin_ ? stdin : fopen(path, "re");
    if (!f) {
        text_printf(stderr, "watt model: cannot read %s: %s\n", path, strerror(errno));
        return -errno;
    }
    struct strbuf text = {0};
    char chunk[65536];
    size_t k;
    while (text.len <= FIT_POINTS_MAX_BYTES && (k = fread(chunk, 1, sizeof(chunk), f)) > 0)
        strbuf_append_n(&text, chunk, k);
    bool failed = ferror(f);
    if (!stdin_)
        fclose(f);
    int r = 0;
    _cleanup_free_ char *err = NULL;
    if (failed) {
        text_printf(stderr, "watt model: cannot read %s: %s\n", path, strerror(EIO));
        r = -EIO;
    } else if (text.len > FIT_POINTS_MAX_BYTES) {
        text_printf(stderr, "watt model: %s: larger than %d MiB\n", path,
                    FIT_POINTS_MAX_BYTES >> 20);
        r = -EFBIG;
    } else if ((r = fit_points_parse(text.s ? text.s : "", text.len, path, ret, ret_n, &err)) < 0)
        text_printf(stderr, "watt model: %s\n", err);
    strbuf_free(&text);
    return r;
}

static void print_json(const char *path, const struct fit_result *f, const char *why)
{
    struct json j;
    json_init(&j, true);
    json_doc_begin(&j, "watt-model-fit/1", doc_time_now());
    json_kv_string(&j, "points", path);
    json_kv_bool(&j, "fitted", why == NULL);
    json_kv_string(&j, "refused", why);
    if (why) {
        json_kv_null(&j, "model");
    } else {
        json_key(&j, "model");
        json_object_begin(&j);
        json_kv_double(&j, "idle_base_w", f->idle_base_w);
        json_kv_double(&j, "idle_per_cpu_w", f->idle_per_core_w);
        json_kv_double(&j, "active_per_cpu_w", f->active_per_core_w);
        json_kv_double(&j, "ref_ghz", f->ref_ghz);
        json_kv_double(&j, "ghz_exponent", f->ghz_exponent);
        json_kv_bool(&j, "cpus_fixed", f->cpus_fixed);
        json_kv_bool(&j, "ghz_varied", f->ghz_varied);
        json_kv_u64(&j, "n", f->n);
        json_kv_double(&j, "rmse_w", f->rmse_w);
        json_kv_double(&j, "mape_pct", f->mape_pct);
        json_kv_double(&j, "r2", f->r2);
        json_kv_double(&j, "busy_min", f->busy_min);
        json_kv_double(&j, "busy_max", f->busy_max);
        json_kv_double(&j, "error_pct", f->error_pct);
        json_object_end(&j);
    }
    json_object_end(&j);
    fputs(strbuf_str(&j.out), stdout);
    fputc('\n', stdout);
    json_free(&j);
}

static void print_text(const struct fit_result *f)
{
    printf("fitted on %zu points, %.2f..%.2f busy CPUs, %u..%u CPUs\n", f->n, f->busy_min,
           f->busy_max, f->cpus_min, f->cpus_max);
    if (f->cpus_fixed)
        printf("  idle_base_w = %.4g W (one CPU count: the base and the per-CPU idle power "
               "in one term)\n",
               f->idle_base_w);
    else
        printf("  idle_base_w = %.4g W\n  idle_per_core_w = %.4g W\n", f->idle_base_w,
               f->idle_per_core_w);
    printf("  active_per_core_w = %.4g W per busy CPU at %.2f GHz\n", f->active_per_core_w,
           f->ref_ghz);
    printf("  ghz_exponent = %.2f%s\n", f->ghz_exponent,
           f->ghz_varied ? " (the best of 0..3)" : " (the frequency did not vary)");
    printf("error: RMSE %.2f W, mean absolute error %.2f %%", f->rmse_w, f->mape_pct);
    if (!isnan(f->r2))
        printf(", R² %.4f", f->r2);
    printf(" (±%.0f %% stated)\n", f->error_pct);
}

static int fit_cmd(int argc, char **argv)
{
    static const struct option opts[] = {
        {"json", no_argument, NULL, 'j'},
        {"output", required_argument, NULL, 'o'},
        {"pue", required_argument, NULL, 'P'},
        {"help", no_argument, NULL, 'h'},
        {0},
    };
    bool json = false;
    const char *output = NULL;
    double pue = NAN;
    int ch;
    optind = 1;
    while ((ch = getopt_long(argc, argv, "jo:h", opts, NULL)) != -1) {
        switch (ch) {
        case 'j':
            json = true;
            break;
        case 'o':
            output = optarg;
            break;
        case 'P':
            if (parse_double(optarg, &pue) < 0 || pue < 1.0 || pue > 10.0) {
                fprintf(stderr, "watt model: --pue '%s': want a number in 1.0..10.0\n", optarg);
                return 2;
            }
            break;
        case 'h':
            model_usage(stdout);
            return 0;
        default:
            model_usage(stderr);
            return 2;
        }
    }
    if (optind + 1 != argc) {
        fprintf(stderr, "watt model fit: want one FILE of points (see --help)\n");
        return 2;
    }
    const char *path = argv[optind];
    struct fit_point *pts = NULL;
    size_t n = 0;
    if (read_points(path, &pts, &n) < 0)
        return 2;
    struct cli_outfile of = {0};
    if (output && cli_outfile_open("model", output, &of) < 0) {
        free(pts);
        return 1;
    }
    struct fit_result f;
    _cleanup_free_ char *why = NULL;
    int r = fit_power(pts, n, &f, &why);
    free(pts);
    if (json)
        print_json(path, &f, r < 0 ? why : NULL);
    if (r < 0) {
        text_printf(stderr, "watt model: %s: cannot fit: %s\n", path, why);
        cli_outfile_abort(&of);
        return 1;
    }
    if (!json)
        print_text(&f);
    if (!output)
        return 0;
    char when[64];
    doc_time_format(doc_time_now(), when, sizeof(when));
    struct power_model m;
    fit_to_model(&f, isnan(pue) ? 1.5 : pue, when, &m);
    snprintf(m.description, sizeof(m.description),
             "fitted by watt model fit: %zu points, %.2f..%.2f busy CPUs%s", f.n, f.busy_min,
             f.busy_max,
             f.cpus_fixed ? " at one CPU count (idle_base_w holds the per-CPU idle)" : "");
    struct strbuf text = {0};
    _cleanup_free_ char *comment =
        xasprintf("Fitted by watt model fit from %s (docs/power-model.md).", path);
    model_format(&m, comment, &text);
    fputs(strbuf_str(&text), of.f);
    strbuf_free(&text);
    if (cli_outfile_commit("model", &of) < 0)
        return 1;
    if (!json)
        text_printf(stdout, "wrote %s\n", output);
    return 0;
}

int verb_model(int argc, char **argv)
{
    if (argc < 2 || streq(argv[1], "--help") || streq(argv[1], "-h")) {
        model_usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (streq(argv[1], "fit"))
        return fit_cmd(argc - 1, argv + 1);
    fprintf(stderr, "watt model: unknown command '%s' (want fit)\n", argv[1]);
    return 2;
}
