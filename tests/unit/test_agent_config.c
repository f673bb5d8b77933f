#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* cmocka.h needs stdarg, stddef, stdint and setjmp first */
#include <cmocka.h>

#include "agent/agent.h"
#include "base/util.h"

static void test_defaults(void **state)
{
    struct agent_config c;
    (void)state;
    agent_config_default(&c);
    /* local only unless asked */
    assert_string_equal(c.listen_host, "127.0.0.1");
    assert_int_equal(c.port, AGENT_DEFAULT_PORT);
    assert_true(c.interval_s == 1);
    assert_int_equal(c.rapl, AGENT_RAPL_EXACT);
    /* no tuning unless asked; when asked, restored on exit */
    assert_null(c.profile);
    assert_null(c.config_dir);
    assert_null(c.journal);
    assert_true(c.restore_on_exit);
    /* wake-ups and energy per cgroup: BPF, else traced, ten cgroups plus other */
    assert_int_equal(c.wakeups, AGENT_WAKEUPS_AUTO);
    assert_int_equal(c.cgroups, 10);
    /* no local client can starve a scraper (docs/agent.md) */
    assert_int_equal(c.max_connections, 128);
    assert_int_equal(c.max_per_client, 16);
    assert_int_equal(c.header_timeout_s, 5);
    assert_int_equal(c.timeout_s, 10);
    agent_config_free(&c);
}

static void test_parse_good(void **state)
{
    struct agent_config c;
    char *err = NULL;
    (void)state;
    agent_config_default(&c);
    assert_int_equal(agent_config_parse("[agent]\nlisten = 0.0.0.0:9999\ninterval_s = 0.5\n"
                                        "rapl_energy = coarse\npue = 1.2\nroot = /tmp/r\n"
                                        "max_connections = 8\ntimeout_s = 3\n"
                                        "max_connections_per_client = 2\nheader_timeout_s = 7\n"
                                        "wakeups = proc\ncgroups = 0\n"
                                        "fleet_metrics = /run/watt/fleet.prom\n"
                                        "bmc = 10.0.0.5:623\nbmc_user = watt\n"
                                        "bmc_password_file = /etc/watt/bmc.password\n",
                                        "a.ini", &c, &err),
                     0);
    assert_string_equal(c.listen_host, "0.0.0.0");
    assert_int_equal(c.port, 9999);
    assert_true(c.interval_s == 0.5);
    assert_int_equal(c.rapl, AGENT_RAPL_COARSE);
    assert_true(c.pue == 1.2);
    assert_string_equal(c.root, "/tmp/r");
    assert_int_equal(c.max_connections, 8);
    assert_int_equal(c.timeout_s, 3);
    assert_int_equal(c.max_per_client, 2);
    assert_int_equal(c.header_timeout_s, 7);
    assert_int_equal(c.wakeups, AGENT_WAKEUPS_PROC);
    assert_int_equal(c.cgroups, 0);
    assert_string_equal(c.fleet_metrics, "/run/watt/fleet.prom");
    assert_string_equal(c.bmc, "10.0.0.5:623");
    assert_string_equal(c.bmc_user, "watt");
    assert_string_equal(c.bmc_password_file, "/etc/watt/bmc.password");
    agent_config_free(&c);
}

/* Each bad file: -EINVAL, "a.ini:LINE:" in the message, config untouched. */
static void test_parse_bad(void **state)
{
    static const struct {
        const char *text;
        int line;
    } bad[] = {
        {"[agent]\nbogus = 1\n", 2},
        {"[agent]\ninterval_s = 0\n", 2},
        {"[agent]\ninterval = fast\n", 2},
        {"[agent]\ninterval_s = fast\n", 2},
        {"[agent]\ndevice_interval_s = -1\n", 2},
        {"[agent]\n\nlisten = 127.0.0.1:0\n", 3},
        {"[agent]\nlisten = nowhere\n", 2},
        {"[agent]\nrapl_energy = some\n", 2},
        {"[agent]\npue = 0.5\n", 2},
        {"[agent]\nmax_connections = 1.5\n", 2},
        {"[agent]\nmax_connections_per_client = 0\n", 2},
        {"[agent]\nmax_connections_per_client = 5000\n", 2},
        {"[agent]\nheader_timeout = 0\n", 2},
        {"[agent]\nheader_timeout = 2.5\n", 2},
        {"[agent]\ntimeout_s = 0\n", 2},
        {"[agent]\ninsecure = maybe\n", 2},
        {"[agent]\ninsecure =\n", 2},
        {"[agent]\n\njournal = /var/lib/watt/j # the journal\n", 3},
        {"[agent]\n; a comment longer than inih's line buffer "
         "..............................................................................."
         "..............................................................................\n"
         "interval_s = 1\n",
         2},
        {"[other]\nx = 1\n", 2},
        {"interval = 1\n", 1},
        {"[agent\n", 1},
        {"[agent]\nprofile = Web Server\n", 2},
        {"[agent]\nprofile = ../../etc/passwd\n", 2},
        {"[agent]\nrestore_on_exit = maybe\n", 2},
        {"[agent]\nwakeups = ebpf\n", 2},
        {"[agent]\n\ncgroups = 1001\n", 3},
        {"[agent]\ncgroups = 2.5\n", 2},
        {"[agent]\njournal = var/../../etc/journal\n", 2},
        {"[agent]\njournal = ..\n", 2},
        {"[agent]\nfleet_metrics = fleet.prom\n", 2},
    };
    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct agent_config c;
        char *err = NULL, want[32];
        agent_config_default(&c);
        assert_int_equal(agent_config_parse(bad[i].text, "a.ini", &c, &err), -EINVAL);
        snprintf(want, sizeof(want), "a.ini:%d:", bad[i].line);
        if (!err || strncmp(err, want, strlen(want)) != 0)
            fail_msg("'%s': error '%s', want it to start with '%s'", bad[i].text,
                     err ? err : "(none)", want);
        assert_int_equal(c.port, AGENT_DEFAULT_PORT); /* untouched */
        assert_true(c.interval_s == 1);
        free(err);
        agent_config_free(&c);
    }
}

/* The tuning keys; an empty value goes back to the default. */
static void test_parse_tuning(void **state)
{
    struct agent_config c;
    char *err = NULL;
    (void)state;
    agent_config_default(&c);
    assert_int_equal(agent_config_parse("[agent]\nprofile = web-1.low_lat\nconfig_dir = /srv/watt\n"
                                        "journal = /var/lib/watt/agent-journal\n"
                                        "restore_on_exit = no\n",
                                        "a.ini", &c, &err),
                     0);
    assert_string_equal(c.profile, "web-1.low_lat");
    assert_string_equal(c.config_dir, "/srv/watt");
    assert_string_equal(c.journal, "/var/lib/watt/agent-journal");
    assert_false(c.restore_on_exit);
    /* a failing parse keeps them */
    assert_int_equal(agent_config_parse("[agent]\nprofile =\nbogus = 1\n", "a.ini", &c, &err),
                     -EINVAL);
    assert_string_equal(c.profile, "web-1.low_lat");
    free(err);
    assert_int_equal(agent_config_parse("[agent]\nprofile =\njournal =\nconfig_dir =\n"
                                        "restore_on_exit = yes\n",
                                        "a.ini", &c, &err),
                     0);
    assert_null(c.profile);
    assert_null(c.journal);
    assert_null(c.config_dir);
    assert_true(c.restore_on_exit);
    agent_config_free(&c);
}

/* What parsing TEXT writes to stderr (the deprecation notes), in BUF. */
static int parse_noting(const char *text, struct agent_config *c, char *buf, size_t size)
{
    char *err = NULL;
    FILE *f = tmpfile();
    assert_non_null(f);
    fflush(stderr);
    int saved = dup(STDERR_FILENO);
    assert_true(saved >= 0);
    assert_true(dup2(fileno(f), STDERR_FILENO) >= 0);
    int r = agent_config_parse(text, "a.ini", c, &err);
    fflush(stderr);
    dup2(saved, STDERR_FILENO);
    close(saved);
    rewind(f);
    size_t n = fread(buf, 1, size - 1, f);
    buf[n] = '\0';
    fclose(f);
    if (r < 0)
        fail_msg("'%s': %s", text, err);
    return r;
}

/* Each key renamed for its unit: the new name is read quietly, the old
 * one gives the same value and one note naming file:line and the new
 * name (docs/config.md). */
static void test_renamed_keys(void **state)
{
    static const struct {
        const char *old, *now, *value;
    } keys[] = {
        {"interval", "interval_s", "2.5"},
        {"device_interval", "device_interval_s", "30"},
        {"timeout", "timeout_s", "42"},
        {"header_timeout", "header_timeout_s", "9"},
    };
    (void)state;
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        for (int old = 0; old < 2; old++) {
            struct agent_config c;
            char note[512], text[128], want[128];
            agent_config_default(&c);
            snprintf(text, sizeof(text), "[agent]\n; note\n%s = %s\n",
                     old ? keys[i].old : keys[i].now, keys[i].value);
            assert_int_equal(parse_noting(text, &c, note, sizeof(note)), 0);
            double got = i == 0   ? c.interval_s
                         : i == 1 ? c.device_interval_s
                         : i == 2 ? (double)c.timeout_s
                                  : (double)c.header_timeout_s;
            assert_true(got == atof(keys[i].value));
            snprintf(want, sizeof(want), "watt agent: a.ini:3: '%s' is deprecated: write %s",
                     keys[i].old, keys[i].now);
            if (old && !strstr(note, want))
                fail_msg("%s: note '%s', want '%s'", keys[i].old, note, want);
            if (!old && note[0])
                fail_msg("%s: unexpected note '%s'", keys[i].now, note);
            agent_config_free(&c);
        }
    }
}

/* insecure and restore_on_exit take the one boolean vocabulary. */
static void test_booleans(void **state)
{
    static const char *const yes[] = {"yes", "True", "ON", "1"};
    static const char *const no[] = {"no", "false", "Off", "0"};
    (void)state;
    for (size_t i = 0; i < 4; i++) {
        struct agent_config c;
        char *err = NULL, text[128];
        agent_config_default(&c);
        snprintf(text, sizeof(text), "[agent]\ninsecure = %s\nrestore_on_exit = %s\n", yes[i],
                 no[i]);
        assert_int_equal(agent_config_parse(text, "a.ini", &c, &err), 0);
        assert_true(c.insecure);
        assert_false(c.restore_on_exit);
        agent_config_free(&c);
    }
    struct agent_config c;
    char *err = NULL;
    agent_config_default(&c);
    assert_int_equal(agent_config_parse("[agent]\nrestore_on_exit = maybe\n", "a.ini", &c, &err),
                     -EINVAL);
    assert_string_equal(err, "a.ini:2: restore_on_exit 'maybe': want yes/no, true/false, on/off "
                             "or 1/0");
    free(err);
    agent_config_free(&c);
}

static void test_listen(void **state)
{
    char *host = NULL;
    uint16_t port = 0;
    (void)state;
    assert_int_equal(agent_parse_listen("127.0.0.1:9100", &host, &port), 0);
    assert_string_equal(host, "127.0.0.1");
    assert_int_equal(port, 9100);
    free(host);
    assert_int_equal(agent_parse_listen("[::1]:9723", &host, &port), 0);
    assert_string_equal(host, "::1");
    free(host);
    assert_int_equal(agent_parse_listen("9724", &host, &port), 0);
    assert_string_equal(host, "127.0.0.1"); /* a bare port stays local */
    assert_int_equal(port, 9724);
    free(host);
    assert_int_equal(agent_parse_listen("127.0.0.1:70000", &host, &port), -EINVAL);
    assert_int_equal(agent_parse_listen("127.0.0.1:", &host, &port), -EINVAL);
    assert_int_equal(agent_parse_listen(":x", &host, &port), -EINVAL);
}

/* The whole of FILE under $WATT_SRCDIR, or a failed test. */
static char *read_src(const char *rel)
{
    const char *src = getenv("WATT_SRCDIR");
    if (!src)
        fail_msg("WATT_SRCDIR is not set (meson test sets it)");
    char *path = xasprintf("%s/%s", src, rel);
    FILE *f = fopen(path, "re");
    if (!f)
        fail_msg("cannot open %s", path);
    char *buf = xcalloc(1, 1 << 20);
    size_t n = fread(buf, 1, (1 << 20) - 1, f);
    buf[n] = '\0';
    fclose(f);
    free(path);
    return buf;
}

/* dist/agent.ini.example (installed as examples/agent.ini.example) shows
 * every key the parser takes, commented out, with its default: as it is,
 * it parses to the defaults; with every ";key = value" line uncommented,
 * it still does (so a default changed in config.c or a key renamed there
 * fails here until the example says the same). */
static void test_example(void **state)
{
    _cleanup_free_ char *text = read_src("dist/agent.ini.example");
    _cleanup_free_ char *code = read_src("src/agent/config.c");
    struct agent_config c, d;
    char *err = NULL;
    (void)state;

    agent_config_default(&c);
    if (agent_config_parse(text, "agent.ini.example", &c, &err) < 0)
        fail_msg("the example as shipped: %s", err);
    agent_config_free(&c);

    /* uncomment ";key = value" lines (a ';' then a lower-case letter) */
    _cleanup_free_ char *on = xcalloc(1, strlen(text) + 1);
    char *o = on;
    for (const char *p = text; *p; p++) {
        bool bol = p == text || p[-1] == '\n';
        if (!(bol && p[0] == ';' && p[1] >= 'a' && p[1] <= 'z'))
            *o++ = *p;
    }
    agent_config_default(&c);
    agent_config_default(&d);
    if (agent_config_parse(on, "agent.ini.example", &c, &err) < 0)
        fail_msg("the example, uncommented: %s", err);
    assert_string_equal(c.listen_host, d.listen_host);
    assert_int_equal(c.port, d.port);
    assert_true(c.interval_s == d.interval_s);
    assert_null(c.root);
    assert_int_equal(c.rapl, d.rapl);
    assert_true(c.pue == d.pue);
    assert_null(c.model);
    assert_int_equal(c.max_connections, d.max_connections);
    assert_int_equal(c.max_per_client, d.max_per_client);
    assert_int_equal(c.timeout_s, d.timeout_s);
    assert_int_equal(c.header_timeout_s, d.header_timeout_s);
    assert_int_equal(c.max_request_bytes, d.max_request_bytes);
    assert_string_equal(c.control, d.control);
    assert_null(c.tls_cert);
    assert_null(c.tls_key);
    assert_null(c.auth_user);
    assert_null(c.auth_password_file);
    assert_null(c.bmc);
    assert_null(c.bmc_user);
    assert_null(c.bmc_password_file);
    assert_int_equal(c.insecure, d.insecure);
    assert_null(c.profile);
    assert_null(c.config_dir);
    /* the default journal (NULL) is this path; device_interval's default
     * (< 0) is 10 s on a live machine, the value the example shows */
    assert_string_equal(c.journal, "var/lib/watt/journal");
    assert_int_equal(c.restore_on_exit, d.restore_on_exit);
    assert_int_equal(c.wakeups, d.wakeups);
    assert_int_equal(c.cgroups, d.cgroups);
    assert_true(c.device_interval_s == 10);
    assert_null(c.fleet_metrics);
    agent_config_free(&c);
    agent_config_free(&d);

    /* every key config.c compares against (streq(key, "NAME")) is shown */
    static const char needle[] = "streq(key, \"";
    size_t keys = 0;
    for (const char *p = strstr(code, needle); p; p = strstr(p, needle)) {
        p += sizeof(needle) - 1;
        const char *q = strchr(p, '"');
        assert_non_null(q);
        _cleanup_free_ char *want = xasprintf("\n;%.*s =", (int)(q - p), p);
        if (!strstr(text, want))
            fail_msg("agent.ini key '%.*s' is not in dist/agent.ini.example", (int)(q - p), p);
        keys++;
    }
    assert_true(keys >= 25);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),  cmocka_unit_test(test_parse_good),
        cmocka_unit_test(test_parse_bad), cmocka_unit_test(test_parse_tuning),
        cmocka_unit_test(test_listen),    cmocka_unit_test(test_renamed_keys),
        cmocka_unit_test(test_booleans),  cmocka_unit_test(test_example),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
