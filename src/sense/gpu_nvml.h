#pragma once
/* NVIDIA GPUs through NVML, loaded at run time: dlopen("libnvidia-ml.so.1")
 * (or $WATT_NVML_LIBRARY, the test double's path), so that watt neither
 * links nor needs the driver. One read gives every GPU with its readings;
 * each field carries its own state, because a GPU answers some queries and
 * not others (NVML_ERROR_NOT_SUPPORTED is "this GPU has no such sensor",
 * not an error) and a GPU that fell off the bus says so
 * (NVML_ERROR_GPU_IS_LOST) while the others still answer. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GPU_NVML_ENV_LIBRARY "WATT_NVML_LIBRARY"
#define GPU_NVML_MAX_GPUS    64
#define GPU_NVML_MAX_PROCS   64

enum gpu_field {
    GPU_F_NAME,
    GPU_F_UUID,
    GPU_F_PCI,
    GPU_F_POWER,       /* nvmlDeviceGetPowerUsage */
    GPU_F_ENERGY,      /* nvmlDeviceGetTotalEnergyConsumption */
    GPU_F_LIMIT,       /* nvmlDeviceGetPowerManagementLimit */
    GPU_F_LIMIT_RANGE, /* nvmlDeviceGetPowerManagementLimitConstraints */
    GPU_F_UTIL,        /* nvmlDeviceGetUtilizationRates */
    GPU_F_CLOCK_SM,    /* nvmlDeviceGetClockInfo(NVML_CLOCK_SM) */
    GPU_F_CLOCK_MEM,   /* nvmlDeviceGetClockInfo(NVML_CLOCK_MEM) */
    GPU_F_PSTATE,      /* nvmlDeviceGetPerformanceState */
    GPU_F_TEMP,        /* nvmlDeviceGetTemperature(NVML_TEMPERATURE_GPU) */
    GPU_F_PROCS,       /* nvmlDeviceGetComputeRunningProcesses_v3 */
    GPU_F_PROCUTIL,    /* nvmlDeviceGetProcessUtilization */
    GPU_F_COUNT,
};

enum gpu_field_state {
    GPU_FIELD_OK = 0,
    GPU_FIELD_UNSUPPORTED, /* NVML_ERROR_NOT_SUPPORTED: no such sensor, not an error */
    GPU_FIELD_LOST,        /* NVML_ERROR_GPU_IS_LOST: the GPU fell off the bus */
    GPU_FIELD_ERROR,       /* any other NVML error: nvml_rc says which */
    GPU_FIELD_MISSING,     /* the library does not export the call */
};

struct gpu_process {
    uint32_t pid;
    uint64_t used_bytes; /* UINT64_MAX when NVML does not know */
    double sm_util_pct;  /* mean SM utilisation of its samples since the previous
                            read (nvmlDeviceGetProcessUtilization); NaN: none */
};

/* One GPU's readings; a value is meaningful only where state[] is OK. */
struct gpu_reading {
    unsigned index; /* NVML's index */
    bool lost;      /* some query said NVML_ERROR_GPU_IS_LOST */
    char name[96];
    char uuid[96];
    char bus_id[32];        /* "00000000:19:00.0" */
    uint32_t pci_device_id; /* device (high 16) and vendor (low 16) id */
    uint32_t power_mw;      /* board power, mW */
    uint64_t energy_mj;     /* since the driver loaded, mJ */
    uint32_t limit_mw;      /* power limit in force, mW */
    uint32_t limit_min_mw, limit_max_mw;
    uint32_t util_gpu_pct, util_mem_pct; /* %, over NVML's last sample period */
    uint32_t sm_mhz, mem_mhz;            /* MHz */
    int pstate;                          /* 0 (P0) .. 15; 32 unknown */
    uint32_t temp_c;                     /* °C */
    unsigned nprocs;
    bool procs_truncated; /* more than GPU_NVML_MAX_PROCS compute processes */
    /* procs[] holds the compute processes, then those with utilisation
     * samples but not in the compute list (graphics), as room allows */
    struct gpu_process procs[GPU_NVML_MAX_PROCS];
    enum gpu_field_state state[GPU_F_COUNT];
    int nvml_rc[GPU_F_COUNT]; /* NVML's return code for each field */
};

struct gpu_nvml;

/* Loads the library and calls nvmlInit_v2. On failure returns -errno
 * (-ENOENT: no library; -ENODEV: nvmlInit failed; -ENOSYS: a call watt
 * cannot do without is missing) and writes why into why (may be NULL). */
int gpu_nvml_open(struct gpu_nvml **ret_nvml, char *why, size_t why_len);
/* nvmlShutdown and dlclose. NULL is fine. */
void gpu_nvml_close(struct gpu_nvml *nvml);

/* Every GPU NVML counts, up to max, with their readings: ret_gpus[0..*ret_n).
 * Per-process utilisation covers the samples since the previous call (the
 * first: all NVML keeps, a few seconds).
 * A GPU whose handle NVML cannot give is listed lost or with every field
 * in error. Returns -EIO (and why) only when the count itself fails. */
int gpu_nvml_read(struct gpu_nvml *nvml, struct gpu_reading *gpus, size_t max, size_t *ret_n,
                  char *why, size_t why_len);

/* The power management limit of the GPU whose UUID ("GPU-5d3c...") is
 * UUID, and its range (nvmlDeviceGetPowerManagementLimitConstraints), mW.
 * -ENOENT when no GPU has that UUID, -EPERM/-EOPNOTSUPP/-ENODEV/-EIO for
 * NVML's errors, -ENOSYS when the library lacks a call. */
int gpu_nvml_limit_get(struct gpu_nvml *nvml, const char *uuid, uint32_t *ret_mw, uint32_t *ret_min,
                       uint32_t *ret_max);
/* Set it (nvmlDeviceSetPowerManagementLimit, root only; it holds until the
 * driver unloads). A value outside the range is refused (-ERANGE) before
 * NVML is asked. Errors as above, and why. Only the tune layer's journal
 * calls this (tune/knob_io.c), as only it calls host_write(). */
int gpu_nvml_limit_set(struct gpu_nvml *nvml, const char *uuid, uint32_t mw, char *why,
                       size_t why_len);

/* NVML's own words for a return code (nvmlErrorString), or a fallback. */
const char *gpu_nvml_strerror(const struct gpu_nvml *nvml, int nvml_rc);
const char *gpu_field_name(enum gpu_field f);
const char *gpu_field_state_name(enum gpu_field_state s);
