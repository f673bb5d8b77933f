/* Fuzz target: mountinfo_find_tracing() (host/mountinfo.h), where tracefs
 * or debugfs is in /proc/self/mountinfo.
 *
 * The input is passed with its exact length and no NUL (ASan catches a
 * read past the end). Found: an absolute path without a newline (escapes
 * decoded). None: the path untouched. Not mountinfo: -EBADMSG with the
 * 1-based line. */
#include <errno.h>

#include "fuzz.h"
#include "host/mountinfo.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *path = (char *)0x1;
    unsigned line = 0;
    int r = mountinfo_find_tracing((const char *)data, size, &path, &line);
    FUZZ_CHECK(path == (char *)0x1 || r > 0);
    if (r < 0) {
        FUZZ_CHECK(r == -EBADMSG && line >= 1);
        return 0;
    }
    FUZZ_CHECK(r <= MOUNTINFO_TRACE_CANONICAL);
    if (r == MOUNTINFO_TRACE_NONE)
        return 0;
    FUZZ_CHECK(path != NULL && path[0] == '/' && !strchr(path, '\n'));
    FUZZ_CHECK(r != MOUNTINFO_TRACE_CANONICAL || strcmp(path, "/sys/kernel/tracing") == 0);
    FUZZ_CHECK(r != MOUNTINFO_TRACE_DEBUGFS || strstr(path, "tracing") != NULL);
    free(path);
    return 0;
}
