/* attrib: the node's power split over processes and cgroups, summing
 * exactly to the node's figure.
 *
 *   node_w = idle_w + kernel_w + unaccounted_w + sum(process w)
 *
 * idle_w is the floor the machine draws with nothing running (the model's
 * idle term; for a measured node, the measured watts times the model's
 * idle share at this load). The rest, active_w, is split by CPU time
 * weighted by the effective frequency it ran at (a cycle costs about the
 * same energy whoever spends it):
 *
 *   weight(p) = cpu_s(p) * ghz(p) / mean_ghz        (ghz unknown: 1)
 *
 * kernel_w takes the weight of the interval's irq + softirq time, which
 * belongs to no process; unaccounted_w takes the busy time /proc/stat saw
 * but no live process explains (processes that exited inside the window).
 * When processes explain more than /proc/stat's busy time (their ticks
 * are sampled differently), the shares are normalised and unaccounted is 0.
 *
 * The error is stated, not hidden: the node figure's own error (a meter:
 * its accuracy class, unknown here so "measured"; a model: its ±%) plus
 * the split's, which assumes equal energy per cycle: memory-bound and
 * vector-heavy code differ from the mean by up to ±30 % per cycle. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct attrib_task {
    int32_t pid;
    const char *cgroup; /* borrowed; NULL: "(unknown)" */
    double cpu_s;       /* CPU seconds in the window */
    double ghz;         /* effective GHz where it ran; NaN or <= 0: unknown */
};

struct attrib_input {
    double node_w; /* measured or estimated node IT watts (finite, >= 0) */
    bool measured;
    double node_error_pct; /* the model's stated ±% when estimated; NaN measured */
    double idle_w;         /* idle floor (<= node_w; clipped when above) */
    double seconds;        /* window length */
    double busy_cpu_s;     /* /proc/stat busy seconds over all CPUs in the window
                              (user+nice+system+irq+softirq; guest is inside user) */
    double irq_cpu_s;      /* irq + softirq part of it */
    double mean_ghz;       /* mean effective GHz over busy CPUs; NaN unknown */
    size_t ntasks;
    const struct attrib_task *tasks;
};

struct attrib_cgroup {
    char *path; /* owned; "(unknown)" for tasks without one */
    double w, j;
    size_t nprocs;
};

struct attrib_result {
    double node_w, idle_w, kernel_w, unaccounted_w, active_w;
    size_t ntasks;
    double *task_w; /* owned; per input task, same order */
    double *task_j; /* owned; task_w * seconds */
    size_t ncgroups;
    struct attrib_cgroup *cg; /* owned; by descending w */
    double sum_w;             /* idle + kernel + unaccounted + tasks: equals node_w
                                 to the last bit of a double (checked) */
    double error_pct;         /* stated error of any one line (±%); NaN when unknown */
    char note[256];           /* one line saying how the split was made and its error */
};

/* Returns 0, or -EINVAL for input that cannot be split (negative or
 * non-finite watts or seconds). */
int attrib_compute(const struct attrib_input *in, struct attrib_result *ret);
void attrib_result_clear(struct attrib_result *r);

struct power_model;
/* The idle floor for attrib_input.idle_w: the model's estimate at zero
 * load; for a measured node, node_w times the model's idle share at this
 * load (idle / (idle + active)), so the floor scales with the meter. */
double attrib_idle_floor(const struct power_model *m, unsigned cores, double busy_cores, double ghz,
                         double node_w, bool measured);
