/* Internals of the undo journal shared by journal.c (format),
 * journal_write.c (the open journal) and journal_restore.c. Not for use
 * outside them. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "host/host.h"
#include "tune/journal.h"

#define JOURNAL_HEADER     "watt-journal 1"
#define JOURNAL_MAX_SIZE   (64u << 20) /* bytes; a journal is a few KiB */
#define JOURNAL_CRC_SUFFIX 13          /* " crc=" and 8 hex digits */

/* A change of the current transaction, for journal_rollback(). */
struct journal_change {
    struct journal_entry e;
    bool applied; /* host_write() succeeded: roll it back */
};

struct journal {
    struct host *h;
    char *path;      /* relative to the root */
    char *tmp_path;  /* "<path>.tmp": the rewrite before its rename */
    char *display;   /* "/var/lib/watt/journal" */
    char *owner;     /* tags this handle's records */
    char *boot;      /* this boot's boot_id, for the records; NULL: unknown */
    int fd;          /* the journal, O_RDWR | O_APPEND */
    int lock_fd;     /* "<path>.lock", flock()ed */
    uint64_t size;   /* bytes in the file: where a failed append is cut back to */
    uint64_t seq;    /* the last record's number */
    uint64_t tx;     /* the last transaction's number */
    uint64_t cur_tx; /* the open transaction; 0 when none */
    struct journal_change *cur;
    size_t ncur, capcur;
    size_t live;      /* W records in the file not rolled back */
    size_t nproblems; /* corrupt lines found at open: keep them for restore */
    bool broken;      /* a failed append could not be cut back */
};

/* What a scan of the file found besides the log. */
struct journal_scan {
    uint64_t max_seq, max_tx;
    size_t complete; /* bytes up to the last newline: a torn tail is cut there */
};

/* "sys", "proc", "dev"; NULL for other directories. */
const char *journal_dir_word(enum host_dir d);
/* A path a record may name: relative, no "..", no empty component. */
bool journal_path_ok(const char *p);
/* The line for a record, with its checksum and newline. Owned. */
char *journal_format_record(const struct journal_entry *e);
/* Parse a journal's bytes. -EBADMSG when the first line is not the
 * header. A last line without its newline is left out (torn). */
int journal_parse_buffer(const char *buf, size_t len, struct journal_log *ret,
                         struct journal_scan *sc);
/* A decimal number of LEN bytes (no sign, at most 20 digits). */
int journal_parse_num(const char *s, size_t len, uint64_t *ret);
/* The whole file into memory, from an open fd. */
int journal_read_fd(int fd, char **ret, size_t *ret_len);
/* This boot's boot_id, or NULL (journal.h: boot_now). Owned. */
char *journal_boot_id(struct host *h);

int journal_write_all(int fd, const char *buf, size_t len);
/* Append E (its seq is set) and make it durable. */
int journal_append_record(struct journal *j, struct journal_entry *e);
/* Replace the file by the header, KEEP (in order) and the RAW lines
 * (corrupt ones that could not be moved aside), atomically. */
int journal_rewrite(struct journal *j, const struct journal_entry *keep, size_t nkeep,
                    char *const *raw, size_t nraw);
/* Write E's old value back (a choice list as its word on a live root). */
int journal_write_back(struct host *h, const struct journal_entry *e);
char *journal_describe_failure(struct host *h, const struct journal_entry *e, int err);
void journal_clear_changes(struct journal *j);
void journal_add_line(char ***lines, size_t *n, size_t *cap, char *line);
