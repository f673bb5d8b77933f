/* Opening beneath a directory (beneath.h).
 *
 * openat2(2) does it in the kernel. The walk below does what it does for
 * kernels without it: each component is opened with O_PATH | O_NOFOLLOW
 * relative to the directory before it (an fd, so nothing can be swapped
 * in between), a symlink is read as text and spliced into what is left
 * of the path, ".." pops a directory and may not pop DFD itself. A link
 * is never followed by the kernel, only read: a magic link of /proc
 * ("root" -> "/", "fd/3" -> "pipe:[7]") reads as text that either starts
 * with "/" (refused, or in IN_ROOT mode a restart at DFD) or names no
 * file, so it can never jump anywhere. */
#include "beneath.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/util.h"

#define WALK_MAX_LINKS  40   /* as the kernel's MAXSYMLINKS */
#define WALK_MAX_DEPTH  256  /* directories below DFD; sysfs paths are ~15 deep */
#define OPENAT2_RETRIES 1000 /* each a path walk: microseconds */

bool beneath_have_openat2(void)
{
    static int have = -1; /* -1: not probed yet */
    int v = __atomic_load_n(&have, __ATOMIC_RELAXED);
    if (v >= 0)
        return v;
    const char *no = getenv("WATT_HOST_NO_OPENAT2");
    if (no && streq(no, "1")) {
        v = 0;
    } else {
        struct open_how how = {.flags = O_PATH | O_CLOEXEC, .resolve = RESOLVE_NO_MAGICLINKS};
        long fd = syscall(SYS_openat2, AT_FDCWD, "/", &how, sizeof(how));
        v = fd >= 0;
        if (fd >= 0)
            close((int)fd);
    }
    __atomic_store_n(&have, v, __ATOMIC_RELAXED);
    return v;
}

struct walk {
    int base;   /* DFD, borrowed */
    int *stack; /* directories entered below base, owned */
    size_t depth;
    char *rest; /* what is left of the path, owned */
};

static int walk_cur(const struct walk *w)
{
    return w->depth ? w->stack[w->depth - 1] : w->base;
}

static void walk_pop_all(struct walk *w)
{
    while (w->depth)
        close(w->stack[--w->depth]);
}

/* A link met at component COMP (in directory CUR, or the fd LFD of the
 * link itself when >= 0): its target followed by what came after. */
static int splice_link(struct walk *w, int cur, const char *comp, int lfd, const char *after,
                       enum beneath_mode how, unsigned *links)
{
    char target[PATH_MAX];
    ssize_t n = lfd >= 0 ? readlinkat(lfd, "", target, sizeof(target) - 1)
                         : readlinkat(cur, comp, target, sizeof(target) - 1);
    if (n < 0)
        return -errno;
    if (++*links > WALK_MAX_LINKS)
        return -ELOOP;
    target[n] = '\0';
    if (target[0] == '/') {
        if (how == BENEATH_STRICT)
            return -EXDEV;
        walk_pop_all(w); /* IN_ROOT: "/" is DFD */
    }
    char *next = xasprintf("%s%s%s", target, *after ? "/" : "", after);
    free(w->rest);
    w->rest = next;
    return 0;
}

/* Enter directory COMP of the current one, or splice it if it is a link. */
static int walk_enter(struct walk *w, const char *comp, const char *after, enum beneath_mode how,
                      unsigned *links)
{
    int cur = walk_cur(w);
    _cleanup_close_ int fd = openat(cur, comp, O_PATH | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    struct stat st;
    if (fstat(fd, &st) < 0)
        return -errno;
    if (S_ISLNK(st.st_mode))
        return splice_link(w, cur, comp, fd, after, how, links);
    if (!S_ISDIR(st.st_mode))
        return -ENOTDIR;
    if (w->depth == WALK_MAX_DEPTH)
        return -ENAMETOOLONG;
    w->stack[w->depth++] = TAKE_FD(fd);
    char *next = xstrdup(after);
    free(w->rest);
    w->rest = next;
    return 0;
}

/* Open the last component; 1 when it was a link that has been spliced
 * (go on walking), the fd otherwise. */
static int walk_last(struct walk *w, const char *comp, int flags, mode_t mode, bool nofollow,
                     enum beneath_mode how, unsigned *links)
{
    int cur = walk_cur(w);
    int fd = openat(cur, comp, flags | O_NOFOLLOW, mode);
    struct stat st;
    if (fd >= 0) {
        /* O_PATH | O_NOFOLLOW opens a link itself: follow it unless asked not to */
        if (!(flags & O_PATH) || nofollow || fstat(fd, &st) < 0 || !S_ISLNK(st.st_mode))
            return fd;
        close(fd);
    } else {
        int err = -errno;
        if (fstatat(cur, comp, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISLNK(st.st_mode))
            return err;
        if (nofollow)
            return -ELOOP;
    }
    int r = splice_link(w, cur, comp, -1, "", how, links);
    return r < 0 ? r : 1;
}

int beneath_walk(int dfd, const char *path, int flags, mode_t mode, enum beneath_mode how)
{
    if (!path || !*path)
        return -ENOENT;
    if (path[0] == '/' && how == BENEATH_STRICT)
        return -EXDEV;
    bool nofollow = flags & O_NOFOLLOW;
    flags = (flags & ~O_NOFOLLOW) | O_CLOEXEC;
    int stack[WALK_MAX_DEPTH];
    struct walk w = {.base = dfd, .stack = stack, .rest = xstrdup(path)};
    unsigned links = 0;
    int r;
    for (;;) {
        char *p = w.rest;
        while (*p == '/')
            p++;
        if (!*p) { /* "", or a path that ended in "/" or "..": the directory itself */
            r = openat(walk_cur(&w), ".", flags, mode);
            r = r < 0 ? -errno : r;
            break;
        }
        size_t n = strcspn(p, "/");
        _cleanup_free_ char *comp = strndup(p, n);
        if (!comp) {
            r = -ENOMEM;
            break;
        }
        const char *after = p + n;
        bool last = true;
        for (const char *a = after; *a; a++)
            if (*a != '/')
                last = false;
        if (streq(comp, ".") || streq(comp, "..")) {
            if (streq(comp, "..") && w.depth)
                close(w.stack[--w.depth]);
            else if (streq(comp, "..") && how == BENEATH_STRICT) {
                r = -EXDEV;
                break;
            }
            char *next = xstrdup(after);
            free(w.rest);
            w.rest = next;
            continue;
        }
        if (!last || *after) { /* "dir/..." or "dir/": must be a directory */
            if (last) {        /* a trailing slash: enter, then open "." */
                r = walk_enter(&w, comp, "", how, &links);
            } else {
                r = walk_enter(&w, comp, after + 1, how, &links);
            }
            if (r < 0)
                break;
            continue;
        }
        r = walk_last(&w, comp, flags, mode, nofollow, how, &links);
        if (r != 1)
            break;
    }
    walk_pop_all(&w);
    free(w.rest);
    return r;
}

int beneath_open(int dfd, const char *path, int flags, mode_t mode, enum beneath_mode how)
{
    flags |= O_CLOEXEC;
    if (!(flags & O_CREAT))
        mode = 0; /* openat2() refuses a mode it would not use */
    if (!beneath_have_openat2())
        return beneath_walk(dfd, path, flags, mode, how);
    struct open_how oh = {
        .flags = (uint64_t)flags,
        .mode = mode,
        .resolve =
            (how == BENEATH_IN_ROOT ? RESOLVE_IN_ROOT : RESOLVE_BENEATH) | RESOLVE_NO_MAGICLINKS,
    };
    /* EAGAIN: a rename or mount anywhere on the system while a ".." was
     * resolved (a sysfs link's "../../devices/..."); the kernel cannot
     * vouch for the walk and asks for a retry (openat2(2)). Not the
     * file's error: taken as one, a busy machine made files read as
     * missing at random (the tune dry-run nondeterminism). */
    for (int tries = 0;; tries++) {
        long fd = syscall(SYS_openat2, dfd, path, &oh, sizeof(oh));
        if (fd >= 0)
            return (int)fd;
        if (errno != EAGAIN || tries == OPENAT2_RETRIES)
            return -errno;
    }
}
