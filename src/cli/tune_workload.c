#include "cli/tune_workload.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The runner's loop; never returns. */
static void run_loop(const char *cmd, volatile uint64_t *counts)
{
    setpgid(0, 0);
    /* never outlive watt: a killed tune must not leave the load running */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() == 1)
        _exit(1);
    dup2(STDERR_FILENO, STDOUT_FILENO);
    for (;;) {
        pid_t p = fork();
        if (p < 0)
            _exit(1);
        if (p == 0) {
            execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
            _exit(127);
        }
        int st;
        while (waitpid(p, &st, 0) < 0)
            if (errno != EINTR)
                _exit(1);
        /* one writer (this loop), one reader after our death: plain
         * increments of aligned 64-bit words suffice */
        counts[WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1]++;
    }
}

int tune_workload_start(const char *cmd, struct tune_workload *w)
{
    void *m =
        mmap(NULL, 2 * sizeof(uint64_t), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return -errno;
    *w = (struct tune_workload){.counts = m, .t0 = mono_s()};
    pid_t p = fork();
    if (p < 0) {
        int r = -errno;
        munmap(m, 2 * sizeof(uint64_t));
        w->counts = NULL;
        return r;
    }
    if (p == 0)
        run_loop(cmd, w->counts);
    setpgid(p, p); /* also here: no race with the child's own setpgid */
    w->pid = p;
    return 0;
}

void tune_workload_stop(struct tune_workload *w, uint64_t *ret_ok, uint64_t *ret_failed,
                        double *ret_seconds)
{
    *ret_seconds = mono_s() - w->t0;
    *ret_ok = *ret_failed = 0;
    if (w->pid > 0) {
        kill(-w->pid, SIGKILL);
        while (waitpid(w->pid, NULL, 0) < 0 && errno == EINTR)
            ;
        w->pid = 0;
    }
    if (w->counts) {
        *ret_ok = w->counts[0];
        *ret_failed = w->counts[1];
        munmap((void *)w->counts, 2 * sizeof(uint64_t));
        w->counts = NULL;
    }
}
