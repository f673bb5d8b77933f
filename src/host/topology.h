/* CPU topology as the kernel describes it under /sys/devices/system/cpu
 * and /sys/devices/system/node: packages, dies, cores, threads, NUMA
 * nodes, and which CPUs are possible, present and online. */
#pragma once

#include <stdbool.h>

#include "base/cpuset.h"
#include "base/diag.h"
#include "host/host.h"

struct topo_cpu {
    bool present;
    bool online;
    int package; /* physical_package_id; -1 when unknown (offline CPUs) */
    int die;     /* die_id; 0 on kernels without dies */
    int core;    /* core_id, unique within a package only */
    int node;    /* NUMA node; -1 when there is no node directory */
    int thread;  /* index among the core's siblings: 0 for the first */
};

struct topology {
    struct cpuset possible, present, online;
    unsigned ncpu;        /* highest possible id + 1: size of cpu[] */
    struct topo_cpu *cpu; /* indexed by CPU id, owned */
    unsigned npackages;   /* distinct package ids among online CPUs */
    unsigned ncores;      /* distinct (package, die, core) among online CPUs */
    unsigned nnodes;
    int *package_ids; /* sorted, npackages of them, owned */
};

/* Reads the topology; problems with single files land in diags and leave
 * the field unknown. Fails only when no CPU can be found at all. */
int topology_read(struct host *h, struct topology *ret, struct diags *diags);
void topology_free(struct topology *t);
/* Index of a package id in package_ids, or -1. */
int topology_package_index(const struct topology *t, int package);
/* The first online CPU of a package (its "lead" CPU), or -1. */
int topology_package_lead(const struct topology *t, int package);
