/* Fuzz target: sense/memory.h, memory_meminfo_parse() of a NUMA node's
 * meminfo and memory_attr_copy() of an EDAC attribute (dimm_location,
 * dimm_label: free text).
 *
 * The first byte picks the node (0..7), the rest is the file, passed with
 * its exact length and no NUL (ASan catches a read past the end).
 * Accepted: MemTotal set; a field not set stays MEMORY_NONE. Refused:
 * only -EBADMSG, with *ret untouched. attr_copy always terminates within
 * its buffer, without a newline or trailing blank. */
#include <errno.h>

#include "fuzz.h"
#include "sense/memory.h"

static void check_copy(const uint8_t *data, size_t size)
{
    char *s = fuzz_strndup(data, size);
    for (size_t n = 1; n <= 17; n += 8) {
        char buf[17];
        memset(buf, 'x', sizeof(buf));
        memory_attr_copy(buf, n, s);
        size_t len = strnlen(buf, n);
        FUZZ_CHECK(len < n);
        FUZZ_CHECK(!memchr(buf, '\n', len));
        FUZZ_CHECK(len == 0 || (buf[len - 1] != ' ' && buf[len - 1] != '\t'));
        FUZZ_CHECK(strncmp(buf, s, len) == 0); /* a prefix of the value */
    }
    free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!size)
        return 0;
    int node = data[0] & 7;
    data++, size--;
    struct memory_node n;
    memset(&n, 0xa5, sizeof(n));
    struct memory_node untouched = n;
    int r = memory_meminfo_parse((const char *)data, size, node, &n);
    if (r < 0) {
        FUZZ_CHECK(r == -EBADMSG);
        FUZZ_CHECK(memcmp(&n, &untouched, sizeof(n)) == 0);
    } else {
        FUZZ_CHECK(r == 0);
        FUZZ_CHECK(n.total_kb != MEMORY_NONE);
        FUZZ_CHECK(memcmp(&n.cpus, &untouched.cpus, sizeof(n.cpus)) == 0);
        FUZZ_CHECK(memcmp(n.why, untouched.why, sizeof(n.why)) == 0);
    }
    check_copy(data, size);
    return 0;
}
