/* A seeded synthetic trace shaped like PlanetLab's days (mean 12.3 %,
 * sd 17 %, median ~6 %, many idle VMs), for fleets larger than the data.
 *
 * The model, per VM v (each VM has its own generator, seeded from the seed
 * and v, so a VM's series does not depend on the others):
 *   - 20 % of VMs are near-idle: level L_v uniform 0.2..2 %, flat day.
 *   - the others have a heavy-tailed size: L_v = m x exp(1.1 z), z ~ N(0,1)
 *     (lognormal; its median m is set from the target mean), at most 90 %.
 *   - a diurnal sine: D_v(t) = 1 + A_v sin(2 pi (t - peak_v) / 1 day + pi/2),
 *     A_v uniform 0.3..0.8; 80 % of VMs peak in business hours (14:00 +-
 *     N(0, 1 h)), the rest at a uniformly random hour.
 *   - AR(1) noise, multiplicative: e_k = rho e_(k-1) + sqrt(1 - rho^2) s z_k,
 *     rho uniform 0.85..0.95, stationary sd s uniform 0.25..0.6.
 *   - rare bursts: start with probability 0.1..0.4 % per step, last
 *     1 + Geometric(0.6) steps, add 30..100 % on top.
 *   x_k = clamp(L_v D_v(t_k) (1 + e_k) + burst_k, 0, 100) %, in 0.01 % units.
 * The whole trace is then scaled (fixed-point, clamped, at most 4 times) so
 * its mean is within 0.02 points of mean_pct.
 *
 * Determinism across machines: the generator is xoshiro256** seeded by
 * splitmix64; exp() and sin() are our own from + - x / (IEEE, correctly
 * rounded everywhere) rather than libm's, whose last bits vary; and FMA
 * contraction is off, since a fused multiply-add rounds differently. */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "fleet/model/fleet.h"

#define SYNTH_MAX_VMS     100000000u
#define SYNTH_MAX_STEPS   10000000u
#define SYNTH_MAX_SAMPLES 4000000000ull /* 8 GB of uint16 */
#define DAY_S             86400.0
#define TABLE_BITS        10 /* diurnal table: 1024 points a day */
#define TWO_PI            6.283185307179586
#define LN2               0.6931471805599453
#define SIZE_SIGMA        1.1
#define IDLE_SHARE        0.2

struct rng {
    uint64_t s[4];
};

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void rng_seed(struct rng *r, uint64_t seed, uint64_t stream)
{
    uint64_t x = seed ^ splitmix64(&stream);
    for (int i = 0; i < 4; i++)
        r->s[i] = splitmix64(&x);
}

static inline uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

static inline uint64_t rng_next(struct rng *r)
{
    uint64_t *s = r->s;
    uint64_t out = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return out;
}

static double uniform(struct rng *r) /* [0, 1) */
{
    return (double)(rng_next(r) >> 11) * 0x1p-53;
}

static double normal(struct rng *r) /* Irwin-Hall: close enough for sizes and phases */
{
    double sum = 0;
    for (int i = 0; i < 12; i++)
        sum += uniform(r);
    return sum - 6;
}

/* exp(x) for |x| < 30: 2^k e^f, |f| <= ln2/2, Taylor to f^13. */
static double exp_det(double x)
{
    double kf = floor(x / LN2 + 0.5);
    double f = x - kf * LN2;
    double term = 1, sum = 1;
    for (int i = 1; i <= 13; i++) {
        term = term * f / i;
        sum += term;
    }
    return ldexp(sum, (int)kf);
}

/* sin(x) for x in [0, 2 pi): reduced to [-pi/2, pi/2], Taylor to x^17. */
static double sin_det(double x)
{
    if (x > TWO_PI / 2)
        x -= TWO_PI;
    if (x > TWO_PI / 4)
        x = TWO_PI / 2 - x;
    else if (x < -TWO_PI / 4)
        x = -TWO_PI / 2 - x;
    double x2 = x * x, term = x, sum = x;
    for (int i = 3; i <= 17; i += 2) {
        term = -term * x2 / ((i - 1) * i);
        sum += term;
    }
    return sum;
}

struct vm_model {
    double level_pct, amp, rho, noise, burst_p;
    uint32_t phase; /* fraction of a day, 2^32 = 1 day */
};

static void vm_draw(struct rng *r, double median_pct, struct vm_model *m)
{
    if (uniform(r) < IDLE_SHARE) {
        *m = (struct vm_model){.level_pct = 0.2 + 1.8 * uniform(r), .rho = 0.5, .noise = 0.3};
        m->burst_p = 0.0005;
        return;
    }
    m->level_pct = fmin(90, median_pct * exp_det(SIZE_SIGMA * normal(r)));
    m->amp = 0.3 + 0.5 * uniform(r);
    double peak_h = uniform(r) < 0.8 ? 14 + normal(r) : 24 * uniform(r);
    /* sin peaks at a quarter turn: the sine starts 6 h before the peak */
    double start = (peak_h - 6) / 24;
    start -= floor(start);
    m->phase = (uint32_t)(uint64_t)(0x1p32 * (1 - start));
    m->rho = 0.85 + 0.1 * uniform(r);
    m->noise = 0.25 + 0.35 * uniform(r);
    m->burst_p = 0.001 + 0.003 * uniform(r);
}

static void vm_series(struct rng *r, const struct vm_model *m, const double *table, uint32_t inc,
                      uint32_t n, uint16_t *out)
{
    double e = m->noise * normal(r), k = m->noise * sqrt(1 - m->rho * m->rho);
    uint64_t burst_thr = (uint64_t)(m->burst_p * 0x1p22);
    uint32_t pos = m->phase, burst_left = 0;
    double burst = 0;
    for (uint32_t i = 0; i < n; i++, pos += inc) {
        uint64_t u = rng_next(r);
        /* two 21-bit uniforms make a triangular z (sd 1), 22 bits the burst test */
        double z = ((double)(u >> 43) + (double)((u >> 22) & 0x1fffff)) * 0x1p-21 - 1;
        e = m->rho * e + k * (z * 2.449489742783178);
        double x = m->level_pct * (1 + m->amp * table[pos >> (32 - TABLE_BITS)]) * (1 + e);
        if (burst_left == 0 && (u & 0x3fffff) < burst_thr) {
            burst_left = 1;
            while (burst_left < 12 && uniform(r) < 0.6)
                burst_left++;
            burst = 30 + 70 * uniform(r);
        }
        if (burst_left > 0) {
            x += burst;
            burst_left--;
        }
        x = x < 0 ? 0 : x > 100 ? 100 : x;
        out[i] = (uint16_t)(x * 100 + 0.5);
    }
}

/* Scale all samples so the mean is the target; clamping at 100 % makes
 * one pass fall short, so repeat. Fixed point keeps it exact. */
static void calibrate(uint16_t *cpu, size_t n, double target_pct)
{
    for (int pass = 0; pass < 4; pass++) {
        uint64_t sum = 0;
        for (size_t i = 0; i < n; i++)
            sum += cpu[i];
        double mean_pct = (double)sum / (double)n / 100;
        if (mean_pct <= 0 || fabs(mean_pct - target_pct) < 0.02)
            return;
        uint64_t g = (uint64_t)(target_pct / mean_pct * 65536 + 0.5);
        for (size_t i = 0; i < n; i++) {
            uint64_t v = ((uint64_t)cpu[i] * g + 32768) >> 16;
            cpu[i] = (uint16_t)(v > 10000 ? 10000 : v);
        }
    }
}

static size_t cap_for(size_t n) /* the capacity rule of trace.c */
{
    size_t c = 16;
    while (c < n)
        c *= 2;
    return c;
}

static int check(const struct fleet_synth *s, uint32_t n_steps, double step_s, double mean_pct,
                 struct fleet_error *err)
{
    if (s->n_vms == 0 || s->n_vms > SYNTH_MAX_VMS) {
        fleet_error_set(err, "synthetic trace: %zu VMs (want 1..%u)", s->n_vms, SYNTH_MAX_VMS);
        return -EINVAL;
    }
    if (n_steps > SYNTH_MAX_STEPS || (uint64_t)n_steps * s->n_vms > SYNTH_MAX_SAMPLES) {
        fleet_error_set(err, "synthetic trace: %zu VMs x %u steps is more than %llu samples",
                        s->n_vms, n_steps, SYNTH_MAX_SAMPLES);
        return -EINVAL;
    }
    if (!(step_s > 0 && step_s <= DAY_S)) {
        fleet_error_set(err, "synthetic trace: step %g s (want 0 < step <= 86400)", step_s);
        return -EINVAL;
    }
    if (!(mean_pct > 0 && mean_pct <= 80)) {
        fleet_error_set(err, "synthetic trace: mean %g %% (want 0 < mean <= 80)", mean_pct);
        return -EINVAL;
    }
    return 0;
}

int fleet_trace_synth(const struct fleet_synth *s, struct fleet_trace *ret, struct fleet_error *err)
{
    uint32_t n_steps = s->n_steps ? s->n_steps : 288;
    double step_s = s->step_s != 0 ? s->step_s : 300;
    double mean_pct = s->mean_pct != 0 ? s->mean_pct : 12;
    int r = check(s, n_steps, step_s, mean_pct, err);
    if (r < 0)
        return r;

    double table[1u << TABLE_BITS];
    for (size_t i = 0; i < ARRAY_SIZE(table); i++)
        table[i] = sin_det(TWO_PI * (double)i / (double)ARRAY_SIZE(table));
    uint32_t inc = (uint32_t)(uint64_t)(step_s / DAY_S * 0x1p32 + 0.5);
    /* the busy VMs' mean is about m x exp(sigma^2 / 2); the scaling fixes the rest */
    double busy_pct = (mean_pct - IDLE_SHARE * 1.1) / (1 - IDLE_SHARE);
    double median_pct = fmax(0.01, busy_pct) * exp_det(-SIZE_SIGMA * SIZE_SIGMA / 2);

    struct fleet_trace t = {.step_s = step_s, .n_steps = n_steps};
    size_t total = s->n_vms * (size_t)n_steps;
    t.vms = xmalloc(cap_for(s->n_vms) * sizeof(*t.vms));
    t.cpu = xmalloc(cap_for(total) * sizeof(*t.cpu));
    for (size_t v = 0; v < s->n_vms; v++) {
        struct rng g;
        struct vm_model m;
        rng_seed(&g, s->seed, v);
        vm_draw(&g, median_pct, &m);
        vm_series(&g, &m, table, inc, n_steps, t.cpu + v * n_steps);
        t.vms[v] = (struct fleet_trace_vm){
            .name = xasprintf("synth-%zu", v),
            .len = n_steps,
            .off = v * n_steps,
        };
        t.n_vms++;
    }
    calibrate(t.cpu, total, mean_pct);
    t.origin = xasprintf("synthetic(seed=%llu,vms=%zu)", (unsigned long long)s->seed, s->n_vms);
    *ret = t;
    return 0;
}
