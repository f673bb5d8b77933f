/* The GPU section's figures other parts of the report use. */
#pragma once

#include "sense/gpu.h"
#include "view/report.h"

/* The power section's reading of GPU g (source "gpu", domain its id), or
 * NULL when gpu_power() gave none. */
const struct power_reading *report_gpu_reading(const struct report_ctx *c, const struct gpu_dev *g);

/* Who holds the GPUs: every process's DRM fdinfo clients
 * (sense/gpu_fdinfo.h) by drm-pdev. The nvidia driver prints none: its
 * holders are NVML's compute processes. */
struct gpu_holders {
    char (*pdev)[GPU_PDEV_LEN]; /* each PCI address with a client, owned */
    size_t n;
    unsigned unreadable; /* processes whose fdinfo could not be read (EACCES) */
};
void report_gpu_holders(const struct report_ctx *c, struct gpu_holders *ret);
void report_gpu_holders_free(struct gpu_holders *g);
/* Whether a process holds g: 1 yes, 0 no, -1 unknown (the nvidia driver
 * without NVML, or fdinfo that could not all be read). */
int report_gpu_held(const struct gpu_holders *hs, const struct gpu_dev *g);
