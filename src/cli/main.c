/* watt: measure where a Linux server's power goes, act on it, undo it. */
#include <stdio.h>
#include <string.h>

#include "base/jsondoc.h"
#include "base/text.h"
#include "base/util.h"
#include "cli/verbs.h"
#include "config.h"

static const struct verb verbs[] = {
    {"report", verb_report, "where the power goes: power, C-states, frequency, wake-ups, devices"},
    {"top", verb_top, "who keeps the CPUs awake and who uses the power, live (ncurses)"},
    {"snapshot", verb_snapshot, "record exactly the files watt reads into a tar, for --root"},
    {"fleet", verb_fleet,
     "consolidate VMs: sim, compare (simulated); run, plan, check, host (real)"},
    {"agent", verb_agent, "export power, C-state and wake-up metrics to Prometheus"},
    {"ctl", verb_ctl, "talk to a running agent: status, reload, sample"},
    {"tune", verb_tune,
     "apply a tuning profile (latency, powersave, ...) through the undo journal"},
    {"restore", verb_restore, "put back every value watt tune and the agent changed"},
    {"model", verb_model, "fit the power model to measured points (as the agent does)"},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: watt [--version] [--help] VERB [OPTIONS]\n\nverbs:\n");
    for (size_t i = 0; i < ARRAY_SIZE(verbs); i++)
        fprintf(f, "  %-10s %s\n", verbs[i].name, verbs[i].help);
    fprintf(f, "\nEvery verb takes --help, --root DIR (or $WATT_ROOT) and, where it reads, "
               "--json.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (streq(argv[1], "--help") || streq(argv[1], "-h") || streq(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    if (streq(argv[1], "--version")) {
        printf("watt %s\n", WATT_VERSION);
        return 0;
    }
    _cleanup_free_ char *bad_time = NULL; /* checked once, for every --json writer */
    if (doc_time_check(&bad_time) < 0) {
        text_printf(stderr, "watt: %s\n", bad_time);
        return 2;
    }
    for (size_t i = 0; i < ARRAY_SIZE(verbs); i++)
        if (streq(argv[1], verbs[i].name))
            return verbs[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "watt: unknown verb '%s' (see watt --help)\n", argv[1]);
    return 2;
}
