#include "cli/outfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/text.h"
#include "base/util.h"

int cli_outfile_open(const char *verb, const char *path, struct cli_outfile *ret)
{
    struct cli_outfile o = {.path = path};
    const char *slash = strrchr(path, '/');
    o.tmp = slash ? xasprintf("%.*s/.%s.XXXXXX", (int)(slash - path), path, slash + 1)
                  : xasprintf(".%s.XXXXXX", path);
    int fd = mkostemp(o.tmp, O_CLOEXEC);
    int e = errno;
    if (fd >= 0 && !(o.f = fdopen(fd, "w"))) {
        e = errno;
        close(fd);
        unlink(o.tmp);
    }
    if (!o.f) {
        text_printf(stderr, "watt %s: cannot write %s: %s\n", verb, path, strerror(e));
        free(o.tmp);
        return -e;
    }
    *ret = o;
    return 0;
}

void cli_outfile_abort(struct cli_outfile *o)
{
    if (!o)
        return;
    if (o->f)
        fclose(o->f);
    if (o->tmp)
        unlink(o->tmp);
    free(o->tmp);
    o->f = NULL;
    o->tmp = NULL;
}

int cli_outfile_commit(const char *verb, struct cli_outfile *o)
{
    mode_t um = umask(0);
    umask(um);
    int e = 0;
    errno = 0;
    if (fflush(o->f) != 0 || ferror(o->f))
        e = errno ? errno : EIO;
    if (!e && (fchmod(fileno(o->f), 0666 & ~um) < 0 || fsync(fileno(o->f)) < 0))
        e = errno;
    int rc = fclose(o->f);
    o->f = NULL;
    if (!e && rc != 0)
        e = errno;
    if (!e && rename(o->tmp, o->path) < 0)
        e = errno;
    if (e) {
        text_printf(stderr, "watt %s: cannot write %s: %s\n", verb, o->path, strerror(e));
        cli_outfile_abort(o);
        return -e;
    }
    free(o->tmp);
    o->tmp = NULL;
    return 0;
}
