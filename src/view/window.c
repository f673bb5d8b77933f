/* The window: see window.h. */
#include "view/window.h"

#include <errno.h>
#include <stdint.h>
#include <time.h>

static void sleep_until_ns(uint64_t deadline_ns)
{
    struct timespec ts = {.tv_sec = (time_t)(deadline_ns / 1000000000ull),
                          .tv_nsec = (long)(deadline_ns % 1000000000ull)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
        ;
}

double window_interval(const struct sample *a, const struct sample *b, bool live, double nominal_s)
{
    if (!a || !b)
        return 0;
    if (live || !(nominal_s > 0))
        return (double)(b->mono_ns - a->mono_ns) / 1e9;
    return nominal_s;
}

int window_take(struct sense *s, bool live, double nominal_s, struct window *w)
{
    *w = (struct window){0};
    int r = sense_sample(s, &w->a);
    if (r < 0 || !w->a)
        return r < 0 ? r : -EIO;
    if (nominal_s > 0) {
        if (live)
            sleep_until_ns(w->a->mono_ns + (uint64_t)(nominal_s * 1e9));
        r = sense_sample(s, &w->b);
        if (r < 0 || !w->b) {
            window_clear(w);
            return r < 0 ? r : -EIO;
        }
    }
    w->seconds = window_interval(w->a, w->b, live, nominal_s);
    return 0;
}

void window_clear(struct window *w)
{
    sample_free(w->a);
    sample_free(w->b);
    *w = (struct window){0};
}
