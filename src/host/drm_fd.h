/* Which of a process's fds are DRM device nodes: the cheap check before
 * its fdinfo is read for GPU use (view/top_gpu.c, docs/gpu-attribution.md).
 * One listing of /proc/PID/fd and one readlink per fd; the fdinfo of a fd
 * (an open, a read and a parse) only for the DRM ones. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "host/host.h"

/* The fd numbers of PID whose link reads /dev/dri/... (card or render
 * node), ascending order not promised. *ret owned (free()), NULL when
 * none. Returns -errno when the fd folder cannot be listed (-ENOENT: gone;
 * -EACCES: another user's process). */
int host_drm_fds(struct host *h, int32_t pid, int **ret, size_t *ret_n);

/* Every process id under /proc, ascending. *ret owned. */
int host_pids(struct host *h, int32_t **ret, size_t *ret_n);
