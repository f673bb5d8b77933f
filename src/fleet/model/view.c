/* The plan's storage and the reasons' names. Pure. */
#include <stdlib.h>

#include "base/util.h"
#include "fleet/model/view.h"

const char *fleet_reason_name(enum fleet_reason r)
{
    switch (r) {
    case FLEET_WHY_OVERLOAD:
        return "overload";
    case FLEET_WHY_DRAIN:
        return "drain";
    case FLEET_WHY_MAINTENANCE:
        return "maintenance";
    case FLEET_WHY_PIN:
        return "pin";
    case FLEET_WHY_AFFINITY:
        return "anti-affinity";
    case FLEET_WHY_TARGET:
        return "target";
    case FLEET_WHY_SPARE:
        return "spare";
    case FLEET_WHY_IDLE:
        return "idle";
    }
    return "?";
}

struct fleet_action *fleet_plan_add(struct fleet_plan *p, enum fleet_action_kind kind,
                                    enum fleet_reason reason)
{
    if (p->n == p->cap)
        p->v = grow_array(p->v, sizeof(*p->v), p->n, &p->cap);
    struct fleet_action *a = &p->v[p->n++];
    *a = (struct fleet_action){
        .kind = kind, .reason = reason, .vm = -1, .src = -1, .dst = -1, .host = -1};
    return a;
}

void fleet_plan_free(struct fleet_plan *p)
{
    free(p->v);
    *p = (struct fleet_plan){0};
}
