/* The maps of wake.bpf.c, shared with wake_bpf.c: keys and values as the
 * kernel stores them. Changing one changes both sides. */
#pragma once

#include <linux/types.h>

#define WAKE_BPF_TASK_TIMERS 8
#define WAKE_BPF_DEF_ENTRIES 8192
#define WAKE_BPF_NAME        32

/* = enum wake_kind (sense/wakeups.h) */
enum {
    WAKE_BPF_TASK,
    WAKE_BPF_IRQ,
    WAKE_BPF_TIMER,
    WAKE_BPF_HRTIMER,
    WAKE_BPF_WORK,
    WAKE_BPF_OTHER,
};

enum {
    WAKE_BPF_CAUSE_NONE,
    WAKE_BPF_CAUSE_SET,
    WAKE_BPF_CAUSE_TIMER,
};

struct wake_bpf_key {
    __u32 kind;
    __s32 id;   /* TASK: tid; IRQ: irq; else -1 */
    __u64 addr; /* TIMER/HRTIMER/WORK: callback */
};

/* Per CPU, cumulative since load. */
struct wake_bpf_val {
    __u64 events;
    __u64 idle_wakeups;
    __s32 tgid; /* TASK: its process; else 0 */
    __u32 pad;
    __u64 cgid;               /* TASK: its cgroup v2 id (the directory's inode); else 0 */
    char name[WAKE_BPF_NAME]; /* TASK: comm; IRQ: handler name; may be "" */
};

/* The one entry of the per-CPU array: the CPU's cycle in progress, and
 * its cumulative counts. */
struct wake_bpf_cpu {
    __u64 idle_wakeups; /* cycles closed */
    __u64 other_idle;   /* of them, with no cause event */
    __u64 full_events;  /* events of sources that did not fit in the table */
    __u64 full_idle;    /* cycles whose cause did not fit */
    __u32 open;
    __u32 state;
    struct wake_bpf_key cause;
    __s32 cause_tgid;
    __u32 pad;
    __u64 cause_cgid;
    char cause_name[WAKE_BPF_NAME];
};
