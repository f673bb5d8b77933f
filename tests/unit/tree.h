/* Test helper: build small fixture roots in a temporary directory. */
#pragma once

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static inline void tree_mkdirs(const char *path)
{
    char buf[4096];
    snprintf(buf, sizeof(buf), "%s", path);
    for (char *p = buf + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            mkdir(buf, 0755);
            *p = '/';
        }
    mkdir(buf, 0755);
}

static inline char *tree_new(void)
{
    char tmpl[] = "/tmp/watt-test-XXXXXX";
    char *d = mkdtemp(tmpl);
    if (!d)
        abort();
    return strdup(d);
}

/* Write root/rel with the given content, creating parents. */
static inline void tree_write(const char *root, const char *rel, const char *fmt, ...)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", root, rel);
    char *slash = strrchr(path, '/');
    *slash = '\0';
    tree_mkdirs(path);
    *slash = '/';
    FILE *f = fopen(path, "w");
    if (!f)
        abort();
    va_list ap;
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
    fclose(f);
}

static inline void tree_symlink(const char *root, const char *rel, const char *target)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", root, rel);
    char *slash = strrchr(path, '/');
    *slash = '\0';
    tree_mkdirs(path);
    *slash = '/';
    if (symlink(target, path) < 0)
        abort();
}

static inline void tree_free(char *root)
{
    char cmd[4200];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
    if (system(cmd) != 0)
        abort();
    free(root);
}
