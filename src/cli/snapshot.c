#include <stdio.h>

#include "cli/verbs.h"

int verb_snapshot(int argc, char **argv)
{
    fprintf(stderr, "watt snapshot: PLACEHOLDER\n");
    return 1;
}
