/* DRM fds of a process (drm_fd.h). */
#include "host/drm_fd.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"

/* The DRM core's nodes (drivers/gpu/drm/drm_drv.c: "dri/card%d",
 * "dri/renderD%d" under devtmpfs). */
#define DRM_DEV_PREFIX "/dev/dri/"

static bool number(const char *s, long *ret)
{
    char *end;
    if (!s[0] || s[0] < '0' || s[0] > '9')
        return false;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || v < 0 || v > INT32_MAX)
        return false;
    *ret = v;
    return true;
}

int host_drm_fds(struct host *h, int32_t pid, int **ret, size_t *ret_n)
{
    char dir[32];
    snprintf(dir, sizeof(dir), "%d/fd", (int)pid);
    char **fds = NULL;
    size_t nfds = 0;
    int r = host_list(h, HOST_PROC, dir, &fds, &nfds);
    if (r < 0)
        return r;
    int *out = NULL;
    size_t n = 0;
    for (size_t i = 0; i < nfds; i++) {
        long fd;
        if (!number(fds[i], &fd))
            continue;
        char path[64];
        snprintf(path, sizeof(path), "%s/%s", dir, fds[i]);
        _cleanup_free_ char *target = NULL;
        if (host_readlink(h, HOST_PROC, path, &target) < 0)
            continue; /* closed since the listing */
        if (strncmp(target, DRM_DEV_PREFIX, strlen(DRM_DEV_PREFIX)) != 0)
            continue;
        out = xrealloc(out, (n + 1) * sizeof(*out));
        out[n++] = (int)fd;
    }
    host_free_list(fds, nfds);
    *ret = out;
    *ret_n = n;
    return 0;
}

static int cmp_pid(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

int host_pids(struct host *h, int32_t **ret, size_t *ret_n)
{
    char **names = NULL;
    size_t nn = 0;
    int r = host_list(h, HOST_PROC, ".", &names, &nn);
    if (r < 0)
        return r;
    int32_t *out = xcalloc(nn ? nn : 1, sizeof(*out));
    size_t n = 0;
    for (size_t i = 0; i < nn; i++) {
        long v;
        if (number(names[i], &v) && v > 0)
            out[n++] = (int32_t)v;
    }
    host_free_list(names, nn);
    qsort(out, n, sizeof(*out), cmp_pid);
    *ret = out;
    *ret_n = n;
    return 0;
}
