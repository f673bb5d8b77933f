/* PLACEHOLDER until the power section is written */
#include "cli/report_power.h"

#include <math.h>

void report_power_build(const struct report_ctx *c, const struct power_model *m,
                        struct power_summary *ps)
{
    struct power_readings r = {0};
    power_summarise(ps, &r, m, cpuset_count(&c->cur->topo.online), NAN, NAN);
}

static void sj(const struct report_ctx *c, struct json *j)
{
    json_null(j);
}

static void st(const struct report_ctx *c, struct strbuf *out)
{
}

const struct report_section report_section_power = {"power", "power", sj, st};
