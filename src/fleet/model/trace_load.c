/* Loading a trace from disk: a PlanetLab folder (one file per VM) or a CSV
 * file. The only I/O of the fleet layer; the parsing is in trace.c. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/util.h"
#include "fleet/model/fleet.h"

#define TRACE_FILE_MAX   (64u << 20) /* bytes: a day of PlanetLab is 1 MB in all */
#define PLANETLAB_STEP_S 300.0

/* The whole of an open file, refused above TRACE_FILE_MAX. */
static int read_fd(int fd, const char *path, char **ret, size_t *ret_len, struct fleet_error *err)
{
    struct stat st;
    if (fstat(fd, &st) < 0) {
        int e = errno;
        fleet_error_set(err, "cannot read %s: %s", path, strerror(e));
        return -e;
    }
    if (st.st_size > (off_t)TRACE_FILE_MAX) {
        fleet_error_set(err, "%s: %lld bytes, more than the %u MiB a trace file may have", path,
                        (long long)st.st_size, TRACE_FILE_MAX >> 20);
        return -EFBIG;
    }
    size_t cap = (size_t)st.st_size + 1, len = 0;
    _cleanup_free_ char *buf = xmalloc(cap);
    for (;;) {
        if (len == cap) {
            if (cap > TRACE_FILE_MAX) {
                fleet_error_set(err, "%s: more than the %u MiB a trace file may have", path,
                                TRACE_FILE_MAX >> 20);
                return -EFBIG;
            }
            cap *= 2;
            buf = xrealloc(buf, cap);
        }
        ssize_t n = read(fd, buf + len, cap - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            int e = errno;
            fleet_error_set(err, "cannot read %s: %s", path, strerror(e));
            return -e;
        }
        if (n == 0)
            break;
        len += (size_t)n;
    }
    *ret = TAKE_PTR(buf);
    *ret_len = len;
    return 0;
}

static int open_error(const char *path, struct fleet_error *err)
{
    int e = errno;
    fleet_error_set(err, "cannot open %s: %s", path, strerror(e));
    return -e;
}

static int by_strcmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void free_names(char **names, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
}

/* The regular files of a folder, but dotfiles and README*, in byte order. */
static int list_folder(int dfd, const char *path, char ***ret, size_t *ret_n,
                       struct fleet_error *err)
{
    int fd = dup(dfd);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0)
            close(fd);
        return open_error(path, err);
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        struct stat st;
        if (de->d_name[0] == '.' || strncmp(de->d_name, "README", 6) == 0)
            continue;
        if (fstatat(dfd, de->d_name, &st, 0) < 0 || !S_ISREG(st.st_mode))
            continue;
        names = grow_array(names, sizeof(*names), n, &cap);
        names[n++] = xstrdup(de->d_name);
    }
    closedir(d);
    if (n == 0) {
        free(names);
        fleet_error_set(err, "%s: no trace files in the folder (want one PlanetLab file per VM)",
                        path);
        return -EINVAL;
    }
    qsort(names, n, sizeof(*names), by_strcmp);
    *ret = names;
    *ret_n = n;
    return 0;
}

static int load_planetlab_file(int dfd, const char *path, const char *name, struct fleet_trace *t,
                               struct fleet_error *err)
{
    _cleanup_free_ char *where = xasprintf("%s/%s", path, name);
    _cleanup_close_ int fd = openat(dfd, name, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0)
        return open_error(where, err);
    _cleanup_free_ char *buf = NULL;
    size_t len;
    int r = read_fd(fd, where, &buf, &len, err);
    if (r < 0)
        return r;
    r = fleet_trace_parse_planetlab(buf, len, where, t, err);
    if (r < 0)
        return r;
    const struct fleet_trace_vm *first = &t->vms[0], *last = &t->vms[t->n_vms - 1];
    if (last->len != first->len) {
        fleet_error_set(err,
                        "%s has %u lines, but %s/%s has %u (all files of a folder must have "
                        "the same number)",
                        where, last->len, path, first->name, first->len);
        return -EINVAL;
    }
    return 0;
}

static int load_planetlab(int dfd, const char *path, struct fleet_trace *ret,
                          struct fleet_error *err)
{
    char **names = NULL;
    size_t n = 0;
    int r = list_folder(dfd, path, &names, &n, err);
    if (r < 0)
        return r;
    struct fleet_trace t = {.step_s = PLANETLAB_STEP_S};
    for (size_t i = 0; i < n && r == 0; i++)
        r = load_planetlab_file(dfd, path, names[i], &t, err);
    free_names(names, n);
    if (r < 0) {
        fleet_trace_free(&t);
        return r;
    }
    t.origin = xstrdup(path);
    *ret = t;
    return 0;
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

int fleet_trace_load(const char *path, struct fleet_trace *ret, struct fleet_error *err)
{
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0)
        return open_error(path, err);
    struct stat st;
    if (fstat(fd, &st) < 0)
        return open_error(path, err);
    if (S_ISDIR(st.st_mode))
        return load_planetlab(fd, path, ret, err);
    if (!S_ISREG(st.st_mode) || !ends_with(path, ".csv")) {
        fleet_error_set(err, "%s: not a trace (want a folder of PlanetLab files or a .csv file)",
                        path);
        return -EINVAL;
    }
    _cleanup_free_ char *buf = NULL;
    size_t len;
    int r = read_fd(fd, path, &buf, &len, err);
    if (r < 0)
        return r;
    return fleet_trace_parse_csv(buf, len, path, ret, err);
}
