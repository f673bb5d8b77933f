/* PLACEHOLDER section frequency */
#include "cli/report.h"

static void sj(const struct report_ctx *c, struct json *j)
{
    json_null(j);
}

static void st(const struct report_ctx *c, struct strbuf *out)
{
}

const struct report_section report_section_frequency = {"frequency", "frequency", sj, st};
