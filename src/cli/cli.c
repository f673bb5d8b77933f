#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/text.h"
#include "base/util.h"
#include "cli/verbs.h"
#include "host/host.h"
#include "model/model.h"

int cli_open_host(const char *root, struct host **ret)
{
    _cleanup_free_ char *err = NULL;
    int r = host_open_err(root, ret, &err);
    if (r < 0) {
        const char *shown = root ? root : getenv("WATT_ROOT");
        if (err)
            fprintf(stderr, "watt: --root %s refused: %s\n", shown, err);
        else if (r == -EBADMSG)
            fprintf(stderr, "watt: %s/watt-faults: malformed fault line\n", shown);
        else
            fprintf(stderr, "watt: cannot open root '%s': %s\n", shown ? shown : "/",
                    r == -ENOTDIR ? "no sys/ or proc/ directory in it" : strerror(-r));
    }
    return r;
}

/* --model NAME picks a built-in; anything else is a file. Without one, a
 * VM gets vm-vcpu (its share of the host) and bare metal specpower-2023. */
int cli_load_model(const char *verb, const char *name, bool vm, double pue, struct power_model *m)
{
    model_default(m);
    if (!name && vm)
        model_builtin("vm-vcpu", m);
    if (name && !strchr(name, '/') && model_builtin(name, m) == 0) {
        /* built-in by name */
    } else if (name) {
        _cleanup_free_ char *err = NULL;
        if (model_load(name, m, &err) < 0) {
            text_printf(
                stderr, "watt %s: %s%s\n", verb, err,
                strchr(name, '/') ? "" : " (built-in models: specpower-2023, vm-vcpu, seed-2011)");
            return -EINVAL;
        }
    }
    if (!isnan(pue))
        m->pue = pue;
    return 0;
}
