/* hwmon: power and energy sensors (Documentation/hwmon/sysfs-interface.rst).
 * Under /sys/class/hwmon/hwmonN (or its device/ directory on old drivers):
 * name, and per sensor K:
 *   powerK_input            instantaneous power, µW
 *   powerK_average          average power, µW, over powerK_average_interval (ms)
 *   powerK_cap              power cap, µW
 *   powerK_label, energyK_label   what the sensor measures
 *   energyK_input           cumulative energy, µJ
 * The ACPI power meter (Documentation/hwmon/acpi_power_meter.rst, chip name
 * "power_meter") measures the whole server at the wall: power1_average over
 * power1_average_interval, and power1_is_battery. Temperatures, voltages and
 * currents are not read. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sense/power_reading.h"
#include "sense/sample.h"
#include "sense/sampler.h"

enum hwmon_kind {
    HWMON_POWER,
    HWMON_ENERGY,
};

enum hwmon_field {
    HWMON_INPUT,            /* powerK_input (µW), energyK_input (µJ) */
    HWMON_AVERAGE,          /* powerK_average (µW) */
    HWMON_AVERAGE_INTERVAL, /* powerK_average_interval (ms) */
    HWMON_CAP,              /* powerK_cap (µW) */
    HWMON_LABEL,            /* powerK_label, energyK_label */
    HWMON_IS_BATTERY,       /* powerK_is_battery (ACPI power meter) */
};

struct hwmon_sensor {
    char chip[24]; /* "hwmon3" */
    char *name;    /* the chip's name file: "power_meter", "amdgpu"; owned,
                    * NULL when unreadable */
    char *label;   /* powerK_label / energyK_label; owned, NULL when none */
    enum hwmon_kind kind;
    unsigned index;      /* K */
    uint64_t input;      /* powerK_input µW or energyK_input µJ; VAL_NONE when absent */
    uint64_t average_uw; /* VAL_NONE when absent */
    uint64_t average_interval_ms;
    uint64_t cap_uw;
    int is_battery; /* 0/1; -1 when absent */
    bool suspended; /* the chip's device was runtime-suspended: its readings were
                     * not read, since reading may wake it (i915 and xe take a
                     * runtime-PM reference per read; older amdgpu resumes) */
};

struct hwmon_sample {
    unsigned n;
    struct hwmon_sensor *v; /* by chip (hwmon0, hwmon1, hwmon10), then power before
                             * energy, then index */
};

extern const struct sampler hwmon_sampler;

/* The sensor of a chip ("hwmon3"), kind and index, or NULL. */
const struct hwmon_sensor *hwmon_find(const struct hwmon_sample *s, const char *chip,
                                      enum hwmon_kind kind, unsigned index);
/* PLATFORM for the ACPI power meter and for sensors whose label says they
 * measure the whole system ("System Power", "Platform", "Chassis");
 * DEVICE otherwise. */
enum power_scope hwmon_scope(const struct hwmon_sensor *s);

/* One struct power_reading per sensor of the latest sample (b, or a when b
 * is NULL). Power sensors give watts from the latest sample's reading
 * (powerK_average, else powerK_input); energy sensors give joules, and with
 * b, delta_j and watts over interval_s. Domains are "hwmon3/power1"; source
 * "acpi_power_meter" for the ACPI meter, else "hwmon"; via "sysfs". Absent
 * deltas get a reason in d. Returns the number of readings appended. */
int hwmon_power(const struct hwmon_sample *a, const struct hwmon_sample *b, double interval_s,
                struct power_readings *out, struct diags *d);

/* Pure parser, for fuzzing: an attribute file name ("power1_average",
 * "energy2_input"; text need not be NUL-terminated). Returns 0, or -ENOENT
 * for names of other sensors or fields ("temp1_input", "power1_cap_max"). */
struct hwmon_attr {
    enum hwmon_kind kind;
    unsigned index;
    enum hwmon_field field;
};
int hwmon_parse_attr(const char *text, size_t len, struct hwmon_attr *ret);
