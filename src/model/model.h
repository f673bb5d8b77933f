/* Power models for machines without a meter (and to check those with one).
 *
 *   P = idle_base_w + idle_per_core_w * cores
 *       + active_per_core_w * busy_cores * (ghz / ref_ghz)^ghz_exponent
 *
 * cores counts online logical CPUs; busy_cores is the sum of their
 * utilisation (0..cores); the frequency term applies only when ghz_exponent
 * is non-zero and an effective or requested frequency is known. The
 * coefficients come from a model file (INI, docs/power-model.md); the
 * built-in defaults and where they come from are in data/models/. */
#pragma once

#include <stdbool.h>

#include "base/strbuf.h"

/* How a fitted model (model/fit.h) fitted: the fit_* keys of its file.
 * n == 0: not a fitted model. */
struct power_model_fit {
    unsigned n;                /* points fitted */
    double rmse_w;             /* root mean square residual, W */
    double mape_pct;           /* mean absolute residual, % of the measured watts */
    double r2;                 /* NaN when unknown */
    double busy_min, busy_max; /* busy CPUs the points covered */
    unsigned cpus;             /* the one CPU count of all points (idle_base_w
                                * then holds the idle power of all CPUs); 0:
                                * the CPU count varied, or unknown */
    char time[32];             /* when, UTC ("2026-12-04T23:59:00Z"); "" unknown */
};

struct power_model {
    char name[64];            /* "seed-2011", shown as "estimated (seed-2011)" */
    char source[256];         /* the file it came from, or "built-in" */
    char description[256];    /* one line for the report */
    double idle_base_w;       /* W drawn by the platform at idle, whatever the cores */
    double idle_per_core_w;   /* W per online logical CPU at idle */
    double active_per_core_w; /* extra W per fully busy logical CPU at ref_ghz */
    double ref_ghz;           /* frequency the active term was fitted at */
    double ghz_exponent;      /* 0: frequency ignored; 1: linear in f; ~2-3: V scaling */
    double error_pct;         /* stated error of the model (±%) */
    double pue;               /* facility watts per IT watt */
    struct power_model_fit fit;
};

/* The built-in default: specpower-2023 (data/models/specpower-2023.ini). */
void model_default(struct power_model *m);
/* A built-in by name: "specpower-2023", "seed-2011", "vm-vcpu". */
int model_builtin(const char *name, struct power_model *ret);
/* Load a model file; errors name the file, line and key in *ret_err. */
int model_load(const char *path, struct power_model *ret, char **ret_err);
/* Parse a model from INI text (the fuzz target's entry). */
int model_parse(const char *text, const char *origin, struct power_model *ret, char **ret_err);

/* The model as a file model_parse() reads back (fit_* keys when fitted);
 * COMMENT, when given, is written first as "# " lines. */
void model_format(const struct power_model *m, const char *comment, struct strbuf *out);

/* Estimated IT watts; ghz <= 0 means unknown (the frequency term is 1). */
double model_estimate(const struct power_model *m, unsigned cores, double busy_cores, double ghz);
