/* watt top's package rows (struct top_pkg in top.h): what the report's
 * package C-state rows show, for one frame. */
#pragma once

#include "view/report.h"
#include "view/top.h"

/* Fill f->pkgs from the window rc (a, b, cur, sense) and f's CPU rows
 * (built first: their busy % and cpuidle residency make the fallback
 * rows). A package the PMUs did not measure gets its CPUs' mean and the
 * reason in why. */
void top_build_pkgs(struct top_frame *f, const struct report_ctx *rc);
