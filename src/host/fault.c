#include "fault.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/parse.h"
#include "base/util.h"

static const struct {
    const char *name;
    int err;
} errnos[] = {
    {"EACCES", EACCES}, {"EPERM", EPERM},     {"EIO", EIO},
    {"ENOENT", ENOENT}, {"ENODATA", ENODATA}, {"EINVAL", EINVAL},
    {"EBUSY", EBUSY},   {"ENODEV", ENODEV},   {"EROFS", EROFS},
};

static int cmp_fault(const void *a, const void *b)
{
    const struct host_fault *x = a, *y = b;
    if (x->dir != y->dir)
        return (int)x->dir - (int)y->dir;
    int c = strcmp(x->path, y->path);
    if (c)
        return c;
    if (x->write != y->write)
        return (int)x->write - (int)y->write;
    return (x->order > y->order) - (x->order < y->order);
}

/* One option after the action: "from=N" or "op=read|write", each once. */
static int parse_option(const char *opt, struct host_fault *f, bool *seen_from, bool *seen_op)
{
    if (strncmp(opt, "from=", 5) == 0 && !*seen_from) {
        uint64_t from;
        if (parse_u64(opt + 5, &from) < 0 || from == 0 || from > 1000000)
            return -EBADMSG;
        f->from = (unsigned)from;
        *seen_from = true;
        return 0;
    }
    if (strncmp(opt, "op=", 3) == 0 && !*seen_op) {
        if (streq(opt + 3, "write"))
            f->write = true;
        else if (!streq(opt + 3, "read"))
            return -EBADMSG;
        *seen_op = true;
        return 0;
    }
    return -EBADMSG;
}

static int parse_fault(char *line, struct host_fault *f)
{
    char *path = strtok(line, " \t");
    char *action = strtok(NULL, " \t");
    if (!path || !action)
        return -EBADMSG;
    *f = (struct host_fault){.from = 1};
    static const char *const prefixes[] = {"sys/", "proc/", "dev/"};
    bool found = false;
    for (int d = 0; d < 3; d++) {
        size_t l = strlen(prefixes[d]);
        if (strncmp(path, prefixes[d], l) == 0) {
            f->dir = (enum host_dir)d;
            f->path = xstrdup(path + l);
            found = true;
        }
    }
    if (!found)
        return -EBADMSG;
    if (action[0] == '=') {
        f->value = xasprintf("%s\n", action + 1);
    } else if (action[0] == '@' && action[1] && action[1] != '/' && !strstr(action, "..")) {
        f->file = xstrdup(action + 1);
    } else {
        for (size_t i = 0; i < ARRAY_SIZE(errnos); i++)
            if (streq(action, errnos[i].name))
                f->err = errnos[i].err;
        if (!f->err)
            goto bad;
    }
    bool seen_from = false, seen_op = false;
    for (char *opt; (opt = strtok(NULL, " \t"));)
        if (parse_option(opt, f, &seen_from, &seen_op) < 0)
            goto bad;
    if (f->write && !f->err) /* a write has no value to replace */
        goto bad;
    return 0;
bad:
    free(f->path);
    free(f->value);
    free(f->file);
    return -EBADMSG;
}

int fault_load(int rootfd, struct host_fault **ret, size_t *ret_n)
{
    *ret = NULL;
    *ret_n = 0;
    int fd = openat(rootfd, "watt-faults", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? 0 : -errno;
    _cleanup_fclose_ FILE *fp = fdopen(fd, "r");
    if (!fp) {
        close(fd);
        return -errno;
    }
    struct host_fault *v = NULL;
    size_t n = 0, cap = 0;
    _cleanup_free_ char *line = NULL;
    size_t linecap = 0;
    while (getline(&line, &linecap, fp) > 0) { /* any length: no split lines */
        strip_trailing(line);
        const char *s = skip_space(line);
        if (!*s || *s == '#')
            continue;
        v = grow_array(v, sizeof(*v), n, &cap);
        int r = parse_fault(line, &v[n]);
        if (r < 0) {
            fault_free(v, n);
            return r;
        }
        v[n].order = (unsigned)n;
        n++;
    }
    /* Sorted for bsearch; equal paths and operations stay in line order. */
    if (n)
        qsort(v, n, sizeof(*v), cmp_fault);
    *ret = v;
    *ret_n = n;
    return 0;
}

static struct host_fault *match(struct host_fault *v, size_t n, enum host_dir d, const char *path,
                                bool write)
{
    size_t lo = 0, hi = n;
    while (lo < hi) { /* the first entry not below (d, path, write) */
        size_t mid = lo + (hi - lo) / 2;
        int c = v[mid].dir != d ? (int)v[mid].dir - (int)d : strcmp(v[mid].path, path);
        if (!c)
            c = (int)v[mid].write - (int)write;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == n || v[lo].dir != d || !streq(v[lo].path, path) || v[lo].write != write)
        return NULL;
    v[lo].seen++;
    return v[lo].seen >= v[lo].from ? &v[lo] : NULL;
}

struct host_fault *fault_match(struct host_fault *v, size_t n, enum host_dir d, const char *path)
{
    return match(v, n, d, path, false);
}

struct host_fault *fault_match_write(struct host_fault *v, size_t n, enum host_dir d,
                                     const char *path)
{
    return match(v, n, d, path, true);
}

void fault_free(struct host_fault *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(v[i].path);
        free(v[i].value);
        free(v[i].file);
    }
    free(v);
}
