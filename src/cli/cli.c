#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/verbs.h"
#include "host/host.h"

int cli_open_host(const char *root, struct host **ret)
{
    int r = host_open(root, ret);
    if (r < 0) {
        const char *shown = root ? root : getenv("WATT_ROOT");
        if (r == -EBADMSG)
            fprintf(stderr, "watt: %s/watt-faults: malformed fault line\n", shown);
        else
            fprintf(stderr, "watt: cannot open root '%s': %s\n", shown ? shown : "/",
                    r == -ENOTDIR ? "no sys/ or proc/ directory in it" : strerror(-r));
    }
    return r;
}
