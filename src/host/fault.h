/* Fault injection for recorded roots: a file `watt-faults` at the root of a
 * fixture lists paths that fail or change, so tests can replay what real
 * machines do (EACCES on energy_uj, EIO on autosuspend_delay_ms, a CPU
 * going offline between two samples, a counter going backwards).
 * Never read on a live root.
 *
 * One fault a line:  PATH  ERRNO|=VALUE|@FILE  [from=N] [op=read|write]
 *   PATH   root-relative, as watt asks for it ("sys/class/powercap/...");
 *          one fault per path and operation (the first one listed wins)
 *   ERRNO  a name: EACCES EPERM EIO ENOENT ENODATA EINVAL EBUSY ENODEV
 *          EROFS
 *   =VALUE the file reads as VALUE followed by a newline
 *   @FILE  the file reads as the root-relative FILE does (a later
 *          /proc/stat, say, so a second sample shows the machine moving on)
 *   from=N the fault applies from the N-th access on (default 1); reads
 *          and writes are counted apart
 *   op=write  the fault applies to writes only (host_write(), and
 *          host_open_fd() for writing), so a test can make the kernel
 *          refuse a knob ("...policy3/scaling_governor EINVAL op=write")
 *          while reads of it still work; only ERRNO makes sense there
 *          (=VALUE and @FILE give -EBADMSG). Without op, or with op=read,
 *          a fault applies to reads only. */
#pragma once

#include <stdbool.h>
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
    bool write;     /* op=write: host_write() only; else reads only */
};

/* Missing file: no faults. A malformed line gives -EBADMSG. */
int fault_load(int rootfd, struct host_fault **ret, size_t *ret_n);
/* The fault for this read, counting it; NULL when none applies. */
struct host_fault *fault_match(struct host_fault *v, size_t n, enum host_dir d, const char *path);
/* The same for a write (the op=write faults). */
struct host_fault *fault_match_write(struct host_fault *v, size_t n, enum host_dir d,
                                     const char *path);
void fault_free(struct host_fault *v, size_t n);
