/* Fitting the power model (model.h) to the node's own measurements: N
 * points of (CPUs, busy CPUs, GHz, measured watts) in, the coefficients
 * and the fit's error out, by least squares. Pure: numbers in, numbers out.
 *
 *   P = idle_base_w + idle_per_core_w * cpus
 *       + active_per_core_w * busy * (ghz / ref_ghz)^ghz_exponent
 *
 * When the CPU count never changes among the points, idle_base_w and
 * idle_per_core_w * cpus are one constant and cannot be told apart: the
 * fit says so (cpus_fixed) and puts the sum in idle_base_w (idle_per_core_w
 * 0), which estimates the same watts at that CPU count. ghz_exponent is
 * chosen from a grid 0, 0.25 .. 3 when the frequency varies among the
 * points, else 0 (the frequency term is then 1). docs/power-model.md. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "model/model.h"
#include "sense/cpuidle.h"

/* One measurement. */
struct fit_point {
    unsigned cpus; /* online logical CPUs */
    double busy;   /* busy CPUs, 0..cpus (POLL counted busy: fit_busy_cpus()) */
    double ghz;    /* mean busy frequency, GHz; NaN or <= 0 when unknown */
    double watts;  /* measured node watts (the power summary's measured it_w) */
};

/* The agent's fitted model, relative to the root (next to the journal,
 * in root's state directory): written by the agent, read by `watt report
 * --model fitted`. */
#define FIT_MODEL_PATH "var/lib/watt/model-fitted.ini"

#define FIT_MIN_POINTS     8
#define FIT_MIN_BUSY_RANGE 0.2 /* busy CPUs: narrower, active_per_core_w is noise */

struct fit_result {
    double idle_base_w, idle_per_core_w, active_per_core_w; /* W */
    double ref_ghz;            /* GHz the active term is at (mean known GHz, else 2.4) */
    double ghz_exponent;       /* from the grid, 0 when the frequency did not vary */
    bool cpus_fixed;           /* one CPU count: idle_base_w holds base + per-CPU x cpus */
    bool ghz_varied;           /* the frequency varied: the exponent was searched */
    size_t n;                  /* points fitted */
    double rmse_w;             /* root mean square residual, W */
    double mape_pct;           /* mean absolute residual in % of the measured watts */
    double r2;                 /* 1 - SS_res / SS_tot; NaN when the watts never vary */
    double busy_min, busy_max; /* busy CPUs covered */
    unsigned cpus_min, cpus_max;
    double error_pct; /* the model's stated error: 2 x RMSE over the mean watts (about a 95 % band),
                         >= 1 */
};

/* Fit N points. -EDOM with *ret_why one sentence when the points cannot
 * identify the model: fewer than FIT_MIN_POINTS usable points, a busy range
 * under FIT_MIN_BUSY_RANGE CPUs, a singular system (CPU count varying only
 * with busy), or a negative coefficient (the points do not follow the
 * formula). Points with a non-finite or non-positive measurement, or busy
 * outside 0..cpus, are skipped. *ret set only on success; *ret_why owned. */
int fit_power(const struct fit_point *p, size_t n, struct fit_result *ret, char **ret_why);

/* The fitted model for model.h: name "fitted", the coefficients, the fit's
 * figures in m->fit; pue and description as given (NULL: default text). */
void fit_to_model(const struct fit_result *f, double pue, const char *when,
                  struct power_model *ret);

/* CPUs' worth of time spent in the cpuidle state named "POLL" between two
 * samples: the sum over CPUs of its time delta over the interval. POLL is
 * the kernel's polling idle loop (drivers/cpuidle/poll_state.c: it spins
 * on need_resched() with cpu_relax(), a PAUSE on x86): the CPU is idle to
 * the scheduler, so /proc/stat counts it idle, but it executes and draws
 * active power. 0 when there is no POLL state; NaN without both samples
 * or a positive interval. A CPU whose POLL counter went backwards or is
 * unreadable is left out. */
double fit_poll_cpus(const struct cpuidle_sample *a, const struct cpuidle_sample *b,
                     double interval_s);

/* The fit's busy CPUs: procstat's busy plus POLL (fit_poll_cpus(); NaN
 * counts 0), at most CPUS. NaN when busy is NaN. */
double fit_busy_cpus(double busy, double poll, unsigned cpus);

/* A file of points, one a line: CPUS BUSY_CPUS GHZ WATTS, separated by
 * blanks or commas, GHZ "-" when unknown, "#" to the end of a line a
 * comment (`watt model fit`). LEN bytes of TEXT (a NUL in them is an
 * error). *ret owned (NULL when no points). -EINVAL with *ret_err
 * "ORIGIN:LINE: reason"; -EFBIG past FIT_POINTS_MAX points. */
#define FIT_POINTS_MAX       1000000
#define FIT_POINTS_MAX_BYTES (64 << 20)
int fit_points_parse(const char *text, size_t len, const char *origin, struct fit_point **ret,
                     size_t *ret_n, char **ret_err);
