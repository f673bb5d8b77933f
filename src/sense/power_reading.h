/* A measured power channel, whatever its source, between two samples:
 * what the report's power section and the model combine. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

enum power_scope {
    POWER_SCOPE_PACKAGE,  /* a CPU package (RAPL package-N) */
    POWER_SCOPE_CORE,     /* cores of a package (RAPL core / pp0) */
    POWER_SCOPE_UNCORE,   /* uncore / integrated GPU (RAPL uncore / pp1) */
    POWER_SCOPE_DRAM,     /* memory of a package (RAPL dram) */
    POWER_SCOPE_PSYS,     /* the SoC platform (RAPL psys) */
    POWER_SCOPE_PLATFORM, /* the whole server at the wall (ACPI power meter, IPMI DCMI) */
    POWER_SCOPE_DEVICE,   /* one device (a GPU, a PSU rail) */
};

struct power_reading {
    char source[24]; /* "rapl", "hwmon", "acpi_power_meter" */
    char via[24];    /* "powercap", "perf", "sysfs" */
    char domain[64]; /* "package-0", "dram-1", "psys", "hwmon2/power1" */
    char label[64];  /* human text, "" when none */
    char chip[24];   /* hwmon: the chip's name ("amdgpu", "amd_energy"), else "" */
    enum power_scope scope;
    int package;    /* package id for package/core/uncore/dram, else -1 */
    double joules;  /* cumulative energy in the later sample, NaN if not an energy counter */
    double delta_j; /* energy over the interval, NaN when unknown */
    double watts;   /* average power over the interval (or the sensor's own
                     * average for power sensors), NaN when unknown */
    double period;  /* s: the meter's own averaging period (the BMC's DCMI
                     * statistics period), NaN when not known */
    bool stuck;     /* an energy counter that did not advance over the interval
                     * while the CPUs were not all idle: delta_j and watts are
                     * NaN, not 0 (power_readings_mark_stuck()) */
};

struct power_readings {
    struct power_reading *v;
    size_t n, cap;
};

struct power_reading *power_readings_add(struct power_readings *r);
/* An energy counter that read the same at both ends of an interval is
 * stuck, not a 0 W measurement, unless every CPU was idle for the whole
 * interval. BUSY_CPUS is procstat_busy_cpus() over the same interval: the
 * CPUs' worth of non-idle ticks (user, nice, system, irq, softirq, guest).
 * Exactly 0 (ticks passed, every one idle on every CPU) keeps the 0 W; a
 * slow counter (an hwmon meter that updates every few seconds) or a
 * powered-down device may then truly not move. NaN (no /proc/stat, or no
 * tick passed) counts as not idle: nothing shows the machine was idle.
 * Marks such readings stuck and makes their delta_j and watts NaN; returns
 * how many. */
unsigned power_readings_mark_stuck(struct power_readings *r, double busy_cpus);
void power_readings_free(struct power_readings *r);
const char *power_scope_name(enum power_scope s);
