/* `watt tune --verify --workload CMD`: CMD run back to back during each
 * measured window, its completed runs per second the workload's
 * throughput (docs/tune.md). */
#pragma once

#include <stdint.h>
#include <sys/types.h>

struct tune_workload {
    pid_t pid;                 /* the runner, leader of its process group; 0: none */
    volatile uint64_t *counts; /* [0] runs that exited 0, [1] the others; shared */
    double t0;                 /* CLOCK_MONOTONIC at start, s */
};

/* Starts the runner: a child that runs `/bin/sh -c CMD` again and again
 * (its stdout goes to our stderr, so --json stays one document) and
 * counts the runs in memory shared with us. -errno on failure. */
int tune_workload_start(const char *cmd, struct tune_workload *w);
/* Stops the runner and its run in progress (SIGKILL to the group: a run
 * cut short is not counted) and gives the completed runs, the failed
 * ones and the seconds since start. */
void tune_workload_stop(struct tune_workload *w, uint64_t *ret_ok, uint64_t *ret_failed,
                        double *ret_seconds);
