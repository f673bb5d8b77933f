/* Fuzz target: the undo journal's parsers (tune/journal.h).
 *
 * Each input is read four ways:
 *  - as a whole journal file by journal_read() (through a private
 *    temporary root, created once per process): accepted files give W
 *    records with safe paths in line order, refused ones -EBADMSG;
 *  - line by line by journal_parse_line() (exact length, no NUL after
 *    it): an accepted record, written again with journal_escape() and a
 *    fresh checksum, parses back to the same fields (a round trip);
 *    a refused one leaves ret untouched and says why;
 *  - by journal_unescape() (refused: -EINVAL; accepted: escaping the
 *    result and unescaping again gives it back) and journal_escape()
 *    (printable output that unescapes to the input);
 *  - by journal_crc32() against a bitwise reference and by
 *    journal_choice_word(). */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz.h"
#include "host/host.h"
#include "tune/journal.h"
#include "tune/knob.h"

static char root_path[4096];
static struct host *host;
static int journal_fd = -1;

static void remove_root(void)
{
    char p[4200];
    host_close(host);
    static const char *const rel[] = {"var/lib/watt/journal", "var/lib/watt", "var/lib", "var",
                                      "sys"};
    for (size_t i = 0; i < sizeof(rel) / sizeof(rel[0]); i++) {
        snprintf(p, sizeof(p), "%s/%s", root_path, rel[i]);
        if (unlink(p) < 0)
            rmdir(p);
    }
    rmdir(root_path);
}

static void setup(void)
{
    if (host)
        return;
    const char *tmp = getenv("TMPDIR");
    snprintf(root_path, sizeof(root_path), "%s/watt-fuzz-journal-XXXXXX",
             tmp && *tmp ? tmp : "/tmp");
    FUZZ_CHECK(mkdtemp(root_path) != NULL);
    char p[4200];
    snprintf(p, sizeof(p), "%s/sys", root_path);
    FUZZ_CHECK(mkdir(p, 0755) == 0);
    FUZZ_CHECK(host_open(root_path, &host) == 0);
    atexit(remove_root);
    journal_fd = host_state_open(host, JOURNAL_DEFAULT_PATH, O_WRONLY | O_CREAT, 0644);
    FUZZ_CHECK(journal_fd >= 0);
}

/* Overwritten in place, not O_TRUNC (see fuzz_fault.c: ext4 flushes). */
static void write_journal(const uint8_t *data, size_t size)
{
    FUZZ_CHECK(size == 0 || pwrite(journal_fd, data, size, 0) == (ssize_t)size);
    FUZZ_CHECK(ftruncate(journal_fd, (off_t)size) == 0);
}

static bool safe_path(const char *p)
{
    return p && *p && *p != '/' && !strstr(p, "//") && strcmp(p, "..") != 0 &&
           strncmp(p, "../", 3) != 0 && !strstr(p, "/../") &&
           !(strlen(p) >= 3 && strcmp(p + strlen(p) - 3, "/..") == 0);
}

static void check_file(const uint8_t *data, size_t size)
{
    write_journal(data, size);
    struct journal_log log = {.n = 77};
    int r = journal_read(host, NULL, &log);
    if (r < 0) {
        FUZZ_CHECK(r == -EBADMSG);
        FUZZ_CHECK(log.n == 77);
        return;
    }
    size_t lines = 0;
    for (size_t i = 0; i < size; i++)
        lines += data[i] == '\n';
    FUZZ_CHECK(log.n + log.nproblems <= (lines ? lines - 1 : 0));
    for (size_t i = 0; i < log.n; i++) {
        FUZZ_CHECK(safe_path(log.v[i].path));
        FUZZ_CHECK(log.v[i].old_value && log.v[i].new_value && log.v[i].owner);
        FUZZ_CHECK(i == 0 || log.v[i].line > log.v[i - 1].line);
    }
    for (size_t i = 0; i < log.nproblems; i++)
        FUZZ_CHECK(strncmp(log.problems[i], "journal line ", 13) == 0);
    struct journal_log orig;
    FUZZ_CHECK(journal_originals(&log, &orig) == 0);
    FUZZ_CHECK(orig.n <= log.n && (log.n == 0) == (orig.n == 0));
    journal_log_free(&orig);
    journal_log_free(&log);
}

static char *reformat(const struct journal_entry *e)
{
    static const char *const dirs[] = {
        [HOST_SYS] = "sys", [HOST_PROC] = "proc", [HOST_DEV] = "dev", [HOST_NVML] = "nvml"};
    char *owner = journal_escape(e->owner), *path = journal_escape(e->path);
    char *old = journal_escape(e->old_value), *new = journal_escape(e->new_value);
    size_t cap = strlen(owner) + strlen(path) + strlen(old) + strlen(new) + 256;
    char *line = malloc(cap);
    FUZZ_CHECK(line != NULL);
    int n = snprintf(line, cap,
                     "W seq=%llu tx=%llu t=%llu pid=%d owner=%s dir=%s path=%s old=%s new=%s",
                     (unsigned long long)e->seq, (unsigned long long)e->tx,
                     (unsigned long long)e->time_ns, e->pid, owner, dirs[e->dir], path, old, new);
    snprintf(line + n, cap - (size_t)n, " crc=%08x", journal_crc32(line, (size_t)n));
    free(owner);
    free(path);
    free(old);
    free(new);
    return line;
}

static void check_line(const char *line, size_t len)
{
    char *copy = malloc(len ? len : 1); /* exact size: ASan sees any overread */
    FUZZ_CHECK(copy != NULL);
    memcpy(copy, line, len);
    struct journal_entry e = {.seq = 77}, again;
    const char *why = NULL;
    int r = journal_parse_line(copy, len, &e, &why);
    free(copy);
    if (r < 0) {
        FUZZ_CHECK(r == -EBADMSG && why && *why && e.seq == 77);
        return;
    }
    if (!e.path) { /* U, or R with what the kernel showed */
        FUZZ_CHECK(!e.old_value && !e.new_value && !e.owner);
        FUZZ_CHECK(e.kind == 'U' ? !e.shown : e.kind == 'R' && e.shown);
        journal_entry_clear(&e);
        return;
    }
    FUZZ_CHECK(safe_path(e.path));
    FUZZ_CHECK(e.dir == HOST_SYS || e.dir == HOST_PROC || e.dir == HOST_DEV || e.dir == HOST_NVML);
    /* what the knob table lets a restore write: no "..", no "." or empty
     * component, printable names only, never under dev/ */
    if (!journal_entry_refusal(&e)) {
        FUZZ_CHECK(e.dir != HOST_DEV && !strstr(e.path, "/./") && strncmp(e.path, "./", 2) != 0);
        for (const char *c = e.path; *c; c++)
            FUZZ_CHECK(*c > 0x20 && *c < 0x7f);
        FUZZ_CHECK(knob_value_ok(knob_find(e.dir, e.path), e.old_value));
    }
    char *l2 = reformat(&e);
    FUZZ_CHECK(journal_parse_line(l2, strlen(l2), &again, &why) == 0);
    FUZZ_CHECK(again.seq == e.seq && again.tx == e.tx && again.time_ns == e.time_ns &&
               again.pid == e.pid && again.dir == e.dir);
    FUZZ_CHECK(!strcmp(again.owner, e.owner) && !strcmp(again.path, e.path) &&
               !strcmp(again.old_value, e.old_value) && !strcmp(again.new_value, e.new_value));
    free(l2);
    journal_entry_clear(&again);
    journal_entry_clear(&e);
}

static uint32_t crc_reference(const uint8_t *d, size_t n)
{
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++) {
        c ^= d[i];
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1)));
    }
    return ~c;
}

static void check_escape(const uint8_t *data, size_t size)
{
    char *copy = malloc(size ? size : 1), *u = (char *)0x1;
    FUZZ_CHECK(copy != NULL);
    memcpy(copy, data, size);
    int r = journal_unescape(copy, size, &u);
    free(copy);
    if (r < 0) {
        FUZZ_CHECK(r == -EINVAL && u == (char *)0x1);
    } else {
        char *e = journal_escape(u), *u2;
        FUZZ_CHECK(strlen(e) <= size);
        FUZZ_CHECK(journal_unescape(e, strlen(e), &u2) == 0 && !strcmp(u, u2));
        free(e);
        free(u2);
        free(u);
    }
    char *s = fuzz_strndup(data, size), *e = journal_escape(s), *back;
    for (const char *c = e; *c; c++)
        FUZZ_CHECK(*c >= 0x21 && *c <= 0x7e);
    FUZZ_CHECK(journal_unescape(e, strlen(e), &back) == 0 && !strcmp(back, s));
    char *word;
    if (journal_choice_word(s, &word) == 0) {
        FUZZ_CHECK(*word && !strpbrk(word, " []\n"));
        FUZZ_CHECK(strstr(s, word) != NULL);
        free(word);
    }
    free(back);
    free(e);
    free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    setup();
    check_file(data, size);
    const char *p = (const char *)data, *end = p + size;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
        check_line(p, len);
        p += len + 1;
    }
    check_escape(data, size);
    FUZZ_CHECK(journal_crc32(data, size) == crc_reference(data, size));
    return 0;
}
