/* The fleet controller on an in-memory fleet: a fake VM engine and a fake
 * BMC whose hosts, domains, CPU counters and faults the test sets. Checks
 * the loop's decisions and its invariants at every tick: every VM runs
 * exactly once, no host goes off while it runs a domain, the journal
 * closes every action, a crash is recovered without doing anything twice. */
#include <errno.h>
#include <math.h>
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

#define NH 3
#define NV 4

struct fake {
    struct fx_vms vms;
    struct fx_power power;
    bool on[NH];
    bool bmc_mute[NH];
    bool hv_down[NH];   /* the hypervisor does not answer, the BMC says on */
    int where[NV];      /* host of each VM, -1 none */
    double load[NV];    /* CPU share 0..1 */
    uint64_t cpu[NV];   /* ns */
    int fail_migrate;   /* errno to return from the next migrations, 0: none */
    int foreign_on;     /* a foreign domain appears on this host from the second list
                         * of a tick on (the safety check's), -1: none */
    unsigned lists[NH]; /* list calls per host this tick */
    uint64_t t_ns;
    unsigned offs_with_vms; /* the invariant the test checks */
    unsigned migrations;
    int stale[NV];         /* host of a second copy of each VM (a failed migration's), -1 none */
    bool stale_runs[NV];   /* that copy runs too (else it is paused) */
    unsigned destroyed;    /* copies destroyed */
    unsigned destroy_busy; /* destroy_paused calls on a copy that runs */
};

static struct fake *F;
static const char *const names[NV] = {"vm1", "vm2", "vm3", "vm4"};

static int f_list(struct fx_vms *x, size_t hi, struct fx_list *ret, struct fleet_error *err)
{
    if (!F->on[hi] || F->hv_down[hi]) {
        fleet_error_set(err, "host h%zu: cannot connect: Connection refused", hi + 1);
        return -EHOSTUNREACH;
    }
    struct fx_list l = {.t_ns = F->t_ns, .node = {.mem_kib = 2048 * 1024}};
    l.v = xcalloc(2 * NV + 1, sizeof(*l.v));
    for (int v = 0; v < NV; v++)
        if (F->where[v] == (int)hi)
            l.v[l.n++] = (struct fx_domain){.name = xstrdup(names[v]),
                                            .active = true,
                                            .running = true,
                                            .persistent = true,
                                            .cpu_ns = F->cpu[v],
                                            .vcpus = 1,
                                            .mem_kib = 128 * 1024};
    for (int v = 0; v < NV; v++)
        if (F->stale[v] == (int)hi)
            l.v[l.n++] = (struct fx_domain){.name = xstrdup(names[v]),
                                            .active = true,
                                            .running = F->stale_runs[v],
                                            .cpu_ns = 0,
                                            .vcpus = 1,
                                            .mem_kib = 128 * 1024};
    if (F->foreign_on == (int)hi && ++F->lists[hi] >= 2)
        l.v[l.n++] = (struct fx_domain){
            .name = xstrdup("stranger"), .active = true, .vcpus = 1, .mem_kib = 64 * 1024};
    *ret = l;
    return 0;
}

static int f_migrate(struct fx_vms *x, const char *vm, size_t src, size_t dst, double timeout_s,
                     struct fleet_error *err)
{
    int v = 0;
    while (v < NV && strcmp(names[v], vm))
        v++;
    if (v == NV || F->where[v] != (int)src) {
        fleet_error_set(err, "vm '%s' is not on host h%zu", vm, src + 1);
        return -ENOENT;
    }
    if (F->fail_migrate) {
        fleet_error_set(err, "migration of %s timed out and was aborted", vm);
        return -F->fail_migrate;
    }
    if (!F->on[dst])
        return -EHOSTUNREACH;
    F->where[v] = (int)dst;
    F->migrations++;
    return 0;
}

static void f_close_vms(struct fx_vms *x)
{
}

static int f_destroy_paused(struct fx_vms *x, const char *vm, size_t hi, struct fleet_error *err)
{
    int v = 0;
    while (v < NV && strcmp(names[v], vm))
        v++;
    if (v < NV && F->stale[v] == (int)hi && !F->stale_runs[v]) {
        F->stale[v] = -1;
        F->destroyed++;
        return 0;
    }
    if (v < NV && (F->where[v] == (int)hi || F->stale[v] == (int)hi)) {
        F->destroy_busy++;
        fleet_error_set(err, "vm '%s' is not paused on h%zu", vm, hi + 1);
        return -EBUSY;
    }
    fleet_error_set(err, "vm '%s' is not active on h%zu", vm, hi + 1);
    return -ENOENT;
}

static int f_status(struct fx_power *x, size_t hi, enum fx_power_state *ret,
                    struct fleet_error *err)
{
    if (F->bmc_mute[hi]) {
        fleet_error_set(err, "host h%zu: BMC does not answer", hi + 1);
        return -EHOSTUNREACH;
    }
    *ret = F->on[hi] ? FX_POWER_ON : FX_POWER_OFF;
    return 0;
}

static int f_set(struct fx_power *x, size_t hi, bool on, struct fleet_error *err)
{
    if (F->bmc_mute[hi])
        return -EHOSTUNREACH;
    if (!on)
        for (int v = 0; v < NV; v++) {
            if (F->where[v] == (int)hi) {
                F->offs_with_vms++;
                F->where[v] = -1; /* a power cut kills it */
            }
            if (F->stale[v] == (int)hi)
                F->offs_with_vms++;
        }
    F->on[hi] = on;
    return 0;
}

static int f_reading(struct fx_power *x, size_t hi, double *w, struct fleet_error *err)
{
    *w = 100;
    return 0;
}

static void f_close_power(struct fx_power *x)
{
}

#define INI_HEAD "[controller]\ninterval_s = 10\nvms = vm1, vm2, vm3, vm4\nstate_dir = "
static const char *INI_TAIL = "\n"
                              "policy = off_after=1,window=2\n"
                              "[type tiny]\n"
                              "cores = 2\nmips_per_core = 1000\nram_mb = 2048\n"
                              "power_w = 50,60,70,80,90,100,110,120,130,140,150\nboot_s = 5\n"
                              "[host h1]\ntype = tiny\nuri = fake://1\nbmc = 127.0.0.1:1\n"
                              "bmc_user = a\nbmc_password = b\n"
                              "[host h2]\ntype = tiny\nuri = fake://2\nbmc = 127.0.0.1:2\n"
                              "bmc_user = a\nbmc_password = b\n"
                              "[host h3]\ntype = tiny\nuri = fake://3\nbmc = 127.0.0.1:3\n"
                              "bmc_user = a\nbmc_password = b\n";

struct world {
    char dir[64];
    struct site site;
    struct controller *c;
    struct fake fake;
    double now;
    FILE *out;
};

static void open_controller(struct world *w)
{
    struct fleet_error err = {{0}};
    struct fake *f = &w->fake;
    f->vms = (struct fx_vms){.name = "fake",
                             .list = f_list,
                             .migrate = f_migrate,
                             .close = f_close_vms,
                             .destroy_paused = f_destroy_paused};
    f->power = (struct fx_power){"fake", f_status, f_set, f_reading, f_close_power};
    struct ctl_options opt = {0};
    int r = controller_open_engines(&w->site, &opt, &f->vms, &f->power, &w->c, &err);
    if (r < 0)
        fail_msg("controller_open_engines: %s", err.msg);
}

static int setup(void **state)
{
    struct world *w = xcalloc(1, sizeof(*w));
    snprintf(w->dir, sizeof(w->dir), "/tmp/watt-fleet-ctl-XXXXXX");
    assert_non_null(mkdtemp(w->dir));
    _cleanup_free_ char *ini = NULL;
    if (asprintf(&ini, "%s%s%s", INI_HEAD, w->dir, INI_TAIL) < 0)
        abort();
    struct fleet_error err = {{0}};
    if (site_parse(ini, strlen(ini), "test.ini", &w->site, &err) < 0)
        fail_msg("site_parse: %s", err.msg);
    F = &w->fake;
    for (int h = 0; h < NH; h++)
        F->on[h] = true;
    /* spread: vm1, vm4 on h1; vm2 on h2; vm3 on h3 */
    int at[NV] = {0, 1, 2, 0};
    for (int v = 0; v < NV; v++) {
        F->where[v] = at[v];
        F->load[v] = 0.05;
        F->stale[v] = -1;
    }
    F->foreign_on = -1;
    /* WATT_TEST_VERBOSE=1: the controller's report on stdout */
    w->out = getenv("WATT_TEST_VERBOSE") ? fdopen(dup(1), "w") : fopen("/dev/null", "w");
    open_controller(w);
    *state = w;
    return 0;
}

static int teardown(void **state)
{
    struct world *w = *state;
    controller_close(w->c);
    site_free(&w->site);
    fclose(w->out);
    _cleanup_free_ char *cmd = xasprintf("rm -rf '%s'", w->dir);
    assert_int_equal(system(cmd), 0);
    free(w);
    return 0;
}

/* Ten seconds pass, then one tick; the invariants after it. */
static void tick(struct world *w)
{
    w->now += 10;
    F->t_ns += 10000000000ull;
    memset(F->lists, 0, sizeof(F->lists));
    for (int v = 0; v < NV; v++)
        if (F->where[v] >= 0)
            F->cpu[v] += (uint64_t)(F->load[v] * 1e10);
    assert_int_equal(controller_tick(w->c, w->now, w->out, true), 0);
    for (int v = 0; v < NV; v++)
        assert_true(F->where[v] >= 0); /* every VM runs, once (one slot each) */
    assert_int_equal(F->offs_with_vms, 0);
}

static int hosts_on(void)
{
    int n = 0;
    for (int h = 0; h < NH; h++)
        n += F->on[h];
    return n;
}

static void test_packs_then_spreads(void **state)
{
    struct world *w = *state;
    for (int i = 0; i < 6; i++)
        tick(w);
    assert_int_equal(hosts_on(), 1);
    for (int v = 1; v < NV; v++)
        assert_int_equal(F->where[v], F->where[0]);
    /* load rises: two VMs busy need two hosts at pack = 0.8 of 2000 MIPS */
    F->load[0] = F->load[1] = 1.0;
    for (int i = 0; i < 6; i++)
        tick(w);
    assert_true(hosts_on() >= 2);
    assert_int_not_equal(F->where[0], F->where[1]);
}

static void test_failed_migration_keeps_vm_and_host(void **state)
{
    struct world *w = *state;
    F->fail_migrate = ETIMEDOUT;
    for (int i = 0; i < 4; i++)
        tick(w);
    assert_int_equal(F->migrations, 0);
    assert_int_equal(hosts_on(), 3); /* nothing drained: nothing switched off */
    assert_true(w->c->migrations_failed > 0);
    F->fail_migrate = 0;
    for (int i = 0; i < 6; i++)
        tick(w);
    assert_int_equal(hosts_on(), 1);
}

static void test_mute_bmc_never_off(void **state)
{
    struct world *w = *state;
    F->bmc_mute[2] = true; /* h3's BMC: no answer, its hypervisor answers */
    for (int i = 0; i < 8; i++)
        tick(w);
    assert_true(F->on[2]); /* a host whose BMC is mute is never switched off */
    F->bmc_mute[2] = false;
    for (int i = 0; i < 8; i++)
        tick(w);
    assert_int_equal(hosts_on(), 1);
}

static void test_foreign_domain_refused(void **state)
{
    struct world *w = *state;
    /* a stranger shows up on h3 between the tick's observation and the
     * power-off: the fresh list before it catches it */
    F->foreign_on = 2;
    for (int i = 0; i < 8; i++)
        tick(w);
    assert_true(F->on[2]);
    assert_true(w->c->safety_refusals > 0);
    assert_false(F->on[1]); /* h2 had no stranger */
}

static void test_unseen_vm_blocks_power_off(void **state)
{
    struct world *w = *state;
    tick(w); /* vm3 seen on h3 */
    F->hv_down[2] = true;
    for (int i = 0; i < 8; i++)
        tick(w);
    /* h2 was drained, but with vm3 unaccounted for no capacity goes */
    assert_true(F->on[0] && F->on[1] && F->on[2]);
    assert_true(w->c->safety_refusals > 0);
    F->hv_down[2] = false;
    for (int i = 0; i < 8; i++)
        tick(w);
    assert_int_equal(hosts_on(), 1);
}

static void test_dry_run_writes_nothing(void **state)
{
    struct world *w = *state;
    controller_close(w->c);
    _cleanup_free_ char *path = xasprintf("%s/journal", w->dir);
    unlink(path);
    struct fleet_error err = {{0}};
    struct ctl_options opt = {.dry_run = true};
    assert_int_equal(controller_open_engines(&w->site, &opt, &F->vms, &F->power, &w->c, &err), 0);
    for (int i = 0; i < 4; i++)
        tick(w);
    assert_int_equal(F->migrations, 0);
    assert_int_equal(hosts_on(), 3);
    assert_int_equal(access(path, F_OK), -1);
}

static void test_damaged_journal_refused(void **state)
{
    struct world *w = *state;
    controller_close(w->c);
    w->c = NULL;
    _cleanup_free_ char *path = xasprintf("%s/journal", w->dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "1 1700000000.000 begin power_off host=h2\nrubbish\n");
    fclose(f);
    struct fleet_error err = {{0}};
    struct ctl_options opt = {0};
    assert_int_equal(controller_open_engines(&w->site, &opt, &F->vms, &F->power, &w->c, &err),
                     -EINVAL);
    assert_non_null(strstr(err.msg, "journal line 2: not a journal record"));
    unlink(path);
    open_controller(w); /* for teardown */
}

static void test_recovers_open_journal(void **state)
{
    struct world *w = *state;
    controller_close(w->c);
    _cleanup_free_ char *path = xasprintf("%s/journal", w->dir);
    FILE *f = fopen(path, "a");
    assert_non_null(f);
    /* a crash after "begin", before "end"; and a torn line */
    fprintf(f, "1 1700000000.000 begin migrate vm=vm2 src=h2 dst=h1\n2 "
               "1700000001.0 beg");
    fclose(f);
    open_controller(w);
    char buf[4096] = "";
    f = fopen(path, "r");
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    assert_non_null(strstr(buf, "end 1 recovered vm=vm2 on=h2"));
    assert_null(strstr(buf, "beg\n"));
    assert_int_equal(F->migrations, 0); /* not done again */
    tick(w);
}

static void test_second_controller_refused(void **state)
{
    struct world *w = *state;
    struct fake other = w->fake;
    struct controller *c2 = NULL;
    struct fleet_error err = {{0}};
    struct ctl_options opt = {0};
    int r = controller_open_engines(&w->site, &opt, &other.vms, &other.power, &c2, &err);
    assert_int_equal(r, -EBUSY);
    assert_non_null(strstr(err.msg, "another watt fleet run holds the lock"));
}

/* A NUL byte in a journal line used to crash the controller (strchr found
 * no newline after it); the journal is now refused, naming the line. */
static void test_journal_nul_byte_refused(void **state)
{
    struct world *w = *state;
    controller_close(w->c);
    w->c = NULL;
    _cleanup_free_ char *path = xasprintf("%s/journal", w->dir);
    static const char text[] = "1 1700000000.000 begin power_off host=h2\n"
                               "2 1700000001.000 end 1 ok\0host=h2\n";
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_int_equal(fwrite(text, 1, sizeof(text) - 1, f), sizeof(text) - 1);
    fclose(f);
    struct fleet_error err = {{0}};
    struct ctl_options opt = {0};
    assert_int_equal(controller_open_engines(&w->site, &opt, &F->vms, &F->power, &w->c, &err),
                     -EINVAL);
    assert_non_null(strstr(err.msg, "journal line 2: a NUL byte"));
    unlink(path);
    open_controller(w); /* for teardown */
}

/* A sequence number of LONG_MAX made the next one overflow (undefined;
 * in practice a negative number the next start refused): such a line, and
 * one out of range, is not a record. Found by fuzz_fleet_journal. */
static void test_journal_seq_overflow_refused(void **state)
{
    struct world *w = *state;
    controller_close(w->c);
    w->c = NULL;
    _cleanup_free_ char *path = xasprintf("%s/journal", w->dir);
    static const char *const texts[] = {
        "9223372036854775807 1700000000.000 begin power_off host=h2\n",
        "99999999999999999999 1700000000.000 begin power_off host=h2\n",
        "1 1700000000.000 begin power_off host=h2\n"
        "2 1700000001.000 end 99999999999999999999 ok\n",
    };
    for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
        FILE *f = fopen(path, "w");
        assert_non_null(f);
        fputs(texts[i], f);
        fclose(f);
        struct fleet_error err = {{0}};
        struct ctl_options opt = {0};
        assert_int_equal(controller_open_engines(&w->site, &opt, &F->vms, &F->power, &w->c, &err),
                         -EINVAL);
        assert_non_null(strstr(err.msg, "not a journal record"));
    }
    unlink(path);
    open_controller(w); /* for teardown */
}

/* fleet.ini's policy = is checked when the file is read, not taken as
 * strtod() reads it ("pack=O.8" was a pack of 0: no VM fits anywhere). */
static void test_policy_tunables_checked(void **state)
{
    static const char *const bad[] = {"pack=O.8", "window=-1", "quantile=nan", "speed=3"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        _cleanup_free_ char *ini = xasprintf("%s/tmp/x\npolicy = %s\n%s", INI_HEAD, bad[i],
                                             strchr(INI_TAIL + 1, '\n') + 1);
        struct site s;
        struct fleet_error err = {{0}};
        if (site_parse(ini, strlen(ini), "test.ini", &s, &err) != -EINVAL)
            fail_msg("policy = %s accepted", bad[i]);
        assert_non_null(strstr(err.msg, "test.ini line 5: policy: "));
    }
}

static void test_journal_words(void **state)
{
    static const char *const words[] = {"web1", "web 1", "100%=done", "tab\there", "é", ""};
    for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++) {
        _cleanup_free_ char *w = ctl_journal_word(words[i]);
        char back[64];
        assert_null(strpbrk(w, " \t\n="));
        assert_int_equal(ctl_journal_unword(w, back, sizeof(back)), 0);
        assert_string_equal(back, words[i]);
    }
    char out[8];
    assert_int_equal(ctl_journal_unword("%4", out, sizeof(out)), -EINVAL);
    assert_int_equal(ctl_journal_unword("%zz", out, sizeof(out)), -EINVAL);
    /* exactly two hex digits: sscanf("%2x") took these */
    assert_int_equal(ctl_journal_unword("% 1", out, sizeof(out)), -EINVAL);
    assert_int_equal(ctl_journal_unword("%+1", out, sizeof(out)), -EINVAL);
    assert_int_equal(ctl_journal_unword("%-1", out, sizeof(out)), -EINVAL);
    assert_int_equal(ctl_journal_unword("%0x", out, sizeof(out)), -EINVAL);
    assert_int_equal(ctl_journal_unword("%4a%4A", out, sizeof(out)), 0);
    assert_string_equal(out, "JJ");
    assert_int_equal(ctl_journal_unword("123456789", out, sizeof(out)), -ENAMETOOLONG);
}

/* ---- the warm start (control_history.c) ------------------------------ */

/* Parse fleet.ini again with POLICY, and open a controller on it. */
static void use_policy(struct world *w, const char *policy)
{
    controller_close(w->c);
    site_free(&w->site);
    _cleanup_free_ char *ini = xasprintf("%s%s\npolicy = %s\n%s", INI_HEAD, w->dir, policy,
                                         strchr(INI_TAIL + 1, '\n') + 1);
    struct fleet_error err = {{0}};
    if (site_parse(ini, strlen(ini), "test.ini", &w->site, &err) < 0)
        fail_msg("site_parse: %s", err.msg);
    open_controller(w);
}

/* One tick whose report (JSON) is returned. */
static char *tick_report(struct world *w)
{
    char *text = NULL;
    size_t len = 0;
    FILE *out = w->out;
    w->out = open_memstream(&text, &len);
    assert_non_null(w->out);
    tick(w);
    fclose(w->out);
    w->out = out;
    return text;
}

static char *metrics_text(const struct controller *c)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    controller_metrics(c, f);
    fclose(f);
    return text;
}

static void restart(struct world *w)
{
    controller_close(w->c);
    w->c = NULL;
    open_controller(w);
}

/* CRC-32 (IEEE), bit by bit: not the controller's code. */
static uint32_t crc32_ref(const char *s, size_t len)
{
    uint32_t crc = 0xffffffffu;
    for (size_t i = 0; i < len; i++) {
        crc ^= (unsigned char)s[i];
        for (int b = 0; b < 8; b++)
            crc = crc & 1 ? (crc >> 1) ^ 0xedb88320u : crc >> 1;
    }
    return ~crc;
}

/* state_dir/history with BODY (its VM lines) and a right end line. */
static void write_history(struct world *w, const char *body, mode_t mode)
{
    _cleanup_free_ char *path = xasprintf("%s/history", w->dir);
    _cleanup_free_ char *head = xasprintf("watt-fleet-history 1\n%s", body);
    size_t n = 0;
    for (const char *p = body; (p = strstr(p, "vm ")) && (p == body || p[-1] == '\n'); p++)
        n++;
    unlink(path);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "%send %zu crc32=%08x\n", head, n, crc32_ref(head, strlen(head)));
    fclose(f);
    assert_int_equal(chmod(path, mode), 0);
}

static bool any_history(const struct controller *c)
{
    for (size_t i = 0; i < c->n_vm; i++)
        if (c->vm[i].hist_n)
            return true;
    return false;
}

/* What a controller saves, a restarted one reads back: every VM's samples
 * and their times, in a file of its own (0600, replaced by rename). */
static void test_history_round_trip(void **state)
{
    struct world *w = *state;
    F->load[2] = 0.5;
    for (int i = 0; i < 4; i++)
        tick(w);
    struct ctl_vm before[NV];
    for (int v = 0; v < NV; v++) {
        int32_t vi = ctl_vm_index(w->c, names[v], false);
        assert_true(vi >= 0);
        before[v] = w->c->vm[vi];
        assert_true(before[v].hist_n >= 2); /* ticks 2, 3 and 4; a VM moved has one less */
    }
    _cleanup_free_ char *path = xasprintf("%s/history", w->dir);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    restart(w);
    unsigned have, need;
    assert_true(ctl_warm(w->c, &have, &need));
    assert_int_equal(have, 2);
    assert_int_equal(need, 2);
    assert_string_equal(w->c->history_error, "");
    for (int v = 0; v < NV; v++) {
        const struct ctl_vm *after = &w->c->vm[ctl_vm_index(w->c, names[v], false)];
        assert_int_equal(after->hist_n, before[v].hist_n);
        for (unsigned k = 0; k < after->hist_n; k++) {
            assert_true(fabs(after->hist[k] - before[v].hist[k]) < 1e-6);
            assert_true(fabs(after->hist_t[k] - before[v].hist_t[k]) < 1e-3);
        }
        assert_true(fabs(after->seen_unix_s - before[v].seen_unix_s) < 1e-3);
    }
    assert_true(fabs(w->c->vm[ctl_vm_index(w->c, "vm3", false)].hist[0] - 0.5) < 1e-6);
    /* a dry run reads it and writes nothing */
    controller_close(w->c);
    assert_int_equal(stat(path, &st), 0);
    struct fleet_error err = {{0}};
    struct ctl_options opt = {.dry_run = true};
    assert_int_equal(controller_open_engines(&w->site, &opt, &F->vms, &F->power, &w->c, &err), 0);
    assert_true(ctl_warm(w->c, NULL, NULL));
    struct stat st2;
    tick(w);
    assert_int_equal(stat(path, &st2), 0);
    assert_int_equal(st2.st_mtim.tv_nsec, st.st_mtim.tv_nsec);
    assert_int_equal(st2.st_ino, st.st_ino);
}

/* A file that is not the controller's own, or not what it writes, is
 * refused with its name and line, and the controller starts cold. */
static void test_history_hostile_refused(void **state)
{
    struct world *w = *state;
    _cleanup_free_ char *path = xasprintf("%s/history", w->dir);
    double now = (double)now_realtime_ns() / 1e9;
    _cleanup_free_ char *good =
        xasprintf("vm vm1 %.3f 2 %.3f:0.100000 %.3f:0.200000\n", now, now, now - 10);
    _cleanup_free_ char *twice = xasprintf("%s%s", good, good);
    _cleanup_free_ char *ahead = xasprintf("vm vm1 %.3f 2 %.3f:0.1 %.3f:0.2\n", now, now - 10, now);
    _cleanup_free_ char *over1 = xasprintf("vm vm1 %.3f 1 %.3f:1.5\n", now, now);
    _cleanup_free_ char *nan = xasprintf("vm vm1 %.3f 1 %.3f:nan\n", now, now);
    _cleanup_free_ char *more = xasprintf("vm vm1 %.3f 1 %.3f:0.1 %.3f:0.1\n", now, now, now);
    _cleanup_free_ char *neg = xasprintf("vm vm1 %.3f 1 -%.3f:0.1\n", now, now);
    _cleanup_free_ char *n31 = xasprintf("vm vm1 %.3f 31 %.3f:0.1\n", now, now);
    _cleanup_free_ char *blank = xasprintf("vm  vm1 %.3f 1 %.3f:0.1\n", now, now);
    _cleanup_free_ char *esc = xasprintf("vm vm%%zz %.3f 1 %.3f:0.1\n", now, now);
    const struct {
        const char *body;
        mode_t mode;
        const char *why;
    } bad[] = {
        {good, 0620, "is writable by its group (mode 0620)"},
        {good, 0602, "is writable by others (mode 0602)"},
        {twice, 0600, "history line 3: this VM has a line already"},
        {ahead, 0600, "history line 2: samples not most recent first"},
        {over1, 0600, "history line 2: a sample: time not positive, or share above 1"},
        {nan, 0600, "history line 2: a sample: want TIME:SHARE"},
        {more, 0600, "history line 2: more samples than N"},
        {neg, 0600, "history line 2: a sample: want TIME:SHARE"},
        {n31, 0600, "history line 2: N: want 1 to 30 samples"},
        {blank, 0600, "history line 2: no VM name"},
        {esc, 0600, "history line 2: not a VM name"},
        {"rubbish\n", 0600, "history line 2: want 'vm NAME"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        controller_close(w->c);
        w->c = NULL;
        write_history(w, bad[i].body, bad[i].mode);
        open_controller(w);
        if (!strstr(w->c->history_error, bad[i].why) || !strstr(w->c->history_error, path))
            fail_msg("case %zu: '%s' does not say '%s'", i, w->c->history_error, bad[i].why);
        assert_non_null(strstr(w->c->history_error, "starting cold"));
        assert_false(any_history(w->c));
        assert_false(ctl_warm(w->c, NULL, NULL));
    }
    /* the same file, ours and 0600: taken */
    restart(w);
    write_history(w, good, 0600);
    restart(w);
    assert_string_equal(w->c->history_error, "");
    assert_int_equal(w->c->vm[ctl_vm_index(w->c, "vm1", false)].hist_n, 2);
    assert_true(ctl_warm(w->c, NULL, NULL));
    /* owned by someone else */
    if (geteuid() == 0) {
        assert_int_equal(chown(path, 65534, 65534), 0);
        restart(w);
        assert_non_null(strstr(w->c->history_error, "is owned by uid 65534, not by root or by us"));
        assert_false(any_history(w->c));
    }
    /* damaged bytes: the checksum, a NUL, the end line, a cut file, a link */
    static const char *const damage[][2] = {
        {"0.100000", "history line 3: the checksum does not match"},
        {"vm vm1", "history line 2: a NUL byte"},
        {"end 1", "history line 3: N is not the count of VM lines"},
        {"crc32=", "history line 3: want 'end N crc32=X'"},
        {"", "line 1: empty, or the last line is cut short"},
    };
    for (size_t i = 0; i < sizeof(damage) / sizeof(damage[0]); i++) {
        controller_close(w->c);
        w->c = NULL;
        write_history(w, good, 0600);
        char buf[512];
        FILE *f = fopen(path, "r+");
        size_t n = fread(buf, 1, sizeof(buf) - 1, f);
        buf[n] = '\0';
        char *at = i == 4 ? buf + n - 1 : strstr(buf, damage[i][0]);
        assert_non_null(at);
        if (i == 0)
            at[2] = '2'; /* 0.1 -> 0.2: still a good line */
        else if (i == 1)
            at[2] = '\0';
        else if (i == 2)
            at[4] = '2';
        else if (i == 3)
            at[6] = 'X';
        else
            *at = ' '; /* the last newline: cut short */
        rewind(f);
        fwrite(buf, 1, n, f);
        fclose(f);
        open_controller(w);
        if (!strstr(w->c->history_error, damage[i][1]))
            fail_msg("damage %zu: '%s' does not say '%s'", i, w->c->history_error, damage[i][1]);
        assert_false(any_history(w->c));
    }
    controller_close(w->c);
    w->c = NULL;
    unlink(path);
    _cleanup_free_ char *other = xasprintf("%s/other", w->dir);
    write_history(w, good, 0600);
    assert_int_equal(rename(path, other), 0);
    assert_int_equal(symlink(other, path), 0);
    open_controller(w);
    assert_non_null(strstr(w->c->history_error, "a symbolic link, refused"));
    assert_false(any_history(w->c));
    /* refused, and then replaced by the next tick's */
    tick(w);
    tick(w);
    restart(w);
    assert_string_equal(w->c->history_error, "");
    assert_true(any_history(w->c));
}

/* Samples older than the window x interval_s are not planned from. */
static void test_history_too_old(void **state)
{
    struct world *w = *state;
    struct fleet_watt_params wp;
    struct fleet_error perr;
    assert_int_equal(ctl_policy_params(&w->site, &wp, &perr), 0);
    double now = (double)now_realtime_ns() / 1e9, max = wp.window * 10;
    controller_close(w->c);
    w->c = NULL;
    _cleanup_free_ char *body = xasprintf("vm vm1 %.3f 2 %.3f:0.1 %.3f:0.1\n"
                                          "vm vm2 %.3f 3 %.3f:0.1 %.3f:0.1 %.3f:0.1\n",
                                          now - max - 5, now - max - 5, now - max - 15, now, now,
                                          now - max / 2, now - max - 10);
    write_history(w, body, 0600);
    open_controller(w);
    assert_string_equal(w->c->history_error, "");
    assert_int_equal(w->c->vm[ctl_vm_index(w->c, "vm1", false)].hist_n, 0);
    assert_int_equal(w->c->vm[ctl_vm_index(w->c, "vm2", false)].hist_n, 2);
    unsigned have, need;
    assert_true(ctl_warm(w->c, &have, &need));
    assert_int_equal(have, 2);
}

/* The bug: a first tick with hosts off and no CPU history counted every
 * VM at its whole size, switched hosts on and spread the VMs. Now it
 * observes for the window (6 ticks here): nothing moves, nothing is
 * switched on, and the plan, the JSON and the metrics say why. */
static void test_observing_switches_nothing_on(void **state)
{
    struct world *w = *state;
    for (int v = 0; v < NV; v++)
        F->where[v] = 0;
    F->on[1] = F->on[2] = false;
    use_policy(w, "off_after=1,window=6");
    _cleanup_free_ char *first = tick_report(w);
    assert_non_null(strstr(first, "\"observing\":true,\"samples\":0,\"window\":6"));
    assert_non_null(strstr(first, "observing: 0 of 6 samples since start; only overloads act "
                                  "until 6"));
    _cleanup_free_ char *m = metrics_text(w->c);
    assert_non_null(strstr(m, "\nwatt_fleet_observing 1\n"));
    for (int i = 1; i < 8; i++) {
        tick(w);
        assert_int_equal(hosts_on(), 1);
        assert_int_equal(F->migrations, 0);
    }
    assert_true(ctl_warm(w->c, NULL, NULL));
    free(m);
    m = metrics_text(w->c);
    assert_non_null(strstr(m, "\nwatt_fleet_observing 0\n"));
    assert_non_null(strstr(m, "\nwatt_fleet_history_samples 6\n"));
}

/* An overload does not wait for the window: the first sample that shows
 * one switches a host on, and the VMs are spread while still observing. */
static void test_observing_overload_acts(void **state)
{
    struct world *w = *state;
    for (int v = 0; v < NV; v++)
        F->where[v] = 0;
    F->on[1] = F->on[2] = false;
    F->load[0] = F->load[1] = 1.0;
    use_policy(w, "off_after=1,window=6");
    tick(w); /* no rate yet: nothing known, nothing done */
    assert_int_equal(hosts_on(), 1);
    _cleanup_free_ char *second = tick_report(w);
    assert_true(hosts_on() >= 2);
    assert_non_null(strstr(second, "\"action\":\"power_on\""));
    assert_non_null(strstr(second, "observing: 1 of 6 samples"));
    for (int i = 0; i < 2; i++)
        tick(w);
    assert_false(ctl_warm(w->c, NULL, NULL));
    assert_int_not_equal(F->where[0], F->where[1]);
}

/* A restart with fresh samples plans from them at once; without them
 * (the file removed) the same fleet waits. */
static void test_restart_with_history_acts_at_once(void **state)
{
    struct world *w = *state;
    F->fail_migrate = ETIMEDOUT; /* warm, but nothing moves */
    for (int i = 0; i < 3; i++)
        tick(w);
    assert_true(w->c->migrations_failed > 0);
    assert_int_equal(F->migrations, 0);
    F->fail_migrate = 0;
    /* cold: the history gone */
    controller_close(w->c);
    w->c = NULL;
    _cleanup_free_ char *path = xasprintf("%s/history", w->dir);
    _cleanup_free_ char *keep = xasprintf("%s/history.keep", w->dir);
    assert_int_equal(rename(path, keep), 0);
    open_controller(w);
    tick(w);
    assert_int_equal(F->migrations, 0);
    assert_false(ctl_warm(w->c, NULL, NULL));
    /* warm: the same history back */
    controller_close(w->c);
    w->c = NULL;
    assert_int_equal(rename(keep, path), 0);
    open_controller(w);
    _cleanup_free_ char *first = tick_report(w);
    assert_true(F->migrations > 0);
    assert_non_null(strstr(first, "\"observing\":false"));
    assert_null(strstr(first, "observing:"));
}

/* ---- the operator's side: constraints, maintenance, manual mode ------------ */

/* The controller again, on fleet.ini with EXTRA: [controller] keys after
 * state_dir (line 5 on), or sections ("[pin]...") at the end. */
static void reopen(struct world *w, const char *extra)
{
    controller_close(w->c);
    site_free(&w->site);
    _cleanup_free_ char *ini = extra[0] == '['
                                   ? xasprintf("%s%s%s%s", INI_HEAD, w->dir, INI_TAIL, extra)
                                   : xasprintf("%s%s\n%s%s", INI_HEAD, w->dir, extra, INI_TAIL + 1);
    struct fleet_error err = {{0}};
    if (site_parse(ini, strlen(ini), "test.ini", &w->site, &err) < 0)
        fail_msg("site_parse: %s", err.msg);
    open_controller(w);
}

static char *slurp(const char *dir, const char *name)
{
    _cleanup_free_ char *path = xasprintf("%s/%s", dir, name);
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    char *buf = xcalloc(1, 1 << 16);
    size_t n = fread(buf, 1, (1 << 16) - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static void put(const char *dir, const char *name, const char *text, mode_t mode)
{
    _cleanup_free_ char *path = xasprintf("%s/%s", dir, name);
    unlink(path);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    assert_int_equal(chmod(path, mode), 0);
}

/* The ID of the first pending action of plan.json whose "what" starts with
 * PREFIX, into ID; false if none. */
static bool pending_id(const char *dir, const char *prefix, char id[OPSTATE_ID_LEN + 1])
{
    _cleanup_free_ char *plan = slurp(dir, "plan.json");
    for (const char *p = plan; p && (p = strstr(p, "{\"id\":\"")); p++) {
        snprintf(id, OPSTATE_ID_LEN + 1, "%s", p + 7);
        char what[300];
        if (opstate_plan_pending(plan, id, what, sizeof(what)) &&
            strncmp(what, prefix, strlen(prefix)) == 0)
            return true;
    }
    return false;
}

/* What `watt fleet approve` writes: ID (or "all") against the plan there now. */
static void approve(struct world *w, const char *id, double age_s)
{
    _cleanup_free_ char *plan = slurp(w->dir, "plan.json");
    uint64_t serial = 0;
    assert_non_null(plan);
    assert_int_equal(opstate_plan_serial(plan, &serial), 0);
    struct opstate_approval a = {.plan = serial, .time = (double)now_realtime_ns() / 1e9 - age_s};
    snprintf(a.id, sizeof(a.id), "%s", id);
    _cleanup_free_ char *text = opstate_approvals_format(&a, 1);
    struct fleet_error err = {{0}};
    assert_int_equal(opstate_write(w->dir, "approvals", text, strlen(text), &err), 0);
}

/* The last tick's JSON report (the world's output goes to /dev/null):
 * one more tick into a memory stream. */
static char *tick_json(struct world *w)
{
    FILE *keep = w->out;
    char *buf = NULL;
    size_t len = 0;
    w->out = open_memstream(&buf, &len);
    tick(w);
    fclose(w->out);
    w->out = keep;
    return buf;
}

static void test_manual_holds_without_approval(void **state)
{
    struct world *w = *state;
    reopen(w, "mode = manual\n");
    for (int i = 0; i < 6; i++)
        tick(w);
    assert_int_equal(F->migrations, 0);
    assert_int_equal(hosts_on(), 3);
    char id[OPSTATE_ID_LEN + 1];
    assert_true(pending_id(w->dir, "migrate ", id));
    /* the same action keeps its ID from tick to tick */
    char again[OPSTATE_ID_LEN + 1];
    tick(w);
    assert_true(pending_id(w->dir, "migrate ", again));
    assert_string_equal(id, again);
    _cleanup_free_ char *json = tick_json(w);
    assert_non_null(strstr(json, "\"mode\":\"manual\""));
    assert_non_null(strstr(json, "\"executed\":false"));
    assert_null(strstr(json, "\"executed\":true"));
    char *m = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&m, &len);
    controller_metrics(w->c, f);
    fclose(f);
    assert_non_null(strstr(m, "watt_fleet_manual 1"));
    assert_null(strstr(m, "watt_fleet_plan_pending 0"));
    assert_non_null(strstr(m, "watt_fleet_plan_actions{kind=\"migrate\"} "));
    free(m);
}

static void test_manual_executes_exactly_the_approved(void **state)
{
    struct world *w = *state;
    reopen(w, "mode = manual\n");
    for (int i = 0; i < 3; i++) /* the policy's window (2 samples) observed */
        tick(w);
    char id[OPSTATE_ID_LEN + 1], what[300];
    assert_true(pending_id(w->dir, "migrate ", id));
    _cleanup_free_ char *plan = slurp(w->dir, "plan.json");
    assert_true(opstate_plan_pending(plan, id, what, sizeof(what)));
    char vm[16], src[16], dst[16];
    assert_int_equal(sscanf(what, "migrate %15s %15s -> %15s", vm, src, dst), 3);
    approve(w, id, 0);
    tick(w);
    assert_int_equal(F->migrations, 1);
    assert_int_equal(F->where[vm[2] - '1'], dst[1] - '1');
    assert_int_equal(hosts_on(), 3); /* nothing else was done */
    assert_int_equal(w->c->approvals_done, 1);
    _cleanup_free_ char *path = xasprintf("%s/approvals", w->dir);
    assert_int_equal(access(path, F_OK), -1); /* taken */
    _cleanup_free_ char *after = slurp(w->dir, "plan.json");
    _cleanup_free_ char *done = xasprintf("{\"id\":\"%s\",\"state\":\"done\"", id);
    assert_non_null(strstr(after, done));
    /* approve all: every action of that plan that is still planned */
    approve(w, "all", 0);
    for (int i = 0; i < 8; i++) {
        tick(w);
        if (pending_id(w->dir, "", id))
            approve(w, "all", 0);
    }
    assert_int_equal(hosts_on(), 1);
}

static void test_manual_stale_approvals_dropped(void **state)
{
    struct world *w = *state;
    reopen(w, "mode = manual\n");
    for (int i = 0; i < 3; i++) /* the policy's window (2 samples) observed */
        tick(w);
    char id[OPSTATE_ID_LEN + 1];
    assert_true(pending_id(w->dir, "migrate ", id));
    approve(w, "0badc0de", 0); /* not an action of the plan */
    _cleanup_free_ char *json = tick_json(w);
    assert_non_null(strstr(json, "approval of 0badc0de dropped: no longer planned"));
    approve(w, id, 31); /* interval 10 s: older than three intervals */
    _cleanup_free_ char *json2 = tick_json(w);
    assert_non_null(strstr(json2, "expired"));
    assert_int_equal(F->migrations, 0);
    assert_int_equal(w->c->approvals_dropped, 2);
    assert_int_equal(w->c->approvals_done, 0);
    /* "all" of a plan this controller never made */
    _cleanup_free_ char *text = xasprintf("all 12345 %.3f\n", (double)now_realtime_ns() / 1e9);
    put(w->dir, "approvals", text, 0600);
    _cleanup_free_ char *json3 = tick_json(w);
    assert_non_null(strstr(json3, "approval of all of plan 12345 dropped"));
    assert_int_equal(F->migrations, 0);
    /* a hostile approvals file approves nothing and is left there */
    approve(w, id, 0);
    _cleanup_free_ char *path = xasprintf("%s/approvals", w->dir);
    assert_int_equal(chmod(path, 0622), 0);
    _cleanup_free_ char *json4 = tick_json(w);
    assert_non_null(strstr(json4, "is writable by"));
    assert_int_equal(F->migrations, 0);
    assert_int_equal(access(path, F_OK), 0);
}

static void test_maintenance_evacuates(void **state)
{
    struct world *w = *state;
    /* h1 holds vm1 and vm4 */
    put(w->dir, "maintenance", "# hosts\nh1 1700000000\n", 0600);
    for (int i = 0; i < 10; i++) {
        tick(w);
        assert_true(F->on[0]); /* never switched off */
        assert_true(w->c->hosts[0].maintenance);
    }
    for (int v = 0; v < NV; v++)
        assert_int_not_equal(F->where[v], 0); /* evacuated, and never a target */
    assert_int_equal(hosts_on(), 2);          /* h1 (in maintenance) and the one packed */
    _cleanup_free_ char *json = tick_json(w);
    assert_non_null(strstr(json, "\"name\":\"h1\",\"state\":\"on\""));
    assert_non_null(strstr(json, "\"maintenance\":true"));
    /* back from maintenance: used again, and switched off when empty */
    put(w->dir, "maintenance", "", 0600);
    for (int i = 0; i < 6; i++)
        tick(w);
    assert_false(w->c->hosts[0].maintenance);
    assert_int_equal(hosts_on(), 1);
}

/* A host off in maintenance is not switched on, even when load needs it. */
static void test_maintenance_host_stays_off(void **state)
{
    struct world *w = *state;
    for (int i = 0; i < 6; i++)
        tick(w);
    assert_int_equal(hosts_on(), 1);
    int off = F->on[2] ? 1 : 2;
    assert_false(F->on[off]);
    _cleanup_free_ char *text = xasprintf("h%d 1700000000\n", off + 1);
    put(w->dir, "maintenance", text, 0600);
    for (int v = 0; v < NV; v++)
        F->load[v] = 1.0; /* 4 busy VMs: three hosts' worth at pack 0.8 */
    for (int i = 0; i < 10; i++) {
        tick(w);
        assert_false(F->on[off]);
    }
    assert_int_equal(hosts_on(), 2);
}

static void test_maintenance_file_hostile(void **state)
{
    struct world *w = *state;
    put(w->dir, "maintenance", "h1 1700000000\n", 0600);
    tick(w);
    assert_true(w->c->hosts[0].maintenance);
    static const struct {
        const char *text;
        mode_t mode;
        const char *says;
    } bad[] = {
        {"h2 1700000000\n", 0666, "is writable by others (mode 0666)"},
        {"h2 1700000000\n", 0620, "is writable by its group (mode 0620)"},
        {"h2 1700000000 x\n", 0600, "line 1: not a maintenance record"},
        {"h2 1700000000\nh2 1700000001\n", 0600, "line 2: not a maintenance record"},
        {"h2 -1\n", 0600, "line 1: not a maintenance record"},
        {"h2  1700000000\n", 0600, "line 1: not a maintenance record"},
        {"h2 1700000000", 0600, "has no end"},
        {"h;2 1700000000\n", 0600, "line 1: not a maintenance record"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        put(w->dir, "maintenance", bad[i].text, bad[i].mode);
        _cleanup_free_ char *json = tick_json(w);
        if (!strstr(json, bad[i].says))
            fail_msg("case %zu: '%s' not said: %s", i, bad[i].says, json);
        assert_non_null(strstr(json, "maintenance unchanged"));
        assert_true(w->c->hosts[0].maintenance); /* as it was */
        assert_false(w->c->hosts[1].maintenance);
    }
    /* a symbolic link is not followed */
    _cleanup_free_ char *path = xasprintf("%s/maintenance", w->dir);
    _cleanup_free_ char *other = xasprintf("%s/elsewhere", w->dir);
    put(w->dir, "elsewhere", "h2 1700000000\n", 0600);
    unlink(path);
    assert_int_equal(symlink(other, path), 0);
    _cleanup_free_ char *json = tick_json(w);
    assert_non_null(strstr(json, "is a symbolic link"));
    assert_false(w->c->hosts[1].maintenance);
    /* a host fleet.ini does not define: said, the others taken */
    unlink(path);
    put(w->dir, "maintenance", "h9 1700000000\nh2 1700000000\n", 0600);
    _cleanup_free_ char *json2 = tick_json(w);
    assert_non_null(strstr(json2, "names host 'h9', which test.ini does not define"));
    assert_true(w->c->hosts[1].maintenance);
    assert_false(w->c->hosts[0].maintenance);
}

static bool shared(int a, int b)
{
    return F->where[a] == F->where[b];
}

static void test_pin_and_anti_affinity(void **state)
{
    struct world *w = *state;
    /* vm1 and vm4 start together on h1; vm2 on h2 */
    reopen(w, "[pin]\nvm2 = h3\n[anti-affinity]\napart = vm1 vm4\n");
    assert_int_equal(w->c->vm[1].pin, 2);
    assert_int_equal(w->c->vm[0].group, 0);
    assert_int_equal(w->c->vm[3].group, 0);
    assert_int_equal(w->c->vm[2].group, -1);
    for (int i = 0; i < 4; i++)
        tick(w);
    for (int i = 0; i < 8; i++) {
        tick(w);
        assert_false(shared(0, 3));
        assert_int_equal(F->where[1], 2);
    }
    assert_int_equal(hosts_on(), 2); /* packed as far as the group allows */
}

static void test_constraints_refused(void **state)
{
    static const struct {
        const char *sections;
        int line; /* of the error, in SECTIONS */
        const char *says;
    } bad[] = {
        {"[pin]\nvm1 = h9\n", 2, "[pin] vm1 = h9: no [host h9]"},
        {"[pin]\nvm1 = h1 h2\n", 2, "[pin] vm1 = 'h1 h2': want one host name"},
        {"[pin x]\n", 1, "[pin] takes no name"},
        {"[pin]\nvm1 = h1\nvm1 = h2\n", 3, "vm 'vm1' is pinned twice (line "},
        {"[anti-affinity]\na = vm1 vm2\nb = vm3 vm1\n", 3,
         "vm 'vm1' is in two anti-affinity groups, a (line "},
        {"[anti-affinity]\na = vm1 vm2\na = vm3 vm4\n", 3,
         "[anti-affinity] group 'a' is defined twice"},
        {"[anti-affinity]\na = vm1 vm1\n", 2, "[anti-affinity] a: 'vm1' is listed twice"},
        {"[anti-affinity]\na = vm1\n", 2, "[anti-affinity] a = vm1: want two VMs"},
        {"[anti-affinity]\na = vm1 vm2 vm3 vm4\n", 2,
         "[anti-affinity] a: 4 VMs cannot run on 3 hosts"},
        {"[anti-affinity]\na = vm1 ghost\n", 2, "[anti-affinity]: vm 'ghost' is not in vms"},
        {"[pin]\nvm1 = h1\nvm2 = h1\n[anti-affinity]\na = vm1 vm2\n", 5,
         "[anti-affinity] a: 'vm1' and 'vm2' are both pinned to h1"},
    };
    _cleanup_free_ char *head = xasprintf("%s/tmp/x%s", INI_HEAD, INI_TAIL);
    int base = 0;
    for (const char *p = head; *p; p++)
        base += *p == '\n';
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        _cleanup_free_ char *ini = xasprintf("%s%s", head, bad[i].sections);
        _cleanup_free_ char *want =
            xasprintf("test.ini line %d: %s", base + bad[i].line, bad[i].says);
        struct site s;
        struct fleet_error err = {{0}};
        if (site_parse(ini, strlen(ini), "test.ini", &s, &err) != -EINVAL)
            fail_msg("case %zu accepted", i);
        if (!strstr(err.msg, want))
            fail_msg("case %zu: want '%s', got '%s'", i, want, err.msg);
    }
    static const struct {
        const char *key, *says;
    } keys[] = {
        {"mode = auto\n", "test.ini line 5: mode = 'auto': want automatic|manual"},
        {"destroy_stale_copy = maybe\n",
         "test.ini line 5: destroy_stale_copy = 'maybe': want yes/no, true/false, on/off or 1/0"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(keys); i++) {
        _cleanup_free_ char *ini = xasprintf("%s/tmp/x\n%s%s", INI_HEAD, keys[i].key, INI_TAIL + 1);
        struct site s;
        struct fleet_error err = {{0}};
        assert_int_equal(site_parse(ini, strlen(ini), "test.ini", &s, &err), -EINVAL);
        if (!strstr(err.msg, keys[i].says))
            fail_msg("key %zu: want '%s', got '%s'", i, keys[i].says, err.msg);
    }
    /* the good ones: hosts named after the sections too */
    _cleanup_free_ char *ini = xasprintf("%s/tmp/x\nmode = Manual\n%s[pin]\nvm2 = h3 ; db\n"
                                         "[anti-affinity]\nweb = vm1, vm4\nother = vm3 vm2\n"
                                         "[host h4]\ntype = tiny\nuri = fake://4\nbmc = 1.2.3.4\n"
                                         "bmc_user = a\nbmc_password = b\n",
                                         INI_HEAD, INI_TAIL + 1);
    struct site s;
    struct fleet_error err = {{0}};
    if (site_parse(ini, strlen(ini), "test.ini", &s, &err) < 0)
        fail_msg("%s", err.msg);
    assert_int_equal(s.n_rules, 4);
    assert_int_equal(s.n_groups, 2);
    assert_string_equal(s.groups[1].name, "other");
    assert_int_equal(s.mode, SITE_MANUAL);
    const struct site_rule *r = site_rule_find(&s, "vm2");
    assert_non_null(r);
    assert_int_equal(r->pin, 2);
    assert_int_equal(r->group, 1);
    assert_int_equal(r->pin_line, base + 3);
    assert_null(site_rule_find(&s, "vm5"));
    site_free(&s);
}

/* vm3 runs on h3 and has a paused copy on h2 (a failed migration's). */
static void test_destroy_stale_copy(void **state)
{
    struct world *w = *state;
    F->stale[2] = 1;
    for (int i = 0; i < 4; i++) {
        /* without the switch: left alone, and the host of the paused copy,
         * which the view plans nothing on, is not planned off (it is busy) */
        _cleanup_free_ char *json = tick_json(w);
        assert_null(strstr(json, "\"action\":\"power_off\",\"host\":\"h2\""));
    }
    assert_int_equal(w->c->safety_refusals, 0);
    assert_int_equal(F->stale[2], 1);
    assert_int_equal(F->destroyed, 0);
    reopen(w, "destroy_stale_copy = yes\n");
    /* its twin's host does not answer: only the paused copy is seen */
    F->hv_down[2] = true;
    tick(w);
    tick(w);
    assert_int_equal(F->destroyed, 0);
    F->hv_down[2] = false;
    /* two copies that both run: neither is destroyed */
    F->stale_runs[2] = true;
    _cleanup_free_ char *json = tick_json(w);
    assert_non_null(strstr(json, "vm 'vm3': 2 copies, 2 running: no copy destroyed"));
    assert_int_equal(F->destroyed + F->destroy_busy, 0);
    F->stale_runs[2] = false;
    _cleanup_free_ char *json2 = tick_json(w);
    assert_non_null(strstr(json2, "\"action\":\"destroy_copy\",\"vm\":\"vm3\",\"host\":\"h2\""));
    assert_int_equal(F->destroyed, 1);
    assert_int_equal(F->stale[2], -1);
    assert_int_equal(F->where[2], 2); /* the running twin is untouched */
    _cleanup_free_ char *journal = slurp(w->dir, "journal");
    assert_non_null(strstr(journal, "begin destroy_copy vm=vm3 host=h2 twin=h3"));
    assert_non_null(strstr(journal, "ok vm=vm3 host=h2"));
    for (int i = 0; i < 6; i++)
        tick(w);
    assert_int_equal(hosts_on(), 1); /* then packed as usual */
}

/* The copy resumes between the plan and the act: the fresh lists catch it. */
static void test_destroy_stale_copy_rechecked(void **state)
{
    struct world *w = *state;
    reopen(w, "destroy_stale_copy = yes\nmode = manual\n");
    F->stale[2] = 1;
    tick(w);
    char id[OPSTATE_ID_LEN + 1];
    assert_true(pending_id(w->dir, "destroy the paused copy of vm3 on h2", id));
    assert_int_equal(F->destroyed, 0); /* manual: not without an approval */
    approve(w, id, 0);
    F->stale_runs[2] = true; /* resumed meanwhile: now planned as two running copies */
    tick(w);
    assert_int_equal(F->destroyed + F->destroy_busy, 0);
    assert_int_equal(w->c->approvals_dropped, 1);
}

/* The VM index grew after the planner was made: index_grow() freed the
 * planner and left c->planner pointing at it (a use after free ASan sees
 * at the next tick), and controller_close() never freed it. */
static void test_index_grows_after_planning(void **state)
{
    struct world *w = *state;
    tick(w);
    for (int i = 0; i < 100; i++) {
        char name[16];
        snprintf(name, sizeof(name), "seen%d", i);
        assert_true(ctl_vm_index(w->c, name, true) >= 0);
    }
    tick(w);
    tick(w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_journal_words),
        cmocka_unit_test(test_policy_tunables_checked),
        cmocka_unit_test_setup_teardown(test_journal_nul_byte_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_journal_seq_overflow_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_packs_then_spreads, setup, teardown),
        cmocka_unit_test_setup_teardown(test_failed_migration_keeps_vm_and_host, setup, teardown),
        cmocka_unit_test_setup_teardown(test_mute_bmc_never_off, setup, teardown),
        cmocka_unit_test_setup_teardown(test_foreign_domain_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_recovers_open_journal, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unseen_vm_blocks_power_off, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dry_run_writes_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_damaged_journal_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_second_controller_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_history_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_history_hostile_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_history_too_old, setup, teardown),
        cmocka_unit_test_setup_teardown(test_observing_switches_nothing_on, setup, teardown),
        cmocka_unit_test_setup_teardown(test_observing_overload_acts, setup, teardown),
        cmocka_unit_test_setup_teardown(test_restart_with_history_acts_at_once, setup, teardown),
        cmocka_unit_test_setup_teardown(test_index_grows_after_planning, setup, teardown),
        cmocka_unit_test(test_constraints_refused),
        cmocka_unit_test_setup_teardown(test_manual_holds_without_approval, setup, teardown),
        cmocka_unit_test_setup_teardown(test_manual_executes_exactly_the_approved, setup, teardown),
        cmocka_unit_test_setup_teardown(test_manual_stale_approvals_dropped, setup, teardown),
        cmocka_unit_test_setup_teardown(test_maintenance_evacuates, setup, teardown),
        cmocka_unit_test_setup_teardown(test_maintenance_host_stays_off, setup, teardown),
        cmocka_unit_test_setup_teardown(test_maintenance_file_hostile, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pin_and_anti_affinity, setup, teardown),
        cmocka_unit_test_setup_teardown(test_destroy_stale_copy, setup, teardown),
        cmocka_unit_test_setup_teardown(test_destroy_stale_copy_rechecked, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
