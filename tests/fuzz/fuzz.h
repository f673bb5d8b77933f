/* Shared by the fuzz targets (fuzz_<name>.c) and the replay driver.
 *
 * Each target defines LLVMFuzzerTestOneInput(). Built with clang and
 * -fsanitize=fuzzer it is a libFuzzer binary; built with replay.c it is a
 * plain program that runs the target over a corpus and seeded mutations of
 * it, so gcc builds run the fuzz corpus as ordinary tests. */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* An invariant that must hold for every input. Not assert(): it must stay
 * armed in -Db_ndebug=true builds, and abort() is what libFuzzer and the
 * replay driver treat as a crash. */
#define FUZZ_CHECK(cond)                                                                      \
    do {                                                                                      \
        if (!(cond)) {                                                                        \
            fprintf(stderr, "%s:%d: fuzz invariant failed: %s\n", __FILE__, __LINE__, #cond); \
            abort();                                                                          \
        }                                                                                     \
    } while (0)

/* The input as a NUL-terminated string, owned by the caller. Parsers take
 * C strings, so bytes after an embedded NUL are simply not seen. */
static inline char *fuzz_strndup(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (!s)
        abort();
    if (size)
        memcpy(s, data, size);
    s[size] = '\0';
    return s;
}
