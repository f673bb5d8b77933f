/* Memory as the kernel shows it: per NUMA node, how much is installed and
 * in use (/sys/devices/system/node/nodeN/meminfo, cpulist; drivers/base/
 * node.c), and which DIMMs sit behind which memory controller where an
 * EDAC driver is loaded (/sys/devices/system/edac/mc; Documentation/
 * admin-guide/ras.rst "EDAC Sysfs", drivers/edac/edac_mc_sysfs.c).
 *
 * Read once per report: sizes and DIMMs do not change between two samples
 * a second apart, and MemUsed is a level, not a counter. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/cpuset.h"
#include "host/host.h"

#define MEMORY_NONE UINT64_MAX /* a field the kernel did not print */

struct memory_node {
    int id;
    uint64_t total_kb;  /* "Node N MemTotal:", kB; MEMORY_NONE when absent */
    uint64_t free_kb;   /* "Node N MemFree:" */
    uint64_t used_kb;   /* "Node N MemUsed:" (the kernel's total - free) */
    struct cpuset cpus; /* nodeN/cpulist: its online CPUs (may be empty) */
    char why[200];      /* "" when read; else why meminfo is missing */
};

struct memory_dimm {
    unsigned index;    /* N of dimmN (or csrowN) */
    uint64_t size_mb;  /* "size" (MiB; csrow: size_mb); MEMORY_NONE when absent */
    char label[64];    /* dimm_label ("CPU_SrcID#0_MC#0_Chan#0_DIMM#0"); "" when unset */
    char location[64]; /* dimm_location ("channel 0 slot 0"), trailing blanks cut */
    char mem_type[32]; /* dimm_mem_type ("Registered-DDR4"); csrow: mem_type */
};

struct memory_ctl {
    unsigned id;       /* N of mcN */
    char name[64];     /* mc_name ("Skylake Socket#0 IMC#0") */
    uint64_t size_mb;  /* size_mb: memory behind it, MiB; MEMORY_NONE when absent */
    bool csrow_layout; /* no dimmN: the older csrowN layout was read */
    size_t ndimms;
    struct memory_dimm *dimms; /* populated DIMMs only (the kernel lists no empty slot) */
};

struct memory_info {
    size_t nnodes;
    struct memory_node *nodes; /* in node order */
    char nodes_why[96];        /* "" unless there is no node directory at all */
    size_t nctls;
    struct memory_ctl *ctls;
    char edac_why[128]; /* "" when controllers were found; else why there are none */
};

/* Parse one node's meminfo text ("Node 0 MemTotal:  65842340 kB" lines).
 * Lines of other nodes, other fields and garbage are ignored. Sets the
 * three fields it finds (the others stay MEMORY_NONE); returns 0, or
 * -EBADMSG when MemTotal is missing. ret->cpus and ret->why are left. */
int memory_meminfo_parse(const char *text, size_t len, int node, struct memory_node *ret);

/* Cut a sysfs value to its first line, trailing blanks removed, into buf
 * (always terminated; truncated to n-1 bytes). */
void memory_attr_copy(char *buf, size_t n, const char *value);

/* Read the nodes and the EDAC tree under h. Never fails for a missing
 * file: what is missing is said in the why fields. -ENOMEM only. */
int memory_read(struct host *h, struct memory_info *ret);
void memory_info_free(struct memory_info *m);
