/* fleet.ini from its file, and the BMC passwords it points to (site_load.h). */
#include "fleet/control/site_load.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/util.h"

#define SITE_FILE_MAX (4u << 20)

/* Up to MAX bytes of FD into *RET (NUL-terminated, caller frees), or
 * -EFBIG when there is more. */
static int read_all(int fd, size_t max, char **ret, size_t *ret_len)
{
    size_t cap = 4096, len = 0;
    char *buf = xmalloc(cap);
    for (;;) {
        if (len + 1 >= cap) {
            if (cap > max + 1) {
                explicit_bzero(buf, len);
                free(buf);
                return -EFBIG;
            }
            cap *= 2;
            buf = xrealloc(buf, cap);
        }
        ssize_t n = read(fd, buf + len, cap - len - 1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            int e = errno;
            explicit_bzero(buf, len);
            free(buf);
            return -e;
        }
        if (n == 0)
            break;
        len += (size_t)n;
    }
    if (len > max) {
        explicit_bzero(buf, len);
        free(buf);
        return -EFBIG;
    }
    buf[len] = '\0';
    *ret = buf;
    *ret_len = len;
    return 0;
}

/* PATH as written in fleet.ini: absolute, or relative to fleet.ini's folder. */
static char *resolve(const char *config, const char *path)
{
    const char *slash = strrchr(config, '/');
    if (path[0] == '/' || !slash)
        return xstrdup(path);
    return xasprintf("%.*s/%s", (int)(slash - config), config, path);
}

/* One host's bmc_password_file: a regular file that only its owner may
 * read; its first line is the password. */
static int read_password(const struct site *s, struct site_host *h, struct fleet_error *err)
{
    _cleanup_free_ char *path = resolve(s->origin, h->bmc_password_file);
    const char *o = s->origin;
    int line = h->bmc_password_line;
    /* O_NONBLOCK: a FIFO put there does not hang the open */
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0) {
        int e = errno;
        fleet_error_set(err, "%s line %d: bmc_password_file %s: cannot open: %s", o, line, path,
                        strerror(e));
        return -e;
    }
    struct stat st;
    if (fstat(fd, &st) < 0) {
        int e = errno;
        fleet_error_set(err, "%s line %d: bmc_password_file %s: %s", o, line, path, strerror(e));
        return -e;
    }
    if (!S_ISREG(st.st_mode)) {
        fleet_error_set(err, "%s line %d: bmc_password_file %s is not a regular file", o, line,
                        path);
        return -EINVAL;
    }
    if (st.st_mode & SITE_SECRET_MODE_BAD) {
        fleet_error_set(err,
                        "%s line %d: bmc_password_file %s is readable by group/others (mode "
                        "%04o): chmod 600 it",
                        o, line, path, (unsigned)(st.st_mode & 07777));
        return -EACCES;
    }
    char *text = NULL;
    size_t len = 0;
    int r = read_all(fd, SITE_PASSWORD_FILE_MAX, &text, &len);
    if (r < 0) {
        fleet_error_set(err, "%s line %d: bmc_password_file %s: %s", o, line, path,
                        r == -EFBIG ? "larger than 4096 bytes; not a password file" : strerror(-r));
        return r == -EFBIG ? -EINVAL : r;
    }
    size_t n = strcspn(text, "\n");
    if (n > 0 && text[n - 1] == '\r')
        n--;
    if (memchr(text, '\0', n) || n == 0) {
        fleet_error_set(err, "%s line %d: bmc_password_file %s: %s", o, line, path,
                        n ? "holds a NUL byte"
                          : "its first line is empty (want the password there)");
        explicit_bzero(text, len);
        free(text);
        return -EINVAL;
    }
    text[n] = '\0';
    free(h->bmc_password);
    h->bmc_password = xstrdup(text);
    explicit_bzero(text, len);
    free(text);
    return 0;
}

/* What fstat says of the descriptor read, against what the file holds. */
static int check_config(const struct site *s, const struct stat *st, struct fleet_error *err)
{
    if (!s->password_line || !(st->st_mode & SITE_SECRET_MODE_BAD))
        return 0;
    fleet_error_set(err,
                    "fleet.ini %s holds bmc_password (line %d) and is readable by group/others "
                    "(mode %04o): chmod 600 it, or use bmc_password_file",
                    s->origin, s->password_line, (unsigned)(st->st_mode & 07777));
    return -EACCES;
}

int site_load(const char *path, struct site *ret, struct fleet_error *err)
{
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        int e = errno;
        fleet_error_set(err, "cannot open %s: %s", path, strerror(e));
        return -e;
    }
    struct stat st;
    if (fstat(fd, &st) < 0) {
        int e = errno;
        fleet_error_set(err, "cannot read %s: %s", path, strerror(e));
        return -e;
    }
    if (S_ISDIR(st.st_mode)) {
        fleet_error_set(err, "%s is a folder, not a fleet.ini", path);
        return -EISDIR;
    }
    char *text = NULL;
    size_t len = 0;
    int r = read_all(fd, SITE_FILE_MAX, &text, &len);
    if (r < 0) {
        if (r == -EFBIG)
            fleet_error_set(err, "%s: larger than 4 MiB; not a fleet.ini", path);
        else
            fleet_error_set(err, "cannot read %s: %s", path, strerror(-r));
        return r;
    }
    struct site s;
    r = site_parse(text, len, path, &s, err);
    explicit_bzero(text, len);
    free(text);
    if (r < 0)
        return r;
    r = check_config(&s, &st, err);
    for (size_t i = 0; r == 0 && i < s.n_hosts; i++)
        if (s.hosts[i].bmc_password_file)
            r = read_password(&s, &s.hosts[i], err);
    if (r < 0) {
        site_free(&s);
        return r;
    }
    *ret = s;
    return 0;
}
