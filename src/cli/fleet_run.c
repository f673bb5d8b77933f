/* watt fleet run | plan | check | host: the controller that drives a real
 * fleet (src/fleet/control/ and src/fleet/engine/), and its manual controls. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/json.h"
#include "base/text.h"
#include "base/util.h"
#include "cli/verbs.h"
#include "fleet/control/control.h"
#include "fleet/control/site_load.h"

static volatile sig_atomic_t stop_signal;

static void on_signal(int sig)
{
    stop_signal = sig;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: watt fleet run   --config FLEET.INI [--dry-run] [--once] [--ticks N]\n"
               "                        [--json] [--metrics FILE]\n"
               "       watt fleet plan  --config FLEET.INI [--json] [--sample SECONDS]\n"
               "       watt fleet check --config FLEET.INI\n"
               "       watt fleet host  --config FLEET.INI HOST status|on|off|list [--json]\n"
               "\n"
               "Consolidate the VMs of a real fleet with the simulator's watt policy: observe\n"
               "(libvirt: each VM's CPU and memory; IPMI: each host's power and DCMI watts),\n"
               "plan, live-migrate within limits, switch empty hosts off and hosts on when\n"
               "load rises, verify every action and journal it (docs/fleet-run.md).\n"
               "\n"
               "  --config FILE   the fleet: hosts, BMCs, types, limits (docs/fleet-run.md)\n"
               "  --dry-run       observe and plan every tick, execute nothing\n"
               "  --once          one tick, then exit (same as --ticks 1)\n"
               "  --ticks N       N ticks, then exit (default: until SIGTERM or SIGINT)\n"
               "  --json          one JSON object per tick (docs/fleet-run.md)\n"
               "  --sample S      plan: observe twice, S seconds apart (default 5), so that\n"
               "                  the plan sees every VM's CPU; 0: once (no CPU rates)\n"
               "  --metrics FILE  write the controller's metrics there after every tick\n"
               "                  (Prometheus text; the agent's `fleet_metrics = FILE` serves it)\n"
               "\n"
               "plan prints what one tick would do and does nothing; check reads the\n"
               "configuration and exits; host asks or switches one host's BMC, or lists its\n"
               "domains.\n");
}

struct run_cli {
    const char *config;
    const char *metrics;
    bool dry_run, json;
    unsigned long ticks; /* 0: for ever */
    double sample_s;     /* plan: seconds between the two observations */
};

static int parse(int argc, char **argv, struct run_cli *o)
{
    static const struct option opts[] = {
        {"config", required_argument, NULL, 'c'},
        {"dry-run", no_argument, NULL, 'n'},
        {"once", no_argument, NULL, '1'},
        {"ticks", required_argument, NULL, 't'},
        {"json", no_argument, NULL, 'j'},
        {"metrics", required_argument, NULL, 'm'},
        {"sample", required_argument, NULL, 's'},
        {"help", no_argument, NULL, 'h'},
        {0},
    };
    int ch;
    optind = 1;
    while ((ch = getopt_long(argc, argv, "c:n1t:jm:s:h", opts, NULL)) != -1) {
        switch (ch) {
        case 'c':
            o->config = optarg;
            break;
        case 'n':
            o->dry_run = true;
            break;
        case '1':
            o->ticks = 1;
            break;
        case 't': {
            char *end;
            errno = 0;
            unsigned long v = strtoul(optarg, &end, 10);
            if (errno || *end || end == optarg || v == 0 || v > 100000000) {
                text_printf(stderr, "watt fleet: --ticks '%s': want a count 1..100000000\n",
                            optarg);
                return -1;
            }
            o->ticks = v;
            break;
        }
        case 'j':
            o->json = true;
            break;
        case 's': {
            char *end;
            double v = strtod(optarg, &end);
            if (end == optarg || *end || !(v >= 0 && v <= 3600)) {
                text_printf(stderr, "watt fleet: --sample '%s': want seconds 0..3600\n", optarg);
                return -1;
            }
            o->sample_s = v;
            break;
        }
        case 'm':
            o->metrics = optarg;
            break;
        case 'h':
            usage(stdout);
            return 1;
        default:
            text_printf(stderr, "watt fleet: see watt fleet run --help\n");
            return -1;
        }
    }
    if (!o->config) {
        text_printf(stderr, "watt fleet %s: --config FLEET.INI is required\n", argv[0]);
        return -1;
    }
    return 0;
}

static int load_site(const char *path, struct site *ret)
{
    struct fleet_error err = {{0}};
    int r = site_load(path, ret, &err);
    if (r < 0)
        text_printf(stderr, "watt fleet: %s\n", err.msg);
    return r;
}

static double mono_s(void)
{
    return (double)now_monotonic_ns() / 1e9;
}

static void write_metrics(const struct controller *c, const char *path)
{
    _cleanup_free_ char *tmp = xasprintf("%s.tmp", path);
    FILE *f = fopen(tmp, "we");
    if (!f) {
        text_printf(stderr, "watt fleet: cannot write %s: %s\n", tmp, strerror(errno));
        return;
    }
    controller_metrics(c, f);
    bool bad = fflush(f) != 0 || ferror(f);
    if (fclose(f) != 0 || bad || rename(tmp, path) < 0) {
        text_printf(stderr, "watt fleet: cannot write %s: %s\n", path, strerror(errno));
        unlink(tmp);
    }
}

/* Sleep until DEADLINE (monotonic seconds) or a signal. */
static void wait_until(double deadline)
{
    while (!stop_signal) {
        double left = deadline - mono_s();
        if (left <= 0)
            return;
        struct timespec ts = {(time_t)left, (long)((left - floor(left)) * 1e9)};
        nanosleep(&ts, NULL);
    }
}

static int run(struct run_cli *o, bool plan_only)
{
    struct site site = {0};
    if (load_site(o->config, &site) < 0)
        return 2;
    struct ctl_options copt = {.dry_run = o->dry_run || plan_only};
    struct controller *c = NULL;
    struct fleet_error err = {{0}};
    int r = controller_open(&site, &copt, &c, &err);
    if (r < 0) {
        text_printf(stderr, "watt fleet: %s\n", err.msg);
        site_free(&site);
        return 1;
    }
    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    unsigned long ticks = plan_only ? 1 : o->ticks;
    if (plan_only && o->sample_s > 0) { /* a first sample, for the CPU rates */
        controller_prime(c, mono_s());
        wait_until(mono_s() + o->sample_s);
    }
    double next = mono_s();
    int rc = 0;
    for (unsigned long t = 0; !stop_signal && (ticks == 0 || t < ticks); t++) {
        r = controller_tick(c, mono_s(), stdout, o->json);
        if (r < 0) {
            text_printf(stderr, "watt fleet: tick %lu: %s\n", t + 1, c->last_error);
            rc = 1;
            break;
        }
        if (o->metrics)
            write_metrics(c, o->metrics);
        next += site.limits.interval_s;
        if (ticks == 0 || t + 1 < ticks)
            wait_until(next);
    }
    controller_close(c);
    site_free(&site);
    return rc;
}

static const char *domain_state(const struct fx_domain *d)
{
    return d->running ? "running" : d->active ? "active" : "shut off";
}

static void print_list(const char *host, const struct fx_list *l, bool json)
{
    if (!json) {
        for (size_t i = 0; i < l->n; i++) { /* a name from the hypervisor: printable */
            _cleanup_free_ char *name = text_pad(l->v[i].name, 24);
            printf("%s %-8s cpu %10.3f s  %6.0f MiB  %u vCPU\n", name, domain_state(&l->v[i]),
                   (double)l->v[i].cpu_ns / 1e9, (double)l->v[i].mem_kib / 1024, l->v[i].vcpus);
        }
        return;
    }
    struct json j;
    json_init(&j, false);
    json_object_begin(&j);
    json_kv_string(&j, "host", host);
    json_kv_u64(&j, "mem_kib", l->node.mem_kib);
    json_kv_u64(&j, "cpus", l->node.cpus);
    json_key(&j, "domains");
    json_array_begin(&j);
    for (size_t i = 0; i < l->n; i++) {
        const struct fx_domain *d = &l->v[i];
        json_object_begin(&j);
        json_kv_string(&j, "name", d->name);
        json_kv_string(&j, "uuid", d->uuid[0] ? d->uuid : NULL);
        json_kv_string(&j, "state", domain_state(d));
        json_kv_bool(&j, "persistent", d->persistent);
        json_kv_double(&j, "cpu_s", (double)d->cpu_ns / 1e9);
        json_kv_u64(&j, "vcpus", d->vcpus);
        json_kv_u64(&j, "mem_kib", d->mem_kib);
        json_object_end(&j);
    }
    json_array_end(&j);
    json_object_end(&j);
    printf("%s\n", strbuf_str(&j.out));
    json_free(&j);
}

static int host_cmd(struct run_cli *o, int argc, char **argv)
{
    if (argc - optind != 2) {
        text_printf(stderr, "watt fleet host: want HOST status|on|off|list\n");
        return 2;
    }
    const char *name = argv[optind], *what = argv[optind + 1];
    if (!streq(what, "status") && !streq(what, "on") && !streq(what, "off") &&
        !streq(what, "list")) {
        text_printf(stderr, "watt fleet host: '%s': want status, on, off or list\n", what);
        return 2;
    }
    struct site site = {0};
    if (load_site(o->config, &site) < 0)
        return 2;
    ssize_t hi = site_host_find(&site, name);
    struct fx_vms *vms = NULL;
    struct fx_power *pw = NULL;
    struct fleet_error err = {{0}};
    int r = hi < 0 ? -ENOENT : fx_open(&site, &vms, &pw, &err);
    if (hi < 0)
        text_printf(stderr, "watt fleet host: no [host %s] in %s\n", name, o->config);
    else if (r < 0)
        text_printf(stderr, "watt fleet host: %s\n", err.msg);
    if (r < 0) {
        site_free(&site);
        return hi < 0 ? 2 : 1;
    }
    if (streq(what, "status")) {
        enum fx_power_state p;
        double w = NAN;
        r = pw->status(pw, (size_t)hi, &p, &err);
        if (r == 0 && p == FX_POWER_ON &&
            pw->reading(pw, (size_t)hi, &w, &(struct fleet_error){{0}}) < 0)
            w = NAN;
        if (r == 0 && o->json) {
            struct json j;
            json_init(&j, false);
            json_object_begin(&j);
            json_kv_string(&j, "host", name);
            json_kv_string(&j, "power", fx_power_name(p));
            json_kv_double(&j, "watts", w);
            json_object_end(&j);
            printf("%s\n", strbuf_str(&j.out));
            json_free(&j);
        } else if (r == 0) {
            text_printf(stdout, "%s: power %s\n", name, fx_power_name(p));
        }
        if (r == 0 && !o->json && !isnan(w))
            text_printf(stdout, "%s: %.0f W (DCMI)\n", name, w);
    } else if (streq(what, "list")) {
        struct fx_list l = {0};
        r = vms->list(vms, (size_t)hi, &l, &err);
        if (r == 0)
            print_list(name, &l, o->json);
        fx_list_free(&l);
    } else {
        r = pw->set(pw, (size_t)hi, streq(what, "on"), &err);
        if (r == 0)
            text_printf(stdout, "%s: power %s accepted by the BMC\n", name, what);
    }
    if (r < 0)
        text_printf(stderr, "watt fleet host: %s\n", err.msg);
    vms->close(vms);
    pw->close(pw);
    site_free(&site);
    return r < 0 ? 1 : 0;
}

/* check: where the BMC passwords come from (site_load() has checked that
 * group and others cannot read them). */
static void print_passwords(const struct site *s, const char *config)
{
    size_t in_ini = 0;
    for (size_t i = 0; i < s->n_hosts; i++)
        in_ini += s->hosts[i].bmc_password && !s->hosts[i].bmc_password_file;
    if (in_ini)
        text_printf(stdout, "BMC passwords: %zu in %s (not readable by group or others)\n", in_ini,
                    config);
    for (size_t i = 0; i < s->n_hosts; i++)
        if (s->hosts[i].bmc_password_file)
            text_printf(stdout, "BMC password of %s: from %s (not readable by group or others)\n",
                        s->hosts[i].name, s->hosts[i].bmc_password_file);
}

int verb_fleet_run(int argc, char **argv)
{
    struct run_cli o = {.sample_s = 5};
    int r = parse(argc, argv, &o);
    if (r != 0)
        return r > 0 ? 0 : 2;
    if (streq(argv[0], "check")) {
        struct site site = {0};
        if (load_site(o.config, &site) < 0)
            return 2;
        text_printf(stdout, "%s: %zu hosts (%zu types), %zu VMs listed, vm engine %s, power %s\n",
                    o.config, site.n_hosts, site.types.n_types, site.n_vms, site.vm_engine->name,
                    site.power_engine->name);
        print_passwords(&site, o.config);
        site_free(&site);
        return 0;
    }
    if (streq(argv[0], "host"))
        return host_cmd(&o, argc, argv);
    return run(&o, streq(argv[0], "plan"));
}
