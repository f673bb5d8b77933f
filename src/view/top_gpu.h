/* watt top's GPU columns: each process's GPU engine time and the GPU
 * watts attributed to it (model/gpu_attrib.h), for the collector (top.c)
 * and so for the agent's per-cgroup GPU energy.
 *
 * Every refresh, for the processes of the /proc scan that ran in the
 * window or held a DRM client at the previous read (or, in the agent's
 * per-cgroup mode, every pid under /proc), the cheap check first: which
 * fds are DRM nodes (host/drm_fd.h: one listing and one readlink per fd);
 * only those fds' fdinfo is read and parsed (sense/gpu_fdinfo.h). The
 * engine counters are differenced against the previous refresh's read.
 * NVIDIA GPUs (NVML) give their process list and SM utilisation in the
 * GPU sample itself. Nothing is read when the sample has no GPU. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "host/host.h"
#include "sense/gpu.h"
#include "sense/tasks.h"
#include "view/top.h"

struct top_gpu_state;

struct top_gpu_state *top_gpu_state_new(void);
void top_gpu_state_free(struct top_gpu_state *s);

/* One process's GPU use in the window, over all GPUs. */
struct top_gpu_proc {
    int32_t pid;
    char *cgroup; /* owned; NULL unknown */
    double busy_pct;
    double w, j; /* NaN when no GPU it used states its watts */
};

struct top_gpu_out {
    size_t ngpus;
    struct top_gpu *gpus; /* owned; moved into the frame */
    size_t nprocs;
    struct top_gpu_proc *procs; /* owned; ascending pid */
    size_t ncgroups;
    struct top_cgroup *cgroups; /* owned: path, nprocs and the gpu_ fields, by path */
    char *note;                 /* owned; what could not be seen, or NULL */
    double scan_us;             /* the check and the fdinfo reads, µs */
    size_t checked, drm;        /* processes checked, holding a DRM fd */
};

/* Read the DRM clients now (the first window's start) without a frame. */
void top_gpu_baseline(struct top_gpu_state *s, struct host *h, const struct tasks_snapshot *tasks);

/* Which of TASKS to check this window: those that ran on a CPU in it
 * (ascending pids ACTIVE[0..n)); those that held a DRM client at the
 * previous read are checked anyway. A process that used no CPU in the
 * window cannot have opened a DRM node or submitted work in it, so an
 * idle process costs nothing (on a 5000-process server most are idle). */
struct top_gpu_active {
    const int32_t *pids;
    size_t n;
};

/* The window from the previous read to now, between GPU samples A and B
 * (either may be NULL: no GPU, nothing read, *ret zeroed). TASKS: the
 * processes to check (NULL: every pid under /proc, cgroups read for the
 * DRM ones); ACTIVE: NULL, all of them, else as above. */
void top_gpu_collect(struct top_gpu_state *s, struct host *h, const struct tasks_snapshot *tasks,
                     const struct top_gpu_active *active, const struct gpu_sample *a,
                     const struct gpu_sample *b, double secs, struct top_gpu_out *ret);
void top_gpu_out_clear(struct top_gpu_out *o);
