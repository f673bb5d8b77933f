/* GPU use per process as the DRM core shows it: the key-value lines a DRM
 * driver prints into /proc/PID/fdinfo/FD for an open render or card node
 * (the kernel's Documentation/gpu/drm-usage-stats.rst; amdgpu, i915, xe,
 * msm, panthor, v3d... print them).
 *
 * One process may hold several fds of one DRM client (dup(), fork()); the
 * spec says fds with the same drm-client-id on the same drm-pdev are one
 * client, so the reader keeps one of them. Engine times and cycles are
 * cumulative counters: a caller differences two reads. Memory is a level. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "host/host.h"

#define GPU_FDINFO_NONE        UINT64_MAX /* a value the driver did not print */
#define GPU_FDINFO_MAX_ENGINES 16
#define GPU_FDINFO_MAX_REGIONS 8

struct gpu_fdinfo_engine {
    char name[24];         /* the <keystr> of drm-engine-<keystr> ("gfx", "rcs") */
    uint64_t busy_ns;      /* drm-engine-: time busy, ns, cumulative; NONE when absent */
    uint64_t cycles;       /* drm-cycles-: busy cycles, cumulative; NONE when absent */
    uint64_t total_cycles; /* drm-total-cycles-: all cycles, cumulative (xe); NONE when absent */
    uint64_t capacity;     /* drm-engine-capacity-: engines of this class; 1 when absent */
};

/* Bytes (a "KiB" or "MiB" suffix is converted); NONE when not printed. */
struct gpu_fdinfo_region {
    char name[24];      /* the <region> ("vram", "gtt", "system", "vram0") */
    uint64_t total;     /* drm-total-: all buffers of the client in this region */
    uint64_t shared;    /* drm-shared-: shared with other clients */
    uint64_t resident;  /* drm-resident-, or the older drm-memory- (its alias) */
    uint64_t active;    /* drm-active-: in use by the GPU now */
    uint64_t purgeable; /* drm-purgeable-: may be dropped by the kernel */
};

struct gpu_fdinfo_client {
    char driver[32];    /* drm-driver (mandatory): "amdgpu", "i915", "xe" */
    char pdev[32];      /* drm-pdev: PCI address "0000:03:00.0"; "" when absent */
    uint64_t client_id; /* drm-client-id; NONE when absent */
    size_t nengines;
    struct gpu_fdinfo_engine engines[GPU_FDINFO_MAX_ENGINES]; /* in order first seen */
    size_t nregions;
    struct gpu_fdinfo_region regions[GPU_FDINFO_MAX_REGIONS]; /* in order first seen */
    unsigned dropped; /* drm- keys not kept: too many engines or regions, a
                       * name too long, a value not a number or in an unknown
                       * unit, an overflow */
};

/* Parse one fdinfo file (text of len bytes, NUL not needed). Lines other
 * than "drm-" keys (pos, flags, driver-specific keys) are ignored. Returns
 * 0, or -EBADMSG when there is no drm-driver line (not a DRM fd); ret is
 * untouched on failure. */
int gpu_fdinfo_parse(const char *text, size_t len, struct gpu_fdinfo_client *ret);

/* The DRM clients of one process: every fd in PROC/PID/fdinfo that parses,
 * one per (driver, drm-pdev, drm-client-id), in fd order. A fd closed while
 * listing is skipped. ret is an array owned by the caller (free()); n may
 * be 0. Returns -errno when the fdinfo folder cannot be listed (-ENOENT:
 * the process is gone; -EACCES: another user's process). */
int gpu_fdinfo_read_pid(struct host *h, pid_t pid, struct gpu_fdinfo_client **ret, size_t *ret_n);
