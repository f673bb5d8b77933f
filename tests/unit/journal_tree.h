/* Test helper for the undo journal's tests: a small tree with a governor,
 * an EPP and the writeback interval, its files as strings, and a journal
 * opened on it. Include after cmocka.h. */
#pragma once

#include "tree.h"
#include "tune/journal.h"

#define GOV  "devices/system/cpu/cpufreq/policy0/scaling_governor"
#define EPP  "devices/system/cpu/cpufreq/policy0/energy_performance_preference"
#define WB   "sys/vm/dirty_writeback_centisecs"
#define JRNL "var/lib/watt/journal"

static inline char *make_root(void)
{
    char *root = tree_new();
    tree_write(root, "sys/" GOV, "powersave\n");
    tree_write(root, "sys/" EPP, "balance_power\n");
    tree_write(root, "proc/" WB, "500\n");
    return root;
}

/* A file under ROOT as a string (owned), NULL when missing. */
static inline char *slurp(const char *root, const char *rel)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", root, rel);
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    char *buf = calloc(1, 1 << 16);
    size_t n = fread(buf, 1, (1 << 16) - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static inline void assert_file(const char *root, const char *rel, const char *want)
{
    char *got = slurp(root, rel);
    assert_non_null(got);
    assert_string_equal(got, want);
    free(got);
}

static inline struct journal *open_journal_as(struct host *h, const char *owner)
{
    struct journal *j = NULL;
    char *err = NULL;
    int r = journal_open(h, NULL, owner, &j, &err);
    if (r < 0)
        fail_msg("journal_open: %s", err);
    return j;
}
