/* Knob values through the host or NVML (knob_io.h). */
#include "tune/knob_io.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/parse.h"
#include "base/util.h"
#include "sense/gpu_nvml.h"

#define NVML_LIMIT_SUFFIX "/power_limit_mw"

static struct gpu_nvml *nvml; /* opened on first use; one per process */

bool knob_io_nvml_ok(const struct host *h)
{
    const char *lib = getenv(GPU_NVML_ENV_LIBRARY);
    return h->live || (lib && *lib);
}

struct gpu_nvml *knob_io_nvml(char *why, size_t why_len)
{
    if (!nvml && gpu_nvml_open(&nvml, why, why_len) < 0)
        nvml = NULL;
    return nvml;
}

void knob_io_release(void)
{
    gpu_nvml_close(nvml);
    nvml = NULL;
}

/* "GPU-5d3c.../power_limit_mw" -> "GPU-5d3c..." (owned), else NULL. */
static char *nvml_uuid(const char *path)
{
    size_t n = strlen(path), s = strlen(NVML_LIMIT_SUFFIX);
    if (n <= s || strcmp(path + n - s, NVML_LIMIT_SUFFIX) || memchr(path, '/', n - s))
        return NULL;
    return strndup(path, n - s);
}

static int nvml_read(const struct host *h, const char *path, char **ret, size_t *ret_len)
{
    _cleanup_free_ char *uuid = nvml_uuid(path);
    if (!uuid)
        return -ENOENT;
    if (!knob_io_nvml_ok(h))
        return -ENODEV;
    struct gpu_nvml *n = knob_io_nvml(NULL, 0);
    if (!n)
        return -ENODEV;
    uint32_t mw, lo, hi;
    int r = gpu_nvml_limit_get(n, uuid, &mw, &lo, &hi);
    if (r < 0)
        return r == -ENODEV ? -ENOENT : r; /* a GPU gone: its setting went with it */
    char *v = xasprintf("%" PRIu32 "\n", mw);
    if (ret_len)
        *ret_len = strlen(v);
    *ret = v;
    return 0;
}

static int nvml_write(const struct host *h, const char *path, const char *value, size_t len)
{
    _cleanup_free_ char *uuid = nvml_uuid(path);
    _cleanup_free_ char *text = strndup(value, len);
    if (!uuid || !text)
        return -ENOENT;
    text[strcspn(text, "\n")] = '\0';
    uint64_t mw;
    if (parse_u64(text, &mw) < 0 || mw > UINT32_MAX)
        return -EINVAL;
    if (!knob_io_nvml_ok(h))
        return -ENODEV;
    struct gpu_nvml *n = knob_io_nvml(NULL, 0);
    if (!n)
        return -ENODEV;
    return gpu_nvml_limit_set(n, uuid, (uint32_t)mw, NULL, 0);
}

int knob_io_read(struct host *h, enum host_dir d, const char *path, char **ret, size_t *ret_len)
{
    if (d == HOST_NVML)
        return nvml_read(h, path, ret, ret_len);
    return host_read(h, d, path, ret, ret_len);
}

int knob_io_read_str(struct host *h, enum host_dir d, const char *path, char **ret)
{
    if (d != HOST_NVML)
        return host_read_str(h, d, path, ret);
    char *v;
    int r = nvml_read(h, path, &v, NULL);
    if (r < 0)
        return r;
    v[strcspn(v, "\n")] = '\0';
    *ret = v;
    return 0;
}

int knob_io_write(struct host *h, enum host_dir d, const char *path, const char *value)
{
    if (d == HOST_NVML)
        return nvml_write(h, path, value, strlen(value));
    return host_write(h, d, path, value);
}

int knob_io_write_raw(struct host *h, enum host_dir d, const char *path, const void *buf,
                      size_t len)
{
    if (d == HOST_NVML)
        return nvml_write(h, path, buf, len);
    return host_write_raw(h, d, path, buf, len);
}
