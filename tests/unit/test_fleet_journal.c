/* The fleet controller's journal with parallel migrations: appends from
 * many threads, faults in the middle of an append, the records a restart
 * writes for what a crash left open, and a run of the controller on the
 * exec engine with 8 migrations at once on a fleet made of files
 * (tests/fleet/fake_fleet.sh). tools/test.sh also runs this program under
 * ThreadSanitizer. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/util.h"
#include "fleet/control/control.h"
#include "tree.h"

/* ---- a journal read back, line by line --------------------------------- */

struct jrec {
    long seq, ref; /* ref: the begin an end closes */
    bool begin;
    char text[512]; /* after "begin " or "end REF " */
};

struct jfile {
    struct jrec *v;
    size_t n;
};

static char *read_all(const char *path)
{
    FILE *f = fopen(path, "re");
    if (!f)
        fail_msg("cannot open %s: %s", path, strerror(errno));
    struct strbuf_like {
        char *p;
        size_t n;
    } b = {xmalloc(1), 0};
    char chunk[65536];
    size_t got;
    while ((got = fread(chunk, 1, sizeof(chunk), f)) > 0) {
        b.p = xrealloc(b.p, b.n + got + 1);
        memcpy(b.p + b.n, chunk, got);
        b.n += got;
    }
    b.p[b.n] = '\0';
    fclose(f);
    return b.p;
}

/* Every line must be a whole record. */
static void jfile_read(const char *path, struct jfile *ret)
{
    _cleanup_free_ char *text = read_all(path);
    struct jfile j = {0};
    size_t cap = 0;
    int lineno = 0;
    for (char *line = text, *nl; *line; line = nl + 1) {
        nl = strchr(line, '\n');
        lineno++;
        if (!nl)
            fail_msg("%s line %d: no newline: '%s'", path, lineno, line);
        *nl = '\0';
        if (j.n == cap)
            j.v = grow_array(j.v, sizeof(*j.v), j.n, &cap);
        struct jrec *r = &j.v[j.n++];
        *r = (struct jrec){0};
        int off = 0;
        double t;
        if (sscanf(line, "%ld %lf begin %n", &r->seq, &t, &off) == 2 && off > 0) {
            r->begin = true;
        } else if (sscanf(line, "%ld %lf end %ld %n", &r->seq, &t, &r->ref, &off) == 3 && off > 0) {
            r->begin = false;
        } else {
            fail_msg("%s line %d: not a record: '%s'", path, lineno, line);
        }
        snprintf(r->text, sizeof(r->text), "%s", line + off);
    }
    *ret = j;
}

/* Numbers strictly increasing in file order; every end closes an earlier
 * begin that no other end closed. Returns the begins left open. */
static size_t jfile_check(const char *path, const struct jfile *j)
{
    size_t open = 0;
    for (size_t i = 0; i < j->n; i++) {
        if (i > 0 && j->v[i].seq <= j->v[i - 1].seq)
            fail_msg("%s: record %zu has number %ld after %ld", path, i + 1, j->v[i].seq,
                     j->v[i - 1].seq);
        if (j->v[i].begin) {
            open++;
            continue;
        }
        size_t b = 0, ends = 0;
        while (b < i && !(j->v[b].begin && j->v[b].seq == j->v[i].ref))
            b++;
        if (b == i)
            fail_msg("%s: end %ld closes %ld, no begin before it", path, j->v[i].seq, j->v[i].ref);
        for (size_t k = 0; k < j->n; k++)
            ends += !j->v[k].begin && j->v[k].ref == j->v[i].ref;
        if (ends != 1)
            fail_msg("%s: begin %ld has %zu ends", path, j->v[i].ref, ends);
        open--;
    }
    return open;
}

/* The end record that closes SEQ, or NULL. */
static const struct jrec *jfile_end_of(const struct jfile *j, long seq)
{
    for (size_t i = 0; i < j->n; i++)
        if (!j->v[i].begin && j->v[i].ref == seq)
            return &j->v[i];
    return NULL;
}

/* ---- appends from many threads ------------------------------------------- */

#define APPEND_THREADS 8
#define APPENDS        20 /* begin + end pairs per thread */

struct appender {
    struct ctl_journal *j;
    int id;
    long seq[APPENDS];
    int errors;
};

static void *append_thread(void *arg)
{
    struct appender *a = arg;
    for (int i = 0; i < APPENDS; i++) {
        a->seq[i] = ctl_journal_begin(a->j, "migrate vm=t%d-%d src=h1 dst=h2", a->id, i);
        if (a->seq[i] < 0 || ctl_journal_end(a->j, a->seq[i], "ok vm=t%d-%d on=h2", a->id, i) < 0)
            a->errors++;
    }
    return NULL;
}

/* The journal used to be appended from the migration threads with no
 * lock: records of one tick got the same number, and the records' array
 * grew under two threads at once. */
static void test_concurrent_appends(void **state)
{
    char *dir = tree_new();
    struct ctl_journal *j;
    struct fleet_error err = {{0}};
    assert_int_equal(ctl_journal_open(dir, false, &j, &err), 0);
    struct appender a[APPEND_THREADS];
    pthread_t th[APPEND_THREADS];
    for (int i = 0; i < APPEND_THREADS; i++) {
        a[i] = (struct appender){.j = j, .id = i};
        assert_int_equal(pthread_create(&th[i], NULL, append_thread, &a[i]), 0);
    }
    for (int i = 0; i < APPEND_THREADS; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < APPEND_THREADS; i++) {
        assert_int_equal(a[i].errors, 0);
        for (int k = 1; k < APPENDS; k++)
            assert_true(a[i].seq[k] > a[i].seq[k - 1]);
    }
    _cleanup_free_ char *path = xasprintf("%s/journal", dir);
    struct jfile f;
    jfile_read(path, &f);
    assert_int_equal(f.n, APPEND_THREADS * APPENDS * 2);
    assert_int_equal(jfile_check(path, &f), 0);
    /* each begin's number is the one its thread was given, its end names the same VM */
    for (int i = 0; i < APPEND_THREADS; i++)
        for (int k = 0; k < APPENDS; k++) {
            char want[64];
            snprintf(want, sizeof(want), "migrate vm=t%d-%d src=h1 dst=h2", i, k);
            size_t r = 0;
            while (r < f.n && !(f.v[r].begin && f.v[r].seq == a[i].seq[k]))
                r++;
            assert_true(r < f.n);
            assert_string_equal(f.v[r].text, want);
            const struct jrec *e = jfile_end_of(&f, a[i].seq[k]);
            assert_non_null(e);
            snprintf(want, sizeof(want), "ok vm=t%d-%d on=h2", i, k);
            assert_string_equal(e->text, want);
        }
    ctl_journal_close(j);
    /* reopened: nothing open, the next number follows the last */
    assert_int_equal(ctl_journal_open(dir, false, &j, &err), 0);
    char **open = NULL;
    assert_int_equal(ctl_journal_open_actions(j, &open), 0);
    free(open);
    assert_int_equal(ctl_journal_begin(j, "power_on host=h1"), f.v[f.n - 1].seq + 1);
    ctl_journal_close(j);
    free(f.v);
    tree_free(dir);
}

/* ---- faults in the middle of an append ------------------------------------ */

static int fault_errno;      /* what the faulty calls fail with */
static bool fault_half;      /* write: half the line, then fail */
static bool fault_sync;      /* fdatasync fails */
static bool fault_truncate;  /* ftruncate fails */
static const char *fault_on; /* only lines holding this ("" or NULL: every line) */
static bool fault_in_line;   /* the line being written holds fault_on */

/* With fault_half: the first call for a line writes half of it (a short
 * write), the second, with the rest, fails. */
static ssize_t faulty_write(int fd, const void *buf, size_t len)
{
    static bool half_done;
    if (!half_done)
        fault_in_line = !fault_on || memmem(buf, len, fault_on, strlen(fault_on));
    if (!fault_half || !fault_in_line)
        return write(fd, buf, len);
    if (!half_done) {
        half_done = true;
        return write(fd, buf, len / 2);
    }
    half_done = false;
    errno = fault_errno;
    return -1;
}

static int faulty_sync(int fd)
{
    if (fault_sync && fault_in_line) {
        errno = fault_errno;
        return -1;
    }
    return fdatasync(fd);
}

static int faulty_truncate(int fd, off_t len)
{
    if (fault_truncate) {
        errno = fault_errno;
        return -1;
    }
    return ftruncate(fd, len);
}

static const struct ctl_journal_io faulty_io = {faulty_write, faulty_sync, faulty_truncate};

static void faults_off(void)
{
    fault_half = fault_sync = fault_truncate = false;
    fault_on = NULL;
}

/* A short write, a failed fdatasync, and a failed cut after either: the
 * file keeps only whole records, and no number is given twice. */
static void test_failed_appends(void **state)
{
    char *dir = tree_new();
    _cleanup_free_ char *path = xasprintf("%s/journal", dir);
    struct ctl_journal *j;
    struct fleet_error err = {{0}};
    assert_int_equal(ctl_journal_open(dir, false, &j, &err), 0);
    ctl_journal_set_io(j, &faulty_io);
    faults_off();
    fault_errno = ENOSPC;
    assert_int_equal(ctl_journal_begin(j, "power_on host=h1"), 1);
    assert_int_equal(ctl_journal_end(j, 1, "accepted host=h1"), 0);
    _cleanup_free_ char *good = read_all(path);

    fault_half = true; /* half the line reaches the file, then ENOSPC */
    assert_int_equal(ctl_journal_begin(j, "power_on host=h2"), -ENOSPC);
    _cleanup_free_ char *now = read_all(path);
    assert_string_equal(now, good); /* cut back */
    faults_off();
    fault_errno = EIO;
    fault_sync = true; /* written whole, fdatasync says EIO */
    assert_int_equal(ctl_journal_begin(j, "power_on host=h3"), -EIO);
    free(now);
    now = read_all(path);
    assert_string_equal(now, good);
    /* the half line stays when the cut fails, and is cut before the next append */
    faults_off();
    fault_half = fault_truncate = true;
    assert_int_equal(ctl_journal_begin(j, "power_on host=h4"), -EIO);
    free(now);
    now = read_all(path);
    assert_true(strlen(now) > strlen(good) && strncmp(now, good, strlen(good)) == 0);
    fault_half = false; /* the cut still fails: nothing is appended after half a line */
    assert_int_equal(ctl_journal_begin(j, "power_on host=h5"), -EIO);
    faults_off();
    assert_int_equal(ctl_journal_begin(j, "power_on host=h6"), 6);
    ctl_journal_close(j);

    struct jfile f;
    jfile_read(path, &f);
    assert_int_equal(f.n, 3);
    assert_int_equal(f.v[2].seq, 6); /* 3, 4, 5 burnt: taken by appends that failed */
    assert_string_equal(f.v[2].text, "power_on host=h6");
    assert_int_equal(jfile_check(path, &f), 1);
    free(f.v);
    assert_int_equal(ctl_journal_open(dir, false, &j, &err), 0);
    assert_int_equal(ctl_journal_begin(j, "power_on host=h7"), 7);
    ctl_journal_close(j);
    tree_free(dir);
}

/* A torn last line is cut, and its number, written whole, is burnt. */
static void test_torn_tail_number_burnt(void **state)
{
    char *dir = tree_new();
    tree_write(dir, "journal",
               "1 1700000000.000 begin power_on host=h1\n"
               "2 1700000000.100 end 1 accepted host=h1\n"
               "3 1700000000.2");
    _cleanup_free_ char *path = xasprintf("%s/journal", dir);
    struct ctl_journal *j;
    struct fleet_error err = {{0}};
    assert_int_equal(ctl_journal_open(dir, false, &j, &err), 0);
    assert_int_equal(ctl_journal_begin(j, "power_on host=h2"), 4);
    ctl_journal_close(j);
    struct jfile f;
    jfile_read(path, &f);
    assert_int_equal(f.n, 3);
    free(f.v);
    tree_free(dir);
}

/* ---- the controller on the exec engine, a fleet made of files ----------- */

#define N_HOSTS 12
#define N_VMS   24

static char *fleet_new(void)
{
    char *dir = tree_new();
    const char *src = getenv("WATT_SRCDIR");
    if (!src)
        fail_msg("WATT_SRCDIR is not set (meson test sets it)");
    _cleanup_free_ char *from = xasprintf("%s/tests/fleet/fake_fleet.sh", src);
    _cleanup_free_ char *script = read_all(from);
    tree_write(dir, "fake_fleet.sh", "%s", script);
    for (int h = 1; h <= N_HOSTS; h++) {
        char rel[64];
        snprintf(rel, sizeof(rel), "power/h%d", h);
        tree_write(dir, rel, "on\n");
        snprintf(rel, sizeof(rel), "hosts/h%d/.keep", h);
        tree_write(dir, rel, "");
    }
    tree_write(dir, "locks/.keep", "");
    tree_write(dir, "lost/.keep", "");
    tree_write(dir, "log", "");
    return dir;
}

/* VM I on host H, LOAD % of one CPU. */
static void fleet_put(const char *dir, int vm, int h, int load)
{
    char rel[64];
    snprintf(rel, sizeof(rel), "hosts/h%d/vm%02d", h, vm);
    tree_write(dir, rel, "%d 262144 1\n", load);
}

/* Where VM I is: its host, 0 nowhere; *COPIES how many hosts hold it. */
static int fleet_where(const char *dir, int vm, int *copies)
{
    int at = 0;
    *copies = 0;
    for (int h = 1; h <= N_HOSTS; h++) {
        _cleanup_free_ char *p = xasprintf("%s/hosts/h%d/vm%02d", dir, h, vm);
        if (access(p, F_OK) == 0) {
            at = h;
            ++*copies;
        }
    }
    return at;
}

static char *fleet_ini(const char *dir, unsigned max_concurrent)
{
    char *hosts = xstrdup("");
    for (int h = 1; h <= N_HOSTS; h++) {
        char *more = xasprintf("%s[host h%d]\ntype = small\n", hosts, h);
        free(hosts);
        hosts = more;
    }
    _cleanup_free_ char *cmd = xasprintf("/bin/sh %s/fake_fleet.sh %s", dir, dir);
    char *ini = xasprintf("[controller]\n"
                          "interval_s = 1\n"
                          "state_dir = %s/state\n"
                          "vm_engine = exec\n"
                          "power = exec\n"
                          "max_concurrent_migrations = %u\n"
                          "migrations_per_host = 4\n"
                          "policy = window=1,off_after=1000\n"
                          "[exec]\n"
                          "list = %s list {host}\n"
                          "migrate = %s migrate {vm} {src} {dst}\n"
                          "power_on = %s power {host} on\n"
                          "power_off = %s power {host} off\n"
                          "power_status = %s power {host} status\n"
                          "timeout_s = 30\n"
                          "[type small]\n"
                          "cores = 4\nmips_per_core = 1000\nram_mb = 8192\n"
                          "power_w = 100,110,120,130,140,150,160,170,180,190,200\n"
                          "boot_s = 1\n"
                          "%s",
                          dir, max_concurrent, cmd, cmd, cmd, cmd, cmd, hosts);
    free(hosts);
    return ini;
}

/* The most migrations the fleet's log shows running at one moment. */
static int max_overlap(const char *dir)
{
    _cleanup_free_ char *path = xasprintf("%s/log", dir);
    _cleanup_free_ char *text = read_all(path);
    int running = 0, most = 0;
    /* the lines are in time order: each is appended when it happens */
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        if (strncmp(line, "start ", 6) == 0)
            running++;
        else if (strncmp(line, "end ", 4) == 0)
            running--;
        most = running > most ? running : most;
    }
    return most;
}

static double mono_s(void)
{
    return (double)now_monotonic_ns() / 1e9;
}

/* Four hosts with six VMs each, all busy: 150 % of a host, an overload the
 * policy relieves at once (after one priming observation, so that the
 * CPU rates are known; window = 1, so the controller is warm at the first
 * tick), 12 migrations onto the eight empty hosts, 8 at a time.
 * On the first tick no end record reaches the disk (fdatasync fails): the
 * second tick closes those begins from what it sees. tools/test.sh also
 * runs this under ThreadSanitizer. */
static void test_exec_parallel_migrations(void **state)
{
    char *dir = fleet_new();
    for (int v = 0; v < N_VMS; v++)
        fleet_put(dir, v, 1 + v / 6, 100);
    tree_write(dir, "migrate_s", "0.3\n");
    _cleanup_free_ char *ini = fleet_ini(dir, 8);
    struct site site;
    struct fleet_error err = {{0}};
    if (site_parse(ini, strlen(ini), "fleet.ini", &site, &err) < 0)
        fail_msg("site_parse: %s", err.msg);
    struct controller *c;
    struct ctl_options opt = {0};
    if (controller_open(&site, &opt, &c, &err) < 0)
        fail_msg("controller_open: %s", err.msg);
    FILE *out = getenv("WATT_TEST_VERBOSE") ? fdopen(dup(1), "w") : fopen("/dev/null", "w");
    controller_prime(c, mono_s());
    usleep(300 * 1000);
    ctl_journal_set_io(c->journal, &faulty_io);
    faults_off();
    fault_on = " end ";
    fault_sync = true;
    fault_errno = EIO;
    assert_int_equal(controller_tick(c, mono_s(), out, false), 0);
    unsigned long first = c->migrations_ok;
    assert_int_equal(first, 8);
    assert_int_equal(ctl_journal_n_open(c->journal), 8);
    faults_off();
    assert_int_equal(controller_tick(c, mono_s(), out, false), 0);
    unsigned long ok = c->migrations_ok, failed = c->migrations_failed;
    controller_close(c);
    fclose(out);

    int most = max_overlap(dir);
    print_message("# %lu migrations, %lu failed, at most %d at once\n", ok, failed, most);
    assert_true(ok >= 8);
    assert_int_equal(failed, 0);
    /* all 8 at once, give or take a slow start on a busy machine */
    assert_true(most >= 6 && most <= 8);
    for (int v = 0; v < N_VMS; v++) {
        int copies;
        fleet_where(dir, v, &copies);
        assert_int_equal(copies, 1);
    }
    _cleanup_free_ char *path = xasprintf("%s/state/journal", dir);
    struct jfile f;
    jfile_read(path, &f);
    assert_int_equal(jfile_check(path, &f), 0);
    unsigned long begun = 0, recovered = 0;
    for (size_t i = 0; i < f.n; i++) {
        begun += f.v[i].begin && strncmp(f.v[i].text, "migrate ", 8) == 0;
        if (!f.v[i].begin && strncmp(f.v[i].text, "recovered ", 10) == 0) {
            assert_non_null(strstr(f.v[i].text, " copies=1 outcome=done"));
            recovered++;
        }
    }
    assert_int_equal(begun, ok + failed);
    assert_int_equal(recovered, first);
    free(f.v);
    site_free(&site);
    tree_free(dir);
}

/* ---- what a restart writes for what a crash left open -------------------- */

static struct controller *open_on(const char *dir, struct site *site)
{
    _cleanup_free_ char *ini = fleet_ini(dir, 8);
    struct fleet_error err = {{0}};
    if (site_parse(ini, strlen(ini), "fleet.ini", site, &err) < 0)
        fail_msg("site_parse: %s", err.msg);
    struct controller *c;
    struct ctl_options opt = {0};
    if (controller_open(site, &opt, &c, &err) < 0)
        fail_msg("controller_open: %s", err.msg);
    return c;
}

static const struct jrec *assert_end_of(const struct jfile *f, long seq, const char *want)
{
    const struct jrec *e = jfile_end_of(f, seq);
    if (!e)
        fail_msg("begin %ld has no end", seq);
    if (strcmp(e->text, want) != 0)
        fail_msg("end of %ld: '%s', want '%s'", seq, e->text, want);
    return e;
}

/* Every begin without an end gets one from what the fleet shows, and a
 * restart acts on nothing by itself. */
static void test_recovery_records(void **state)
{
    char *dir = fleet_new();
    fleet_put(dir, 0, 2, 10); /* vm00 h1 -> h2: arrived */
    fleet_put(dir, 1, 1, 10); /* vm01 h1 -> h2: still on h1 */
    fleet_put(dir, 2, 1, 10); /* vm02 h1 -> h3: on both (a migration still running) */
    fleet_put(dir, 2, 3, 10);
    fleet_put(dir, 3, 2, 10);
    tree_write(dir, "power/h5", "off\n");
    tree_write(dir, "state/journal",
               "1 1700000000.000 begin migrate vm=vm00 src=h1 dst=h2\n"
               "2 1700000000.000 begin migrate vm=vm01 src=h1 dst=h2\n"
               "3 1700000000.000 begin migrate vm=vm02 src=h1 dst=h3\n"
               "4 1700000000.000 begin power_on host=h4\n"
               "5 1700000000.000 begin power_off host=h5\n"
               "6 1700000000.000 begin power_on host=h5\n"
               "7 1700000000.000 begin migrate vm=vm03 src=h1 dst=h2\n"
               "8 1700000001.000 end 7 ok vm=vm03 on=h2 copies=1 took=1.0\n"
               "9 1700000001.000 begin migrate vm=vm09 src=h1 dst=h4\n"
               "10 1700000001.000 begin migrate vm=vm04 src=h1 dst=h2\n"
               "11 1700000002.000 end 9 ok vm=vm09 on=h4 copies=1 took=1.0\n"
               "13 1700000002.1");
    struct site site, site2;
    struct controller *c = open_on(dir, &site);
    controller_close(c);
    _cleanup_free_ char *path = xasprintf("%s/state/journal", dir);
    struct jfile f;
    jfile_read(path, &f);
    assert_int_equal(jfile_check(path, &f), 0);
    assert_end_of(&f, 1, "recovered vm=vm00 on=h2 copies=1 outcome=done");
    assert_end_of(&f, 2, "recovered vm=vm01 on=h1 copies=1 outcome=failed");
    assert_end_of(&f, 3, "recovered vm=vm02 on=h1,h3 copies=2 outcome=unknown");
    assert_end_of(&f, 4, "recovered host=h4 state=on outcome=done");
    assert_end_of(&f, 5, "recovered host=h5 state=off outcome=done");
    assert_end_of(&f, 6, "recovered host=h5 state=off outcome=failed");
    assert_end_of(&f, 10, "recovered vm=vm04 on=- copies=0 outcome=unknown");
    /* in the order of the begins, numbered after the torn tail's 13 */
    assert_int_equal(jfile_end_of(&f, 1)->seq, 14);
    assert_int_equal(jfile_end_of(&f, 10)->seq, 20);
    size_t n = f.n;
    free(f.v);
    /* nothing was done again: the fleet is as it was */
    int copies;
    assert_int_equal(fleet_where(dir, 1, &copies), 1);
    assert_int_equal(fleet_where(dir, 2, &copies), 3);
    assert_int_equal(copies, 2);
    _cleanup_free_ char *log_path = xasprintf("%s/log", dir);
    _cleanup_free_ char *log = read_all(log_path);
    assert_string_equal(log, "");
    /* a second start finds nothing open and writes nothing */
    controller_close(c = open_on(dir, &site2));
    site_free(&site2);
    jfile_read(path, &f);
    assert_int_equal(f.n, n);
    free(f.v);
    site_free(&site);
    tree_free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_concurrent_appends),       cmocka_unit_test(test_failed_appends),
        cmocka_unit_test(test_torn_tail_number_burnt),   cmocka_unit_test(test_recovery_records),
        cmocka_unit_test(test_exec_parallel_migrations),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
