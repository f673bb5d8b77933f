/* Fuzz target: devices_parse_route_default() and
 * devices_parse_ipv6_route_default() (sense/devices.h), the interface of
 * the default route in /proc/net/route and /proc/net/ipv6_route. Both run
 * on every input.
 *
 * The input is passed with its exact length and no NUL (ASan catches a
 * read past the end). Accepted: the interface is one non-empty field of
 * the text ("lo" never for IPv6). Refused: -ENOENT or -EINVAL, untouched. */
#include <errno.h>
#include <stdbool.h>

#include "fuzz.h"
#include "sense/devices.h"

static void check(int r, char *iface, const uint8_t *data, size_t size, bool v6)
{
    if (r < 0) {
        FUZZ_CHECK(r == -ENOENT || r == -EINVAL);
        FUZZ_CHECK(iface == (char *)0x1);
        return;
    }
    FUZZ_CHECK(r == 0 && iface != NULL && iface[0]);
    FUZZ_CHECK(!strpbrk(iface, " \t\n"));
    FUZZ_CHECK(memmem(data, size, iface, strlen(iface)) != NULL);
    FUZZ_CHECK(!v6 || strcmp(iface, "lo") != 0);
    free(iface);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *iface = (char *)0x1;
    int r = devices_parse_route_default((const char *)data, size, &iface);
    check(r, iface, data, size, false);
    iface = (char *)0x1;
    r = devices_parse_ipv6_route_default((const char *)data, size, &iface);
    check(r, iface, data, size, true);
    return 0;
}
