/* watt-fleet: `watt fleet run|plan|check|host|approve`, the verbs that drive
 * a real fleet through the engines (libvirt, libfreeipmi, command templates)
 * and the controller. A binary of its own so that watt, and the agent it
 * runs, maps neither library: `watt fleet VERB ARGS...` exec()s
 * `watt-fleet VERB ARGS...` (src/cli/fleet.c), found next to watt or in
 * libexecdir/watt. It can be run directly the same way. */
#include <stdio.h>

#include "base/jsondoc.h"
#include "base/text.h"
#include "base/util.h"
#include "cli/verbs.h"
#include "config.h"

static const char *const fleet_verbs[] = {"run", "plan", "check", "host", "approve"};

int main(int argc, char **argv)
{
    if (argc >= 2 && streq(argv[1], "--version")) {
        printf("watt-fleet %s\n", WATT_VERSION);
        return 0;
    }
    if (argc >= 2 && (streq(argv[1], "--help") || streq(argv[1], "-h"))) {
        char *help[] = {(char *)"run", (char *)"--help", NULL};
        return verb_fleet_run(2, help); /* the verbs' own usage */
    }
    _cleanup_free_ char *bad_time = NULL; /* checked once, for every --json writer */
    if (doc_time_check(&bad_time) < 0) {
        text_printf(stderr, "watt-fleet: %s\n", bad_time);
        return 2;
    }
    for (size_t i = 0; argc >= 2 && i < ARRAY_SIZE(fleet_verbs); i++)
        if (streq(argv[1], fleet_verbs[i]))
            return verb_fleet_run(argc - 1, argv + 1);
    fprintf(stderr, "usage: watt-fleet run|plan|check|host|approve --config FLEET.INI ... "
                    "(see watt-fleet --help)\n");
    return 2;
}
