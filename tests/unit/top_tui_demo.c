/* Runs watt top's TUI on the fake collector (tests/cli/test_top_tui.sh):
 *   top_tui_demo [--interval S] [--view 1-5] [--sort w|p|c|i] [--procs N] [--no-trace]
 * On exit it prints the final view, sort and interval to stderr, so a
 * test can check that keys took effect. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/top_view.h"
#include "top_fake_collector.h"
#include "view/top.h"

static int parse_sort(const char *s, enum top_sort *ret)
{
    static const char keys[] = "wpci";
    const char *k = strlen(s) == 1 ? strchr(keys, s[0]) : NULL;
    if (!k)
        return -EINVAL;
    *ret = (enum top_sort)(k - keys);
    return 0;
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"interval", required_argument, NULL, 'i'}, {"view", required_argument, NULL, 'v'},
        {"sort", required_argument, NULL, 's'},     {"procs", required_argument, NULL, 'n'},
        {"no-trace", no_argument, NULL, 't'},       {NULL, 0, NULL, 0},
    };
    struct top_tui_opts o = {.interval_s = 1, .sort = TOP_SORT_WAKEUPS, .view = TOP_VIEW_PROCS};
    struct top_fake_opts fo = {.traced = true};
    int ch;
    while ((ch = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (ch) {
        case 'i':
            o.interval_s = strtod(optarg, NULL);
            break;
        case 'v':
            o.view = (enum top_view)(atoi(optarg) - 1);
            break;
        case 's':
            if (parse_sort(optarg, &o.sort) < 0) {
                fprintf(stderr, "top_tui_demo: --sort takes w, p, c or i\n");
                return 2;
            }
            break;
        case 'n':
            fo.nprocs = (size_t)strtoul(optarg, NULL, 10);
            break;
        case 't':
            fo.traced = false;
            break;
        default:
            return 2;
        }
    }
    struct top_collector *c;
    int r = top_fake_open(&fo, &c);
    if (r < 0) {
        fprintf(stderr, "top_tui_demo: timerfd: %s\n", strerror(-r));
        return 1;
    }
    r = top_tui_run(c, &o);
    fprintf(stderr, "top_tui_demo: view %s, sort %s, interval %.1f s, %u frames, %lu drains\n",
            top_view_name(o.view), top_sort_title(o.sort), o.interval_s, top_fake_frames(c),
            top_fake_drains(c));
    top_fake_close(c);
    if (r < 0) {
        fprintf(stderr, "top_tui_demo: the terminal cannot be used: %s\n", strerror(-r));
        return 1;
    }
    return 0;
}
