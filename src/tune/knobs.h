/* The knob planners of tune_plan_build() (plan.h): each reads the machine
 * through the host and adds a change per file whose value differs from
 * what the profile asks. Internal to the tune layer. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "base/cpuset.h"
#include "host/host.h"

struct profile;
struct tune_plan;

struct knob_ctx {
    struct host *h;
    const struct profile *p;
    struct tune_plan *plan;
    struct cpuset online; /* devices/system/cpu/online */
    char *err;            /* the first error, one sentence; owned */
};

int knobs_begin(struct knob_ctx *c);
void knobs_end(struct knob_ctx *c);

/* Each returns 0, or -EINVAL with c->err naming the profile line. */
int knobs_cpufreq(struct knob_ctx *c);
int knobs_cpuidle(struct knob_ctx *c);
int knobs_pm_qos(struct knob_ctx *c);
int knobs_sata(struct knob_ctx *c);
int knobs_pcie_aspm(struct knob_ctx *c);
int knobs_kernel(struct knob_ctx *c);
/* Whether PATH can be written at all (an open for writing, which runs no
 * store()); when not (read-only: EROFS, or EACCES as root), a note naming
 * KNOB and ORIGIN says the knob is skipped. */
bool knobs_writable(struct knob_ctx *c, enum host_dir d, const char *path, const char *knob,
                    const char *origin);
/* [gpu] power_limit_w / power_limit_pct / perf_level on DRM cards
 * (knobs_gpu.c). */
int knobs_gpu(struct knob_ctx *c);
/* The [gpu] power limit on NVIDIA GPUs through NVML (knobs_gpu_nvml.c):
 * adds to *planned the GPUs it set or found set. */
struct profile_value;
struct knobs_gpu_limit {
    const char *const *ids; /* [gpu] gpus; NULL: every GPU */
    size_t nids;
    bool *named;                   /* ids[i] matched a GPU */
    const struct profile_value *v; /* power_limit_w or power_limit_pct */
    bool pct;                      /* limit is % of the maximum, else W */
    double limit;
};
int knobs_gpu_nvml(struct knob_ctx *c, const struct knobs_gpu_limit *l, size_t *planned);
/* Whether a [gpu] gpus list IDS (NULL: all) selects the GPU ID ("card0",
 * "nvml1") at PCI address PDEV; marks the ids that matched in NAMED. */
bool knobs_gpu_selected(const char *const *ids, size_t nids, bool *named, const char *id,
                        const char *pdev);

/* Pure helpers (unit tests). */
/* A FREQ value ("min", "max", "2400000", "2.4 GHz", "1800 MHz", "75%")
 * in kHz for a policy whose hardware range is cmin..cmax kHz (not checked
 * against it here). -EINVAL on garbage, -ERANGE on absurd values. */
int knobs_freq_khz(const char *v, uint64_t cmin, uint64_t cmax, uint64_t *ret);
/* The first word of LIST (comma- or space-separated) that OFFERED (the
 * machine's space-separated list, brackets allowed) holds; NULL if none.
 * Owned. */
char *knobs_first_offered(const char *list, const char *offered);
/* A boolean profile value: parse_bool() (base/parse.h), the one vocabulary. */
int knobs_bool(const char *v, bool *ret);
