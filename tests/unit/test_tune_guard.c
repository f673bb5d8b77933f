/* The latency guard: its state machine on synthetic time (exhaustively
 * against a run-length oracle), the workload parsers and probes on small
 * trees, and the holder in both modes on a recorded root. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* cmocka.h needs stdarg, stddef, stdint and setjmp first */
#include <cmocka.h>

#include "base/util.h"
#include "tree.h"
#include "tune/guard.h"
#include "tune/journal.h"
#include "tune/profile.h"

#define MS   1000000ull /* ns */
#define TICK (250 * MS)

/* ---- the state machine ---- */

static enum guard_action tick(struct guard_fsm *f, uint64_t t, bool busy)
{
    return guard_fsm_tick(f, t, busy);
}

static void test_fsm_hold_release(void **state)
{
    struct guard_fsm f;
    guard_fsm_init(&f, 0.5, 2);
    assert_int_equal(f.state, GUARD_IDLE);
    assert_int_equal(tick(&f, 0, false), GUARD_NONE); /* the first tick */
    assert_int_equal(tick(&f, TICK, true), GUARD_NONE);
    assert_int_equal(f.state, GUARD_ARMING); /* busy over (0, 250 ms] */
    assert_int_equal(tick(&f, 2 * TICK, true), GUARD_HOLD);
    assert_int_equal(f.state, GUARD_HELD); /* busy 500 ms without a break */
    assert_true(guard_fsm_holding(&f));
    assert_int_equal(f.transitions, 1);
    assert_int_equal(tick(&f, 3 * TICK, true), GUARD_NONE);
    /* idle: releasing, for 2 s of idle ticks */
    for (int k = 4; k < 11; k++) {
        assert_int_equal(tick(&f, (uint64_t)k * TICK, false), GUARD_NONE);
        assert_int_equal(f.state, GUARD_RELEASING);
        assert_true(guard_fsm_holding(&f));
    }
    assert_int_equal(tick(&f, 11 * TICK, false), GUARD_RELEASE); /* idle over (750 ms, 2.75 s] */
    assert_int_equal(f.state, GUARD_IDLE);
    assert_false(guard_fsm_holding(&f));
    assert_int_equal(f.transitions, 2);
    /* held from 500 ms to 2.75 s */
    assert_int_equal(f.held_ns, 2250 * MS);
    assert_int_equal(tick(&f, 12 * TICK, false), GUARD_NONE);
    assert_int_equal(f.held_ns, 2250 * MS);
    assert_string_equal(guard_state_name(GUARD_RELEASING), "releasing");
    assert_string_equal(guard_state_name((enum guard_state)9), "unknown");
}

/* A gap in the busy run starts the count again; a busy blip while
 * releasing keeps the hold and restarts the idle count. */
static void test_fsm_hysteresis(void **state)
{
    struct guard_fsm f;
    guard_fsm_init(&f, 1, 1);
    tick(&f, 0, false);
    tick(&f, 1 * TICK, true);
    tick(&f, 2 * TICK, true);
    tick(&f, 3 * TICK, true); /* 750 ms busy */
    assert_int_equal(tick(&f, 4 * TICK, false), GUARD_NONE);
    assert_int_equal(f.state, GUARD_IDLE);
    for (int k = 5; k < 8; k++)
        assert_int_equal(tick(&f, (uint64_t)k * TICK, true), GUARD_NONE);
    assert_int_equal(tick(&f, 8 * TICK, true), GUARD_HOLD); /* (1 s, 2 s] */
    tick(&f, 9 * TICK, false);
    tick(&f, 10 * TICK, false);
    tick(&f, 11 * TICK, false); /* 750 ms idle */
    assert_int_equal(tick(&f, 12 * TICK, true), GUARD_NONE);
    assert_int_equal(f.state, GUARD_HELD);
    for (int k = 13; k < 16; k++)
        assert_int_equal(tick(&f, (uint64_t)k * TICK, false), GUARD_NONE);
    assert_int_equal(tick(&f, 16 * TICK, false), GUARD_RELEASE);
    assert_int_equal(f.transitions, 2);
    assert_int_equal(f.held_ns, 2 * 1000 * MS);
}

/* Zero thresholds act on the first tick; the first tick ever has no
 * interval behind it, so its run starts at its own time. */
static void test_fsm_zero_and_first(void **state)
{
    struct guard_fsm f;
    guard_fsm_init(&f, 0, 0);
    assert_int_equal(tick(&f, 5 * TICK, true), GUARD_HOLD);
    assert_int_equal(tick(&f, 6 * TICK, true), GUARD_NONE);
    assert_int_equal(tick(&f, 7 * TICK, false), GUARD_RELEASE);
    assert_int_equal(f.held_ns, 2 * TICK);
    guard_fsm_init(&f, 0.25, 0);
    assert_int_equal(tick(&f, 100 * TICK, true), GUARD_NONE); /* run starts now */
    assert_int_equal(f.state, GUARD_ARMING);
    assert_int_equal(tick(&f, 101 * TICK, true), GUARD_HOLD);
    /* negative and absurd thresholds */
    guard_fsm_init(&f, -3, NAN);
    assert_int_equal(f.busy_after_ns, 0);
    assert_int_equal(f.idle_after_ns, 0);
    guard_fsm_init(&f, 1e30, 1e30);
    assert_true(f.busy_after_ns >= 1000000000ull * 1000000000ull);
}

/* Time going backwards counts as no time. */
static void test_fsm_backwards(void **state)
{
    struct guard_fsm f;
    guard_fsm_init(&f, 0.5, 0.5);
    tick(&f, 10 * TICK, false);
    tick(&f, 11 * TICK, true);
    assert_int_equal(tick(&f, 5 * TICK, true), GUARD_NONE); /* no time: 250 ms busy */
    assert_int_equal(f.state, GUARD_ARMING);
    assert_int_equal(tick(&f, 12 * TICK, true), GUARD_HOLD);
    assert_int_equal(tick(&f, 1 * TICK, false), GUARD_NONE);
    assert_int_equal(f.held_ns, 0);
    assert_int_equal(tick(&f, 14 * TICK, false), GUARD_RELEASE);
    assert_int_equal(f.held_ns, 2 * TICK);
}

/* Every busy/idle sequence of 14 ticks, for several thresholds, against
 * an oracle that counts run lengths in ticks. */
static void test_fsm_exhaustive(void **state)
{
    static const unsigned after[][2] = {{0, 0}, {1, 1}, {2, 3}, {3, 1}, {0, 4}, {5, 0}};
    const unsigned n = 14;
    unsigned long checked = 0;
    for (size_t a = 0; a < ARRAY_SIZE(after); a++) {
        unsigned busy_k = after[a][0], idle_k = after[a][1];
        for (unsigned seq = 0; seq < (1u << n); seq++) {
            struct guard_fsm f;
            guard_fsm_init(&f, busy_k * 0.25, idle_k * 0.25);
            bool held = false;
            unsigned run = 0, transitions = 0;
            uint64_t held_ns = 0;
            bool prev_busy = false;
            for (unsigned k = 0; k < n; k++) {
                bool busy = seq >> k & 1;
                /* the oracle: the current run's length in ticks; the first
                 * tick measures no interval, so it adds none */
                run = k == 0 ? 0 : busy == prev_busy ? run + 1 : 1;
                if (k > 0 && held)
                    held_ns += TICK;
                enum guard_action want = GUARD_NONE;
                if (!held && busy && run >= busy_k)
                    want = GUARD_HOLD;
                if (held && !busy && run >= idle_k)
                    want = GUARD_RELEASE;
                if (want == GUARD_HOLD) {
                    held = true;
                    transitions++;
                } else if (want == GUARD_RELEASE) {
                    held = false;
                    transitions++;
                }
                prev_busy = busy;
                enum guard_action got = tick(&f, (uint64_t)k * TICK, busy);
                if (got != want || guard_fsm_holding(&f) != held)
                    fail_msg("thresholds %u/%u ticks, sequence %#x, tick %u: got %d want %d",
                             busy_k, idle_k, seq, k, got, want);
                checked++;
            }
            assert_int_equal(f.transitions, transitions);
            assert_int_equal(f.held_ns, held_ns);
        }
    }
    print_message("# %lu ticks checked against the oracle\n", checked);
}

/* ---- workloads and parsers ---- */

static void test_workload_parse(void **state)
{
    struct guard_workload w;
    char *err = NULL;
    assert_int_equal(guard_workload_parse("port:6379", &w, &err), 0);
    assert_int_equal(w.kind, GUARD_WL_PORT);
    assert_int_equal(w.port, 6379);
    assert_string_equal(w.spec, "port:6379");
    guard_workload_clear(&w);
    assert_int_equal(guard_workload_parse("cgroup:/system.slice/redis.service/", &w, &err), 0);
    assert_int_equal(w.kind, GUARD_WL_CGROUP);
    assert_string_equal(w.name, "system.slice/redis.service");
    guard_workload_clear(&w);
    assert_int_equal(guard_workload_parse("cgroup:/", &w, &err), 0);
    assert_string_equal(w.name, "");
    guard_workload_clear(&w);
    assert_int_equal(guard_workload_parse("process:watt-guard-busy", &w, &err), 0);
    assert_int_equal(w.kind, GUARD_WL_PROCESS);
    assert_string_equal(w.name, "watt-guard-busy");
    guard_workload_clear(&w);

    static const char *const bad[] = {
        "port:0",        "port:65536", "port:-1",     "port:80x",
        "port:",         "process:",   "process:a/b", "process:0123456789abcdef",
        "cgroup:a/../b", "cgroup:..",  "cgroup:./x",  "redis",
        "pid:4",         "",
    };
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        err = NULL;
        w.spec = (char *)"untouched";
        assert_int_equal(guard_workload_parse(bad[i], &w, &err), -EINVAL);
        assert_non_null(err);
        assert_non_null(strstr(err, "workload"));
        assert_string_equal(w.spec, "untouched");
        free(err);
    }
}

static void test_parse_cpu_stat(void **state)
{
    uint64_t us = 7;
    assert_int_equal(guard_parse_cpu_stat("usage_usec 123456\nuser_usec 1\n", &us), 0);
    assert_int_equal(us, 123456);
    assert_int_equal(guard_parse_cpu_stat("user_usec 1\nusage_usec 99", &us), 0);
    assert_int_equal(us, 99);
    us = 7;
    assert_int_equal(guard_parse_cpu_stat("user_usec 1\n", &us), -EINVAL);
    assert_int_equal(guard_parse_cpu_stat("usage_usec -1\n", &us), -EINVAL);
    assert_int_equal(guard_parse_cpu_stat("usage_usec 12x\n", &us), -EINVAL);
    assert_int_equal(guard_parse_cpu_stat("", &us), -EINVAL);
    assert_int_equal(us, 7);
}

static int pid_stat(const char *text, char **comm, uint64_t *ticks, uint64_t *start)
{
    return guard_parse_pid_stat(text, strlen(text), comm, ticks, start);
}

static void test_parse_pid_stat(void **state)
{
    char *comm;
    uint64_t ticks, start;
    /* a comm with spaces and ')' in it: everything up to the last ')' */
    assert_int_equal(pid_stat("4242 (my (odd) name) R 1 4242 4242 0 -1 4194560 100 0 0 0 "
                              "1500 250 0 0 20 0 1 0 98765 1000 10\n",
                              &comm, &ticks, &start),
                     0);
    assert_string_equal(comm, "my (odd) name");
    assert_int_equal(ticks, 1750);
    assert_int_equal(start, 98765);
    free(comm);
    assert_int_equal(
        pid_stat("1 () S 0 1 1 0 -1 0 0 0 0 0 3 4 0 0 20 0 1 0 5", &comm, &ticks, &start), 0);
    assert_string_equal(comm, "");
    assert_int_equal(ticks, 7);
    free(comm);
    comm = NULL;
    static const char *const bad[] = {
        "",
        "4242 no parens R 1",
        "4242 (x) R 1 2 3",                                      /* truncated */
        "4242 (x) R 1 4242 4242 0 -1 4194560 100 0 0 0 15x 250", /* garbage */
        "4242 (x) R 1 4242 4242 0 -1 4194560 100 0 0 0 18446744073709551615 1 0 0 20 0 1 0 5",
        "4242 )x( R 1 4242 4242 0 -1 4194560 100 0 0 0 1 1 0 0 20 0 1 0 5",
    };
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
        assert_int_equal(pid_stat(bad[i], &comm, &ticks, &start), -EINVAL);
    assert_null(comm);
}

static const char TCP4[] =
    "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  "
    "timeout inode\n"
    "   0: 0100007F:18EB 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0 0 1\n"
    "   1: 0100007F:18EB 0100007F:C350 01 00000000:00000000 00:00000000 00000000     0 0 2\n"
    "   2: 0100007F:18EB 0100007F:C351 01 00000000:00000000 00:00000000 00000000     0 0 3\n"
    "   3: 0100007F:18EB 0100007F:C352 06 00000000:00000000 00:00000000 00000000     0 0 4\n"
    "   4: 0100007F:C350 0100007F:18EB 01 00000000:00000000 00:00000000 00000000     0 0 5\n"
    "   5: garbage\n"
    "   6: 0100007F:18EB\n";
static const char TCP6[] =
    "  sl  local_address                         remote_address                        st\n"
    "   0: 00000000000000000000000001000000:18EB 00000000000000000000000001000000:D000 01 0\n";

static void test_parse_net_tcp(void **state)
{
    unsigned est = 0;
    bool listening = false;
    guard_parse_net_tcp(TCP4, 6379, &est, &listening); /* 0x18EB */
    assert_int_equal(est, 2);                          /* TIME_WAIT (06) and the peer's side not */
    assert_true(listening);
    guard_parse_net_tcp(TCP6, 6379, &est, &listening);
    assert_int_equal(est, 3);
    est = 0;
    listening = false;
    guard_parse_net_tcp(TCP4, 50000, &est, &listening); /* the client's port 0xC350 */
    assert_int_equal(est, 1);
    assert_false(listening);
    est = 0;
    guard_parse_net_tcp("", 1, &est, &listening);
    guard_parse_net_tcp("\n\n 0: :18EB x 01\n", 6379, &est, &listening);
    assert_int_equal(est, 0);
}

static void test_parse_sockstat(void **state)
{
    assert_int_equal(guard_parse_sockstat_inuse("sockets: used 11\nTCP: inuse 5 orphan 0 tw 20 "
                                                "alloc 1 mem 99\nUDP: inuse 0 mem 0\n",
                                                "TCP"),
                     5);
    assert_int_equal(guard_parse_sockstat_inuse("TCP6: inuse 0\nUDP6: inuse 7\n", "TCP6"), 0);
    assert_int_equal(guard_parse_sockstat_inuse("TCP6: inuse 0\n", "TCP"), -1);
    assert_int_equal(guard_parse_sockstat_inuse("TCP: inuse x\n", "TCP"), -1);
    assert_int_equal(guard_parse_sockstat_inuse("TCP: inuse -4\n", "TCP"), -1);
    assert_int_equal(guard_parse_sockstat_inuse("", "TCP"), -1);
}

/* ---- probes on a tree ---- */

static void write_stat(const char *root, int pid, const char *comm, unsigned ticks, unsigned start)
{
    char rel[64];
    snprintf(rel, sizeof(rel), "proc/%d/stat", pid);
    tree_write(root, rel, "%d (%s) S 1 1 1 0 -1 0 0 0 0 0 %u 0 0 0 20 0 1 0 %u 0 0\n", pid, comm,
               ticks, start);
}

static struct host *open_root(const char *root)
{
    struct host *h;
    assert_int_equal(host_open(root, &h), 0);
    return h;
}

static void test_probe_cgroup(void **state)
{
    char *root = tree_new();
    tree_write(root, "sys/fs/cgroup/unified/web.slice/cpu.stat", "usage_usec 1000\n");
    tree_write(root, "sys/fs/cgroup/cpuacct/db/cpuacct.usage", "5000000\n");
    struct host *h = open_root(root);
    struct guard_workload w;
    char *err;
    struct guard_reading r;
    struct guard_probe p;

    assert_int_equal(guard_workload_parse("cgroup:web.slice", &w, &err), 0);
    guard_probe_init(&p, &w);
    assert_int_equal(guard_probe_read(h, &p, &r), 0);
    assert_true(r.present);
    assert_false(r.have_cpu); /* one reading: no delta yet */
    assert_string_equal(r.source, "cgroup v2 cpu.stat");
    tree_write(root, "sys/fs/cgroup/unified/web.slice/cpu.stat", "usage_usec 251000\n");
    assert_int_equal(guard_probe_read(h, &p, &r), 0);
    assert_true(r.have_cpu);
    assert_int_equal(r.cpu_ns, 250 * MS);
    guard_probe_clear(&p);
    guard_workload_clear(&w);

    assert_int_equal(guard_workload_parse("cgroup:/db", &w, &err), 0);
    guard_probe_init(&p, &w);
    assert_int_equal(guard_probe_read(h, &p, &r), 0);
    tree_write(root, "sys/fs/cgroup/cpuacct/db/cpuacct.usage", "7000000\n");
    assert_int_equal(guard_probe_read(h, &p, &r), 0);
    assert_string_equal(r.source, "cgroup v1 cpuacct.usage");
    assert_int_equal(r.cpu_ns, 2 * MS);
    guard_probe_clear(&p);
    guard_workload_clear(&w);

    assert_int_equal(guard_workload_parse("cgroup:gone", &w, &err), 0);
    guard_probe_init(&p, &w);
    assert_int_equal(guard_probe_read(h, &p, &r), 0);
    assert_false(r.present);
    assert_false(r.have_cpu);
    guard_probe_clear(&p);
    guard_workload_clear(&w);
    host_close(h);
    tree_free(root);
}

static void test_probe_process(void **state)
{
    char *root = tree_new();
    write_stat(root, 100, "busy", 1000, 50);
    write_stat(root, 200, "other", 5000, 60);
    write_stat(root, 300, "busy", 10, 70);
    tree_write(root, "proc/self/stat", "not a pid\n");
    struct host *h = open_root(root);
    struct guard_workload w;
    char *err;
    struct guard_reading r;
    struct guard_probe p;
    assert_int_equal(guard_workload_parse("process:busy", &w, &err), 0);
    guard_probe_init(&p, &w);
    p.clk_tck = 100;
    assert_int_equal(guard_probe_read(h, &p, &r), 0);
    assert_true(r.present);
    assert_int_equal(r.nprocs, 2);
    assert_false(r.have_cpu);
    write_stat(root, 100, "busy", 1020, 50);
    write_stat(root, 200, "other", 9000, 60);
    write_stat(root, 300, "busy", 15, 70);
    write_stat(root, 400, "busy", 800, 80); /* new: adds nothing yet */
    assert_int_equal(guard_probe_read(h, &p, &r), 0);
    assert_true(r.have_cpu);
    assert_int_equal(r.nprocs, 3);
    assert_int_equal(r.cpu_ns, 250 * MS); /* 25 ticks of 10 ms */
    /* 100 exits and its pid is reused by a new "busy": no time from it */
    write_stat(root, 100, "busy", 3000, 90);
    write_stat(root, 400, "busy", 810, 80);
    assert_int_equal(guard_probe_read(h, &p, &r), 0);
    assert_int_equal(r.cpu_ns, 100 * MS);
    /* every "busy" gone */
    tree_free(root);
    root = tree_new();
    host_close(h);
    tree_write(root, "proc/1/stat", "1 (init) S 0 1 1 0 -1 0 0 0 0 0 3 4 0 0 20 0 1 0 5\n");
    h = open_root(root);
    assert_int_equal(guard_probe_read(h, &p, &r), 0);
    assert_false(r.present);
    assert_int_equal(r.nprocs, 0);
    guard_probe_clear(&p);
    guard_workload_clear(&w);
    host_close(h);
    tree_free(root);
}

/* Between full scans only new processes and those with the name are
 * read: one that takes the name by exec() under its old pid is found at
 * the next full scan, a new one at once. */
static void test_probe_process_rescan(void **state)
{
    char *root = tree_new();
    write_stat(root, 10, "bash", 0, 5);
    struct host *h = open_root(root);
    struct guard_workload w;
    char *err;
    struct guard_reading r;
    struct guard_probe p;
    assert_int_equal(guard_workload_parse("process:busy", &w, &err), 0);
    guard_probe_init(&p, &w);
    p.clk_tck = 100;
    assert_int_equal(guard_probe_read(h, &p, &r), 0); /* probe 1: a full scan */
    assert_int_equal(r.nprocs, 0);
    write_stat(root, 10, "busy", 0, 5); /* exec: same pid, same start */
    assert_int_equal(guard_probe_read(h, &p, &r), 0);
    assert_int_equal(r.nprocs, 0); /* not read again yet */
    write_stat(root, 20, "busy", 0, 9);
    assert_int_equal(guard_probe_read(h, &p, &r), 0);
    assert_int_equal(r.nprocs, 1); /* new: read at once */
    for (unsigned k = 4; k <= GUARD_PROCESS_RESCAN; k++) {
        assert_int_equal(guard_probe_read(h, &p, &r), 0);
        assert_int_equal(r.nprocs, 1);
    }
    write_stat(root, 10, "busy", 30, 5);
    assert_int_equal(guard_probe_read(h, &p, &r), 0); /* the next full scan */
    assert_int_equal(r.nprocs, 2);
    assert_int_equal(r.cpu_ns, 0); /* seen with the name for the first time */
    write_stat(root, 10, "busy", 55, 5);
    assert_int_equal(guard_probe_read(h, &p, &r), 0);
    assert_int_equal(r.cpu_ns, 250 * MS);
    guard_probe_clear(&p);
    guard_workload_clear(&w);
    host_close(h);
    tree_free(root);
}

static void test_probe_port(void **state)
{
    char *root = tree_new();
    tree_write(root, "proc/net/tcp", "%s", TCP4);
    struct host *h = open_root(root);
    struct guard_workload w;
    char *err;
    struct guard_reading r;
    struct guard_probe p;
    assert_int_equal(guard_workload_parse("port:6379", &w, &err), 0);
    guard_probe_init(&p, &w);
    assert_int_equal(guard_probe_read(h, &p, &r), 0); /* no tcp6: fine */
    assert_true(r.present);
    assert_true(r.listening);
    assert_int_equal(r.connections, 2);
    /* a recorded tree has no kernel to ask: the text tables, quietly */
    assert_string_equal(r.source, "net/tcp text");
    assert_int_equal(p.nl_err, -ENOTSUP);
    assert_int_equal(p.nl_fd, -1);
    tree_write(root, "proc/net/tcp6", "%s", TCP6);
    assert_int_equal(guard_probe_read(h, &p, &r), 0);
    assert_int_equal(r.connections, 3);
    /* a table that sockstat says is empty is not read (each read walks
     * the kernel's whole hash table) */
    tree_write(root, "proc/net/sockstat6", "TCP6: inuse 0\nUDP6: inuse 0\n");
    assert_int_equal(guard_probe_read(h, &p, &r), 0);
    assert_int_equal(r.connections, 2);
    tree_write(root, "proc/net/sockstat6", "TCP6: inuse 3\n");
    assert_int_equal(guard_probe_read(h, &p, &r), 0);
    assert_int_equal(r.connections, 3);
    guard_probe_clear(&p);
    guard_workload_clear(&w);
    assert_int_equal(guard_workload_parse("port:80", &w, &err), 0);
    guard_probe_init(&p, &w);
    assert_int_equal(guard_probe_read(h, &p, &r), 0);
    assert_false(r.present);
    guard_probe_clear(&p);
    guard_workload_clear(&w);
    host_close(h);
    tree_free(root);
}

/* ---- port: netlink and the text tables on the running kernel ---- */

/* A listener on loopback, an ephemeral port; -errno when the family is
 * missing here. */
static int listen_loopback(int family, unsigned *ret_port)
{
    int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    struct sockaddr_storage ss = {0};
    socklen_t len;
    if (family == AF_INET) {
        struct sockaddr_in *a = (struct sockaddr_in *)&ss;
        a->sin_family = AF_INET;
        a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        len = sizeof(*a);
    } else {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
        a->sin6_family = AF_INET6;
        a->sin6_addr = in6addr_loopback;
        len = sizeof(*a);
    }
    if (bind(fd, (struct sockaddr *)&ss, len) < 0 || listen(fd, 128) < 0 ||
        getsockname(fd, (struct sockaddr *)&ss, &len) < 0) {
        int err = -errno;
        close(fd);
        return err;
    }
    *ret_port = ntohs(family == AF_INET ? ((struct sockaddr_in *)&ss)->sin_port
                                        : ((struct sockaddr_in6 *)&ss)->sin6_port);
    return fd;
}

/* N more connections to the listener LFD, both ends kept in FDS (2 each):
 * accept() returning means the server's end is ESTABLISHED in the table. */
static void connect_more(int lfd, unsigned n, int *fds, unsigned *nfds)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);
    assert_int_equal(getsockname(lfd, (struct sockaddr *)&ss, &len), 0);
    for (unsigned i = 0; i < n; i++) {
        int c = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        assert_true(c >= 0);
        assert_int_equal(connect(c, (struct sockaddr *)&ss, len), 0);
        int a = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        assert_true(a >= 0);
        fds[(*nfds)++] = c;
        fds[(*nfds)++] = a;
    }
}

static void close_all(int *fds, unsigned *nfds)
{
    for (unsigned i = 0; i < *nfds; i++)
        close(fds[i]);
    *nfds = 0;
}

/* One probe of PORT, forced to the text tables with TEXT; whether it
 * asked netlink (false: refused here, or TEXT). */
static bool probe_once(struct host *h, unsigned port, bool text, bool range, unsigned *ret_conns,
                       bool *ret_listening)
{
    char spec[16];
    snprintf(spec, sizeof(spec), "port:%u", port);
    struct guard_workload w;
    char *err;
    struct guard_probe p;
    struct guard_reading r;
    assert_int_equal(guard_workload_parse(spec, &w, &err), 0);
    guard_probe_init(&p, &w);
    if (text)
        p.nl_err = -ENOTSUP;
    p.nl_range = range;
    assert_int_equal(guard_probe_read(h, &p, &r), 0);
    bool netlink = streq(r.source, "sock_diag netlink");
    if (!text && !netlink)
        print_message("# netlink refused here: %s\n", r.source);
    if (netlink) /* the kernel's filter: the clients' ends are not sent */
        assert_int_equal(p.nl_msgs, r.connections + r.listening);
    assert_true(text ? strncmp(r.source, "net/tcp text", 12) == 0 : true);
    *ret_conns = r.connections;
    *ret_listening = r.listening;
    guard_probe_clear(&p);
    guard_workload_clear(&w);
    return netlink;
}

/* A query that fails (here: the socket swapped for a UDP one, which
 * refuses a netlink address) falls back to the text tables for that tick
 * with the same count, and netlink is opened again on the next; after
 * three failures in a row the text tables are read for good. */
static void check_query_failures(struct host *h, struct guard_probe *p, unsigned conns)
{
    struct guard_reading r;
    for (unsigned i = 1; i <= 3; i++) {
        int udp = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        assert_true(udp >= 0);
        assert_true(dup2(udp, p->nl_fd) == p->nl_fd);
        close(udp);
        assert_int_equal(guard_probe_read(h, p, &r), 0);
        assert_int_equal(r.connections, conns);
        assert_non_null(strstr(r.source, "net/tcp text (sock_diag query: "));
        assert_int_equal(p->nl_fails, i);
        assert_int_equal(p->nl_fd, -1);
        if (i == 3)
            break;
        assert_int_equal(guard_probe_read(h, p, &r), 0); /* opened again */
        assert_string_equal(r.source, "sock_diag netlink");
        assert_int_equal(r.connections, conns);
        assert_true(p->nl_fd >= 0);
        p->nl_fails = i; /* a success clears it; keep counting for the test */
    }
    assert_true(p->nl_err < 0);
    assert_false(p->nl_range); /* the socket's error, not the kernel refusing S_EQ */
    assert_int_equal(guard_probe_read(h, p, &r), 0);
    print_message("# after three failures: %s\n", r.source);
    assert_non_null(strstr(r.source, "net/tcp text (sock_diag: "));
    assert_int_equal(p->nl_fd, -1);
}

/* Netlink's count (both filters) is the text tables' count, k = 0, 1, 50. */
static void check_counts(struct host *h, unsigned port, unsigned k, bool *ret_netlink)
{
    unsigned conns;
    bool listening;
    probe_once(h, port, true, false, &conns, &listening);
    assert_int_equal(conns, k);
    assert_true(listening);
    *ret_netlink = probe_once(h, port, false, false, &conns, &listening);
    if (!*ret_netlink)
        return;
    assert_int_equal(conns, k);
    assert_true(listening);
    assert_true(probe_once(h, port, false, true, &conns, &listening)); /* S_GE + S_LE */
    assert_int_equal(conns, k);
    assert_true(listening);
}

static void test_probe_port_live(void **state)
{
    struct host *h = open_root("/");
    if (!h->live) {
        host_close(h);
        skip();
    }
    unsigned port;
    int lfd = listen_loopback(AF_INET, &port);
    assert_true(lfd >= 0);
    int fds[2 * 60];
    unsigned nfds = 0;
    bool netlink = false;
    static const unsigned ks[] = {0, 1, 50};
    for (size_t i = 0; i < ARRAY_SIZE(ks); i++) {
        connect_more(lfd, ks[i] - nfds / 2, fds, &nfds);
        check_counts(h, port, ks[i], &netlink);
        print_message("# k = %u: %s\n", ks[i], netlink ? "netlink == text" : "text only");
    }

    /* one probe, one socket kept over ticks; the connections going away */
    char spec[16];
    snprintf(spec, sizeof(spec), "port:%u", port);
    struct guard_workload w;
    char *err;
    struct guard_probe p;
    struct guard_reading r;
    assert_int_equal(guard_workload_parse(spec, &w, &err), 0);
    guard_probe_init(&p, &w);
    assert_int_equal(guard_probe_read(h, &p, &r), 0);
    assert_int_equal(r.connections, 50);
    int nl_fd = p.nl_fd;
    if (netlink) {
        assert_true(nl_fd >= 0);
        assert_true(fcntl(nl_fd, F_GETFD) & FD_CLOEXEC);
    }
    close_all(fds, &nfds);
    assert_int_equal(guard_probe_read(h, &p, &r), 0);
    assert_int_equal(r.connections, 0);
    assert_true(r.present); /* still listening */
    assert_int_equal(p.nl_fd, nl_fd);
    if (netlink)
        check_query_failures(h, &p, 0);
    close(lfd);
    assert_int_equal(guard_probe_read(h, &p, &r), 0);
    assert_false(r.present);
    guard_probe_clear(&p);
    assert_int_equal(p.nl_fd, -1);
    guard_workload_clear(&w);

    /* IPv6, where this machine has it: the AF_INET6 dump */
    lfd = listen_loopback(AF_INET6, &port);
    if (lfd >= 0) {
        connect_more(lfd, 3, fds, &nfds);
        check_counts(h, port, 3, &netlink);
        close_all(fds, &nfds);
        close(lfd);
    } else {
        print_message("# no IPv6 loopback here: %s\n", strerror(-lfd));
    }
    host_close(h);
    if (!netlink)
        skip(); /* the text parser was checked; netlink was refused */
}

/* ---- the [latency] section ---- */

static struct profile *parse(const char *text)
{
    struct profile *p = NULL;
    char **inc = NULL, *err = NULL;
    size_t ninc = 0;
    if (profile_parse_text(text, "g.conf", &p, &inc, &ninc, &err) < 0)
        fail_msg("profile: %s", err);
    for (size_t i = 0; i < ninc; i++)
        free(inc[i]);
    free(inc);
    if (!p->name)
        p->name = strdup("g");
    return p;
}

static void test_config_from_profile(void **state)
{
    char *root = tree_new();
    tree_write(root, "sys/devices/system/cpu/online", "0-3\n");
    struct host *h = open_root(root);
    struct guard_config c;
    char *err = NULL;

    struct profile *p = parse("[latency]\nworkload = port:6379\nlatency_us = 20\ncpus = 2-3\n"
                              "busy_connections = 4\nbusy_after_s = 0.5\nidle_after_s = 30\n"
                              "busy_cpu_pct = 150\n");
    assert_int_equal(guard_config_from_profile(h, p, &c, &err), 0);
    assert_int_equal(c.workload.kind, GUARD_WL_PORT);
    assert_int_equal(c.latency_us, 20);
    assert_int_equal(cpuset_count(&c.cpus), 2);
    assert_true(cpuset_has(&c.cpus, 3));
    assert_int_equal(c.busy_connections, 4);
    assert_true(c.busy_after_s == 0.5 && c.idle_after_s == 30 && c.busy_cpu_pct == 150);
    guard_config_clear(&c);
    profile_free(p);

    /* defaults: 0 µs, the global limit, 10 % of a CPU, 1 s / 10 s */
    p = parse("[latency]\nworkload = process:redis-server\n");
    assert_int_equal(guard_config_from_profile(h, p, &c, &err), 0);
    assert_int_equal(c.latency_us, 0);
    assert_int_equal(cpuset_count(&c.cpus), 0);
    assert_true(c.busy_cpu_pct == GUARD_DEFAULT_BUSY_CPU_PCT);
    assert_true(c.busy_after_s == GUARD_DEFAULT_BUSY_AFTER_S);
    assert_true(c.idle_after_s == GUARD_DEFAULT_IDLE_AFTER_S);
    guard_config_clear(&c);
    profile_free(p);

    p = parse("[latency]\nworkload = cgroup:/db\ncpus = all\n");
    assert_int_equal(guard_config_from_profile(h, p, &c, &err), 0);
    assert_int_equal(cpuset_count(&c.cpus), 4);
    guard_config_clear(&c);
    profile_free(p);

    p = parse("[kernel]\nnmi_watchdog = 0\n");
    assert_int_equal(guard_config_from_profile(h, p, &c, &err), -ENOENT);
    profile_free(p);
    p = parse("[latency]\nlatency_us = 5\n");
    assert_int_equal(guard_config_from_profile(h, p, &c, &err), -EINVAL);
    print_message("# %s\n", err);
    assert_non_null(strstr(err, "workload"));
    free(err);
    profile_free(p);
    host_close(h);
    tree_free(root);
}

/* ---- the guard on a recorded root ---- */

static int32_t read_global(const char *root)
{
    char path[4200];
    snprintf(path, sizeof(path), "%s/dev/cpu_dma_latency", root);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    int32_t v = -1;
    assert_int_equal(fread(&v, 1, 4, f), 4);
    fclose(f);
    return v;
}

static char *make_root(void)
{
    char *root = tree_new();
    int32_t def = GUARD_LATENCY_DEFAULT_VALUE;
    char path[4200];
    tree_write(root, "dev/cpu_dma_latency", "");
    snprintf(path, sizeof(path), "%s/dev/cpu_dma_latency", root);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(&def, 1, 4, f), 4);
    fclose(f);
    tree_write(root, "sys/devices/system/cpu/online", "0-1\n");
    for (int cpu = 0; cpu < 2; cpu++) {
        char rel[128];
        snprintf(rel, sizeof(rel), "sys/devices/system/cpu/cpu%d/power/pm_qos_resume_latency_us",
                 cpu);
        tree_write(root, rel, "0\n");
    }
    write_stat(root, 100, "busy", 0, 50);
    return root;
}

static void config(struct guard_config *c, const char *cpus)
{
    char *err;
    *c = (struct guard_config){
        .latency_us = 0,
        .busy_cpu_pct = 10,
        .busy_connections = 1,
        .busy_after_s = 0.5,
        .idle_after_s = 1,
    };
    assert_int_equal(guard_workload_parse("process:busy", &c->workload, &err), 0);
    if (cpus)
        assert_int_equal(cpuset_parse(cpus, &c->cpus), 0);
}

/* Burn PCT % of one CPU for one tick; *ticks accumulates. */
static int run(struct guard *g, const char *root, unsigned *ticks, uint64_t *t, unsigned pct)
{
    *ticks += pct / 4; /* 250 ms = 25 clock ticks at 100 Hz */
    write_stat(root, 100, "busy", *ticks, 50);
    *t += TICK;
    char *msg = NULL;
    int r = guard_tick(g, *t, &msg);
    if (msg)
        print_message("# %s\n", msg);
    free(msg);
    return r;
}

static void test_guard_global(void **state)
{
    char *root = make_root();
    struct host *h = open_root(root);
    struct guard_config c;
    config(&c, NULL);
    struct guard *g;
    assert_int_equal(guard_new(h, &c, NULL, &g), 0);
    guard_config_clear(&c);
    unsigned ticks = 0;
    uint64_t t = 0;
    struct guard_status st;

    assert_int_equal(run(g, root, &ticks, &t, 0), 0);
    guard_get_status(g, t, &st);
    assert_false(st.measured);
    assert_int_equal(run(g, root, &ticks, &t, 4), 0); /* 4 %: idle */
    guard_get_status(g, t, &st);
    assert_true(st.measured);
    assert_true(st.present);
    assert_false(st.busy);
    assert_true(fabs(st.cpu_ratio - 0.04) < 1e-9);
    assert_int_equal(run(g, root, &ticks, &t, 40), 0);
    assert_int_equal(run(g, root, &ticks, &t, 40), 1); /* 500 ms busy: held */
    assert_int_equal(read_global(root), 0);
    guard_get_status(g, t, &st);
    assert_true(st.held);
    assert_int_equal(st.state, GUARD_HELD);
    assert_string_equal(st.mode, "global");
    assert_int_equal(st.target_us, 0);
    assert_int_equal(st.transitions, 1);
    for (int k = 0; k < 4; k++)
        assert_int_equal(run(g, root, &ticks, &t, 0), k == 3 ? 1 : 0);
    assert_int_equal(read_global(root), GUARD_LATENCY_DEFAULT_VALUE);
    guard_get_status(g, t, &st);
    assert_false(st.held);
    assert_int_equal(st.transitions, 2);
    assert_true(fabs(st.held_s - 1.0) < 1e-9); /* from 1 s to 2 s */
    assert_null(st.note);

    /* the process goes away: idle, and the status says why */
    char path[4200];
    snprintf(path, sizeof(path), "rm -rf %s/proc/100", root);
    assert_int_equal(system(path), 0);
    t += TICK;
    assert_int_equal(guard_tick(g, t, NULL), 0);
    guard_get_status(g, t, &st);
    assert_false(st.present);
    assert_non_null(strstr(st.note, "no such process"));

    /* freeing while held lets go */
    write_stat(root, 100, "busy", 0, 50);
    for (int k = 0; k < 4; k++)
        run(g, root, &ticks, &t, 90);
    assert_int_equal(read_global(root), 0);
    guard_free(g);
    assert_int_equal(read_global(root), GUARD_LATENCY_DEFAULT_VALUE);
    host_close(h);
    tree_free(root);
}

static char *slurp(const char *root, const char *rel)
{
    char path[4200];
    snprintf(path, sizeof(path), "%s/%s", root, rel);
    FILE *f = fopen(path, "r");
    if (!f)
        return strdup("(missing)");
    char buf[256];
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    return strdup(buf);
}

#define RESUME0 "sys/devices/system/cpu/cpu0/power/pm_qos_resume_latency_us"
#define RESUME1 "sys/devices/system/cpu/cpu1/power/pm_qos_resume_latency_us"

static void assert_file(const char *root, const char *rel, const char *want)
{
    char *got = slurp(root, rel);
    assert_string_equal(got, want);
    free(got);
}

/* Per-CPU mode goes through the journal with owner "guard"; a locked
 * journal (a running `watt tune`) makes it retry on the next tick. */
static void test_guard_cpus(void **state)
{
    char *root = make_root();
    struct host *h = open_root(root);
    struct guard_config c;
    config(&c, "1");
    c.latency_us = 20;
    struct guard *g;
    assert_int_equal(guard_new(h, &c, "var/lib/watt/journal", &g), 0);
    guard_config_clear(&c);
    unsigned ticks = 0;
    uint64_t t = 0;
    struct guard_status st;

    struct journal *other;
    char *err = NULL;
    assert_int_equal(journal_open(h, NULL, "cli", &other, &err), 0);
    run(g, root, &ticks, &t, 0);
    run(g, root, &ticks, &t, 50);
    assert_true(run(g, root, &ticks, &t, 50) < 0); /* locked */
    guard_get_status(g, t, &st);
    assert_false(st.held);
    assert_int_equal(st.failures, 1);
    assert_non_null(st.note);
    assert_true(run(g, root, &ticks, &t, 50) < 0);
    journal_close(other);
    assert_int_equal(run(g, root, &ticks, &t, 50), 1);
    assert_file(root, RESUME0, "0\n");
    assert_file(root, RESUME1, "20\n");
    guard_get_status(g, t, &st);
    assert_true(st.held);
    assert_string_equal(st.mode, "cpus");
    assert_string_equal(st.cpus, "1");
    assert_int_equal(read_global(root), GUARD_LATENCY_DEFAULT_VALUE); /* untouched */

    /* the journal holds the guard's record */
    struct journal_log log;
    assert_int_equal(journal_read(h, NULL, &log), 0);
    assert_int_equal(log.n, 1);
    assert_string_equal(log.v[0].owner, "guard");
    journal_log_free(&log);

    err = NULL;
    assert_int_equal(guard_release(g, &err), 0);
    assert_file(root, RESUME1, "0\n");
    guard_free(g);

    /* 0 µs is "n/a" in sysfs ("0" there means no constraint) */
    config(&c, "0-1");
    assert_int_equal(guard_new(h, &c, NULL, &g), 0);
    guard_config_clear(&c);
    t = 0;
    run(g, root, &ticks, &t, 0);
    run(g, root, &ticks, &t, 90);
    assert_int_equal(run(g, root, &ticks, &t, 90), 1);
    assert_file(root, RESUME0, "n/a\n");
    assert_file(root, RESUME1, "n/a\n");
    guard_free(g); /* lets go */
    assert_file(root, RESUME0, "0\n");
    assert_file(root, RESUME1, "0\n");
    assert_int_equal(journal_read(h, NULL, &log), 0);
    assert_int_equal(log.n, 0);
    journal_log_free(&log);
    host_close(h);
    tree_free(root);
}

/* A write the kernel refuses: the hold fails, nothing stays changed. */
static void test_guard_cpus_refused(void **state)
{
    char *root = make_root();
    tree_write(root, "watt-faults",
               "sys/devices/system/cpu/cpu1/power/pm_qos_resume_latency_us EINVAL op=write\n");
    struct host *h = open_root(root);
    struct guard_config c;
    config(&c, "0-1");
    struct guard *g;
    assert_int_equal(guard_new(h, &c, NULL, &g), 0);
    guard_config_clear(&c);
    unsigned ticks = 0;
    uint64_t t = 0;
    char *msg = NULL;
    run(g, root, &ticks, &t, 0);
    run(g, root, &ticks, &t, 90);
    ticks += 20;
    write_stat(root, 100, "busy", ticks, 50);
    t += TICK;
    assert_true(guard_tick(g, t, &msg) < 0);
    assert_non_null(msg);
    print_message("# %s\n", msg);
    assert_non_null(strstr(msg, "cpu1/power/pm_qos_resume_latency_us"));
    free(msg);
    assert_file(root, RESUME0, "0\n"); /* rolled back */
    guard_free(g);
    host_close(h);
    tree_free(root);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fsm_hold_release),     cmocka_unit_test(test_fsm_hysteresis),
        cmocka_unit_test(test_fsm_zero_and_first),   cmocka_unit_test(test_fsm_backwards),
        cmocka_unit_test(test_fsm_exhaustive),       cmocka_unit_test(test_workload_parse),
        cmocka_unit_test(test_parse_cpu_stat),       cmocka_unit_test(test_parse_pid_stat),
        cmocka_unit_test(test_parse_net_tcp),        cmocka_unit_test(test_parse_sockstat),
        cmocka_unit_test(test_probe_cgroup),         cmocka_unit_test(test_probe_process),
        cmocka_unit_test(test_probe_process_rescan), cmocka_unit_test(test_probe_port),
        cmocka_unit_test(test_probe_port_live),      cmocka_unit_test(test_config_from_profile),
        cmocka_unit_test(test_guard_global),         cmocka_unit_test(test_guard_cpus),
        cmocka_unit_test(test_guard_cpus_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
