/* tracefs formats, raw record decoding, the wake-up accounting on
 * synthetic event streams, the /proc fallback window, and kallsyms name
 * resolution on a recorded root. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/util.h"
#include "host/host.h"
#include "sense/irq.h"
#include "sense/kallsyms.h"
#include "sense/sample.h"
#include "sense/tasks.h"
#include "sense/tracefs.h"
#include "sense/wake_internal.h"
#include "sense/wakeups.h"
#include "tree.h"
#include "wake_formats.h"

/* Raw records (PERF_SAMPLE_RAW payloads, padding included) read from the
 * same kernel's perf rings. */
static const unsigned char raw_cpu_idle[] = {
    /* state 1, cpu_id 0 */
    0x38, 0x02, 0x01, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
};
static const unsigned char raw_sched_wakeup[] = {
    /* kworker/0:0H 31010 by 29562 */
    0x76, 0x01, 0x25, 0x05, 0x7a, 0x73, 0x00, 0x00, 0x6b, 0x77, 0x6f, 0x72,
    0x6b, 0x65, 0x72, 0x2f, 0x30, 0x3a, 0x30, 0x48, 0x00, 0x00, 0x00, 0x00,
    0x22, 0x79, 0x00, 0x00, 0x64, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
};
static const unsigned char raw_irq_handler_entry[] = {
    /* 32 virtio0-reporting_vq */
    0xe1, 0x00, 0x09, 0x01, 0xfc, 0x67, 0x00, 0x00, 0x20, 0x00, 0x00, 0x00, 0x10, 0x00, 0x15,
    0x00, 0x76, 0x69, 0x72, 0x74, 0x69, 0x6f, 0x30, 0x2d, 0x72, 0x65, 0x70, 0x6f, 0x72, 0x74,
    0x69, 0x6e, 0x67, 0x5f, 0x76, 0x71, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
};
static const unsigned char raw_timer_expire_entry[] = {
    /* process_timeout */
    0xd1, 0x01, 0x10, 0x01, 0xfc, 0x67, 0x00, 0x00, 0x58, 0xbe, 0x0f, 0x00, 0x00, 0xc9, 0xff,
    0xff, 0xfe, 0x35, 0x6a, 0x00, 0x01, 0x00, 0x00, 0x00, 0xc0, 0xf0, 0x42, 0x81, 0xff, 0xff,
    0xff, 0xff, 0xfe, 0x35, 0x6a, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
};
static const unsigned char raw_hrtimer_expire_entry[] = {
    /* tick_nohz_handler */
    0xcb, 0x01, 0x09, 0x01, 0x26, 0x7f, 0x00, 0x00, 0xf8, 0x06, 0xc2, 0x27,
    0x86, 0x88, 0xff, 0xff, 0x15, 0x5c, 0xe5, 0x8a, 0x98, 0x19, 0x00, 0x00,
    0xa0, 0x28, 0x44, 0x81, 0xff, 0xff, 0xff, 0xff, 0x00, 0x00, 0x00, 0x00,
};
static const unsigned char raw_workqueue_execute_start[] = {
    /* vmstat_shepherd */
    0x4f, 0x01, 0x00, 0x01, 0x0b, 0x17, 0x00, 0x00, 0x60, 0x4e, 0x12, 0x83, 0xff, 0xff,
    0xff, 0xff, 0x50, 0x53, 0x5d, 0x81, 0xff, 0xff, 0xff, 0xff, 0x00, 0x00, 0x00, 0x00,
};

/* ---- tracefs formats ---- */

static void parse(const char *text, struct tracefs_format *f)
{
    struct diags d = {0};
    assert_int_equal(tracefs_parse_format(text, strlen(text), f, &d), 0);
    assert_int_equal(d.n, 0);
    diags_free(&d);
}

static void check_field(const struct tracefs_format *f, const char *name, unsigned off,
                        unsigned size, bool sgn, bool dyn, bool arr)
{
    const struct tracefs_field *fl = tracefs_find_field(f, name);
    assert_non_null(fl);
    assert_string_equal(fl->name, name);
    assert_int_equal(fl->offset, off);
    assert_int_equal(fl->size, size);
    assert_int_equal(fl->is_signed, sgn);
    assert_int_equal(fl->dynamic, dyn);
    assert_int_equal(fl->is_array, arr);
}

static void test_parse_real_formats(void **state)
{
    struct tracefs_format f;
    parse(fmt_sched_wakeup, &f);
    assert_string_equal(f.name, "sched_wakeup");
    assert_int_equal(f.id, 374);
    assert_int_equal(f.nfields, 8);
    check_field(&f, "common_type", 0, 2, false, false, false);
    check_field(&f, "common_flags", 2, 1, false, false, false);
    check_field(&f, "common_pid", 4, 4, true, false, false);
    check_field(&f, "comm", 8, 16, false, false, true);
    check_field(&f, "pid", 24, 4, true, false, false);
    check_field(&f, "target_cpu", 32, 4, true, false, false);
    assert_null(tracefs_find_field(&f, "success")); /* gone since 4.3 */
    assert_null(tracefs_find_field(&f, "REC"));     /* from the print fmt line */
    tracefs_format_clear(&f);

    parse(fmt_irq_handler_entry, &f);
    assert_int_equal(f.id, 225);
    check_field(&f, "irq", 8, 4, true, false, false);
    check_field(&f, "name", 12, 4, false, true, false);
    tracefs_format_clear(&f);

    parse(fmt_hrtimer_expire_entry, &f);
    assert_string_equal(f.name, "hrtimer_expire_entry");
    check_field(&f, "function", 24, 8, false, false, false); /* "void * function" */
    check_field(&f, "now", 16, 8, true, false, false);       /* "s64 now" */
    tracefs_format_clear(&f);

    parse(fmt_cpu_idle, &f);
    assert_int_equal(f.id, 568);
    assert_int_equal(f.nfields, 6);
    check_field(&f, "state", 8, 4, false, false, false);
    tracefs_format_clear(&f);
    tracefs_format_clear(&f); /* twice, and NULL: harmless */
    tracefs_format_clear(NULL);

    for (size_t i = 0; i < ARRAY_SIZE(real_formats); i++) {
        parse(real_formats[i].text, &f);
        assert_true(f.id > 0);
        assert_non_null(tracefs_find_field(&f, "common_pid"));
        tracefs_format_clear(&f);
    }
}

static void test_parse_malformed(void **state)
{
    static const char text[] =
        "name: x\n"
        "ID: 12\n"
        "format:\n"
        "\tfield:int a;\toffset:0;\tsize:4;\tsigned:1;\n"
        "\tfield:int b;\toffset:x;\tsize:4;\tsigned:1;\n"     /* line 5 */
        "\tfield:int c;\toffset:4;\n"                         /* line 6 */
        "\tfield:int d;\toffset:99999;\tsize:4;\tsigned:1;\n" /* 7 */
        "\tfield:__rel_loc char[] e;\toffset:8;\tsize:4;\tsigned:0;\n"
        "\tfield:__data_loc char[] f;\toffset:8;\tsize:8;\tsigned:0;\n"
        "\tfield:int 9g;\toffset:8;\tsize:4;\tsigned:0;\n"
        "\tfield:int h;\toffset:8;\tsize:4;\tsigned:2;\n"
        "\tfield:char i[TASK_COMM_LEN];\toffset:12;\tsize:16;\n" /* no signed */
        "\tfield:int j;\toffset:28;\tsize:0;\tsigned:0;\n";
    struct tracefs_format f;
    struct diags d = {0};
    assert_int_equal(tracefs_parse_format(text, sizeof(text) - 1, &f, &d), 0);
    assert_int_equal(f.id, 12);
    assert_int_equal(f.nfields, 2);
    assert_non_null(tracefs_find_field(&f, "a"));
    check_field(&f, "i", 12, 16, false, false, true); /* pre-2.6.33: no signed: */
    assert_int_equal(d.n, 8);                         /* b c d e f 9g h j, max 8 named */
    assert_string_equal(d.v[0].where, "line 5");
    assert_string_equal(d.v[1].where, "line 6");
    assert_non_null(strstr(d.v[2].what, "out of range"));
    assert_non_null(strstr(d.v[3].what, "__rel_loc"));
    tracefs_format_clear(&f);
    diags_free(&d);

    /* nothing usable */
    f.nfields = 99;
    assert_int_equal(tracefs_parse_format("name: y\nID: 3\nprint fmt: \"\"\n", 26, &f, &d),
                     -EBADMSG);
    assert_int_equal(f.nfields, 99); /* untouched */
    assert_int_equal(d.n, 1);
    diags_free(&d);
    assert_int_equal(tracefs_parse_format("", 0, &f, NULL), -EBADMSG);

    /* a name that does not fit in 63 bytes */
    char big[256];
    snprintf(big, sizeof(big), "\tfield:int %070d;\toffset:0;\tsize:4;\tsigned:1;\n", 0);
    memset(big + 11, 'n', 70);
    assert_int_equal(tracefs_parse_format(big, strlen(big), &f, &d), -EBADMSG);
    assert_non_null(strstr(d.v[0].what, "longer than 63"));
    diags_free(&d);

    /* the text ends without a newline, mid-field: len is respected */
    static const char cut[] = "\tfield:int a;\toffset:0;\tsize:4;\tsigned:1;";
    assert_int_equal(tracefs_parse_format(cut, sizeof(cut) - 1, &f, NULL), 0);
    assert_int_equal(f.nfields, 1);
    tracefs_format_clear(&f);
    assert_int_equal(tracefs_parse_format(cut, 30, &f, NULL), -EBADMSG); /* "size:" */
}

static void test_field_readers(void **state)
{
    unsigned char raw[16] = {0xfe, 0xff, 0x80, 0x7f, 0xff, 0xff, 0xff, 0xff,
                             'a',  'b',  'c',  0,    'x',  0x0c, 0x00, 0x04};
    struct tracefs_field fl = {.offset = 0, .size = 2, .is_signed = true};
    uint64_t v;
    assert_int_equal(tracefs_field_u64(&fl, raw, sizeof(raw), &v), 0);
    assert_int_equal((int64_t)v, -2);
    fl.is_signed = false;
    assert_int_equal(tracefs_field_u64(&fl, raw, sizeof(raw), &v), 0);
    assert_int_equal(v, 0xfffe);
    fl = (struct tracefs_field){.offset = 2, .size = 1, .is_signed = true};
    assert_int_equal(tracefs_field_u64(&fl, raw, sizeof(raw), &v), 0);
    assert_int_equal((int64_t)v, -128);
    fl = (struct tracefs_field){.offset = 4, .size = 4, .is_signed = true};
    assert_int_equal(tracefs_field_u64(&fl, raw, sizeof(raw), &v), 0);
    assert_int_equal((int64_t)v, -1);
    fl.is_signed = false;
    assert_int_equal(tracefs_field_u64(&fl, raw, sizeof(raw), &v), 0);
    assert_int_equal(v, UINT32_MAX);
    fl = (struct tracefs_field){.offset = 0, .size = 8};
    assert_int_equal(tracefs_field_u64(&fl, raw, sizeof(raw), &v), 0);
    assert_int_equal(v, 0xffffffff7f80fffeULL);
    /* out of range: one byte short, and far away */
    v = 42;
    fl = (struct tracefs_field){.offset = 9, .size = 8};
    assert_int_equal(tracefs_field_u64(&fl, raw, sizeof(raw), &v), -ERANGE);
    assert_int_equal(tracefs_field_u64(&fl, raw, 16, &v), -ERANGE);
    fl.offset = 8;
    assert_int_equal(tracefs_field_u64(&fl, raw, 16, &v), 0);
    fl = (struct tracefs_field){.offset = 60000, .size = 4};
    assert_int_equal(tracefs_field_u64(&fl, raw, sizeof(raw), &v), -ERANGE);
    fl = (struct tracefs_field){.offset = 0, .size = 3};
    assert_int_equal(tracefs_field_u64(&fl, raw, sizeof(raw), &v), -EINVAL);

    /* strings */
    const char *s;
    size_t n;
    fl = (struct tracefs_field){.offset = 8, .size = 4, .is_array = true};
    assert_int_equal(tracefs_field_str(&fl, raw, sizeof(raw), &s, &n), 0);
    assert_int_equal(n, 3);
    assert_memory_equal(s, "abc", 3);
    fl.size = 3; /* no NUL inside the array: all of it */
    assert_int_equal(tracefs_field_str(&fl, raw, sizeof(raw), &s, &n), 0);
    assert_int_equal(n, 3);
    fl.size = 9;
    assert_int_equal(tracefs_field_str(&fl, raw, sizeof(raw), &s, &n), -ERANGE);
    /* a __data_loc at 12 reading 0x04000c78: 1024 bytes at 3192 */
    fl = (struct tracefs_field){.offset = 12, .size = 4, .dynamic = true};
    assert_int_equal(tracefs_field_str(&fl, raw, sizeof(raw), &s, &n), -ERANGE);
    unsigned char loc[24] = {0};
    uint32_t dl = (5u << 16) | 16; /* 5 bytes at 16 */
    memcpy(loc + 12, &dl, 4);
    memcpy(loc + 16, "eth0", 5);
    assert_int_equal(tracefs_field_str(&fl, loc, sizeof(loc), &s, &n), 0);
    assert_int_equal(n, 4);
    assert_memory_equal(s, "eth0", 4);
    assert_int_equal(tracefs_field_str(&fl, loc, 20, &s, &n), -ERANGE); /* cut short */
    assert_int_equal(tracefs_field_str(&fl, loc, 21, &s, &n), 0);
    assert_int_equal(tracefs_field_str(&fl, loc, 14, &s, &n), -ERANGE); /* the loc itself */
    dl = (0xffffu << 16) | 0xffff;
    memcpy(loc + 12, &dl, 4);
    assert_int_equal(tracefs_field_str(&fl, loc, sizeof(loc), &s, &n), -ERANGE);
    /* an integer is no string */
    fl = (struct tracefs_field){.offset = 0, .size = 4};
    assert_int_equal(tracefs_field_str(&fl, raw, sizeof(raw), &s, &n), -EINVAL);
}

/* ---- decoding ---- */

static void test_decode_real_records(void **state)
{
    struct wake_formats f;
    assert_int_equal(real_formats_load(&f), 0);
    struct wake_event ev;

    assert_int_equal(wake_decode(&f, 374, raw_sched_wakeup, sizeof(raw_sched_wakeup), 1, &ev), 0);
    assert_int_equal(ev.type, WEV_WAKEUP);
    assert_int_equal(ev.cpu, 1);
    assert_int_equal(ev.pid, 29562);
    assert_int_equal(ev.target, 31010);
    assert_int_equal(ev.target_cpu, 0);
    assert_int_equal(ev.flags, 0x25);
    assert_int_equal(ev.name_len, 12);
    assert_memory_equal(ev.name, "kworker/0:0H", 12);

    assert_int_equal(
        wake_decode(&f, 225, raw_irq_handler_entry, sizeof(raw_irq_handler_entry), 0, &ev), 0);
    assert_int_equal(ev.type, WEV_IRQ);
    assert_int_equal(ev.irq, 32);
    assert_true(ev.flags & TRACEFS_FLAG_HARDIRQ);
    assert_int_equal(ev.name_len, 20);
    assert_memory_equal(ev.name, "virtio0-reporting_vq", 20);

    assert_int_equal(
        wake_decode(&f, 459, raw_hrtimer_expire_entry, sizeof(raw_hrtimer_expire_entry), 0, &ev),
        0);
    assert_int_equal(ev.type, WEV_HRTIMER);
    assert_int_equal(ev.addr, 0xffffffff814428a0ULL);
    assert_int_equal(
        wake_decode(&f, 465, raw_timer_expire_entry, sizeof(raw_timer_expire_entry), 0, &ev), 0);
    assert_int_equal(ev.type, WEV_TIMER);
    assert_int_equal(ev.addr, 0xffffffff8142f0c0ULL);
    assert_int_equal(wake_decode(&f, 335, raw_workqueue_execute_start,
                                 sizeof(raw_workqueue_execute_start), 0, &ev),
                     0);
    assert_int_equal(ev.type, WEV_WORK);
    assert_int_equal(ev.addr, 0xffffffff815d5350ULL);

    assert_int_equal(wake_decode(&f, 568, raw_cpu_idle, sizeof(raw_cpu_idle), 0, &ev), 0);
    assert_int_equal(ev.type, WEV_IDLE_ENTER);
    assert_int_equal(ev.state, 1);
    unsigned char exit_rec[sizeof(raw_cpu_idle)];
    memcpy(exit_rec, raw_cpu_idle, sizeof(exit_rec));
    memset(exit_rec + 8, 0xff, 4);
    assert_int_equal(wake_decode(&f, 568, exit_rec, sizeof(exit_rec), 0, &ev), 0);
    assert_int_equal(ev.type, WEV_IDLE_EXIT);
    assert_int_equal(ev.state, UINT32_MAX);
    real_formats_clear(&f);
}

static void test_decode_garbage(void **state)
{
    struct wake_formats f;
    assert_int_equal(real_formats_load(&f), 0);
    struct wake_event ev = {.pid = 777};
    /* not one of ours */
    assert_int_equal(wake_decode(&f, 999, raw_cpu_idle, sizeof(raw_cpu_idle), 0, &ev), -ENOENT);
    assert_int_equal(wake_decode(&f, 0, raw_cpu_idle, sizeof(raw_cpu_idle), 0, &ev), -ENOENT);
    /* common_type says another event */
    assert_int_equal(wake_decode(&f, 374, raw_cpu_idle, sizeof(raw_cpu_idle), 0, &ev), -EBADMSG);
    /* truncated: the pid field is cut off, then the comm */
    assert_int_equal(wake_decode(&f, 374, raw_sched_wakeup, 26, 0, &ev), -ERANGE);
    assert_int_equal(wake_decode(&f, 374, raw_sched_wakeup, 10, 0, &ev), -ERANGE);
    assert_int_equal(wake_decode(&f, 374, raw_sched_wakeup, 0, 0, &ev), -ERANGE);
    /* the __data_loc points past the record */
    unsigned char irq[sizeof(raw_irq_handler_entry)];
    memcpy(irq, raw_irq_handler_entry, sizeof(irq));
    irq[14] = 0x40; /* length 64 */
    assert_int_equal(wake_decode(&f, 225, irq, sizeof(irq), 0, &ev), -ERANGE);
    assert_int_equal(ev.pid, 777); /* untouched */

    /* a format without the field we need is garbage, not "not ours" */
    tracefs_format_clear(&f.fmt[WEV_WAKEUP]);
    static const char nopid[] =
        "name: sched_wakeup\nID: 374\nformat:\n"
        "\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n"
        "\tfield:char comm[16];\toffset:8;\tsize:16;\tsigned:0;\n";
    assert_int_equal(tracefs_parse_format(nopid, strlen(nopid), &f.fmt[WEV_WAKEUP], NULL), 0);
    assert_int_equal(wake_decode(&f, 374, raw_sched_wakeup, sizeof(raw_sched_wakeup), 0, &ev),
                     -EBADMSG);
    struct wake_decoder dc;
    const char *missing;
    assert_int_equal(wake_decoder_init(&dc, &f, &missing), 5);
    assert_string_equal(missing, "sched_wakeup: no integer field pid");
    real_formats_clear(&f);
}

/* ---- accounting ---- */

#define CPU0 0
#define CPU1 1

static struct wake_event idle_enter(int cpu)
{
    return (struct wake_event){.type = WEV_IDLE_ENTER, .cpu = cpu, .state = 1};
}

static struct wake_event idle_exit(int cpu)
{
    return (struct wake_event){.type = WEV_IDLE_EXIT, .cpu = cpu, .state = UINT32_MAX};
}

static struct wake_event wakeup(int cpu, int32_t tid, const char *comm, int target_cpu)
{
    return (struct wake_event){.type = WEV_WAKEUP,
                               .cpu = cpu,
                               .target = tid,
                               .target_cpu = target_cpu,
                               .name = comm,
                               .name_len = strlen(comm)};
}

static struct wake_event irq(int cpu, int nr, const char *name)
{
    return (struct wake_event){.type = WEV_IRQ,
                               .cpu = cpu,
                               .irq = nr,
                               .flags = TRACEFS_FLAG_HARDIRQ,
                               .name = name,
                               .name_len = strlen(name)};
}

static struct wake_event timer(enum wake_ev_type t, int cpu, uint64_t fn)
{
    return (struct wake_event){.type = t, .cpu = cpu, .addr = fn};
}

static void feed(struct wake_acct *a, struct wake_event ev)
{
    wake_acct_feed(a, &ev);
}

static const struct wake_entry *entry(const struct wake_window *w, enum wake_kind k, int32_t id,
                                      uint64_t addr)
{
    for (size_t i = 0; i < w->n; i++)
        if (w->e[i].kind == k && w->e[i].id == id && w->e[i].addr == addr)
            return &w->e[i];
    return NULL;
}

static const struct wake_entry *named(const struct wake_window *w, const char *name)
{
    for (size_t i = 0; i < w->n; i++)
        if (streq(w->e[i].name, name))
            return &w->e[i];
    return NULL;
}

/* The invariants every window keeps. */
static void check_window(const struct wake_window *w)
{
    uint64_t ev = 0, idle = 0, cpu_idle = 0;
    for (size_t i = 0; i < w->n; i++) {
        ev += w->e[i].events;
        idle += w->e[i].idle_wakeups;
    }
    for (unsigned i = 0; i < w->ncpus; i++) {
        cpu_idle += w->cpu_idle_wakeups[i];
        if (i)
            assert_true(w->cpu[i] > w->cpu[i - 1]);
    }
    assert_int_equal(ev, w->total_events);
    assert_int_equal(cpu_idle, w->total_idle_wakeups);
    assert_int_equal(idle, w->total_idle_wakeups); /* every cycle is blamed once */
}

static void take(struct wake_acct *a, uint64_t now, struct wake_window *w)
{
    wake_acct_take(a, now, w);
    check_window(w);
}

#define HRTIMER_WAKEUP  0xffffffff8142d130ULL
#define TIMERFD_TMRPROC 0xffffffff81756fc0ULL
#define TICK_HANDLER    0xffffffff814428a0ULL
#define VMSTAT_WORK     0xffffffff815d5350ULL

static struct wake_acct *new_acct(size_t max)
{
    struct wake_acct *a = wake_acct_new(max);
    uint64_t tt[] = {HRTIMER_WAKEUP, TIMERFD_TMRPROC};
    wake_acct_set_task_timers(a, tt, ARRAY_SIZE(tt));
    wake_acct_set_start(a, 1000000000);
    return a;
}

/* A timerfd fires on an idle CPU and wakes its task: the idle exit is the
 * task's, the expiry an event of the timer. */
static void test_timer_blamed_on_task(void **state)
{
    struct wake_acct *a = new_acct(0);
    for (int i = 0; i < 3; i++) {
        feed(a, idle_enter(CPU0));
        feed(a, idle_exit(CPU0));
        feed(a, timer(WEV_HRTIMER, CPU0, TIMERFD_TMRPROC));
        /* the task runs on the other CPU the third time: still its cycle */
        feed(a, wakeup(CPU0, 4242, "ticker", i == 2 ? CPU1 : CPU0));
    }
    feed(a, idle_enter(CPU0));
    struct wake_window w;
    take(a, 3000000000, &w);
    assert_true(fabs(w.seconds - 2.0) < 1e-9);
    assert_int_equal(w.start_ns, 1000000000);
    assert_int_equal(w.end_ns, 3000000000);
    assert_true(w.traced);
    const struct wake_entry *t = entry(&w, WAKE_TASK, 4242, 0);
    assert_non_null(t);
    assert_string_equal(t->name, "ticker");
    assert_int_equal(t->events, 3);
    assert_int_equal(t->idle_wakeups, 3);
    const struct wake_entry *tm = entry(&w, WAKE_HRTIMER, -1, TIMERFD_TMRPROC);
    assert_non_null(tm);
    assert_string_equal(tm->name, "0xffffffff81756fc0"); /* resolved by the tracer */
    assert_int_equal(tm->events, 3);
    assert_int_equal(tm->idle_wakeups, 0);
    assert_int_equal(w.ncpus, 1);
    assert_int_equal(w.cpu[0], 0);
    assert_int_equal(w.cpu_idle_wakeups[0], 3);
    assert_int_equal(w.total_events, 6);
    wake_window_clear(&w);
    wake_acct_free(a);
}

/* A task-waking timer that woke nobody (the timerfd nobody read), or was
 * followed by something else first: the timer keeps the blame. */
static void test_task_timer_without_wakeup(void **state)
{
    struct wake_acct *a = new_acct(0);
    feed(a, idle_enter(CPU0));
    feed(a, timer(WEV_HRTIMER, CPU0, TIMERFD_TMRPROC));
    feed(a, idle_enter(CPU0)); /* nobody woken */
    feed(a, timer(WEV_HRTIMER, CPU0, HRTIMER_WAKEUP));
    feed(a, irq(CPU0, 24, "eth0"));           /* not a wake-up: the timer keeps it */
    feed(a, wakeup(CPU0, 10, "later", CPU0)); /* too late to be the cause */
    feed(a, idle_enter(CPU0));
    /* an ordinary hrtimer is blamed itself, and a wake-up from it changes nothing */
    feed(a, timer(WEV_HRTIMER, CPU0, TICK_HANDLER));
    feed(a, wakeup(CPU0, 11, "kworker", CPU0));
    feed(a, idle_enter(CPU0));
    struct wake_window w;
    take(a, 2000000000, &w);
    assert_int_equal(entry(&w, WAKE_HRTIMER, -1, TIMERFD_TMRPROC)->idle_wakeups, 1);
    assert_int_equal(entry(&w, WAKE_HRTIMER, -1, HRTIMER_WAKEUP)->idle_wakeups, 1);
    assert_int_equal(entry(&w, WAKE_HRTIMER, -1, TICK_HANDLER)->idle_wakeups, 1);
    assert_int_equal(entry(&w, WAKE_IRQ, 24, 0)->idle_wakeups, 0);
    assert_int_equal(entry(&w, WAKE_IRQ, 24, 0)->events, 1);
    assert_int_equal(entry(&w, WAKE_TASK, 10, 0)->idle_wakeups, 0);
    assert_int_equal(entry(&w, WAKE_TASK, 11, 0)->idle_wakeups, 0);
    assert_int_equal(w.total_idle_wakeups, 3);
    wake_window_clear(&w);
    wake_acct_free(a);
}

/* An IRQ that wakes a task: the IRQ is the cause, the task an event. */
static void test_irq_blame(void **state)
{
    struct wake_acct *a = new_acct(0);
    feed(a, idle_enter(CPU1));
    feed(a, idle_exit(CPU1));
    feed(a, irq(CPU1, 41, "virtio3-rx"));
    feed(a, wakeup(CPU1, 500, "sshd", CPU1));
    feed(a, timer(WEV_WORK, CPU1, VMSTAT_WORK));
    feed(a, idle_enter(CPU1));
    feed(a, irq(CPU1, 41, "virtio3-rx"));
    feed(a, idle_enter(CPU1));
    struct wake_window w;
    take(a, 2000000000, &w);
    const struct wake_entry *e = entry(&w, WAKE_IRQ, 41, 0);
    assert_string_equal(e->name, "virtio3-rx");
    assert_int_equal(e->events, 2);
    assert_int_equal(e->idle_wakeups, 2);
    assert_int_equal(entry(&w, WAKE_TASK, 500, 0)->idle_wakeups, 0);
    assert_int_equal(entry(&w, WAKE_WORK, -1, VMSTAT_WORK)->events, 1);
    assert_int_equal(w.ncpus, 1);
    assert_int_equal(w.cpu[0], 1);
    assert_int_equal(w.cpu_idle_wakeups[0], 2);
    wake_window_clear(&w);
    wake_acct_free(a);
}

/* Cycles are per CPU; the first idle entry only starts one; a CPU woken
 * by nobody we trace counts as "other"; a wake-up of a task onto another
 * CPU is no cause for this one. */
static void test_cycles_and_other(void **state)
{
    struct wake_acct *a = new_acct(0);
    feed(a, irq(CPU0, 5, "ttyS0")); /* before any idle entry: no cycle */
    feed(a, idle_enter(CPU0));      /* starts the first */
    feed(a, idle_enter(CPU1));
    feed(a, idle_exit(CPU0));
    feed(a, idle_enter(CPU0));        /* no cause: an IPI, a poll exit */
    feed(a, wakeup(CPU1, 7, "a", 0)); /* CPU1 wakes a task onto CPU0: not CPU1's cause */
    feed(a, timer(WEV_TIMER, CPU1, 0xffffffff8142f0c0ULL));
    feed(a, idle_enter(CPU1));
    feed(a, wakeup(CPU0, 8, "b", 0)); /* a task woken onto this CPU (IPI wake list) */
    feed(a, idle_enter(CPU0));
    struct wake_window w;
    take(a, 2000000000, &w);
    assert_int_equal(w.ncpus, 2);
    assert_int_equal(w.cpu_idle_wakeups[0], 2);
    assert_int_equal(w.cpu_idle_wakeups[1], 1);
    const struct wake_entry *o = named(&w, "(no cause event)");
    assert_non_null(o);
    assert_int_equal(o->kind, WAKE_OTHER);
    assert_int_equal(o->idle_wakeups, 1);
    assert_int_equal(o->events, 0);
    assert_int_equal(entry(&w, WAKE_IRQ, 5, 0)->idle_wakeups, 0);
    assert_int_equal(entry(&w, WAKE_TASK, 7, 0)->idle_wakeups, 0);
    assert_int_equal(entry(&w, WAKE_TIMER, -1, 0xffffffff8142f0c0ULL)->idle_wakeups, 1);
    assert_int_equal(entry(&w, WAKE_TASK, 8, 0)->idle_wakeups, 1);
    assert_null(named(&w, "(table full)"));
    /* events of CPUs out of range are counted, without cycles */
    feed(a, irq(-1, 9, "x"));
    feed(a, idle_enter(99999));
    wake_window_clear(&w);
    take(a, 3000000000, &w);
    assert_int_equal(w.total_events, 1);
    assert_int_equal(w.total_idle_wakeups, 0);
    assert_int_equal(w.ncpus, 2);
    wake_window_clear(&w);
    wake_acct_free(a);
}

/* A bounded table: sources beyond max_entries land in "(table full)". */
static void test_table_full(void **state)
{
    struct wake_acct *a = new_acct(4);
    feed(a, idle_enter(CPU0));
    for (int i = 0; i < 6; i++)
        feed(a, irq(CPU0, 30 + i, "dev")); /* 30 is the cause */
    feed(a, irq(CPU0, 31, "dev"));         /* known: still counted */
    feed(a, idle_enter(CPU0));
    feed(a, irq(CPU0, 35, "dev")); /* did not fit: its cycle goes to "(table full)" */
    feed(a, idle_enter(CPU0));
    struct wake_window w;
    take(a, 2000000000, &w);
    assert_int_equal(w.n, 5);
    const struct wake_entry *full = named(&w, "(table full)");
    assert_non_null(full);
    assert_int_equal(full->kind, WAKE_OTHER);
    assert_int_equal(full->events, 3);
    assert_int_equal(full->idle_wakeups, 1);
    assert_int_equal(w.dropped, 3);
    assert_int_equal(entry(&w, WAKE_IRQ, 31, 0)->events, 2);
    assert_int_equal(entry(&w, WAKE_IRQ, 30, 0)->idle_wakeups, 1);
    assert_int_equal(w.total_events, 8);
    wake_window_clear(&w);
    /* the next window has room again */
    feed(a, irq(CPU0, 35, "dev"));
    take(a, 3000000000, &w);
    assert_int_equal(w.n, 1);
    assert_int_equal(w.dropped, 0);
    wake_window_clear(&w);
    wake_acct_free(a);
}

/* Many sources: the table grows (rehashing) and finds every one again. */
static void test_table_growth(void **state)
{
    struct wake_acct *a = new_acct(0);
    for (int round = 0; round < 3; round++)
        for (int i = 0; i < 5000; i++) {
            char comm[16];
            snprintf(comm, sizeof(comm), "t%d", i);
            feed(a, wakeup(CPU0, 100000 + i, comm, CPU0));
            feed(a, timer(WEV_TIMER, CPU1, 0xffffffff81000000ULL + 16 * (uint64_t)i));
        }
    struct wake_window w;
    take(a, 2000000000, &w);
    assert_int_equal(w.n, 10000);
    assert_int_equal(w.dropped, 0);
    const struct wake_entry *e = entry(&w, WAKE_TASK, 104999, 0);
    assert_int_equal(e->events, 3);
    assert_string_equal(e->name, "t4999");
    assert_int_equal(entry(&w, WAKE_TIMER, -1, 0xffffffff81000000ULL + 16 * 1234)->events, 3);
    wake_window_clear(&w);
    wake_acct_free(a);
}

/* take() hands over and starts afresh; the cycle in progress carries over;
 * lost events are counted and forget the CPU's cycle. */
static void test_take_resets(void **state)
{
    struct wake_acct *a = new_acct(0);
    feed(a, idle_enter(CPU0));
    feed(a, irq(CPU0, 24, "eth0"));
    struct wake_window w;
    take(a, 2000000000, &w);
    assert_int_equal(w.total_events, 1);
    assert_int_equal(w.total_idle_wakeups, 0); /* the cycle is still open */
    wake_window_clear(&w);
    feed(a, idle_enter(CPU0)); /* closes it, in the new window */
    take(a, 2500000000, &w);
    assert_true(fabs(w.seconds - 0.5) < 1e-9);
    assert_int_equal(w.start_ns, 2000000000);
    assert_int_equal(w.n, 1);
    const struct wake_entry *e = entry(&w, WAKE_IRQ, 24, 0);
    assert_string_equal(e->name, "eth0"); /* the name came with the cause */
    assert_int_equal(e->events, 0);
    assert_int_equal(e->idle_wakeups, 1);
    wake_window_clear(&w);
    /* an empty window */
    take(a, 2600000000, &w);
    assert_int_equal(w.n, 0);
    assert_int_equal(w.total_events, 0);
    assert_non_null(w.e);
    wake_window_clear(&w);
    /* lost events: counted, and the cycle they may have hidden is dropped */
    feed(a, irq(CPU0, 24, "eth0"));
    wake_acct_lost(a, CPU0, 17);
    feed(a, idle_enter(CPU0)); /* restarts, closes nothing */
    take(a, 2700000000, &w);
    assert_int_equal(w.lost, 17);
    assert_int_equal(w.total_idle_wakeups, 0);
    wake_window_clear(&w);
    take(a, 2800000000, &w);
    assert_int_equal(w.lost, 0);
    wake_window_clear(&w);
    /* a clock that went backwards gives an empty interval, not a negative one */
    take(a, 100, &w);
    assert_true(w.seconds == 0);
    wake_window_clear(&w);
    wake_window_clear(&w); /* twice, and NULL */
    wake_window_clear(NULL);
    wake_acct_free(a);
    wake_acct_free(NULL);
}

static void test_names(void **state)
{
    assert_string_equal(wake_kind_name(WAKE_TASK), "task");
    assert_string_equal(wake_kind_name(WAKE_IRQ), "irq");
    assert_string_equal(wake_kind_name(WAKE_TIMER), "timer");
    assert_string_equal(wake_kind_name(WAKE_HRTIMER), "hrtimer");
    assert_string_equal(wake_kind_name(WAKE_WORK), "work");
    assert_string_equal(wake_kind_name(WAKE_OTHER), "other");
    assert_string_equal(wake_kind_name(_WAKE_KIND_MAX), "unknown");
    /* long names are cut at 63 bytes; an IRQ without one gets "irqN" */
    struct wake_acct *a = new_acct(0);
    char longname[100];
    memset(longname, 'x', sizeof(longname));
    struct wake_event ev = wakeup(CPU0, 1, "", CPU0);
    ev.name = longname;
    ev.name_len = sizeof(longname);
    feed(a, ev);
    ev = irq(CPU0, 7, "");
    feed(a, ev);
    struct wake_window w;
    take(a, 2000000000, &w);
    assert_int_equal(strlen(entry(&w, WAKE_TASK, 1, 0)->name), 63);
    assert_string_equal(entry(&w, WAKE_IRQ, 7, 0)->name, "irq7");
    wake_window_clear(&w);
    wake_acct_free(a);
}

/* ---- the /proc fallback ---- */

static void test_window_from_proc(void **state)
{
    struct irq_source src[3] = {
        {.label = "24", .name = "virtio3-rx", .numeric = true},
        {.label = "LOC", .name = "Local timer interrupts"},
        {.label = "26", .numeric = true}, /* no handler name */
    };
    struct irq_rate rate[3] = {
        {.src = &src[0], .per_s = 150.0},
        {.src = &src[1], .per_s = 1000.0},
        {.src = &src[2], .per_s = 0.5},
    };
    struct irq_rates rates = {.nsources = 3, .src = rate};
    struct task_info ti[3] = {
        {.pid = 100, .comm = "nginx"},
        {.pid = 200, .comm = "idle-one"},
        {.pid = 300, .comm = "unknown"},
    };
    struct task_delta td[3] = {
        {.t = &ti[0], .vol_ctxsw = 40},
        {.t = &ti[1], .vol_ctxsw = 0},
        {.t = &ti[2], .vol_ctxsw = VAL_NONE}, /* not read: left out */
    };
    struct wake_window w;
    assert_int_equal(wake_window_from_proc(&rates, td, 3, 2.0, &w), 0);
    assert_false(w.traced);
    assert_true(w.seconds == 2.0);
    assert_int_equal(w.n, 4); /* IRQ 24, IRQ 26, tasks 100 and 200 */
    const struct wake_entry *e = entry(&w, WAKE_IRQ, 24, 0);
    assert_string_equal(e->name, "virtio3-rx");
    assert_int_equal(e->events, 300);
    assert_string_equal(entry(&w, WAKE_IRQ, 26, 0)->name, "26");
    assert_int_equal(entry(&w, WAKE_IRQ, 26, 0)->events, 1);
    e = entry(&w, WAKE_TASK, 100, 0);
    assert_string_equal(e->name, "nginx");
    assert_int_equal(e->events, 40);
    assert_int_equal(e->idle_wakeups, 0);
    assert_null(entry(&w, WAKE_TASK, 300, 0));
    assert_int_equal(w.total_events, 341);
    assert_int_equal(w.total_idle_wakeups, 0);
    assert_int_equal(w.ncpus, 0);
    assert_true(w.end_ns - w.start_ns == 2000000000);
    wake_window_clear(&w);
    /* nothing at all is an empty window */
    assert_int_equal(wake_window_from_proc(NULL, NULL, 0, 1.0, &w), 0);
    assert_int_equal(w.n, 0);
    wake_window_clear(&w);
    assert_int_equal(wake_window_from_proc(NULL, NULL, 1, 1.0, &w), -EINVAL);
    assert_int_equal(wake_window_from_proc(NULL, NULL, 0, NAN, &w), -EINVAL);
}

/* ---- kallsyms and tracefs on a recorded root ---- */

static void test_ksym_parse_line(void **state)
{
    uint64_t a;
    const char *n, *m;
    size_t nl, ml;
    static const char core[] = "ffffffff8142d130 t hrtimer_wakeup";
    assert_int_equal(ksym_parse_line(core, strlen(core), &a, &n, &nl, &m, &ml), 0);
    assert_int_equal(a, 0xffffffff8142d130ULL);
    assert_int_equal(nl, 14);
    assert_memory_equal(n, "hrtimer_wakeup", 14);
    assert_int_equal(ml, 0);
    static const char mod[] = "ffffffffc0201000 t ftrace_trampoline\t[__builtin__ftrace]";
    assert_int_equal(ksym_parse_line(mod, strlen(mod), &a, &n, &nl, &m, &ml), 0);
    assert_int_equal(ml, 17);
    assert_memory_equal(m, "__builtin__ftrace", 17);
    static const char *const bad[] = {"",
                                      "zzzz t x",
                                      "ffffffff81000000",
                                      "ffffffff81000000 T",
                                      "ffffffff81000000 TT x",
                                      "10000000000000000 T x"};
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
        assert_int_equal(ksym_parse_line(bad[i], strlen(bad[i]), &a, &n, &nl, &m, &ml), -EINVAL);
}

static const char kallsyms[] = "ffffffff81000000 T _stext\n"
                               "ffffffff81000000 T _text\n"
                               "ffffffff8142d130 t hrtimer_wakeup\n"
                               "ffffffff8142f0c0 t process_timeout\n"
                               "ffffffff814428a0 t tick_nohz_handler\n"
                               "ffffffff81756fc0 t timerfd_tmrproc\n"
                               "ffffffffc0a01000 t nvme_irq\t[nvme]\n"
                               "ffffffffc0a02000 t process_timeout\t[fake]\n";

static void test_ksym_recorded(void **state)
{
    char *root = tree_new();
    tree_write(root, "proc/kallsyms", "%s", kallsyms); /* no sys/: fine */
    struct host *h;
    assert_int_equal(host_open(root, &h), 0);
    static const char *const names[] = {"hrtimer_wakeup", "timerfd_tmrproc", "it_real_fn",
                                        "process_timeout"};
    uint64_t addr[8];
    char why[128];
    size_t n = ksym_lookup_names(h, names, ARRAY_SIZE(names), addr, 8, why, sizeof(why));
    assert_int_equal(n, 4); /* process_timeout twice, it_real_fn not at all */
    assert_int_equal(addr[0], 0xffffffff8142d130ULL);
    assert_int_equal(addr[1], 0xffffffff8142f0c0ULL);
    assert_int_equal(addr[3], 0xffffffffc0a02000ULL);
    assert_string_equal(why, "");
    assert_int_equal(ksym_lookup_names(h, names, 4, addr, 2, NULL, 0), 2); /* bounded */

    struct ksym_cache c;
    ksym_cache_init(&c);
    uint64_t want[] = {0xffffffff81000000ULL, 0xffffffffc0a01000ULL, 0xffffffff814428a0ULL,
                       0xdeadbeefULL};
    assert_int_equal(ksym_resolve(&c, h, want, 4, NULL, NULL), 0);
    assert_int_equal(c.passes, 1);
    assert_string_equal(ksym_name(&c, want[0]), "_stext"); /* the first alias */
    assert_string_equal(ksym_name(&c, want[1]), "nvme_irq [nvme]");
    assert_string_equal(ksym_name(&c, want[2]), "tick_nohz_handler");
    assert_null(ksym_name(&c, want[3]));
    assert_true(ksym_known(&c, want[3]));
    assert_int_equal(ksym_resolve(&c, h, want, 4, NULL, NULL), 0); /* all known: no pass */
    assert_int_equal(c.passes, 1);
    ksym_cache_free(&c);

    /* hidden addresses (kptr_restrict): said once, then no more passes */
    tree_write(root, "proc/kallsyms",
               "0000000000000000 T _stext\n0000000000000000 t hrtimer_wakeup\n");
    assert_int_equal(ksym_lookup_names(h, names, 4, addr, 8, why, sizeof(why)), 0);
    assert_non_null(strstr(why, "hides the addresses"));
    ksym_cache_init(&c);
    assert_int_equal(ksym_resolve(&c, h, want, 2, NULL, NULL), 0);
    assert_true(c.unreadable);
    assert_null(ksym_name(&c, want[0]));
    uint64_t more = 0x1234;
    assert_int_equal(ksym_resolve(&c, h, &more, 1, NULL, NULL), 0);
    assert_int_equal(c.passes, 1);
    ksym_cache_free(&c);

    /* no file at all */
    tree_free(root);
    root = tree_new();
    tree_mkdirs(root);
    tree_write(root, "proc/stat", "cpu 1 2 3\n");
    host_close(h);
    assert_int_equal(host_open(root, &h), 0);
    assert_int_equal(ksym_lookup_names(h, names, 4, addr, 8, why, sizeof(why)), 0);
    assert_non_null(strstr(why, "cannot read"));
    assert_non_null(strstr(why, "ENOENT"));
    host_close(h);
    tree_free(root);
}

static void count_tick(void *ud)
{
    (*(int *)ud)++;
}

/* The cache is bounded: past KSYM_CACHE_MAX it starts afresh. */
static void test_ksym_cache_bound(void **state)
{
    char *root = tree_new();
    tree_write(root, "proc/kallsyms", "%s", kallsyms);
    struct host *h;
    assert_int_equal(host_open(root, &h), 0);
    struct ksym_cache c;
    ksym_cache_init(&c);
    uint64_t *a = xmalloc((KSYM_CACHE_MAX + 10) * sizeof(*a));
    for (size_t i = 0; i < KSYM_CACHE_MAX + 10; i++)
        a[i] = 0x1000 + i;
    assert_int_equal(ksym_resolve(&c, h, a, KSYM_CACHE_MAX + 10, NULL, NULL), 0);
    assert_true(c.n <= KSYM_CACHE_MAX);
    a[0] = 0xffffffff81756fc0ULL;
    int ticks = 0;
    assert_int_equal(ksym_resolve(&c, h, a, 1, count_tick, &ticks), 0);
    assert_string_equal(ksym_name(&c, a[0]), "timerfd_tmrproc");
    assert_int_equal(ticks, 1); /* one chunk */
    free(a);
    ksym_cache_free(&c);
    host_close(h);
    tree_free(root);
}

static void test_tracefs_recorded(void **state)
{
    char *root = tree_new();
    tree_write(root, "proc/stat", "cpu 1 2 3\n");
    tree_mkdirs(root);
    struct host *h;
    assert_int_equal(host_open(root, &h), 0);
    char *dir = NULL;
    bool mounted = true;
    /* a recorded tree never mounts anything */
    assert_int_equal(host_tracefs_events(h, &dir, &mounted), -ENOENT);
    host_close(h);
    tree_write(root, "sys/kernel/debug/tracing/events/sched/sched_wakeup/format", "%s",
               fmt_sched_wakeup);
    assert_int_equal(host_open(root, &h), 0);
    assert_int_equal(host_tracefs_events(h, &dir, &mounted), 0);
    assert_string_equal(dir, "sys/kernel/debug/tracing/events");
    assert_false(mounted);
    free(dir);
    tree_write(root, "sys/kernel/tracing/events/power/cpu_idle/format", "%s", fmt_cpu_idle);
    assert_int_equal(host_tracefs_events(h, &dir, &mounted), 0);
    assert_string_equal(dir, "sys/kernel/tracing/events"); /* preferred */
    free(dir);
    host_tracefs_unmount(h); /* mounted nothing: does nothing */

    /* the tracer says why it cannot run here */
    struct wake_tracer *t = NULL;
    char *why = NULL;
    assert_int_equal(wake_tracer_open(h, NULL, &t, &why), 0);
    assert_null(t);
    assert_string_equal(why, "a recorded tree has no tracepoints");
    free(why);
    struct wake_tracer_opts bad = {.ring_pages = 3};
    assert_int_equal(wake_tracer_open(h, &bad, &t, &why), -EINVAL);
    bad = (struct wake_tracer_opts){.watermark_pct = 101};
    assert_int_equal(wake_tracer_open(h, &bad, &t, &why), -EINVAL);
    wake_tracer_close(NULL);
    host_close(h);
    tree_free(root);
}

/* ---- the BPF counters' deltas, on fake map contents ---- */

static const struct wake_entry *find_entry(const struct wake_window *w, enum wake_kind k,
                                           int32_t id, uint64_t addr, const char *name)
{
    for (size_t i = 0; i < w->n; i++)
        if (w->e[i].kind == k && w->e[i].id == id && w->e[i].addr == addr &&
            (!name || streq(w->e[i].name, name)))
            return &w->e[i];
    return NULL;
}

static struct wake_bpf_rec rec(enum wake_kind k, int32_t id, uint64_t addr, uint64_t ev,
                               uint64_t idle, int32_t tgid, uint64_t cgid, const char *name)
{
    struct wake_bpf_rec r = {.kind = k,
                             .id = id,
                             .addr = addr,
                             .events = ev,
                             .idle_wakeups = idle,
                             .tgid = tgid,
                             .cgid = cgid};
    snprintf(r.name, sizeof(r.name), "%s", name);
    return r;
}

static void test_bpf_deltas(void **state)
{
    struct wake_bpf_acct *a = wake_bpf_acct_new(0, 1000000000ull);
    struct wake_bpf_rec m[4] = {
        rec(WAKE_TIMER, -1, 0xffffffff81000010ull, 7, 1, 0, 0, ""),
        rec(WAKE_TASK, 4242, 0, 10, 2, 4240, 777, "worker"),
        rec(WAKE_IRQ, 24, 0, 3, 3, 0, 0, ""),
    };
    struct wake_bpf_cpu_rec cpu[2] = {{1, 4, 1, 0, 0}, {0, 2, 0, 0, 0}};
    struct wake_window w;
    struct wake_bpf_rec *stale;
    size_t nstale;
    /* the first take: everything counted since load (from 0) */
    wake_bpf_acct_take(a, m, 3, cpu, 2, 3000000000ull, &w, &stale, &nstale);
    assert_true(w.traced && w.bpf);
    assert_true(fabs(w.seconds - 2.0) < 1e-9);
    assert_int_equal(nstale, 0);
    const struct wake_entry *e = find_entry(&w, WAKE_TASK, 4242, 0, "worker");
    assert_non_null(e);
    assert_int_equal(e->events, 10);
    assert_int_equal(e->idle_wakeups, 2);
    assert_int_equal(e->tgid, 4240);
    assert_int_equal(e->cgroup_id, 777);
    e = find_entry(&w, WAKE_IRQ, 24, 0, "irq24"); /* no name from the kernel */
    assert_non_null(e);
    e = find_entry(&w, WAKE_TIMER, -1, 0xffffffff81000010ull, "0xffffffff81000010");
    assert_non_null(e);
    assert_int_equal(e->tgid, 0);
    assert_non_null(find_entry(&w, WAKE_OTHER, -1, 0, "(no cause event)"));
    assert_int_equal(w.total_events, 20);
    /* CPUs in order, their idle exits summed */
    assert_int_equal(w.ncpus, 2);
    assert_int_equal(w.cpu[0], 0);
    assert_int_equal(w.cpu[1], 1);
    assert_int_equal(w.cpu_idle_wakeups[0], 2);
    assert_int_equal(w.cpu_idle_wakeups[1], 4);
    assert_int_equal(w.total_idle_wakeups, 6);
    wake_window_clear(&w);

    /* the second: deltas only; a source that did not move is not listed;
     * a new one counts from 0; one that went back (deleted, came again)
     * counts what it has */
    for (int i = 0; i < 3; i++) { /* the take sorted m in place */
        if (m[i].kind == WAKE_TIMER)
            m[i].events = 9; /* +2 */
        else if (m[i].kind == WAKE_IRQ)
            m[i].events = 1; /* went back: 1 */
    }
    m[3] = rec(WAKE_WORK, -1, 0xffffffff81000020ull, 5, 0, 0, 0, "");
    cpu[0] = (struct wake_bpf_cpu_rec){1, 5, 2, 3, 1}; /* +1, other +1, full 3 ev, 1 idle */
    wake_bpf_acct_take(a, m, 4, cpu, 2, 4000000000ull, &w, NULL, NULL);
    assert_true(fabs(w.seconds - 1.0) < 1e-9);
    assert_int_equal(find_entry(&w, WAKE_TIMER, -1, 0xffffffff81000010ull, NULL)->events, 2);
    assert_int_equal(find_entry(&w, WAKE_TIMER, -1, 0xffffffff81000010ull, NULL)->idle_wakeups, 0);
    assert_null(find_entry(&w, WAKE_TASK, 4242, 0, NULL));
    assert_int_equal(find_entry(&w, WAKE_IRQ, 24, 0, NULL)->events, 1);
    assert_int_equal(find_entry(&w, WAKE_WORK, -1, 0xffffffff81000020ull, NULL)->events, 5);
    assert_int_equal(find_entry(&w, WAKE_OTHER, -1, 0, "(no cause event)")->idle_wakeups, 1);
    e = find_entry(&w, WAKE_OTHER, -1, 0, "(table full)");
    assert_non_null(e);
    assert_int_equal(e->events, 3);
    assert_int_equal(e->idle_wakeups, 1);
    assert_int_equal(w.dropped, 3);
    assert_int_equal(w.total_events, 2 + 1 + 5 + 3);
    assert_int_equal(w.cpu_idle_wakeups[1], 1);
    assert_int_equal(w.cpu_idle_wakeups[0], 0);
    wake_window_clear(&w);

    /* nothing moved: an empty window, never a NULL array */
    wake_bpf_acct_take(a, m, 4, cpu, 2, 5000000000ull, &w, NULL, NULL);
    assert_int_equal(w.n, 0);
    assert_non_null(w.e);
    assert_int_equal(w.total_idle_wakeups, 0);
    wake_window_clear(&w);
    wake_bpf_acct_free(a);
}

static void test_bpf_stale(void **state)
{
    struct wake_bpf_acct *a = wake_bpf_acct_new(2, 0);
    struct wake_bpf_rec m[2] = {
        rec(WAKE_TASK, 100, 0, 5, 0, 100, 1, "idle"),
        rec(WAKE_TASK, 200, 0, 5, 0, 200, 1, "busy"),
    };
    struct wake_window w;
    struct wake_bpf_rec *stale;
    size_t nstale;
    wake_bpf_acct_take(a, m, 2, NULL, 0, 1, &w, &stale, &nstale);
    assert_int_equal(nstale, 0);
    free(stale);
    wake_window_clear(&w);
    for (int i = 0; i < 2; i++) {
        m[0].events = 5; /* qsort may have swapped them: set both by id */
        m[1].events = 5;
        for (int k = 0; k < 2; k++)
            if (m[k].id == 200)
                m[k].events = 6 + (uint64_t)i;
        wake_bpf_acct_take(a, m, 2, NULL, 0, 2 + (uint64_t)i, &w, &stale, &nstale);
        wake_window_clear(&w);
        if (i == 0) {
            assert_int_equal(nstale, 0);
            free(stale);
        }
    }
    /* tid 100 has not moved for two takes: to be deleted */
    assert_int_equal(nstale, 1);
    assert_int_equal(stale[0].id, 100);
    wake_bpf_acct_forget(a, &stale[0]);
    free(stale);
    /* deleted, then woken again: the kernel's entry starts from 0 */
    struct wake_bpf_rec again[2] = {rec(WAKE_TASK, 100, 0, 1, 0, 100, 1, "idle"),
                                    rec(WAKE_TASK, 200, 0, 7, 0, 200, 1, "busy")};
    wake_bpf_acct_take(a, again, 2, NULL, 0, 10, &w, NULL, NULL);
    assert_int_equal(find_entry(&w, WAKE_TASK, 100, 0, NULL)->events, 1);
    assert_null(find_entry(&w, WAKE_TASK, 200, 0, NULL));
    wake_window_clear(&w);
    wake_bpf_acct_free(a);
}

static void test_wake_modes(void **state)
{
    enum wake_mode m;
    for (int i = 0; i < _WAKE_MODE_MAX; i++) {
        assert_int_equal(wake_mode_from_string(wake_mode_name((enum wake_mode)i), &m), 0);
        assert_int_equal(m, i);
    }
    assert_int_equal(wake_mode_from_string("tracepoints", &m), -EINVAL);
    assert_int_equal(wake_mode_from_string(NULL, &m), -EINVAL);
    assert_string_equal(wake_path_name(WAKE_PATH_BPF), "bpf");
    assert_string_equal(wake_path_name(WAKE_PATH_TRACE), "trace");
    assert_string_equal(wake_path_name(WAKE_PATH_PROC), "proc");
}

/* Where BPF cannot be had, wake_bpf_open() says why and returns 0. */
static void test_bpf_fallback(void **state)
{
    struct wake_bpf *b = NULL;
    char *why = NULL;
    setenv("WATT_NO_BPF", "1", 1);
    struct host *h;
    assert_int_equal(host_open("/", &h), 0);
    assert_int_equal(wake_bpf_open(h, 0, &b, &why), 0);
    assert_null(b);
    assert_non_null(why);
    /* built without BPF, or the variable: either way, said */
    assert_true(strstr(why, "WATT_NO_BPF") || strstr(why, "built without BPF"));
    free(why);
    unsetenv("WATT_NO_BPF");
    host_close(h);
    wake_bpf_close(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_real_formats),
        cmocka_unit_test(test_parse_malformed),
        cmocka_unit_test(test_field_readers),
        cmocka_unit_test(test_decode_real_records),
        cmocka_unit_test(test_decode_garbage),
        cmocka_unit_test(test_timer_blamed_on_task),
        cmocka_unit_test(test_task_timer_without_wakeup),
        cmocka_unit_test(test_irq_blame),
        cmocka_unit_test(test_cycles_and_other),
        cmocka_unit_test(test_table_full),
        cmocka_unit_test(test_table_growth),
        cmocka_unit_test(test_take_resets),
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_window_from_proc),
        cmocka_unit_test(test_ksym_parse_line),
        cmocka_unit_test(test_ksym_recorded),
        cmocka_unit_test(test_ksym_cache_bound),
        cmocka_unit_test(test_tracefs_recorded),
        cmocka_unit_test(test_bpf_deltas),
        cmocka_unit_test(test_bpf_stale),
        cmocka_unit_test(test_wake_modes),
        cmocka_unit_test(test_bpf_fallback),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
