/* A test double of libnvidia-ml.so.1: the NVML calls watt makes
 * (sense/gpu_nvml.c), answered from a script named by $WATT_NVML_SCRIPT,
 * so that the GPU code runs where no GPU is. Loaded by pointing
 * $WATT_NVML_LIBRARY at this shared object.
 *
 * Script, one directive a line, '#' starts a comment:
 *   init ERR                  nvmlInit_v2 answers ERR
 *   count N                   nvmlDeviceGetCount_v2 says N GPUs (else: the
 *                             highest GPU index named + 1)
 *   FIELD GPU TOKEN...        answers for GPU's FIELD, one token per call:
 *                             the Nth call takes the Nth token, the last
 *                             repeats. A token is a value or an error name
 *                             (NOT_SUPPORTED, GPU_IS_LOST, NO_PERMISSION,
 *                             UNKNOWN, or err=NUMBER).
 * FIELDs and their values:
 *   handle (error only), name TEXT, uuid TEXT, bus 00000000:19:00.0,
 *   power mW, energy mJ, limit mW, limit_range MIN/MAX, util GPU/MEM,
 *   clock_sm MHz, clock_mem MHz, pstate N, temp C,
 *   procs PID:BYTES,PID:BYTES or "-" (none),
 *   set_limit (error only: what nvmlDeviceSetPowerManagementLimit answers
 *   instead of setting)
 *   procutil PID:SM,PID:SM... or "-": nvmlDeviceGetProcessUtilization's
 *     samples for one read (a PID may repeat: several samples), each
 *     stamped after the caller's lastSeenTimeStamp; "-" answers NOT_FOUND
 *     (no sample since). The size query (NULL buffer) does not take a
 *     token, the read that fills does.
 * name and uuid take the rest of the line as one value. A field with no
 * line answers NOT_SUPPORTED.
 *
 * nvmlDeviceSetPowerManagementLimit(mW) refuses a value outside the GPU's
 * limit_range (INVALID_ARGUMENT, as NVML does) and otherwise makes the
 * GPU's limit that value. With $WATT_NVML_STATE naming a file, the limits
 * set are kept there ("GPU MW" lines, replaced atomically) and read back
 * by nvmlInit_v2 over the script's, so a limit set by one process is what
 * the next one sees: `watt tune` and `watt restore` in turn, as on a real
 * driver, where the limit holds until the driver unloads. */

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sense/nvml_abi.h"

#define MAX_GPUS   8
#define MAX_TOKENS 16
#define TOKEN_LEN  128

enum {
    F_HANDLE,
    F_NAME,
    F_UUID,
    F_BUS,
    F_POWER,
    F_ENERGY,
    F_LIMIT,
    F_LIMIT_RANGE,
    F_UTIL,
    F_CLOCK_SM,
    F_CLOCK_MEM,
    F_PSTATE,
    F_TEMP,
    F_PROCS,
    F_SET_LIMIT,
    F_PROCUTIL,
    F_COUNT
};
static const char *const fields[F_COUNT] = {
    "handle", "name",     "uuid",      "bus",    "power", "energy", "limit",     "limit_range",
    "util",   "clock_sm", "clock_mem", "pstate", "temp",  "procs",  "set_limit", "procutil",
};

struct script_field {
    int ntok;
    char tok[MAX_TOKENS][TOKEN_LEN];
    int calls;
};

struct nvml_device_st {
    unsigned index;
    struct script_field f[F_COUNT];
};

static struct nvml_device_st gpus[MAX_GPUS];
static int init_rc;
static int count = -1;
static int ngpus;
static int inited;

static int parse_error(const char *t)
{
    static const struct {
        const char *name;
        int rc;
    } errs[] = {
        {"NOT_SUPPORTED", NVML_ERROR_NOT_SUPPORTED},
        {"GPU_IS_LOST", NVML_ERROR_GPU_IS_LOST},
        {"NO_PERMISSION", NVML_ERROR_NO_PERMISSION},
        {"DRIVER_NOT_LOADED", NVML_ERROR_DRIVER_NOT_LOADED},
        {"INSUFFICIENT_SIZE", NVML_ERROR_INSUFFICIENT_SIZE},
        {"UNKNOWN", NVML_ERROR_UNKNOWN},
    };
    for (size_t i = 0; i < sizeof(errs) / sizeof(errs[0]); i++)
        if (strcmp(t, errs[i].name) == 0)
            return errs[i].rc;
    if (strncmp(t, "err=", 4) == 0)
        return atoi(t + 4);
    return 0;
}

static void parse_line(char *line)
{
    char *hash = strchr(line, '#');
    if (hash)
        *hash = '\0';
    char *save = NULL;
    char *key = strtok_r(line, " \t\n", &save);
    if (!key)
        return;
    if (strcmp(key, "init") == 0) {
        char *t = strtok_r(NULL, " \t\n", &save);
        init_rc = t ? parse_error(t) : 0;
        return;
    }
    if (strcmp(key, "count") == 0) {
        char *t = strtok_r(NULL, " \t\n", &save);
        count = t ? atoi(t) : 0;
        return;
    }
    char *idx = strtok_r(NULL, " \t\n", &save);
    int f;
    for (f = 0; f < F_COUNT && strcmp(fields[f], key) != 0; f++)
        ;
    if (f == F_COUNT || !idx || atoi(idx) < 0 || atoi(idx) >= MAX_GPUS)
        return;
    int g = atoi(idx);
    if (g + 1 > ngpus)
        ngpus = g + 1;
    struct script_field *sf = &gpus[g].f[f];
    if (f == F_NAME || f == F_UUID) { /* the rest of the line, one value */
        char *rest = save ? save + strspn(save, " \t") : NULL;
        if (rest && *rest) {
            rest[strcspn(rest, "\n")] = '\0';
            snprintf(sf->tok[0], TOKEN_LEN, "%s", rest);
            sf->ntok = 1;
        }
        return;
    }
    char *t;
    while (sf->ntok < MAX_TOKENS && (t = strtok_r(NULL, " \t\n", &save)))
        snprintf(sf->tok[sf->ntok++], TOKEN_LEN, "%s", t);
}

/* The limits earlier processes set ($WATT_NVML_STATE), over the script's. */
static void load_state(void)
{
    const char *path = getenv("WATT_NVML_STATE");
    FILE *fp = path ? fopen(path, "re") : NULL;
    if (!fp)
        return;
    unsigned g, mw;
    while (fscanf(fp, "%u %u", &g, &mw) == 2)
        if (g < MAX_GPUS) {
            struct script_field *sf = &gpus[g].f[F_LIMIT];
            snprintf(sf->tok[0], TOKEN_LEN, "%u", mw);
            sf->ntok = 1;
            sf->calls = 0;
        }
    fclose(fp);
}

static int save_state(void)
{
    const char *path = getenv("WATT_NVML_STATE");
    if (!path)
        return 0;
    char tmp[4096];
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    FILE *fp = fopen(tmp, "we");
    if (!fp)
        return -1;
    for (int g = 0; g < ngpus; g++)
        if (gpus[g].f[F_LIMIT].ntok == 1)
            fprintf(fp, "%d %s\n", g, gpus[g].f[F_LIMIT].tok[0]);
    if (fclose(fp) != 0 || rename(tmp, path) != 0)
        return -1;
    return 0;
}

static void load_script(void)
{
    memset(gpus, 0, sizeof(gpus));
    init_rc = 0;
    count = -1;
    ngpus = 0;
    for (unsigned i = 0; i < MAX_GPUS; i++)
        gpus[i].index = i;
    const char *path = getenv("WATT_NVML_SCRIPT");
    FILE *fp = path ? fopen(path, "re") : NULL;
    if (!fp)
        return;
    char line[1024];
    while (fgets(line, sizeof(line), fp))
        parse_line(line);
    fclose(fp);
    load_state();
}

/* The token for this call of the field, or an error code in *rc. */
static const char *next(nvml_device_t d, int f, nvml_return_t *rc)
{
    struct script_field *sf = &d->f[f];
    *rc = NVML_SUCCESS;
    if (sf->ntok == 0) {
        *rc = NVML_ERROR_NOT_SUPPORTED;
        return NULL;
    }
    int i = sf->calls < sf->ntok ? sf->calls : sf->ntok - 1;
    sf->calls++;
    int err = parse_error(sf->tok[i]);
    if (err) {
        *rc = err;
        return NULL;
    }
    return sf->tok[i];
}

#define EXPORT __attribute__((visibility("default")))

EXPORT nvml_return_t nvmlInit_v2(void);
EXPORT nvml_return_t nvmlInit_v2(void)
{
    load_script();
    if (init_rc)
        return init_rc;
    inited = 1;
    return NVML_SUCCESS;
}

EXPORT nvml_return_t nvmlShutdown(void);
EXPORT nvml_return_t nvmlShutdown(void)
{
    if (!inited)
        return NVML_ERROR_UNINITIALIZED;
    inited = 0;
    return NVML_SUCCESS;
}

EXPORT const char *nvmlErrorString(nvml_return_t rc);
EXPORT const char *nvmlErrorString(nvml_return_t rc)
{
    switch (rc) {
    case NVML_SUCCESS:
        return "Success";
    case NVML_ERROR_NOT_SUPPORTED:
        return "Not Supported";
    case NVML_ERROR_GPU_IS_LOST:
        return "GPU is lost";
    case NVML_ERROR_NO_PERMISSION:
        return "Insufficient Permissions";
    case NVML_ERROR_DRIVER_NOT_LOADED:
        return "Driver Not Loaded";
    default:
        return "Unknown Error";
    }
}

EXPORT nvml_return_t nvmlDeviceGetCount_v2(unsigned int *n);
EXPORT nvml_return_t nvmlDeviceGetCount_v2(unsigned int *n)
{
    if (!inited)
        return NVML_ERROR_UNINITIALIZED;
    *n = (unsigned)(count >= 0 ? count : ngpus);
    return NVML_SUCCESS;
}

EXPORT nvml_return_t nvmlDeviceGetHandleByIndex_v2(unsigned int i, nvml_device_t *d);
EXPORT nvml_return_t nvmlDeviceGetHandleByIndex_v2(unsigned int i, nvml_device_t *d)
{
    if (!inited)
        return NVML_ERROR_UNINITIALIZED;
    if (i >= MAX_GPUS)
        return NVML_ERROR_INVALID_ARGUMENT;
    struct script_field *sf = &gpus[i].f[F_HANDLE];
    if (sf->ntok > 0) {
        nvml_return_t rc;
        if (!next(&gpus[i], F_HANDLE, &rc) && rc)
            return rc;
    }
    *d = &gpus[i];
    return NVML_SUCCESS;
}

static nvml_return_t get_text(nvml_device_t d, int f, char *buf, unsigned int len)
{
    nvml_return_t rc;
    const char *t = next(d, f, &rc);
    if (!t)
        return rc;
    if (strlen(t) + 1 > len)
        return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(buf, t, strlen(t) + 1);
    return NVML_SUCCESS;
}

EXPORT nvml_return_t nvmlDeviceGetName(nvml_device_t d, char *buf, unsigned int len);
EXPORT nvml_return_t nvmlDeviceGetName(nvml_device_t d, char *buf, unsigned int len)
{
    return get_text(d, F_NAME, buf, len);
}

EXPORT nvml_return_t nvmlDeviceGetUUID(nvml_device_t d, char *buf, unsigned int len);
EXPORT nvml_return_t nvmlDeviceGetUUID(nvml_device_t d, char *buf, unsigned int len)
{
    return get_text(d, F_UUID, buf, len);
}

EXPORT nvml_return_t nvmlDeviceGetPciInfo_v3(nvml_device_t d, nvml_pci_info_t *pci);
EXPORT nvml_return_t nvmlDeviceGetPciInfo_v3(nvml_device_t d, nvml_pci_info_t *pci)
{
    nvml_return_t rc;
    const char *t = next(d, F_BUS, &rc);
    if (!t)
        return rc;
    memset(pci, 0, sizeof(*pci));
    unsigned dom = 0, bus = 0, dev = 0;
    sscanf(t, "%x:%x:%x", &dom, &bus, &dev);
    pci->domain = dom;
    pci->bus = bus;
    pci->device = dev;
    pci->pci_device_id = 0x233510deu; /* H200 (0x2335), NVIDIA (0x10de) */
    snprintf(pci->bus_id, sizeof(pci->bus_id), "%s", t);
    snprintf(pci->bus_id_legacy, sizeof(pci->bus_id_legacy), "%04x:%02x:%02x.0", dom & 0xffff, bus,
             dev);
    return NVML_SUCCESS;
}

static nvml_return_t get_uint(nvml_device_t d, int f, unsigned int *v)
{
    nvml_return_t rc;
    const char *t = next(d, f, &rc);
    if (!t)
        return rc;
    *v = (unsigned)strtoul(t, NULL, 10);
    return NVML_SUCCESS;
}

EXPORT nvml_return_t nvmlDeviceGetPowerUsage(nvml_device_t d, unsigned int *mw);
EXPORT nvml_return_t nvmlDeviceGetPowerUsage(nvml_device_t d, unsigned int *mw)
{
    return get_uint(d, F_POWER, mw);
}

EXPORT nvml_return_t nvmlDeviceGetTotalEnergyConsumption(nvml_device_t d, unsigned long long *mj);
EXPORT nvml_return_t nvmlDeviceGetTotalEnergyConsumption(nvml_device_t d, unsigned long long *mj)
{
    nvml_return_t rc;
    const char *t = next(d, F_ENERGY, &rc);
    if (!t)
        return rc;
    *mj = strtoull(t, NULL, 10);
    return NVML_SUCCESS;
}

EXPORT nvml_return_t nvmlDeviceGetPowerManagementLimit(nvml_device_t d, unsigned int *mw);
EXPORT nvml_return_t nvmlDeviceGetPowerManagementLimit(nvml_device_t d, unsigned int *mw)
{
    return get_uint(d, F_LIMIT, mw);
}

EXPORT nvml_return_t nvmlDeviceGetPowerManagementLimitConstraints(nvml_device_t d, unsigned int *lo,
                                                                  unsigned int *hi);
EXPORT nvml_return_t nvmlDeviceGetPowerManagementLimitConstraints(nvml_device_t d, unsigned int *lo,
                                                                  unsigned int *hi)
{
    nvml_return_t rc;
    const char *t = next(d, F_LIMIT_RANGE, &rc);
    if (!t)
        return rc;
    if (sscanf(t, "%u/%u", lo, hi) != 2)
        return NVML_ERROR_UNKNOWN;
    return NVML_SUCCESS;
}

EXPORT nvml_return_t nvmlDeviceGetUtilizationRates(nvml_device_t d, nvml_utilization_t *u);
EXPORT nvml_return_t nvmlDeviceGetUtilizationRates(nvml_device_t d, nvml_utilization_t *u)
{
    nvml_return_t rc;
    const char *t = next(d, F_UTIL, &rc);
    if (!t)
        return rc;
    if (sscanf(t, "%u/%u", &u->gpu, &u->memory) != 2)
        return NVML_ERROR_UNKNOWN;
    return NVML_SUCCESS;
}

EXPORT nvml_return_t nvmlDeviceGetClockInfo(nvml_device_t d, int type, unsigned int *mhz);
EXPORT nvml_return_t nvmlDeviceGetClockInfo(nvml_device_t d, int type, unsigned int *mhz)
{
    if (type == NVML_CLOCK_SM)
        return get_uint(d, F_CLOCK_SM, mhz);
    if (type == NVML_CLOCK_MEM)
        return get_uint(d, F_CLOCK_MEM, mhz);
    return NVML_ERROR_NOT_SUPPORTED;
}

EXPORT nvml_return_t nvmlDeviceGetPerformanceState(nvml_device_t d, int *p);
EXPORT nvml_return_t nvmlDeviceGetPerformanceState(nvml_device_t d, int *p)
{
    unsigned int v = 0;
    nvml_return_t rc = get_uint(d, F_PSTATE, &v);
    if (rc == NVML_SUCCESS)
        *p = (int)v;
    return rc;
}

EXPORT nvml_return_t nvmlDeviceGetTemperature(nvml_device_t d, int sensor, unsigned int *c);
EXPORT nvml_return_t nvmlDeviceGetTemperature(nvml_device_t d, int sensor, unsigned int *c)
{
    if (sensor != NVML_TEMPERATURE_GPU)
        return NVML_ERROR_INVALID_ARGUMENT;
    return get_uint(d, F_TEMP, c);
}

EXPORT nvml_return_t nvmlDeviceGetComputeRunningProcesses_v3(nvml_device_t d, unsigned int *n,
                                                             nvml_process_info_t *infos);
EXPORT nvml_return_t nvmlDeviceGetComputeRunningProcesses_v3(nvml_device_t d, unsigned int *n,
                                                             nvml_process_info_t *infos)
{
    nvml_return_t rc;
    const char *t = next(d, F_PROCS, &rc);
    if (!t)
        return rc;
    nvml_process_info_t got[64];
    unsigned k = 0;
    char buf[TOKEN_LEN];
    snprintf(buf, sizeof(buf), "%s", t);
    char *save = NULL;
    for (char *p = strtok_r(buf, ",", &save); p && k < 64; p = strtok_r(NULL, ",", &save)) {
        unsigned pid = 0;
        unsigned long long bytes = 0;
        if (strcmp(p, "-") == 0)
            break;
        if (sscanf(p, "%u:%llu", &pid, &bytes) != 2)
            return NVML_ERROR_UNKNOWN;
        got[k].pid = pid;
        got[k].used_gpu_memory = bytes;
        got[k].gpu_instance_id = 0xFFFFFFFFu;
        got[k].compute_instance_id = 0xFFFFFFFFu;
        k++;
    }
    if (k > *n) {
        *n = k;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    if (k > 0)
        memcpy(infos, got, k * sizeof(got[0]));
    *n = k;
    return NVML_SUCCESS;
}

EXPORT nvml_return_t nvmlDeviceSetPowerManagementLimit(nvml_device_t d, unsigned int mw);
EXPORT nvml_return_t nvmlDeviceSetPowerManagementLimit(nvml_device_t d, unsigned int mw)
{
    if (!inited)
        return NVML_ERROR_UNINITIALIZED;
    nvml_return_t rc;
    if (d->f[F_SET_LIMIT].ntok > 0 && !next(d, F_SET_LIMIT, &rc) && rc)
        return rc;
    struct script_field *range = &d->f[F_LIMIT_RANGE];
    unsigned lo = 0, hi = 0;
    if (range->ntok == 0 || sscanf(range->tok[range->ntok - 1], "%u/%u", &lo, &hi) != 2)
        return NVML_ERROR_NOT_SUPPORTED;
    if (mw < lo || mw > hi)
        return NVML_ERROR_INVALID_ARGUMENT;
    struct script_field *sf = &d->f[F_LIMIT];
    snprintf(sf->tok[0], TOKEN_LEN, "%u", mw);
    sf->ntok = 1;
    sf->calls = 0;
    return save_state() == 0 ? NVML_SUCCESS : NVML_ERROR_UNKNOWN;
}

/* The samples of this call's procutil token, without taking it. */
static nvml_return_t procutil_samples(nvml_device_t d, nvml_process_utilization_sample_t *got,
                                      unsigned *k, unsigned long long last)
{
    struct script_field *sf = &d->f[F_PROCUTIL];
    if (sf->ntok == 0)
        return NVML_ERROR_NOT_SUPPORTED;
    const char *t = sf->tok[sf->calls < sf->ntok ? sf->calls : sf->ntok - 1];
    int err = parse_error(t);
    if (err)
        return err;
    if (strcmp(t, "-") == 0)
        return NVML_ERROR_NOT_FOUND;
    char buf[TOKEN_LEN];
    snprintf(buf, sizeof(buf), "%s", t);
    char *save = NULL;
    *k = 0;
    for (char *p = strtok_r(buf, ",", &save); p && *k < 64; p = strtok_r(NULL, ",", &save)) {
        unsigned pid = 0, sm = 0;
        if (sscanf(p, "%u:%u", &pid, &sm) != 2)
            return NVML_ERROR_UNKNOWN;
        got[*k] = (nvml_process_utilization_sample_t){
            .pid = pid, .time_stamp = last + 1 + *k, .sm_util = sm};
        (*k)++;
    }
    return NVML_SUCCESS;
}

EXPORT nvml_return_t nvmlDeviceGetProcessUtilization(nvml_device_t d,
                                                     nvml_process_utilization_sample_t *v,
                                                     unsigned int *n, unsigned long long last);
EXPORT nvml_return_t nvmlDeviceGetProcessUtilization(nvml_device_t d,
                                                     nvml_process_utilization_sample_t *v,
                                                     unsigned int *n, unsigned long long last)
{
    nvml_process_utilization_sample_t got[64];
    unsigned k = 0;
    nvml_return_t rc = procutil_samples(d, got, &k, last);
    if (!v) { /* the size query; no read follows an error, so it takes the token */
        if (rc != NVML_SUCCESS)
            d->f[F_PROCUTIL].calls++;
        *n = rc == NVML_SUCCESS ? k : 0;
        return rc == NVML_SUCCESS ? NVML_ERROR_INSUFFICIENT_SIZE : rc;
    }
    d->f[F_PROCUTIL].calls++;
    if (rc != NVML_SUCCESS)
        return rc;
    if (k > *n) {
        *n = k;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    memcpy(v, got, k * sizeof(got[0]));
    *n = k;
    return NVML_SUCCESS;
}
