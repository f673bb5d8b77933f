/* The undo journal: every value watt writes to the kernel is recorded
 * here first, so that `watt restore` (and the agent on exit, and on its
 * next start after a crash) can put every value back, even after a crash
 * or a SIGKILL at any instruction.
 *
 * The journal is a write-ahead log: a text file, one record a line, under
 * the host's root ("var/lib/watt/journal": /var/lib/watt/journal on a live
 * machine, ROOT/var/lib/watt/journal under --root). Before a knob changes,
 * the record {path, old value, new value, time, owner, transaction, boot}
 * is appended and fdatasync()ed; only then is the value written. A record
 * whose write never happened is harmless: restoring it writes the value
 * that is already there.
 *
 *   watt-journal 1
 *   W seq=1 tx=1 t=1764751200123456789 pid=4242 owner=cli dir=sys
 *     path=devices/system/cpu/cpufreq/policy0/scaling_governor
 *     old=powersave%0A new=performance boot=0f1e...-...
 *     crc=1c291ca3                                             (one line)
 *   R seq=2 tx=1 ref=1 shown=2400000 crc=...  the kernel showed another
 *                                             value than written (a clamp)
 *   U seq=3 tx=1 crc=...        transaction 1 was rolled back: ignore it
 *
 * Values are percent-escaped (every byte outside 0x21..0x7e, and '%', as
 * %XX), so a line is printable ASCII. crc is CRC-32 (IEEE) of the line up
 * to the space before "crc=", in lowercase hex. boot= (the kernel's
 * boot_id) and, in a rewritten journal, shown= are optional.
 *
 * The journal can only undo, and only what watt did:
 * - a record is written back only if its path matches a row of the knob
 *   table (knob.h) and its value is one that knob takes; anything else is
 *   refused, named, and kept. The CRC is not a signature.
 * - the journal and the directories above it (below the root) must be
 *   owned by root (or by the caller, on a tree of its own) and writable
 *   by nobody else, or it is refused before anything is written.
 * - a value that changed since watt wrote it (someone else's, or a
 *   reboot's) is left alone and reported, unless forced; records of an
 *   earlier boot are not written (the boot set those files) but moved to
 *   "<journal>.earlier-boot", itself a journal.
 * - a line that fails its checksum or does not parse is never restored
 *   and never lost: a restore moves it to "<journal>.corrupt". A torn
 *   last line (the crash came during the append; its write never
 *   happened) is cut off when the journal is next opened for writing.
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
    char kind; /* 'W' a write, 'R' what the kernel showed after one, 'U' an undo */
    uint64_t seq;
    uint64_t ref; /* R: the seq of its W record */
    uint64_t tx;
    uint64_t time_ns; /* CLOCK_REALTIME when recorded */
    int pid;
    char *owner; /* "cli", "agent"; owned */
    enum host_dir dir;
    char *path;      /* relative to dir; owned */
    char *old_value; /* exactly the bytes read before the write; owned */
    char *new_value; /* exactly the bytes written; owned */
    char *shown;     /* what the kernel showed after the write, when it
                      * was not new_value (an R record); NULL otherwise */
    char *boot;      /* the boot_id when written; NULL: not known */
    unsigned line;   /* line number in the journal file */
};

/* What reading a journal found: the valid records of transactions not
 * rolled back, in order, and one sentence per line that was skipped. */
struct journal_log {
    struct journal_entry *v;
    size_t n;
    char **problems; /* "journal line 7: checksum mismatch; not restored" */
    char **bad;      /* the text of each such line, as it is in the file */
    size_t nproblems;
    char *boot_now; /* this boot's boot_id; NULL: not known */
};

/* Open (creating it and its directory) and lock the journal at PATH,
 * relative to the host's root (NULL: JOURNAL_DEFAULT_PATH). OWNER tags
 * the records this handle writes. A torn last line is cut off. Errors:
 * -EPERM when the journal, its lock or a directory above them may not be
 * trusted (host_state_check(); nothing is created or written), -EBUSY
 * when another tuner holds the lock (ret_err names its pid and command),
 * -EBADMSG when the file is not a journal (its first line is not
 * "watt-journal 1"; nothing is changed). ret_err is one sentence. */
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
 * append the record and fdatasync it, then host_write() NEW_VALUE, and
 * read it back: where the kernel shows another value, an R record says
 * which. The kernel's error is returned as is (-EINVAL, -EPERM, -EROFS):
 * the caller then rolls the transaction back. Reading the old value
 * failing gives that error and writes nothing; so does a value with a
 * NUL inside, a path with "..", or HOST_ROOTDIR (-EINVAL), and a path no
 * knob names or a value that knob does not take (-EPERM). Without
 * journal_begin() a transaction is begun. A refused write keeps its
 * record (restoring it writes what is there); the rollback skips it. */
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
 * appended to or replaced by rename). ret_log owned. A journal that may
 * not be trusted (host_state_check()) gives -EPERM, and ret_err (when not
 * NULL) one sentence. */
int journal_read(struct host *h, const char *path, struct journal_log *ret_log);
int journal_read_err(struct host *h, const char *path, struct journal_log *ret_log, char **ret_err);
void journal_log_free(struct journal_log *l);

/* What a record is now, against the machine. */
enum journal_verdict {
    JOURNAL_OURS,         /* the file shows what watt wrote: restore it */
    JOURNAL_CHANGED,      /* it shows something else: someone changed it since */
    JOURNAL_EARLIER_BOOT, /* written before this boot: the boot set the file */
    JOURNAL_REFUSED,      /* no knob of watt's names it, or takes its value */
    JOURNAL_GONE,         /* the file is gone (device unplugged, CPU offline) */
    JOURNAL_UNREADABLE,   /* the file could not be read (other errors) */
};

/* Judge record E of LOG (the newest record of its path, or one whose
 * newer records were restored). ret_now, when not NULL, gets the value
 * the file shows now, its active word (journal_value_active), or NULL
 * when unreadable; ret_why (not NULL) a short phrase for REFUSED. */
enum journal_verdict journal_judge(struct host *h, const struct journal_log *log,
                                   const struct journal_entry *e, char **ret_now,
                                   const char **ret_why);
/* NULL when E may be written back, else why not ("names no knob of
 * watt's", "'x' is no value cpufreq.governor takes"). */
const char *journal_entry_refusal(const struct journal_entry *e);
/* What the file should show if watt's write is still in force. */
const char *journal_entry_written(const struct journal_entry *e);
/* What a value file means: the bracketed word of a choice list, else the
 * text without trailing whitespace. Owned. */
char *journal_value_active(const char *raw);

/* What a restore did. */
struct journal_restore_report {
    size_t restored;     /* values written back */
    size_t failed;       /* values the kernel refused (kept in the journal) */
    size_t skipped;      /* lines skipped as corrupt (moved to the .corrupt file) */
    size_t gone;         /* files that no longer exist (device unplugged, CPU
                          * offline): the kernel object that held the value
                          * went with it and comes back with its defaults, so
                          * the record is dropped */
    size_t refused;      /* records naming no knob of watt's (kept) */
    size_t changed;      /* values someone else changed since watt wrote them:
                          * left alone, kept (JOURNAL_FORCE writes them) */
    size_t earlier_boot; /* records of an earlier boot: not written, moved
                          * to the .earlier-boot journal */
    char *corrupt_file;  /* display path the corrupt lines went to, or NULL */
    char *boot_file;     /* display path of the .earlier-boot journal, or NULL */
    char **lines;        /* one sentence per failure or skip; owned */
    size_t nlines;
};

enum {
    JOURNAL_DRY_RUN = 1 << 0, /* write nothing; "would ..." lines */
    JOURNAL_FORCE = 1 << 1,   /* also values changed since, and an earlier boot's */
};

/* Put back every value recorded by OWNER (NULL: everyone), newest first,
 * then rewrite the journal (new file, fsync, rename, fsync of the
 * directory) with only the records that were not restored (other owners',
 * the failures, the refused and the changed ones), or empty it (just the
 * header). Each record is judged first (journal_judge): refused ones are
 * never written, whatever FLAGS say; changed ones and an earlier boot's
 * are written only with JOURNAL_FORCE. Corrupt lines and an earlier
 * boot's records are appended to their side files (each fsynced) before
 * the journal is rewritten without them. The exact bytes read are written
 * back, except that on a live machine a choice list ("[default]
 * performance") is written as its selected word (journal_choice_word).
 * An open transaction ends. Returns 0 when everything of OWNER's is
 * back (or was of an earlier boot), -EIO when anything failed, was
 * skipped, refused or left changed (the report says what), another
 * -errno when the journal could not be read or rewritten. */
int journal_restore(struct journal *j, const char *owner, unsigned flags,
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
 * short phrase ("checksum mismatch"). ret->kind says which record; for U
 * and R lines ret->path is NULL (U: ret->tx is the transaction undone;
 * R: ret->ref and ret->shown). */
int journal_parse_line(const char *line, size_t len, struct journal_entry *ret,
                       const char **ret_why);
void journal_entry_clear(struct journal_entry *e);
uint32_t journal_crc32(const void *buf, size_t len);
/* The selected word of a choice list as sysfs shows one ("[default]
 * performance powersave" gives "default"; pcie_aspm's policy), which is
 * what a live restore writes back: the kernel takes the word, not the
 * list. -ENOMSG when VALUE is not a list with one bracketed word. */
int journal_choice_word(const char *value, char **ret);

/* cgroup.subtree_control: the "+x -y" that takes NOW (the controllers it
 * shows) back to OLD; "" when nothing differs. Owned. */
char *journal_controllers_undo(const char *old, const char *now);

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
