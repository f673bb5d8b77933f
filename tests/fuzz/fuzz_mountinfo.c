/* Fuzz target: devices_parse_mountinfo_root() (sense/devices.h), the
 * mount of "/" in /proc/self/mountinfo.
 *
 * The input is passed with its exact length and no NUL (ASan catches a
 * read past the end). Accepted: the source is one non-empty field of the
 * text. Refused: -ENOENT or -EINVAL, outputs untouched. */
#include <errno.h>

#include "fuzz.h"
#include "sense/devices.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    unsigned maj = 7777, min = 7777;
    char *source = (char *)0x1;
    int r = devices_parse_mountinfo_root((const char *)data, size, &maj, &min, &source);
    if (r < 0) {
        FUZZ_CHECK(r == -ENOENT || r == -EINVAL);
        FUZZ_CHECK(maj == 7777 && min == 7777 && source == (char *)0x1);
        return 0;
    }
    FUZZ_CHECK(r == 0 && source != NULL && source[0]);
    FUZZ_CHECK(!strpbrk(source, " \t\n"));
    FUZZ_CHECK(memmem(data, size, source, strlen(source)) != NULL);
    free(source);
    return 0;
}
