/* What the undo journal may write, and when (journal.h, knob.h): forged
 * records with valid checksums are refused, an untrusted journal is not
 * read, a value someone changed since is left, an earlier boot's records
 * are moved aside, corrupt lines are kept in a side file. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* cmocka.h needs stdarg, stddef, stdint and setjmp first */
#include <cmocka.h>

#include "base/util.h"
#include "host/host.h"
#include "journal_tree.h"
#include "tree.h"
#include "tune/journal.h"
#include "tune/knob.h"

#define BOOT   "proc/sys/kernel/random/boot_id"
#define BOOT_A "0f3b2a1c-1111-4222-8333-944455556666"
#define BOOT_B "7d6c5b4a-aaaa-4bbb-8ccc-dddd0000eeee"

static bool exists(const char *root, const char *rel)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", root, rel);
    return access(path, F_OK) == 0;
}

/* A journal of W records (bodies without "W seq=N tx=1 ...") with valid
 * checksums: what someone who could write the file would forge. */
static void forge(const char *root, const char *const *bodies, size_t n)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/" JRNL, root);
    tree_write(root, JRNL, "watt-journal 1\n");
    FILE *f = fopen(path, "a");
    assert_non_null(f);
    for (size_t i = 0; i < n; i++) {
        char *body = xasprintf("W seq=%zu tx=1 t=1 pid=1 owner=cli %s", i + 1, bodies[i]);
        fprintf(f, "%s crc=%08x\n", body, journal_crc32(body, strlen(body)));
        free(body);
    }
    fclose(f);
}

static struct journal *open_journal(struct host *h)
{
    return open_journal_as(h, "cli");
}

static size_t count_lines(const struct journal_restore_report *rep, const char *needle)
{
    size_t n = 0;
    for (size_t i = 0; i < rep->nlines; i++)
        n += strstr(rep->lines[i], needle) != NULL;
    return n;
}

static void test_knob_table(void **state)
{
    static const struct {
        enum host_dir d;
        const char *path, *knob;
    } cases[] = {
        {HOST_SYS, GOV, "cpufreq.governor"},
        {HOST_SYS, "devices/system/cpu/cpufreq/policy12/scaling_max_freq", "cpufreq.max_freq"},
        {HOST_SYS, "devices/system/cpu/cpu3/cpuidle/state2/disable", "cpuidle.max_latency_us"},
        {HOST_SYS, "devices/pci0000:00/0000:00:14.0/usb1/1-1/power/control", "devices.runtime_pm"},
        {HOST_SYS, "bus/usb/devices/1-1/power/autosuspend_delay_ms",
         "devices.autosuspend_delay_ms"},
        {HOST_SYS, "class/scsi_host/host0/link_power_management_policy", "devices.sata_link_pm"},
        {HOST_PROC, "sys/kernel/nmi_watchdog", "kernel.nmi_watchdog"},
        {HOST_SYS, "class/drm/card0/device/hwmon/hwmon3/power1_cap", "gpu.power_limit_w"},
        {HOST_SYS, "class/drm/card12/device/hwmon/hwmon1/power1_max", "gpu.power_limit_w"},
        {HOST_SYS, "class/drm/card0/device/power_dpm_force_performance_level", "gpu.perf_level"},
        {HOST_SYS, "class/drm/card0-DP-1/device/hwmon/hwmon3/power1_cap", NULL},
        {HOST_SYS, "class/drm/renderD128/device/power_dpm_force_performance_level", NULL},
        {HOST_SYS, "class/hwmon/hwmon3/power1_cap", NULL}, /* ACPI power meter: not a GPU */
        {HOST_SYS, "class/drm/card0/device/hwmon/hwmon3/power1_crit", NULL},
        {HOST_NVML, "GPU-5d3c1f0e-8a4b-4c1d-9e2f-0123456789ab/power_limit_mw", "gpu.power_limit_w"},
        {HOST_NVML, "GPU-5d3c1f0e/applications_clocks", NULL},
        {HOST_NVML, "a/GPU-5d3c1f0e/power_limit_mw", NULL},
        {HOST_SYS, "GPU-5d3c1f0e/power_limit_mw", NULL},
        /* what a forger would name */
        {HOST_SYS, "kernel/uevent_helper", NULL},
        {HOST_PROC, "sys/kernel/core_pattern", NULL},
        {HOST_PROC, "sysrq-trigger", NULL},
        {HOST_PROC, "self/root/etc/passwd", NULL},
        {HOST_DEV, "sda", NULL},
        {HOST_SYS, "devices/system/cpu/cpufreq/policyX/scaling_governor", NULL},
        {HOST_SYS, "devices/system/cpu/cpufreq/policy0/../policy1/scaling_governor", NULL},
        {HOST_SYS, "devices/system/cpu/cpufreq/policy0/scaling_governor/", NULL},
        {HOST_SYS, "devices/a/./power/control", NULL},
        {HOST_SYS, "devices/a\x1b[2J/power/control", NULL},
        {HOST_SYS, "devices/power/control", NULL}, /* "**" is one name at least */
        {HOST_PROC, "sys/kernel/nmi_watchdog_thresh", NULL},
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        const struct knob *k = knob_find(cases[i].d, cases[i].path);
        if (!cases[i].knob && k)
            fail_msg("%s matched %s", cases[i].path, k->name);
        if (cases[i].knob && (!k || !streq(k->name, cases[i].knob)))
            fail_msg("%s: want %s", cases[i].path, cases[i].knob);
    }
    const struct knob *gov = knob_find(HOST_SYS, GOV);
    assert_true(knob_value_ok(gov, "schedutil\n"));
    assert_false(knob_value_ok(gov, "perf ormance"));
    assert_false(knob_value_ok(gov, "|/bin/sh"));
    assert_false(knob_value_ok(gov, ""));
    const struct knob *pc = knob_find(HOST_SYS, "devices/x/power/control");
    assert_true(knob_value_ok(pc, "on\n") && knob_value_ok(pc, "auto"));
    assert_false(knob_value_ok(pc, "off"));
    const struct knob *aspm = knob_find(HOST_SYS, "module/pcie_aspm/parameters/policy");
    assert_true(knob_value_ok(aspm, "[default] performance powersave powersupersave \n"));
    assert_false(knob_value_ok(aspm, "[default] performance  powersave"));
    assert_true(knob_value_ok(aspm, "powersave"));
    assert_false(knob_value_ok(aspm, "[default] [performance]"));
    const struct knob *pq =
        knob_find(HOST_SYS, "devices/system/cpu/cpu0/power/pm_qos_resume_latency_us");
    assert_true(knob_value_ok(pq, "n/a\n") && knob_value_ok(pq, "0"));
    assert_false(knob_value_ok(pq, "-1"));
    const struct knob *ad = knob_find(HOST_SYS, "devices/x/power/autosuspend_delay_ms");
    assert_true(knob_value_ok(ad, "-1") && knob_value_ok(ad, "2000\n"));
    /* every row's pattern is itself a plain relative path */
    size_t n;
    const struct knob *t = knob_table(&n);
    assert_true(n >= 14);
    for (size_t i = 0; i < n; i++)
        assert_true(t[i].pattern[0] != '/' && !strstr(t[i].pattern, ".."));
}

/* Every form of forged record, with a valid checksum: none is written,
 * each is named, all are kept, the restore says it failed. */
static void test_forged(void **state)
{
    char *root = make_root();
    tree_write(root, "dev/sda", "disk\n");
    tree_write(root, "proc/sysrq-trigger", "\n");
    tree_write(root, "proc/sys/kernel/core_pattern", "core\n");
    tree_write(root, "sys/kernel/uevent_helper", "\n");
    tree_write(root, "etc/passwd", "root:x:0:0\n");
    static const char *const forged[] = {
        "dir=dev path=sda old=pwned new=disk",
        "dir=proc path=sysrq-trigger old=b new=x",
        "dir=proc path=sys/kernel/core_pattern old=%7C/tmp/x new=core",
        "dir=sys path=kernel/uevent_helper old=/tmp/x new=x",
        "dir=proc path=self/root/etc/passwd old=pwned new=x",
        /* a knob's file with a value the knob does not take */
        "dir=sys path=" GOV " old=%7C/bin/sh new=powersave",
        /* a knob's file with an escape sequence in it */
        "dir=sys path=devices/a%1B%5B2J/power/control old=auto new=on",
    };
    forge(root, forged, ARRAY_SIZE(forged));
    char *before = slurp(root, JRNL);
    struct host *h;
    assert_int_equal(host_open(root, &h), 0);
    struct journal *j = open_journal(h);
    struct journal_restore_report rep;
    for (int force = 0; force <= 1; force++) {
        assert_int_equal(journal_restore(j, NULL, force ? JOURNAL_FORCE : 0, &rep), -EIO);
        assert_int_equal(rep.refused, ARRAY_SIZE(forged));
        assert_int_equal(rep.restored, 0);
        assert_int_equal(count_lines(&rep, "refused: "), ARRAY_SIZE(forged));
        for (size_t i = 0; i < rep.nlines; i++)
            for (const char *c = rep.lines[i]; *c; c++)
                assert_true((unsigned char)*c >= 0x20 && (unsigned char)*c != 0x7f);
        journal_restore_report_free(&rep);
    }
    journal_close(j);
    assert_file(root, "dev/sda", "disk\n");
    assert_file(root, "proc/sysrq-trigger", "\n");
    assert_file(root, "proc/sys/kernel/core_pattern", "core\n");
    assert_file(root, "sys/kernel/uevent_helper", "\n");
    assert_file(root, "etc/passwd", "root:x:0:0\n");
    assert_file(root, "sys/" GOV, "powersave\n");
    /* kept: the journal is as it was, byte for byte */
    char *after = slurp(root, JRNL);
    assert_string_equal(after, before);
    free(before);
    free(after);
    host_close(h);
    tree_free(root);
}

/* A journal or directory someone else could write is refused before
 * anything is created or written. */
static void test_untrusted(void **state)
{
    static const struct {
        const char *path;
        mode_t mode;
        uid_t uid;
        const char *want;
    } cases[] = {
        {JRNL, 0666, 0, "is writable by others (mode 0666)"},
        {JRNL, 0620, 0, "is writable by its group (mode 0620)"},
        {"var/lib/watt", 0777, 0, "var/lib/watt is writable by others (mode 0777)"},
        {"var", 0757, 0, "/var is writable by others"},
        {JRNL, 0644, 4242, "is owned by uid 4242, not by root"},
        {"var/lib/watt", 0755, 4242, "var/lib/watt is owned by uid 4242"},
        {"var/lib", 01777, 0, NULL}, /* sticky, as /tmp: what is below counts */
    };
    if (geteuid() != 0)
        skip();
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        char *root = make_root();
        static const char *const one[] = {"dir=sys path=" GOV " old=powersave%0A new=performance"};
        forge(root, one, 1);
        tree_write(root, "sys/" GOV, "performance\n");
        char *p = xasprintf("%s/%s", root, cases[i].path);
        assert_int_equal(chmod(p, cases[i].mode), 0);
        assert_int_equal(chown(p, cases[i].uid, 0), 0);
        struct host *h;
        assert_int_equal(host_open(root, &h), 0);
        struct journal *j = NULL;
        char *err = NULL;
        if (!cases[i].want) {
            assert_int_equal(journal_open(h, NULL, "cli", &j, &err), 0);
            journal_close(j);
            host_close(h);
            free(p);
            tree_free(root);
            continue;
        }
        assert_int_equal(journal_open(h, NULL, "cli", &j, &err), -EPERM);
        if (!strstr(err, cases[i].want))
            fail_msg("%s: got '%s'", cases[i].path, err);
        free(err);
        err = NULL;
        struct journal_log log;
        assert_int_equal(journal_read_err(h, NULL, &log, &err), -EPERM);
        assert_non_null(strstr(err, cases[i].want));
        free(err);
        assert_false(exists(root, JRNL ".lock")); /* nothing created */
        assert_file(root, "sys/" GOV, "performance\n");
        host_close(h);
        free(p);
        tree_free(root);
    }
}

/* A value someone changed since watt wrote it is left and kept; --force
 * writes it. A record whose write never happened still restores. */
static void test_changed_since(void **state)
{
    char *root = make_root();
    struct host *h;
    assert_int_equal(host_open(root, &h), 0);
    struct journal *j = open_journal(h);
    assert_int_equal(journal_set(j, HOST_SYS, GOV, "performance", NULL), 0);
    assert_int_equal(journal_set(j, HOST_PROC, WB, "1500", NULL), 0);
    journal_close(j);
    tree_write(root, "sys/" GOV, "schedutil\n"); /* an administrator */
    j = open_journal(h);
    struct journal_restore_report rep;
    assert_int_equal(journal_restore(j, NULL, JOURNAL_DRY_RUN, &rep), -EIO);
    assert_int_equal(rep.changed, 1);
    assert_int_equal(rep.restored, 1);
    assert_int_equal(count_lines(&rep, "would leave"), 1);
    journal_restore_report_free(&rep);
    assert_int_equal(journal_restore(j, NULL, 0, &rep), -EIO);
    assert_int_equal(rep.changed, 1);
    assert_int_equal(rep.restored, 1);
    assert_int_equal(count_lines(&rep, "it shows 'schedutil', not 'performance' that watt wrote"),
                     1);
    journal_restore_report_free(&rep);
    assert_file(root, "sys/" GOV, "schedutil\n");
    assert_file(root, "proc/" WB, "500\n");
    /* kept for --force */
    struct journal_log log;
    assert_int_equal(journal_read(h, NULL, &log), 0);
    assert_int_equal(log.n, 1);
    assert_int_equal(journal_judge(h, &log, &log.v[0], NULL, NULL), JOURNAL_CHANGED);
    journal_log_free(&log);
    assert_int_equal(journal_restore(j, NULL, JOURNAL_FORCE, &rep), 0);
    assert_int_equal(rep.restored, 1);
    journal_restore_report_free(&rep);
    assert_file(root, "sys/" GOV, "powersave\n");
    journal_close(j);
    host_close(h);
    tree_free(root);
}

/* A write torn by a crash on a recorded tree (truncated, not yet
 * written): no value a knob takes, so nobody set it: it is restored. */
static void test_torn_write(void **state)
{
    char *root = make_root();
    struct host *h;
    assert_int_equal(host_open(root, &h), 0);
    struct journal *j = open_journal(h);
    assert_int_equal(journal_set(j, HOST_SYS, GOV, "performance", NULL), 0);
    tree_write(root, "sys/" GOV, "");
    struct journal_restore_report rep;
    assert_int_equal(journal_restore(j, NULL, 0, &rep), 0);
    assert_int_equal(rep.restored, 1);
    assert_int_equal(rep.changed, 0);
    journal_restore_report_free(&rep);
    assert_file(root, "sys/" GOV, "powersave\n");
    journal_close(j);
    host_close(h);
    tree_free(root);
}

/* Two records of one path: the chain restores to the first's old value. */
static void test_chain(void **state)
{
    char *root = make_root();
    struct host *h;
    assert_int_equal(host_open(root, &h), 0);
    struct journal *j = open_journal(h);
    assert_int_equal(journal_set(j, HOST_SYS, GOV, "performance", NULL), 0);
    journal_begin(j);
    assert_int_equal(journal_set(j, HOST_SYS, GOV, "ondemand", NULL), 0);
    struct journal_restore_report rep;
    assert_int_equal(journal_restore(j, NULL, JOURNAL_DRY_RUN, &rep), 0);
    assert_int_equal(rep.restored, 2);
    journal_restore_report_free(&rep);
    assert_int_equal(journal_restore(j, NULL, 0, &rep), 0);
    assert_int_equal(rep.restored, 2);
    journal_restore_report_free(&rep);
    assert_file(root, "sys/" GOV, "powersave\n");
    journal_close(j);
    host_close(h);
    tree_free(root);
}

/* Records of an earlier boot are not written (the boot set the files) but
 * moved to journal.earlier-boot, itself a journal that --force restores. */
static void test_earlier_boot(void **state)
{
    char *root = make_root();
    tree_write(root, BOOT, BOOT_A "\n");
    struct host *h;
    assert_int_equal(host_open(root, &h), 0);
    struct journal *j = open_journal(h);
    assert_int_equal(journal_set(j, HOST_SYS, GOV, "performance", NULL), 0);
    journal_close(j);
    char *text = slurp(root, JRNL);
    assert_non_null(strstr(text, " boot=" BOOT_A " crc="));
    free(text);
    /* the reboot: a new boot_id, the file back at its boot value */
    tree_write(root, BOOT, BOOT_B "\n");
    tree_write(root, "sys/" GOV, "schedutil\n");
    j = open_journal(h);
    struct journal_restore_report rep;
    assert_int_equal(journal_restore(j, NULL, 0, &rep), 0);
    assert_int_equal(rep.earlier_boot, 1);
    assert_int_equal(rep.restored, 0);
    assert_non_null(rep.boot_file);
    assert_non_null(strstr(rep.boot_file, "/var/lib/watt/journal.earlier-boot"));
    assert_int_equal(count_lines(&rep, "is from an earlier boot"), 1);
    journal_restore_report_free(&rep);
    journal_close(j);
    assert_file(root, "sys/" GOV, "schedutil\n");
    assert_file(root, JRNL, "watt-journal 1\n");
    /* the side file is a journal: restoring it with --force writes it */
    j = NULL;
    char *err = NULL;
    assert_int_equal(journal_open(h, JRNL ".earlier-boot", "cli", &j, &err), 0);
    assert_int_equal(journal_restore(j, NULL, 0, &rep), 0);
    assert_int_equal(rep.earlier_boot, 1);
    journal_restore_report_free(&rep);
    journal_close(j);
    assert_int_equal(journal_open(h, JRNL ".earlier-boot.earlier-boot", "cli", &j, &err), 0);
    assert_int_equal(journal_restore(j, NULL, JOURNAL_FORCE, &rep), 0);
    assert_int_equal(rep.restored, 1);
    journal_restore_report_free(&rep);
    journal_close(j);
    assert_file(root, "sys/" GOV, "powersave\n");
    struct stat st;
    char *side = xasprintf("%s/" JRNL ".earlier-boot", root);
    assert_int_equal(stat(side, &st), 0);
    assert_int_equal(st.st_mode & 022, 0); /* writable by root only */
    free(side);
    host_close(h);
    tree_free(root);
}

/* A line that fails its checksum is never dropped: it goes, with where
 * it was and why, to journal.corrupt, and the restore says so. */
static void test_corrupt_kept(void **state)
{
    char *root = make_root();
    struct host *h;
    assert_int_equal(host_open(root, &h), 0);
    struct journal *j = open_journal(h);
    assert_int_equal(journal_set(j, HOST_SYS, GOV, "performance", NULL), 0);
    journal_close(j);
    char path[4096];
    snprintf(path, sizeof(path), "%s/" JRNL, root);
    FILE *f = fopen(path, "a");
    fputs("W seq=9 tx=9 t=1 pid=1 owner=cli dir=proc path=" WB " old=1 new=2 crc=deadbeef\n", f);
    fclose(f);
    j = open_journal(h);
    struct journal_restore_report rep;
    assert_int_equal(journal_restore(j, NULL, 0, &rep), -EIO);
    assert_int_equal(rep.skipped, 1);
    assert_int_equal(rep.restored, 1);
    assert_non_null(rep.corrupt_file);
    journal_restore_report_free(&rep);
    journal_close(j);
    assert_file(root, JRNL, "watt-journal 1\n");
    char *want = xasprintf("# journal line 3: checksum mismatch; not restored (from %s/" JRNL
                           ")\nW seq=9 tx=9 t=1 pid=1 owner=cli dir=proc path=" WB
                           " old=1 new=2 crc=deadbeef\n",
                           root);
    assert_file(root, JRNL ".corrupt", want);
    free(want);
    host_close(h);
    tree_free(root);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_knob_table),   cmocka_unit_test(test_forged),
        cmocka_unit_test(test_untrusted),    cmocka_unit_test(test_changed_since),
        cmocka_unit_test(test_chain),        cmocka_unit_test(test_earlier_boot),
        cmocka_unit_test(test_corrupt_kept), cmocka_unit_test(test_torn_write),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
