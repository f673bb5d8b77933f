/* The control socket's path: see ctlsock.h. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "agent/ctlsock.h"
#include "base/util.h"

/* Whether PATH is a socket that nobody answers on: left by an agent that
 * died. Anything else (a file, a directory, a socket with a live agent
 * behind it, one we may not connect to) is left alone, and said why. */
static bool stale(const char *path, const struct sockaddr_un *sa)
{
    struct stat st;
    if (lstat(path, &st) < 0)
        return errno == ENOENT;
    if (!S_ISSOCK(st.st_mode)) {
        fprintf(stderr,
                "watt agent: no control socket: %s exists and is not a socket; left alone\n", path);
        return false;
    }
    _cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return false;
    if (connect(fd, (const struct sockaddr *)sa, sizeof(*sa)) == 0) {
        fprintf(stderr, "watt agent: no control socket: another agent answers on %s\n", path);
        return false;
    }
    if (errno != ECONNREFUSED) {
        fprintf(stderr, "watt agent: no control socket: %s: %s; left alone\n", path,
                strerror(errno));
        return false;
    }
    if (unlink(path) < 0 && errno != ENOENT) {
        fprintf(stderr, "watt agent: no control socket: cannot remove the stale %s: %s\n", path,
                strerror(errno));
        return false;
    }
    return true;
}

int ctlsock_open(const char *path, struct ctlsock *ret)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    ret->fd = -1;
    if (strlen(path) >= sizeof(sa.sun_path)) {
        fprintf(stderr, "watt agent: control socket path too long: %s\n", path);
        return 0;
    }
    memcpy(sa.sun_path, path, strlen(path));
    if (!stale(path, &sa))
        return 0;
    _cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -errno;
    mode_t old = umask(0077);
    int r = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
    umask(old);
    struct stat st;
    if (r < 0 || listen(fd, 4) < 0 || lstat(path, &st) < 0) {
        fprintf(stderr, "watt agent: no control socket at %s: %s\n", path, strerror(errno));
        return 0;
    }
    ret->dev = st.st_dev;
    ret->ino = st.st_ino;
    ret->fd = TAKE_FD(fd);
    return 0;
}

void ctlsock_close(const char *path, struct ctlsock *s)
{
    struct stat st;
    if (s->fd < 0)
        return;
    close(s->fd);
    s->fd = -1;
    if (lstat(path, &st) == 0 && S_ISSOCK(st.st_mode) && st.st_dev == s->dev && st.st_ino == s->ino)
        (void)unlink(path);
}
