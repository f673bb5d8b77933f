/* The operator's files in state_dir (opstate.h): durable writes, reads
 * that trust nothing, and the strict parsers of the two record files. */
#include "fleet/control/opstate.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/strbuf.h"
#include "base/util.h"

int opstate_mkdir(const char *dir, struct fleet_error *err)
{
    if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
        int e = errno;
        fleet_error_set(err, "cannot create %s: %s", dir, strerror(e));
        return -e;
    }
    return 0;
}

int opstate_lock(const char *dir, int *ret_fd, struct fleet_error *err)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0 || flock(fd, LOCK_EX) < 0) {
        int e = errno;
        fleet_error_set(err, "cannot lock %s: %s", dir, strerror(e));
        if (fd >= 0)
            close(fd);
        return -e;
    }
    *ret_fd = fd;
    return 0;
}

static int fsync_dir(const char *dir)
{
    _cleanup_close_ int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0 || fsync(fd) < 0)
        return -errno;
    return 0;
}

/* Who may have written it: root or us, and nobody else since. */
int opstate_trusted(const char *path, const struct stat *st, struct fleet_error *err)
{
    if (st->st_uid != 0 && st->st_uid != geteuid()) {
        fleet_error_set(err, "%s is owned by uid %u, not by root or by us: refused", path,
                        (unsigned)st->st_uid);
        return -EPERM;
    }
    if (st->st_mode & (S_IWGRP | S_IWOTH)) {
        fleet_error_set(err, "%s is writable by %s (mode %04o): refused", path,
                        (st->st_mode & S_IWOTH) ? "others" : "its group",
                        (unsigned)(st->st_mode & 07777));
        return -EPERM;
    }
    return 0;
}

static int check_owner(const char *path, const struct stat *st, struct fleet_error *err)
{
    if (!S_ISREG(st->st_mode)) {
        fleet_error_set(err, "%s is not a regular file: not read", path);
        return -EINVAL;
    }
    int r = opstate_trusted(path, st, err);
    if (r < 0)
        return r;
    if (st->st_size > OPSTATE_FILE_MAX) {
        fleet_error_set(err, "%s is larger than %d bytes: not read", path, OPSTATE_FILE_MAX);
        return -EFBIG;
    }
    return 0;
}

int opstate_read(const char *dir, const char *name, char **ret, size_t *ret_len,
                 struct fleet_error *err)
{
    _cleanup_free_ char *path = xasprintf("%s/%s", dir, name);
    /* O_NOFOLLOW: a symlink planted there is refused; O_NONBLOCK: a FIFO
     * does not hang the open (and fails the regular-file check) */
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) {
        int e = errno;
        fleet_error_set(err, e == ELOOP ? "%s is a symbolic link: not read" : "cannot open %s: %s",
                        path, strerror(e));
        return -e;
    }
    struct stat st;
    if (fstat(fd, &st) < 0) {
        int e = errno;
        fleet_error_set(err, "cannot read %s: %s", path, strerror(e));
        return -e;
    }
    int r = check_owner(path, &st, err);
    if (r < 0)
        return r;
    char *buf = xmalloc(OPSTATE_FILE_MAX + 2);
    size_t len = 0;
    while (len <= OPSTATE_FILE_MAX) {
        ssize_t n = read(fd, buf + len, OPSTATE_FILE_MAX + 1 - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            int e = errno;
            free(buf);
            fleet_error_set(err, "cannot read %s: %s", path, strerror(e));
            return -e;
        }
        if (n == 0)
            break;
        len += (size_t)n;
    }
    if (len > OPSTATE_FILE_MAX) { /* it grew after the fstat */
        free(buf);
        fleet_error_set(err, "%s is larger than %d bytes: not read", path, OPSTATE_FILE_MAX);
        return -EFBIG;
    }
    buf[len] = '\0';
    *ret = buf;
    *ret_len = len;
    return 0;
}

static int write_all(int fd, const char *p, size_t len)
{
    while (len) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

int opstate_write(const char *dir, const char *name, const char *text, size_t len,
                  struct fleet_error *err)
{
    _cleanup_free_ char *path = xasprintf("%s/%s", dir, name);
    _cleanup_free_ char *tmp = xasprintf("%s/.%s.tmp", dir, name);
    (void)unlink(tmp); /* one a crash left */
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    int r = fd < 0 ? -errno : 0;
    if (r == 0)
        r = write_all(fd, text, len);
    if (r == 0 && fsync(fd) < 0)
        r = -errno;
    if (fd >= 0 && close(fd) < 0 && r == 0)
        r = -errno;
    if (r == 0 && rename(tmp, path) < 0)
        r = -errno;
    if (r == 0)
        r = fsync_dir(dir);
    if (r < 0) {
        fleet_error_set(err, "cannot write %s: %s", path, strerror(-r));
        (void)unlink(tmp);
    }
    return r;
}

int opstate_remove(const char *dir, const char *name, struct fleet_error *err)
{
    _cleanup_free_ char *path = xasprintf("%s/%s", dir, name);
    if (unlink(path) < 0 && errno != ENOENT) {
        int e = errno;
        fleet_error_set(err, "cannot remove %s: %s", path, strerror(e));
        return -e;
    }
    int r = fsync_dir(dir);
    if (r < 0)
        fleet_error_set(err, "cannot sync %s: %s", dir, strerror(-r));
    return r;
}

/* ---- the record files --------------------------------------------------- */

/* The next line of TEXT at *POS, without its '\n', in LINE; 0 at the end,
 * -EINVAL when the last line has no '\n' (our writes end every line). */
static int next_line(const char *text, size_t len, size_t *pos, char *line, size_t size)
{
    if (*pos >= len)
        return 0;
    const char *nl = memchr(text + *pos, '\n', len - *pos);
    if (!nl)
        return -EINVAL;
    size_t n = (size_t)(nl - (text + *pos));
    if (n >= size || memchr(text + *pos, '\0', n))
        return -EINVAL;
    memcpy(line, text + *pos, n);
    line[n] = '\0';
    *pos += n + 1;
    return 1;
}

/* A time as we write it: digits, optionally '.' and digits; finite. */
static int parse_time(const char *s, double *ret)
{
    size_t i = 0;
    while (isdigit((unsigned char)s[i]))
        i++;
    if (i == 0 || i > 12)
        return -EINVAL;
    if (s[i] == '.') {
        size_t j = ++i;
        while (isdigit((unsigned char)s[i]))
            i++;
        if (i == j || i - j > 9)
            return -EINVAL;
    }
    if (s[i])
        return -EINVAL;
    *ret = strtod(s, NULL);
    return 0;
}

static bool host_name_ok(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n >= FLEET_NAME_MAX)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)s[i]) && !strchr("_-.", s[i]))
            return false;
    return true;
}

/* Split LINE into exactly N words at single spaces. */
static bool split(char *line, char **words, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        words[i] = line;
        char *sp = strchr(line, ' ');
        if ((i + 1 < n) != (sp != NULL) || (sp && sp == line))
            return false;
        if (sp) {
            *sp = '\0';
            line = sp + 1;
        }
    }
    return *words[n - 1] != '\0';
}

int opstate_maint_parse(const char *text, size_t len, const char *origin,
                        struct opstate_maint **ret, size_t *ret_n, struct fleet_error *err)
{
    struct opstate_maint *v = NULL;
    size_t n = 0, pos = 0;
    char line[256];
    int r;
    for (int ln = 1; (r = next_line(text, len, &pos, line, sizeof(line))) > 0; ln++) {
        char *w[2];
        if (line[0] == '#')
            continue;
        bool ok = split(line, w, 2) && host_name_ok(w[0]) && n < OPSTATE_MAX_LINES;
        double since = 0;
        if (ok)
            ok = parse_time(w[1], &since) == 0;
        for (size_t i = 0; ok && i < n; i++)
            ok = !streq(v[i].host, w[0]);
        if (!ok) {
            free(v);
            fleet_error_set(err,
                            "%s line %d: not a maintenance record (want 'HOST SINCE', each "
                            "host once)",
                            origin, ln);
            return -EINVAL;
        }
        v = xrealloc(v, (n + 1) * sizeof(*v));
        snprintf(v[n].host, sizeof(v[n].host), "%s", w[0]);
        v[n++].since = since;
    }
    if (r < 0) {
        free(v);
        fleet_error_set(err, "%s: a line is too long, holds a NUL byte or has no end", origin);
        return -EINVAL;
    }
    *ret = v;
    *ret_n = n;
    return 0;
}

char *opstate_maint_format(const struct opstate_maint *v, size_t n)
{
    struct strbuf b = {0};
    strbuf_append(&b, "# hosts in maintenance: NAME SINCE (watt fleet host NAME maintenance "
                      "on|off)\n");
    for (size_t i = 0; i < n; i++)
        strbuf_appendf(&b, "%s %.0f\n", v[i].host, v[i].since);
    return strbuf_steal(&b);
}

bool opstate_id_valid(const char *s)
{
    for (size_t i = 0; i < OPSTATE_ID_LEN; i++)
        if (!isdigit((unsigned char)s[i]) && !(s[i] >= 'a' && s[i] <= 'f'))
            return false;
    return s[OPSTATE_ID_LEN] == '\0';
}

static int parse_u64(const char *s, uint64_t *ret)
{
    size_t i = 0;
    while (isdigit((unsigned char)s[i]))
        i++;
    if (i == 0 || i > 19 || s[i])
        return -EINVAL;
    *ret = strtoull(s, NULL, 10);
    return 0;
}

int opstate_approvals_parse(const char *text, size_t len, const char *origin,
                            struct opstate_approval **ret, size_t *ret_n, struct fleet_error *err)
{
    struct opstate_approval *v = NULL;
    size_t n = 0, pos = 0;
    char line[256];
    int r;
    for (int ln = 1; (r = next_line(text, len, &pos, line, sizeof(line))) > 0; ln++) {
        char *w[3];
        if (line[0] == '#')
            continue;
        struct opstate_approval a = {0};
        bool ok = split(line, w, 3) && (streq(w[0], "all") || opstate_id_valid(w[0])) &&
                  parse_u64(w[1], &a.plan) == 0 && parse_time(w[2], &a.time) == 0 &&
                  n < OPSTATE_MAX_LINES;
        if (!ok) {
            free(v);
            fleet_error_set(err,
                            "%s line %d: not an approval (want 'ID PLAN TIME' or 'all PLAN "
                            "TIME')",
                            origin, ln);
            return -EINVAL;
        }
        snprintf(a.id, sizeof(a.id), "%s", w[0]);
        v = xrealloc(v, (n + 1) * sizeof(*v));
        v[n++] = a;
    }
    if (r < 0) {
        free(v);
        fleet_error_set(err, "%s: a line is too long, holds a NUL byte or has no end", origin);
        return -EINVAL;
    }
    *ret = v;
    *ret_n = n;
    return 0;
}

char *opstate_approvals_format(const struct opstate_approval *v, size_t n)
{
    struct strbuf b = {0};
    strbuf_append(&b, "# approved actions: ID PLAN TIME (watt fleet approve)\n");
    for (size_t i = 0; i < n; i++)
        strbuf_appendf(&b, "%s %" PRIu64 " %.3f\n", v[i].id, v[i].plan, v[i].time);
    return strbuf_steal(&b);
}

void opstate_action_id(char ret[OPSTATE_ID_LEN + 1], const char *const *words, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) {
        for (const char *s = words[i]; *s; s++)
            h = (h ^ (unsigned char)*s) * 1099511628211ull;
        h = (h ^ 0xff) * 1099511628211ull; /* a separator no name holds */
    }
    /* murmur3's finalizer: FNV alone leaves the high bits of similar
     * actions alike ("d922d78f", "d922ee66"), easy to mix up when typed */
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 33;
    snprintf(ret, OPSTATE_ID_LEN + 1, "%08" PRIx32, (uint32_t)h);
}

/* ---- plan.json, as control_manual.c writes it ------------------------------ */

int opstate_plan_serial(const char *text, uint64_t *ret)
{
    static const char head[] = "{\"plan\":";
    if (strncmp(text, head, sizeof(head) - 1))
        return -EINVAL;
    const char *p = text + sizeof(head) - 1;
    size_t i = 0;
    while (isdigit((unsigned char)p[i]))
        i++;
    if (i == 0 || i > 19 || p[i] != ',')
        return -EINVAL;
    *ret = strtoull(p, NULL, 10);
    return 0;
}

bool opstate_plan_pending(const char *text, const char *id, char *ret_what, size_t size)
{
    if (!opstate_id_valid(id))
        return false;
    char key[80];
    snprintf(key, sizeof(key), "{\"id\":\"%s\",\"state\":\"pending\",\"what\":\"", id);
    const char *p = strstr(text, key);
    if (!p)
        return false;
    if (ret_what && size) {
        size_t n = 0;
        for (p += strlen(key); *p && *p != '"' && n + 2 < size; p++) {
            if (*p == '\\' && p[1])
                ret_what[n++] = *p++;
            ret_what[n++] = *p;
        }
        ret_what[n] = '\0';
    }
    return true;
}
