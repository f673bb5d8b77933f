/* `--model fitted`: the model the agent fitted against this machine's
 * meter, ROOT/var/lib/watt/model-fitted.ini (model/fit.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/util.h"
#include "cli/verbs.h"
#include "host/host.h"
#include "model/fit.h"
#include "model/model.h"

int cli_load_fitted(struct host *h, struct power_model *ret, char **ret_err)
{
    _cleanup_free_ char *shown = host_state_display_path(h, FIT_MODEL_PATH);
    /* root's state: a file another user could have written is refused */
    int r = host_state_check(h, FIT_MODEL_PATH, ret_err);
    if (r < 0)
        return r;
    _cleanup_close_ int fd = host_state_open(h, FIT_MODEL_PATH, O_RDONLY, 0);
    if (fd == -ENOENT) {
        *ret_err = xasprintf("no fitted model yet: the agent fits one where a power meter "
                             "exists, %s",
                             shown);
        return -ENOENT;
    }
    if (fd < 0) {
        *ret_err = xasprintf("cannot read %s: %s", shown, strerror(-fd));
        return fd;
    }
    char buf[65536];
    size_t n = 0;
    for (;;) {
        ssize_t k = read(fd, buf + n, sizeof(buf) - 1 - n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0) {
            *ret_err = xasprintf("cannot read %s: %s", shown, strerror(errno));
            return -errno;
        }
        if (k == 0)
            break;
        n += (size_t)k;
        if (n == sizeof(buf) - 1) {
            *ret_err = xasprintf("%s: larger than 64 KiB", shown);
            return -EFBIG;
        }
    }
    buf[n] = '\0';
    if (memchr(buf, '\0', n)) {
        *ret_err = xasprintf("%s: binary content", shown);
        return -EINVAL;
    }
    struct power_model m;
    r = model_parse(buf, shown, &m, ret_err);
    if (r < 0)
        return r;
    if (!m.fit.n) {
        *ret_err = xasprintf("%s: not a fitted model (no fit_n key)", shown);
        return -EINVAL;
    }
    *ret = m;
    return 0;
}
