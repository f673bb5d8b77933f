/* `watt tune --recommend`: the machine's facts (through the host layer)
 * and the pure rules that turn them into a built-in profile with reasons. */
#include "tune/recommend.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/strbuf.h"
#include "base/util.h"
#include "host/topology.h"
#include "sense/clock.h"
#include "tune/guard.h"

/* Daemons whose requests wait on a wake-up: in-memory stores, caches and
 * time sync, where a C-state exit (up to ~1 ms) or a clock ramp is a large
 * share of a reply. Databases and web servers that spend their time on disk
 * or in the network are not listed: balanced suits them. */
const struct recommend_daemon recommend_daemons[] = {
    {"redis-server", 6379, "redis"},   {"valkey-server", 6379, "valkey"},
    {"keydb-server", 6379, "keydb"},   {"dragonfly", 6379, "dragonfly"},
    {"memcached", 11211, "memcached"}, {"aerospike", 3000, "aerospike"},
    {"asd", 3000, "aerospike"},        {"scylla", 9042, "scylla"},
    {"tarantool", 3301, "tarantool"},  {"ptp4l", 0, "linuxptp"},
    {"phc2sys", 0, "linuxptp"},
};
const size_t recommend_ndaemons = ARRAY_SIZE(recommend_daemons);

/* ---------------------------------------------------------------- facts */

static bool icontains(const char *hay, const char *needle)
{
    size_t n = strlen(needle);
    for (; hay && *hay; hay++)
        if (strncasecmp(hay, needle, n) == 0)
            return true;
    return false;
}

/* DMI strings hypervisors put in sys_vendor or product_name
 * (systemd's detect-virt.c keeps the same list). */
static bool dmi_names_vm(const char *vendor, const char *product)
{
    static const char *const words[] = {
        "QEMU",
        "KVM",
        "VMware",
        "VirtualBox",
        "innotek",
        "Xen",
        "Bochs",
        "Parallels",
        "BHYVE",
        "OpenStack",
        "Google Compute Engine",
    };
    for (size_t i = 0; i < ARRAY_SIZE(words); i++)
        if (icontains(vendor, words[i]) || icontains(product, words[i]))
            return true;
    /* Hyper-V: vendor "Microsoft Corporation", product "Virtual Machine" */
    return icontains(vendor, "Microsoft") && icontains(product, "Virtual Machine");
}

static void read_virt(struct host *h, struct recommend_facts *f)
{
    _cleanup_free_ char *text = NULL;
    size_t len;
    struct cpuinfo ci;
    if (host_read(h, HOST_PROC, "cpuinfo", &text, &len) >= 0 &&
        cpuinfo_parse(text, len, &ci) >= 0) {
        f->have_cpuinfo = ci.has_flags;
        f->hypervisor_flag = ci.has_flags && (ci.flags & TSCF_HYPERVISOR);
        cpuinfo_clear(&ci);
    }
    host_read_str(h, HOST_SYS, "class/dmi/id/sys_vendor", &f->dmi_vendor);
    host_read_str(h, HOST_SYS, "class/dmi/id/product_name", &f->dmi_product);
    f->dmi_vm = dmi_names_vm(f->dmi_vendor, f->dmi_product);
}

static void read_power_supply(struct host *h, struct recommend_facts *f)
{
    char **names;
    size_t n;
    if (host_list(h, HOST_SYS, "class/power_supply", &names, &n) < 0)
        return;
    for (size_t i = 0; i < n; i++) {
        _cleanup_free_ char *tp = xasprintf("class/power_supply/%s/type", names[i]);
        _cleanup_free_ char *sp = xasprintf("class/power_supply/%s/scope", names[i]);
        _cleanup_free_ char *type = NULL, *scope = NULL;
        if (host_read_str(h, HOST_SYS, tp, &type) < 0 || !streq(type, "Battery"))
            continue;
        host_read_str(h, HOST_SYS, sp, &scope);
        if (scope && streq(scope, "Device"))
            continue; /* a wireless mouse's battery, not the machine's */
        if (!f->nbatteries++)
            f->battery = xstrdup(names[i]);
    }
    host_free_list(names, n);
}

static char *driver_or_null(char *s)
{
    if (s && (!*s || streq(s, "none"))) {
        free(s);
        return NULL;
    }
    return s;
}

static void read_drivers(struct host *h, struct recommend_facts *f, int cpu0)
{
    char **names;
    size_t n;
    if (host_list(h, HOST_SYS, "devices/system/cpu/cpufreq", &names, &n) >= 0) {
        for (size_t i = 0; i < n && !f->cpufreq_driver; i++) {
            if (strncmp(names[i], "policy", 6) != 0)
                continue;
            _cleanup_free_ char *p =
                xasprintf("devices/system/cpu/cpufreq/%s/scaling_driver", names[i]);
            host_read_str(h, HOST_SYS, p, &f->cpufreq_driver);
        }
        host_free_list(names, n);
    }
    f->cpufreq_driver = driver_or_null(f->cpufreq_driver);
    host_read_str(h, HOST_SYS, "devices/system/cpu/cpuidle/current_driver", &f->cpuidle_driver);
    f->cpuidle_driver = driver_or_null(f->cpuidle_driver);
    _cleanup_free_ char *dir = xasprintf("devices/system/cpu/cpu%d/cpuidle", cpu0 < 0 ? 0 : cpu0);
    if (f->cpuidle_driver && host_list(h, HOST_SYS, dir, &names, &n) >= 0) {
        for (size_t i = 0; i < n; i++)
            f->ncstates += strncmp(names[i], "state", 5) == 0;
        host_free_list(names, n);
    }
}

static void read_rapl(struct host *h, struct recommend_facts *f)
{
    char **names;
    size_t n;
    if (host_list(h, HOST_SYS, "class/powercap", &names, &n) >= 0) {
        for (size_t i = 0; i < n && !f->rapl; i++)
            f->rapl = strncmp(names[i], "intel-rapl", 10) == 0;
        host_free_list(names, n);
    }
    if (f->rapl) {
        f->rapl_via = "powercap";
    } else if (host_exists(h, HOST_SYS, "bus/event_source/devices/power/events/energy-pkg")) {
        f->rapl = true;
        f->rapl_via = "perf power PMU";
    }
}

static void add_latency(struct recommend_facts *f, char *what)
{
    for (size_t i = 0; i < f->nlatency; i++)
        if (streq(f->latency[i], what)) {
            free(what);
            return;
        }
    f->latency = xrealloc(f->latency, (f->nlatency + 1) * sizeof(*f->latency));
    f->latency[f->nlatency++] = what;
}

static void read_processes(struct host *h, struct recommend_facts *f)
{
    char **names;
    size_t n;
    if (host_list(h, HOST_PROC, ".", &names, &n) < 0)
        return;
    for (size_t i = 0; i < n; i++) {
        if (!isdigit((unsigned char)names[i][0]))
            continue;
        _cleanup_free_ char *p = xasprintf("%s/stat", names[i]);
        _cleanup_free_ char *text = NULL, *comm = NULL;
        size_t len;
        uint64_t ticks, start;
        if (host_read(h, HOST_PROC, p, &text, &len) < 0 ||
            guard_parse_pid_stat(text, len, &comm, &ticks, &start) < 0)
            continue; /* gone since the listing, or a kernel we cannot parse */
        f->ndaemons_looked++;
        for (size_t d = 0; d < recommend_ndaemons; d++)
            if (streq(comm, recommend_daemons[d].comm)) {
                add_latency(f, xasprintf("%s (pid %s)", comm, names[i]));
                if (!f->guard_workload)
                    f->guard_workload = recommend_daemons[d].port
                                            ? xasprintf("port:%u", recommend_daemons[d].port)
                                            : xasprintf("process:%s", recommend_daemons[d].comm);
                break;
            }
    }
    host_free_list(names, n);
}

static void read_ports(struct host *h, struct recommend_facts *f)
{
    static const char *const tables[] = {"net/tcp", "net/tcp6"};
    for (size_t t = 0; t < ARRAY_SIZE(tables); t++) {
        _cleanup_free_ char *text = NULL;
        if (host_read_str(h, HOST_PROC, tables[t], &text) < 0)
            continue;
        for (size_t d = 0; d < recommend_ndaemons; d++) {
            unsigned est = 0;
            bool listening = false;
            bool seen = !recommend_daemons[d].port;
            for (size_t k = 0; k < d && !seen; k++) /* 6379: redis, not each fork of it */
                seen = recommend_daemons[k].port == recommend_daemons[d].port;
            if (seen)
                continue;
            guard_parse_net_tcp(text, recommend_daemons[d].port, &est, &listening);
            if (!listening)
                continue;
            add_latency(f, xasprintf("port %u (%s) listening", recommend_daemons[d].port,
                                     recommend_daemons[d].label));
            if (!f->guard_workload)
                f->guard_workload = xasprintf("port:%u", recommend_daemons[d].port);
        }
    }
}

int recommend_facts_read(struct host *h, struct recommend_facts *ret)
{
    struct recommend_facts f = {0};
    struct topology t;
    struct diags d = {0};
    int cpu0 = -1;
    if (topology_read(h, &t, &d) == 0) {
        f.npackages = t.npackages;
        f.ncpus = cpuset_count(&t.online);
        cpu0 = cpuset_next(&t.online, -1);
        topology_free(&t);
    }
    diags_free(&d);
    read_virt(h, &f);
    read_power_supply(h, &f);
    read_drivers(h, &f, cpu0);
    read_rapl(h, &f);
    read_processes(h, &f);
    read_ports(h, &f);
    *ret = f;
    return 0;
}

void recommend_facts_free(struct recommend_facts *f)
{
    if (!f)
        return;
    free(f->dmi_vendor);
    free(f->dmi_product);
    free(f->battery);
    free(f->cpufreq_driver);
    free(f->cpuidle_driver);
    for (size_t i = 0; i < f->nlatency; i++)
        free(f->latency[i]);
    free(f->latency);
    free(f->guard_workload);
    *f = (struct recommend_facts){0};
}

/* ---------------------------------------------------------------- rules */

static void reason(struct recommendation *r, bool decides, const char *check, char *found,
                   char *means)
{
    r->v = xrealloc(r->v, (r->n + 1) * sizeof(*r->v));
    r->v[r->n++] = (struct recommend_reason){
        .check = xstrdup(check), .found = found, .means = means, .decides = decides};
}

static bool is_vm(const struct recommend_facts *f)
{
    return f->hypervisor_flag || f->dmi_vm;
}

static char *virt_found(const struct recommend_facts *f)
{
    const char *v = f->dmi_vendor ? f->dmi_vendor : "?";
    const char *p = f->dmi_product ? f->dmi_product : "?";
    bool dmi = f->dmi_vendor || f->dmi_product;
    if (is_vm(f))
        return xasprintf("a virtual machine (%s%s%s%s%s%s)",
                         f->hypervisor_flag ? "cpuinfo hypervisor flag" : "",
                         f->hypervisor_flag && dmi ? "; " : "", dmi ? "DMI: " : "", dmi ? v : "",
                         dmi ? " " : "", dmi ? p : "");
    if (!f->have_cpuinfo && !dmi)
        return xstrdup("unknown (no cpuinfo flags, no DMI): taken as bare metal");
    _cleanup_free_ char *dmi_text = dmi ? xasprintf("DMI: %s %s", v, p) : xstrdup("no DMI");
    return xasprintf("bare metal (%s; %s)",
                     f->have_cpuinfo ? "no hypervisor flag in cpuinfo" : "no cpuinfo flags",
                     dmi_text);
}

static char *latency_found(const struct recommend_facts *f)
{
    struct strbuf s = {0};
    for (size_t i = 0; i < f->nlatency; i++)
        strbuf_appendf(&s, "%s%s", i ? ", " : "", f->latency[i]);
    return strbuf_steal(&s);
}

static char *daemon_names(void)
{
    struct strbuf s = {0};
    for (size_t i = 0; i < recommend_ndaemons; i++) {
        bool seen = false;
        for (size_t k = 0; k < i && !seen; k++)
            seen = streq(recommend_daemons[k].comm, recommend_daemons[i].comm);
        if (!seen)
            strbuf_appendf(&s, "%s%s", s.len ? ", " : "", recommend_daemons[i].comm);
    }
    return strbuf_steal(&s);
}

/* The rules, first match wins: a latency-critical daemon, then a battery,
 * then a VM, then a bare-metal server. Every check gets its line; the one
 * that chose is marked. */
static const char *decide(const struct recommend_facts *f, struct recommendation *r)
{
    bool vm = is_vm(f);
    const char *pick = f->nlatency ? "latency" : f->nbatteries ? "powersave" : "balanced";
    if (f->nlatency) {
        reason(r, true, "latency", latency_found(f),
               xasprintf("a latency-critical daemon runs here: latency keeps every core at its "
                         "top clock and allows only the shallowest C-states, so no request waits "
                         "for a clock ramp or a deep C-state exit (up to ~1 ms)%s",
                         vm ? "; in a VM this covers the guest's own idle states only" : ""));
        if (f->guard_workload)
            reason(r, false, "guard", xasprintf("workload %s", f->guard_workload),
                   xasprintf("if it is often idle, a profile of your own with include = balanced "
                             "and [latency] workload = %s, run by watt agent, holds the limit "
                             "only while it is busy (docs/tune-profiles.md)",
                             f->guard_workload));
    } else {
        _cleanup_free_ char *names = daemon_names();
        reason(r, false, "latency",
               xasprintf("no latency-critical daemon (looked at %u processes and the TCP "
                         "listeners for %s)",
                         f->ndaemons_looked, names),
               xstrdup("nothing needs the latency profile's cost in idle power"));
    }
    if (f->nbatteries)
        reason(r, streq(pick, "powersave"), "battery",
               xasprintf("%u battery (%s, power_supply)", f->nbatteries, f->battery),
               xstrdup("a laptop or a machine on battery: powersave trades peak speed for "
                       "battery life (no boost, balance_power EPP, fewer wake-ups)"));
    else
        reason(r, streq(pick, "balanced") && !vm, "battery",
               xstrdup("none (no Battery in power_supply): a server on mains"),
               xstrdup("no battery life to save at the cost of speed: balanced scales with load "
                       "and sleeps deeply when idle"));
    if (vm)
        reason(r, streq(pick, "balanced"), "virtualisation", virt_found(f),
               xstrdup("the host decides clocks and deep C-states; balanced lets idle vCPUs halt "
                       "(the host can then sleep) and changes nothing the guest cannot see"));
    else
        reason(r, false, "virtualisation", virt_found(f),
               xstrdup("watt's knobs reach the hardware itself"));
    return pick;
}

static void describe_drivers(const struct recommend_facts *f, struct recommendation *r)
{
    if (f->cpufreq_driver)
        reason(r, false, "cpufreq", xasprintf("driver %s", f->cpufreq_driver),
               xasprintf("the profile's [cpufreq] governor, %s and frequency limits apply",
                         strstr(f->cpufreq_driver, "pstate") ? "EPP, boost" : "boost"));
    else
        reason(r, false, "cpufreq", xstrdup("no driver"),
               xstrdup("the firmware or the hypervisor sets the clock: [cpufreq] settings have "
                       "nothing to write here"));
    if (f->cpuidle_driver)
        reason(r, false, "cpuidle",
               xasprintf("driver %s, %u state%s", f->cpuidle_driver, f->ncstates,
                         f->ncstates == 1 ? "" : "s"),
               xstrdup("the profile's [cpuidle] limit applies to these states"));
    else
        reason(r, false, "cpuidle", xstrdup("no driver"),
               xstrdup("idle CPUs halt with the architecture's default: no C-state to limit"));
    if (f->rapl)
        reason(r, false, "rapl", xasprintf("present (%s)", f->rapl_via),
               xstrdup("watt tune PROFILE --verify measures CPU power before and after"));
    else
        reason(r, false, "rapl", xstrdup("absent"),
               xstrdup("watt tune PROFILE --verify shows watts only from another meter "
                       "(hwmon, ACPI), never a model's estimate; C-states and wake-ups it "
                       "measures anyway"));
    if (f->npackages > 1)
        reason(r, false, "packages",
               xasprintf("%u packages, %u CPUs online", f->npackages, f->ncpus),
               xstrdup("an idle package reaches its deep package C-state only when all its "
                       "cores sleep deeply: profiles that keep deep C-states let it"));
    else if (f->npackages == 1)
        reason(r, false, "packages", xasprintf("1 package, %u CPUs online", f->ncpus),
               xstrdup("no package to empty: savings come from core C-states and clocks"));
}

void recommend_pick(const struct recommend_facts *f, struct recommendation *ret)
{
    struct recommendation r = {0};
    r.profile = decide(f, &r);
    describe_drivers(f, &r);
    *ret = r;
}

void recommendation_free(struct recommendation *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->n; i++) {
        free(r->v[i].check);
        free(r->v[i].found);
        free(r->v[i].means);
    }
    free(r->v);
    *r = (struct recommendation){0};
}
