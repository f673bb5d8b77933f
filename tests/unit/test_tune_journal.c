/* The undo journal (src/tune/journal.h) on temporary roots: records and
 * their checks, transactions, restore by owner, torn and corrupt files,
 * the lock, write faults and the crash points (in a re-executed child,
 * since the crash settings are read once per process). */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

/* cmocka.h needs stdarg, stddef, stdint and setjmp first */
#include <cmocka.h>

#include "base/util.h"
#include "host/host.h"
#include "journal_tree.h"
#include "tree.h"
#include "tune/journal.h"

static void assert_pristine(const char *root)
{
    assert_file(root, "sys/" GOV, "powersave\n");
    assert_file(root, "sys/" EPP, "balance_power\n");
    assert_file(root, "proc/" WB, "500\n");
}

static struct journal *open_journal(struct host *h, const char *owner)
{
    return open_journal_as(h, owner);
}

static void test_escape(void **state)
{
    static const char *const cases[] = {"", "powersave\n", "100%", "a b\tc", "\x01\x7f\xff", "%41"};
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        char *e = journal_escape(cases[i]), *u = NULL;
        for (const char *c = e; *c; c++)
            assert_true(*c >= 0x21 && *c <= 0x7e);
        assert_int_equal(journal_unescape(e, strlen(e), &u), 0);
        assert_string_equal(u, cases[i]);
        free(e);
        free(u);
    }
    char *e = journal_escape("a b\n100%");
    assert_string_equal(e, "a%20b%0A100%25");
    free(e);
    char *u = (char *)0x1;
    static const char *const bad[] = {"%", "%4", "%zz", "a b", "%00", "\x7f", "x\n"};
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
        assert_int_equal(journal_unescape(bad[i], strlen(bad[i]), &u), -EINVAL);
    assert_ptr_equal(u, (char *)0x1);
    /* the length bounds the input: "%4" of "%41" is cut */
    assert_int_equal(journal_unescape("%41", 2, &u), -EINVAL);
}

static void test_crc(void **state)
{
    assert_int_equal(journal_crc32("123456789", 9), 0xcbf43926u);
    assert_int_equal(journal_crc32("", 0), 0);
}

/* BODY with its checksum appended. */
static char *with_crc(const char *body)
{
    return xasprintf("%s crc=%08x", body, journal_crc32(body, strlen(body)));
}

static const char *parse_why(const char *line)
{
    struct journal_entry e = {.seq = 77};
    const char *why = NULL;
    int r = journal_parse_line(line, strlen(line), &e, &why);
    if (r == 0) {
        journal_entry_clear(&e);
        return "ok";
    }
    assert_int_equal(r, -EBADMSG);
    assert_int_equal(e.seq, 77); /* untouched */
    return why;
}

static void test_parse(void **state)
{
    const char *w = "W seq=3 tx=2 t=1764751200123456789 pid=4242 owner=cli dir=sys "
                    "path=" GOV " old=powersave%0A new=performance";
    char *line = with_crc(w);
    struct journal_entry e;
    const char *why;
    assert_int_equal(journal_parse_line(line, strlen(line), &e, &why), 0);
    assert_int_equal(e.seq, 3);
    assert_int_equal(e.tx, 2);
    assert_int_equal(e.time_ns, 1764751200123456789ull);
    assert_int_equal(e.pid, 4242);
    assert_int_equal(e.dir, HOST_SYS);
    assert_string_equal(e.owner, "cli");
    assert_string_equal(e.path, GOV);
    assert_string_equal(e.old_value, "powersave\n");
    assert_string_equal(e.new_value, "performance");
    journal_entry_clear(&e);
    line[20] ^= 1;
    assert_string_equal(parse_why(line), "checksum mismatch");
    free(line);

    char *u = with_crc("U seq=4 tx=2");
    assert_int_equal(journal_parse_line(u, strlen(u), &e, &why), 0);
    assert_null(e.path);
    assert_int_equal(e.tx, 2);
    free(u);

    static const struct {
        const char *body, *why;
    } bad[] = {
        {"X seq=1 tx=1", "not a record"},
        {"U seq=1 tx=1 t=5", "unknown field"},
        {"U seq=1 tx=1 ", "unknown field"},
        {"U seq=1 seq=1 tx=1", "repeated field"},
        {"U seq=1", "missing field"},
        {"U seq=-1 tx=1", "bad number"},
        {"U seq=99999999999999999999 tx=1", "bad number"},
        {"W seq=1 tx=1 t=1 pid=1 owner=cli dir=sys path=a old=1", "missing field"},
        {"W seq=1 tx=1 t=1 pid=1 owner=cli dir=etc path=a old=1 new=2", "bad directory"},
        {"W seq=1 tx=1 t=1 pid=1 owner=cli dir=sys path=../etc/shadow old=1 new=2", "bad path"},
        {"W seq=1 tx=1 t=1 pid=1 owner=cli dir=sys path=/etc old=1 new=2", "bad path"},
        {"W seq=1 tx=1 t=1 pid=1 owner=cli dir=sys path=a//b old=1 new=2", "bad path"},
        {"W seq=1 tx=1 t=1 pid=1 owner=cli dir=sys path=a old=%zz new=2", "bad escape"},
        {"W seq=1 tx=1 t=1 pid=x owner=cli dir=sys path=a old=1 new=2", "bad number"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        char *l = with_crc(bad[i].body);
        assert_string_equal(parse_why(l), bad[i].why);
        free(l);
    }
    assert_string_equal(parse_why("U seq=1 tx=1"), "no checksum");
    assert_string_equal(parse_why("U seq=1 tx=1 crc=ABCDEF12"), "no checksum");
    assert_string_equal(parse_why("U seq=1\ttx=1 crc=00000000"), "not a record");
    assert_string_equal(parse_why(""), "no checksum");
}

static void test_choice_word(void **state)
{
    char *w;
    assert_int_equal(journal_choice_word("[default] performance powersave\n", &w), 0);
    assert_string_equal(w, "default");
    free(w);
    assert_int_equal(journal_choice_word("performance [powersave] powersupersave\n", &w), 0);
    assert_string_equal(w, "powersave");
    free(w);
    static const char *const no[] = {"powersave\n", "[]", "[a b] c", "[a] [b]", "[a", "a]"};
    for (size_t i = 0; i < ARRAY_SIZE(no); i++)
        assert_int_equal(journal_choice_word(no[i], &w), -ENOMSG);
}

static void test_set_rollback(void **state)
{
    char *root = make_root();
    struct host *h;
    assert_int_equal(host_open(root, &h), 0);
    struct journal *j = open_journal(h, "cli");
    assert_string_equal(strrchr(journal_path(j), '/'), "/journal");
    assert_file(root, JRNL, "watt-journal 1\n");
    journal_begin(j);
    char *old = NULL;
    assert_int_equal(journal_set(j, HOST_SYS, GOV, "performance", &old), 0);
    assert_string_equal(old, "powersave\n");
    free(old);
    assert_int_equal(journal_set(j, HOST_PROC, WB, "1500", NULL), 0);
    /* a recorded file reads back as sysfs shows a value: with its newline */
    assert_file(root, "sys/" GOV, "performance\n");
    assert_file(root, "proc/" WB, "1500\n");
    /* a missing knob: its error, and nothing recorded */
    assert_int_equal(journal_set(j, HOST_SYS, "devices/system/cpu/cpufreq/policy9/scaling_governor",
                                 "performance", NULL),
                     -ENOENT);
    /* a file no knob names, or a value the knob does not take: refused */
    assert_int_equal(journal_set(j, HOST_SYS, "devices/nope", "1", NULL), -EPERM);
    assert_int_equal(journal_set(j, HOST_SYS, "kernel/uevent_helper", "/tmp/x", NULL), -EPERM);
    assert_int_equal(journal_set(j, HOST_PROC, "sys/kernel/core_pattern", "|/tmp/x", NULL), -EPERM);
    assert_int_equal(journal_set(j, HOST_SYS, GOV, "perf ormance", NULL), -EPERM);
    assert_int_equal(journal_set(j, HOST_PROC, WB, "-1", NULL), -EPERM);
    struct journal_log log;
    assert_int_equal(journal_read(h, NULL, &log), 0);
    assert_int_equal(log.n, 2);
    assert_int_equal(log.nproblems, 0);
    assert_string_equal(log.v[1].old_value, "500\n");
    assert_int_equal(log.v[1].line, 3);
    assert_int_equal(log.v[0].tx, log.v[1].tx);
    journal_log_free(&log);
    char *err = NULL;
    assert_int_equal(journal_rollback(j, &err), 0);
    assert_null(err);
    assert_pristine(root);
    /* nothing live remains: the file is its header again */
    assert_file(root, JRNL, "watt-journal 1\n");
    journal_close(j);
    host_close(h);
    tree_free(root);
}

static void test_restore(void **state)
{
    char *root = make_root();
    struct host *h;
    assert_int_equal(host_open(root, &h), 0);
    struct journal *j = open_journal(h, "cli");
    journal_begin(j);
    assert_int_equal(journal_set(j, HOST_SYS, GOV, "performance", NULL), 0);
    assert_int_equal(journal_set(j, HOST_SYS, EPP, "performance", NULL), 0);
    journal_begin(j);
    assert_int_equal(journal_set(j, HOST_SYS, GOV, "schedutil\n", NULL), 0);
    journal_close(j);
    assert_file(root, "sys/" GOV, "schedutil\n");

    struct journal_log log, orig;
    assert_int_equal(journal_read(h, NULL, &log), 0);
    assert_int_equal(journal_originals(&log, &orig), 0);
    assert_int_equal(orig.n, 2);
    assert_string_equal(orig.v[0].path, GOV);
    assert_string_equal(orig.v[0].old_value, "powersave\n"); /* the first record's */
    journal_log_free(&orig);
    journal_log_free(&log);

    j = open_journal(h, "cli");
    struct journal_restore_report rep;
    assert_int_equal(journal_restore(j, NULL, true, &rep), 0); /* dry run */
    assert_int_equal(rep.restored, 3);
    assert_int_equal(rep.nlines, 3);
    assert_non_null(strstr(rep.lines[0], "would restore"));
    assert_non_null(strstr(rep.lines[0], "to 'performance'")); /* newest first */
    journal_restore_report_free(&rep);
    assert_file(root, "sys/" GOV, "schedutil\n");

    assert_int_equal(journal_restore(j, NULL, false, &rep), 0);
    assert_int_equal(rep.restored, 3);
    assert_int_equal(rep.failed + rep.skipped + rep.nlines, 0);
    journal_restore_report_free(&rep);
    assert_pristine(root);
    assert_file(root, JRNL, "watt-journal 1\n");
    /* the journal goes on after a restore */
    assert_int_equal(journal_set(j, HOST_SYS, GOV, "performance", NULL), 0);
    assert_int_equal(journal_restore(j, NULL, false, &rep), 0);
    journal_restore_report_free(&rep);
    assert_pristine(root);
    journal_close(j);
    host_close(h);
    tree_free(root);
}

static void test_owner(void **state)
{
    char *root = make_root();
    struct host *h;
    assert_int_equal(host_open(root, &h), 0);
    struct journal *j = open_journal(h, "cli");
    assert_int_equal(journal_set(j, HOST_SYS, GOV, "performance", NULL), 0);
    journal_close(j);
    j = open_journal(h, "agent");
    assert_int_equal(journal_set(j, HOST_SYS, EPP, "performance", NULL), 0);
    assert_int_equal(journal_set(j, HOST_SYS, GOV, "schedutil", NULL), 0);
    struct journal_restore_report rep;
    assert_int_equal(journal_restore(j, "agent", false, &rep), 0);
    assert_int_equal(rep.restored, 2);
    journal_restore_report_free(&rep);
    assert_file(root, "sys/" EPP, "balance_power\n");
    assert_file(root, "sys/" GOV, "performance\n"); /* the CLI's value is back */
    struct journal_log log;
    assert_int_equal(journal_read(h, NULL, &log), 0);
    assert_int_equal(log.n, 1);
    assert_string_equal(log.v[0].owner, "cli");
    journal_log_free(&log);
    assert_int_equal(journal_restore(j, NULL, false, &rep), 0);
    journal_restore_report_free(&rep);
    assert_pristine(root);
    journal_close(j);
    host_close(h);
    tree_free(root);
}

/* The guard held a value, then `watt tune` changed the same file: the
 * guard's release leaves the tune's value, and the tune's record takes
 * over the original, so a later restore goes all the way back. */
static void test_owner_hand_over(void **state)
{
    char *root = make_root();
    struct host *h;
    assert_int_equal(host_open(root, &h), 0);
    struct journal *j = open_journal(h, "guard");
    assert_int_equal(journal_set(j, HOST_SYS, GOV, "performance", NULL), 0);
    journal_close(j);
    j = open_journal(h, "cli");
    assert_int_equal(journal_set(j, HOST_SYS, GOV, "schedutil", NULL), 0);
    journal_close(j);
    j = open_journal(h, "guard");
    struct journal_restore_report rep;
    assert_int_equal(journal_restore(j, "guard", false, &rep), 0);
    assert_int_equal(rep.restored, 1);
    assert_int_equal(rep.nlines, 1); /* "left ... as it is: cli changed it later" */
    journal_restore_report_free(&rep);
    assert_file(root, "sys/" GOV, "schedutil\n"); /* the tune's value stays */
    struct journal_log log;
    assert_int_equal(journal_read(h, NULL, &log), 0);
    assert_int_equal(log.n, 1);
    assert_string_equal(log.v[0].owner, "cli");
    journal_log_free(&log);
    assert_int_equal(journal_restore(j, NULL, false, &rep), 0);
    journal_restore_report_free(&rep);
    assert_pristine(root); /* not the guard's "performance" */
    journal_close(j);
    host_close(h);
    tree_free(root);
}

/* A device unplugged after the tune: its file is gone, and with it the
 * value; the record is dropped, not kept failing for ever. */
static void test_gone(void **state)
{
    char *root = make_root();
    struct host *h;
    assert_int_equal(host_open(root, &h), 0);
    struct journal *j = open_journal(h, "cli");
    assert_int_equal(journal_set(j, HOST_SYS, GOV, "performance", NULL), 0);
    assert_int_equal(journal_set(j, HOST_SYS, EPP, "performance", NULL), 0);
    char path[4096];
    snprintf(path, sizeof(path), "%s/sys/%s", root, EPP);
    assert_int_equal(unlink(path), 0);
    struct journal_restore_report rep;
    assert_int_equal(journal_restore(j, NULL, false, &rep), 0);
    assert_int_equal(rep.restored, 1);
    assert_int_equal(rep.gone, 1);
    assert_int_equal(rep.failed, 0);
    journal_restore_report_free(&rep);
    assert_file(root, "sys/" GOV, "powersave\n");
    struct journal_log log;
    assert_int_equal(journal_read(h, NULL, &log), 0);
    assert_int_equal(log.n, 0);
    journal_log_free(&log);
    journal_close(j);
    host_close(h);
    tree_free(root);
}

static void append_raw(const char *root, const char *text)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", root, JRNL);
    FILE *f = fopen(path, "a");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void test_torn(void **state)
{
    char *root = make_root();
    struct host *h;
    assert_int_equal(host_open(root, &h), 0);
    struct journal *j = open_journal(h, "cli");
    assert_int_equal(journal_set(j, HOST_SYS, GOV, "performance", NULL), 0);
    journal_close(j);
    char *before = slurp(root, JRNL);
    append_raw(root, "W seq=2 tx=1 t=1 pid=1 owner=cli dir=sys path=" EPP " old=x");
    struct journal_log log;
    assert_int_equal(journal_read(h, NULL, &log), 0); /* the torn line is no problem */
    assert_int_equal(log.n, 1);
    assert_int_equal(log.nproblems, 0);
    journal_log_free(&log);
    j = open_journal(h, "cli"); /* cuts it */
    char *after = slurp(root, JRNL);
    assert_string_equal(after, before);
    struct journal_restore_report rep;
    assert_int_equal(journal_restore(j, NULL, false, &rep), 0);
    journal_restore_report_free(&rep);
    journal_close(j);
    assert_pristine(root);
    free(before);
    free(after);

    /* torn while it was being created: the header is written again */
    tree_write(root, JRNL, "watt-jour");
    assert_int_equal(journal_read(h, NULL, &log), 0);
    assert_int_equal(log.n, 0);
    j = open_journal(h, "cli");
    journal_close(j);
    assert_file(root, JRNL, "watt-journal 1\n");
    /* not a journal: refused, and left alone */
    tree_write(root, JRNL, "hello\nworld\n");
    char *err = NULL;
    assert_int_equal(journal_open(h, NULL, "cli", &j, &err), -EBADMSG);
    assert_non_null(strstr(err, "is not a watt journal"));
    free(err);
    assert_int_equal(journal_read(h, NULL, &log), -EBADMSG);
    assert_file(root, JRNL, "hello\nworld\n");
    host_close(h);
    tree_free(root);
}

/* Flip one byte of line LINE (1-based) of the journal. */
static void corrupt_line(const char *root, unsigned line, size_t at)
{
    char *text = slurp(root, JRNL);
    char *p = text;
    for (unsigned i = 1; i < line; i++)
        p = strchr(p, '\n') + 1;
    p[at] ^= 0x04;
    tree_write(root, JRNL, "%s", text);
    free(text);
}

static void test_corrupt_middle(void **state)
{
    char *root = make_root();
    struct host *h;
    assert_int_equal(host_open(root, &h), 0);
    struct journal *j = open_journal(h, "cli");
    assert_int_equal(journal_set(j, HOST_SYS, GOV, "performance", NULL), 0);
    assert_int_equal(journal_set(j, HOST_SYS, EPP, "performance", NULL), 0);
    assert_int_equal(journal_set(j, HOST_PROC, WB, "1500", NULL), 0);
    journal_close(j);
    corrupt_line(root, 3, 30); /* the EPP record */
    j = open_journal(h, "cli");
    struct journal_restore_report rep;
    assert_int_equal(journal_restore(j, NULL, false, &rep), -EIO);
    assert_int_equal(rep.restored, 2);
    assert_int_equal(rep.skipped, 1);
    assert_int_equal(rep.nlines, 1);
    assert_string_equal(rep.lines[0], "journal line 3: checksum mismatch; not restored");
    journal_restore_report_free(&rep);
    journal_close(j);
    assert_file(root, "sys/" GOV, "powersave\n");
    assert_file(root, "proc/" WB, "500\n");
    assert_file(root, "sys/" EPP, "performance\n"); /* not restored, and no garbage */
    assert_file(root, JRNL, "watt-journal 1\n");
    host_close(h);
    tree_free(root);
}

static void test_lock(void **state)
{
    char *root = make_root();
    struct host *h;
    assert_int_equal(host_open(root, &h), 0);
    struct journal *j = open_journal(h, "cli"), *j2 = NULL;
    char *err = NULL;
    /* two opens of the lock file are two flocks, so one process conflicts */
    assert_int_equal(journal_open(h, NULL, "agent", &j2, &err), -EBUSY);
    assert_null(j2);
    char *want = xasprintf("another tuner is running: pid %d (test_tune_journal", (int)getpid());
    assert_non_null(strstr(err, want));
    assert_non_null(strstr(err, "); try again when it ends"));
    free(want);
    free(err);
    journal_close(j);
    j = open_journal(h, "agent");
    journal_close(j);
    host_close(h);
    tree_free(root);
}

static void test_write_fault(void **state)
{
    char *root = make_root();
    tree_write(root, "watt-faults", "sys/" EPP " EINVAL op=write\n");
    struct host *h;
    assert_int_equal(host_open(root, &h), 0);
    struct journal *j = open_journal(h, "cli");
    journal_begin(j);
    assert_int_equal(journal_set(j, HOST_SYS, GOV, "performance", NULL), 0);
    assert_int_equal(journal_set(j, HOST_SYS, EPP, "performance", NULL), -EINVAL);
    assert_file(root, "sys/" GOV, "performance\n");
    char *err = NULL;
    assert_int_equal(journal_rollback(j, &err), 0);
    assert_pristine(root);
    assert_file(root, JRNL, "watt-journal 1\n");
    journal_close(j);
    host_close(h);
    tree_free(root);
}

/* ---- crash points, in a child that re-executes this program ---------- */

static const char *self_exe;

/* Run "self --child ROOT" with the crash settings; its wait status. */
static int run_child(const char *root, const char *at, const char *count_file)
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        if (at)
            setenv("WATT_TUNE_CRASH_AT", at, 1);
        if (count_file)
            setenv("WATT_TUNE_CRASH_COUNT_FILE", count_file, 1);
        execl(self_exe, self_exe, "--child", root, (char *)NULL);
        _exit(127);
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    return status;
}

/* The child: two changes in one transaction, 5 crash points each. */
static int child_main(const char *root)
{
    struct host *h;
    struct journal *j;
    char *err = NULL;
    if (host_open(root, &h) < 0 || journal_open(h, NULL, "cli", &j, &err) < 0)
        return 2;
    journal_begin(j);
    if (journal_set(j, HOST_SYS, GOV, "performance", NULL) < 0 ||
        journal_set(j, HOST_SYS, EPP, "performance", NULL) < 0)
        return 3;
    journal_close(j);
    host_close(h);
    return 0;
}

static void test_crash_points(void **state)
{
    char *root = make_root();
    char *count = xasprintf("%s/count", root);
    int st = run_child(root, NULL, count);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    assert_file(root, "count", "10\n");
    struct host *h;
    assert_int_equal(host_open(root, &h), 0);
    struct journal *j = open_journal(h, "cli");
    struct journal_restore_report rep;
    assert_int_equal(journal_restore(j, NULL, false, &rep), 0);
    journal_restore_report_free(&rep);
    journal_close(j);
    assert_pristine(root);
    for (int n = 1; n <= 10; n++) {
        char at[16];
        snprintf(at, sizeof(at), "%d", n);
        st = run_child(root, at, NULL);
        assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
        /* point 3 (after the first fdatasync) has the record, not the write */
        if (n == 3)
            assert_file(root, "sys/" GOV, "powersave\n");
        if (n == 5)
            assert_file(root, "sys/" GOV, "performance\n");
        j = open_journal(h, "cli");
        assert_int_equal(journal_restore(j, NULL, false, &rep), 0);
        assert_int_equal(rep.restored, n <= 1 ? 0 : n <= 6 ? 1 : 2); /* appended, even unsynced */
        journal_restore_report_free(&rep);
        journal_close(j);
        assert_pristine(root);
    }
    host_close(h);
    free(count);
    tree_free(root);
}

int main(int argc, char **argv)
{
    if (argc == 3 && streq(argv[1], "--child"))
        return child_main(argv[2]);
    self_exe = argv[0];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_escape),         cmocka_unit_test(test_crc),
        cmocka_unit_test(test_parse),          cmocka_unit_test(test_choice_word),
        cmocka_unit_test(test_set_rollback),   cmocka_unit_test(test_restore),
        cmocka_unit_test(test_owner),          cmocka_unit_test(test_owner_hand_over),
        cmocka_unit_test(test_gone),           cmocka_unit_test(test_torn),
        cmocka_unit_test(test_corrupt_middle), cmocka_unit_test(test_lock),
        cmocka_unit_test(test_write_fault),    cmocka_unit_test(test_crash_points),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
