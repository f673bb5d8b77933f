#pragma once

#include "model/model.h"
#include "model/power.h"
#include "view/report.h"

/* Gather the measured channels and the model's estimate into ps. */
struct reconcile;
/* The wall against the measured parts of c's power (report_reconcile.c). */
void report_reconcile(const struct report_ctx *c, struct reconcile *ret);
void report_power_build(const struct report_ctx *c, const struct power_model *m,
                        struct power_summary *ps);
