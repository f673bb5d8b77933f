/* The exec engine (src/fleet/engine/exec_cmd.c, exec_tmpl.c): command
 * templates split into words and run without a shell on a hand-filled
 * site, with sh -c scripts, printf and sleep standing in for the
 * operator's programs. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* cmocka.h needs stdarg, stddef, stdint and setjmp first */
#include <cmocka.h>

#include "base/util.h"
#include "fleet/control/site.h"
#include "fleet/engine/exec.h"
#include "fleet/engine/exec_cmd.h"
#include "fleet/engine/exec_tmpl.h"

static char tmpdir[] = "/tmp/test_fx_exec.XXXXXX";

static void assert_contains(const char *s, const char *needle)
{
    if (!strstr(s, needle))
        fail_msg("'%s' lacks '%s'", s, needle);
}

/* Three hosts; h3 has neither URI nor BMC. Templates are set per test. */
static struct site_host hosts[3] = {
    {.name = "h1",
     .uri = "qemu+ssh://h1/system",
     .bmc = "10.0.0.1",
     .bmc_user = "admin",
     .bmc_password = "pa ss'w$(rd)"},
    {.name = "h2", .uri = "qemu+ssh://h2/system", .bmc = "10.0.0.2:6230"},
    {.name = "h3"},
};

static struct site new_site(void)
{
    return (struct site){.origin = "fleet.ini", .hosts = hosts, .n_hosts = 3};
}

/* KEY = VAL in [exec], as fleet.ini would give it. */
static void set(struct site *s, const char *key, const char *val)
{
    struct fleet_error err = {{0}};
    if (site_engine_key(s, "exec", 0, key, val, &err) < 0)
        fail_msg("[exec] %s = %s: %s", key, val, err.msg);
}

static char *path_in(const char *name)
{
    return xasprintf("%s/%s", tmpdir, name);
}

static char *slurp(const char *name)
{
    _cleanup_free_ char *p = path_in(name);
    FILE *f = fopen(p, "re");
    if (!f)
        return NULL;
    char *s = xcalloc(1, 65536);
    size_t n = fread(s, 1, 65535, f);
    s[n] = '\0';
    fclose(f);
    return s;
}

static bool exists(const char *name)
{
    _cleanup_free_ char *p = path_in(name);
    return access(p, F_OK) == 0;
}

static double elapsed_s(uint64_t t0)
{
    return (double)(now_monotonic_ns() - t0) / 1e9;
}

/* Gone, or a zombie waiting for init: either way it runs no more. */
static bool process_gone(pid_t pid)
{
    char p[64], s[512];
    snprintf(p, sizeof(p), "/proc/%d/stat", (int)pid);
    for (int i = 0; i < 100; i++) {
        FILE *f = fopen(p, "re");
        if (!f)
            return true;
        size_t n = fread(s, 1, sizeof(s) - 1, f);
        fclose(f);
        s[n] = '\0';
        const char *rp = strrchr(s, ')');
        if (rp && rp[1] == ' ' && (rp[2] == 'Z' || rp[2] == 'X'))
            return true;
        usleep(10000);
    }
    return false;
}

static int count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

static int setup(void **state)
{
    if (!mkdtemp(tmpdir))
        return -1;
    return 0;
}

static int teardown(void **state)
{
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

/* ---- templates ------------------------------------------------------------ */

/* The values of the placeholders in test_split: each is one word. */
static const char *const split_vals[FX_VAR_N] = {
    [FX_VAR_HOST] = "h 1",  [FX_VAR_URI] = NULL,      [FX_VAR_BMC] = "b'c",
    [FX_VAR_VM] = "$(x) y", [FX_VAR_SRC] = "s\"rc\\", [FX_VAR_DST] = "`d`;|*",
    [FX_VAR_DST_URI] = "",
};

/* TMPL's argv with split_vals, as "[w0][w1]...", or its error. */
static char *split_show(const char *tmpl, unsigned allowed)
{
    struct fx_tmpl t;
    char why[400];
    if (fx_tmpl_split(tmpl, allowed, &t, why, sizeof(why)) < 0)
        return xstrdup(why);
    assert_true(t.n >= 1);
    char **argv = fx_tmpl_argv(&t, split_vals);
    char *out = xstrdup("");
    for (size_t i = 0; argv[i]; i++) {
        char *o = xasprintf("%s[%s]", out, argv[i]);
        free(out);
        out = o;
        assert_true(i < t.n);
    }
    fx_argv_free(argv);
    fx_tmpl_free(&t);
    return out;
}

#define A10 "aaaaaaaaaa"

static void test_split(void **state)
{
    static const struct {
        const char *tmpl, *want;
    } cases[] = {
        {"virsh -c {uri} list", "[virsh][-c][][list]"},
        {"  a  b\tc  ", "[a][b][c]"},
        {"x 'a  b' \"c d\" e\\ f", "[x][a  b][c d][e f]"},
        {"x '' \"\" a''b", "[x][][][ab]"},
        {"x \"a\\\"b\\\\c\\$d\\`e\\x\"", "[x][a\"b\\c$d`e\\x]"},
        {"x 'it'\\''s' \\'", "[x][it's][']"},
        /* a placeholder is one word, glued or not, whatever its value */
        {"m {vm} {src} {dst} {host}", "[m][$(x) y][s\"rc\\][`d`;|*][h 1]"},
        {"m --name={vm} vm-{host}.list {src}-{dst} {vm}{vm}",
         "[m][--name=$(x) y][vm-h 1.list][s\"rc\\-`d`;|*][$(x) y$(x) y]"},
        {"m {dst_uri} {uri}", "[m][][]"},
        {"m 'a b'{vm}\"c\"", "[m][a b$(x) yc]"},
        /* not placeholders: escaped, the shell's, awk's, unclosed */
        {"x \\{vm} ${vm} '${HOME}' \"${HOME}\" {} '{ print $1 }' {x {vm",
         "[x][{vm}][${vm}][${HOME}][${HOME}][{}][{ print $1 }][{x][{vm]"},
        /* a shell, safely: the value is the script's $1, not its text */
        {"sh -c 'virsh migrate \"$1\" | tee x' sh {vm}",
         "[sh][-c][virsh migrate \"$1\" | tee x][sh][$(x) y]"},
        /* nothing a shell would do: ; | > $() are plain text */
        {"echo a;b | c > d $(e) `f` * ~", "[echo][a;b][|][c][>][d][$(e)][`f`][*][~]"},
        /* refused */
        {"sh -c \"virsh migrate {vm}\"",
         "placeholder {vm} inside quotes in 'sh -c \"virsh migrate {vm}\"': a placeholder "
         "stands outside quotes, where it is one word whatever its value holds"},
        {"sh -c 'x{vm}y'", "placeholder {vm} inside quotes in 'sh -c 'x{vm}y''"},
        {"x \"{foo}\"", "placeholder {foo} inside quotes in 'x \"{foo}\"'"},
        {"x {foo}", "unknown placeholder {foo} in 'x {foo}' (known: {host} {uri} {vm} {src} {dst} "
                    "{dst_uri})"},
        {"{host} x", "placeholder {host} in the first word in '{host} x': the program to run "
                     "is written out, its arguments may hold placeholders"},
        {"/opt/{host}/x y", "placeholder {host} in the first word"},
        {"x 'abc", "unterminated ' quote in 'x 'abc'"},
        {"x \"a\\\"", "unterminated \" quote in 'x \"a\\\"'"},
        {"x \\", "a backslash at the end in 'x \\'"},
        {"", "no command in ''"},
        {"'' x", "an empty program name in ''' x'"},
        {" \t ", "no command in ' \t '"},
        /* a long template is cut at 80 bytes */
        {"x {vm} '{vm}' " A10 A10 A10 A10 A10 A10 A10 A10,
         "placeholder {vm} inside quotes in 'x {vm} '{vm}' " A10 A10 A10 A10 A10 A10
         "aaaaaa...': "},
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        _cleanup_free_ char *got = split_show(cases[i].tmpl, FX_VARS_MIGRATE);
        if (strncmp(got, cases[i].want, strlen(cases[i].want)) != 0 ||
            (cases[i].want[0] == '[' && strlen(got) != strlen(cases[i].want)))
            fail_msg("split '%s':\n got  %s\n want %s", cases[i].tmpl, got, cases[i].want);
    }
    /* what each key may use */
    _cleanup_free_ char *e1 = split_show("ipmi {bmc} {vm}", fx_exec_allowed("power_on"));
    assert_string_equal(e1, "unknown placeholder {vm} in 'ipmi {bmc} {vm}' (known: {host} {uri} "
                            "{bmc})");
    _cleanup_free_ char *e2 = split_show("m {bmc}", fx_exec_allowed("migrate"));
    assert_contains(e2, "unknown placeholder {bmc}");
    assert_int_equal(fx_exec_allowed("list"), FX_VARS_HOST);
    assert_int_equal(fx_exec_allowed("timeout_s"), 0);

    /* fleet.ini's parser hands the templates to the engine, which splits them */
    struct fleet_error err = {{0}};
    struct site s = new_site();
    assert_int_equal(site_engine_key(&s, "exec", 0, "migrate", "virsh migrate {vm} {dest}", &err),
                     -EINVAL);
    assert_string_equal(err.msg,
                        "[exec] migrate: unknown placeholder {dest} in 'virsh migrate {vm} "
                        "{dest}' (known: {host} {uri} {vm} {src} {dst} {dst_uri})");
    assert_int_equal(
        site_engine_key(&s, "exec", 0, "list", "ssh {host} \"virsh list {host}\"", &err), -EINVAL);
    assert_contains(err.msg, "[exec] list: placeholder {host} inside quotes in 'ssh {host} ");
    assert_int_equal(site_engine_key(&s, "exec", 0, "poweroff", "x", &err), -EINVAL);
    assert_string_equal(err.msg, "no engine reads poweroff in [exec]");
    site_engines_free(&s);
}

/* fleet.ini with a template: refused when the file is read, naming the
 * line, the key and the template. */
static void test_quoted_placeholder_refused_at_load(void **state)
{
    static const char *const bad[] = {
        "migrate = sh -c \"virsh migrate --live {vm} {dst_uri}\"",
        "migrate = sh -c 'virsh migrate --live {vm} {dst_uri}'",
        "power_on = ipmitool -H \"{bmc}\" power on",
        "list = ssh {host} 'virsh -c {uri} list'",
    };
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        _cleanup_free_ char *ini = xasprintf("[controller]\nvm_engine = exec\npower = none\n"
                                             "[exec]\nlist = true\n%s\n[host a]\ntype = g5\n",
                                             bad[i]);
        struct site s;
        struct fleet_error err = {{0}};
        assert_int_equal(site_parse(ini, strlen(ini), "fleet.ini", &s, &err), -EINVAL);
        char key[32];
        snprintf(key, sizeof(key), "%.*s", (int)strcspn(bad[i], " "), bad[i]);
        _cleanup_free_ char *want = xasprintf("fleet.ini line 6: [exec] %s: placeholder {", key);
        assert_contains(err.msg, want);
        assert_contains(err.msg, "} inside quotes in '");
        assert_contains(err.msg, strchr(bad[i], '=') + 2);
    }
    /* the same outside the quotes: accepted, even unused by the chosen engines */
    const char *ok = "[controller]\nvm_engine = libvirt\npower = none\n[exec]\n"
                     "migrate = virsh migrate --live {vm} {dst_uri}\n"
                     "power_on = ipmitool -H {bmc} -E power on\n"
                     "[host a]\ntype = g5\nuri = qemu:///system\n";
    struct site s;
    struct fleet_error err = {{0}};
    if (site_parse(ok, strlen(ok), "fleet.ini", &s, &err) < 0)
        fail_msg("%s", err.msg);
    site_free(&s);
}

/* Names fleet.ini gives: hosts (they reach commands as {host}, {src},
 * {dst}) and the VMs to manage, by the same rules. */
static void test_site_names(void **state)
{
    static const struct {
        const char *text, *msg;
    } bad[] = {
        {"[host -h1]\ntype = g5\n", "fleet.ini line 3: host name '-h1' must be 1..47 letters, "
                                    "digits, '_', '-' or '.', not starting with '-'"},
        {"[host h$(x)]\ntype = g5\n", "fleet.ini line 3: host name 'h$(x)' must be"},
        {"[host h1]\ntype = g5\n[controller]\nvms = a/b\n",
         "fleet.ini line 6: vms: VM name 'a/b' holds '/' (libvirt refuses it)"},
        {"[host h1]\ntype = g5\n[controller]\nvms = ok, x\033y\n",
         "fleet.ini line 6: vms: VM name 'x\\x1by' holds a control character (U+001B)"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        _cleanup_free_ char *ini =
            xasprintf("[exec]\nlist = true\n%s%s", bad[i].text,
                      strstr(bad[i].text, "[controller]") ? "vm_engine = exec\npower = none\n"
                                                          : "[controller]\nvm_engine = exec\n"
                                                            "power = none\n");
        struct site s;
        struct fleet_error err = {{0}};
        assert_int_equal(site_parse(ini, strlen(ini), "fleet.ini", &s, &err), -EINVAL);
        assert_contains(err.msg, bad[i].msg);
    }
}

/* A program to run: SCRIPT (sh) in a file of the temporary folder. */
static char *script(const char *name, const char *body)
{
    char *p = path_in(name);
    FILE *f = fopen(p, "we");
    assert_non_null(f);
    fprintf(f, "#!/bin/sh\n%s\n", body);
    fclose(f);
    chmod(p, 0755);
    return p;
}

/* The NUL-separated words in file NAME, as "[w0][w1]...". */
static char *words_in(const char *name)
{
    _cleanup_free_ char *p = path_in(name);
    FILE *f = fopen(p, "re");
    if (!f)
        return xstrdup("(no file)");
    char b[8192];
    size_t n = fread(b, 1, sizeof(b), f);
    fclose(f);
    char *out = xstrdup("");
    for (size_t i = 0; i < n;) {
        size_t k = strnlen(b + i, n - i);
        char *o = xasprintf("%s[%.*s]", out, (int)k, b + i);
        free(out);
        out = o;
        i += k + 1;
    }
    return out;
}

/* Names and addresses with quotes, $(), backticks, blanks, ; | * reach
 * the commands as single words and run nothing; no shell reads them, nor
 * the template. The commands run in the temporary folder, where a
 * "touch pwned" would leave its marker. */
static void test_injection(void **state)
{
    char cwd[4096];
    assert_non_null(getcwd(cwd, sizeof(cwd)));
    assert_int_equal(chdir(tmpdir), 0);
    const char *hostile = "$(touch pwned) `touch pwned`; touch pwned | x * \"q\" 'q' {vm}";
    struct site_host hh[2] = {
        {.name = "h1",
         .uri = (char *)hostile,
         .bmc = (char *)hostile,
         .bmc_user = "u",
         .bmc_password = "p"},
        {.name = "h2", .uri = "qemu:///system"},
    };
    struct site s = {.origin = "fleet.ini", .hosts = hh, .n_hosts = 2};
    _cleanup_free_ char *rec = script("rec", "out=$1; shift; printf '%s\\0' \"$@\" > \"$out\"\n"
                                             "[ ! -e \"$out.print\" ] || cat \"$out.print\"");
    _cleanup_free_ char *t_list = xasprintf("%s list {host} {uri} {bmc} $(touch pwned)", rec);
    _cleanup_free_ char *t_mig = xasprintf("%s migrate {vm} {src} {dst} {uri} {dst_uri} "
                                           "--name={vm} ${HOME} '$HOME' \"{\"vm\"}\"",
                                           rec);
    _cleanup_free_ char *t_pw = xasprintf("%s power {host} {bmc} {uri}", rec);
    set(&s, "list", t_list);
    set(&s, "migrate", t_mig);
    set(&s, "power_on", t_pw);
    struct fx_vms *vms;
    struct fx_power *pw;
    struct fleet_error err = {{0}};
    assert_int_equal(fx_exec_vms_open(&s, &vms, &err), 0);
    assert_int_equal(fx_exec_power_open(&s, &pw, &err), 0);

    /* what the list prints: legal names, blanks around them dropped */
    static const char *const listed[] = {
        "it's",          "say \"hi\"", "$(touch pwned)",
        "`touch pwned`", "web 1  b",   "a;touch pwned",
        "a|touch pwned", "*",          "{host}",
        "x\\",           "x-",         "été",
        "not #first",
    };
    FILE *f = fopen("list.print", "we");
    for (size_t i = 0; i < ARRAY_SIZE(listed); i++)
        fprintf(f, "  %s\trunning 1 2 3 \r\n", listed[i]);
    fclose(f);
    struct fx_list l;
    if (vms->list(vms, 0, &l, &err) < 0)
        fail_msg("%s", err.msg);
    assert_int_equal(l.n, ARRAY_SIZE(listed));
    _cleanup_free_ char *got = words_in("list");
    _cleanup_free_ char *want = xasprintf("[h1][%s][%s][$(touch][pwned)]", hostile, hostile);
    assert_string_equal(got, want);

    /* each name reaches migrate as the one word it is */
    for (size_t i = 0; i < l.n; i++) {
        const char *name = l.v[i].name;
        assert_string_equal(name, listed[i]);
        if (vms->migrate(vms, name, 0, 1, 5, &err) < 0)
            fail_msg("migrate '%s': %s", name, err.msg);
        _cleanup_free_ char *g = words_in("migrate");
        _cleanup_free_ char *w =
            xasprintf("[%s][h1][h2][%s][qemu:///system][--name=%s][${HOME}][$HOME][{vm}]", name,
                      hostile, name);
        assert_string_equal(g, w);
    }
    fx_list_free(&l);

    /* names no command gets: refused before anything runs */
    static const struct {
        const char *name, *why;
    } refused[] = {
        {"a\nb", "VM name 'a\\x0ab' holds a control character (U+000A)"},
        {"a/b", "VM name 'a/b' holds '/' (libvirt refuses it)"},
        {"\033]0;x\007", "VM name '\\x1b]0;x\\x07' holds a control character (U+001B)"},
        {"-x", "VM name '-x' starts with '-'"},
        {"--desturi=qemu+ssh://evil/system", "VM name '--desturi=qemu+ssh://evil/system'"},
        {"", "an empty VM name"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(refused); i++) {
        unlink("migrate");
        assert_int_equal(vms->migrate(vms, refused[i].name, 0, 1, 5, &err), -EINVAL);
        _cleanup_free_ char *w = xasprintf("host h1: migrate command: %s", refused[i].why);
        assert_contains(err.msg, w);
        assert_false(exists("migrate"));
    }

    assert_int_equal(pw->set(pw, 0, true, &err), 0);
    _cleanup_free_ char *gp = words_in("power");
    _cleanup_free_ char *wp = xasprintf("[h1][%s][%s]", hostile, hostile);
    assert_string_equal(gp, wp);
    assert_false(exists("pwned"));

    /* a program that is not there: named */
    set(&s, "power_on", "/nonexistent/power-tool {host}");
    assert_int_equal(pw->set(pw, 1, true, &err), -ENOENT);
    assert_string_equal(err.msg, "host h2: power_on command could not run /nonexistent/power-tool: "
                                 "No such file or directory");
    vms->close(vms);
    pw->close(pw);
    site_engines_free(&s);
    assert_int_equal(chdir(cwd), 0);
}

/* ---- list ----------------------------------------------------------------- */

static void test_list(void **state)
{
    struct site s = new_site();
    struct fx_vms *vms;
    struct fleet_error err = {{0}};
    struct fx_list l;
    set(&s, "list",
        "sh -c 'test \"$1\" = h2 || exit 9; "
        "printf \"web1 running 123456789012 2097152 2\\n# a comment\\n\\n"
        "  db\\tpaused 5 1024 1\\r\\nold shutoff 0 0 0\\nodd other 1 2 3\\n\"' sh {host}");
    assert_int_equal(fx_exec_vms_open(&s, &vms, &err), 0);
    uint64_t t0 = now_monotonic_ns();
    int r = vms->list(vms, 1, &l, &err);
    if (r < 0)
        fail_msg("%s", err.msg);
    assert_int_equal(l.n, 4);
    assert_true(l.t_ns >= t0 && l.t_ns <= now_monotonic_ns());
    assert_int_equal(l.node.mem_kib, 0);
    const struct fx_domain *d = fx_list_find(&l, "web1");
    assert_non_null(d);
    assert_true(d->active && d->running && d->persistent);
    assert_int_equal(d->cpu_ns, 123456789012ull);
    assert_int_equal(d->mem_kib, 2097152);
    assert_int_equal(d->vcpus, 2);
    assert_string_equal(d->uuid, "");
    d = fx_list_find(&l, "db");
    assert_true(d->active && !d->running);
    assert_int_equal(d->cpu_ns, 5);
    d = fx_list_find(&l, "old");
    assert_true(!d->active && !d->running && d->persistent);
    d = fx_list_find(&l, "odd");
    assert_true(d->active && !d->running);
    assert_int_equal(d->vcpus, 3);
    fx_list_free(&l);

    /* another host: the template's own exit status */
    assert_int_equal(vms->list(vms, 0, &l, &err), -EIO);
    assert_string_equal(err.msg, "host h1: list command exited 9");
    /* stdin is empty, not ours */
    set(&s, "list", "cat");
    assert_int_equal(vms->list(vms, 0, &l, &err), 0);
    assert_int_equal(l.n, 0);
    fx_list_free(&l);
    vms->close(vms);
    site_engines_free(&s);
}

static void test_list_bad(void **state)
{
    static const struct {
        const char *out, *msg;
    } cases[] = {
        {"a running 1 2 3\\n\\nb running x 2 3\\n",
         "host h1: list command output line 3: CPU_NS 'x' is not a number"},
        {"a running 1 -2 3", "host h1: list command output line 1: MEM_KIB '-2' is not a number"},
        {"a running 1 2 4294967296",
         "host h1: list command output line 1: VCPUS '4294967296' is out of range"},
        {"a running 99999999999999999999 2 3",
         "host h1: list command output line 1: CPU_NS '99999999999999999999' is out of range"},
        {"#x\\na shut_off 1 2 3",
         "host h1: list command output line 2: STATE 'shut_off' is not running, paused, shutoff or "
         "other"},
        {"a running 1 2",
         "host h1: list command output line 1: expected 5 fields NAME STATE CPU_NS "
         "MEM_KIB VCPUS, found 4"},
        /* the name is what comes before the last four fields */
        {"a running 1 2 3 4 5 6",
         "host h1: list command output line 1: STATE '3' is not running, paused, shutoff or "
         "other"},
        /* names that no command gets: escaped in the message */
        {"ok running 1 2 3\\na/b running 1 2 3",
         "host h1: list command output line 2: VM name 'a/b' holds '/' (libvirt refuses it)"},
        {"x\\033[2Jy running 5 1024 1", "host h1: list command output line 1: VM name "
                                        "'x\\x1b[2Jy' holds a control character (U+001B)"},
        {"a\\tb running 1 2 3", "host h1: list command output line 1: VM name 'a\\x09b' holds a "
                                "control character (U+0009)"},
        {"a\\rb running 1 2 3", "host h1: list command output line 1: VM name 'a\\x0db' holds a "
                                "control character (U+000D)"},
        {"z\\233w\\\\ running 5 1024 1",
         "host h1: list command output line 1: VM name 'z\\x9bw\\\\' is not UTF-8 (byte \\x9b)"},
        {"z\\302\\233w running 1 2 3", "host h1: list command output line 1: VM name "
                                       "'z\\xc2\\x9bw' holds a control character (U+009B)"},
        {"-x running 1 2 3", "host h1: list command output line 1: VM name '-x' starts with '-' "
                             "(a command would take it for an option)"},
        {A10 A10 A10 A10 A10 A10 A10 A10 A10 "aaaaaa running 1 2 3",
         "host h1: list command output line 1: VM name '" A10 A10 A10 A10 A10 A10 A10 A10 A10
         "aaaaaa' is longer than 95 bytes"},
        {"a running 1 2 3\\na paused 1 2 3",
         "host h1: list command output line 2: VM 'a' listed twice"},
        {"a running 1 2 3\\0", "host h1: list command printed a NUL byte"},
        /* the first error by line: a repeat before a bad line, and after */
        {"a running 1 2 3\\na paused 1 2 3\\nb bad 1 2 3",
         "host h1: list command output line 2: VM 'a' listed twice"},
        {"a running 1 2 3\\nb bad 1 2 3\\na running 1 2 3",
         "host h1: list command output line 2: STATE 'bad' is not running, paused, shutoff or "
         "other"},
        {"b running 1 2 3\\na running 1 2 3\\nc running 1 2 3\\na running 1 2 3\\n"
         "b running 1 2 3\\na running 1 2 3",
         "host h1: list command output line 4: VM 'a' listed twice"},
    };
    struct site s = new_site();
    struct fx_vms *vms;
    struct fleet_error err = {{0}};
    struct fx_list l = {0};
    assert_int_equal(fx_exec_vms_open(&s, &vms, &err), 0);
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        _cleanup_free_ char *t = xasprintf("printf '%s'", cases[i].out);
        set(&s, "list", t);
        assert_int_equal(vms->list(vms, 0, &l, &err), -EINVAL);
        assert_string_equal(err.msg, cases[i].msg);
        assert_null(l.v);
    }
    vms->close(vms);
    site_engines_free(&s);
}

/* 50,000 VMs (a 1 MiB list) in well under a second of CPU: the check for
 * a name listed twice used to scan the list for every line (1.25 x 10^9
 * string compares here: 6 s, 20 s under ASan). CPU time, not wall time:
 * a loaded machine does not change it. */
static void test_list_many(void **state)
{
    enum { N = 50000 };
    char *text = xmalloc((size_t)N * 32);
    size_t len = 0;
    for (int i = 0; i < N; i++)
        len += (size_t)sprintf(text + len, "vm-%d running 1 2 3\n", i);
    struct fx_list l;
    struct fleet_error err = {{0}};
    clock_t t0 = clock();
    assert_int_equal(fx_exec_list_parse(text, "host h1: list command", &l, &err), 0);
    double cpu_s = (double)(clock() - t0) / CLOCKS_PER_SEC;
    assert_int_equal(l.n, N);
    assert_string_equal(l.v[N - 1].name, "vm-49999");
    fx_list_free(&l);
    if (cpu_s > 1.0)
        fail_msg("50,000 VMs took %.2f s of CPU", cpu_s);
    /* and a repeat at the very end is still found */
    len = 0;
    for (int i = 0; i < N; i++)
        len += (size_t)sprintf(text + len, "vm-%d running 1 2 3\n", i);
    sprintf(text + len, "vm-7 running 1 2 3\n");
    assert_int_equal(fx_exec_list_parse(text, "host h1: list command", &l, &err), -EINVAL);
    assert_string_equal(err.msg, "host h1: list command output line 50001: VM 'vm-7' listed twice");
    free(text);
}

/* ---- power ---------------------------------------------------------------- */

static void test_power(void **state)
{
    struct site s = new_site();
    struct fx_power *pw;
    struct fleet_error err = {{0}};
    enum fx_power_state st = FX_POWER_UNKNOWN;
    double w = -1;
    assert_int_equal(fx_exec_power_open(&s, &pw, &err), 0);
    assert_string_equal(pw->name, "exec");

    /* nothing configured */
    assert_int_equal(pw->status(pw, 0, &st, &err), -EOPNOTSUPP);
    assert_string_equal(err.msg, "host h1: no power_status command configured (power_status in "
                                 "fleet.ini's [exec] section)");
    assert_int_equal(pw->set(pw, 1, false, &err), -EOPNOTSUPP);
    assert_contains(err.msg, "no power_off command");
    assert_int_equal(pw->reading(pw, 1, &w, &err), -EOPNOTSUPP);
    assert_contains(err.msg, "power_reading");

    set(&s, "power_status",
        "sh -c 'case \"$1\" in 10.0.0.1) printf \" ON \\n\";; 10.0.0.2:6230) echo Off;; "
        "\"\") echo maybe;; esac' sh {bmc}");
    assert_int_equal(pw->status(pw, 0, &st, &err), 0);
    assert_int_equal(st, FX_POWER_ON);
    assert_int_equal(pw->status(pw, 1, &st, &err), 0);
    assert_int_equal(st, FX_POWER_OFF);
    assert_int_equal(pw->status(pw, 2, &st, &err), -EINVAL);
    assert_string_equal(err.msg,
                        "host h3: power_status command printed 'maybe', expected on or off");
    assert_int_equal(st, FX_POWER_OFF);

    /* the BMC credentials come in the environment, only for the host's own */
    setenv("WATT_BMC_PASSWORD", "inherited", 1);
    _cleanup_free_ char *creds =
        script("creds", "test \"$WATT_BMC_USER:$WATT_BMC_PASSWORD\" = \"admin:pa ss'w\\$(rd)\" "
                        "&& echo ' 182.5' || echo \"${WATT_BMC_PASSWORD:-none}\"");
    set(&s, "power_reading", creds);
    assert_int_equal(pw->reading(pw, 0, &w, &err), 0);
    assert_true(w == 182.5);
    assert_int_equal(pw->reading(pw, 1, &w, &err), -EINVAL);
    assert_string_equal(err.msg,
                        "host h2: power_reading command printed 'none', expected watts (a number "
                        ">= 0)");
    unsetenv("WATT_BMC_PASSWORD");
    set(&s, "power_reading", "echo -3");
    assert_int_equal(pw->reading(pw, 0, &w, &err), -EINVAL);
    set(&s, "power_reading", "echo 0");
    assert_int_equal(pw->reading(pw, 0, &w, &err), 0);
    assert_true(w == 0);

    _cleanup_free_ char *on = xasprintf("sh -c 'echo \"$1\" > \"$2/on\"' sh {host} %s", tmpdir);
    set(&s, "power_on", on);
    assert_int_equal(pw->set(pw, 1, true, &err), 0);
    _cleanup_free_ char *got = slurp("on");
    assert_string_equal(got, "h2\n");
    pw->close(pw);
    site_engines_free(&s);
}

/* ---- failures ------------------------------------------------------------- */

static void test_exit_codes(void **state)
{
    struct site s = new_site();
    struct fx_power *pw;
    struct fleet_error err = {{0}};
    assert_int_equal(fx_exec_power_open(&s, &pw, &err), 0);

    set(&s, "power_off",
        "sh -c 'echo starting; echo \"BMC said:\" >&2; echo \"  no\tway  \" >&2; exit 3'");
    assert_int_equal(pw->set(pw, 1, false, &err), -EIO);
    assert_string_equal(err.msg, "host h2: power_off command exited 3: BMC said: no way");

    set(&s, "power_off", "sh -c 'kill -9 $$'");
    assert_int_equal(pw->set(pw, 1, false, &err), -EIO);
    assert_string_equal(err.msg, "host h2: power_off command was killed by signal 9 (Killed)");

    /* a long stderr: its end is what counts */
    set(&s, "power_off",
        "sh -c 'i=0; while [ $i -lt 300 ]; do echo \"line $i of noise\" >&2; "
        "i=$((i+1)); done; echo THE END >&2; exit 1'");
    assert_int_equal(pw->set(pw, 1, false, &err), -EIO);
    assert_contains(err.msg, "host h2: power_off command exited 1: ");
    assert_contains(err.msg, "line 299 of noise THE END");
    assert_true(strlen(err.msg) < sizeof(err.msg));
    assert_true(strlen(err.msg) > 400);

    /* a process that lets the kernel reap its children loses their status:
     * an error, not a success */
    struct sigaction ign = {.sa_handler = SIG_IGN}, old;
    sigaction(SIGCHLD, &ign, &old);
    set(&s, "power_off", "true");
    assert_int_equal(pw->set(pw, 1, false, &err), -ECHILD);
    assert_contains(err.msg, "host h2: power_off command could not run true: ");
    sigaction(SIGCHLD, &old, NULL);
    assert_int_equal(pw->set(pw, 1, false, &err), 0);
    pw->close(pw);
    site_engines_free(&s);
}

static void test_timeout(void **state)
{
    struct site s = new_site();
    struct fx_power *pw;
    struct fleet_error err = {{0}};
    enum fx_power_state st;
    set(&s, "timeout_s", "0.5");
    assert_int_equal(fx_exec_power_open(&s, &pw, &err), 0);

    /* the group dies on SIGTERM */
    _cleanup_free_ char *t1 = xasprintf("sh -c 'echo $$ > \"$1/pid1\"; sleep 30 & "
                                        "echo $! > \"$1/pid2\"; echo waiting >&2; wait' sh %s",
                                        tmpdir);
    set(&s, "power_status", t1);
    uint64_t t0 = now_monotonic_ns();
    assert_int_equal(pw->status(pw, 0, &st, &err), -ETIMEDOUT);
    double dt = elapsed_s(t0);
    assert_true(dt >= 0.5 && dt < 1.0);
    assert_string_equal(err.msg,
                        "host h1: power_status command timed out after 0.5 s and was killed: "
                        "waiting");
    _cleanup_free_ char *p1 = slurp("pid1"), *p2 = slurp("pid2");
    assert_true(process_gone(atoi(p1)));
    assert_true(process_gone(atoi(p2)));

    /* ... or on SIGKILL 2 s later, when it ignores SIGTERM */
    _cleanup_free_ char *t2 = xasprintf("sh -c 'trap \"\" TERM; echo $$ > \"$1/pid3\"; "
                                        "sleep 30 & echo $! > \"$1/pid4\"; wait' sh %s",
                                        tmpdir);
    set(&s, "power_status", t2);
    t0 = now_monotonic_ns();
    assert_int_equal(pw->status(pw, 0, &st, &err), -ETIMEDOUT);
    dt = elapsed_s(t0);
    assert_true(dt >= 2.5 && dt < 2.7);
    _cleanup_free_ char *p3 = slurp("pid3"), *p4 = slurp("pid4");
    assert_true(process_gone(atoi(p3)));
    assert_true(process_gone(atoi(p4)));
    pw->close(pw);
    site_engines_free(&s);
}

static void test_big_output(void **state)
{
    struct site s = new_site();
    struct fx_vms *vms;
    struct fleet_error err = {{0}};
    struct fx_list l;
    assert_int_equal(fx_exec_vms_open(&s, &vms, &err), 0);

    /* 40000 domains, ~1 MiB: fine */
    set(&s, "list",
        "sh -c 'i=0; while [ $i -lt 40000 ]; do echo \"vm-$i running 1 2 3\"; i=$((i+1)); "
        "done'");
    int r = vms->list(vms, 0, &l, &err);
    if (r < 0)
        fail_msg("%s", err.msg);
    assert_int_equal(l.n, 40000);
    assert_non_null(fx_list_find(&l, "vm-39999"));
    fx_list_free(&l);

    /* endless output: killed at 1 MiB, long before its deadline */
    set(&s, "list", "yes 'vm running 1 2 3'");
    uint64_t t0 = now_monotonic_ns();
    assert_int_equal(vms->list(vms, 0, &l, &err), -EMSGSIZE);
    assert_true(elapsed_s(t0) < 2.0);
    assert_string_equal(err.msg, "host h1: list command printed more than 1048576 bytes and was "
                                 "killed");
    vms->close(vms);
    site_engines_free(&s);
}

/* No fd of ours reaches the command, even one opened without O_CLOEXEC:
 * the shell (test is a builtin: /proc/self is the shell) has 0, 1, 2. */
static void test_fds(void **state)
{
    struct site s = new_site();
    struct fx_vms *vms;
    struct fleet_error err = {{0}};
    struct fx_list l;
    int fd = open("/etc/hostname", O_RDONLY);
    assert_true(fd >= 3 && fd < 40);
    set(&s, "list",
        "sh -c 'i=0; while [ $i -lt 40 ]; do [ -e /proc/self/fd/$i ] && "
        "echo \"fd$i running 0 0 0\"; i=$((i+1)); done; true'");
    assert_int_equal(fx_exec_vms_open(&s, &vms, &err), 0);
    int r = vms->list(vms, 0, &l, &err);
    if (r < 0)
        fail_msg("%s", err.msg);
    assert_int_equal(l.n, 3);
    assert_non_null(fx_list_find(&l, "fd0"));
    assert_non_null(fx_list_find(&l, "fd1"));
    assert_non_null(fx_list_find(&l, "fd2"));
    fx_list_free(&l);
    close(fd);
    vms->close(vms);
    site_engines_free(&s);
}

/* ---- threads ---------------------------------------------------------------- */

struct mig {
    struct fx_vms *vms;
    const char *vm;
    size_t src, dst;
    int r;
    struct fleet_error err;
};

static void *migrate_thread(void *arg)
{
    struct mig *m = arg;
    m->r = m->vms->migrate(m->vms, m->vm, m->src, m->dst, 5, &m->err);
    return NULL;
}

static void *list_thread(void *arg)
{
    struct mig *m = arg;
    for (int i = 0; i < 30 && m->r == 0; i++) {
        struct fx_list l;
        m->r = m->vms->list(m->vms, m->src, &l, &m->err);
        if (m->r == 0 && (l.n != 1 || !fx_list_find(&l, m->vm)))
            m->r = -EBADMSG;
        if (m->r == 0)
            fx_list_free(&l);
    }
    return NULL;
}

static void test_threads(void **state)
{
    struct site s = new_site();
    struct fx_vms *vms;
    struct fleet_error err = {{0}};
    _cleanup_free_ char *tmpl =
        xasprintf("sh -c 'sleep 0.4; [ \"$1\" != bad ] || { echo \"$2\" refuses >&2; exit 1; }; "
                  "echo \"$1\" \"$2\" \"$3\" > \"$4/moved-$1\"' sh {vm} {src} {dst} %s",
                  tmpdir);
    set(&s, "migrate", tmpl);
    set(&s, "list", "echo vm-{host} running 1 2 3");
    assert_int_equal(fx_exec_vms_open(&s, &vms, &err), 0);
    int fds = count_fds();

    struct mig m[3] = {{.vms = vms, .vm = "a", .src = 0, .dst = 1},
                       {.vms = vms, .vm = "b", .src = 2, .dst = 1},
                       {.vms = vms, .vm = "bad", .src = 1, .dst = 0}};
    pthread_t t[3];
    uint64_t t0 = now_monotonic_ns();
    for (int i = 0; i < 3; i++)
        assert_int_equal(pthread_create(&t[i], NULL, migrate_thread, &m[i]), 0);
    for (int i = 0; i < 3; i++)
        pthread_join(t[i], NULL);
    /* at once, not one after the other */
    assert_true(elapsed_s(t0) < 1.0);
    assert_int_equal(m[0].r, 0);
    assert_int_equal(m[1].r, 0);
    assert_int_equal(m[2].r, -EIO);
    assert_string_equal(m[2].err.msg, "host h2: migrate command for VM 'bad' to h1 exited 1: h2 "
                                      "refuses");
    _cleanup_free_ char *a = slurp("moved-a"), *b = slurp("moved-b");
    assert_string_equal(a, "a h1 h2\n");
    assert_string_equal(b, "b h3 h2\n");

    /* many short commands from three threads: each gets its own output */
    struct mig ls[3] = {{.vms = vms, .vm = "vm-h1", .src = 0},
                        {.vms = vms, .vm = "vm-h2", .src = 1},
                        {.vms = vms, .vm = "vm-h3", .src = 2}};
    for (int i = 0; i < 3; i++)
        assert_int_equal(pthread_create(&t[i], NULL, list_thread, &ls[i]), 0);
    for (int i = 0; i < 3; i++) {
        pthread_join(t[i], NULL);
        if (ls[i].r < 0)
            fail_msg("thread %d: %d %s", i, ls[i].r, ls[i].err.msg);
    }
    assert_int_equal(count_fds(), fds);
    vms->close(vms);
    site_engines_free(&s);
}

static void test_bad_host(void **state)
{
    struct site s = new_site();
    struct fx_vms *vms;
    struct fleet_error err = {{0}};
    struct fx_list l;
    set(&s, "list", "true");
    assert_int_equal(fx_exec_vms_open(&s, &vms, &err), 0);
    assert_int_equal(vms->list(vms, 3, &l, &err), -EINVAL);
    assert_int_equal(vms->migrate(vms, "a", 0, 1, 5, &err), -EOPNOTSUPP);
    assert_string_equal(err.msg,
                        "host h1: no migrate command configured (migrate in fleet.ini's [exec] "
                        "section)");
    vms->close(vms);
    site_engines_free(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_split),
        cmocka_unit_test(test_quoted_placeholder_refused_at_load),
        cmocka_unit_test(test_site_names),
        cmocka_unit_test(test_injection),
        cmocka_unit_test(test_list),
        cmocka_unit_test(test_list_bad),
        cmocka_unit_test(test_list_many),
        cmocka_unit_test(test_power),
        cmocka_unit_test(test_exit_codes),
        cmocka_unit_test(test_timeout),
        cmocka_unit_test(test_big_output),
        cmocka_unit_test(test_fds),
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_bad_host),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
