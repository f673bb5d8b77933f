/* fleet.ini's constraints on VMs, in the sections `watt fleet sim
 * --constraints` reads too (docs/fleet-formats.md), with host names:
 *
 *   [pin]
 *   db1 = h2                 ; VM = HOST: the host it must run on
 *   [anti-affinity]
 *   web = web1 web2 web3     ; NAME = VMs: never two of them on one host
 *
 * site.c hands each such line here as it reads it, and calls
 * site_rules_finish() once every host is known; errors name the line.
 * Pure. */
#pragma once

#include <stddef.h>

#include "fleet/control/site.h"

struct site_rules_pending;

/* VM = HOST in [pin], NAME = VM VM ... in [anti-affinity], on LINE. 0,
 * or -EINVAL with WHY (the caller adds the file and the line). *P is made
 * at the first call. */
int site_rules_pin(struct site_rules_pending **p, const char *vm, const char *host, int line,
                   char *why, size_t size);
int site_rules_group(struct site_rules_pending **p, struct site *s, const char *name,
                     const char *vms, int line, char *why, size_t size);
/* Resolve the hosts and check the whole (a VM pinned twice, in two
 * groups, a group larger than the fleet, two VMs of one group pinned to
 * one host, a VM not in vms =) into s->rules. 0, or -EINVAL with WHY and
 * *RET_LINE (the line to name). Frees *P either way. */
int site_rules_finish(struct site_rules_pending **p, struct site *s, char *why, size_t size,
                      int *ret_line);
void site_rules_pending_free(struct site_rules_pending *p);
