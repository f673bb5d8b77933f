/* The window: two samples the interval apart, and the interval rule that
 * every face (watt report, watt top, the agent's tick, tune's verify)
 * divides its counters by. */
#pragma once

#include <stdbool.h>

#include "sense/sampler.h"

struct window {
    struct sample *a; /* the first sample; owned */
    struct sample *b; /* the second; NULL: one snapshot, no rates; owned */
    double seconds;   /* what rates between a and b are over; 0 without b */
};

/* The interval rule. On the live machine, the monotonic time between the
 * two samples. On a recorded root (live false) the nominal interval: the
 * tree's second read stands for "nominal_s later", whatever time passed
 * while it was read, so a replay is the same every time. nominal_s <= 0:
 * no nominal interval, the time that passed on a recorded root too. 0
 * when a or b is NULL. */
double window_interval(const struct sample *a, const struct sample *b, bool live, double nominal_s);

/* Take a window on s: a sample, then (nominal_s > 0) a second one
 * nominal_s after the first began, sleeping until then only when live (a
 * recorded root does not change with time), and w->seconds by the rule
 * above. nominal_s 0: one snapshot (w->b NULL, w->seconds 0). 0, or a
 * negative errno with nothing left in w. */
int window_take(struct sense *s, bool live, double nominal_s, struct window *w);

/* Free both samples; w is empty after. */
void window_clear(struct window *w);
