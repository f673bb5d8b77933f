/* fleet.ini's [pin] and [anti-affinity] (site_rules.h): each line adds
 * entries as it is read; site_rules_finish() resolves the host names
 * (hosts may come after [controller]) and merges the entries into one
 * rule per VM, sorted by name for site_rule_find(). */
#include "fleet/control/site_rules.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"

struct entry {
    char vm[FLEET_NAME_MAX * 2];
    char host[FLEET_NAME_MAX]; /* pin: the host named; "" for a group */
    int32_t group;             /* anti_affinity: its group; -1 for a pin */
    int line;
};

struct site_rules_pending {
    struct entry *v;
    size_t n, cap;
};

#define SEPARATORS ", \t"

static struct entry *add(struct site_rules_pending *p)
{
    if (p->n == p->cap)
        p->v = grow_array(p->v, sizeof(*p->v), p->n, &p->cap);
    struct entry *e = &p->v[p->n++];
    *e = (struct entry){.group = -1};
    return e;
}

static struct site_rules_pending *pending(struct site_rules_pending **p)
{
    if (!*p)
        *p = xcalloc(1, sizeof(**p));
    return *p;
}

int site_rules_pin(struct site_rules_pending **pp, const char *vm, const char *host, int line,
                   char *why, size_t size)
{
    struct site_rules_pending *p = pending(pp);
    if (strlen(vm) >= sizeof(p->v[0].vm) || strpbrk(vm, SEPARATORS)) {
        snprintf(why, size, "[pin] '%.60s': not a VM name", vm);
        return -EINVAL;
    }
    if (!*host || strlen(host) >= FLEET_NAME_MAX || strpbrk(host, SEPARATORS)) {
        snprintf(why, size, "[pin] %.60s = '%.60s': want one host name", vm, host);
        return -EINVAL;
    }
    if (p->n >= 2 * (size_t)SITE_MAX_VMS) {
        snprintf(why, size, "[pin]: more than %d VMs constrained", 2 * SITE_MAX_VMS);
        return -EINVAL;
    }
    struct entry *e = add(p);
    snprintf(e->vm, sizeof(e->vm), "%s", vm);
    snprintf(e->host, sizeof(e->host), "%s", host);
    e->line = line;
    return 0;
}

int site_rules_group(struct site_rules_pending **pp, struct site *s, const char *name,
                     const char *vms, int line, char *why, size_t size)
{
    struct site_rules_pending *p = pending(pp);
    if (strlen(name) >= sizeof(s->groups[0].name)) {
        snprintf(why, size, "[anti-affinity] '%.40s...': a group name is too long", name);
        return -EINVAL;
    }
    for (size_t g = 0; g < s->n_groups; g++)
        if (streq(s->groups[g].name, name)) {
            snprintf(why, size, "[anti-affinity] group '%s' is defined twice (line %d and here)",
                     name, s->groups[g].line);
            return -EINVAL;
        }
    _cleanup_free_ char *copy = xstrdup(vms);
    char *save = NULL;
    size_t first = p->n;
    int32_t g = (int32_t)s->n_groups;
    for (char *tok = strtok_r(copy, SEPARATORS, &save); tok;
         tok = strtok_r(NULL, SEPARATORS, &save)) {
        if (strlen(tok) >= sizeof(p->v[0].vm)) {
            snprintf(why, size, "[anti-affinity] %s: name '%.40s...' is too long", name, tok);
            return -EINVAL;
        }
        for (size_t i = first; i < p->n; i++)
            if (streq(p->v[i].vm, tok)) {
                snprintf(why, size, "[anti-affinity] %s: '%.60s' is listed twice", name, tok);
                return -EINVAL;
            }
        if (p->n >= 2 * (size_t)SITE_MAX_VMS) {
            snprintf(why, size, "[anti-affinity]: more than %d VMs constrained", 2 * SITE_MAX_VMS);
            return -EINVAL;
        }
        struct entry *e = add(p);
        snprintf(e->vm, sizeof(e->vm), "%s", tok);
        e->group = g;
        e->line = line;
    }
    if (p->n - first < 2) {
        snprintf(why, size,
                 "[anti-affinity] %s = %.60s: want two VMs or more (a group of one keeps "
                 "nothing apart)",
                 name, vms);
        return -EINVAL;
    }
    s->groups = xrealloc(s->groups, (s->n_groups + 1) * sizeof(*s->groups));
    struct site_group *sg = &s->groups[s->n_groups++];
    *sg = (struct site_group){.line = line, .n_vms = (uint32_t)(p->n - first)};
    snprintf(sg->name, sizeof(sg->name), "%s", name);
    return 0;
}

void site_rules_pending_free(struct site_rules_pending *p)
{
    if (!p)
        return;
    free(p->v);
    free(p);
}

static int by_vm_line(const void *a, const void *b)
{
    const struct entry *x = a, *y = b;
    int c = strcmp(x->vm, y->vm);
    return c ? c : (x->line > y->line) - (x->line < y->line);
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Every entry names a known host, and (when vms = lists the managed VMs)
 * a managed VM: a constraint on a VM watt leaves alone is a typo. */
static int resolve(struct site_rules_pending *p, const struct site *s, int32_t *hosts, char *why,
                   size_t size, int *ret_line)
{
    _cleanup_free_ const char **names = NULL;
    if (s->vms_listed) {
        names = xmalloc((s->n_vms ? s->n_vms : 1) * sizeof(*names));
        for (size_t i = 0; i < s->n_vms; i++)
            names[i] = s->vms[i].name;
        qsort(names, s->n_vms, sizeof(*names), by_name);
    }
    for (size_t i = 0; i < p->n; i++) {
        struct entry *e = &p->v[i];
        *ret_line = e->line;
        hosts[i] = -1;
        if (e->host[0] && (hosts[i] = (int32_t)site_host_find(s, e->host)) < 0) {
            snprintf(why, size, "[pin] %.60s = %s: no [host %s]", e->vm, e->host, e->host);
            return -EINVAL;
        }
        const char *key = e->vm;
        if (names && !bsearch(&key, names, s->n_vms, sizeof(*names), by_name)) {
            snprintf(why, size, "%s: vm '%.60s' is not in vms = (line %d): watt does not move it",
                     e->host[0] ? "[pin]" : "[anti-affinity]", e->vm, s->vms[0].line);
            return -EINVAL;
        }
    }
    return 0;
}

/* Entries sorted by VM: one rule per VM, a second pin or group refused. */
static int merge(struct site_rules_pending *p, struct site *s, const int32_t *hosts, char *why,
                 size_t size, int *ret_line)
{
    s->rules = xcalloc(p->n ? p->n : 1, sizeof(*s->rules));
    s->n_rules = 0;
    for (size_t i = 0; i < p->n; i++) {
        const struct entry *e = &p->v[i];
        struct site_rule *r = s->n_rules ? &s->rules[s->n_rules - 1] : NULL;
        if (!r || !streq(r->vm, e->vm)) {
            r = &s->rules[s->n_rules++];
            *r = (struct site_rule){.pin = -1, .group = -1};
            snprintf(r->vm, sizeof(r->vm), "%s", e->vm);
        }
        *ret_line = e->line;
        if (e->host[0] && r->pin_line) {
            snprintf(why, size, "vm '%.60s' is pinned twice (line %d and here)", e->vm,
                     r->pin_line);
            return -EINVAL;
        }
        if (!e->host[0] && r->group_line) {
            snprintf(why, size, "vm '%.60s' is in two anti-affinity groups, %s (line %d) and %s",
                     e->vm, s->groups[r->group].name, r->group_line, s->groups[e->group].name);
            return -EINVAL;
        }
        if (e->host[0]) {
            r->pin = hosts[i];
            r->pin_line = e->line;
        } else {
            r->group = e->group;
            r->group_line = e->line;
        }
    }
    return 0;
}

static int by_group_pin(const void *a, const void *b)
{
    const struct site_rule *x = *(const struct site_rule *const *)a,
                           *y = *(const struct site_rule *const *)b;
    if (x->group != y->group)
        return (x->group > y->group) - (x->group < y->group);
    return (x->pin > y->pin) - (x->pin < y->pin);
}

/* What no placement can satisfy. */
static int satisfiable(struct site *s, char *why, size_t size, int *ret_line)
{
    for (size_t g = 0; g < s->n_groups; g++)
        if (s->groups[g].n_vms > s->n_hosts) {
            *ret_line = s->groups[g].line;
            snprintf(why, size,
                     "[anti-affinity] %s: %u VMs cannot run on %zu hosts without two sharing one",
                     s->groups[g].name, s->groups[g].n_vms, s->n_hosts);
            return -EINVAL;
        }
    _cleanup_free_ const struct site_rule **both =
        xmalloc((s->n_rules ? s->n_rules : 1) * sizeof(*both));
    size_t n = 0;
    for (size_t i = 0; i < s->n_rules; i++)
        if (s->rules[i].pin >= 0 && s->rules[i].group >= 0)
            both[n++] = &s->rules[i];
    qsort(both, n, sizeof(*both), by_group_pin);
    for (size_t i = 1; i < n; i++)
        if (both[i]->group == both[i - 1]->group && both[i]->pin == both[i - 1]->pin) {
            *ret_line = s->groups[both[i]->group].line;
            snprintf(why, size,
                     "[anti-affinity] %s: '%.60s' and '%.60s' are both pinned to %s (lines %d "
                     "and %d)",
                     s->groups[both[i]->group].name, both[i - 1]->vm, both[i]->vm,
                     s->hosts[both[i]->pin].name, both[i - 1]->pin_line, both[i]->pin_line);
            return -EINVAL;
        }
    return 0;
}

int site_rules_finish(struct site_rules_pending **pp, struct site *s, char *why, size_t size,
                      int *ret_line)
{
    struct site_rules_pending *p = *pp;
    *pp = NULL;
    if (!p)
        return 0;
    qsort(p->v, p->n, sizeof(*p->v), by_vm_line);
    _cleanup_free_ int32_t *hosts = xcalloc(p->n ? p->n : 1, sizeof(*hosts));
    int r = resolve(p, s, hosts, why, size, ret_line);
    if (r == 0)
        r = merge(p, s, hosts, why, size, ret_line);
    if (r == 0)
        r = satisfiable(s, why, size, ret_line);
    site_rules_pending_free(p);
    return r;
}

static int rule_by_name(const void *key, const void *elem)
{
    return strcmp(key, ((const struct site_rule *)elem)->vm);
}

const struct site_rule *site_rule_find(const struct site *s, const char *name)
{
    if (!s->n_rules)
        return NULL;
    return bsearch(name, s->rules, s->n_rules, sizeof(*s->rules), rule_by_name);
}
