/* The fleet layer's inputs: PlanetLab folders and CSV traces, host specs,
 * policy names and the synthetic trace generator. */
#include <errno.h>
#include <fcntl.h>
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

/* cmocka.h needs stdarg, stddef, stdint and setjmp first */
#include <cmocka.h>

#include "fleet/model/fleet.h"

/* The source tree: WATT_SRCDIR under meson test, else from this file's path. */
static const char *srcdir(void)
{
    static char buf[4096];
    const char *env = getenv("WATT_SRCDIR");
    if (env && *env)
        return env;
    snprintf(buf, sizeof(buf), "%s", __FILE__);
    char *p = strstr(buf, "/tests/unit/");
    if (p)
        *p = '\0';
    return buf;
}

static void assert_contains(const char *s, const char *needle)
{
    if (!strstr(s, needle))
        fail_msg("'%s' lacks '%s'", s, needle);
}

/* ---- PlanetLab ----------------------------------------------------------- */

static void test_planetlab_day(void **state)
{
    char path[4200];
    snprintf(path, sizeof(path), "%s/data/planetlab/20110303", srcdir());
    struct fleet_trace t;
    struct fleet_error err = {{0}};
    int r = fleet_trace_load(path, &t, &err);
    if (r < 0)
        fail_msg("%s", err.msg);
    assert_int_equal(t.n_vms, 1052);
    assert_int_equal(t.n_steps, 288);
    assert_true(t.step_s == 300);
    assert_string_equal(t.origin, path);
    /* files in byte order; the first one starts 24, 34, 29 and ends 51 */
    assert_string_equal(t.vms[0].name, "146-179_surfsnel_dsl_internl_net_colostate_557");
    assert_int_equal(t.vms[0].first, 0);
    assert_int_equal(t.vms[0].len, 288);
    assert_int_equal(t.cpu[t.vms[0].off + 0], 2400);
    assert_int_equal(t.cpu[t.vms[0].off + 2], 2900);
    assert_int_equal(t.cpu[t.vms[0].off + 99], 3400);
    assert_true(fabs(fleet_trace_at(&t, 0, 287) - 0.51) < 1e-12);
    assert_true(fleet_trace_at(&t, 0, 288) == 0);
    /* a name with a space, 15th in byte order: 62, 76, 76, ..., 77 */
    assert_string_equal(t.vms[14].name, "aladdin_planetlab_extranet_uni-passau_de_ rnp_dcc_ufjf");
    assert_int_equal(t.cpu[t.vms[14].off + 1], 7600);
    assert_int_equal(t.cpu[t.vms[14].off + 287], 7700);
    assert_string_equal(t.vms[1051].name, "vn5_cse_wustl_edu_uw_oneswarm");
    /* the day's mean is 12.31 % (data/planetlab/README.md) */
    double sum = 0;
    for (size_t v = 0; v < t.n_vms; v++) {
        assert_int_equal(t.vms[v].off, v * 288);
        for (uint32_t k = 0; k < 288; k++)
            sum += fleet_trace_at(&t, v, k);
    }
    assert_true(fabs(sum / (1052 * 288) * 100 - 12.31) < 0.005);
    fleet_trace_free(&t);
    fleet_trace_free(&t); /* idempotent */
}

static void expect_planetlab_error(const char *text, const char *needle)
{
    struct fleet_trace t = {.step_s = 300};
    struct fleet_error err = {{0}};
    assert_int_equal(fleet_trace_parse_planetlab(text, strlen(text), "day/vm_x", &t, &err),
                     -EINVAL);
    assert_contains(err.msg, needle);
    assert_int_equal(t.n_vms, 0);
    fleet_trace_free(&t);
}

static void test_planetlab_parse(void **state)
{
    struct fleet_trace t = {.step_s = 300};
    struct fleet_error err = {{0}};
    assert_int_equal(fleet_trace_parse_planetlab("5\r\n100\r\n0", 9, "day/a b", &t, &err), 0);
    assert_int_equal(fleet_trace_parse_planetlab("7\n", 2, "day/c", &t, &err), 0);
    assert_int_equal(t.n_vms, 2);
    assert_string_equal(t.vms[0].name, "a b");
    assert_int_equal(t.vms[0].len, 3);
    assert_int_equal(t.vms[1].len, 1);
    assert_int_equal(t.vms[1].off, 3);
    assert_int_equal(t.n_steps, 3);
    assert_int_equal(t.cpu[0], 500);
    assert_int_equal(t.cpu[1], 10000);
    assert_int_equal(t.cpu[2], 0);
    assert_int_equal(t.cpu[3], 700);
    fleet_trace_free(&t);

    expect_planetlab_error("", "day/vm_x: empty file");
    expect_planetlab_error("1\n2\n1o\n",
                           "day/vm_x line 3: '1o' is not a number (want an integer 0..100)");
    expect_planetlab_error("101\n", "day/vm_x line 1: 101 is out of range");
    expect_planetlab_error("-1\n", "line 1: '-1' is not a number");
    expect_planetlab_error("1.5\n", "line 1: '1.5' is not a number");
    expect_planetlab_error("1\n\n2\n", "line 2: '' is not a number");
    expect_planetlab_error("1\n\n", "line 2: '' is not a number");
    expect_planetlab_error("000000000000000000000000000000001\n",
                           "line 1: longer than 32 characters");

    /* 100,000 lines are fine, one more is not */
    size_t n = 100001;
    char *big = malloc(2 * n + 1);
    for (size_t i = 0; i < n; i++)
        memcpy(big + 2 * i, "1\n", 2);
    t = (struct fleet_trace){.step_s = 300};
    assert_int_equal(fleet_trace_parse_planetlab(big, 2 * (n - 1), "big", &t, &err), 0);
    assert_int_equal(t.vms[0].len, 100000);
    fleet_trace_free(&t);
    t = (struct fleet_trace){.step_s = 300};
    assert_int_equal(fleet_trace_parse_planetlab(big, 2 * n, "big", &t, &err), -EINVAL);
    assert_contains(err.msg, "big: more than 100000 lines");
    free(big);
}

static void write_file(const char *dir, const char *name, const char *text)
{
    char path[4200];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "we");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void rm_tree(const char *dir)
{
    char cmd[4300];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

static void test_load_folder_and_files(void **state)
{
    char dir[] = "/tmp/watt-fleet-XXXXXX";
    assert_non_null(mkdtemp(dir));
    write_file(dir, "b vm", "1\n2\n3\n");
    write_file(dir, "a", "4\n5\n6\n");
    write_file(dir, "README.md", "not a trace\n");
    write_file(dir, ".hidden", "x\n");
    char sub[4200];
    snprintf(sub, sizeof(sub), "%s/subdir", dir);
    assert_int_equal(mkdir(sub, 0700), 0);

    struct fleet_trace t;
    struct fleet_error err = {{0}};
    assert_int_equal(fleet_trace_load(dir, &t, &err), 0);
    assert_int_equal(t.n_vms, 2);
    assert_string_equal(t.vms[0].name, "a");
    assert_string_equal(t.vms[1].name, "b vm");
    assert_int_equal(t.cpu[t.vms[1].off + 2], 300);
    fleet_trace_free(&t);

    write_file(dir, "c", "1\n2\n");
    assert_int_equal(fleet_trace_load(dir, &t, &err), -EINVAL);
    assert_contains(err.msg, "/c has 2 lines, but ");
    assert_contains(err.msg, "/a has 3 (all files of a folder must have the same number)");

    write_file(dir, "c", "1\n2\nx\n");
    assert_int_equal(fleet_trace_load(dir, &t, &err), -EINVAL);
    assert_contains(err.msg, "/c line 3: 'x' is not a number");

    /* a CSV file by its extension; anything else is refused */
    write_file(dir, "t.csv", "vm,time_s,cpu_pct\nweb,0,5\nweb,60,7.5\n");
    char path[4200];
    snprintf(path, sizeof(path), "%s/t.csv", dir);
    assert_int_equal(fleet_trace_load(path, &t, &err), 0);
    assert_int_equal(t.n_vms, 1);
    assert_true(t.step_s == 60);
    assert_int_equal(t.cpu[1], 750);
    fleet_trace_free(&t);
    snprintf(path, sizeof(path), "%s/a", dir);
    assert_int_equal(fleet_trace_load(path, &t, &err), -EINVAL);
    assert_contains(err.msg, "not a trace (want a folder of PlanetLab files or a .csv file)");
    snprintf(path, sizeof(path), "%s/missing", dir);
    assert_int_equal(fleet_trace_load(path, &t, &err), -ENOENT);
    assert_contains(err.msg, "cannot open ");

    /* over 64 MiB (sparse: costs no disk) */
    snprintf(path, sizeof(path), "%s/huge.csv", dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, (64 << 20) + 1), 0);
    close(fd);
    assert_int_equal(fleet_trace_load(path, &t, &err), -EFBIG);
    assert_contains(err.msg, "more than the 64 MiB a trace file may have");

    /* an empty folder */
    assert_int_equal(fleet_trace_load(sub, &t, &err), -EINVAL);
    assert_contains(err.msg, "no trace files in the folder");
    rm_tree(dir);
}

/* ---- CSV ------------------------------------------------------------------- */

static int parse_csv(const char *text, struct fleet_trace *t, struct fleet_error *err)
{
    return fleet_trace_parse_csv(text, strlen(text), "t.csv", t, err);
}

static void test_csv_good(void **state)
{
    struct fleet_trace t;
    struct fleet_error err = {{0}};
    const char *csv = "vm,time_s,cpu_pct,mem_mb\r\n"
                      "db,600,12.34,2048\r\n"
                      "db,900,100,4096\r\n"
                      "web,300,0.5,\r\n"
                      "web,600,.25,512\r\n"
                      "web,900,0,\r\n"
                      "web,1200,99.99,\r\n"
                      "batch,1800,50,0";
    int r = parse_csv(csv, &t, &err);
    if (r < 0)
        fail_msg("%s", err.msg);
    assert_string_equal(t.origin, "t.csv");
    assert_true(t.step_s == 300);
    assert_int_equal(t.n_vms, 3);
    assert_int_equal(t.n_steps, 6); /* steps 0..5 from t = 300 s */
    assert_string_equal(t.vms[0].name, "db");
    assert_int_equal(t.vms[0].first, 1);
    assert_int_equal(t.vms[0].len, 2);
    assert_int_equal(t.vms[0].ram_mb, 4096);
    assert_int_equal(t.vms[1].first, 0);
    assert_int_equal(t.vms[1].len, 4);
    assert_int_equal(t.vms[1].ram_mb, 512);
    assert_int_equal(t.vms[2].first, 5);
    assert_int_equal(t.vms[2].ram_mb, 0);
    assert_int_equal(t.cpu[t.vms[0].off], 1234);
    assert_int_equal(t.cpu[t.vms[0].off + 1], 10000);
    assert_int_equal(t.cpu[t.vms[1].off], 50);
    assert_int_equal(t.cpu[t.vms[1].off + 1], 25);
    assert_int_equal(t.cpu[t.vms[1].off + 3], 9999);
    assert_true(fleet_trace_at(&t, 0, 0) == 0);
    assert_true(fabs(fleet_trace_at(&t, 0, 1) - 0.1234) < 1e-12);
    assert_true(fleet_trace_at(&t, 0, 3) == 0);
    fleet_trace_free(&t);

    /* exactly 366 days: accepted */
    assert_int_equal(parse_csv("vm,time_s,cpu_pct\na,1700000000,5\na,1715811200,6\n", &t, &err), 0);
    assert_int_equal(t.n_steps, 2);
    assert_true(t.n_steps * t.step_s == FLEET_MAX_HORIZON_S);
    fleet_trace_free(&t);
    /* one row: the step defaults to 300 s */
    assert_int_equal(parse_csv("vm,time_s,cpu_pct\nx,7,1\n", &t, &err), 0);
    assert_int_equal(t.n_steps, 1);
    assert_true(t.step_s == 300);
    fleet_trace_free(&t);
}

static void expect_csv_error(const char *text, const char *needle)
{
    struct fleet_trace t;
    memset(&t, 0x5a, sizeof(t));
    struct fleet_error err = {{0}};
    assert_int_equal(parse_csv(text, &t, &err), -EINVAL);
    assert_contains(err.msg, needle);
    assert_int_equal(t.n_vms, 0x5a5a5a5a5a5a5a5aull); /* untouched */
}

static void test_csv_bad(void **state)
{
    expect_csv_error("", "t.csv: empty file (want a header vm,time_s,cpu_pct[,mem_mb] and rows)");
    expect_csv_error("vm,time_s,cpu_pct\n", "t.csv: no rows after the header");
    expect_csv_error("a,0,5\na,300,6\n",
                     "t.csv line 1: header 'a,0,5' (want vm,time_s,cpu_pct[,mem_mb])");
    expect_csv_error("vm,time_s,cpu_pct\na,300,5\na,0,6\n",
                     "t.csv line 3: out-of-order row for vm 'a' at time 0 (rows must be sorted by "
                     "time within a VM)");
    expect_csv_error("vm,time_s,cpu_pct\na,0,5\na,0,6\n",
                     "t.csv line 3: duplicate row for vm 'a' at time 0");
    expect_csv_error("vm,time_s,cpu_pct\na,0,5\nb,0,6\na,300,6\n",
                     "t.csv line 4: vm 'a' reappears after other VMs' rows (seen before on line 2; "
                     "rows must be grouped by VM)");
    expect_csv_error("vm,time_s,cpu_pct\na,0,5\na,300,5\na,900,5\n",
                     "t.csv line 4: vm 'a' has no sample from 600 s to 600 s (the step is 300 s");
    expect_csv_error("vm,time_s,cpu_pct\na,0,5\na,300,5\nb,100,5\n",
                     "t.csv line 4: time 100 s is not a multiple of the step 300 s from the first "
                     "time 0 s");
    expect_csv_error("vm,time_s,cpu_pct\na,0,5x\n",
                     "t.csv line 2: cpu_pct '5x' is not a number (want a decimal 0..100)");
    expect_csv_error("vm,time_s,cpu_pct\na,0,100.5\n",
                     "t.csv line 2: cpu_pct '100.5' is out of range");
    expect_csv_error("vm,time_s,cpu_pct\na,0,-1\n", "cpu_pct '-1' is not a number");
    expect_csv_error("vm,time_s,cpu_pct\na,-5,1\n", "line 2: time_s '-5' is not an integer");
    expect_csv_error("vm,time_s,cpu_pct\na,1.5,1\n", "line 2: time_s '1.5' is not an integer");
    expect_csv_error("vm,time_s,cpu_pct\na,0\n", "line 2: want 3 fields (vm,time_s,cpu_pct)");
    expect_csv_error("vm,time_s,cpu_pct,mem_mb\na,0,1\n", "line 2: want 4 fields");
    expect_csv_error("vm,time_s,cpu_pct,mem_mb\na,0,1,lots\n",
                     "line 2: mem_mb 'lots' is not an integer");
    expect_csv_error("vm,time_s,cpu_pct\n,0,1\n", "line 2: the vm name must be 1..255 characters");
    expect_csv_error("vm,time_s,cpu_pct\na,0,1\n\n", "line 3: want 3 fields");
    expect_csv_error("vm,time_s,cpu_pct\na\bb,0,1\n",
                     "line 2: the vm name has a control character");

    /* The horizon (earliest time to the end of the latest time's step) is
     * at most 366 days: 3 lines 10^12 s apart used to simulate for 32 h. */
    expect_csv_error("vm,time_s,cpu_pct\na,0,50\na,1000000000000,50\n",
                     "t.csv line 3: time 1000000000000 s is 1000000000000 s after the earliest "
                     "time 0 s (line 2); with the step of 1000000000000 s the trace spans "
                     "2000000000000 s, more than the 31622400 s (366 days) a trace may span");
    expect_csv_error("vm,time_s,cpu_pct\na,15811202,50\nb,1,50\nb,15811202,50\n",
                     "t.csv line 3: time 1 s is 15811201 s before the latest time 15811202 s "
                     "(line 2); with the step of 15811201 s the trace spans 31622402 s, more than "
                     "the 31622400 s");
    /* epoch times are fine: the span counts, not the origin */
    expect_csv_error("vm,time_s,cpu_pct\na,1700000000,5\na,1731622101,5\n",
                     "the trace spans 63244202 s");

    char line[700];
    memset(line, 'v', sizeof(line));
    memcpy(line, "vm,time_s,cpu_pct\n", 18);
    memcpy(line + 600, ",0,1\n", 6);
    expect_csv_error(line, "t.csv line 2: longer than 512 characters");
}

/* ---- hosts ----------------------------------------------------------------- */

static int parse_hosts(const char *spec, struct fleet_hosts *h, struct fleet_error *err)
{
    return fleet_hosts_parse(spec, strlen(spec), "hosts.ini", h, err);
}

static void test_builtin_types(void **state)
{
    const struct fleet_host_type *g4 = fleet_host_type_builtin("g4");
    const struct fleet_host_type *g5 = fleet_host_type_builtin("G5");
    assert_non_null(g4);
    assert_non_null(g5);
    assert_null(fleet_host_type_builtin("g6"));
    assert_int_equal(g4->cores, 2);
    assert_true(g4->mips_per_core == 1860 && g5->mips_per_core == 2660);
    assert_int_equal(g4->ram_mb, 4096);
    assert_true(g4->bw_mbit == 1000);
    assert_true(g4->power_w[0] == 86 && g4->power_w[5] == 102 && g4->power_w[10] == 117);
    assert_true(g5->power_w[0] == 93.7 && g5->power_w[5] == 116 && g5->power_w[10] == 135);
    assert_true(g4->off_w == 5 && g4->boot_s == 300);
    assert_true(g4->boot_j == 300 * 86.0 && g5->boot_j == 300 * 93.7);
}

static void test_hosts_good(void **state)
{
    struct fleet_hosts h;
    struct fleet_error err = {{0}};
    assert_int_equal(parse_hosts("cloudsim", &h, &err), 0);
    assert_int_equal(h.n_hosts, 800);
    assert_int_equal(h.n_types, 2);
    assert_string_equal(h.types[0].name, "g4");
    assert_string_equal(h.types[1].name, "g5");
    for (size_t i = 0; i < 800; i++)
        assert_int_equal(h.type_of[i], i % 2);
    fleet_hosts_free(&h);

    assert_int_equal(parse_hosts("2xg5, 3 x G4", &h, &err), 0);
    assert_int_equal(h.n_hosts, 5);
    assert_string_equal(h.types[0].name, "g5");
    uint16_t block[] = {0, 0, 1, 1, 1};
    assert_memory_equal(h.type_of, block, sizeof(block));
    fleet_hosts_free(&h);

    assert_int_equal(parse_hosts("1xg4,3xg5,alternate\n", &h, &err), 0);
    uint16_t alt[] = {0, 1, 1, 1};
    assert_memory_equal(h.type_of, alt, sizeof(alt));
    fleet_hosts_free(&h);

    const char *ini = "; a fleet of our own\n"
                      "[type big]\n"
                      "cores = 64\n"
                      "mips_per_core = 3000\n"
                      "ram_mb = 262144\n"
                      "bw_mbit = 25000\n"
                      "power_w = 120, 160, 190, 220, 250, 280, 310, 340, 370, 400, 430\n"
                      "boot_s = 120\n"
                      "\n"
                      "[type old]\n"
                      "base = g4\n"
                      "off_w = 8\n"
                      "\n"
                      "[fleet]\n"
                      "hosts = 2 x big, 1 x old, 1 x g5\n"
                      "order = alternate\n";
    int r = parse_hosts(ini, &h, &err);
    if (r < 0)
        fail_msg("%s", err.msg);
    assert_int_equal(h.n_types, 3);
    assert_int_equal(h.n_hosts, 4);
    uint16_t ini_order[] = {0, 1, 2, 0};
    assert_memory_equal(h.type_of, ini_order, sizeof(ini_order));
    assert_int_equal(h.types[0].cores, 64);
    assert_true(h.types[0].off_w == 5);
    assert_true(h.types[0].boot_j == 120 * 120.0); /* boot_s x idle power */
    assert_true(h.types[0].power_w[10] == 430);
    assert_string_equal(h.types[1].name, "old");
    assert_true(h.types[1].mips_per_core == 1860 && h.types[1].off_w == 8);
    assert_true(h.types[1].boot_j == 300 * 86.0);
    assert_string_equal(h.types[2].name, "g5");
    fleet_hosts_free(&h);
    fleet_hosts_free(&h);
}

/* The grammar of every fleet INI file (docs/config.md): a line longer
 * than inih's 199 characters is read whole (inih read its tail as a line
 * of its own), lines keep their numbers after it, indentation is not a
 * continuation, " ;" is a comment in headers and after values. */
static void test_hosts_grammar(void **state)
{
    char text[1024];
    char pad[400];
    memset(pad, '.', sizeof(pad) - 1);
    pad[sizeof(pad) - 1] = '\0';
    snprintf(text, sizeof(text),
             "; %s\n[type a] ; ours\n  base = g4\n  cores = 8 ; eight\n[fleet]\n"
             "hosts = 2 x a, 1 x g5 ; %s\n",
             pad, pad);
    struct fleet_hosts h;
    struct fleet_error err = {{0}};
    if (fleet_hosts_parse(text, strlen(text), "hosts.ini", &h, &err) < 0)
        fail_msg("%s", err.msg);
    assert_int_equal(h.n_hosts, 3);
    assert_int_equal(h.types[0].cores, 8);
    fleet_hosts_free(&h);
    snprintf(text, sizeof(text), "; %s\n[type a]\nbase = g4\ncores = many\n", pad);
    assert_int_equal(fleet_hosts_parse(text, strlen(text), "hosts.ini", &h, &err), -EINVAL);
    assert_string_equal(err.msg, "hosts.ini line 4: cores = 'many': want an integer 1..1e+06");
}

static void expect_hosts_error(const char *spec, const char *needle)
{
    struct fleet_hosts h;
    memset(&h, 0x5a, sizeof(h));
    struct fleet_error err = {{0}};
    assert_int_equal(parse_hosts(spec, &h, &err), -EINVAL);
    assert_contains(err.msg, needle);
    assert_int_equal(h.n_hosts, 0x5a5a5a5a5a5a5a5aull);
}

static void test_hosts_bad(void **state)
{
    expect_hosts_error("400xg6", "hosts.ini: '400xg6': unknown host type 'g6' (built-in: g4, g5)");
    expect_hosts_error("0xg4", "hosts.ini: '0xg4': the count must be 1..10000000");
    expect_hosts_error("10000001xg4", "the count must be 1..10000000");
    expect_hosts_error("6000000xg4,6000000xg5", "hosts.ini: more than 10000000 hosts");
    expect_hosts_error("", "hosts.ini: no hosts");
    expect_hosts_error("alternate", "hosts.ini: no hosts");
    expect_hosts_error("g4", "'g4': want COUNT x TYPE (e.g. 400xg4)");
    expect_hosts_error("-4xg4", "'-4xg4': want COUNT x TYPE");
    expect_hosts_error("[type a]\nbase = g4\ncores = -2\n[fleet]\nhosts = 1 x a\n",
                       "hosts.ini line 3: cores = '-2': want an integer 1..1e+06");
    expect_hosts_error("[type a]\nbase = g4\nmips_per_core = nan\n[fleet]\nhosts = 1 x a\n",
                       "hosts.ini line 3: mips_per_core = 'nan': want a number");
    expect_hosts_error("[type a]\nbase = g4\noff_w = -1\n", "line 3: off_w = '-1'");
    expect_hosts_error("[type a]\nbase = g4\npower_w = 1,2,3\n[fleet]\nhosts = 1 x a\n",
                       "hosts.ini line 3: power_w: 3 values, want 11");
    expect_hosts_error("[type a]\nbase = g4\npower_w = 1,2,3,4,5,6,7,8,9,10,11,12\n",
                       "line 3: power_w: want 11 comma-separated watts");
    expect_hosts_error("[type a]\nbase = g4\npower_w = 1,2,3,4,5,4,7,8,9,10,11\n",
                       "line 3: power_w: 4 W at 50 % is less than 5 W at 40 %");
    expect_hosts_error("[type a]\nbase = g4\nwatts = 3\n",
                       "hosts.ini line 3: unknown key 'watts' in [type a]");
    expect_hosts_error("[fleet]\nhosts = 1 x g4\nspeed = 3\n",
                       "line 3: unknown key 'speed' in [fleet]");
    expect_hosts_error("[racks]\nn = 3\n", "hosts.ini line 1: unknown section [racks]");
    expect_hosts_error("[type a]\nbase = g4\n[type A]\nbase = g5\n",
                       "hosts.ini line 3: type 'A' is already defined on line 1");
    expect_hosts_error("[type a]\ncores = 2\n[fleet]\nhosts = 1 x a\n",
                       "hosts.ini line 1: [type a] needs cores, mips_per_core, ram_mb and power_w");
    expect_hosts_error("[type a]\nbase = g7\n", "line 2: base = 'g7': unknown built-in type");
    expect_hosts_error("[type a]\nbase = g4\n", "hosts.ini: no hosts = COUNT x TYPE");
    expect_hosts_error("[fleet]\nhosts = 3 x b\n",
                       "hosts.ini: [fleet] hosts: '3 x b': unknown host type 'b'");
    expect_hosts_error("[fleet]\nhosts = 1xg4\norder = random\n",
                       "line 3: order = 'random': want alternate or block");
    expect_hosts_error("[fleet]\nhosts\n", "hosts.ini line 2: want key = value or [section]");
    expect_hosts_error("[type a b]\n", "line 1: type name 'a b' must be 1..40");
    expect_hosts_error("hosts = 1xg4\n",
                       "hosts.ini line 1: 'hosts' outside [type NAME] or [fleet]");

    /* 65535 types are the most type_of can index */
    size_t n = 65536;
    char *big = malloc(n * 32 + 64);
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        k += (size_t)sprintf(big + k, "[type t%zu]\nbase = g4\n", i);
    struct fleet_hosts h;
    struct fleet_error err = {{0}};
    assert_int_equal(fleet_hosts_parse(big, k, "many.ini", &h, &err), -EINVAL);
    assert_contains(err.msg, "many.ini line 131071: more than 65535 host types");
    free(big);
}

/* ---- policies -------------------------------------------------------------- */

/* ---- the watt policy's tunables -------------------------------------------- */

static void test_watt_params(void **state)
{
    struct fleet_watt_params p;
    struct fleet_error err = {{0}};
    assert_int_equal(fleet_watt_params_parse(NULL, &p, &err), 0);
    assert_true(p.pack == 0.80 && p.window == 12 && p.off_after == 2);
    assert_int_equal(fleet_watt_params_parse(" pack = 0.85 ,, window=30,off_after=0,", &p, &err),
                     0);
    assert_true(p.pack == 0.85 && p.window == 30 && p.off_after == 0 && p.over == 0.95);
    assert_int_equal(fleet_watt_params_parse("pack=1,over=2,low=0,quantile=1,window=1000,"
                                             "per_vm_day=1000,per_tick=1,spare=10,off_after=1e6",
                                             &p, &err),
                     0);

    /* each used to be taken as strtod() read it: "O.8" as 0, and values
     * the policy then converts to an index (window, quantile) out of range */
    static const struct {
        const char *s, *needle;
    } bad[] = {
        {"pack=O.8", "pack = 'O.8': want a number in (0, 1]"},
        {"pack=0", "pack = '0': want a number in (0, 1]"},
        {"pack=", "pack = '': want"},
        {"quantile=0", "quantile = '0'"},
        {"quantile=nan", "quantile = 'nan'"},
        {"window=-1", "window = '-1': want a whole number in [1, 1000]"},
        {"window=2.5", "window = '2.5': want a whole number"},
        {"window=1e300", "window = '1e300'"},
        {"per_tick=1e300", "per_tick = '1e300': want a number in [0, 1]"},
        {"spare=0x1", "spare = '0x1'"},
        {"off_after=inf", "off_after = 'inf'"},
        {"pack", "'pack': want KEY=VALUE"},
        {"speed=3", "unknown tunable 'speed' (pack, over, low, quantile, window"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        memset(&p, 0x5a, sizeof(p));
        struct fleet_watt_params untouched = p;
        err.msg[0] = '\0';
        if (fleet_watt_params_parse(bad[i].s, &p, &err) != -EINVAL)
            fail_msg("'%s' accepted", bad[i].s);
        assert_contains(err.msg, bad[i].needle);
        assert_memory_equal(&p, &untouched, sizeof(p));
    }
}

static void expect_policy(const char *s, enum fleet_alloc alloc, enum fleet_detector det,
                          enum fleet_selection sel, double param, const char *name)
{
    struct fleet_policy p;
    struct fleet_error err = {{0}};
    int r = fleet_policy_parse(s, &p, &err);
    if (r < 0)
        fail_msg("%s: %s", s, err.msg);
    assert_int_equal(p.alloc, alloc);
    assert_string_equal(p.name, name);
    if (alloc == FLEET_MIGRATE) {
        assert_int_equal(p.detector, det);
        assert_int_equal(p.selection, sel);
        assert_true(p.param == param);
    }
}

static void test_policy(void **state)
{
    expect_policy("npa", FLEET_NPA, 0, 0, 0, "npa");
    expect_policy("DVFS", FLEET_DVFS, 0, 0, 0, "dvfs");
    expect_policy("watt", FLEET_WATT, 0, 0, 0, "watt");
    expect_policy("thr-mmt-0.8", FLEET_MIGRATE, FLEET_THR, FLEET_MMT, 0.8, "thr-mmt-0.8");
    expect_policy("THR-MMT-1.0", FLEET_MIGRATE, FLEET_THR, FLEET_MMT, 1.0, "thr-mmt-1.0");
    expect_policy("IQR-MC-1.5", FLEET_MIGRATE, FLEET_IQR, FLEET_MC, 1.5, "iqr-mc-1.5");
    expect_policy("mad-mu-2.5", FLEET_MIGRATE, FLEET_MAD, FLEET_MU, 2.5, "mad-mu-2.5");
    expect_policy("lrr-rs-1.2", FLEET_MIGRATE, FLEET_LRR, FLEET_RS, 1.2, "lrr-rs-1.2");
    expect_policy("lr-mmt", FLEET_MIGRATE, FLEET_LR, FLEET_MMT, 1.2, "lr-mmt-1.2");
    expect_policy("thr-mc", FLEET_MIGRATE, FLEET_THR, FLEET_MC, 0.8, "thr-mc-0.8");
    expect_policy("iqr-mmt", FLEET_MIGRATE, FLEET_IQR, FLEET_MMT, 1.5, "iqr-mmt-1.5");
    expect_policy("mad-rs", FLEET_MIGRATE, FLEET_MAD, FLEET_RS, 2.5, "mad-rs-2.5");
    expect_policy("iqr-mmt-2e0", FLEET_MIGRATE, FLEET_IQR, FLEET_MMT, 2, "iqr-mmt-2.0");

    static const struct {
        const char *s, *needle;
    } bad[] = {
        {"", "policy name empty"},
        {"best", "unknown policy 'best' (want npa, dvfs, watt or DETECTOR-SELECTION[-PARAM]"},
        {"thr", "unknown policy 'thr'"},
        {"thr-xyz-0.8", "unknown policy 'thr-xyz-0.8'"},
        {"foo-mmt-0.8", "unknown policy 'foo-mmt-0.8'"},
        {"thr-mmt-1.5", "policy 'thr-mmt-1.5': parameter '1.5' must be a number in (0, 1]"},
        {"thr-mmt-0", "parameter '0' must be a number in (0, 1]"},
        {"iqr-mmt--1", "policy 'iqr-mmt--1': parameter '-1' must be a number > 0"},
        {"iqr-mmt-inf", "parameter 'inf' must be a number > 0"},
        {"iqr-mmt-nan", "parameter 'nan'"},
        {"iqr-mmt-0x10", "parameter '0x10'"},
        {"iqr-mmt-", "parameter ''"},
        {"iqr-mmt-1.5x", "parameter '1.5x'"},
        {"iqr-mmt-1e999", "parameter '1e999'"},
        {"iqr-mmt-1.5-2", "parameter '1.5-2'"},
        {"thr-mmt-0.80000000000000000000000000000000000000000000", "policy name too long"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct fleet_policy p;
        memset(&p, 0x5a, sizeof(p));
        struct fleet_error err = {{0}};
        assert_int_equal(fleet_policy_parse(bad[i].s, &p, &err), -EINVAL);
        assert_contains(err.msg, bad[i].needle);
        assert_int_equal(p.name[0], 0x5a);
    }
}

/* ---- synthetic ------------------------------------------------------------- */

static double trace_mean_pct(const struct fleet_trace *t)
{
    double sum = 0;
    size_t n = 0;
    for (size_t v = 0; v < t->n_vms; v++)
        for (uint32_t k = 0; k < t->vms[v].len; k++, n++)
            sum += t->cpu[t->vms[v].off + k];
    return sum / (double)n / 100;
}

static void test_synth(void **state)
{
    struct fleet_synth s = {.n_vms = 10000, .seed = 42};
    struct fleet_trace a, b, c;
    struct fleet_error err = {{0}};
    assert_int_equal(fleet_trace_synth(&s, &a, &err), 0);
    assert_int_equal(fleet_trace_synth(&s, &b, &err), 0);
    s.seed = 43;
    assert_int_equal(fleet_trace_synth(&s, &c, &err), 0);
    assert_int_equal(a.n_vms, 10000);
    assert_int_equal(a.n_steps, 288);
    assert_true(a.step_s == 300);
    size_t n = 10000 * 288;
    assert_memory_equal(a.cpu, b.cpu, n * sizeof(uint16_t));
    assert_memory_not_equal(a.cpu, c.cpu, n * sizeof(uint16_t));
    size_t zeros = 0, high = 0;
    for (size_t i = 0; i < n; i++) {
        assert_true(a.cpu[i] <= 10000);
        zeros += a.cpu[i] < 50;
        high += a.cpu[i] > 8000;
    }
    /* like PlanetLab: many samples near zero, a few high ones */
    assert_true(zeros > n / 20 && zeros < n / 2);
    assert_true(high > 0 && high < n / 20);
    double mean = trace_mean_pct(&a);
    assert_true(fabs(mean - 12) < 1.5);
    assert_true(fabs(trace_mean_pct(&c) - 12) < 1.5);
    for (size_t v = 0; v < a.n_vms; v++)
        assert_true(a.vms[v].off == v * 288 && a.vms[v].len == 288 && a.vms[v].first == 0);
    fleet_trace_free(&a);
    fleet_trace_free(&b);
    fleet_trace_free(&c);

    s = (struct fleet_synth){
        .n_vms = 2000, .seed = 7, .mean_pct = 30, .n_steps = 96, .step_s = 900};
    assert_int_equal(fleet_trace_synth(&s, &a, &err), 0);
    assert_int_equal(a.n_steps, 96);
    assert_true(fabs(trace_mean_pct(&a) - 30) < 1.5);
    fleet_trace_free(&a);

    s = (struct fleet_synth){.n_vms = 0};
    assert_int_equal(fleet_trace_synth(&s, &a, &err), -EINVAL);
    assert_contains(err.msg, "synthetic trace: 0 VMs");
    s = (struct fleet_synth){.n_vms = 1, .mean_pct = 95};
    assert_int_equal(fleet_trace_synth(&s, &a, &err), -EINVAL);
    assert_contains(err.msg, "mean 95 %");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_planetlab_day),
        cmocka_unit_test(test_planetlab_parse),
        cmocka_unit_test(test_load_folder_and_files),
        cmocka_unit_test(test_csv_good),
        cmocka_unit_test(test_csv_bad),
        cmocka_unit_test(test_builtin_types),
        cmocka_unit_test(test_hosts_good),
        cmocka_unit_test(test_hosts_bad),
        cmocka_unit_test(test_hosts_grammar),
        cmocka_unit_test(test_policy),
        cmocka_unit_test(test_watt_params),
        cmocka_unit_test(test_synth),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
