#include "diag.h"

#include <stdarg.h>
#include <stdlib.h>

#include "strbuf.h"
#include "util.h"

void diags_add(struct diags *d, const char *where, int err, const char *fmt, ...)
{
    d->v = grow_array(d->v, sizeof(*d->v), d->n, &d->cap);
    struct strbuf b = {0};
    va_list ap;
    va_start(ap, fmt);
    strbuf_vappendf(&b, fmt, ap);
    va_end(ap);
    d->v[d->n++] = (struct diag){
        .where = xstrdup(where),
        .err = err < 0 ? -err : err,
        .what = strbuf_steal(&b),
    };
}

void diags_free(struct diags *d)
{
    for (size_t i = 0; i < d->n; i++) {
        free(d->v[i].where);
        free(d->v[i].what);
    }
    free(d->v);
    *d = (struct diags){0};
}
