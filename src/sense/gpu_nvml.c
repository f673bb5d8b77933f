#include "sense/gpu_nvml.h"

#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sense/nvml_abi.h"

#define NVML_LIBRARY "libnvidia-ml.so.1"

struct gpu_nvml {
    void *dl;
    nvml_init_v2_fn init;
    nvml_shutdown_fn shutdown;
    nvml_error_string_fn error_string;
    nvml_get_count_v2_fn get_count;
    nvml_get_handle_by_index_v2_fn get_handle;
    /* optional: a missing one makes its field GPU_FIELD_MISSING */
    nvml_get_string_fn get_name;
    nvml_get_string_fn get_uuid;
    nvml_get_pci_info_v3_fn get_pci;
    nvml_get_uint_fn get_power;
    nvml_get_u64_fn get_energy;
    nvml_get_uint_fn get_limit;
    nvml_get_limit_constraints_fn get_limit_range;
    nvml_get_utilization_fn get_util;
    nvml_get_clock_info_fn get_clock;
    nvml_get_pstate_fn get_pstate;
    nvml_get_temperature_fn get_temp;
    nvml_get_processes_v3_fn get_procs;
    nvml_set_uint_fn set_limit; /* the one setter: only tune/knob_io.c calls it */
    nvml_get_process_utilization_fn get_procutil;
    unsigned long long last_seen[GPU_NVML_MAX_GPUS]; /* newest sample read, µs */
};

__attribute__((format(printf, 3, 4))) static void say(char *why, size_t why_len, const char *fmt,
                                                      ...)
{
    if (!why || why_len == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, why_len, fmt, ap);
    va_end(ap);
}

/* dlsym() returns void *; POSIX guarantees it converts to a function pointer. */
#define SYM(n, field, name) (*(void **)&(n)->field = dlsym((n)->dl, name))

static void load_symbols(struct gpu_nvml *n)
{
    SYM(n, init, "nvmlInit_v2");
    SYM(n, shutdown, "nvmlShutdown");
    SYM(n, error_string, "nvmlErrorString");
    SYM(n, get_count, "nvmlDeviceGetCount_v2");
    SYM(n, get_handle, "nvmlDeviceGetHandleByIndex_v2");
    SYM(n, get_name, "nvmlDeviceGetName");
    SYM(n, get_uuid, "nvmlDeviceGetUUID");
    SYM(n, get_pci, "nvmlDeviceGetPciInfo_v3");
    SYM(n, get_power, "nvmlDeviceGetPowerUsage");
    SYM(n, get_energy, "nvmlDeviceGetTotalEnergyConsumption");
    SYM(n, get_limit, "nvmlDeviceGetPowerManagementLimit");
    SYM(n, get_limit_range, "nvmlDeviceGetPowerManagementLimitConstraints");
    SYM(n, get_util, "nvmlDeviceGetUtilizationRates");
    SYM(n, get_clock, "nvmlDeviceGetClockInfo");
    SYM(n, get_pstate, "nvmlDeviceGetPerformanceState");
    SYM(n, get_temp, "nvmlDeviceGetTemperature");
    SYM(n, get_procs, "nvmlDeviceGetComputeRunningProcesses_v3");
    SYM(n, set_limit, "nvmlDeviceSetPowerManagementLimit");
    SYM(n, get_procutil, "nvmlDeviceGetProcessUtilization");
}

static const char *missing_mandatory(const struct gpu_nvml *n)
{
    if (!n->init)
        return "nvmlInit_v2";
    if (!n->shutdown)
        return "nvmlShutdown";
    if (!n->get_count)
        return "nvmlDeviceGetCount_v2";
    if (!n->get_handle)
        return "nvmlDeviceGetHandleByIndex_v2";
    return NULL;
}

int gpu_nvml_open(struct gpu_nvml **ret_nvml, char *why, size_t why_len)
{
    const char *path = getenv(GPU_NVML_ENV_LIBRARY);
    if (!path || !*path)
        path = NVML_LIBRARY;
    struct gpu_nvml *n = calloc(1, sizeof(*n));
    if (!n)
        return -ENOMEM;
    n->dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!n->dl) {
        say(why, why_len, "%s not found (%s)", path, dlerror());
        free(n);
        return -ENOENT;
    }
    load_symbols(n);
    const char *missing = missing_mandatory(n);
    if (missing) {
        say(why, why_len, "%s has no %s", path, missing);
        dlclose(n->dl);
        free(n);
        return -ENOSYS;
    }
    nvml_return_t rc = n->init();
    if (rc != NVML_SUCCESS) {
        say(why, why_len, "nvmlInit_v2: %s%s", gpu_nvml_strerror(n, rc),
            rc == NVML_ERROR_DRIVER_NOT_LOADED ? " (is the nvidia driver loaded?)" : "");
        dlclose(n->dl);
        free(n);
        return -ENODEV;
    }
    *ret_nvml = n;
    return 0;
}

void gpu_nvml_close(struct gpu_nvml *n)
{
    if (!n)
        return;
    n->shutdown();
    dlclose(n->dl);
    free(n);
}

const char *gpu_nvml_strerror(const struct gpu_nvml *n, int rc)
{
    if (n && n->error_string) {
        const char *s = n->error_string(rc);
        if (s)
            return s;
    }
    switch (rc) {
    case NVML_SUCCESS:
        return "Success";
    case NVML_ERROR_NOT_SUPPORTED:
        return "Not Supported";
    case NVML_ERROR_GPU_IS_LOST:
        return "GPU is lost";
    case NVML_ERROR_DRIVER_NOT_LOADED:
        return "Driver Not Loaded";
    case NVML_ERROR_NO_PERMISSION:
        return "Insufficient Permissions";
    default:
        return "Unknown Error";
    }
}

static const char *const field_names[GPU_F_COUNT] = {
    [GPU_F_NAME] = "name",
    [GPU_F_UUID] = "uuid",
    [GPU_F_PCI] = "pci",
    [GPU_F_POWER] = "power",
    [GPU_F_ENERGY] = "energy",
    [GPU_F_LIMIT] = "limit",
    [GPU_F_LIMIT_RANGE] = "limit_range",
    [GPU_F_UTIL] = "util",
    [GPU_F_CLOCK_SM] = "clock_sm",
    [GPU_F_CLOCK_MEM] = "clock_mem",
    [GPU_F_PSTATE] = "pstate",
    [GPU_F_TEMP] = "temp",
    [GPU_F_PROCS] = "procs",
    [GPU_F_PROCUTIL] = "procutil",
};

const char *gpu_field_name(enum gpu_field f)
{
    return (unsigned)f < GPU_F_COUNT ? field_names[f] : "?";
}

const char *gpu_field_state_name(enum gpu_field_state s)
{
    switch (s) {
    case GPU_FIELD_OK:
        return "ok";
    case GPU_FIELD_UNSUPPORTED:
        return "not supported";
    case GPU_FIELD_LOST:
        return "GPU lost";
    case GPU_FIELD_ERROR:
        return "error";
    case GPU_FIELD_MISSING:
        return "not in library";
    }
    return "?";
}

/* Records NVML's answer for one field; returns whether the value is good. */
static bool note(struct gpu_reading *g, enum gpu_field f, nvml_return_t rc)
{
    g->nvml_rc[f] = rc;
    if (rc == NVML_SUCCESS)
        g->state[f] = GPU_FIELD_OK;
    else if (rc == NVML_ERROR_NOT_SUPPORTED)
        g->state[f] = GPU_FIELD_UNSUPPORTED;
    else if (rc == NVML_ERROR_GPU_IS_LOST) {
        g->state[f] = GPU_FIELD_LOST;
        g->lost = true;
    } else
        g->state[f] = GPU_FIELD_ERROR;
    return rc == NVML_SUCCESS;
}

static void missing(struct gpu_reading *g, enum gpu_field f)
{
    g->state[f] = GPU_FIELD_MISSING;
    g->nvml_rc[f] = NVML_ERROR_FUNCTION_NOT_FOUND;
}

static void read_ids(const struct gpu_nvml *n, nvml_device_t d, struct gpu_reading *g)
{
    if (!n->get_name)
        missing(g, GPU_F_NAME);
    else if (!note(g, GPU_F_NAME, n->get_name(d, g->name, sizeof(g->name))))
        g->name[0] = '\0';
    g->name[sizeof(g->name) - 1] = '\0';
    if (!n->get_uuid)
        missing(g, GPU_F_UUID);
    else if (!note(g, GPU_F_UUID, n->get_uuid(d, g->uuid, sizeof(g->uuid))))
        g->uuid[0] = '\0';
    g->uuid[sizeof(g->uuid) - 1] = '\0';
    nvml_pci_info_t pci;
    memset(&pci, 0, sizeof(pci));
    if (!n->get_pci)
        missing(g, GPU_F_PCI);
    else if (note(g, GPU_F_PCI, n->get_pci(d, &pci))) {
        pci.bus_id[sizeof(pci.bus_id) - 1] = '\0';
        snprintf(g->bus_id, sizeof(g->bus_id), "%s", pci.bus_id);
        g->pci_device_id = pci.pci_device_id;
    }
}

static void read_power(const struct gpu_nvml *n, nvml_device_t d, struct gpu_reading *g)
{
    unsigned int u = 0, lo = 0, hi = 0;
    unsigned long long e = 0;
    if (!n->get_power)
        missing(g, GPU_F_POWER);
    else if (note(g, GPU_F_POWER, n->get_power(d, &u)))
        g->power_mw = u;
    if (!n->get_energy)
        missing(g, GPU_F_ENERGY);
    else if (note(g, GPU_F_ENERGY, n->get_energy(d, &e)))
        g->energy_mj = e;
    if (!n->get_limit)
        missing(g, GPU_F_LIMIT);
    else if (note(g, GPU_F_LIMIT, n->get_limit(d, &u)))
        g->limit_mw = u;
    if (!n->get_limit_range)
        missing(g, GPU_F_LIMIT_RANGE);
    else if (note(g, GPU_F_LIMIT_RANGE, n->get_limit_range(d, &lo, &hi))) {
        g->limit_min_mw = lo;
        g->limit_max_mw = hi;
    }
}

static void read_activity(const struct gpu_nvml *n, nvml_device_t d, struct gpu_reading *g)
{
    nvml_utilization_t util = {0, 0};
    unsigned int u = 0;
    int p = NVML_PSTATE_UNKNOWN;
    if (!n->get_util)
        missing(g, GPU_F_UTIL);
    else if (note(g, GPU_F_UTIL, n->get_util(d, &util))) {
        g->util_gpu_pct = util.gpu;
        g->util_mem_pct = util.memory;
    }
    if (!n->get_clock) {
        missing(g, GPU_F_CLOCK_SM);
        missing(g, GPU_F_CLOCK_MEM);
    } else {
        if (note(g, GPU_F_CLOCK_SM, n->get_clock(d, NVML_CLOCK_SM, &u)))
            g->sm_mhz = u;
        if (note(g, GPU_F_CLOCK_MEM, n->get_clock(d, NVML_CLOCK_MEM, &u)))
            g->mem_mhz = u;
    }
    g->pstate = NVML_PSTATE_UNKNOWN;
    if (!n->get_pstate)
        missing(g, GPU_F_PSTATE);
    else if (note(g, GPU_F_PSTATE, n->get_pstate(d, &p)))
        g->pstate = p;
    if (!n->get_temp)
        missing(g, GPU_F_TEMP);
    else if (note(g, GPU_F_TEMP, n->get_temp(d, NVML_TEMPERATURE_GPU, &u)))
        g->temp_c = u;
}

static void read_procs(const struct gpu_nvml *n, nvml_device_t d, struct gpu_reading *g)
{
    nvml_process_info_t info[GPU_NVML_MAX_PROCS];
    unsigned int count = GPU_NVML_MAX_PROCS;
    if (!n->get_procs) {
        missing(g, GPU_F_PROCS);
        return;
    }
    nvml_return_t rc = n->get_procs(d, &count, info);
    if (rc == NVML_ERROR_INSUFFICIENT_SIZE) {
        /* More than GPU_NVML_MAX_PROCS run: NVML filled nothing and set
         * count to how many. The list is empty and marked truncated. */
        g->procs_truncated = true;
        rc = NVML_SUCCESS;
        count = 0;
    }
    if (!note(g, GPU_F_PROCS, rc))
        return;
    if (count > GPU_NVML_MAX_PROCS)
        count = GPU_NVML_MAX_PROCS;
    g->nprocs = count;
    for (unsigned i = 0; i < count; i++) {
        g->procs[i].pid = info[i].pid;
        g->procs[i].sm_util_pct = NAN;
        g->procs[i].used_bytes = info[i].used_gpu_memory == NVML_VALUE_NOT_AVAILABLE
                                     ? UINT64_MAX
                                     : info[i].used_gpu_memory;
    }
}

/* At most this many samples a read (NVML keeps a few seconds of them at
 * its sample period of 1/6 s to 1 s, per process). */
#define PROCUTIL_MAX_SAMPLES 1024

/* Mean SM utilisation per process over the samples newer than the last
 * read's newest, folded into procs[] (appended when not listed there). */
static void fold_samples(struct gpu_reading *g, const nvml_process_utilization_sample_t *v,
                         unsigned count)
{
    double sum[GPU_NVML_MAX_PROCS] = {0};
    unsigned n[GPU_NVML_MAX_PROCS] = {0};
    for (unsigned i = 0; i < count; i++) {
        unsigned k = 0;
        while (k < g->nprocs && g->procs[k].pid != v[i].pid)
            k++;
        if (k == g->nprocs) {
            if (g->nprocs == GPU_NVML_MAX_PROCS)
                continue;
            g->procs[g->nprocs++] =
                (struct gpu_process){.pid = v[i].pid, .used_bytes = UINT64_MAX, .sm_util_pct = NAN};
        }
        sum[k] += v[i].sm_util > 100 ? 100 : v[i].sm_util;
        n[k]++;
    }
    for (unsigned k = 0; k < g->nprocs; k++)
        if (n[k])
            g->procs[k].sm_util_pct = sum[k] / n[k];
}

static void read_procutil(struct gpu_nvml *n, nvml_device_t d, unsigned index,
                          struct gpu_reading *g)
{
    if (!n->get_procutil) {
        missing(g, GPU_F_PROCUTIL);
        return;
    }
    unsigned long long last = index < GPU_NVML_MAX_GPUS ? n->last_seen[index] : 0;
    unsigned int count = 0;
    nvml_return_t rc = n->get_procutil(d, NULL, &count, last);
    if (rc == NVML_ERROR_NOT_FOUND) { /* no sample since the last read */
        note(g, GPU_F_PROCUTIL, NVML_SUCCESS);
        return;
    }
    if (rc != NVML_ERROR_INSUFFICIENT_SIZE && rc != NVML_SUCCESS) {
        note(g, GPU_F_PROCUTIL, rc);
        return;
    }
    count = count > PROCUTIL_MAX_SAMPLES ? PROCUTIL_MAX_SAMPLES : count;
    nvml_process_utilization_sample_t *v = calloc(count ? count : 1, sizeof(*v));
    if (!v) {
        note(g, GPU_F_PROCUTIL, NVML_ERROR_MEMORY);
        return;
    }
    rc = count ? n->get_procutil(d, v, &count, last) : NVML_SUCCESS;
    if (rc == NVML_ERROR_NOT_FOUND)
        rc = NVML_SUCCESS, count = 0;
    if (!note(g, GPU_F_PROCUTIL, rc)) {
        free(v);
        return;
    }
    if (count > PROCUTIL_MAX_SAMPLES)
        count = PROCUTIL_MAX_SAMPLES;
    for (unsigned i = 0; i < count && index < GPU_NVML_MAX_GPUS; i++)
        if (v[i].time_stamp > n->last_seen[index])
            n->last_seen[index] = v[i].time_stamp;
    fold_samples(g, v, count);
    free(v);
}

static void read_gpu(struct gpu_nvml *n, unsigned index, struct gpu_reading *g)
{
    memset(g, 0, sizeof(*g));
    g->index = index;
    nvml_device_t d = NULL;
    nvml_return_t rc = n->get_handle(index, &d);
    if (rc != NVML_SUCCESS) {
        for (int f = 0; f < GPU_F_COUNT; f++)
            note(g, (enum gpu_field)f, rc);
        g->pstate = NVML_PSTATE_UNKNOWN;
        return;
    }
    read_ids(n, d, g);
    read_power(n, d, g);
    read_activity(n, d, g);
    read_procs(n, d, g);
    read_procutil(n, d, index, g);
}

int gpu_nvml_read(struct gpu_nvml *n, struct gpu_reading *gpus, size_t max, size_t *ret_n,
                  char *why, size_t why_len)
{
    unsigned int count = 0;
    nvml_return_t rc = n->get_count(&count);
    if (rc != NVML_SUCCESS) {
        say(why, why_len, "nvmlDeviceGetCount_v2: %s", gpu_nvml_strerror(n, rc));
        return -EIO;
    }
    size_t k = count < max ? count : max;
    for (size_t i = 0; i < k; i++)
        read_gpu(n, (unsigned)i, &gpus[i]);
    *ret_n = k;
    return 0;
}

/* The handle of the GPU whose UUID is UUID. */
static int find_uuid(const struct gpu_nvml *n, const char *uuid, nvml_device_t *ret)
{
    unsigned int count = 0;
    if (!n->get_uuid)
        return -ENOSYS;
    if (n->get_count(&count) != NVML_SUCCESS)
        return -EIO;
    for (unsigned i = 0; i < count; i++) {
        nvml_device_t d = NULL;
        char u[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = "";
        if (n->get_handle(i, &d) != NVML_SUCCESS || n->get_uuid(d, u, sizeof(u)) != NVML_SUCCESS)
            continue;
        u[sizeof(u) - 1] = '\0';
        if (strcmp(u, uuid) == 0) {
            *ret = d;
            return 0;
        }
    }
    return -ENOENT;
}

static int errno_of(nvml_return_t rc)
{
    switch (rc) {
    case NVML_SUCCESS:
        return 0;
    case NVML_ERROR_NO_PERMISSION:
        return -EPERM;
    case NVML_ERROR_NOT_SUPPORTED:
        return -EOPNOTSUPP;
    case NVML_ERROR_INVALID_ARGUMENT:
        return -EINVAL;
    case NVML_ERROR_GPU_IS_LOST:
    case NVML_ERROR_NOT_FOUND:
        return -ENODEV;
    default:
        return -EIO;
    }
}

int gpu_nvml_limit_get(struct gpu_nvml *n, const char *uuid, uint32_t *ret_mw, uint32_t *ret_min,
                       uint32_t *ret_max)
{
    nvml_device_t d;
    int r = find_uuid(n, uuid, &d);
    if (r < 0)
        return r;
    unsigned int mw = 0, lo = 0, hi = 0;
    if (!n->get_limit || !n->get_limit_range)
        return -ENOSYS;
    if ((r = errno_of(n->get_limit(d, &mw))) < 0 ||
        (r = errno_of(n->get_limit_range(d, &lo, &hi))) < 0)
        return r;
    *ret_mw = mw;
    *ret_min = lo;
    *ret_max = hi;
    return 0;
}

int gpu_nvml_limit_set(struct gpu_nvml *n, const char *uuid, uint32_t mw, char *why, size_t why_len)
{
    nvml_device_t d;
    unsigned int lo = 0, hi = 0;
    int r = find_uuid(n, uuid, &d);
    if (r < 0) {
        say(why, why_len, "no GPU %s", uuid);
        return r;
    }
    if (!n->set_limit || !n->get_limit_range) {
        say(why, why_len, "the library has no nvmlDeviceSetPowerManagementLimit");
        return -ENOSYS;
    }
    nvml_return_t rc = n->get_limit_range(d, &lo, &hi);
    if (rc != NVML_SUCCESS) {
        say(why, why_len, "nvmlDeviceGetPowerManagementLimitConstraints: %s",
            gpu_nvml_strerror(n, rc));
        return errno_of(rc);
    }
    if (mw < lo || mw > hi) {
        say(why, why_len, "%u mW is outside %s's range %u..%u mW", mw, uuid, lo, hi);
        return -ERANGE;
    }
    rc = n->set_limit(d, mw);
    if (rc != NVML_SUCCESS) {
        say(why, why_len, "nvmlDeviceSetPowerManagementLimit: %s", gpu_nvml_strerror(n, rc));
        return errno_of(rc);
    }
    return 0;
}
