// SPDX-License-Identifier: GPL-2.0-or-later
/* Wake-ups counted in the kernel: the accounting of wakeups.c (events per
 * source, and idle-exit cycles blamed on their first cause) done by BPF
 * programs on the same six tracepoints, into maps that user space reads
 * once per sample (wake_bpf.c). The rules are in sense/wakeups.h; this
 * file must keep to them, event for event:
 *
 *   sched_wakeup            events of (task, woken tid)
 *   irq_handler_entry       events of (irq, number)
 *   timer_expire_entry      events of (timer, function)
 *   hrtimer_expire_entry    events of (hrtimer, function)
 *   workqueue_execute_start events of (work, function)
 *   cpu_idle (an entry)     closes the CPU's cycle: idle_wakeups of its
 *                           first cause, or of "other" when it had none
 *
 * CO-RE: the few kernel structs read are declared here with
 * preserve_access_index (no vmlinux.h, so a build machine needs no
 * /sys/kernel/btf); libbpf relocates the offsets against the running
 * kernel's BTF at load. Counters are cumulative; user space takes deltas. */
/* the kernel's types first: libbpf's headers need them */
/* clang-format off */
#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
/* clang-format on */

#include "wake_bpf_abi.h"

/* ---- the kernel's structs, only the fields read ---- */

struct kernfs_node {
    __u64 id;
} __attribute__((preserve_access_index));

struct cgroup {
    struct kernfs_node *kn;
} __attribute__((preserve_access_index));

struct css_set {
    struct cgroup *dfl_cgrp;
} __attribute__((preserve_access_index));

struct thread_info {
    __u32 cpu;
} __attribute__((preserve_access_index));

struct task_struct {
    struct thread_info thread_info;
    unsigned int cpu; /* kernels that keep it here (5.14-5.15, some arches) */
    int pid;
    int tgid;
    char comm[16];
    struct css_set *cgroups;
} __attribute__((preserve_access_index));

struct irqaction {
    const char *name;
} __attribute__((preserve_access_index));

struct timer_list {
    void *function;
} __attribute__((preserve_access_index));

struct hrtimer {
    void *function;
} __attribute__((preserve_access_index));

struct work_struct {
    void *func;
} __attribute__((preserve_access_index));

char LICENSE[] SEC("license") = "GPL";

/* Set before load: the callbacks whose only job is to wake a task. */
const volatile __u64 task_timer[WAKE_BPF_TASK_TIMERS] = {};
const volatile __u32 ntask_timers = 0;

struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_HASH);
    __uint(map_flags, BPF_F_NO_PREALLOC);
    __uint(max_entries, WAKE_BPF_DEF_ENTRIES); /* user space sizes it */
    __type(key, struct wake_bpf_key);
    __type(value, struct wake_bpf_val);
} counts SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, struct wake_bpf_cpu);
} cpus SEC(".maps");

static __always_inline struct wake_bpf_cpu *this_cpu(void)
{
    __u32 zero = 0;
    return bpf_map_lookup_elem(&cpus, &zero);
}

/* The entry of a source, created when new; NULL when the table is full. */
static __always_inline struct wake_bpf_val *get(const struct wake_bpf_key *k,
                                                const struct wake_bpf_val *init)
{
    struct wake_bpf_val *v = bpf_map_lookup_elem(&counts, k);
    if (v)
        return v;
    bpf_map_update_elem(&counts, k, init, BPF_NOEXIST);
    return bpf_map_lookup_elem(&counts, k); /* ours, or another CPU's */
}

static __always_inline void count_event(const struct wake_bpf_key *k,
                                        const struct wake_bpf_val *init, struct wake_bpf_cpu *c)
{
    struct wake_bpf_val *v = get(k, init);
    if (v)
        v->events++;
    else if (c)
        c->full_events++;
}

static __always_inline int is_task_timer(__u64 addr)
{
    for (int i = 0; i < WAKE_BPF_TASK_TIMERS; i++)
        if (i < ntask_timers && task_timer[i] == addr)
            return 1;
    return 0;
}

static __always_inline void set_cause(struct wake_bpf_cpu *c, const struct wake_bpf_key *k,
                                      const struct wake_bpf_val *init)
{
    c->cause = *k;
    c->cause_tgid = init->tgid;
    c->cause_cgid = init->cgid;
    __builtin_memcpy(c->cause_name, init->name, sizeof(c->cause_name));
    c->state = WAKE_BPF_CAUSE_SET;
}

/* The event may be why this CPU left idle: only the first counts
 * (wakeups.c note_cause()). wake_cpu: the woken task's CPU, else -1. */
static __always_inline void note_cause(struct wake_bpf_cpu *c, const struct wake_bpf_key *k,
                                       const struct wake_bpf_val *init, int wake_cpu)
{
    if (!c->open || c->state == WAKE_BPF_CAUSE_SET)
        return;
    if (c->state == WAKE_BPF_CAUSE_TIMER) {
        /* a task-waking timer: the next wake-up names the task; anything
         * else first means the timer woke nobody and keeps the blame */
        if (k->kind == WAKE_BPF_TASK)
            set_cause(c, k, init);
        c->state = WAKE_BPF_CAUSE_SET;
        return;
    }
    if (k->kind == WAKE_BPF_TASK && wake_cpu >= 0 && (__u32)wake_cpu != bpf_get_smp_processor_id())
        return; /* this CPU, awake already, woke a task onto another one */
    set_cause(c, k, init);
    if ((k->kind == WAKE_BPF_TIMER || k->kind == WAKE_BPF_HRTIMER) && is_task_timer(k->addr))
        c->state = WAKE_BPF_CAUSE_TIMER;
}

static __always_inline void event(struct wake_bpf_key *k, struct wake_bpf_val *init, int wake_cpu)
{
    struct wake_bpf_cpu *c = this_cpu();
    count_event(k, init, c);
    if (c)
        note_cause(c, k, init, wake_cpu);
}

/* The common case: a known source on a CPU whose cycle already has its
 * cause. One lookup, one increment, no field of the event read. */
static __always_inline int fast_path(const struct wake_bpf_key *k)
{
    struct wake_bpf_val *v = bpf_map_lookup_elem(&counts, k);
    if (!v)
        return 0;
    struct wake_bpf_cpu *c = this_cpu();
    if (c && c->open && c->state != WAKE_BPF_CAUSE_SET)
        return 0;
    v->events++;
    return 1;
}

static __always_inline int task_cpu(struct task_struct *p)
{
    if (bpf_core_field_exists(p->thread_info.cpu))
        return (int)BPF_CORE_READ(p, thread_info.cpu);
    if (bpf_core_field_exists(p->cpu))
        return (int)BPF_CORE_READ(p, cpu);
    return -1;
}

SEC("tp_btf/sched_wakeup")
int BPF_PROG(wake_sched_wakeup, struct task_struct *p)
{
    struct wake_bpf_key k = {.kind = WAKE_BPF_TASK};
    struct wake_bpf_val init = {};
    k.id = BPF_CORE_READ(p, pid);
    if (fast_path(&k))
        return 0;
    init.tgid = BPF_CORE_READ(p, tgid);
    init.cgid = BPF_CORE_READ(p, cgroups, dfl_cgrp, kn, id);
    BPF_CORE_READ_STR_INTO(&init.name, p, comm);
    event(&k, &init, task_cpu(p));
    return 0;
}

SEC("tp_btf/irq_handler_entry")
int BPF_PROG(wake_irq_handler_entry, int irq, struct irqaction *action)
{
    struct wake_bpf_key k = {.kind = WAKE_BPF_IRQ, .id = irq};
    struct wake_bpf_val init = {};
    if (fast_path(&k))
        return 0;
    /* the name is read only for a new entry or a cycle's cause */
    bpf_probe_read_kernel_str(&init.name, sizeof(init.name), BPF_CORE_READ(action, name));
    event(&k, &init, -1);
    return 0;
}

SEC("tp_btf/timer_expire_entry")
int BPF_PROG(wake_timer_expire_entry, struct timer_list *t)
{
    struct wake_bpf_key k = {.kind = WAKE_BPF_TIMER, .id = -1};
    struct wake_bpf_val init = {};
    k.addr = (__u64)BPF_CORE_READ(t, function);
    if (fast_path(&k))
        return 0;
    event(&k, &init, -1);
    return 0;
}

SEC("tp_btf/hrtimer_expire_entry")
int BPF_PROG(wake_hrtimer_expire_entry, struct hrtimer *t)
{
    struct wake_bpf_key k = {.kind = WAKE_BPF_HRTIMER, .id = -1};
    struct wake_bpf_val init = {};
    k.addr = (__u64)BPF_CORE_READ(t, function);
    if (fast_path(&k))
        return 0;
    event(&k, &init, -1);
    return 0;
}

SEC("tp_btf/workqueue_execute_start")
int BPF_PROG(wake_workqueue_execute_start, struct work_struct *w)
{
    struct wake_bpf_key k = {.kind = WAKE_BPF_WORK, .id = -1};
    struct wake_bpf_val init = {};
    k.addr = (__u64)BPF_CORE_READ(w, func);
    if (fast_path(&k))
        return 0;
    event(&k, &init, -1);
    return 0;
}

/* An idle entry closes the cycle since the previous one (wakeups.c
 * close_cycle()); an exit (state (u32)-1) is ignored. */
SEC("tp_btf/cpu_idle")
int BPF_PROG(wake_cpu_idle, unsigned int state, unsigned int cpu_id)
{
    if (state == (unsigned int)-1)
        return 0;
    struct wake_bpf_cpu *c = this_cpu();
    if (!c)
        return 0;
    if (c->open) {
        c->idle_wakeups++;
        if (c->state == WAKE_BPF_CAUSE_NONE) {
            c->other_idle++;
        } else {
            struct wake_bpf_val init = {.tgid = c->cause_tgid, .cgid = c->cause_cgid};
            __builtin_memcpy(init.name, c->cause_name, sizeof(init.name));
            struct wake_bpf_val *v = get(&c->cause, &init);
            if (v)
                v->idle_wakeups++;
            else
                c->full_idle++;
        }
    }
    c->open = 1;
    c->state = WAKE_BPF_CAUSE_NONE;
    return 0;
}
