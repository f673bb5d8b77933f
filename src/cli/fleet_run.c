/* watt fleet run | plan | check | host: the controller that drives a real
 * fleet (src/fleet/control/ and src/fleet/engine/), and its manual controls. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/json.h"
#include "base/jsondoc.h"
#include "base/text.h"
#include "base/util.h"
#include "cli/verbs.h"
#include "fleet/control/control.h"
#include "fleet/control/opstate.h"
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
               "       watt fleet host  --config FLEET.INI HOST maintenance on|off\n"
               "       watt fleet approve --config FLEET.INI ID...|all\n"
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
               "domains. host HOST maintenance on records in state_dir that the host is in\n"
               "maintenance: the running controller evacuates it at its next tick, never\n"
               "moves a VM there nor switches it on or off until maintenance off.\n"
               "With mode = manual in fleet.ini, each tick writes its plan to\n"
               "state_dir/plan.json (every action with an ID) and executes only what approve\n"
               "ID (or all: every action pending in that plan) approved; an approval is used\n"
               "at the next tick if the action is still planned, else dropped, and expires\n"
               "after three intervals.\n");
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
    struct ctl_options copt = {.dry_run = o->dry_run || plan_only,
                               .json_schema = plan_only ? "watt-fleet-plan/1" : "watt-fleet-run/2"};
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
    json_doc_begin(&j, "watt-fleet-host-list/1", doc_time_now());
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

/* host NAME maintenance on|off: state_dir/maintenance, under its lock. */
static int maintenance_cmd(const struct site *site, const char *host, bool on)
{
    const char *dir = site->state_dir;
    struct fleet_error err = {{0}};
    _cleanup_free_ char *origin = xasprintf("%s/maintenance", dir);
    _cleanup_free_ char *text = NULL;
    _cleanup_free_ struct opstate_maint *v = NULL;
    size_t len = 0, n = 0;
    int lock = -1;
    int r = opstate_mkdir(dir, &err);
    if (r == 0)
        r = opstate_lock(dir, &lock, &err);
    if (r == 0) {
        r = opstate_read(dir, "maintenance", &text, &len, &err);
        if (r == 0)
            r = opstate_maint_parse(text, len, origin, &v, &n, &err);
        else if (r == -ENOENT)
            r = 0;
    }
    size_t at = 0;
    while (r == 0 && at < n && !streq(v[at].host, host))
        at++;
    bool was = at < n;
    if (r == 0 && was != on) {
        if (on) {
            v = xrealloc(v, (n + 1) * sizeof(*v));
            v[n] = (struct opstate_maint){.since = (double)(now_realtime_ns() / 1000000000)};
            snprintf(v[n++].host, sizeof(v[0].host), "%s", host);
        } else {
            memmove(&v[at], &v[at + 1], (n - at - 1) * sizeof(*v));
            n--;
        }
        _cleanup_free_ char *out = opstate_maint_format(v, n);
        r = opstate_write(dir, "maintenance", out, strlen(out), &err);
    }
    if (lock >= 0)
        close(lock);
    if (r < 0) {
        text_printf(stderr, "watt fleet host: %s\n", err.msg);
        return 1;
    }
    if (on)
        text_printf(stdout,
                    "%s: maintenance on%s (%s): the controller evacuates it at its next tick and "
                    "keeps it out of its plans\n",
                    host, was ? ", already" : "", origin);
    else
        text_printf(stdout, "%s: maintenance off%s (%s): the controller may use it again\n", host,
                    was ? "" : ", already", origin);
    return 0;
}

static int host_cmd(struct run_cli *o, int argc, char **argv)
{
    if (argc - optind == 3 && streq(argv[optind + 1], "maintenance")) {
        const char *onoff = argv[optind + 2];
        if (!streq(onoff, "on") && !streq(onoff, "off")) {
            text_printf(stderr, "watt fleet host: maintenance '%s': want on or off\n", onoff);
            return 2;
        }
        struct site site = {0};
        if (load_site(o->config, &site) < 0)
            return 2;
        int r = 2;
        if (site_host_find(&site, argv[optind]) < 0)
            text_printf(stderr, "watt fleet host: no [host %s] in %s\n", argv[optind], o->config);
        else
            r = maintenance_cmd(&site, argv[optind], streq(onoff, "on"));
        site_free(&site);
        return r;
    }
    if (argc - optind != 2) {
        text_printf(stderr, "watt fleet host: want HOST status|on|off|list, or HOST maintenance "
                            "on|off\n");
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
            json_doc_begin(&j, "watt-fleet-host-status/1", doc_time_now());
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

/* The approvals of ARGS (IDs, or "all") against plan.json, appended to
 * state_dir/approvals; all or nothing. */
static int approve_ids(const struct site *site, char **args, size_t n_args, struct fleet_error *err)
{
    const char *dir = site->state_dir;
    _cleanup_free_ char *plan = NULL, *text = NULL;
    _cleanup_free_ char *origin = xasprintf("%s/approvals", dir);
    _cleanup_free_ struct opstate_approval *v = NULL;
    size_t len = 0, n = 0;
    uint64_t serial;
    int r = opstate_read(dir, "plan.json", &plan, &len, err);
    if (r == -ENOENT) {
        fleet_error_set(err, "no plan in %s yet: is watt fleet run running with mode = manual?",
                        dir);
        return r;
    }
    if (r < 0)
        return r;
    if (opstate_plan_serial(plan, &serial) < 0) {
        fleet_error_set(err, "%s/plan.json is not a plan this watt wrote", dir);
        return -EINVAL;
    }
    for (size_t i = 0; i < n_args; i++) {
        bool all = streq(args[i], "all");
        if (all ? !strstr(plan, "\"state\":\"pending\"")
                : !opstate_plan_pending(plan, args[i], NULL, 0)) {
            fleet_error_set(err, "%.40s: %s in %s/plan.json (plan %" PRIu64 ")", args[i],
                            all ? "no action pending" : "no such action pending", dir, serial);
            return -ENOENT;
        }
    }
    r = opstate_read(dir, "approvals", &text, &len, err);
    if (r == 0)
        r = opstate_approvals_parse(text, len, origin, &v, &n, err);
    if (r < 0 && r != -ENOENT)
        return r;
    double now = (double)now_realtime_ns() / 1e9;
    v = xrealloc(v, (n + n_args) * sizeof(*v));
    for (size_t i = 0; i < n_args; i++) {
        v[n] = (struct opstate_approval){.plan = serial, .time = now};
        snprintf(v[n++].id, sizeof(v[0].id), "%s", args[i]);
    }
    _cleanup_free_ char *out = opstate_approvals_format(v, n);
    r = opstate_write(dir, "approvals", out, strlen(out), err);
    if (r < 0)
        return r;
    for (size_t i = 0; i < n_args; i++) {
        char what[400] = "every action pending in that plan";
        if (!streq(args[i], "all"))
            opstate_plan_pending(plan, args[i], what, sizeof(what));
        text_printf(stdout, "approved %s: %s (plan %" PRIu64 ")\n", args[i], what, serial);
    }
    text_printf(stdout,
                "the controller executes it at its next tick if it is still planned; the "
                "approval expires in %.0f s\n",
                3 * site->limits.interval_s);
    return 0;
}

static int approve_cmd(struct run_cli *o, int argc, char **argv)
{
    if (argc - optind < 1) {
        text_printf(stderr, "watt fleet approve: want ID... or all (the IDs of plan.json)\n");
        return 2;
    }
    for (int i = optind; i < argc; i++)
        if (!streq(argv[i], "all") && !opstate_id_valid(argv[i])) {
            text_printf(stderr,
                        "watt fleet approve: '%s': want an action ID (8 hex digits) or "
                        "all\n",
                        argv[i]);
            return 2;
        }
    struct site site = {0};
    if (load_site(o->config, &site) < 0)
        return 2;
    if (site.mode != SITE_MANUAL) {
        text_printf(stderr,
                    "watt fleet approve: %s has no mode = manual: the controller executes its "
                    "plans without approval\n",
                    o->config);
        site_free(&site);
        return 2;
    }
    struct fleet_error err = {{0}};
    int lock = -1;
    int r = opstate_lock(site.state_dir, &lock, &err);
    if (r == 0)
        r = approve_ids(&site, argv + optind, (size_t)(argc - optind), &err);
    if (lock >= 0)
        close(lock);
    if (r < 0)
        text_printf(stderr, "watt fleet approve: %s\n", err.msg);
    site_free(&site);
    return r < 0 ? 1 : 0;
}

/* check: the operator's constraints and mode. */
static void print_rules(const struct site *s)
{
    text_printf(stdout, "mode: %s%s\n", s->mode == SITE_MANUAL ? "manual" : "automatic",
                s->mode == SITE_MANUAL ? " (plans in state_dir/plan.json, executed when "
                                         "approved: watt fleet approve)"
                                       : "");
    for (size_t i = 0; i < s->n_rules; i++)
        if (s->rules[i].pin >= 0)
            text_printf(stdout, "pinned: %s to %s (line %d)\n", s->rules[i].vm,
                        s->hosts[s->rules[i].pin].name, s->rules[i].pin_line);
    for (size_t g = 0; g < s->n_groups; g++) {
        struct strbuf b = {0};
        for (size_t i = 0; i < s->n_rules; i++)
            if (s->rules[i].group == (int32_t)g)
                strbuf_appendf(&b, " %s", s->rules[i].vm);
        text_printf(stdout, "anti-affinity %s (line %d):%s\n", s->groups[g].name, s->groups[g].line,
                    strbuf_str(&b));
        strbuf_free(&b);
    }
    if (s->destroy_stale_copy)
        text_printf(stdout, "destroy_stale_copy: yes (a paused copy whose twin runs and answers "
                            "is destroyed)\n");
    _cleanup_free_ char *text = NULL;
    _cleanup_free_ struct opstate_maint *v = NULL;
    size_t len = 0, n = 0;
    struct fleet_error err = {{0}};
    int r = opstate_read(s->state_dir, "maintenance", &text, &len, &err);
    if (r == 0)
        r = opstate_maint_parse(text, len, "maintenance", &v, &n, &err);
    if (r < 0 && r != -ENOENT)
        text_printf(stdout, "maintenance: %s\n", err.msg);
    for (size_t i = 0; i < n; i++) {
        char when[32] = "?";
        time_t t = (time_t)v[i].since;
        struct tm tm;
        if (localtime_r(&t, &tm))
            strftime(when, sizeof(when), "%Y-%m-%d %H:%M", &tm);
        text_printf(stdout, "maintenance: %s (since %s)\n", v[i].host, when);
    }
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
        print_rules(&site);
        site_free(&site);
        return 0;
    }
    if (streq(argv[0], "host"))
        return host_cmd(&o, argc, argv);
    if (streq(argv[0], "approve"))
        return approve_cmd(&o, argc, argv);
    return run(&o, streq(argv[0], "plan"));
}
