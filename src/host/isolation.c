#include "isolation.h"

#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/util.h"

#define CPU_DIR "devices/system/cpu"

/* One id, or "N" (the last CPU, ncpu - 1). Leaves *p after it. */
static int parse_id(const char **p, const char *end, unsigned ncpu, unsigned *ret)
{
    if (*p < end && **p == 'N') {
        (*p)++;
        *ret = ncpu - 1;
        return 0;
    }
    if (*p >= end || !isdigit((unsigned char)**p))
        return -EINVAL;
    unsigned long v = 0;
    for (; *p < end && isdigit((unsigned char)**p); (*p)++)
        if ((v = v * 10 + (unsigned long)(**p - '0')) > CPUSET_MAX_CPU)
            return -ERANGE;
    *ret = (unsigned)v;
    return 0;
}

/* "a", "a-b", "all" or "a-b:used/group" / "all:used/group" (lib/bitmap-str.c bitmap_parselist():
 * from a, the first USED of every GROUP ids, up to b). */
static int parse_region(const char **p, const char *end, unsigned ncpu, struct cpuset *set)
{
    unsigned lo, hi, used = 1, group = 1;
    int r;
    bool all = end - *p >= 3 && strncasecmp(*p, "all", 3) == 0;
    if (all) { /* "all" is the region 0-N */
        *p += 3;
        lo = 0;
        hi = ncpu - 1;
    } else {
        if ((r = parse_id(p, end, ncpu, &lo)) < 0)
            return r;
        hi = lo;
    }
    if (all || (*p < end && **p == '-')) {
        if (!all) {
            (*p)++;
            if ((r = parse_id(p, end, ncpu, &hi)) < 0)
                return r;
        }
        if (*p < end && **p == ':') {
            (*p)++;
            if ((r = parse_id(p, end, ncpu, &used)) < 0)
                return r;
            if (*p >= end || **p != '/')
                return -EINVAL;
            (*p)++;
            if ((r = parse_id(p, end, ncpu, &group)) < 0)
                return r;
            if (used == 0 || group == 0 || used > group)
                return -EINVAL;
        }
    }
    if (hi < lo)
        return -EINVAL;
    if (hi >= ncpu)
        return -ERANGE;
    for (unsigned c = lo; c <= hi; c++)
        if ((c - lo) % group < used)
            cpuset_add(set, c);
    return 0;
}

int isolation_parse_cpulist(const char *s, size_t len, unsigned ncpu, struct cpuset *ret)
{
    const char *p = s, *end = s + len;
    if (ncpu == 0 || ncpu > CPUSET_MAX_CPU + 1)
        return -EINVAL;
    struct cpuset set = {0};
    int r = 0;
    while (p < end) {
        if ((r = parse_region(&p, end, ncpu, &set)) < 0)
            break;
        if (p < end && (*p != ',' || ++p == end)) {
            r = -EINVAL; /* trailing garbage, or a trailing comma */
            break;
        }
    }
    if (r < 0) {
        cpuset_free(&set);
        return r;
    }
    *ret = set;
    return 0;
}

/* isolcpus=[flag,...,]LIST: flags are words of letters and '_' followed
 * by ','; the kernel skips unknown ones, so do we. */
static const char *skip_isolcpus_flags(const char *v, const char *end)
{
    for (;;) {
        const char *w = v;
        while (w < end && (isalpha((unsigned char)*w) || *w == '_'))
            w++;
        if (w == v || w >= end || *w != ',')
            return v;
        if (w - v == 1 && *v == 'N')
            return v; /* "N,..." is a CPU list */
        v = w + 1;
    }
}

/* One word of the command line: [start, end). Double quotes group, as in
 * the kernel's next_arg(). */
static const char *next_word(const char *p, const char **ret_start, const char **ret_end)
{
    while (*p && isspace((unsigned char)*p))
        p++;
    *ret_start = p;
    bool quoted = false;
    for (; *p && (quoted || !isspace((unsigned char)*p)); p++)
        if (*p == '"')
            quoted = !quoted;
    *ret_end = p;
    return p;
}

static bool is_param(const char *w, const char *e, const char *name, const char **ret_val)
{
    size_t n = strlen(name);
    if ((size_t)(e - w) < n + 1 || strncmp(w, name, n) != 0 || w[n] != '=')
        return false;
    *ret_val = w + n + 1;
    return true;
}

int isolation_parse_cmdline(const char *cmdline, unsigned ncpu, struct cpuset *ret)
{
    struct cpuset all = {0};
    int bad = 0;
    const char *p = cmdline, *w, *e;
    while (*(p = next_word(p, &w, &e)) || w < e) {
        if (e - w == 2 && w[0] == '-' && w[1] == '-')
            break; /* the rest is init's */
        const char *v;
        bool iso = is_param(w, e, "isolcpus", &v);
        if (!iso && !is_param(w, e, "nohz_full", &v))
            continue;
        const char *ve = e;
        if (ve - v >= 2 && v[0] == '"' && ve[-1] == '"')
            v++, ve--;
        if (iso)
            v = skip_isolcpus_flags(v, ve);
        struct cpuset one;
        if (isolation_parse_cpulist(v, (size_t)(ve - v), ncpu, &one) < 0) {
            bad++;
            continue;
        }
        CPUSET_FOREACH (cpu, &one)
            cpuset_add(&all, (unsigned)cpu);
        cpuset_free(&one);
    }
    *ret = all;
    return bad;
}

static void diag_path(struct host *h, enum host_dir d, struct diags *diags, const char *path, int r,
                      const char *what)
{
    _cleanup_free_ char *p = host_display_path(h, d, path);
    diags_add(diags, p, r, "%s", what ? what : strerror(-r));
}

/* A sysfs cpulist file; absent is empty, "(null)" is empty. */
static void read_sysfs_list(struct host *h, const char *path, struct cpuset *ret,
                            struct diags *diags)
{
    _cleanup_free_ char *s = NULL;
    *ret = (struct cpuset){0};
    int r = host_read_str(h, HOST_SYS, path, &s);
    if (r == -ENOENT)
        return;
    if (r < 0) {
        diag_path(h, HOST_SYS, diags, path, r, NULL);
        return;
    }
    if (strcmp(s, "(null)\n") == 0 || strcmp(s, "(null)") == 0)
        return;
    if ((r = cpuset_parse(s, ret)) < 0) {
        *ret = (struct cpuset){0};
        diag_path(h, HOST_SYS, diags, path, r, "malformed value");
    }
}

static void unite(struct cpuset *into, const struct cpuset *from)
{
    CPUSET_FOREACH (cpu, from)
        cpuset_add(into, (unsigned)cpu);
}

int isolation_read(struct host *h, unsigned ncpu, struct cpu_isolation *ret, struct diags *diags)
{
    struct cpu_isolation iso = {0};
    read_sysfs_list(h, CPU_DIR "/isolated", &iso.isolated, diags);
    read_sysfs_list(h, CPU_DIR "/nohz_full", &iso.nohz_full, diags);

    _cleanup_free_ char *cmd = NULL;
    int r = host_read_str(h, HOST_PROC, "cmdline", &cmd);
    if (r < 0 && r != -ENOENT)
        diag_path(h, HOST_PROC, diags, "cmdline", r, NULL);
    if (r == 0 && ncpu > 0) {
        int bad = isolation_parse_cmdline(cmd, ncpu, &iso.cmdline);
        if (bad > 0)
            diag_path(h, HOST_PROC, diags, "cmdline", -EINVAL,
                      "isolcpus= or nohz_full= with a malformed CPU list (ignored, as the "
                      "kernel does)");
    }
    unite(&iso.all, &iso.isolated);
    unite(&iso.all, &iso.nohz_full);
    unite(&iso.all, &iso.cmdline);
    *ret = iso;
    return 0;
}

void isolation_free(struct cpu_isolation *iso)
{
    if (!iso)
        return;
    cpuset_free(&iso->isolated);
    cpuset_free(&iso->nohz_full);
    cpuset_free(&iso->cmdline);
    cpuset_free(&iso->all);
}
