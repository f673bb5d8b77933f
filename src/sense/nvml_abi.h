#pragma once
/* The part of NVIDIA's NVML ABI that watt calls (nvml.h, CUDA 11-12 era),
 * declared here so that watt builds without the CUDA headers and dlopen()s
 * libnvidia-ml.so.1 at run time (sense/gpu_nvml.c). Values and layouts as
 * in nvml.h; the test double (tests/helpers/nvml_double.c) shares them. */

#include <stdint.h>

typedef int nvml_return_t; /* nvmlReturn_t, an enum: int-sized */
enum {
    NVML_SUCCESS = 0,
    NVML_ERROR_UNINITIALIZED = 1,
    NVML_ERROR_INVALID_ARGUMENT = 2,
    NVML_ERROR_NOT_SUPPORTED = 3,
    NVML_ERROR_NO_PERMISSION = 4,
    NVML_ERROR_ALREADY_INITIALIZED = 5,
    NVML_ERROR_NOT_FOUND = 6,
    NVML_ERROR_INSUFFICIENT_SIZE = 7,
    NVML_ERROR_INSUFFICIENT_POWER = 8,
    NVML_ERROR_DRIVER_NOT_LOADED = 9,
    NVML_ERROR_TIMEOUT = 10,
    NVML_ERROR_IRQ_ISSUE = 11,
    NVML_ERROR_LIBRARY_NOT_FOUND = 12,
    NVML_ERROR_FUNCTION_NOT_FOUND = 13,
    NVML_ERROR_CORRUPTED_INFOROM = 14,
    NVML_ERROR_GPU_IS_LOST = 15,
    NVML_ERROR_RESET_REQUIRED = 16,
    NVML_ERROR_OPERATING_SYSTEM = 17,
    NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18,
    NVML_ERROR_IN_USE = 19,
    NVML_ERROR_MEMORY = 20,
    NVML_ERROR_NO_DATA = 21,
    NVML_ERROR_UNKNOWN = 999,
};

typedef struct nvml_device_st *nvml_device_t; /* nvmlDevice_t: opaque */

/* Buffer sizes nvml.h recommends (the _V2 ones of newer headers). */
#define NVML_DEVICE_NAME_V2_BUFFER_SIZE       96
#define NVML_DEVICE_UUID_V2_BUFFER_SIZE       96
#define NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE    32
#define NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE 16

/* nvmlPciInfo_t, as filled by nvmlDeviceGetPciInfo_v3 */
typedef struct {
    char bus_id_legacy[NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE];
    unsigned int domain;
    unsigned int bus;
    unsigned int device;
    unsigned int pci_device_id;                      /* device (high 16) and vendor (low 16) id */
    unsigned int pci_subsystem_id;                   /* subsystem (high 16), subvendor (low 16) */
    char bus_id[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE]; /* "00000000:19:00.0" */
} nvml_pci_info_t;

/* nvmlUtilization_t: % of the last sample period (1/6 s to 1 s) */
typedef struct {
    unsigned int gpu;
    unsigned int memory;
} nvml_utilization_t;

/* nvmlProcessInfo_t as nvmlDeviceGetComputeRunningProcesses_v3 fills it */
typedef struct {
    unsigned int pid;
    unsigned long long used_gpu_memory; /* bytes; NVML_VALUE_NOT_AVAILABLE if unknown */
    unsigned int gpu_instance_id;       /* 0xFFFFFFFF outside MIG */
    unsigned int compute_instance_id;
} nvml_process_info_t;

#define NVML_VALUE_NOT_AVAILABLE (~0ULL)

/* nvmlProcessUtilizationSample_t, as nvmlDeviceGetProcessUtilization
 * fills it: one sample of one process's share of the GPU's sample period */
typedef struct {
    unsigned int pid;
    unsigned long long time_stamp; /* CPU timestamp, µs */
    unsigned int sm_util;          /* % of the SMs' time */
    unsigned int mem_util;         /* % of the frame buffer's time */
    unsigned int enc_util;
    unsigned int dec_util;
} nvml_process_utilization_sample_t;

/* nvmlClockType_t */
enum { NVML_CLOCK_GRAPHICS = 0, NVML_CLOCK_SM = 1, NVML_CLOCK_MEM = 2, NVML_CLOCK_VIDEO = 3 };
/* nvmlTemperatureSensors_t */
enum { NVML_TEMPERATURE_GPU = 0 };
/* nvmlPstates_t: 0 (P0, most performance) .. 15; 32 unknown */
enum { NVML_PSTATE_UNKNOWN = 32 };

/* Function types, named after the exported symbols. */
typedef nvml_return_t (*nvml_init_v2_fn)(void);
typedef nvml_return_t (*nvml_shutdown_fn)(void);
typedef const char *(*nvml_error_string_fn)(nvml_return_t);
typedef nvml_return_t (*nvml_get_count_v2_fn)(unsigned int *count);
typedef nvml_return_t (*nvml_get_handle_by_index_v2_fn)(unsigned int index, nvml_device_t *device);
typedef nvml_return_t (*nvml_get_string_fn)(nvml_device_t device, char *buf, unsigned int length);
typedef nvml_return_t (*nvml_get_pci_info_v3_fn)(nvml_device_t device, nvml_pci_info_t *pci);
typedef nvml_return_t (*nvml_get_uint_fn)(nvml_device_t device, unsigned int *value);
typedef nvml_return_t (*nvml_get_u64_fn)(nvml_device_t device, unsigned long long *value);
/* nvmlDeviceSetPowerManagementLimit: root only (NO_PERMISSION otherwise) */
typedef nvml_return_t (*nvml_set_uint_fn)(nvml_device_t device, unsigned int value);
typedef nvml_return_t (*nvml_get_limit_constraints_fn)(nvml_device_t device, unsigned int *min_mw,
                                                       unsigned int *max_mw);
typedef nvml_return_t (*nvml_get_utilization_fn)(nvml_device_t device, nvml_utilization_t *util);
typedef nvml_return_t (*nvml_get_clock_info_fn)(nvml_device_t device, int type, unsigned int *mhz);
typedef nvml_return_t (*nvml_get_pstate_fn)(nvml_device_t device, int *pstate);
typedef nvml_return_t (*nvml_get_temperature_fn)(nvml_device_t device, int sensor, unsigned int *c);
/* samples NULL: *count says how many there are (NVML_ERROR_INSUFFICIENT_SIZE);
 * NVML_ERROR_NOT_FOUND: none newer than last_seen (µs, 0: all it keeps) */
typedef nvml_return_t (*nvml_get_process_utilization_fn)(nvml_device_t device,
                                                         nvml_process_utilization_sample_t *samples,
                                                         unsigned int *count,
                                                         unsigned long long last_seen);
typedef nvml_return_t (*nvml_get_processes_v3_fn)(nvml_device_t device, unsigned int *count,
                                                  nvml_process_info_t *infos);
