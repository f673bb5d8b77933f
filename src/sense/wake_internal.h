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
