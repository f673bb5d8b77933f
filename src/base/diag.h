/* Problems met while reading: each names where (a kernel path or a field),
 * why (an errno and/or a sentence), so an absent value always has a reason. */
#pragma once

#include <stddef.h>

struct diag {
    char *where; /* a kernel path as the user knows it, or a field name; owned */
    int err;     /* positive errno, 0 when the reason is not a syscall error */
    char *what;  /* "permission denied (root-only since CVE-2020-8694)", owned */
};

struct diags {
    struct diag *v;
    size_t n, cap;
};

void diags_add(struct diags *d, const char *where, int err, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void diags_free(struct diags *d);
