#include "jsondoc.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "base/util.h"

#define DOC_TIME_MAX INT64_C(253402300799) /* 9999-12-31T23:59:59Z */

static int env_time(int64_t *ret)
{
    const char *s = getenv(DOC_TIME_ENV);
    if (!s)
        return 0;
    int64_t v = 0;
    if (!*s)
        return -EINVAL;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9' || p - s > 12)
            return -EINVAL;
        v = v * 10 + (*p - '0');
    }
    if (v > DOC_TIME_MAX)
        return -EINVAL;
    *ret = v;
    return 1;
}

int doc_time_check(char **ret_err)
{
    int64_t v;
    int r = env_time(&v);
    if (r >= 0)
        return 0;
    *ret_err = xasprintf("$%s='%s': want whole seconds since 1970 (as SOURCE_DATE_EPOCH), "
                         "e.g. 1796406600 for 2026-12-04T17:50:00Z",
                         DOC_TIME_ENV, getenv(DOC_TIME_ENV));
    return r;
}

int64_t doc_time(int64_t fallback_s)
{
    int64_t v;
    return env_time(&v) > 0 ? v : fallback_s;
}

int64_t doc_time_now(void)
{
    return doc_time((int64_t)(now_realtime_ns() / 1000000000u));
}

int doc_time_format(int64_t t, char *buf, size_t size)
{
    struct tm tm;
    time_t tt = (time_t)t;
    if (t < 0 || t > DOC_TIME_MAX || (int64_t)tt != t /* a 32-bit time_t */ ||
        !gmtime_r(&tt, &tm) || strftime(buf, size, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
        return -ERANGE;
    return 0;
}

void json_doc_begin(struct json *j, const char *schema, int64_t time_s)
{
    char buf[64];
    json_object_begin(j);
    json_kv_string(j, "schema", schema);
    if (doc_time_format(time_s, buf, sizeof(buf)) < 0)
        json_kv_null(j, "time"); /* a clock before 1970: not a time to state */
    else
        json_kv_string(j, "time", buf);
}
