/* fleet.ini's constraints on VMs, in [controller]:
 *
 *   pin = db1:h2, db2:h3          ; VM:HOST, the host it must run on
 *   anti_affinity = web1 web2 web3 ; one group a line: never two on one host
 *   anti_affinity = dns1, dns2
 *
 * site.c hands each such line here as it reads it, and calls
 * site_rules_finish() once every host is known; errors name the line.
 * Pure. */
#pragma once

#include <stddef.h>

#include "fleet/control/site.h"

struct site_rules_pending;

/* KEY ("pin" or "anti_affinity") = VAL on LINE. 0, or -EINVAL with WHY
 * (the caller adds the file and the line). *P is made at the first call. */
int site_rules_key(struct site_rules_pending **p, struct site *s, const char *key, const char *val,
                   int line, char *why, size_t size);
/* Resolve the hosts and check the whole (a VM pinned twice, in two
 * groups, a group larger than the fleet, two VMs of one group pinned to
 * one host, a VM not in vms =) into s->rules. 0, or -EINVAL with WHY and
 * *RET_LINE (the line to name). Frees *P either way. */
int site_rules_finish(struct site_rules_pending **p, struct site *s, char *why, size_t size,
                      int *ret_line);
void site_rules_pending_free(struct site_rules_pending *p);
