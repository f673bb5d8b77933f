/* fleet.ini read into a struct site (its data: fleet/model/site.h, where
 * the engines read it too); each engine parses its own keys through the
 * fx_engines table (fleet/engine/exec.h). See docs/fleet-run.md.
 *
 * Pure: site_parse() takes the file's text; site_load() (fleet/control/
 * site_load.h) reads the file, checks who may read it and reads the
 * bmc_password_file files. */
#pragma once

#include "fleet/model/site.h"

/* Parse fleet.ini. ORIGIN names the text in errors ("fleet.ini line 12: ..."). */
int site_parse(const char *text, size_t len, const char *origin, struct site *ret,
               struct fleet_error *err);
void site_free(struct site *s);
/* The host named NAME, or -1. */
ssize_t site_host_find(const struct site *s, const char *name);
/* The managed VM named NAME, or -1 (always -1 when none are listed). */
ssize_t site_vm_find(const struct site *s, const char *name);

/* KEY = VAL for the engines that read it, as if fleet.ini held it in
 * SECTION: an engine's own ("exec"), "host" (host HI's) or "controller".
 * For a site built by hand (tests); site_parse() does the same for every
 * line. 0, or -EINVAL (an unknown key, a bad value) and ERR. */
int site_engine_key(struct site *s, const char *section, size_t hi, const char *key,
                    const char *val, struct fleet_error *err);
/* Free what the engines parsed (site_free() does it too). */
void site_engines_free(struct site *s);
/* The constraints on the VM named NAME, or NULL (site_rules.c). */
const struct site_rule *site_rule_find(const struct site *s, const char *name);
