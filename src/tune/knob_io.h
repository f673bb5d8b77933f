/* Reading and writing a knob's value, whatever holds it: a kernel file
 * through the host (HOST_SYS, HOST_PROC, HOST_DEV), or an NVIDIA GPU's
 * setting through NVML (HOST_NVML, path "GPU-UUID/power_limit_mw", the
 * value in mW as a decimal line, "300000\n", the way a sysfs file shows
 * one). The journal (journal*.c) and the plan's read-backs go through
 * here, so an NVML limit is journalled, rolled back and restored exactly
 * as a file is. Writes are the journal's only (as host_write()).
 *
 * NVML is opened on first use and stays open until knob_io_release().
 * It is used only where knob_io_nvml_ok(): on a live root, or with
 * $WATT_NVML_LIBRARY naming a library (the test double), since a
 * recorded tree holds no NVML state and its dry run must not reach this
 * machine's GPUs. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "host/host.h"

int knob_io_read(struct host *h, enum host_dir d, const char *path, char **ret, size_t *ret_len);
int knob_io_read_str(struct host *h, enum host_dir d, const char *path, char **ret);
int knob_io_write(struct host *h, enum host_dir d, const char *path, const char *value);
int knob_io_write_raw(struct host *h, enum host_dir d, const char *path, const void *buf,
                      size_t len);

bool knob_io_nvml_ok(const struct host *h);
/* The open NVML library (struct gpu_nvml, sense/gpu_nvml.h), or NULL with
 * a reason in WHY; not owned. */
struct gpu_nvml *knob_io_nvml(char *why, size_t why_len);
/* Close NVML (the next use opens it again). */
void knob_io_release(void);
