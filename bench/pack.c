/* bench_pack: what the packer's planner costs per tick, and what packing
 * saves by the models, on a recorded machine.
 *
 *   bench_pack [--ticks N] [--seed S] ROOT
 *   bench_pack --saving MODEL --busy-share F ROOT
 *
 * The first form reads ROOT's topology with the real topology_read(), then
 * runs N ticks (default 2000, after 50 untimed) of what the agent's packer
 * does each tick: pack_plan_build() for the window's demand and
 * pack_decide() against the set in force, with the demand a seeded random
 * walk over 0-90 % of the CPUs (so grow, shrink and keep all happen). It
 * prints one JSON line: median, mean and p99 thread-CPU µs per tick, the
 * actions taken, the heap one plan holds and the heap the process holds
 * after the run (mallinfo2).
 *
 * The second form plans F × the online CPUs busy and prices the plan with
 * the built-in MODEL (model/pack_saving.h), printing one JSON line with
 * every figure and the assumptions. bench/pack.py drives both; built only
 * when asked (ninja -C build bench/bench_pack). */
#include <errno.h>
#include <malloc.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/json.h"
#include "base/util.h"
#include "host/host.h"
#include "host/topology.h"
#include "model/model.h"
#include "model/pack.h"
#include "model/pack_saving.h"

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* A deterministic walk: the same seed gives the same demands. */
static double next_demand(unsigned long long *s, double prev, double max)
{
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    double u = (double)(*s >> 11) / (double)(1ULL << 53); /* 0..1 */
    double d = prev + (u - 0.5) * 0.1 * max;
    return d < 0 ? -d : d > max ? 2 * max - d : d;
}

struct tick_stats {
    double *cpu_us;
    size_t n;
    unsigned actions[4];
    unsigned max_cpus;
};

static int run_ticks(const struct topology *t, size_t ticks, unsigned long long seed,
                     struct tick_stats *st)
{
    double max = 0.9 * cpuset_count(&t->online), demand = 0.2 * max / 0.9;
    struct cpuset cur = {0};
    st->cpu_us = xcalloc(ticks, sizeof(double));
    for (size_t i = 0; i < ticks + 50; i++) {
        demand = next_demand(&seed, demand, max);
        struct pack_input in = {.topo = t,
                                .demand_cpus = demand,
                                .headroom = PACK_DEFAULT_HEADROOM,
                                .min_cpus = PACK_DEFAULT_MIN_CPUS};
        struct pack_plan plan, next;
        enum pack_action act;
        double t0 = now_us();
        int r = pack_plan_build(&in, &plan);
        if (r >= 0)
            r = pack_decide(&in, &cur, PACK_DEFAULT_SHRINK_SLACK, &act, &next);
        double dt = now_us() - t0;
        if (r < 0)
            return r;
        pack_plan_free(&plan);
        cpuset_free(&cur);
        cur = next.cpus; /* the set in force moves on to the next tick */
        next.cpus = (struct cpuset){0};
        if (next.ncpus > st->max_cpus)
            st->max_cpus = next.ncpus;
        pack_plan_free(&next);
        if (i >= 50) {
            st->cpu_us[st->n++] = dt;
            st->actions[act]++;
        }
    }
    cpuset_free(&cur);
    return 0;
}

/* Heap bytes one plan of half the machine holds, by glibc's own count. */
static size_t plan_heap(const struct topology *t)
{
    struct pack_input in = {.topo = t,
                            .demand_cpus = cpuset_count(&t->online) / 2.0,
                            .headroom = PACK_DEFAULT_HEADROOM,
                            .min_cpus = 1};
    struct pack_plan p;
    size_t before = mallinfo2().uordblks;
    if (pack_plan_build(&in, &p) < 0)
        return 0;
    size_t held = mallinfo2().uordblks - before;
    pack_plan_free(&p);
    return held;
}

static int bench_ticks(const struct topology *t, size_t ticks, unsigned long long seed)
{
    struct tick_stats st = {0};
    int r = run_ticks(t, ticks, seed, &st);
    if (r < 0) {
        fprintf(stderr, "bench_pack: %s\n", strerror(-r));
        return 1;
    }
    double sum = 0;
    for (size_t i = 0; i < st.n; i++)
        sum += st.cpu_us[i];
    qsort(st.cpu_us, st.n, sizeof(double), cmp_double);
    /* the heap glibc holds after every tick (its sbrk arena and mmapped
     * blocks): ru_maxrss would carry the parent's peak across exec */
    struct mallinfo2 mi = mallinfo2();
    printf("{\"cpus\": %u, \"cores\": %u, \"packages\": %u, \"ticks\": %zu, "
           "\"cpu_us\": %.2f, \"cpu_us_mean\": %.2f, \"cpu_us_p99\": %.2f, "
           "\"keep\": %u, \"grow\": %u, \"shrink\": %u, \"replan\": %u, \"max_cpus\": %u, "
           "\"plan_heap_bytes\": %zu, \"heap_kib\": %zu}\n",
           cpuset_count(&t->online), t->ncores, t->npackages, st.n, st.cpu_us[st.n / 2],
           sum / (double)st.n, st.cpu_us[st.n * 99 / 100], st.actions[PACK_KEEP],
           st.actions[PACK_GROW], st.actions[PACK_SHRINK], st.actions[PACK_REPLAN], st.max_cpus,
           plan_heap(t), (mi.arena + mi.hblkhd) / 1024);
    free(st.cpu_us);
    return 0;
}

static int bench_saving(const struct topology *t, const char *model, double share)
{
    struct power_model m;
    if (model_builtin(model, &m) < 0) {
        fprintf(stderr, "bench_pack: no built-in model %s\n", model);
        return 2;
    }
    double busy = share * cpuset_count(&t->online);
    struct pack_input in = {
        .topo = t, .demand_cpus = busy, .headroom = PACK_DEFAULT_HEADROOM, .min_cpus = 1};
    struct pack_plan p;
    struct pack_saving s;
    struct pack_saving_input si = {.topo = t,
                                   .plan = &p,
                                   .model = &m,
                                   .busy_cpus = busy,
                                   .ghz = NAN,
                                   .rapl_package_w = NAN,
                                   .rapl_dram_w = NAN};
    int r = pack_plan_build(&in, &p);
    if (r >= 0)
        r = pack_saving_estimate(&si, &s);
    if (r < 0) {
        fprintf(stderr, "bench_pack: %s\n", strerror(-r));
        return 1;
    }
    _cleanup_free_ char *packed = cpuset_format(&p.cpus);
    _cleanup_free_ char *why = pack_saving_assumptions(&s, &m);
    struct json j;
    json_init(&j, false);
    json_object_begin(&j);
    json_kv_string(&j, "model", m.name);
    json_kv_double(&j, "busy_cpus", busy);
    json_kv_string(&j, "packed", packed);
    json_kv_u64(&j, "packed_cpus", p.ncpus);
    json_kv_u64(&j, "idle_cores", s.idle_cores);
    json_kv_u64(&j, "cores", s.cores);
    json_kv_u64(&j, "idle_packages", s.idle_packages);
    json_kv_u64(&j, "packages", s.packages);
    json_kv_double(&j, "node_w", model_estimate(&m, s.cpus, busy, 0));
    json_kv_double(&j, "idle_w", s.idle_w);
    json_kv_double(&j, "saving_packages_w", s.saving_pkg_w);
    json_kv_double(&j, "saving_dram_w", s.saving_dram_w);
    json_kv_double(&j, "saving_cores_w", s.saving_core_w);
    json_kv_double(&j, "saving_w", s.saving_w);
    json_kv_double(&j, "saving_low_w", s.low_w);
    json_kv_double(&j, "saving_high_w", s.high_w);
    json_kv_string(&j, "assumptions", why);
    json_object_end(&j);
    printf("%s\n", strbuf_str(&j.out));
    json_free(&j);
    pack_plan_free(&p);
    return 0;
}

static int usage(void)
{
    fprintf(stderr, "usage: bench_pack [--ticks N] [--seed S] ROOT\n"
                    "       bench_pack --saving MODEL --busy-share F ROOT\n");
    return 2;
}

int main(int argc, char **argv)
{
    size_t ticks = 2000;
    unsigned long long seed = 17;
    const char *model = NULL;
    double share = 0.2;
    int i = 1;
    for (; i < argc - 1 && argv[i][0] == '-'; i++) {
        if (streq(argv[i], "--ticks"))
            ticks = strtoul(argv[++i], NULL, 10);
        else if (streq(argv[i], "--seed"))
            seed = strtoull(argv[++i], NULL, 10);
        else if (streq(argv[i], "--saving"))
            model = argv[++i];
        else if (streq(argv[i], "--busy-share"))
            share = strtod(argv[++i], NULL);
        else
            return usage();
    }
    if (i != argc - 1 || ticks < 1 || !(share >= 0 && share <= 1))
        return usage();
    struct host *h;
    int r = host_open(argv[i], &h);
    if (r < 0) {
        fprintf(stderr, "bench_pack: cannot open %s: %s\n", argv[i], strerror(-r));
        return 1;
    }
    struct topology t;
    struct diags d = {0};
    r = topology_read(h, &t, &d);
    diags_free(&d);
    host_close(h);
    if (r < 0) {
        fprintf(stderr, "bench_pack: cannot read the topology of %s: %s\n", argv[i], strerror(-r));
        return 1;
    }
    r = model ? bench_saving(&t, model, share) : bench_ticks(&t, ticks, seed);
    topology_free(&t);
    return r;
}
