/* One tick of the controller, its report (text or JSON lines) and its
 * metrics (Prometheus text exposition). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "base/json.h"
#include "base/jsondoc.h"
#include "base/text.h"
#include "base/util.h"
#include "fleet/control/control.h"

/* VMs named in fleet.ini that run nowhere: said every tick, with why. */
static void missing_vms(struct controller *c, struct ctl_plan *p)
{
    const struct site *s = c->site;
    const char *dark = NULL;
    for (size_t hi = 0; hi < s->n_hosts && !dark; hi++)
        if (c->hosts[hi].state != CTL_ON && c->hosts[hi].state != CTL_OFF)
            dark = s->hosts[hi].name;
    c->vms_missing = 0;
    for (size_t i = 0; i < s->n_vms; i++) {
        int32_t v = ctl_vm_index(c, s->vms[i].name, false);
        if (v >= 0 && c->vm[v].copies == 1)
            continue;
        if (v >= 0 && c->vm[v].copies > 1) {
            ctl_plan_note(p, "vm '%s' is active on %u hosts: not moved until it is on one",
                          s->vms[i].name, c->vm[v].copies);
            continue;
        }
        c->vms_missing++;
        if (dark)
            ctl_plan_note(p, "vm '%s' (%s line %d) not seen: host %s does not answer",
                          s->vms[i].name, s->origin, s->vms[i].line, dark);
        else
            ctl_plan_note(p, "vm '%s' (%s line %d) runs on no host", s->vms[i].name, s->origin,
                          s->vms[i].line);
    }
}

/* Hosts with less memory than fleet.ini's type says. */
static void memory_notes(struct controller *c, struct ctl_plan *p)
{
    const struct site *s = c->site;
    for (size_t hi = 0; hi < s->n_hosts; hi++) {
        const struct fleet_host_type *t = &s->types.types[s->hosts[hi].type];
        double real_mb = (double)c->hosts[hi].mem_kib / 1024;
        if (c->hosts[hi].mem_kib && real_mb < t->ram_mb)
            ctl_plan_note(p,
                          "host %s has %.0f MiB of memory, its type %s says %u MB (%s line %d): "
                          "planned with %.0f",
                          s->hosts[hi].name, real_mb, t->name, t->ram_mb, s->origin,
                          s->hosts[hi].line, real_mb);
    }
}

/* VM names come from the hypervisor or a list command, errors quote what
 * commands said: every line goes out printable (base/text.h). */
static void report_text(const struct controller *c, const struct ctl_plan *p, bool executed,
                        FILE *out)
{
    const struct site *s = c->site;
    char when[32];
    time_t t = time(NULL);
    strftime(when, sizeof(when), "%H:%M:%S", localtime(&t));
    text_printf(out, "tick %lu  %s  forecast %.0f MIPS, %.0f MIPS on%s\n", c->ticks, when,
                p->forecast_mips, p->capacity_on_mips, c->opt.dry_run ? "  (dry run)" : "");
    for (size_t hi = 0; hi < s->n_hosts; hi++) {
        const struct ctl_host *h = &c->hosts[hi];
        text_printf(out, "  %-12s %-11s", s->hosts[hi].name, ctl_host_state_name(h->state));
        if (!isnan(h->watts))
            text_printf(out, " %6.0f W", h->watts);
        else
            text_printf(out, "        ");
        for (size_t i = 0; i < c->n_vm; i++)
            if (c->vm[i].host == (int32_t)hi)
                text_printf(out, " %s(%.0f%%)", c->vm[i].name,
                            isnan(c->vm[i].util) ? 0.0 : 100 * c->vm[i].util);
        if (h->maintenance)
            text_printf(out, "  (maintenance)");
        if (h->err[0])
            text_printf(out, "  [%s]", h->err);
        fputc('\n', out);
    }
    for (size_t i = 0; i < p->n_notes; i++)
        text_printf(out, "  note: %s\n", p->notes[i]);
    for (size_t i = 0; i < p->n; i++) {
        char what[300];
        ctl_action_describe(c, &p->v[i], what, sizeof(what));
        if (executed && !p->v[i].held)
            text_printf(out, "  %s: %s\n", what, p->v[i].result);
        else if (s->mode == SITE_MANUAL)
            text_printf(out, "  plan: %s (%s) [%s, awaiting approval]\n", what, p->v[i].why,
                        p->v[i].id);
        else
            text_printf(out, "  plan: %s (%s)\n", what, p->v[i].why);
    }
    if (p->n == 0)
        text_printf(out, "  nothing to do\n");
    fflush(out);
}

static void report_json(const struct controller *c, const struct ctl_plan *p, bool executed,
                        FILE *out)
{
    const struct site *s = c->site;
    struct json j;
    json_init(&j, false);
    json_doc_begin(&j, c->opt.json_schema ? c->opt.json_schema : "watt-fleet-run/2",
                   doc_time_now());
    json_kv_u64(&j, "tick", c->ticks);
    json_kv_bool(&j, "dry_run", c->opt.dry_run);
    json_kv_string(&j, "mode", s->mode == SITE_MANUAL ? "manual" : "automatic");
    json_kv_double(&j, "forecast_mips", p->forecast_mips);
    json_kv_double(&j, "capacity_on_mips", p->capacity_on_mips);
    json_kv_double(&j, "observe_s", p->observe_s);
    json_kv_double(&j, "plan_s", p->plan_s);
    json_kv_double(&j, "execute_s", p->execute_s);
    unsigned have, need;
    json_kv_bool(&j, "observing", !ctl_warm(c, &have, &need));
    json_kv_u64(&j, "samples", have);
    json_kv_u64(&j, "window", need);
    json_key(&j, "hosts");
    json_array_begin(&j);
    for (size_t hi = 0; hi < s->n_hosts; hi++) {
        const struct ctl_host *h = &c->hosts[hi];
        json_object_begin(&j);
        json_kv_string(&j, "name", s->hosts[hi].name);
        json_kv_string(&j, "state", ctl_host_state_name(h->state));
        json_kv_string(&j, "bmc", h->bmc_ok ? fx_power_name(h->bmc) : "no answer");
        json_kv_bool(&j, "hypervisor", h->hv_ok);
        json_kv_double(&j, "watts", h->watts);
        json_kv_bool(&j, "maintenance", h->maintenance);
        json_kv_string(&j, "error", h->err[0] ? h->err : NULL);
        json_object_end(&j);
    }
    json_array_end(&j);
    json_key(&j, "vms");
    json_array_begin(&j);
    for (size_t i = 0; i < c->n_vm; i++) {
        const struct ctl_vm *v = &c->vm[i];
        json_object_begin(&j);
        json_kv_string(&j, "name", v->name);
        json_kv_string(&j, "host", v->host >= 0 ? s->hosts[v->host].name : NULL);
        json_kv_u64(&j, "copies", v->copies);
        json_kv_double(&j, "cpu", v->util);
        json_kv_double(&j, "mem_mb", v->mem_mb);
        json_kv_bool(&j, "managed", v->managed);
        json_kv_u64(&j, "migrations_day", v->migrations_day);
        json_object_end(&j);
    }
    json_array_end(&j);
    json_key(&j, "actions");
    json_array_begin(&j);
    for (size_t i = 0; i < p->n; i++) {
        const struct ctl_action *a = &p->v[i];
        json_object_begin(&j);
        json_kv_string(&j, "id", a->id);
        json_kv_string(&j, "action", ctl_action_name(a->kind));
        if (a->kind == CTL_MIGRATE) {
            json_kv_string(&j, "vm", c->vm[a->vm].name);
            json_kv_string(&j, "src", s->hosts[a->src].name);
            json_kv_string(&j, "dst", s->hosts[a->dst].name);
        } else {
            if (a->kind == CTL_DESTROY_COPY)
                json_kv_string(&j, "vm", c->vm[a->vm].name);
            json_kv_string(&j, "host", s->hosts[a->host].name);
        }
        json_kv_string(&j, "reason",
                       a->kind == CTL_DESTROY_COPY ? "stale_copy" : fleet_reason_name(a->reason));
        json_kv_string(&j, "why", a->why);
        json_kv_bool(&j, "executed", executed && !a->held);
        if (executed && !a->held) {
            json_kv_bool(&j, "ok", a->rc == 0);
            json_kv_string(&j, "result", a->result);
        }
        json_object_end(&j);
    }
    json_array_end(&j);
    json_key(&j, "notes");
    json_array_begin(&j);
    for (size_t i = 0; i < p->n_notes; i++)
        json_string(&j, p->notes[i]);
    json_array_end(&j);
    json_object_end(&j);
    fprintf(out, "%s\n", strbuf_str(&j.out));
    fflush(out);
    json_free(&j);
}

void controller_prime(struct controller *c, double now_s)
{
    c->now_s = now_s;
    ctl_observe(c);
}

int controller_tick(struct controller *c, double now_s, FILE *out, bool json)
{
    c->now_s = now_s;
    c->ticks++;
    uint64_t t0 = now_monotonic_ns();
    ctl_observe(c);
    /* an end record that could not be written: closed from the facts */
    if (!c->opt.dry_run && c->journal && ctl_journal_n_open(c->journal) > 0)
        ctl_recover(c);
    ctl_operator_read(c); /* maintenance (control_manual.c) */
    uint64_t t1 = now_monotonic_ns();
    struct ctl_plan p = {0};
    int r = ctl_plan_make(c, &p);
    if (r < 0)
        return r;
    missing_vms(c, &p);
    memory_notes(c, &p);
    size_t n_run; /* manual mode: the approved actions, first in P */
    ctl_operator_plan(c, &p, &n_run);
    uint64_t t2 = now_monotonic_ns();
    bool execute = !c->opt.dry_run && n_run > 0;
    if (execute) {
        struct ctl_plan run = p;
        run.n = n_run;
        ctl_execute(c, &run);
    }
    if (!c->opt.dry_run) {
        struct fleet_error err = {{0}};
        if (ctl_history_save(c, c->now_unix_s, &err) < 0)
            ctl_plan_note(&p, "%s: a restart will observe afresh", err.msg);
    }
    ctl_operator_done(c, &p);
    p.observe_s = (double)(t1 - t0) / 1e9;
    p.plan_s = (double)(t2 - t1) / 1e9;
    p.execute_s = (double)(now_monotonic_ns() - t2) / 1e9;
    if (json)
        report_json(c, &p, execute, out);
    else
        report_text(c, &p, execute, out);
    ctl_plan_free(&p);
    return 0;
}

void controller_metrics(const struct controller *c, FILE *f)
{
    const struct site *s = c->site;
    unsigned have, need;
    bool warm = ctl_warm(c, &have, &need);
    unsigned count[CTL_UNKNOWN + 1] = {0};
    double watts = 0;
    bool any = false;
    fprintf(f, "# HELP watt_fleet_host_state Hosts of the fleet by the controller's view "
               "(1 for the host's state).\n# TYPE watt_fleet_host_state gauge\n");
    for (size_t hi = 0; hi < s->n_hosts; hi++) {
        const struct ctl_host *h = &c->hosts[hi];
        count[h->state]++;
        for (int st = CTL_ON; st <= CTL_UNKNOWN; st++)
            fprintf(f, "watt_fleet_host_state{host=\"%s\",state=\"%s\"} %d\n", s->hosts[hi].name,
                    ctl_host_state_name((enum ctl_host_state)st),
                    h->state == (enum ctl_host_state)st);
    }
    fprintf(f, "# HELP watt_fleet_hosts Hosts by state.\n# TYPE watt_fleet_hosts gauge\n");
    for (int st = CTL_ON; st <= CTL_UNKNOWN; st++)
        fprintf(f, "watt_fleet_hosts{state=\"%s\"} %u\n",
                ctl_host_state_name((enum ctl_host_state)st), count[st]);
    fprintf(f, "# HELP watt_fleet_host_power_watts DCMI power reading of a host's BMC.\n"
               "# TYPE watt_fleet_host_power_watts gauge\n");
    for (size_t hi = 0; hi < s->n_hosts; hi++)
        if (!isnan(c->hosts[hi].watts)) {
            fprintf(f, "watt_fleet_host_power_watts{host=\"%s\"} %.1f\n", s->hosts[hi].name,
                    c->hosts[hi].watts);
            watts += c->hosts[hi].watts;
            any = true;
        }
    if (any)
        fprintf(f,
                "# HELP watt_fleet_power_watts Sum of the hosts' DCMI readings.\n"
                "# TYPE watt_fleet_power_watts gauge\nwatt_fleet_power_watts %.1f\n",
                watts);
    fprintf(f,
            "# HELP watt_fleet_migrations_total Live migrations by outcome.\n"
            "# TYPE watt_fleet_migrations_total counter\n"
            "watt_fleet_migrations_total{result=\"ok\"} %lu\n"
            "watt_fleet_migrations_total{result=\"failed\"} %lu\n"
            "# HELP watt_fleet_power_actions_total Host power commands the BMCs accepted, "
            "or that failed.\n# TYPE watt_fleet_power_actions_total counter\n"
            "watt_fleet_power_actions_total{action=\"on\"} %lu\n"
            "watt_fleet_power_actions_total{action=\"off\"} %lu\n"
            "watt_fleet_power_actions_total{action=\"failed\"} %lu\n"
            "# HELP watt_fleet_safety_refusals_total Power-offs refused by a safety check.\n"
            "# TYPE watt_fleet_safety_refusals_total counter\n"
            "watt_fleet_safety_refusals_total %lu\n"
            "# HELP watt_fleet_vms_missing Managed VMs not seen on any host.\n"
            "# TYPE watt_fleet_vms_missing gauge\nwatt_fleet_vms_missing %lu\n"
            "# HELP watt_fleet_ticks_total Control loop ticks.\n"
            "# TYPE watt_fleet_ticks_total counter\nwatt_fleet_ticks_total %lu\n"
            "# HELP watt_fleet_observing 1 while the controller has fewer CPU samples than the "
            "policy's window: only overloads act.\n"
            "# TYPE watt_fleet_observing gauge\nwatt_fleet_observing %d\n"
            "# HELP watt_fleet_history_samples CPU samples the plan has (loaded from state_dir "
            "and observed), at most the window.\n"
            "# TYPE watt_fleet_history_samples gauge\nwatt_fleet_history_samples %u\n",
            c->migrations_ok, c->migrations_failed, c->power_ons, c->power_offs, c->power_failed,
            c->safety_refusals, c->vms_missing, c->ticks, !warm, have);
    ctl_operator_metrics(c, f);
}
