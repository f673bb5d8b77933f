/* The undo journal: every value watt writes to the kernel is recorded
 * here first, so that `watt restore` (and the agent on exit, and on its
 * next start after a crash) can put every value back, even after a crash
 * or a SIGKILL at any instruction.
 *
 * The journal is a write-ahead log: a text file, one record a line, under
 * the host's root ("var/lib/watt/journal": /var/lib/watt/journal on a live
 * machine, ROOT/var/lib/watt/journal under --root). Before a knob changes,
 * the record {path, old value, new value, time, owner, transaction} is
 * appended and fdatasync()ed; only then is the value written. A record
 * whose write never happened is harmless: restoring it writes the value
 * that is already there.
 *
 *   watt-journal 1
 *   W seq=1 tx=1 t=1764751200123456789 pid=4242 owner=cli dir=sys
 *     path=devices/system/cpu/cpufreq/policy0/scaling_governor
 *     old=powersave%0A new=performance crc=1c291ca3          (one line)
 *   U seq=2 tx=1 crc=...        transaction 1 was rolled back: ignore it
 *
 * Values are percent-escaped (every byte outside 0x21..0x7e, and '%', as
 * %XX), so a line is printable ASCII. crc is CRC-32 (IEEE) of the line up
 * to the space before "crc=", in lowercase hex. A line that fails its
 * checksum or does not parse is reported and skipped, never restored: a
 * torn last line (the crash came during the append) is truncated away when
 * the journal is next opened for writing; its write never happened.
 *
 * A lock (flock on "var/lib/watt/journal.lock", holding the pid and
 * command line of its holder) makes a second tuner refuse at once.
 *
 * Records go to the file in the order of the writes; a SIGKILL at any
 * point leaves either no record (nothing was written), a record whose
 * write did not happen (restoring it is harmless), or a record and its
 * write. Restoring newest first then gives the original values. The kill
 * test (tests/cli/test_tune_journal.py) checks exactly this at every
 * crash point (journal_crash_point() below). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "host/host.h"

#define JOURNAL_DEFAULT_PATH "var/lib/watt/journal" /* relative to the root */

struct journal; /* an open, locked journal */

struct journal_entry {
    uint64_t seq;
    uint64_t tx;
    uint64_t time_ns; /* CLOCK_REALTIME when recorded */
    int pid;
    char *owner; /* "cli", "agent"; owned */
    enum host_dir dir;
    char *path;      /* relative to dir; owned */
    char *old_value; /* exactly the bytes read before the write; owned */
    char *new_value; /* exactly the bytes written; owned */
    unsigned line;   /* line number in the journal file */
};

/* What reading a journal found: the valid records of transactions not
 * rolled back, in order, and one sentence per line that was skipped. */
struct journal_log {
    struct journal_entry *v;
    size_t n;
    char **problems; /* "journal line 7: checksum mismatch; not restored" */
    size_t nproblems;
};

/* Open (creating it and its directory) and lock the journal at PATH,
 * relative to the host's root (NULL: JOURNAL_DEFAULT_PATH). OWNER tags
 * the records this handle writes. A torn last line is cut off. Errors:
 * -EBUSY when another tuner holds the lock (ret_err names its pid and
 * command), -EBADMSG when the file is not a journal (its first line is
 * not "watt-journal 1"; nothing is changed). ret_err is one sentence. */
int journal_open(struct host *h, const char *path, const char *owner, struct journal **ret,
                 char **ret_err);
/* Unlock and close. Never changes the file. */
void journal_close(struct journal *j);
/* The display path of the journal file ("/var/lib/watt/journal"). */
const char *journal_path(const struct journal *j);

/* Start a transaction: the changes until journal_rollback() or the next
 * journal_begin() are undone together. */
void journal_begin(struct journal *j);
/* Change one value: read the current value (ret_old, owned, may be NULL),
 * append the record and fdatasync it, then host_write() NEW_VALUE. The
 * kernel's error is returned as is (-EINVAL, -EPERM, -EROFS): the caller
 * then rolls the transaction back. Reading the old value failing gives
 * that error and writes nothing; so does a value with a NUL inside, a
 * path with "..", or HOST_ROOTDIR (-EINVAL). Without journal_begin() a
 * transaction is begun. A refused write keeps its record (restoring it
 * writes what is there); the rollback skips it. */
int journal_set(struct journal *j, enum host_dir d, const char *path, const char *new_value,
                char **ret_old);
/* Undo the current transaction: write back every old value in reverse
 * order, then append a U record so restore ignores it. When no record
 * is live afterwards (and no line was corrupt), the file is reset to its
 * header, so a guard that holds and releases all day does not grow it.
 * Returns 0, or the first error (every value is still tried; ret_err
 * lists what failed, and those records stay live for `watt restore`). */
int journal_rollback(struct journal *j, char **ret_err);

/* Read and check every record (no lock needed: the file is only ever
 * appended to or replaced by rename). ret_log owned. */
int journal_read(struct host *h, const char *path, struct journal_log *ret_log);
void journal_log_free(struct journal_log *l);

/* What a restore did. */
struct journal_restore_report {
    size_t restored; /* values written back */
    size_t failed;   /* values the kernel refused (kept in the journal) */
    size_t skipped;  /* lines skipped as corrupt */
    size_t gone;     /* files that no longer exist (device unplugged, CPU
                      * offline): the kernel object that held the value
                      * went with it and comes back with its defaults, so
                      * the record is dropped */
    char **lines;    /* one sentence per failure or skip; owned */
    size_t nlines;
};

/* Put back every value recorded by OWNER (NULL: everyone), newest first,
 * then rewrite the journal (new file, fsync, rename, fsync of the
 * directory) with only the records that were not restored (other owners'
 * and the failures), or empty it (just the header). Corrupt lines are
 * reported once and dropped: never restored, never written back. The
 * exact bytes read are written back, except that on a live machine a
 * choice list ("[default] performance") is written as its selected word
 * (journal_choice_word). DRY_RUN writes nothing; its report has one
 * "would restore PATH to 'VALUE'" line per value. An open transaction
 * ends. Returns 0 when everything was restored, -EIO when anything
 * failed or was skipped (the report says what), another -errno when the
 * journal could not be read or rewritten. */
int journal_restore(struct journal *j, const char *owner, bool dry_run,
                    struct journal_restore_report *ret);
void journal_restore_report_free(struct journal_restore_report *r);

/* For `watt tune --status`: per path, the original value (the old value
 * of its first record). ret owned: copies of those entries, in
 * first-record order, no problems (free with journal_log_free). */
int journal_originals(const struct journal_log *log, struct journal_log *ret);

/* Pure helpers (fuzz targets). */
/* Percent-escape as above; owned. */
char *journal_escape(const char *s);
/* The inverse; -EINVAL on a bad escape or a byte outside 0x21..0x7e. */
int journal_unescape(const char *s, size_t len, char **ret);
/* One line (without its newline) into *ret; -EBADMSG when it is not a
 * valid record (bad checksum, missing field, garbage), with ret_why a
 * short phrase ("checksum mismatch"). For U lines ret->path is NULL and
 * ret->tx is the transaction undone. */
int journal_parse_line(const char *line, size_t len, struct journal_entry *ret,
                       const char **ret_why);
void journal_entry_clear(struct journal_entry *e);
uint32_t journal_crc32(const void *buf, size_t len);
/* The selected word of a choice list as sysfs shows one ("[default]
 * performance powersave" gives "default"; pcie_aspm's policy), which is
 * what a live restore writes back: the kernel takes the word, not the
 * list. -ENOMSG when VALUE is not a list with one bracketed word. */
int journal_choice_word(const char *value, char **ret);

/* Crash-point injection for the kill test: when $WATT_TUNE_CRASH_AT is N
 * (read once), the N-th crash point reached raises SIGKILL. The points:
 * before and after every append, after its fdatasync, before and after
 * every host_write (5 per journal_set, 2 per value rolled back or
 * restored), and before and after the rename of a rewrite. Creating the
 * journal's header is not one, so a run's count does not depend on
 * whether the file existed. With $WATT_TUNE_CRASH_COUNT_FILE set, the
 * number of points passed is written there at exit(), so a test learns
 * how many there are. Called by journal.c; a counter bump otherwise. */
void journal_crash_point(const char *what);
