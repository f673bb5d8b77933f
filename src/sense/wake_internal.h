/* Shared by wakeups.c (accounting, decoding) and wake_tracer.c (the live
 * tracer), and by their tests; not part of the sense API.
 *
 * wake_decode() looks its fields up by name on every call, which is fine
 * for a test or a fuzzer but not for 40k events/s: the tracer resolves
 * them once into a wake_decoder and decodes through it. */
#pragma once

#include "sense/wakeups.h"

#define WAKE_NSLOTS 7 /* struct wake_formats.fmt[]: by enum wake_ev_type, [1] unused */

struct wake_slot {
    unsigned id;                                    /* 0: no usable format for this event */
    const struct tracefs_field *type, *flags, *pid; /* common_*; each may be NULL */
    const struct tracefs_field *num;                /* state, pid, irq or function; required */
    const struct tracefs_field *str;                /* comm, name; may be NULL */
    const struct tracefs_field *tcpu;               /* target_cpu; may be NULL */
};

/* Pointers into the formats: they must outlive the decoder. */
struct wake_decoder {
    struct wake_slot slot[WAKE_NSLOTS];
};

/* Fill dc from f. Returns the number of usable events; *ret_missing (may
 * be NULL) names the first event whose format lacks a field we need
 * ("sched_wakeup: no field pid"), in a static buffer. */
unsigned wake_decoder_init(struct wake_decoder *dc, const struct wake_formats *f,
                           const char **ret_missing);
/* wake_decode() through a decoder. */
int wake_decoder_run(const struct wake_decoder *dc, unsigned id, const void *raw, size_t len,
                     int cpu, struct wake_event *ret);

/* The event names by slot ("sched", "sched_wakeup"); NULL for slot 1. */
const char *wake_slot_system(unsigned slot);
const char *wake_slot_event(unsigned slot);

/* ---- accounting knobs the tracer sets ---- */

/* Timer callbacks that only wake a task (hrtimer_wakeup, ...): a cycle
 * they start is blamed on the task they wake. At most 8; copied. */
void wake_acct_set_task_timers(struct wake_acct *a, const uint64_t *addr, size_t n);
/* List this CPU in every window, even with no event. */
void wake_acct_add_cpu(struct wake_acct *a, int cpu);
/* The kernel dropped n events of this CPU's ring: count them in the
 * window's `lost`, and forget the CPU's cycle in progress (its cause may
 * be among them). */
void wake_acct_lost(struct wake_acct *a, int cpu, uint64_t n);
/* When the first window starts (wake_acct_new() takes the monotonic time). */
void wake_acct_set_start(struct wake_acct *a, uint64_t start_ns);

/* ---- the tracer ---- */

/* ---- the BPF counters' deltas (wake_bpf_acct.c; unit-tested on fake map
 * contents) ---- */

/* One key of the counts map, its per-CPU values summed (cumulative). */
struct wake_bpf_rec {
    enum wake_kind kind;
    int32_t id;
    uint64_t addr;
    uint64_t events, idle_wakeups;
    int32_t tgid;
    uint64_t cgid;
    char name[32];
};
/* One CPU's slot of the per-CPU array (cumulative). */
struct wake_bpf_cpu_rec {
    int cpu;
    uint64_t idle_wakeups, other_idle, full_events, full_idle;
};

struct wake_bpf_acct;
/* Keys that have not moved in stale_after takes are handed back for
 * deletion from the map (it is bounded); 0 means never. */
struct wake_bpf_acct *wake_bpf_acct_new(unsigned stale_after, uint64_t start_ns);
void wake_bpf_acct_free(struct wake_bpf_acct *a);
/* The window from the previous take (or new) to now_ns, from the map's
 * contents: per key, what it counted since then (a key that went back,
 * i.e. was deleted and came again, counts from 0). rec is sorted in place.
 * *ret_stale (owned, may be NULL) lists the keys to delete; call
 * wake_bpf_acct_forget() for each one that was. */
void wake_bpf_acct_take(struct wake_bpf_acct *a, struct wake_bpf_rec *rec, size_t n,
                        const struct wake_bpf_cpu_rec *cpu, size_t ncpu, uint64_t now_ns,
                        struct wake_window *ret, struct wake_bpf_rec **ret_stale,
                        size_t *ret_nstale);
/* The key is gone from the map: if it comes again, it counts from 0. */
void wake_bpf_acct_forget(struct wake_bpf_acct *a, const struct wake_bpf_rec *key);

/* ---- callback names (wake_tracer.c, shared with wake_bpf.c) ---- */
struct ksym_cache;
/* Timer and work callbacks of w by name: one kallsyms pass for new
 * addresses, at most every interval_ns (*last_pass_ns), then from the cache. */
void wake_resolve_names(struct ksym_cache *syms, struct host *h, struct wake_window *w,
                        uint64_t now_ns, uint64_t interval_ns, uint64_t *last_pass_ns,
                        void (*tick)(void *), void *ud);

/* *RET_WHY (when not NULL) = the formatted reason, owned by the caller;
 * the ring's and the BPF counters' "why not" messages. */
void wake_set_why(char **ret_why, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
