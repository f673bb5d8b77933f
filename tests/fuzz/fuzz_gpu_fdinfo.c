/* Fuzz target: sense/gpu_fdinfo.h, gpu_fdinfo_parse() of one
 * /proc/PID/fdinfo/FD file (DRM client usage stats).
 *
 * The input is the file, passed with its exact length and no NUL (ASan
 * catches a read past the end). Accepted: a non-empty driver name, engine
 * and region counts within their arrays, every kept name non-empty,
 * NUL-terminated and without blanks, capacity at least as printed.
 * Refused: only -EBADMSG, with *ret untouched. */
#include <errno.h>

#include "fuzz.h"
#include "sense/gpu_fdinfo.h"

static void check_name(const char *s, size_t size)
{
    size_t n = strnlen(s, size);
    FUZZ_CHECK(n > 0 && n < size);
    for (size_t i = 0; i < n; i++)
        FUZZ_CHECK(s[i] != ' ' && s[i] != '\t' && s[i] != '\n' && s[i] != '\r');
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* exact length, no NUL after it: a copy of just `size` bytes */
    char *text = malloc(size ? size : 1);
    if (!text)
        abort();
    if (size)
        memcpy(text, data, size);
    struct gpu_fdinfo_client *c = malloc(sizeof(*c));
    if (!c)
        abort();
    memset(c, 0xa5, sizeof(*c));
    int r = gpu_fdinfo_parse(text, size, c);
    if (r < 0) {
        FUZZ_CHECK(r == -EBADMSG);
        for (size_t i = 0; i < sizeof(*c); i++)
            FUZZ_CHECK(((const uint8_t *)c)[i] == 0xa5);
    } else {
        FUZZ_CHECK(r == 0);
        check_name(c->driver, sizeof(c->driver));
        FUZZ_CHECK(strnlen(c->pdev, sizeof(c->pdev)) < sizeof(c->pdev));
        FUZZ_CHECK(c->nengines <= GPU_FDINFO_MAX_ENGINES);
        FUZZ_CHECK(c->nregions <= GPU_FDINFO_MAX_REGIONS);
        for (size_t i = 0; i < c->nengines; i++)
            check_name(c->engines[i].name, sizeof(c->engines[i].name));
        for (size_t i = 0; i < c->nregions; i++)
            check_name(c->regions[i].name, sizeof(c->regions[i].name));
        /* the same name is kept once */
        for (size_t i = 0; i < c->nengines; i++)
            for (size_t j = i + 1; j < c->nengines; j++)
                FUZZ_CHECK(strcmp(c->engines[i].name, c->engines[j].name) != 0);
    }
    free(c);
    free(text);
    return 0;
}
