/* gpu_attrib: each GPU's power split over the processes that used it,
 * summing exactly to the GPU's figure (docs/gpu-attribution.md).
 *
 *   gpu_w = sum(process w) + unattributed_w + idle_w
 *
 * A process's weight on a GPU is its engine time in the window: for each
 * DRM engine class, the busy time the driver counts for its clients
 * (drm-engine-<class>, or drm-cycles-<class> over drm-total-cycles-<class>
 * times the window), divided by the class's engine count
 * (drm-engine-capacity-<class>), summed over classes (the kernel's
 * Documentation/gpu/drm-usage-stats.rst). For an NVIDIA GPU, NVML's
 * per-process SM utilisation times the window; where NVML gives only the
 * process list, the GPU's utilisation is shared equally among the listed
 * processes (and said so).
 *
 * The split follows the CPU's (model/attrib.h) without its idle floor,
 * which no GPU driver states: the GPU's watts are shared by time. A
 * process takes gpu_w × busy(p), busy(p) its engine seconds per second of
 * window; what the processes did not fill is the remainder, itself split
 * in two where the GPU states its own utilisation (amdgpu's
 * gpu_busy_percent, NVML): unattributed_w = gpu_w × (util − Σ busy), busy
 * time no visible process explains (clients that exited in the window,
 * other users' or containers' processes whose fdinfo cannot be read),
 * and idle_w = gpu_w × (1 − max(util, Σ busy)), no engine busy. Without
 * the GPU's utilisation the whole remainder is idle_w. Processes whose
 * busy time adds up to more than the window (several engine classes at
 * once) are normalised: they share all the watts, remainder 0.
 *
 * So idle power is carried by busy time: a process that keeps the GPU
 * busy 10 % of the time takes 10 % of its watts, idle floor included. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sense/gpu_fdinfo.h"

/* ---- engine time from two reads of the processes' DRM clients ---- */

/* One process's DRM clients at one read (sense/gpu_fdinfo.h). */
struct gpu_attrib_proc {
    int32_t pid;
    const char *cgroup; /* borrowed; NULL: "(unknown)" */
    size_t nclients;
    const struct gpu_fdinfo_client *clients; /* borrowed */
};

/* Engine seconds of one process on one GPU in the window. */
struct gpu_attrib_use {
    int32_t pid;
    const char *cgroup; /* borrowed from the input */
    char pdev[32];      /* drm-pdev */
    double busy_s;      /* engine seconds, each class divided by its capacity */
};

struct gpu_attrib_busy_stats {
    unsigned backwards; /* engine counters that went backwards (client or driver
                           reset): that engine's window is not counted */
    unsigned fresh;     /* clients with no earlier read (opened in the window, or
                           the first window): counted from the next one */
    unsigned no_pdev;   /* clients without drm-pdev: no GPU to put them on */
};

/* The engine seconds of every process of CUR that has a client also in
 * PREV (same pid, driver, drm-pdev and drm-client-id), over a window of
 * SECONDS (used for cycle counters). Processes of PREV missing from CUR
 * exited: their last window is not seen (it lands in the GPU's
 * unattributed line where the GPU states its utilisation). One use per
 * (process, pdev), in CUR's order; *ret owned (free()). */
int gpu_attrib_busy(const struct gpu_attrib_proc *prev, size_t nprev,
                    const struct gpu_attrib_proc *cur, size_t ncur, double seconds,
                    struct gpu_attrib_use **ret, size_t *ret_n,
                    struct gpu_attrib_busy_stats *ret_stats);

/* ---- the split ---- */

struct gpu_attrib_gpu {
    const char *pdev; /* borrowed */
    double watts;     /* over the window; NaN unknown */
    double util;      /* the GPU's own utilisation 0..1 in the window; NaN unknown */
};

struct gpu_attrib_input {
    double seconds; /* window length, > 0 */
    size_t ngpus;
    const struct gpu_attrib_gpu *gpus;
    size_t nuses;
    const struct gpu_attrib_use *uses; /* uses of a pdev not in gpus are ignored */
};

struct gpu_attrib_gpu_result {
    double watts; /* as given */
    double busy;  /* Σ busy of its processes (engine s per s), before normalising */
    double procs_w, unattributed_w, idle_w; /* NaN when watts is */
    double sum_w;                           /* the lines summed, one of them (the sink, the largest)
                                               last: equals watts to the last bit (checked); in
                                               plain order within an ulp or two */
    bool normalised;                        /* busy > 1: shares scaled, remainder 0 */
    size_t nprocs;
};

struct gpu_attrib_cgroup {
    char *path;    /* owned; "(unknown)" for processes without one */
    double busy_s; /* engine seconds, all GPUs */
    double w, j;   /* over the GPUs with known watts; 0 when none */
};

struct gpu_attrib_result {
    size_t ngpus;
    struct gpu_attrib_gpu_result *gpu; /* owned; per input GPU */
    size_t nuses;
    double *use_gpu_share; /* owned; per use: busy_s / seconds (0..), the
                              fraction of the window its engines ran */
    double *use_w;         /* owned; per use; NaN when its GPU's watts are unknown
                              or its pdev is not among the GPUs */
    double *use_j;         /* owned; use_w * seconds */
    size_t ncgroups;
    struct gpu_attrib_cgroup *cg; /* owned; by path */
};

/* Returns 0, or -EINVAL (seconds not > 0, negative or non-finite busy). */
int gpu_attrib_compute(const struct gpu_attrib_input *in, struct gpu_attrib_result *ret);
void gpu_attrib_result_clear(struct gpu_attrib_result *r);

/* NVML's processes of one GPU as uses: by SM utilisation (sm_pct, NaN
 * unknown) times the window; when no process has one, the GPU's
 * utilisation UTIL (0..1) shared equally among them (then *ret_equal is
 * set; UTIL unknown: no uses). Appends to *uses (realloc'ed). */
void gpu_attrib_nvml_uses(const char *pdev, double util, const int32_t *pids, const double *sm_pct,
                          size_t n, double seconds, struct gpu_attrib_use **uses, size_t *nuses,
                          bool *ret_equal);
