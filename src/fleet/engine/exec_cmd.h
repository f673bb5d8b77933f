/* The exec engine's command templates (fleet.ini's [exec] section): what
 * placeholders each may use, and the check the config parser runs on them.
 * The engines themselves are fx_exec_vms_open() and fx_exec_power_open()
 * in exec.h.
 *
 * A placeholder is "{" NAME "}" with NAME made of letters, digits and "_";
 * it is replaced by its value single-quoted for /bin/sh, so no value can
 * inject shell syntax. "${NAME}" is the shell's and left alone, as is any
 * other brace ("{}", "{ print $1 }"). The quotes are the value's, so a
 * placeholder belongs outside any quotes of the template: "vm-{host}" in
 * double quotes would keep them (vm-'h1'); write vm-{host}. The placeholders:
 *   {host}     the host's name ([host NAME]); in migrate, the source's
 *   {uri}      its libvirt URI, "" when none; in migrate, the source's
 *   {bmc}      its BMC address, "" when none
 *   {vm}       migrate: the domain's name
 *   {src}      migrate: the source host's name
 *   {dst}      migrate: the destination host's name
 *   {dst_uri}  migrate: the destination's libvirt URI, "" when none
 * Power commands also get the host's BMC credentials in their environment,
 * WATT_BMC_USER and WATT_BMC_PASSWORD (not on the command line, where any
 * user's ps would show them).
 *
 * Commands are reaped with waitpid() on their own pid: the process must not
 * set SIGCHLD to SIG_IGN (the exit status would be lost; calls then fail
 * with -ECHILD). */
#pragma once

#include "fleet/engine/exec.h"
#include "fleet/model/fleet.h"

/* Placeholders allowed in each [exec] key, space-separated. */
#define FX_EXEC_ALLOW_HOST    "host uri bmc"
#define FX_EXEC_ALLOW_MIGRATE "host uri vm src dst dst_uri"

/* The placeholders KEY ("list", "migrate", "power_on", "power_off",
 * "power_status", "power_reading") may use, or NULL for an unknown key. */
const char *fx_exec_template_allowed(const char *key);

/* 0 when every placeholder of TMPL is in ALLOWED (space-separated names);
 * else -EINVAL and ERR says which, quoting the template:
 * "unknown placeholder {foo} in 'ping {foo}' (known: {host} {uri} {bmc})".
 * The caller prefixes where ("fleet.ini line 40: power_on: ..."). */
int fx_exec_template_check(const char *tmpl, const char *allowed, struct fleet_error *err);

/* The list command's output TEXT (modified in place): one VM a line,
 * "NAME STATE CPU_NS MEM_KIB VCPUS" (STATE running, paused, shutoff or
 * other), blank lines and "#" comments skipped. On error -EINVAL, ERR
 * says "WHO output line N: ..." and *RET is untouched. */
int fx_exec_list_parse(char *text, const char *who, struct fx_list *ret, struct fleet_error *err);
