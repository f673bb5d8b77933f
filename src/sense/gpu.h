/* GPUs: one view of every GPU, whatever the vendor, for the sampler.
 *
 * Two backends fill it:
 *  - "sysfs": DRM cards under /sys/class/drm/cardN (not the connectors
 *    cardN-DP-1, not renderD*), their PCI device (device/ -> the PCI
 *    function), its driver (amdgpu, i915, xe, nouveau, ...), its hwmon chip
 *    (device/hwmon/hwmonM: amdgpu power1_average or power1_input and
 *    power1_cap/_cap_min/_cap_max, i915/xe energy1_input and power1_max),
 *    amdgpu's gpu_busy_percent and power_dpm_force_performance_level, and
 *    the PCI function's runtime PM (power/control, power/runtime_status,
 *    power/runtime_suspended_time, power/runtime_active_time).
 *  - "nvml": NVIDIA GPUs through sense/gpu_nvml.c (dlopen, no build
 *    dependency): board power, the energy counter, the power limit and its
 *    range, utilisation, clocks, P-state, temperature, compute processes.
 *    A card the nvidia driver owns is listed once, by NVML, with the sysfs
 *    runtime-PM state of its PCI function merged in by PCI address.
 *
 * Every value that could not be read is NaN (doubles), VAL_NONE (u64) or
 * "" (strings), with its reason in the sample's diags, never 0. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sense/power_reading.h"
#include "sense/sample.h"
#include "sense/sampler.h"

#define GPU_PDEV_LEN 16 /* "0000:03:00.0" and its NUL */

struct gpu_proc {
    uint32_t pid;
    uint64_t used_bytes; /* VAL_NONE when unknown */
    double sm_util_pct;  /* NVML per-process SM utilisation, NaN when unknown */
};

struct gpu_dev {
    char id[24];             /* "card0" (sysfs) or "nvml0" (NVML index) */
    char pdev[GPU_PDEV_LEN]; /* PCI address, lower case, 4-digit domain */
    char via[8];             /* "sysfs" or "nvml" */
    char driver[24];         /* "amdgpu", "i915", "xe", "nvidia", ... */
    char name[96];           /* product name where known, else "" */
    char hwmon[24];          /* "hwmon4" when its power comes from hwmon, else "" */
    bool lost;               /* fell off the bus (NVML GPU_IS_LOST) */

    double energy_j;                    /* cumulative energy counter, NaN when none */
    double power_w;                     /* the driver's own power reading, NaN when none */
    double cap_w, cap_min_w, cap_max_w; /* power limit in force and its range */
    double busy_pct;                    /* utilisation 0..100 */
    double mem_busy_pct;
    double temp_c;
    double core_mhz, mem_mhz;
    int pstate;          /* NVML P0..P15, -1 unknown */
    char perf_level[24]; /* amdgpu power_dpm_force_performance_level, "" */

    /* Runtime PM of the PCI function (Documentation/power/runtime_pm.rst). */
    char rpm_control[8];       /* "auto", "on", "" */
    char rpm_status[16];       /* "active", "suspended", "unsupported", ... */
    uint64_t rpm_suspended_ms; /* power/runtime_suspended_time, VAL_NONE */
    uint64_t rpm_active_ms;    /* power/runtime_active_time, VAL_NONE */

    size_t nprocs;          /* NVML compute processes */
    struct gpu_proc *procs; /* owned */
};

struct gpu_sample {
    size_t n;
    struct gpu_dev *v; /* sysfs cards by card number, then NVML by index */
};

extern const struct sampler gpu_sampler;

/* The GPU at PCI address PDEV, or NULL. */
const struct gpu_dev *gpu_find_pdev(const struct gpu_sample *s, const char *pdev);

/* One power_reading per GPU with a figure (scope DEVICE, source "gpu",
 * via "nvml"/"sysfs", domain the GPU's id, label its name). With both
 * samples and an energy counter in each: delta_j and watts over the
 * interval, a counter that went backwards (driver reload) absent with its
 * reason; else the driver's power reading of the latest sample. Returns
 * how many readings were appended. */
int gpu_power(const struct gpu_sample *a, const struct gpu_sample *b, double interval_s,
              struct power_readings *out, struct diags *d);

/* Watts of the GPU at PDEV over the interval as gpu_power() computes them,
 * NaN when unknown. */
double gpu_watts(const struct gpu_sample *a, const struct gpu_sample *b, double interval_s,
                 const char *pdev);
