#include "host.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/perf_event.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/parse.h"
#include "base/strbuf.h"
#include "base/util.h"
#include "host/beneath.h"
#include "host/cache.h"
#include "host/fault.h"
#include "host/mountinfo.h"

#define HOST_MAX_FILE (64u << 20)

static const char *const dir_names[_HOST_DIR_MAX] = {
    [HOST_SYS] = "sys",  [HOST_PROC] = "proc", [HOST_DEV] = "dev",
    [HOST_ROOTDIR] = "", [HOST_NVML] = "nvml",
};

const char *host_dir_name(enum host_dir d)
{
    return dir_names[d];
}

/* A recorded root's sys, proc, dev and var must be its own directories:
 * a link there ("sys -> /sys") would mix the running machine into a
 * replay, and "var -> /var" would put a fixture's journal and its writes
 * on the live machine. */
static int check_root_dirs(int rootfd, const char *root, char **ret_err)
{
    static const char *const names[] = {"sys", "proc", "dev", "var"};
    for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
        struct stat st;
        if (fstatat(rootfd, names[i], &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISLNK(st.st_mode))
            continue;
        if (ret_err)
            *ret_err = xasprintf("%s/%s is a symbolic link: a root's sys, proc, dev and var must "
                                 "be directories in it, not links out of it",
                                 root, names[i]);
        return -ELOOP;
    }
    return 0;
}

int host_open_err(const char *root, struct host **ret, char **ret_err)
{
    if (!root)
        root = getenv("WATT_ROOT");
    if (!root || !*root)
        root = "/";

    _cleanup_close_ int rootfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (rootfd < 0)
        return -errno;
    _cleanup_free_ char *real = realpath(root, NULL);
    if (!real)
        return -errno;
    bool live = streq(real, "/");
    if (!live) {
        int r = check_root_dirs(rootfd, root, ret_err);
        if (r < 0)
            return r;
    }

    struct host *h = xcalloc(1, sizeof(*h));
    h->root = xstrdup(root);
    h->root_real = TAKE_PTR(real);
    h->live = live;
    for (int d = 0; d < HOST_ROOTDIR; d++)
        h->fd[d] = openat(rootfd, dir_names[d], O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    h->fd[HOST_ROOTDIR] = TAKE_FD(rootfd);
    h->fd[HOST_NVML] = -1; /* no directory: tune/knob_io.h */
    if (h->fd[HOST_SYS] < 0 && h->fd[HOST_PROC] < 0) {
        host_close(h);
        return -ENOTDIR; /* neither sys/ nor proc/: not a root at all */
    }
    if (!h->live) {
        int r = fault_load(h->fd[HOST_ROOTDIR], &h->fault, &h->nfault);
        if (r < 0) {
            host_close(h);
            return r;
        }
    }
    *ret = h;
    return 0;
}

int host_open(const char *root, struct host **ret)
{
    return host_open_err(root, ret, NULL);
}

void host_close(struct host *h)
{
    if (!h)
        return;
    host_tracefs_unmount(h);
    if (h->cache) {
        cache_clear(h->cache);
        free(h->cache);
    }
    for (int d = 0; d < _HOST_DIR_MAX; d++)
        if (h->fd[d] >= 0)
            close(h->fd[d]);
    fault_free(h->fault, h->nfault);
    free(h->root);
    free(h->root_real);
    free(h);
}

void host_set_recorder(struct host *h, struct host_recorder *rec)
{
    h->rec = rec;
}

char *host_display_path(const struct host *h, enum host_dir d, const char *path)
{
    const char *sep = d == HOST_ROOTDIR ? "" : "/";
    if (d == HOST_NVML)
        return host_kernel_path(d, path);
    if (h->live)
        return xasprintf("/%s%s%s", dir_names[d], sep, path);
    return xasprintf("%s/%s%s%s", h->root, dir_names[d], sep, path);
}

char *host_kernel_path(enum host_dir d, const char *path)
{
    if (d == HOST_NVML)
        return xasprintf("nvml:%s", path);
    return xasprintf("/%s%s%s", dir_names[d], d == HOST_ROOTDIR ? "" : "/", path);
}

static int dirfd_of(struct host *h, enum host_dir d)
{
    return h->fd[d] >= 0 ? h->fd[d] : -ENOENT;
}

/* The root-relative path of an open fd, for the recorder. */
static char *real_rel_path(struct host *h, int fd)
{
    char link[64], buf[PATH_MAX];
    snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, buf, sizeof(buf) - 1);
    if (n < 0)
        return NULL;
    buf[n] = '\0';
    /* procfs files opened through /proc/self (net/route) read back as
     * "... (deleted)" once the thread's dentry is gone: the path is valid. */
    size_t bl = (size_t)n;
    if (bl > 10 && streq(buf + bl - 10, " (deleted)"))
        buf[bl - 10] = '\0';
    size_t rl = strlen(h->root_real);
    if (streq(h->root_real, "/"))
        return xstrdup(buf + 1);
    if (strncmp(buf, h->root_real, rl) != 0 || (buf[rl] != '/' && buf[rl] != '\0'))
        return NULL; /* escaped the root through a symlink: do not record */
    return xstrdup(buf[rl] ? buf + rl + 1 : "");
}

static void record_one_link(struct host *h, const char *p)
{
    char target[PATH_MAX];
    ssize_t n = readlinkat(h->fd[HOST_ROOTDIR], p, target, sizeof(target) - 1);
    if (n < 0)
        return;
    target[n] = '\0';
    const char *slash = strrchr(p, '/');
    _cleanup_free_ char *parent = slash ? strndup(p, (size_t)(slash - p)) : xstrdup(".");
    _cleanup_close_ int pfd = openat(h->fd[HOST_ROOTDIR], parent, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (pfd < 0)
        return;
    _cleanup_free_ char *real_parent = real_rel_path(h, pfd);
    if (!real_parent)
        return;
    _cleanup_free_ char *at = *real_parent ? xasprintf("%s/%s", real_parent, slash ? slash + 1 : p)
                                           : xstrdup(slash ? slash + 1 : p);
    h->rec->link(h->rec->ud, at, target);
}

/* Record each symlink met along `path` so a replay resolves the same way.
 * A link is recorded where it really is: under its parent's real path, so
 * a link below another link (class/hwmon/hwmon2/device) unpacks. */
static void record_links(struct host *h, enum host_dir d, const char *path)
{
    _cleanup_free_ char *p = xasprintf("%s/%s", dir_names[d], path);
    for (char *s = strchr(p, '/');; s = strchr(s + 1, '/')) {
        if (s)
            *s = '\0';
        struct stat st;
        if (fstatat(h->fd[HOST_ROOTDIR], p, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode))
            record_one_link(h, p);
        if (!s)
            break;
        *s = '/';
    }
}

/* Open under dfd, never leaving it (beneath.h): on a recorded root a
 * tree's "proc/stat -> /proc/stat" would otherwise mix the running
 * machine into a replay; on a live root a path such as
 * "self/root/etc/passwd" under /proc would reach any file, and a write
 * must reach only the kernel file it names. Live state files (the
 * journal under "/") resolve as in a chroot at "/": an administrator's
 * "/var -> /data/var" still works, a magic link never does. */
static int root_openat_mode(const struct host *h, int dfd, const char *path, int flags, mode_t mode)
{
    bool in_root = h->live && dfd == h->fd[HOST_ROOTDIR];
    return beneath_open(dfd, path, flags, mode, in_root ? BENEATH_IN_ROOT : BENEATH_STRICT);
}

static int root_openat(const struct host *h, int dfd, const char *path, int flags)
{
    return root_openat_mode(h, dfd, path, flags, 0);
}

static int open_at(struct host *h, enum host_dir d, const char *path, int flags)
{
    int dfd = dirfd_of(h, d);
    if (dfd < 0)
        return dfd;
    return root_openat(h, dfd, path, flags);
}

/* A value as text: a NUL inside it ("0-3\\0,4-39") is garbage, not the
 * end of the value. */
static int text_ok(char *s, size_t len)
{
    if (strlen(s) == len)
        return 0;
    free(s);
    return -EINVAL;
}

/* The whole of an open file, from offset 0 with pread() (a kept file is
 * re-read from its start: sysfs and seq_file show it anew). -ESPIPE: the
 * file takes no pread (read_all falls back to read()). */
static int read_all(struct host *h, enum host_dir d, int fd, bool positional, struct strbuf *b)
{
    char chunk[16384];
    uint64_t off = 0;
    for (;;) {
        ssize_t n = positional ? pread(fd, chunk, sizeof(chunk), (off_t)off)
                               : read(fd, chunk, sizeof(chunk));
        if (n < 0) {
            if (errno == EINTR)
                continue;
            int r = -errno;
            strbuf_free(b);
            return r;
        }
        if (n == 0)
            break;
        if (b->len + (size_t)n > HOST_MAX_FILE) {
            strbuf_free(b);
            return -EFBIG;
        }
        strbuf_append_n(b, chunk, (size_t)n);
        off += (uint64_t)n;
        /* A sysfs attribute comes whole in the first read (one show() of at
         * most a page): a short read is the end, and saves a read() per
         * file, a quarter of a report's syscalls. procfs keeps reading. */
        if (d == HOST_SYS && (size_t)n < sizeof(chunk))
            break;
    }
    return 0;
}

static void read_done(struct host *h, enum host_dir d, const char *path, int fd, struct strbuf *b,
                      char **ret, size_t *ret_len)
{
    h->nreads++;
    if (h->rec) {
        record_links(h, d, path);
        _cleanup_free_ char *real = real_rel_path(h, fd);
        if (real)
            h->rec->file(h->rec->ud, real, strbuf_str(b), b->len);
    }
    if (ret_len)
        *ret_len = b->len;
    *ret = strbuf_steal(b);
    if (!*ret)
        *ret = xstrdup("");
}

/* Open REL under DFD and read it all. With RET_FD the fd is handed over
 * (still open) on success instead of closed. */
static int open_read(struct host *h, enum host_dir d, const char *path, int dfd, const char *rel,
                     char **ret, size_t *ret_len, int *ret_fd)
{
    /* O_NONBLOCK on a recorded tree: a FIFO there would block the open
     * and every read forever; non-blocking it reads as empty (garbage).
     * No fstat() per file: on 384 CPUs it costs a third more time. */
    _cleanup_close_ int fd =
        root_openat(h, dfd, rel, O_RDONLY | O_NOCTTY | (h->live ? 0 : O_NONBLOCK));
    if (fd < 0)
        return fd;
    struct strbuf b = {0};
    int r = read_all(h, d, fd, ret_fd != NULL, &b);
    if (r == -ESPIPE && ret_fd) { /* no pread here: read it once, keep nothing */
        ret_fd = NULL;
        r = read_all(h, d, fd, false, &b);
    }
    if (r < 0)
        return r;
    read_done(h, d, path, fd, &b, ret, ret_len);
    if (ret_fd)
        *ret_fd = TAKE_FD(fd);
    return 0;
}

static bool cache_on(const struct host *h)
{
    return h->cache && !h->rec && h->cache_mode != HOST_CACHE_OFF;
}

static bool is_gone(int r)
{
    return r == -ENOENT || r == -ENODEV || r == -ESTALE;
}

/* A static file: the first read's content or error, until the next drop. */
static int read_static(struct host *h, enum host_dir d, const char *path, int dfd, const char *rel,
                       char **ret, size_t *ret_len)
{
    bool fresh;
    struct cache_ent *e = cache_get(h->cache, CACHE_CONTENT, d, path, &fresh);
    if (!e)
        return open_read(h, d, path, dfd, rel, ret, ret_len, NULL);
    if (fresh || e->refetch) {
        char *data;
        size_t len;
        free(e->data);
        e->data = NULL;
        e->refetch = false;
        e->err = open_read(h, d, path, dfd, rel, &data, &len, NULL);
        if (e->err == 0) {
            e->data = data;
            e->len = len;
        }
    }
    if (e->err < 0)
        return e->err;
    *ret = xmalloc(e->len + 1);
    memcpy(*ret, e->data, e->len + 1);
    if (ret_len)
        *ret_len = e->len;
    return 0;
}

/* A moving file: pread() of the kept fd, or an open that may keep one. A
 * file read before that is now gone marks the cache stale. */
static int read_dynamic(struct host *h, enum host_dir d, const char *path, int dfd, const char *rel,
                        char **ret, size_t *ret_len)
{
    struct host_cache *c = h->cache;
    bool fresh;
    struct cache_ent *e = cache_get(c, CACHE_FD, d, path, &fresh);
    if (!e)
        return open_read(h, d, path, dfd, rel, ret, ret_len, NULL);
    int r;
    if (e->err < 0) /* gone or not applicable (EIO) until the next drop */
        return e->err;
    if (e->fd >= 0) {
        struct strbuf b = {0};
        r = read_all(h, d, e->fd, true, &b);
        if (r == 0) {
            h->nreads++;
            if (ret_len)
                *ret_len = b.len;
            *ret = strbuf_steal(&b);
            if (!*ret)
                *ret = xstrdup("");
            return 0;
        }
        close(e->fd);
        e->fd = -1;
        c->nfds--;
    } else {
        /* live roots only: a recorded tree's file may be replaced (a test's
         * rename) or removed, and an fd kept on it would not see that */
        bool keep = h->live && c->nfds < c->max_fds;
        int fd = -1;
        r = open_read(h, d, path, dfd, rel, ret, ret_len, keep ? &fd : NULL);
        if (r == 0) {
            e->ok = true;
            if (fd >= 0) {
                e->fd = fd;
                c->nfds++;
            }
            return 0;
        }
    }
    if (e->ok && is_gone(r))
        c->stale = true; /* a device or CPU went away: rescan */
    e->ok = false;
    /* A file that is not there, or whose driver says it does not apply
     * (EIO: autosuspend_delay_ms without autosuspend; ENODATA, EINVAL,
     * EOPNOTSUPP), says so until the next drop: no open per sample for
     * it. Other errors (EACCES, EAGAIN) are tried again each time. */
    if (is_gone(r) || r == -EIO || r == -ENODATA || r == -EINVAL || r == -EOPNOTSUPP)
        e->err = r;
    return r;
}

/* A moving file wanted at most every slow_ns: its last content while it
 * is younger than that, else a read_dynamic() whose content is kept. A
 * failed read keeps nothing (the next sample tries again). */
static int read_slow(struct host *h, enum host_dir d, const char *path, int dfd, const char *rel,
                     char **ret, size_t *ret_len)
{
    bool fresh;
    struct cache_ent *e = cache_get(h->cache, CACHE_FD, d, path, &fresh);
    uint64_t now = now_monotonic_ns();
    if (e && e->read_ns && e->data && now - e->read_ns < h->cache->slow_ns) {
        *ret = xmalloc(e->len + 1);
        memcpy(*ret, e->data, e->len + 1);
        if (ret_len)
            *ret_len = e->len;
        return 0;
    }
    size_t len = 0;
    int r = read_dynamic(h, d, path, dfd, rel, ret, &len);
    if (ret_len)
        *ret_len = len;
    e = cache_get(h->cache, CACHE_FD, d, path, &fresh); /* the table may have grown */
    if (!e)
        return r;
    free(e->data);
    e->data = NULL;
    e->read_ns = 0;
    if (r == 0) {
        e->data = xmalloc(len + 1);
        memcpy(e->data, *ret, len + 1);
        e->len = len;
        e->read_ns = now;
    }
    return r;
}

/* A fault stands in for the kernel: a kept file it makes fail as a
 * removed device's would (ENODEV) marks the cache stale, as the kernel's
 * answer does (a recorded tree's unlinked file stays readable). */
static void fault_gone(struct host *h, enum host_dir d, const char *path, int r)
{
    bool fresh;
    struct cache_ent *e = cache_get(h->cache, CACHE_FD, d, path, &fresh);
    if (!e || !e->ok || !is_gone(r))
        return;
    h->cache->stale = true;
    e->ok = false;
    if (e->fd >= 0) {
        close(e->fd);
        e->fd = -1;
        h->cache->nfds--;
    }
}

/* The common read: `path` is the full path under d (for faults, the
 * recorder and messages); the file is opened as `rel` under `dfd`, which
 * is d's fd or a directory handle's (a short path is a cheap lookup). */
static int read_file(struct host *h, enum host_dir d, const char *path, int dfd, const char *rel,
                     char **ret, size_t *ret_len)
{
    struct host_fault *f = h->nfault ? fault_match(h->fault, h->nfault, d, path) : NULL;
    if (f && f->err) {
        if (cache_on(h) && h->cache_mode != HOST_CACHE_STATIC)
            fault_gone(h, d, path, -f->err);
        return -f->err;
    }
    if (f && f->file)
        return host_read(h, HOST_ROOTDIR, f->file, ret, ret_len);
    if (f && f->value) {
        if (ret_len)
            *ret_len = strlen(f->value);
        *ret = xstrdup(f->value);
        return 0;
    }
    if (dfd < 0)
        return dfd;
    if (cache_on(h) && h->cache_mode == HOST_CACHE_SLOW && h->cache->slow_ns)
        return read_slow(h, d, path, dfd, rel, ret, ret_len);
    if (cache_on(h))
        return h->cache_mode == HOST_CACHE_STATIC
                   ? read_static(h, d, path, dfd, rel, ret, ret_len)
                   : read_dynamic(h, d, path, dfd, rel, ret, ret_len);
    return open_read(h, d, path, dfd, rel, ret, ret_len, NULL);
}

void host_cache_enable(struct host *h, unsigned max_fds)
{
    if (!h->cache)
        h->cache = xcalloc(1, sizeof(*h->cache));
    h->cache->max_fds = max_fds;
    h->cache->since_ns = now_monotonic_ns();
}

enum host_cache_mode host_cache_mode(struct host *h, enum host_cache_mode mode)
{
    enum host_cache_mode old = h->cache_mode;
    h->cache_mode = mode;
    return old;
}

void host_cache_drop(struct host *h)
{
    if (!h->cache)
        return;
    cache_clear(h->cache);
    h->cache->since_ns = now_monotonic_ns();
}

void host_cache_slow(struct host *h, uint64_t max_age_ns)
{
    if (h->cache)
        h->cache->slow_ns = max_age_ns;
}

bool host_cache_expire(struct host *h, uint64_t now_ns, uint64_t max_age_ns)
{
    if (!h->cache || (!h->cache->stale && now_ns - h->cache->since_ns < max_age_ns))
        return false;
    host_cache_drop(h);
    return true;
}

void host_cache_put(struct host *h, enum host_dir d, const char *path, const char *value)
{
    bool fresh;
    struct cache_ent *e = h->cache ? cache_get(h->cache, CACHE_CONTENT, d, path, &fresh) : NULL;
    if (!e)
        return;
    free(e->data);
    e->data = xstrdup(value);
    e->len = strlen(value);
    e->err = 0;
    e->refetch = false;
}

const char *host_cache_peek(struct host *h, enum host_dir d, const char *path)
{
    bool fresh;
    struct cache_ent *e = h->cache ? cache_get(h->cache, CACHE_CONTENT, d, path, &fresh) : NULL;
    if (e && fresh)
        e->refetch = true; /* empty: its first static read fills it */
    if (!e || e->err < 0 || e->refetch)
        return NULL;
    return e->data;
}

void host_cache_stats(const struct host *h, struct host_cache_stats *ret)
{
    const struct host_cache *c = h->cache;
    *ret = (struct host_cache_stats){.enabled = c != NULL};
    if (!c)
        return;
    ret->entries = c->n;
    ret->kept_fds = c->nfds;
    ret->max_fds = c->max_fds;
    ret->hits = c->hits;
    ret->misses = c->misses;
    ret->drops = c->drops;
}

int host_read(struct host *h, enum host_dir d, const char *path, char **ret, size_t *ret_len)
{
    return read_file(h, d, path, dirfd_of(h, d), path, ret, ret_len);
}

int host_dir_open(struct host *h, enum host_dir d, const char *path, struct host_dirh *ret)
{
    int dfd = dirfd_of(h, d);
    if (dfd < 0)
        return dfd;
    if (cache_on(h) && h->cache_mode == HOST_CACHE_STATIC) {
        bool fresh;
        struct cache_ent *e = cache_get(h->cache, CACHE_DIR, d, path, &fresh);
        if (e && fresh) {
            e->err = root_openat(h, dfd, path, O_PATH | O_DIRECTORY);
            if (e->err >= 0 && h->cache->nfds < h->cache->max_fds) {
                e->fd = e->err;
                e->err = 0;
                h->cache->nfds++;
            } else if (e->err >= 0) { /* over the budget: opened each time */
                close(e->err);
                e->err = 0;
            }
        }
        if (e && e->err < 0)
            return e->err;
        if (e && e->fd >= 0) {
            *ret = (struct host_dirh){
                .h = h, .d = d, .fd = e->fd, .path = xstrdup(path), .borrowed = true};
            return 0;
        }
    }
    int fd = root_openat(h, dfd, path, O_PATH | O_DIRECTORY);
    if (fd < 0)
        return fd;
    if (h->rec) { /* a replay must find the directory even if no file in it is read */
        record_links(h, d, path);
        _cleanup_free_ char *real = real_rel_path(h, fd);
        if (real)
            h->rec->dir(h->rec->ud, real);
    }
    *ret = (struct host_dirh){.h = h, .d = d, .fd = fd, .path = xstrdup(path)};
    return 0;
}

void host_dir_close(struct host_dirh *dh)
{
    if (dh->fd >= 0 && !dh->borrowed)
        close(dh->fd);
    free(dh->path);
    *dh = (struct host_dirh){.fd = -1};
}

int host_dir_read(struct host_dirh *dh, const char *name, char **ret, size_t *ret_len)
{
    char full[PATH_MAX];
    int n = snprintf(full, sizeof(full), "%s/%s", dh->path, name);
    if (n < 0 || (size_t)n >= sizeof(full))
        return -ENAMETOOLONG;
    return read_file(dh->h, dh->d, full, dh->fd, name, ret, ret_len);
}

int host_dir_read_str(struct host_dirh *dh, const char *name, char **ret)
{
    char *s;
    size_t len;
    int r = host_dir_read(dh, name, &s, &len);
    if (r < 0 || (r = text_ok(s, len)) < 0)
        return r;
    *ret = strip_trailing(s);
    return 0;
}

int host_dir_read_u64(struct host_dirh *dh, const char *name, uint64_t *ret)
{
    char *s;
    size_t len;
    int r = host_dir_read(dh, name, &s, &len);
    if (r < 0 || (r = text_ok(s, len)) < 0)
        return r;
    r = parse_u64(s, ret);
    free(s);
    return r;
}

int host_dir_read_i64(struct host_dirh *dh, const char *name, int64_t *ret)
{
    char *s;
    size_t len;
    int r = host_dir_read(dh, name, &s, &len);
    if (r < 0 || (r = text_ok(s, len)) < 0)
        return r;
    r = parse_i64(s, ret);
    free(s);
    return r;
}

int host_read_str(struct host *h, enum host_dir d, const char *path, char **ret)
{
    char *s;
    size_t len;
    int r = host_read(h, d, path, &s, &len);
    if (r < 0 || (r = text_ok(s, len)) < 0)
        return r;
    *ret = strip_trailing(s);
    return 0;
}

int host_read_u64(struct host *h, enum host_dir d, const char *path, uint64_t *ret)
{
    char *s;
    size_t len;
    int r = host_read(h, d, path, &s, &len);
    if (r < 0 || (r = text_ok(s, len)) < 0)
        return r;
    r = parse_u64(s, ret);
    free(s);
    return r;
}

int host_read_i64(struct host *h, enum host_dir d, const char *path, int64_t *ret)
{
    char *s;
    size_t len;
    int r = host_read(h, d, path, &s, &len);
    if (r < 0 || (r = text_ok(s, len)) < 0)
        return r;
    r = parse_i64(s, ret);
    free(s);
    return r;
}

int host_pread(struct host *h, enum host_dir d, const char *path, void *buf, size_t len,
               uint64_t off)
{
    struct host_fault *f = fault_match(h->fault, h->nfault, d, path);
    if (f && f->err)
        return -f->err;
    _cleanup_close_ int fd = open_at(h, d, path, O_RDONLY | O_NOCTTY);
    if (fd < 0)
        return fd;
    ssize_t n = pread(fd, buf, len, (off_t)off);
    if (n < 0)
        return -errno;
    if ((size_t)n != len)
        return -EIO;
    h->nreads++;
    if (h->rec && off == 0) {
        record_links(h, d, path);
        _cleanup_free_ char *real = real_rel_path(h, fd);
        if (real)
            h->rec->file(h->rec->ud, real, buf, len);
    }
    return 0;
}

static int natural_cmp(const void *a, const void *b)
{
    return strverscmp(*(char *const *)a, *(char *const *)b);
}

static int list_dir(struct host *h, enum host_dir d, const char *path, char ***ret, size_t *ret_n);

static char **copy_list(char *const *v, size_t n)
{
    char **c = xcalloc(n ? n : 1, sizeof(*c));
    for (size_t i = 0; i < n; i++)
        c[i] = xstrdup(v[i]);
    return c;
}

int host_list(struct host *h, enum host_dir d, const char *path, char ***ret, size_t *ret_n)
{
    struct host_fault *f = fault_match(h->fault, h->nfault, d, path);
    if (f && f->err)
        return -f->err;
    if (!cache_on(h) || h->cache_mode != HOST_CACHE_STATIC)
        return list_dir(h, d, path, ret, ret_n);
    bool fresh;
    struct cache_ent *e = cache_get(h->cache, CACHE_LIST, d, path, &fresh);
    if (!e)
        return list_dir(h, d, path, ret, ret_n);
    if (fresh)
        e->err = list_dir(h, d, path, &e->list, &e->nlist);
    if (e->err < 0)
        return e->err;
    *ret = copy_list(e->list, e->nlist);
    *ret_n = e->nlist;
    return 0;
}

static int list_dir(struct host *h, enum host_dir d, const char *path, char ***ret, size_t *ret_n)
{
    int fd = open_at(h, d, path, O_RDONLY | O_DIRECTORY);
    if (fd < 0)
        return fd;
    DIR *dir = fdopendir(fd);
    if (!dir) {
        int r = -errno;
        close(fd);
        return r;
    }
    if (h->rec) {
        record_links(h, d, path);
        _cleanup_free_ char *real = real_rel_path(h, fd);
        if (real)
            h->rec->dir(h->rec->ud, real);
    }
    char **v = NULL;
    size_t n = 0, cap = 0;
    struct dirent *de;
    while ((de = readdir(dir))) {
        if (streq(de->d_name, ".") || streq(de->d_name, ".."))
            continue;
        v = grow_array(v, sizeof(*v), n, &cap);
        v[n++] = xstrdup(de->d_name);
    }
    closedir(dir);
    if (n)
        qsort(v, n, sizeof(*v), natural_cmp);
    *ret = v;
    *ret_n = n;
    return 0;
}

void host_free_list(char **list, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(list[i]);
    free(list);
}

static int readlink_at(struct host *h, enum host_dir d, const char *path, char **ret);

int host_readlink(struct host *h, enum host_dir d, const char *path, char **ret)
{
    if (!cache_on(h) || h->cache_mode != HOST_CACHE_STATIC)
        return readlink_at(h, d, path, ret);
    bool fresh;
    struct cache_ent *e = cache_get(h->cache, CACHE_LINK, d, path, &fresh);
    if (!e)
        return readlink_at(h, d, path, ret);
    if (fresh)
        e->err = readlink_at(h, d, path, &e->data);
    if (e->err < 0)
        return e->err;
    *ret = xstrdup(e->data);
    return 0;
}

static int readlink_at(struct host *h, enum host_dir d, const char *path, char **ret)
{
    int dfd = dirfd_of(h, d);
    if (dfd < 0)
        return dfd;
    char buf[PATH_MAX];
    ssize_t n = readlinkat(dfd, path, buf, sizeof(buf) - 1);
    if (n < 0)
        return -errno;
    buf[n] = '\0';
    if (h->rec)
        record_links(h, d, path);
    *ret = xstrdup(buf);
    return 0;
}

int host_link_name(struct host *h, enum host_dir d, const char *path, char **ret)
{
    _cleanup_free_ char *target = NULL;
    int r = host_readlink(h, d, path, &target);
    if (r < 0)
        return r;
    const char *slash = strrchr(target, '/');
    *ret = xstrdup(slash ? slash + 1 : target);
    return 0;
}

/* A snapshot must answer existence checks as the machine did: record
 * what exists (a file with its content, a directory as a directory). */
static void record_existing(struct host *h, enum host_dir d, const char *path,
                            const struct stat *st)
{
    if (S_ISDIR(st->st_mode)) {
        _cleanup_close_ int fd = open_at(h, d, path, O_PATH | O_DIRECTORY);
        if (fd < 0)
            return;
        record_links(h, d, path);
        _cleanup_free_ char *real = real_rel_path(h, fd);
        if (real)
            h->rec->dir(h->rec->ud, real);
    } else if (S_ISREG(st->st_mode)) {
        _cleanup_free_ char *content = NULL;
        (void)host_read(h, d, path, &content, NULL); /* records it */
    }
}

static int stat_now(struct host *h, enum host_dir d, const char *path, struct stat *st);

/* stat() of a path, confined to the tree like every open; under a static
 * cache only the mode is kept (all that exists and is_dir ask). */
static int stat_at(struct host *h, enum host_dir d, const char *path, struct stat *st)
{
    if (!cache_on(h) || h->cache_mode != HOST_CACHE_STATIC)
        return stat_now(h, d, path, st);
    bool fresh;
    struct cache_ent *e = cache_get(h->cache, CACHE_STAT, d, path, &fresh);
    if (!e)
        return stat_now(h, d, path, st);
    if (fresh) {
        e->err = stat_now(h, d, path, st);
        e->mode = e->err == 0 ? st->st_mode : 0;
    }
    if (e->err < 0)
        return e->err;
    *st = (struct stat){.st_mode = e->mode};
    return 0;
}

static int stat_now(struct host *h, enum host_dir d, const char *path, struct stat *st)
{
    int dfd = dirfd_of(h, d);
    if (dfd < 0)
        return dfd;
    if (h->live)
        return fstatat(dfd, path, st, 0) < 0 ? -errno : 0;
    _cleanup_close_ int fd = root_openat(h, dfd, path, O_PATH);
    if (fd < 0)
        return fd;
    return fstat(fd, st) < 0 ? -errno : 0;
}

bool host_exists(struct host *h, enum host_dir d, const char *path)
{
    struct stat st;
    if (stat_at(h, d, path, &st) < 0)
        return false;
    if (h->rec)
        record_existing(h, d, path, &st);
    return true;
}

bool host_is_dir(struct host *h, enum host_dir d, const char *path)
{
    struct stat st;
    if (stat_at(h, d, path, &st) < 0 || !S_ISDIR(st.st_mode))
        return false;
    if (h->rec)
        record_existing(h, d, path, &st);
    return true;
}

/* A write changes what a static read of the file gives: read it anew. */
static void cache_written(struct host *h, enum host_dir d, const char *path)
{
    bool fresh;
    struct cache_ent *e = h->cache ? cache_get(h->cache, CACHE_CONTENT, d, path, &fresh) : NULL;
    if (e)
        e->refetch = true;
    e = h->cache ? cache_get(h->cache, CACHE_FD, d, path, &fresh) : NULL;
    if (e)
        e->read_ns = 0; /* a slow file: read it again next time */
}

int host_write_raw(struct host *h, enum host_dir d, const char *path, const void *buf, size_t len)
{
    cache_written(h, d, path);
    struct host_fault *f = h->nfault ? fault_match_write(h->fault, h->nfault, d, path) : NULL;
    if (f)
        return -f->err;
    /* A recorded file is replaced, as a sysfs attribute's show() would
     * then show the value; the kernel's files take the write as is. */
    _cleanup_close_ int fd = open_at(h, d, path, O_WRONLY | O_NOCTTY | (h->live ? 0 : O_TRUNC));
    if (fd < 0)
        return fd;
    ssize_t n = write(fd, buf, len);
    if (n < 0)
        return -errno;
    return (size_t)n == len ? 0 : -EIO;
}

int host_write(struct host *h, enum host_dir d, const char *path, const char *value)
{
    size_t len = strlen(value);
    if (h->live || (len && value[len - 1] == '\n'))
        return host_write_raw(h, d, path, value, len);
    /* sysfs shows a value with its newline: a recorded tree must read
     * back as the kernel would after the write. */
    _cleanup_free_ char *line = xasprintf("%s\n", value);
    return host_write_raw(h, d, path, line, len + 1);
}

/* The directory above PATH (relative to the root), opened beneath the
 * root, and the last component of PATH. With CREATE, missing directories
 * are made (0755) one at a time, each in the directory fd before it, so
 * that no link can put them outside the root. */
static int state_parent(struct host *h, const char *path, bool create, const char **ret_base)
{
    const char *slash = strrchr(path, '/');
    *ret_base = slash ? slash + 1 : path;
    if (!slash)
        return root_openat(h, h->fd[HOST_ROOTDIR], ".", O_PATH | O_DIRECTORY);
    _cleanup_free_ char *dir = strndup(path, (size_t)(slash - path));
    if (!dir)
        return -ENOMEM;
    int fd = root_openat(h, h->fd[HOST_ROOTDIR], dir, O_PATH | O_DIRECTORY);
    if (fd != -ENOENT || !create)
        return fd;
    /* make the missing ones, from the top */
    _cleanup_close_ int cur = root_openat(h, h->fd[HOST_ROOTDIR], ".", O_PATH | O_DIRECTORY);
    if (cur < 0)
        return cur;
    for (char *c = dir; *c;) {
        size_t n = strcspn(c, "/");
        char save = c[n];
        c[n] = '\0';
        if (n && mkdirat(cur, c, 0755) < 0 && errno != EEXIST)
            return -errno;
        int next = n ? root_openat(h, cur, c, O_PATH | O_DIRECTORY) : -1;
        if (n && next < 0)
            return next;
        if (n) {
            close(cur);
            cur = next;
        }
        c[n] = save;
        c += n + (save ? 1 : 0);
    }
    return TAKE_FD(cur);
}

int host_state_open(struct host *h, const char *path, int flags, mode_t mode)
{
    if (!*path || path[0] == '/')
        return -EINVAL;
    const char *base;
    _cleanup_close_ int dfd = state_parent(h, path, flags & O_CREAT, &base);
    if (dfd < 0)
        return dfd;
    if (!*base || streq(base, ".") || streq(base, ".."))
        return -EINVAL;
    int fd = openat(dfd, base, flags | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC, mode);
    return fd < 0 ? -errno : fd;
}

int host_state_rename(struct host *h, const char *from, const char *to)
{
    const char *bfrom, *bto;
    _cleanup_close_ int ffd = state_parent(h, from, false, &bfrom);
    if (ffd < 0)
        return ffd;
    _cleanup_close_ int tfd = state_parent(h, to, false, &bto);
    if (tfd < 0)
        return tfd;
    if (renameat(ffd, bfrom, tfd, bto) < 0)
        return -errno;
    /* The rename is durable once its directory is: fsync it. */
    _cleanup_close_ int fd = openat(tfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    return fsync(fd) < 0 ? -errno : 0;
}

int host_state_fsync_dir(struct host *h, const char *path)
{
    const char *base;
    _cleanup_close_ int dfd = state_parent(h, path, false, &base);
    if (dfd < 0)
        return dfd;
    _cleanup_close_ int fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    return fsync(fd) < 0 ? -errno : 0;
}

/* Whether ST may be trusted with state that root acts on: owned by root
 * or by us (a tree of our own under --root), writable by nobody else. */
static char *untrusted_why(const struct stat *st, const char *shown)
{
    if (st->st_uid != 0 && st->st_uid != geteuid())
        return xasprintf("%s is owned by uid %u, not by root: refusing to use it (chown root "
                         "%s, after checking its content)",
                         shown, (unsigned)st->st_uid, shown);
    /* A sticky directory (/tmp) is writable by all, but only an entry's
     * owner may rename or remove it: the next component, checked in turn,
     * is what counts. */
    bool sticky = S_ISDIR(st->st_mode) && (st->st_mode & S_ISVTX);
    if ((st->st_mode & (S_IWGRP | S_IWOTH)) && !sticky)
        return xasprintf("%s is writable by %s (mode %04o): refusing to use it (chmod go-w %s, "
                         "after checking its content)",
                         shown, (st->st_mode & S_IWOTH) ? "others" : "its group",
                         (unsigned)(st->st_mode & 07777), shown);
    return NULL;
}

int host_state_check(struct host *h, const char *path, char **ret_why)
{
    if (!*path || path[0] == '/')
        return -EINVAL;
    _cleanup_free_ char *p = xstrdup(path);
    /* every directory below the root, then the file itself */
    for (char *s = p;; s++) {
        bool end = !*s;
        if (*s != '/' && !end)
            continue;
        char save = *s;
        *s = '\0';
        struct stat st;
        _cleanup_close_ int fd = *p ? root_openat(h, h->fd[HOST_ROOTDIR], p, O_PATH) : -ENOENT;
        if (fd >= 0 && fstat(fd, &st) == 0) {
            _cleanup_free_ char *shown = host_state_display_path(h, p);
            char *why = untrusted_why(&st, shown);
            if (why) {
                if (ret_why)
                    *ret_why = why;
                else
                    free(why);
                return -EPERM;
            }
        } else if (fd != -ENOENT && fd < 0) {
            _cleanup_free_ char *shown = host_state_display_path(h, p);
            if (ret_why)
                *ret_why = xasprintf("cannot check %s: %s", shown, strerror(-fd));
            return fd;
        }
        *s = save;
        if (end || fd == -ENOENT)
            break; /* what does not exist yet is made by us, 0755/0644 */
    }
    return 0;
}

char *host_state_display_path(const struct host *h, const char *path)
{
    return host_display_path(h, HOST_ROOTDIR, path);
}

int host_open_fd(struct host *h, enum host_dir d, const char *path, int flags)
{
    struct host_fault *f = (flags & O_ACCMODE) == O_RDONLY
                               ? fault_match(h->fault, h->nfault, d, path)
                               : fault_match_write(h->fault, h->nfault, d, path);
    if (f && f->err)
        return -f->err;
    return open_at(h, d, path, flags);
}

int host_perf_open(struct host *h, void *attr, pid_t pid, int cpu, int group_fd)
{
    if (!h->live)
        return -ENOTSUP;
    long fd = syscall(SYS_perf_event_open, (struct perf_event_attr *)attr, pid, cpu, group_fd,
                      PERF_FLAG_FD_CLOEXEC);
    return fd < 0 ? -errno : (int)fd;
}

int host_sched_policy(struct host *h, pid_t tid)
{
    if (tid <= 0)
        return -EINVAL;
    if (h->live) {
        int pol = sched_getscheduler(tid);
        /* the kernel ORs in SCHED_RESET_ON_FORK (0x40000000) when set */
        return pol < 0 ? -errno : pol & ~0x40000000;
    }
    _cleanup_free_ char *stat = NULL;
    int r = host_read_strf(h, HOST_PROC, &stat, "%d/stat", (int)tid);
    if (r < 0)
        return r;
    /* comm may hold spaces and parentheses: fields 3.. follow the last ')' */
    const char *p = strrchr(stat, ')');
    if (!p)
        return -EBADMSG;
    p++;
    for (int field = 3; field <= 41; field++) {
        p = strchr(p, ' ');
        if (!p)
            return -EBADMSG;
        p++;
    }
    char *end;
    errno = 0;
    long pol = strtol(p, &end, 10);
    if (end == p || errno || pol < 0 || pol > 255)
        return -EBADMSG;
    return (int)pol;
}

#define TRACEFS_MOUNT "/sys/kernel/tracing"

/* 0 when PATH under d is a directory; its -errno otherwise (-ENOTDIR). */
static int dir_at(struct host *h, enum host_dir d, const char *path)
{
    struct stat st;
    int r = stat_at(h, d, path, &st);
    return r < 0 ? r : S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
}

/* The kernel makes the mount point whenever it has tracing (since 4.1);
 * systemd mounts tracefs at boot, a minimal VM or container may not. */
static int mount_tracefs(struct host *h)
{
    if (mount("nodev", TRACEFS_MOUNT, "tracefs", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
        return -errno;
    h->tracefs_mounted = true;
    int r = dir_at(h, HOST_ROOTDIR, "sys/kernel/tracing/events");
    if (r < 0)
        host_tracefs_unmount(h);
    return r;
}

/* The events directory of a tracing file system the mount table lists,
 * relative to the root; -ENOENT when it lists none, the read's error when
 * there is no readable table (no /proc). */
static int tracing_from_mountinfo(struct host *h, char **ret_events)
{
    _cleanup_free_ char *text = NULL, *dir = NULL;
    size_t len;
    int r = host_read(h, HOST_PROC, "self/mountinfo", &text, &len);
    if (r < 0)
        return r;
    r = mountinfo_find_tracing(text, len, &dir, NULL);
    if (r < 0)
        return r;
    if (r == MOUNTINFO_TRACE_NONE)
        return -ENOENT;
    const char *rel = dir + strspn(dir, "/");
    *ret_events = xasprintf("%s%sevents", rel, *rel ? "/" : "");
    return 0;
}

int host_tracefs_events(struct host *h, char **ret_dir, bool *ret_mounted)
{
    static const char *const dirs[] = {"sys/kernel/tracing/events",
                                       "sys/kernel/debug/tracing/events"};
    if (h->live) {
        char *found = NULL;
        int r = tracing_from_mountinfo(h, &found);
        if (r == 0 && (r = dir_at(h, HOST_ROOTDIR, found)) == 0) {
            *ret_dir = found;
            *ret_mounted = false;
            return 0;
        }
        free(found);
        if (r == -EACCES)
            return r;
        /* none listed, or no table to ask: look, then mount, as below */
    }
    bool mounted = false;
    int r = dir_at(h, HOST_ROOTDIR, dirs[0]), err = r;
    /* our own mount before debugfs: a look into debugfs's "tracing" makes
     * the kernel mount tracefs there, for good (when the mount table was
     * read, neither is mounted by now) */
    if (r < 0 && r != -EACCES && h->live) {
        r = err = mount_tracefs(h);
        mounted = r == 0;
    }
    size_t i = 0;
    if (r < 0 && (r = dir_at(h, HOST_ROOTDIR, dirs[1])) == 0)
        i = 1; /* before 4.1: tracing lives in debugfs */
    if (r < 0)
        return err == -ENOENT ? r : err; /* the mount's error says more */
    *ret_dir = xstrdup(dirs[i]);
    *ret_mounted = mounted;
    return 0;
}

void host_tracefs_unmount(struct host *h)
{
    if (!h->tracefs_mounted)
        return;
    /* EBUSY: someone opened a file there meanwhile; it is theirs now */
    (void)umount2(TRACEFS_MOUNT, UMOUNT_NOFOLLOW);
    h->tracefs_mounted = false;
}

int host_netlink_open(struct host *h, int protocol)
{
    if (!h->live)
        return -ENOTSUP;
    int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, protocol);
    return fd < 0 ? -errno : fd;
}

#define FORMAT_PATH(path, fmt)                           \
    char path[PATH_MAX];                                 \
    do {                                                 \
        va_list ap;                                      \
        va_start(ap, fmt);                               \
        int _n = vsnprintf(path, sizeof(path), fmt, ap); \
        va_end(ap);                                      \
        if (_n < 0 || (size_t)_n >= sizeof(path))        \
            return -ENAMETOOLONG;                        \
    } while (0)

int host_read_strf(struct host *h, enum host_dir d, char **ret, const char *fmt, ...)
{
    FORMAT_PATH(path, fmt);
    return host_read_str(h, d, path, ret);
}

int host_read_u64f(struct host *h, enum host_dir d, uint64_t *ret, const char *fmt, ...)
{
    FORMAT_PATH(path, fmt);
    return host_read_u64(h, d, path, ret);
}

int host_read_i64f(struct host *h, enum host_dir d, int64_t *ret, const char *fmt, ...)
{
    FORMAT_PATH(path, fmt);
    return host_read_i64(h, d, path, ret);
}

bool host_existsf(struct host *h, enum host_dir d, const char *fmt, ...)
{
    char path[PATH_MAX];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(path, sizeof(path), fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof(path))
        return false;
    return host_exists(h, d, path);
}

int host_self_cmdline(char **ret)
{
    char buf[512];
    _cleanup_close_ int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    if (n < 0)
        return -errno;
    while (n > 0 && buf[n - 1] == '\0')
        n--;
    if (n == 0)
        return -ENODATA;
    buf[n] = '\0';
    for (ssize_t i = 0; i < n; i++) /* arguments are NUL-separated */
        if (buf[i] == '\0' || buf[i] == '\n')
            buf[i] = ' ';
    *ret = xstrdup(buf);
    return 0;
}

int host_self_exe(char **ret)
{
    char buf[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf));
    if (n < 0)
        return -errno;
    if (n == 0 || (size_t)n >= sizeof(buf)) /* cut short: no path */
        return -ENAMETOOLONG;
    buf[n] = '\0';
    *ret = xstrdup(buf);
    return 0;
}

int host_self_rss(uint64_t *ret)
{
    /* opened once and re-read with pread: the agent asks every sample */
    static int fd = -1;
    char buf[128];
    if (fd < 0)
        fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
    if (n <= 0)
        return n < 0 ? -errno : -EIO;
    buf[n] = '\0';
    unsigned long long size, resident;
    if (sscanf(buf, "%llu %llu", &size, &resident) != 2)
        return -EINVAL;
    long page = sysconf(_SC_PAGESIZE);
    *ret = (uint64_t)resident * (uint64_t)(page > 0 ? page : 4096);
    return 0;
}
