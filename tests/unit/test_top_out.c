#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* cmocka.h needs stdarg, stddef, stdint and setjmp first */
#include <cmocka.h>

#include "base/strbuf.h"
#include "base/util.h"
#include "cli/top_view.h"
#include "view/top.h"

/* ---- frames built by hand ------------------------------------------------------ */

static const char long_cmd[] =
    "/usr/lib/jvm/bin/java -Xmx8g -Dlong.property=aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa "
    "-cp /opt/app/lib/*:/opt/app/more/*:/opt/app/even/more/* com.example.Main --serve";

static void add_proc(struct top_frame *f, int32_t pid, const char *comm, const char *cmdline,
                     double wake, double idle, double cpu, double watts)
{
    struct top_proc *p = &f->procs[f->nprocs++];
    p->pid = pid;
    snprintf(p->comm, sizeof(p->comm), "%s", comm);
    p->cmdline = cmdline ? xstrdup(cmdline) : NULL;
    p->cgroup = xstrdup("/system.slice/x.service");
    p->threads = 1;
    p->wakeups_s = wake;
    p->idle_wakeups_s = idle;
    p->cpu_pct = cpu;
    p->power_w = watts;
    p->energy_j = watts * 2;
}

static struct top_frame *frame_new(void)
{
    struct top_frame *f = xcalloc(1, sizeof(*f));
    f->interval_s = 2;
    f->real_ns = 1700000000123456789ull; /* 2023-11-14T22:13:20.123Z */
    f->hostname = xstrdup("node\x01one");
    f->kernel = xstrdup("6.1.0");
    f->ncpus = 2;
    f->busy_cpus = 0.5;
    f->traced = true;
    f->total_wakeups_s = 1234.5;
    f->total_idle_wakeups_s = 456;
    f->lost_events = 3;
    f->node_w = 41.5;
    f->measured = true;
    snprintf(f->power_source, sizeof(f->power_source), "rapl psys");
    f->idle_w = 20;
    f->kernel_w = 1;
    f->unaccounted_w = 0.25;
    f->procs_w = 20;
    f->error_pct = NAN;
    snprintf(f->power_note, sizeof(f->power_note), "split by CPU time");
    f->procs = xcalloc(16, sizeof(*f->procs));
    add_proc(f, 300, "idle", NULL, 0, NAN, 0, NAN);
    add_proc(f, 20, "java", long_cmd, 500, 100, 80, 12);
    add_proc(f, 10, "evil\x1b[2Jx", "evil\x1b[2Jx\narg\ttab\x7f", 500, 50, 10, 3);
    add_proc(f, 40, "b\xe2\x80\xaeidi", "b\xe2\x80\xaeidi --x", 80, NAN, 5, 1);
    add_proc(f, 30, "Grüße", "Grüße 日本語 \xff\xfe", 900, 10, 1, NAN);
    add_proc(f, 50, "kworker/0:1", NULL, 10, 5, 0.5, 0.1);
    f->procs[5].kthread = true;
    add_proc(f, 60, "gone", NULL, 10, 5, 0.5, 0.1);
    f->procs[6].exited = true;
    f->ncgroups = 2;
    f->cgroups = xcalloc(2, sizeof(*f->cgroups));
    f->cgroups[0] = (struct top_cgroup){.path = xstrdup("/a"), .nprocs = 1, .wakeups_s = 5};
    f->cgroups[1] = (struct top_cgroup){
        .path = xstrdup("/b"), .nprocs = 2, .wakeups_s = 50, .power_w = NAN, .idle_wakeups_s = NAN};
    f->nsources = 3;
    f->sources = xcalloc(3, sizeof(*f->sources));
    f->sources[0] = (struct top_source){
        .kind = WAKE_TIMER, .irq = -1, .name = "tick", .events_s = 10, .idle_wakeups_s = 9};
    f->sources[1] = (struct top_source){
        .kind = WAKE_IRQ, .irq = 24, .name = "virtio0-input", .events_s = 100, .idle_wakeups_s = 1};
    f->sources[2] = (struct top_source){
        .kind = WAKE_OTHER, .irq = -1, .name = "(other)", .events_s = 10, .idle_wakeups_s = NAN};
    f->ncpus_rows = 2;
    f->cpus = xcalloc(2, sizeof(*f->cpus));
    for (int c = 0; c < 2; c++) {
        struct top_cpu *cpu = &f->cpus[c];
        cpu->cpu = c;
        cpu->busy_pct = 25;
        cpu->mhz = c ? NAN : 2400;
        cpu->idle_wakeups_s = 100;
        cpu->irqs_s = NAN;
        cpu->nstates = 2;
        cpu->st = xcalloc(2, sizeof(*cpu->st));
        cpu->st[0] = (struct top_cstate){
            .name = "C1", .residency_pct = 10, .entries_s = 50, .latency_us = 2};
        cpu->st[1] = (struct top_cstate){.name = "C6",
                                         .residency_pct = c ? 0 : 60,
                                         .entries_s = 20,
                                         .latency_us = 133,
                                         .disabled = c == 1};
    }
    f->ndevices = 1;
    f->devices = xcalloc(1, sizeof(*f->devices));
    f->devices[0] = (struct top_device){.bus = xstrdup("pci"),
                                        .name = xstrdup("0000:00:03.0"),
                                        .control = "on",
                                        .status = "active",
                                        .active_pct = NAN,
                                        .why = xstrdup("virtio")};
    f->nnotes = 1;
    f->notes = xcalloc(1, sizeof(char *));
    f->notes[0] = xstrdup("a note\x1b");
    return f;
}

/* The output of a printer as a string (caller frees). Not inlined: gcc 12
 * then takes BUF, whose address open_memstream() keeps, for a dangling
 * pointer to the stack (-Wdangling-pointer), wrongly. */
__attribute__((noinline)) static char *capture(void (*print)(const struct top_frame *, FILE *,
                                                             size_t),
                                               const struct top_frame *f, size_t limit)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    assert_non_null(m);
    print(f, m, limit);
    fclose(m);
    return buf;
}

static size_t count(const char *s, const char *needle)
{
    size_t n = 0;
    for (const char *p = s; (p = strstr(p, needle)); p += strlen(needle))
        n++;
    return n;
}

/* Valid UTF-8 with no control character but line breaks (and, in JSON,
 * none at all: they are escaped). */
static void assert_clean(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        if (*p < 0x80) {
            assert_true(*p >= 0x20 || *p == '\n');
            assert_true(*p != 0x7f);
            p++;
            continue;
        }
        size_t n = *p >> 5 == 6 ? 2 : *p >> 4 == 14 ? 3 : *p >> 3 == 30 ? 4 : 0;
        assert_true(n > 0);
        for (size_t i = 1; i < n; i++)
            assert_int_equal(p[i] & 0xc0, 0x80);
        p += n;
    }
}

/* ---- printable ------------------------------------------------------------------ */

static void test_printable(void **state)
{
    char b[64];
    assert_int_equal(text_printable(b, sizeof(b), "plain", 5, 20, true), 5);
    assert_string_equal(b, "plain");
    text_printable(b, sizeof(b), "a\x1b[31mb\nc\td\x7f", 12, 20, true);
    assert_string_equal(b, "a?[31mb c d?");
    /* invalid UTF-8: one '?' per bad byte, then the valid rest */
    text_printable(b, sizeof(b), "x\xff\xc3(y\xc3\xa9", 7, 20, true);
    assert_string_equal(b, "x?"
                           "?(y\xc3\xa9");
    /* an overlong '/' and a surrogate are invalid too */
    text_printable(b, sizeof(b), "\xc0\xaf\xed\xa0\x80", 5, 20, true);
    assert_string_equal(b, "?????");
    /* UTF-8 kept; in ASCII one '?' per character */
    assert_int_equal(text_printable(b, sizeof(b), "Grüße", strlen("Grüße"), 20, true), 5);
    assert_string_equal(b, "Grüße");
    assert_int_equal(text_printable(b, sizeof(b), "Grüße", strlen("Grüße"), 20, false), 5);
    assert_string_equal(b, "Gr??e");
    /* a bidi override or C1 control would rearrange what follows */
    text_printable(b, sizeof(b),
                   "a\xe2\x80\xae"
                   "b\xc2\x9b"
                   "c",
                   8, 20, true);
    assert_string_equal(b, "a?b?c");
    /* wide characters count two columns */
    assert_int_equal(text_printable(b, sizeof(b), "日本語", strlen("日本語"), 20, true), 6);
    assert_int_equal(text_width("日本語x"), 7);
    assert_int_equal(text_width("e\xcc\x81"), 1); /* e + combining acute */
}

static void test_printable_cut(void **state)
{
    char b[64];
    /* cut to 6 columns: 5 of text and the mark */
    assert_int_equal(text_printable(b, sizeof(b), "abcdefghij", 10, 6, true), 6);
    assert_string_equal(b, "abcde\u2026");
    assert_int_equal(text_printable(b, sizeof(b), "abcdefghij", 10, 6, false), 6);
    assert_string_equal(b, "abcde>");
    /* exactly fitting text is not cut */
    assert_int_equal(text_printable(b, sizeof(b), "abcdef", 6, 6, true), 6);
    assert_string_equal(b, "abcdef");
    /* a wide character never straddles the cut */
    assert_int_equal(text_printable(b, sizeof(b), "日本語", strlen("日本語"), 5, true), 5);
    assert_string_equal(b, "日本\u2026");
    assert_int_equal(text_printable(b, sizeof(b), "日本語", strlen("日本語"), 4, true), 3);
    assert_string_equal(b, "日\u2026");
    /* a small buffer: never a partial UTF-8 sequence */
    char s[6];
    text_printable(s, sizeof(s), "ééééé", strlen("ééééé"), 80, true);
    assert_clean(s);
    assert_true(strlen(s) < sizeof(s));
    text_printable(s, sizeof(s), "abcdefgh", 8, 80, false);
    assert_string_equal(s, "abcd>");
    /* LEN bounds the source: no NUL needed */
    assert_int_equal(text_printable(b, sizeof(b), "abcdef", 3, 80, true), 3);
    assert_string_equal(b, "abc");
    assert_int_equal(text_printable(b, sizeof(b), NULL, 4, 80, true), 0);
    assert_string_equal(b, "");
}

/* ---- sorting --------------------------------------------------------------------- */

static void assert_pids(const struct top_frame *f, const int32_t *want, size_t n)
{
    assert_int_equal(f->nprocs, n);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(f->procs[i].pid, want[i]);
}

static void test_sort_procs(void **state)
{
    struct top_frame *f = frame_new();
    /* wake-ups 0, 500, 500, 80, 900, 10, 10: ties by pid */
    top_frame_sort(f, TOP_SORT_WAKEUPS);
    assert_pids(f, (const int32_t[]){30, 10, 20, 40, 50, 60, 300}, 7);
    /* power 12, 3, 1, 0.1, 0.1, NaN, NaN: NaN last, ties by wake-ups then pid */
    top_frame_sort(f, TOP_SORT_POWER);
    assert_pids(f, (const int32_t[]){20, 10, 40, 50, 60, 30, 300}, 7);
    top_frame_sort(f, TOP_SORT_CPU);
    assert_pids(f, (const int32_t[]){20, 10, 40, 30, 50, 60, 300}, 7);
    /* idle 100, 50, 10, 5, 5, NaN, NaN */
    top_frame_sort(f, TOP_SORT_IDLE_WAKEUPS);
    assert_pids(f, (const int32_t[]){20, 10, 30, 50, 60, 40, 300}, 7);
    /* not traced: every idle figure NaN, the order falls back to wake-ups */
    for (size_t i = 0; i < f->nprocs; i++)
        f->procs[i].idle_wakeups_s = NAN;
    top_frame_sort(f, TOP_SORT_IDLE_WAKEUPS);
    assert_pids(f, (const int32_t[]){30, 10, 20, 40, 50, 60, 300}, 7);
    /* the owned strings moved with their rows */
    assert_string_equal(f->procs[2].cmdline, long_cmd);
    top_frame_free(f);
}

static void test_sort_stable_many(void **state)
{
    /* enough rows for several merge passes; equal keys, distinct pids */
    struct top_frame *f = xcalloc(1, sizeof(*f));
    f->procs = xcalloc(1000, sizeof(*f->procs));
    for (int i = 0; i < 1000; i++) {
        struct top_proc *p = &f->procs[f->nprocs++];
        p->pid = 5000 - i * 3;
        p->wakeups_s = i % 7 == 0 ? NAN : (double)(i % 10);
        p->power_w = (double)(i % 3);
    }
    top_frame_sort(f, TOP_SORT_WAKEUPS);
    for (size_t i = 1; i < f->nprocs; i++) {
        const struct top_proc *a = &f->procs[i - 1], *b = &f->procs[i];
        if (isnan(a->wakeups_s)) {
            assert_true(isnan(b->wakeups_s));
            assert_true(a->pid < b->pid);
        } else if (!isnan(b->wakeups_s)) {
            assert_true(a->wakeups_s >= b->wakeups_s);
            if (a->wakeups_s == b->wakeups_s)
                assert_true(a->pid < b->pid);
        }
    }
    top_frame_free(f);
}

static void test_sort_cgroups_sources(void **state)
{
    struct top_frame *f = frame_new();
    top_frame_sort(f, TOP_SORT_WAKEUPS);
    assert_string_equal(f->cgroups[0].path, "/b");
    top_frame_sort(f, TOP_SORT_POWER); /* /b's power is NaN: last */
    assert_string_equal(f->cgroups[0].path, "/a");
    /* sources: by events, ties by kind (timer before other) */
    top_frame_sort(f, TOP_SORT_WAKEUPS);
    assert_string_equal(f->sources[0].name, "virtio0-input");
    assert_string_equal(f->sources[1].name, "tick");
    assert_string_equal(f->sources[2].name, "(other)");
    /* power and CPU do not apply: by events too */
    top_frame_sort(f, TOP_SORT_POWER);
    assert_string_equal(f->sources[0].name, "virtio0-input");
    top_frame_sort(f, TOP_SORT_IDLE_WAKEUPS);
    assert_string_equal(f->sources[0].name, "tick");
    assert_string_equal(f->sources[1].name, "virtio0-input");
    assert_string_equal(f->sources[2].name, "(other)");
    top_frame_free(f);
}

/* ---- JSON ------------------------------------------------------------------------- */

/* What Python's json module makes of it: the checks a consumer would do. */
static const char py_check[] =
    "import json, sys\n"
    "d = json.load(open(sys.argv[1], encoding='utf-8'))\n"
    "assert list(d)[:2] == ['schema', 'time'] and d['schema'] == 'watt-top/2', list(d)\n"
    "assert d['interval_s'] == 2, d\n"
    "assert d['time'] == '2023-11-14T22:13:20Z', d['time']\n"
    "assert d['host'] == {'hostname': 'node\\x01one', 'kernel': '6.1.0', 'cpus': 2,"
    " 'busy_cpus': 0.5}, d['host']\n"
    "w = d['wakeups']\n"
    "assert w['source'] == 'tracepoints' and w['why_not_traced'] is None, w\n"
    "assert w['total_per_s'] == 1234.5 and w['idle_per_s'] == 456 and w['lost_events'] == 3, w\n"
    "p = d['power']\n"
    "assert p['node_w'] == 41.5 and p['measured'] and p['source'] == 'rapl psys', p\n"
    "assert p['error_pct'] is None and p['processes_w'] == 20, p\n"
    "ps = d['processes']\n"
    "assert len(ps) == int(sys.argv[2]), len(ps)\n"
    "assert [x['pid'] for x in ps] == [30, 10, 20, 40, 50, 60, 300][:len(ps)], ps\n"
    "assert ps[0]['comm'] == 'Grüße' and ps[0]['power_w'] is None, ps[0]\n"
    "assert ps[0]['cmdline'] == 'Grüße 日本語 \\ufffd\\ufffd', ps[0]\n"
    "assert ps[1]['comm'] == 'evil\\x1b[2Jx' and ps[1]['cmdline'].endswith('\\ttab\\x7f'), ps[1]\n"
    "assert d['totals'] == {'processes': 7, 'cgroups': 2, 'sources': 3}, d['totals']\n"
    "assert len(d['cgroups']) == min(2, len(ps)) and len(d['sources']) == min(3, len(ps))\n"
    "s = d['sources'][0]\n"
    "assert s == {'kind': 'irq', 'irq': 24, 'name': 'virtio0-input', 'per_s': 100,"
    " 'idle_per_s': 1}, s\n"
    "c = d['cpus'][1]\n"
    "assert c['mhz'] is None and c['irqs_per_s'] is None and len(c['states']) == 2, c\n"
    "assert c['states'][1] == {'name': 'C6', 'residency_pct': 0, 'entries_per_s': 20,"
    " 'latency_us': 133, 'disabled': True}, c\n"
    "dv = d['devices'][0]\n"
    "assert dv['driver'] is None and dv['active_pct'] is None and dv['why'] == 'virtio', dv\n"
    "assert d['notes'] == ['a note\\x1b'], d['notes']\n";

static void check_json_with_python(const char *json, size_t nprocs)
{
    if (system("command -v python3 >/dev/null 2>&1") != 0) {
        print_message("# python3 not found: JSON checked by substrings only\n");
        return;
    }
    char path[] = "/tmp/test_top_out.XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, json, strlen(json)), (ssize_t)strlen(json));
    close(fd);
    char script[] = "/tmp/test_top_out_py.XXXXXX";
    fd = mkstemp(script);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, py_check, strlen(py_check)), (ssize_t)strlen(py_check));
    close(fd);
    char *cmd = xasprintf("python3 %s %s %zu", script, path, nprocs);
    int r = system(cmd);
    free(cmd);
    unlink(path);
    unlink(script);
    assert_int_equal(r, 0);
}

static void test_json(void **state)
{
    struct top_frame *f = frame_new();
    top_frame_sort(f, TOP_SORT_WAKEUPS);
    char *j = capture(top_print_json, f, 0);
    assert_clean(j);
    assert_non_null(strstr(j, "{\n  \"schema\": \"watt-top/2\",\n  \"time\": \""));
    assert_non_null(strstr(j, "\"comm\": \"evil\\u001b[2Jx\""));
    assert_non_null(strstr(j, "\"error_pct\": null"));
    assert_non_null(strstr(j, "\"idle_wakeups_per_s\": null"));
    assert_non_null(strstr(j, "\xef\xbf\xbd")); /* the invalid bytes as U+FFFD */
    assert_null(strstr(j, "nan"));
    assert_int_equal(count(j, "\"pid\""), 7);
    check_json_with_python(j, 7);
    free(j);
    /* the limit applies to processes, cgroups and sources only */
    j = capture(top_print_json, f, 2);
    assert_int_equal(count(j, "\"pid\""), 2);
    assert_int_equal(count(j, "\"path\""), 2);
    assert_int_equal(count(j, "\"per_s\""), 2);
    assert_int_equal(count(j, "\"busy_pct\""), 2);
    check_json_with_python(j, 2);
    free(j);
    top_frame_free(f);
}

static void test_json_untraced_empty(void **state)
{
    struct top_frame *f = xcalloc(1, sizeof(*f));
    f->why_not_traced = xstrdup("perf_event_open: EACCES");
    f->total_idle_wakeups_s = 5; /* ignored: not traced */
    f->node_w = NAN;
    f->busy_cpus = NAN;
    /* a frame without a time states the document's: now, or $WATT_TIME_NOW */
    setenv("WATT_TIME_NOW", "1796406600", 1);
    char *j = capture(top_print_json, f, 0);
    unsetenv("WATT_TIME_NOW");
    assert_non_null(strstr(j, "\"source\": \"proc\""));
    assert_non_null(strstr(j, "\"why_not_traced\": \"perf_event_open: EACCES\""));
    assert_non_null(strstr(j, "\"idle_per_s\": null"));
    assert_non_null(strstr(j, "\"time\": \"2026-12-04T17:50:00Z\""));
    assert_non_null(strstr(j, "\"hostname\": null"));
    assert_non_null(strstr(j, "\"processes\": []"));
    assert_non_null(strstr(j, "\"note\": null"));
    free(j);
    char *t = capture(top_print_text, f, 0);
    assert_clean(t);
    assert_non_null(strstr(t, "not traced: perf_event_open: EACCES"));
    assert_non_null(strstr(t, "Power     unknown"));
    assert_non_null(strstr(t, "Processes (0 processes):\n  none\n"));
    free(t);
    top_frame_free(f);
    top_frame_free(NULL);
}

/* ---- text ------------------------------------------------------------------------- */

static void test_text(void **state)
{
    struct top_frame *f = frame_new();
    top_frame_sort(f, TOP_SORT_WAKEUPS);
    char *t = capture(top_print_text, f, 0);
    assert_clean(t);
    assert_non_null(strstr(t, "watt top  node?one  6.1.0  2023-11-14T22:13:20Z  window 2.00 s\n"));
    assert_non_null(strstr(t, "Power     41.5 W measured (rapl psys)\n"));
    assert_non_null(strstr(
        t, "          idle floor 20.0 W, kernel 1.00 W, unaccounted 0.25 W, processes 20.0 W"));
    assert_non_null(strstr(t, "Wake-ups  1234/s, 456.0/s out of idle (tracepoints; 3 lost"));
    assert_non_null(strstr(t, "CPUs      0.50 of 2 busy\n"));
    /* names made printable, kernel threads bracketed, exits marked */
    assert_non_null(strstr(t, "evil?[2Jx arg tab?"));
    assert_non_null(strstr(t, "b?idi --x"));
    assert_non_null(strstr(t, "Grüße 日本語 ??"));
    assert_non_null(strstr(t, "[kworker/0:1]"));
    assert_non_null(strstr(t, "gone (exited)"));
    /* a long command line is cut at 80 columns */
    assert_null(strstr(t, "--serve"));
    assert_non_null(strstr(t, "\u2026\n"));
    /* the C-state summary: C6 mean of 60 and 0, disabled on one CPU; the grid says off */
    assert_non_null(strstr(t, "  C6         133       30.0       40.0       1 of 2\n"));
    assert_non_null(strstr(t, "off"));
    assert_non_null(strstr(t, "(virtio)"));
    assert_non_null(strstr(t, "  - a note?\n"));
    free(t);
    t = capture(top_print_text, f, 2);
    assert_non_null(strstr(t, "Processes (top 2 of 7 processes):"));
    assert_non_null(strstr(t, "Cgroups (2 cgroups):"));
    assert_non_null(strstr(t, "IRQs/timers/work (top 2 of 3 sources):"));
    assert_null(strstr(t, "kworker"));
    free(t);
    top_frame_free(f);
}

static size_t longest_line(const char *s)
{
    size_t max = 0;
    assert_non_null(s);
    for (size_t i = 0, n; s[i]; i += n + (s[i + n] == '\n')) {
        n = strcspn(s + i, "\n");
        max = n > max ? n : max;
    }
    return max;
}

static size_t count_of(const char *s, const char *needle)
{
    size_t k = 0;
    assert_non_null(s);
    for (const char *p = strstr(s, needle); p; p = strstr(p + 1, needle))
        k++;
    return k;
}

/* A note longer than a line is wrapped at 100 columns, every word kept. */
static void test_text_long_note(void **state)
{
    (void)state;
    struct top_frame *f = frame_new();
    free(f->notes[0]);
    struct strbuf long_note = {0};
    for (int i = 0; i < 60; i++)
        strbuf_appendf(&long_note, "word%02d ", i);
    strbuf_append(&long_note,
                  "a-very-long-path/that/does/not/fit/on/one/line/at/all/"
                  "0123456789012345678901234567890123456789012345678901234567890123456789");
    f->notes[0] = strbuf_steal(&long_note);
    snprintf(f->power_note, sizeof(f->power_note), "%s",
             "split by CPU time x GHz over every process active in the window, with the idle "
             "floor, the kernel's own share and what is left unaccounted shown apart: END");
    char *t = capture(top_print_text, f, 0);
    assert_non_null(strstr(t, "  - word00 word01"));
    assert_non_null(strstr(t, "word59"));
    assert_non_null(strstr(t, "0123456789\n")); /* the end of the long path is kept */
    assert_non_null(strstr(t, "unaccounted shown apart: END\n"));
    assert_non_null(strstr(t, "\n          split by CPU time"));
    assert_true(longest_line(strstr(t, "Notes:\n")) <= 100);
    size_t k = count_of(strstr(t, "  - word00"), "\n    "); /* continuation lines */
    assert_true(k >= 3);
    free(t);
    top_frame_free(f);
}

/* With a GPU: GPU% and GPU W before the command, gpu_ keys and gpus[] in
 * the JSON; without one (every other test's frame) none of them. */
static void test_gpu_columns(void **state)
{
    struct top_frame *f = frame_new();
    char *j = capture(top_print_json, f, 0);
    assert_null(strstr(j, "gpu"));
    free(j);
    j = capture(top_print_text, f, 0);
    assert_null(strstr(j, "GPU"));
    free(j);
    for (size_t i = 0; i < f->nprocs; i++)
        f->procs[i].gpu_busy_pct = f->procs[i].gpu_w = f->procs[i].gpu_j = NAN;
    for (size_t i = 0; i < f->ncgroups; i++)
        f->cgroups[i].gpu_busy_pct = f->cgroups[i].gpu_w = f->cgroups[i].gpu_j = NAN;
    f->procs[0].gpu_busy_pct = 85;
    f->procs[0].gpu_w = 196.35;
    f->procs[0].gpu_j = 392.7;
    f->ngpus = 1;
    f->gpus = xcalloc(1, sizeof(*f->gpus));
    f->gpus[0] = (struct top_gpu){.id = "card0",
                                  .pdev = "0000:03:00.0",
                                  .driver = "amdgpu",
                                  .via = "sysfs",
                                  .watts = 231,
                                  .util_pct = 91,
                                  .procs_busy_pct = 85,
                                  .procs_w = 196.35,
                                  .unattributed_w = 13.86,
                                  .idle_w = 20.79,
                                  .nprocs = 1};
    top_frame_sort(f, TOP_SORT_WAKEUPS);
    j = capture(top_print_json, f, 0);
    assert_non_null(strstr(j, "\"gpu_busy_pct\": 85"));
    assert_non_null(strstr(j, "\"gpu_w\": null"));
    assert_non_null(strstr(j, "\"unattributed_w\": 13.86"));
    assert_null(strstr(j, "nan"));
    assert_int_equal(count(j, "\"gpu_energy_j\""), f->nprocs + f->ncgroups);
    free(j);
    char *t = capture(top_print_text, f, 0);
    assert_non_null(strstr(t, "GPU%"));
    assert_non_null(strstr(t, "GPU W"));
    assert_non_null(strstr(t, "GPUs      card0 amdgpu 231.0 W: processes 196.3 W (85 % busy), "
                              "unattributed 13.9 W, idle 20.8 W\n"));
    free(t);
    struct top_col cols[TOP_MAX_COLS];
    assert_int_equal(top_view_cols(f, TOP_VIEW_PROCS, cols), 9);
    assert_string_equal(cols[6].head, "GPU%");
    assert_string_equal(cols[7].head, "GPU W");
    assert_true(cols[8].flex);
    char(*cells)[TOP_CELL] = xmalloc(TOP_MAX_COLS * TOP_CELL);
    for (size_t r = 0; r < f->nprocs; r++) {
        top_view_row(f, TOP_VIEW_PROCS, r, false, 20, cells);
        if (!isnan(f->procs[r].gpu_busy_pct)) {
            assert_string_equal(cells[6], "85.0");
        } else {
            assert_string_equal(cells[6], "-");
        }
        assert_true(cells[8][0] != '\0'); /* the command moved right */
    }
    assert_int_equal(top_view_cols(f, TOP_VIEW_CGROUPS, cols), 9);
    assert_int_equal(top_view_cols(f, TOP_VIEW_SOURCES, cols), 5); /* untouched */
    free(cells);
    top_frame_free(f);
}

static void test_view_rows(void **state)
{
    struct top_frame *f = frame_new();
    struct top_col cols[TOP_MAX_COLS];
    char(*cells)[TOP_CELL] = xmalloc(TOP_MAX_COLS * TOP_CELL);
    /* the grid has one column per state of the first CPU */
    assert_int_equal(top_view_cols(f, TOP_VIEW_CPUS, cols), 7);
    assert_string_equal(cols[5].head, "C1%");
    assert_string_equal(cols[6].head, "C6%");
    top_view_row(f, TOP_VIEW_CPUS, 1, true, 20, cells);
    assert_string_equal(cells[2], "-"); /* MHz unknown */
    assert_string_equal(cells[6], "off");
    /* the flex column takes the width it is given */
    top_view_row(f, TOP_VIEW_PROCS, 1, false, 10, cells);
    assert_string_equal(cells[0], "20");
    assert_string_equal(cells[6], "/usr/lib/>");
    assert_int_equal(top_view_nrows(f, TOP_VIEW_CSTATES), 2);
    /* past the end: empty cells */
    top_view_row(f, TOP_VIEW_DEVICES, 5, true, 10, cells);
    assert_string_equal(cells[0], "");
    free(cells);
    top_frame_free(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_printable),
        cmocka_unit_test(test_printable_cut),
        cmocka_unit_test(test_sort_procs),
        cmocka_unit_test(test_sort_stable_many),
        cmocka_unit_test(test_sort_cgroups_sources),
        cmocka_unit_test(test_json),
        cmocka_unit_test(test_json_untraced_empty),
        cmocka_unit_test(test_text),
        cmocka_unit_test(test_text_long_note),
        cmocka_unit_test(test_view_rows),
        cmocka_unit_test(test_gpu_columns),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
