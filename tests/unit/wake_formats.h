/* The tracefs `format` files of the six events watt traces, exactly as a
 * 2-vCPU Firecracker VM's kernel 6.18 prints them (events/SYS/NAME/format),
 * for the unit tests and the fuzz target. */
#pragma once

#include <stdlib.h>
#include <string.h>

#include "sense/wakeups.h"

static const char fmt_cpu_idle[] =
    "name: cpu_idle\n"
    "ID: 568\n"
    "format:\n"
    "\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n"
    "\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n"
    "\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n"
    "\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n"
    "\n"
    "\tfield:u32 state;\toffset:8;\tsize:4;\tsigned:0;\n"
    "\tfield:u32 cpu_id;\toffset:12;\tsize:4;\tsigned:0;\n"
    "\n"
    "print fmt: \"state=%lu cpu_id=%lu\", (unsigned long)REC->state, (unsigned long)REC->cpu_id\n";

static const char fmt_sched_wakeup[] =
    "name: sched_wakeup\n"
    "ID: 374\n"
    "format:\n"
    "\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n"
    "\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n"
    "\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n"
    "\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n"
    "\n"
    "\tfield:char comm[16];\toffset:8;\tsize:16;\tsigned:0;\n"
    "\tfield:pid_t pid;\toffset:24;\tsize:4;\tsigned:1;\n"
    "\tfield:int prio;\toffset:28;\tsize:4;\tsigned:1;\n"
    "\tfield:int target_cpu;\toffset:32;\tsize:4;\tsigned:1;\n"
    "\n"
    "print fmt: \"comm=%s pid=%d prio=%d target_cpu=%03d\", REC->comm, REC->pid, REC->prio, "
    "REC->target_cpu\n";

static const char fmt_irq_handler_entry[] =
    "name: irq_handler_entry\n"
    "ID: 225\n"
    "format:\n"
    "\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n"
    "\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n"
    "\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n"
    "\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n"
    "\n"
    "\tfield:int irq;\toffset:8;\tsize:4;\tsigned:1;\n"
    "\tfield:__data_loc char[] name;\toffset:12;\tsize:4;\tsigned:0;\n"
    "\n"
    "print fmt: \"irq=%d name=%s\", REC->irq, __get_str(name)\n";

static const char fmt_timer_expire_entry[] =
    "name: timer_expire_entry\n"
    "ID: 465\n"
    "format:\n"
    "\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n"
    "\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n"
    "\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n"
    "\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n"
    "\n"
    "\tfield:void * timer;\toffset:8;\tsize:8;\tsigned:0;\n"
    "\tfield:unsigned long now;\toffset:16;\tsize:8;\tsigned:0;\n"
    "\tfield:void * function;\toffset:24;\tsize:8;\tsigned:0;\n"
    "\tfield:unsigned long baseclk;\toffset:32;\tsize:8;\tsigned:0;\n"
    "\n"
    "print fmt: \"timer=%p function=%ps now=%lu baseclk=%lu\", REC->timer, REC->function, "
    "REC->now, REC->baseclk\n";

static const char fmt_hrtimer_expire_entry[] =
    "name: hrtimer_expire_entry\n"
    "ID: 459\n"
    "format:\n"
    "\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n"
    "\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n"
    "\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n"
    "\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n"
    "\n"
    "\tfield:void * hrtimer;\toffset:8;\tsize:8;\tsigned:0;\n"
    "\tfield:s64 now;\toffset:16;\tsize:8;\tsigned:1;\n"
    "\tfield:void * function;\toffset:24;\tsize:8;\tsigned:0;\n"
    "\n"
    "print fmt: \"hrtimer=%p function=%ps now=%llu\", REC->hrtimer, REC->function, (unsigned long "
    "long) REC->now\n";

static const char fmt_workqueue_execute_start[] =
    "name: workqueue_execute_start\n"
    "ID: 335\n"
    "format:\n"
    "\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n"
    "\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n"
    "\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n"
    "\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n"
    "\n"
    "\tfield:void * work;\toffset:8;\tsize:8;\tsigned:0;\n"
    "\tfield:void * function;\toffset:16;\tsize:8;\tsigned:0;\n"
    "\n"
    "print fmt: \"work struct %p: function %ps\", REC->work, REC->function\n";

static const struct {
    unsigned slot; /* enum wake_ev_type: the index in struct wake_formats */
    const char *text;
} real_formats[] = {
    {WEV_IDLE_ENTER, fmt_cpu_idle},          {WEV_WAKEUP, fmt_sched_wakeup},
    {WEV_IRQ, fmt_irq_handler_entry},        {WEV_TIMER, fmt_timer_expire_entry},
    {WEV_HRTIMER, fmt_hrtimer_expire_entry}, {WEV_WORK, fmt_workqueue_execute_start},
};

/* Parse all six into f; 0, or the first parse error. */
static inline int real_formats_load(struct wake_formats *f)
{
    memset(f, 0, sizeof(*f));
    for (size_t i = 0; i < sizeof(real_formats) / sizeof(real_formats[0]); i++) {
        const char *t = real_formats[i].text;
        int r = tracefs_parse_format(t, strlen(t), &f->fmt[real_formats[i].slot], NULL);
        if (r < 0)
            return r;
    }
    return 0;
}

static inline void real_formats_clear(struct wake_formats *f)
{
    for (size_t i = 0; i < sizeof(f->fmt) / sizeof(f->fmt[0]); i++)
        tracefs_format_clear(&f->fmt[i]);
}
