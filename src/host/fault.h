/* Fault injection for recorded roots: a file `watt-faults` at the root of a
 * fixture lists paths that fail or change, so tests can replay what real
 * machines do (EACCES on energy_uj, EIO on autosuspend_delay_ms, a CPU
 * going offline between two samples, a counter going backwards).
 * Never read on a live root.
 *
 * One fault a line:  PATH  ERRNO|=VALUE|@FILE  [from=N]
 *   PATH   root-relative, as watt asks for it ("sys/class/powercap/...");
 *          one fault per path (the first one listed wins)
 *   ERRNO  a name: EACCES EPERM EIO ENOENT ENODATA EINVAL EBUSY ENODEV
 *   =VALUE the file reads as VALUE followed by a newline
 *   @FILE  the file reads as the root-relative FILE does (a later
 *          /proc/stat, say, so a second sample shows the machine moving on)
 *   from=N the fault applies from the N-th access on (default 1) */
#pragma once

#include <stddef.h>

#include "host/host.h"

struct host_fault {
    enum host_dir dir;
    char *path;  /* relative to dir */
    int err;     /* positive errno, or 0 with value set */
    char *value; /* "12345\n" */
    char *file;  /* root-relative file to read instead */
    unsigned from;
    unsigned seen;
    unsigned order; /* line order, so the first fault of a path wins */
};

/* Missing file: no faults. A malformed line gives -EBADMSG. */
int fault_load(int rootfd, struct host_fault **ret, size_t *ret_n);
/* The fault for this access, counting it; NULL when none applies. */
struct host_fault *fault_match(struct host_fault *v, size_t n, enum host_dir d, const char *path);
void fault_free(struct host_fault *v, size_t n);
