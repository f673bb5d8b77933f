/* gzip.h: one deflate() call into a buffer deflateBound() sizes. */
#include "agent/gzip.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <zlib.h>

#include "base/util.h"

/* The q of one element's parameters ("q=0", ";q=0.000"): false when 0. */
static bool q_nonzero(const char *params, size_t n)
{
    for (const char *p = params; p < params + n; p++) {
        if (*p != 'q' && *p != 'Q')
            continue;
        const char *v = p + 1;
        while (v < params + n && *v == ' ')
            v++;
        if (v >= params + n || *v != '=')
            continue;
        for (v++; v < params + n && *v == ' '; v++)
            ;
        double q = strtod(v, NULL);
        return q > 0;
    }
    return true;
}

bool agent_accepts_gzip(const char *header)
{
    bool star = false, gzip = false, gzip_said = false;
    for (const char *s = header; s && *s;) {
        size_t n = strcspn(s, ",");
        const char *tok = s + strspn(s, " \t");
        size_t tn = strcspn(tok, " \t;,");
        const char *params = tok + tn;
        size_t pn = n - (size_t)(params - s);
        bool ok = q_nonzero(params, pn);
        if (tn == 4 && strncasecmp(tok, "gzip", 4) == 0) {
            gzip_said = true;
            gzip = ok;
        } else if (tn == 1 && *tok == '*') {
            star = ok;
        }
        s += n + (s[n] == ',');
    }
    return gzip_said ? gzip : star;
}

int agent_gzip(const char *buf, size_t len, char **ret, size_t *ret_len)
{
    z_stream z = {0};
    /* 15 + 16: a gzip header and trailer; level 6, zlib's default, costs
     * about 1 ms for 1 MB of metrics and gives ~10x */
    if (deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        return -ENOMEM;
    size_t cap = deflateBound(&z, (uLong)len);
    unsigned char *out = xmalloc(cap);
    z.next_in = (unsigned char *)(uintptr_t)buf;
    z.avail_in = (uInt)len;
    z.next_out = out;
    z.avail_out = (uInt)cap;
    int r = deflate(&z, Z_FINISH);
    size_t n = cap - z.avail_out;
    deflateEnd(&z);
    if (r != Z_STREAM_END) {
        free(out);
        return -EIO;
    }
    *ret = (char *)out;
    *ret_len = n;
    return 0;
}
