/* The exec engine: what its list command prints, parsed. The engines
 * themselves are fx_exec_vms_open() and fx_exec_power_open() in exec.h,
 * their rows fx_engine_exec_vms and fx_engine_exec_power; the command
 * templates and their quoting rule are in exec_tmpl.h.
 *
 * The placeholders' values (exec_tmpl.h) are the host's name, libvirt URI
 * and BMC address from fleet.ini, and in migrate the VM's name as the list
 * command printed it. Power commands also get the host's BMC credentials
 * in their environment, WATT_BMC_USER and WATT_BMC_PASSWORD (not on the
 * command line, where any user's ps would show them).
 *
 * Commands are reaped with waitpid() on their own pid: the process must not
 * set SIGCHLD to SIG_IGN (the exit status would be lost; calls then fail
 * with -ECHILD). */
#pragma once

#include "fleet/engine/exec.h"
#include "fleet/model/fleet.h"

/* The list command's output TEXT (modified in place): one VM a line,
 * "NAME STATE CPU_NS MEM_KIB VCPUS" (STATE running, paused, shutoff or
 * other), blank lines and "#" comments skipped. On error -EINVAL, ERR
 * says "WHO output line N: ..." and *RET is untouched. */
int fx_exec_list_parse(char *text, const char *who, struct fx_list *ret, struct fleet_error *err);
