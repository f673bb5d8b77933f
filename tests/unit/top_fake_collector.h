/* A collector for tests of watt top's TUI (top_fake_collector.c): it
 * builds changing frames from a formula instead of the machine, so the
 * TUI can be driven (tests/cli/test_top_tui.sh) without root, tracefs or
 * the real collector. Test code only. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "view/top.h"

struct top_fake_opts {
    size_t nprocs; /* rows of the processes view (scrolling); 0 means 12 */
    bool traced;   /* false: frames say why not, as the /proc fallback */
};

/* Returns 0, or -errno when its timerfd cannot be made. */
int top_fake_open(const struct top_fake_opts *o, struct top_collector **ret);
void top_fake_close(struct top_collector *c);
/* Frames built and drains seen so far. */
unsigned top_fake_frames(const struct top_collector *c);
unsigned long top_fake_drains(const struct top_collector *c);
