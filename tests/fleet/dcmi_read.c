/* The test face of src/sense/dcmi_power.c: one DCMI power reading, in-band
 * or over the LAN, printed as key=value lines (test_dcmi_power.py).
 *   dcmi_read inband
 *   dcmi_read lan HOST[:PORT] USER PASSWORD
 * Exit 0 with the reading, 1 with the library's reason on stderr, 2 usage.
 * open_ms and read_ms say how long the open and the reading took. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "sense/dcmi_power.h"

static double ms_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

int main(int argc, char **argv)
{
    double t0 = ms_now(), t1, t2;
    struct dcmi_conn *c = NULL;
    struct dcmi_power p;
    char why[256];
    int r;

    if (argc == 2 && strcmp(argv[1], "inband") == 0)
        r = dcmi_open_inband(&c, why, sizeof(why));
    else if (argc == 5 && strcmp(argv[1], "lan") == 0)
        r = dcmi_open_lan(&(struct dcmi_lan){.host = argv[2], .user = argv[3], .password = argv[4]},
                          &c, why, sizeof(why));
    else {
        fprintf(stderr, "usage: dcmi_read inband | lan HOST[:PORT] USER PASSWORD\n");
        return 2;
    }
    if (r < 0) {
        fprintf(stderr, "dcmi_read: %s (%s)\n", why, strerror(-r));
        return 1;
    }
    t1 = ms_now();
    r = dcmi_power_read(c, &p, why, sizeof(why));
    t2 = ms_now();
    if (r < 0) {
        fprintf(stderr, "dcmi_read: %s (%s)\n", why, strerror(-r));
        dcmi_close(c);
        return 1;
    }
    printf("source=%s\ncurrent_w=%.0f\nmin_w=%.0f\nmax_w=%.0f\naverage_w=%.0f\nperiod_ms=%u\n"
           "timestamp=%u\nactive=%d\nopen_ms=%.3f\nread_ms=%.3f\n",
           dcmi_conn_name(c), p.current_w, p.min_w, p.max_w, p.average_w, p.period_ms, p.timestamp,
           p.active, t1 - t0, t2 - t1);
    dcmi_close(c);
    return 0;
}
