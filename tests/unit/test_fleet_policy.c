/* The watt policy as a pure function (src/fleet/policy/watt.c): small fleet
 * views built by hand in, plans out. Purity (the same view gives the same
 * plan, the view is not touched), overloads, drains, power, the
 * observation window, and the operator's constraints: maintenance, pins,
 * anti-affinity, VMs not ours to move, hosts that cannot be used. */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* cmocka.h needs stdarg, stddef, stdint and setjmp first */
#include <cmocka.h>

#include "fleet/model/view.h"
#include "fleet/policy/policy.h"

#define assert_near(x, y, tol)                              \
    do {                                                    \
        double x_ = (x), y_ = (y);                          \
        if (!(fabs(x_ - y_) <= (tol)))                      \
            fail_msg("%s = %.17g, want %.17g", #x, x_, y_); \
    } while (0)

#define MAX_HOSTS 8
#define MAX_VMS   16

/* A fleet of identical hosts (4 cores x 1000 MIPS, 8 GB) and 1-vCPU VMs of
 * 1000 MIPS and 1 GB; each VM's history is flat at its demand. */
struct fleet {
    struct fleet_host_type type;
    struct fleet_view_host hosts[MAX_HOSTS];
    struct fleet_view_vm vms[MAX_VMS];
    int32_t lists[MAX_HOSTS][MAX_VMS];
    double hist[MAX_VMS][12];
    struct fleet_view view;
};

static void fleet_init(struct fleet *f, size_t n_hosts)
{
    memset(f, 0, sizeof(*f));
    snprintf(f->type.name, sizeof(f->type.name), "box");
    f->type.cores = 4;
    f->type.mips_per_core = 1000;
    f->type.ram_mb = 8192;
    f->type.bw_mbit = 1000;
    for (int i = 0; i < FLEET_POWER_POINTS; i++)
        f->type.power_w[i] = 100 + 10 * i;
    for (size_t hi = 0; hi < n_hosts; hi++)
        f->hosts[hi] =
            (struct fleet_view_host){.type = &f->type, .power = FLEET_ON, .vms = f->lists[hi]};
    f->view = (struct fleet_view){.hosts = f->hosts,
                                  .n_hosts = n_hosts,
                                  .vms = f->vms,
                                  .types = &f->type,
                                  .n_types = 1,
                                  .max_migrations_per_host = 2,
                                  .hard_ram = true,
                                  .manage_power = true,
                                  .warm = true,
                                  .constrained = true};
}

/* VM on HOST at UTIL (0..1) of its one vCPU, with a flat history. */
static int32_t add_vm(struct fleet *f, int32_t host, double util)
{
    int32_t vi = (int32_t)f->view.n_vms++;
    for (size_t k = 0; k < 12; k++)
        f->hist[vi][k] = util;
    f->vms[vi] = (struct fleet_view_vm){.host = host,
                                        .dest = -1,
                                        .mips = 1000,
                                        .pes = 1,
                                        .ram_mb = 1024,
                                        .req = util * 1000,
                                        .hist = f->hist[vi],
                                        .hist_n = 12,
                                        .pin = -1,
                                        .group = -1};
    struct fleet_view_host *h = &f->hosts[host];
    f->lists[host][h->n_vms++] = vi;
    h->ram_used_mb += 1024;
    return vi;
}

static struct watt_planner *planner(const char *params)
{
    struct fleet_watt_params p;
    struct fleet_error err;
    assert_int_equal(fleet_watt_params_parse(params, &p, &err), 0);
    return watt_planner_new(&p);
}

static size_t count(const struct fleet_plan *p, enum fleet_action_kind kind)
{
    size_t n = 0;
    for (size_t i = 0; i < p->n; i++)
        n += p->v[i].kind == kind;
    return n;
}

static const struct fleet_action *find_move(const struct fleet_plan *p, int32_t vm)
{
    for (size_t i = 0; i < p->n; i++)
        if (p->v[i].kind == FLEET_ACT_MIGRATE && p->v[i].vm == vm)
            return &p->v[i];
    return NULL;
}

/* No action names a host or VM out of range, no VM moves twice. */
static void check_sane(const struct fleet *f, const struct fleet_plan *p)
{
    for (size_t i = 0; i < p->n; i++) {
        const struct fleet_action *a = &p->v[i];
        if (a->kind == FLEET_ACT_MIGRATE) {
            assert_true(a->vm >= 0 && (size_t)a->vm < f->view.n_vms);
            assert_true(a->dst >= 0 && (size_t)a->dst < f->view.n_hosts);
            assert_int_equal(a->src, f->vms[a->vm].host);
            assert_int_not_equal(a->src, a->dst);
            for (size_t k = i + 1; k < p->n; k++)
                assert_false(p->v[k].kind == FLEET_ACT_MIGRATE && p->v[k].vm == a->vm);
        } else {
            assert_true(a->host >= 0 && (size_t)a->host < f->view.n_hosts);
        }
    }
}

/* The same view twice: the same plan; the view is left as it was. */
static void test_pure(void **state)
{
    (void)state;
    struct fleet f, copy;
    fleet_init(&f, 4);
    add_vm(&f, 0, 0.95);
    add_vm(&f, 0, 0.95);
    add_vm(&f, 0, 0.95);
    add_vm(&f, 0, 0.95); /* host 0 overloaded */
    add_vm(&f, 1, 0.10); /* host 1 light: drained */
    add_vm(&f, 2, 0.30);
    f.hosts[3].power = FLEET_OFF;
    memcpy(&copy, &f, sizeof(f));
    struct watt_planner *w = planner("off_after=0");
    struct fleet_plan a = {0}, b = {0};
    watt_plan(w, &f.view, &a);
    /* the view's arrays are byte for byte what they were */
    assert_memory_equal(f.hosts, copy.hosts, sizeof(f.hosts));
    assert_memory_equal(f.vms, copy.vms, sizeof(f.vms));
    assert_memory_equal(f.lists, copy.lists, sizeof(f.lists));
    assert_memory_equal(f.hist, copy.hist, sizeof(f.hist));
    watt_plan(w, &f.view, &b);
    assert_int_equal(a.n, b.n);
    assert_true(a.n > 0);
    assert_memory_equal(a.v, b.v, a.n * sizeof(*a.v));
    /* a fresh planner: the same plan (nothing carried over in scratch) */
    struct watt_planner *w2 = planner("off_after=0");
    struct fleet_plan c = {0};
    watt_plan(w2, &f.view, &c);
    assert_int_equal(a.n, c.n);
    assert_memory_equal(a.v, c.v, a.n * sizeof(*a.v));
    check_sane(&f, &a);
    fleet_plan_free(&a);
    fleet_plan_free(&b);
    fleet_plan_free(&c);
    watt_planner_free(w);
    watt_planner_free(w2);
}

/* An overloaded host sheds its biggest VM; the reason and forecast say why. */
static void test_overload(void **state)
{
    (void)state;
    struct fleet f;
    fleet_init(&f, 3);
    for (int i = 0; i < 4; i++)
        add_vm(&f, 0, i == 2 ? 1.0 : 0.95);
    add_vm(&f, 1, 0.5);
    add_vm(&f, 1, 0.5);
    add_vm(&f, 1, 0.5); /* host 1 at 37.5 %: the fit */
    add_vm(&f, 2, 0.4);
    struct watt_planner *w = planner(NULL);
    struct fleet_plan p = {0};
    watt_plan(w, &f.view, &p);
    const struct fleet_action *m = find_move(&p, 2);
    assert_non_null(m);
    assert_int_equal(m->reason, FLEET_WHY_OVERLOAD);
    assert_int_equal(m->src, 0);
    assert_near(m->vm_mips, 1000, 1e-9);
    assert_near(m->load_mips, 3850, 1e-9);
    assert_near(m->cap_mips, 4000, 1e-9);
    assert_string_equal(fleet_reason_name(m->reason), "overload");
    check_sane(&f, &p);
    fleet_plan_free(&p);
    watt_planner_free(w);
}

/* A light host is drained onto a fuller one; an empty host that has been
 * empty long enough goes off; spare capacity is kept. */
static void test_drain_and_power(void **state)
{
    (void)state;
    struct fleet f;
    fleet_init(&f, 4);
    add_vm(&f, 0, 0.5);
    add_vm(&f, 0, 0.5);
    add_vm(&f, 1, 0.2);         /* drained onto host 0 */
    f.hosts[2].empty_ticks = 5; /* empty for long: off */
    f.hosts[3].power = FLEET_OFF;
    struct watt_planner *w = planner("off_after=2");
    struct fleet_plan p = {0};
    watt_plan(w, &f.view, &p);
    const struct fleet_action *m = find_move(&p, 2);
    assert_non_null(m);
    assert_int_equal(m->reason, FLEET_WHY_DRAIN);
    assert_int_equal(m->dst, 0);
    assert_int_equal(count(&p, FLEET_ACT_POWER_ON), 0);
    assert_int_equal(count(&p, FLEET_ACT_POWER_OFF), 1);
    for (size_t i = 0; i < p.n; i++)
        if (p.v[i].kind == FLEET_ACT_POWER_OFF) {
            assert_int_equal(p.v[i].host, 2);
            assert_int_equal(p.v[i].reason, FLEET_WHY_IDLE);
            assert_true(p.v[i].cap_mips >= p.v[i].load_mips);
        }
    assert_true(p.cap_mips >= p.need_mips);
    fleet_plan_free(&p);
    /* running something the view does not list (a VM's second copy):
     * never switched off, never drained */
    f.hosts[2].busy = true;
    f.hosts[1].busy = true;
    watt_plan(w, &f.view, &p);
    assert_int_equal(count(&p, FLEET_ACT_POWER_OFF), 0);
    assert_null(find_move(&p, 2));
    fleet_plan_free(&p);
    f.hosts[1].busy = f.hosts[2].busy = false;
    /* empty for one decision only: stays on */
    f.hosts[2].empty_ticks = 0;
    watt_plan(w, &f.view, &p);
    assert_int_equal(count(&p, FLEET_ACT_POWER_OFF), 0);
    fleet_plan_free(&p);
    watt_planner_free(w);
}

/* Not warm (a restart with no history): the light host is not drained,
 * no host is switched on or off, but an overload is still relieved. */
static void test_observing(void **state)
{
    (void)state;
    struct fleet f;
    fleet_init(&f, 4);
    for (int i = 0; i < 4; i++)
        add_vm(&f, 0, 0.98); /* overloaded */
    add_vm(&f, 1, 0.2);      /* light */
    f.hosts[2].empty_ticks = 9;
    f.hosts[3].power = FLEET_OFF;
    f.view.warm = false;
    struct watt_planner *w = planner("off_after=1");
    struct fleet_plan p = {0};
    watt_plan(w, &f.view, &p);
    assert_true(p.observing);
    assert_int_equal(count(&p, FLEET_ACT_POWER_ON), 0);
    assert_int_equal(count(&p, FLEET_ACT_POWER_OFF), 0);
    assert_null(find_move(&p, 4));
    assert_true(count(&p, FLEET_ACT_MIGRATE) >= 1);
    for (size_t i = 0; i < p.n; i++)
        assert_int_equal(p.v[i].reason, FLEET_WHY_OVERLOAD);
    fleet_plan_free(&p);
    f.view.warm = true; /* warm: the empty host goes off */
    watt_plan(w, &f.view, &p);
    assert_false(p.observing);
    assert_int_equal(count(&p, FLEET_ACT_POWER_OFF), 1);
    fleet_plan_free(&p);
    watt_planner_free(w);
}

/* A host in maintenance is emptied (onto a running host, or an off one
 * switched on), is never a target, and is never switched off. */
static void test_maintenance(void **state)
{
    (void)state;
    struct fleet f;
    fleet_init(&f, 3);
    add_vm(&f, 0, 0.3);
    add_vm(&f, 0, 0.3);
    add_vm(&f, 1, 0.1); /* light: a drain must not go to host 0 */
    f.hosts[0].maintenance = true;
    f.hosts[2].power = FLEET_OFF;
    f.hosts[2].maintenance = true; /* off and in maintenance: never switched on */
    struct watt_planner *w = planner("off_after=0");
    struct fleet_plan p = {0};
    watt_plan(w, &f.view, &p);
    for (int32_t vi = 0; vi < 2; vi++) {
        const struct fleet_action *m = find_move(&p, vi);
        assert_non_null(m);
        assert_int_equal(m->reason, FLEET_WHY_MAINTENANCE);
        assert_int_equal(m->dst, 1);
    }
    for (size_t i = 0; i < p.n; i++) {
        assert_false(p.v[i].kind == FLEET_ACT_MIGRATE && p.v[i].dst == 0);
        assert_false(p.v[i].kind != FLEET_ACT_MIGRATE && (p.v[i].host == 0 || p.v[i].host == 2));
    }
    check_sane(&f, &p);
    fleet_plan_free(&p);
    watt_planner_free(w);
}

/* A pinned VM goes home when it can and is never moved elsewhere: the
 * host that holds it is not drained, an overload moves another VM. */
static void test_pin(void **state)
{
    (void)state;
    struct fleet f;
    fleet_init(&f, 3);
    int32_t away = add_vm(&f, 0, 0.2);
    f.vms[away].pin = 1;
    int32_t home = add_vm(&f, 2, 0.1); /* light host 2 would be drained... */
    f.vms[home].pin = 2;               /* ...but its VM is pinned there */
    add_vm(&f, 1, 0.3);
    struct watt_planner *w = planner(NULL);
    struct fleet_plan p = {0};
    watt_plan(w, &f.view, &p);
    const struct fleet_action *m = find_move(&p, away);
    assert_non_null(m);
    assert_int_equal(m->reason, FLEET_WHY_PIN);
    assert_int_equal(m->dst, 1);
    assert_null(find_move(&p, home));
    fleet_plan_free(&p);
    /* overload on a host whose biggest VM is pinned: another VM goes */
    fleet_init(&f, 2);
    int32_t big = add_vm(&f, 0, 1.0);
    f.vms[big].pin = 0;
    for (int i = 0; i < 3; i++)
        add_vm(&f, 0, 0.95);
    watt_plan(w, &f.view, &p);
    assert_null(find_move(&p, big));
    assert_true(count(&p, FLEET_ACT_MIGRATE) >= 1);
    fleet_plan_free(&p);
    watt_planner_free(w);
}

/* Two VMs of a group on one host: the second moves; a drain never puts
 * two of a group together. */
static void test_anti_affinity(void **state)
{
    (void)state;
    struct fleet f;
    fleet_init(&f, 3);
    int32_t a = add_vm(&f, 0, 0.2), b = add_vm(&f, 0, 0.2);
    f.vms[a].group = f.vms[b].group = 0;
    int32_t c = add_vm(&f, 1, 0.3);
    int32_t d = add_vm(&f, 2, 0.1); /* light, drained: not onto host 1 (c's group) */
    f.vms[c].group = f.vms[d].group = 1;
    struct watt_planner *w = planner(NULL);
    struct fleet_plan p = {0};
    watt_plan(w, &f.view, &p);
    assert_null(find_move(&p, a));
    const struct fleet_action *m = find_move(&p, b);
    assert_non_null(m);
    assert_int_equal(m->reason, FLEET_WHY_AFFINITY);
    assert_int_not_equal(m->dst, 0);
    const struct fleet_action *md = find_move(&p, d);
    if (md)
        assert_int_not_equal(md->dst, 1);
    check_sane(&f, &p);
    fleet_plan_free(&p);
    watt_planner_free(w);
}

/* VMs not ours (fixed) never move; hosts that are unreachable are never
 * a target and never switched; BOOTING hosts are not switched on again. */
static void test_fixed_and_unusable(void **state)
{
    (void)state;
    struct fleet f;
    fleet_init(&f, 4);
    for (int i = 0; i < 4; i++) {
        int32_t v = add_vm(&f, 0, 0.98);
        f.vms[v].fixed = true;
    }
    add_vm(&f, 1, 0.1);
    f.hosts[2].power = FLEET_UNUSABLE;
    f.hosts[3].power = FLEET_BOOTING;
    struct watt_planner *w = planner("off_after=0");
    struct fleet_plan p = {0};
    watt_plan(w, &f.view, &p);
    for (size_t i = 0; i < p.n; i++) {
        const struct fleet_action *a = &p.v[i];
        assert_false(a->kind == FLEET_ACT_MIGRATE && a->vm < 4);
        assert_false(a->kind == FLEET_ACT_MIGRATE && a->dst == 2);
        assert_false(a->kind != FLEET_ACT_MIGRATE && (a->host == 2 || a->host == 3));
    }
    fleet_plan_free(&p);
    watt_planner_free(w);
}

/* The migration limit of the view holds: no host takes part in more than
 * max_migrations_per_host at once, migrations already in flight counted. */
static void test_migration_limit(void **state)
{
    (void)state;
    struct fleet f;
    fleet_init(&f, 6);
    for (int hi = 1; hi < 6; hi++)
        add_vm(&f, hi, 0.1); /* five light hosts, all drainable onto host 0 */
    add_vm(&f, 0, 0.3);
    f.hosts[0].n_in = 1; /* one migration already arriving */
    struct watt_planner *w = planner("per_tick=1");
    struct fleet_plan p = {0};
    watt_plan(w, &f.view, &p);
    unsigned busy[6] = {1, 0, 0, 0, 0, 0};
    for (size_t i = 0; i < p.n; i++)
        if (p.v[i].kind == FLEET_ACT_MIGRATE) {
            busy[p.v[i].src]++;
            busy[p.v[i].dst]++;
        }
    for (int hi = 0; hi < 6; hi++)
        assert_true(busy[hi] <= 2);
    fleet_plan_free(&p);
    watt_planner_free(w);
}

/* A long window and a low quantile: the forecast takes the right sample. */
static void test_forecast(void **state)
{
    (void)state;
    struct fleet_watt_params p;
    struct fleet_error err;
    assert_int_equal(fleet_watt_params_parse("window=100,quantile=0.1", &p, &err), 0);
    double hist[100];
    for (int i = 0; i < 100; i++)
        hist[i] = (double)i / 100; /* 0.00 .. 0.99 */
    struct fleet_view_vm v = {.mips = 1000, .pes = 2, .req = 0, .hist = hist, .hist_n = 100};
    /* the 10th smallest of 100 is 0.09 */
    assert_near(watt_forecast(&p, &v), 0.09 * 2000, 1e-9);
    assert_int_equal(fleet_watt_params_parse("window=12,quantile=0.9", &p, &err), 0);
    /* of the last 12 (0.00 .. 0.11): the 11th smallest, 0.10 */
    assert_near(watt_forecast(&p, &v), 0.10 * 2000, 1e-9);
    assert_int_equal(fleet_watt_params_parse("window=12,quantile=0.5", &p, &err), 0);
    /* the 6th smallest of the last 12: 0.05 (the general path, 7 kept) */
    assert_near(watt_forecast(&p, &v), 0.05 * 2000, 1e-9);
    assert_int_equal(fleet_watt_params_parse("window=12,quantile=1", &p, &err), 0);
    assert_near(watt_forecast(&p, &v), 0.11 * 2000, 1e-9); /* the max */
    v.req = 1500;                                          /* never below the demand now */
    assert_near(watt_forecast(&p, &v), 1500, 1e-9);
    v.hist_n = 0;
    assert_near(watt_forecast(&p, &v), 1500, 1e-9);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pure),
        cmocka_unit_test(test_overload),
        cmocka_unit_test(test_drain_and_power),
        cmocka_unit_test(test_observing),
        cmocka_unit_test(test_maintenance),
        cmocka_unit_test(test_pin),
        cmocka_unit_test(test_anti_affinity),
        cmocka_unit_test(test_fixed_and_unusable),
        cmocka_unit_test(test_migration_limit),
        cmocka_unit_test(test_forecast),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
