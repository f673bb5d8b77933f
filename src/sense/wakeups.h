/* wakeups: who takes the CPUs out of idle, from perf tracepoints.
 *
 * Tracepoints (Documentation/trace/events.rst; include/trace/events/):
 *   sched:sched_wakeup               a task was woken (pid, comm, target_cpu)
 *   timer:timer_expire_entry         a timer_list callback runs (function)
 *   timer:hrtimer_expire_entry       an hrtimer callback runs (function)
 *   irq:irq_handler_entry            a device interrupt handler runs (irq, name)
 *   workqueue:workqueue_execute_start a work item runs (function)
 *   power:cpu_idle                   a CPU enters (state = index) or leaves
 *                                    (state = (u32)-1) an idle state
 *
 * They are opened with perf_event_open(2) (PERF_TYPE_TRACEPOINT, config =
 * the event's tracefs id, sample_period 1, PERF_SAMPLE_RAW), one ring buffer
 * per CPU (the other events of that CPU redirected into it with
 * PERF_EVENT_IOC_SET_OUTPUT) and a wake-up watermark, so the reader sleeps
 * in poll() until a ring is a quarter full: no busy polling.
 *
 * Two numbers per source:
 *   events        how often it happened: a task woken (sched_wakeup of that
 *                 task), an IRQ handled, a timer expired, a work item run;
 *   idle_wakeups  how often it was the reason a CPU left idle. Every idle
 *                 entry on a CPU closes one "wake-up cycle" (from the
 *                 previous idle entry); the cycle is blamed on the first
 *                 cause seen on that CPU after the previous entry: an IRQ,
 *                 a timer, a work item, or a task woken onto that CPU by
 *                 a task. A timer whose callback only wakes a task
 *                 (hrtimer_wakeup, timerfd_tmrproc, it_real_fn,
 *                 posix_timer_fn, process_timeout) is blamed on the task
 *                 it wakes: that task asked for it. A cycle with no cause
 *                 event (an IPI, a poll-idle exit for a remote wake-up)
 *                 counts as WAKE_OTHER.
 *
 * Without tracepoints (no tracefs, not root and perf_event_paranoid > -1,
 * a recorded tree) callers fall back to /proc: IRQ counts from
 * /proc/interrupts and voluntary context switches per task (each one is a
 * sleep, hence one later wake-up); wake_window_from_proc() builds the same
 * window from those, with traced = false. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/diag.h"
#include "host/host.h"
#include "sense/tracefs.h"

enum wake_kind {
    WAKE_TASK,    /* id = tid (pid for the /proc fallback) */
    WAKE_IRQ,     /* id = irq number */
    WAKE_TIMER,   /* timer_list callback; addr = function */
    WAKE_HRTIMER, /* hrtimer callback; addr = function */
    WAKE_WORK,    /* workqueue item; addr = function */
    WAKE_OTHER,   /* idle exits with no cause event (IPIs, poll-idle exits) */
    _WAKE_KIND_MAX,
};

/* "task", "irq", "timer", "hrtimer", "work", "other" */
const char *wake_kind_name(enum wake_kind k);

/* How wake-ups are counted: the config's and `watt top --wakeups`'s
 * choice (AUTO: bpf where it loads, else the ring, else /proc) ... */
enum wake_mode {
    WAKE_MODE_AUTO,
    WAKE_MODE_BPF,   /* the BPF counters, else as AUTO (the reason said) */
    WAKE_MODE_TRACE, /* the tracepoint ring, else /proc */
    WAKE_MODE_PROC,  /* /proc only */
    WAKE_MODE_OFF,   /* none (the agent only) */
    _WAKE_MODE_MAX,
};
/* ... and the path a window came by. */
enum wake_path {
    WAKE_PATH_PROC,
    WAKE_PATH_TRACE,
    WAKE_PATH_BPF,
    _WAKE_PATH_MAX,
};
/* "auto", "bpf", "trace", "proc", "off" */
const char *wake_mode_name(enum wake_mode m);
/* -EINVAL for anything else */
int wake_mode_from_string(const char *s, enum wake_mode *ret);
/* "proc", "trace", "bpf" */
const char *wake_path_name(enum wake_path p);

struct wake_entry {
    enum wake_kind kind;
    int32_t id;            /* TASK: tid; IRQ: irq; else -1 */
    uint64_t addr;         /* TIMER/HRTIMER/WORK: callback address; else 0 */
    char name[64];         /* TASK: comm; IRQ: handler name ("virtio3-rx");
                              TIMER/HRTIMER/WORK: symbol from /proc/kallsyms, or
                              "0xffff..." when it cannot be resolved */
    uint64_t events;       /* see above */
    uint64_t idle_wakeups; /* see above */
    int32_t tgid;          /* TASK from BPF: the woken thread's process; 0 unknown */
    uint64_t cgroup_id;    /* TASK from BPF: its cgroup v2 id (the directory's inode); 0 unknown */
};

/* Counts over one window (between two wake_tracer_take() calls). */
struct wake_window {
    uint64_t start_ns, end_ns; /* CLOCK_MONOTONIC */
    double seconds;
    bool traced; /* from tracepoints (ring or BPF); false: the /proc fallback */
    bool bpf;    /* counted in the kernel by wake.bpf.c (wake_bpf.c) */
    size_t n;
    struct wake_entry *e; /* owned; no particular order */
    unsigned ncpus;
    int *cpu;                    /* owned; ascending */
    uint64_t *cpu_idle_wakeups;  /* owned; per cpu[]: idle exits (cycles) */
    uint64_t total_events;       /* sum of events over entries */
    uint64_t total_idle_wakeups; /* sum of cpu_idle_wakeups */
    uint64_t lost;        /* events the kernel dropped (PERF_RECORD_LOST): counts are low by this */
    uint64_t undelivered; /* events the kernel counted but never delivered as
                             samples nor as lost (seen on some VMs' kernels) */
    char note[192];       /* the CPU that lost most, in words; "" when none */
    uint64_t dropped;     /* events of sources that did not fit in the table
                             (max_entries), counted in a WAKE_OTHER entry named "(table full)" */
};

void wake_window_clear(struct wake_window *w);

/* ---- pure accounting (unit-tested with synthetic event streams) ---- */

enum wake_ev_type {
    WEV_IDLE_ENTER,
    WEV_IDLE_EXIT,
    WEV_WAKEUP,  /* sched_wakeup */
    WEV_IRQ,     /* irq_handler_entry */
    WEV_TIMER,   /* timer_expire_entry */
    WEV_HRTIMER, /* hrtimer_expire_entry */
    WEV_WORK,    /* workqueue_execute_start */
};

struct wake_event {
    enum wake_ev_type type;
    int cpu;          /* the CPU whose ring it came from */
    uint8_t flags;    /* common_flags (TRACEFS_FLAG_HARDIRQ/SOFTIRQ) */
    int32_t pid;      /* common_pid: the task running when it fired */
    int32_t target;   /* WAKEUP: woken tid */
    int target_cpu;   /* WAKEUP: target_cpu, -1 when the kernel has none */
    int irq;          /* IRQ */
    uint64_t addr;    /* TIMER/HRTIMER/WORK: function */
    uint32_t state;   /* IDLE_*: the cpu_idle state field */
    const char *name; /* WAKEUP: woken comm; IRQ: handler name; not NUL-terminated */
    size_t name_len;
};

struct wake_acct;
/* max_entries bounds the table (memory); 0 means 16384. */
struct wake_acct *wake_acct_new(size_t max_entries);
void wake_acct_free(struct wake_acct *a);
void wake_acct_feed(struct wake_acct *a, const struct wake_event *ev);
/* Hand over the counts since the last take (or new) and start afresh;
 * per-CPU cycle state carries over. now_ns ends the window. Names of
 * timer and work callbacks are "0x..." here; wake_tracer_take() resolves them. */
void wake_acct_take(struct wake_acct *a, uint64_t now_ns, struct wake_window *ret);

/* The formats of the six events, and how to decode a raw record. */
struct wake_formats {
    struct tracefs_format fmt[7]; /* by enum wake_ev_type order, IDLE_ENTER/EXIT share [0] */
};
/* Decode one PERF_SAMPLE_RAW payload of the event with tracefs id `id`.
 * Returns 0, or -ENOENT (not one of ours), -ERANGE/-EBADMSG (garbage). */
int wake_decode(const struct wake_formats *f, unsigned id, const void *raw, size_t len, int cpu,
                struct wake_event *ret);

/* ---- the tracer (live kernel only) ---- */

struct wake_tracer_opts {
    unsigned ring_pages;    /* data pages per CPU ring, a power of 2; 0 means 16 */
    unsigned watermark_pct; /* wake the reader when a ring is this full; 0 means 25 */
    size_t max_entries;     /* table bound; 0 means 16384 */
};

struct wake_tracer;
/* Returns 1 and *ret when tracing works; 0 when it cannot here, with
 * *ret_why saying why in one line ("tracefs is not mounted (neither tracefs
 * nor debugfs in the mount table) and mount(2) was refused: EPERM",
 * "perf_event_open sched:sched_wakeup on CPU 0: EACCES
 * (needs root or CAP_PERFMON, or kernel.perf_event_paranoid = -1)",
 * "a recorded tree has no tracepoints"); < 0 on other errors. A tracefs
 * (or debugfs) the mount table lists is used where it is
 * (host_tracefs_events); only when none is, tracefs is mounted at
 * /sys/kernel/tracing just long enough to read the event ids and formats,
 * then unmounted again. */
int wake_tracer_open(struct host *h, const struct wake_tracer_opts *o, struct wake_tracer **ret,
                     char **ret_why);
/* The fds to poll for POLLIN (one per CPU ring). */
size_t wake_tracer_fds(const struct wake_tracer *t, const int **ret);
/* Read and account everything in the rings. Cheap when they are empty. */
int wake_tracer_drain(struct wake_tracer *t);
/* Drain, then hand over the window since the last take (or open), with
 * timer and work callbacks resolved through /proc/kallsyms (one pass over
 * it per take that has new addresses; names are cached). */
int wake_tracer_take(struct wake_tracer *t, struct wake_window *ret);
/* What works less well than it could ("cannot read /proc/kallsyms: EACCES:
 * timers that only wake a task are blamed on the timer"), or NULL. */
const char *wake_tracer_note(const struct wake_tracer *t);
/* Drain and discard: the next window starts now (no kallsyms pass). */
void wake_tracer_reset(struct wake_tracer *t);
/* Events read so far (for the benchmark and self-metrics). */
uint64_t wake_tracer_events(const struct wake_tracer *t);
void wake_tracer_close(struct wake_tracer *t);

/* ---- the BPF counters (wake_bpf.c, wake.bpf.c) ---- */

/* The same window as the tracer's, counted in the kernel: per source and
 * per CPU in maps read once per take; no ring, no fd to poll. Returns 1
 * and *ret when the programs load and attach; 0 when they cannot, with
 * *ret_why saying why in one line ("built without BPF (-Dbpf=disabled)",
 * "WATT_NO_BPF is set", "a recorded tree has no BPF", "libbpf: load:
 * EPERM (needs root or CAP_BPF+CAP_PERFMON)"); < 0 on other errors. */
struct wake_bpf;
int wake_bpf_open(struct host *h, size_t max_entries, struct wake_bpf **ret, char **ret_why);
/* The window since the last take (or reset, or open). */
int wake_bpf_take(struct wake_bpf *b, struct wake_window *ret);
/* The next window starts now. */
void wake_bpf_reset(struct wake_bpf *b);
/* As wake_tracer_note(). */
const char *wake_bpf_note(const struct wake_bpf *b);
/* How often at most a kallsyms pass names new timer and work callbacks
 * (~50 ms of CPU each: 5 MB formatted by the kernel); 10 s unless set.
 * The agent, which shows names only in /status, sets minutes. Also for
 * the ring (wake_tracer_set_name_interval()). */
void wake_bpf_set_name_interval(struct wake_bpf *b, double seconds);
void wake_tracer_set_name_interval(struct wake_tracer *t, double seconds);
void wake_bpf_close(struct wake_bpf *b);

/* ---- the /proc fallback ---- */

struct irq_rates;
struct task_delta;
/* A window from /proc: one WAKE_IRQ entry per numbered IRQ row with
 * events = its count difference, and one WAKE_TASK entry per process with
 * events = its voluntary context switches (all threads). idle_wakeups are
 * 0 and unknown (traced = false says so). */
int wake_window_from_proc(const struct irq_rates *irq, const struct task_delta *td, size_t ntd,
                          double seconds, struct wake_window *ret);
