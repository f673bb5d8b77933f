/* CPU sets and the kernel's cpulist format ("0-3,8,10-11"). */
#pragma once

#include <stdbool.h>
#include <stdint.h>

/* Highest CPU id we accept: the kernel's NR_CPUS maximum is 8192. */
#define CPUSET_MAX_CPU 8191

struct cpuset {
    uint64_t *bits; /* owned */
    unsigned nwords;
};

/* Parse a cpulist. "" and "\n" give an empty set (the kernel prints an
 * empty line for "offline" when none is). Returns -EINVAL on garbage,
 * -ERANGE for ids above CPUSET_MAX_CPU or reversed ranges. */
int cpuset_parse(const char *s, struct cpuset *ret);
void cpuset_add(struct cpuset *set, unsigned cpu);
void cpuset_del(struct cpuset *set, unsigned cpu);
bool cpuset_has(const struct cpuset *set, unsigned cpu);
unsigned cpuset_count(const struct cpuset *set);
/* Next member after prev (-1 to start); -1 when none is left. */
int cpuset_next(const struct cpuset *set, int prev);
/* Canonical cpulist text, owned by the caller ("" for an empty set). */
char *cpuset_format(const struct cpuset *set);
void cpuset_free(struct cpuset *set);

#define CPUSET_FOREACH(cpu, set) \
    for (int cpu = cpuset_next((set), -1); cpu >= 0; cpu = cpuset_next((set), cpu))
