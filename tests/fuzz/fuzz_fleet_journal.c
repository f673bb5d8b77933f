/* Fuzz target: fleet/control/control.h, the fleet controller's journal
 * (ctl_journal_open() of state_dir/journal, written to a private temporary
 * directory created once per process), and ctl_journal_word() /
 * ctl_journal_unword() on the input as a string.
 *
 * The journal is opened read-only (a dry run's view), then read-write.
 * Refused: -EINVAL with "PATH line N: ..." (N a line of the input), both
 * ways, and no journal. Accepted: both opens agree; the read-write one cut
 * a torn last line and nothing else; each open action is "SEQ TEXT" of a
 * begin line of the input; migrations_since() names VMs only from
 * "begin migrate vm=WORD" records (any blanks before vm=), each shorter than its buffer.
 * An append to the read-write one (fdatasync stubbed out) gets a number
 * above every line's and above a torn tail's whole number ("17 " cut
 * after the blank), and adds exactly its line and one open action.
 * Words: ctl_journal_word() writes only printable ASCII other than '=',
 * '%' only as %XX, and ctl_journal_unword() gives the name back; unword
 * of any text agrees with a strict %XX decoder written out here. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fleet/control/control.h"
#include "fuzz.h"

static char dir[4096], path[4200];
static int fd = -1;

static void remove_dir(void)
{
    unlink(path);
    rmdir(dir);
}

static void write_input(const uint8_t *data, size_t size)
{
    if (fd < 0) {
        const char *tmp = getenv("TMPDIR");
        snprintf(dir, sizeof(dir), "%s/watt-fuzz-journal-XXXXXX", tmp && *tmp ? tmp : "/tmp");
        FUZZ_CHECK(mkdtemp(dir) != NULL);
        snprintf(path, sizeof(path), "%s/journal", dir);
        fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        FUZZ_CHECK(fd >= 0);
        atexit(remove_dir);
    }
    /* in place, not O_TRUNC (see fuzz_fault.c) */
    FUZZ_CHECK(size == 0 || pwrite(fd, data, size, 0) == (ssize_t)size);
    FUZZ_CHECK(ftruncate(fd, (off_t)size) == 0);
}

static bool is_hex(int c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

static int hex_val(int c)
{
    return c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10;
}

/* The reference: "%" HEX HEX is a byte, any other '%' is an error. */
static int unword_ref(const char *s, char *out, size_t size)
{
    size_t n = 0;
    for (const char *p = s; *p; p++) {
        int c = (unsigned char)*p;
        if (c == '%') {
            if (!is_hex(p[1]) || !is_hex(p[2]))
                return -EINVAL;
            c = hex_val(p[1]) * 16 + hex_val(p[2]);
            p += 2;
        }
        if (n + 1 >= size)
            return -ENAMETOOLONG;
        out[n++] = (char)c;
    }
    out[n] = '\0';
    return 0;
}

static void words(const uint8_t *data, size_t size)
{
    char *s = fuzz_strndup(data, size);
    size_t len = strlen(s);
    char *w = ctl_journal_word(s);
    for (const char *p = w; *p; p++) {
        FUZZ_CHECK(*p > ' ' && *p < 0x7f && *p != '=');
        FUZZ_CHECK(*p != '%' || (is_hex(p[1]) && is_hex(p[2])));
    }
    char *back = malloc(len + 1), *ref = malloc(len + 1);
    FUZZ_CHECK(back && ref);
    FUZZ_CHECK(ctl_journal_unword(w, back, len + 1) == 0 && strcmp(back, s) == 0);
    /* any text: as the reference decodes it, with a buffer that fits and
     * one that does not */
    size_t sizes[] = {len + 1, len / 2 + 1};
    for (int i = 0; i < 2; i++) {
        int r = ctl_journal_unword(s, back, sizes[i]);
        int q = unword_ref(s, ref, sizes[i]);
        FUZZ_CHECK(r == q);
        FUZZ_CHECK(r < 0 || strcmp(back, ref) == 0);
    }
    free(ref);
    free(back);
    free(w);
    free(s);
}

struct names {
    const uint8_t *data;
    size_t size;
    size_t n;
};

static void on_migration(void *ctx, const char *vm)
{
    struct names *m = ctx;
    FUZZ_CHECK(strlen(vm) < FLEET_NAME_MAX * 2);
    /* sscanf's " " in "migrate vm=" takes any run of blanks */
    FUZZ_CHECK(memmem(m->data, m->size, " begin migrate", 14) != NULL &&
               memmem(m->data, m->size, "vm=", 3) != NULL);
    m->n++;
}

/* The begin lines of the input, as "SEQ TEXT" would be listed. */
static bool begun(const uint8_t *data, size_t size, const char *action)
{
    char *end;
    long seq = strtol(action, &end, 10);
    FUZZ_CHECK(end != action && *end == ' ' && seq > 0);
    const char *text = end + 1;
    for (const char *line = (const char *)data, *stop = line + size; line < stop;) {
        const char *nl = memchr(line, '\n', (size_t)(stop - line));
        if (!nl)
            break;
        const char *b = memmem(line, (size_t)(nl - line), " begin ", 7);
        if (b && strtol(line, NULL, 10) == seq && (size_t)(nl - b - 7) == strlen(text) &&
            memcmp(b + 7, text, strlen(text)) == 0)
            return true;
        line = nl + 1;
    }
    return false;
}

static size_t lines_of(const uint8_t *data, size_t size)
{
    size_t n = 0;
    for (size_t i = 0; i < size; i++)
        n += data[i] == '\n';
    return n;
}

static void check_refused(int r, struct ctl_journal *j, const struct fleet_error *err, size_t size,
                          const uint8_t *data)
{
    FUZZ_CHECK(r == -EINVAL && j == (struct ctl_journal *)0x1);
    FUZZ_CHECK(strncmp(err->msg, path, strlen(path)) == 0);
    const char *p = err->msg + strlen(path);
    FUZZ_CHECK(strncmp(p, " line ", 6) == 0);
    unsigned long line = strtoul(p + 6, NULL, 10);
    FUZZ_CHECK(line >= 1 && line <= lines_of(data, size));
}

static ssize_t real_write(int to, const void *buf, size_t len)
{
    return write(to, buf, len);
}

static int no_sync(int to)
{
    (void)to;
    return 0; /* an fdatasync per input would slow fuzzing to a crawl */
}

/* The highest number the journal must never give again: each kept line's,
 * and the torn tail's when its digits end in a blank. */
static long highest_taken(const uint8_t *data, size_t size, size_t keep)
{
    long top = 0;
    for (size_t i = 0; i < keep;) {
        long v = strtol((const char *)data + i, NULL, 10); /* accepted: "SEQ ..." */
        top = v > top ? v : top;
        const uint8_t *nl = memchr(data + i, '\n', keep - i);
        i = (size_t)(nl - data) + 1;
    }
    size_t d = keep;
    while (d < size && d - keep < 18 && data[d] >= '0' && data[d] <= '9')
        d++;
    if (d > keep && d < size && data[d] == ' ') {
        char digits[20] = "";
        memcpy(digits, data + keep, d - keep);
        long v = strtol(digits, NULL, 10);
        top = v > top ? v : top;
    }
    return top;
}

static void append_one(struct ctl_journal *rw, const uint8_t *data, size_t size, size_t keep,
                       size_t n_open)
{
    ctl_journal_set_io(rw, &(struct ctl_journal_io){real_write, no_sync, ftruncate});
    long top = highest_taken(data, size, keep);
    long seq = ctl_journal_begin(rw, "power_on host=fuzz");
    if (seq == -EOVERFLOW) {
        FUZZ_CHECK(top >= LONG_MAX - 1);
        return;
    }
    FUZZ_CHECK(seq > top);
    char line[64];
    int len = snprintf(line, sizeof(line), "%ld ", seq);
    struct stat st;
    FUZZ_CHECK(fstat(fd, &st) == 0 && (size_t)st.st_size > keep + (size_t)len);
    char got[64] = "";
    FUZZ_CHECK(pread(fd, got, (size_t)len, (off_t)keep) == len && memcmp(got, line, len) == 0);
    FUZZ_CHECK(pread(fd, got, 1, st.st_size - 1) == 1 && got[0] == '\n');
    FUZZ_CHECK(ctl_journal_n_open(rw) == n_open + 1);
}

static void journal(const uint8_t *data, size_t size)
{
    write_input(data, size);
    struct ctl_journal *ro = (struct ctl_journal *)0x1, *rw = (struct ctl_journal *)0x1;
    struct fleet_error err = {{0}};
    int r = ctl_journal_open(dir, true, &ro, &err);
    if (r < 0) {
        check_refused(r, ro, &err, size, data);
        err.msg[0] = '\0';
        r = ctl_journal_open(dir, false, &rw, &err);
        check_refused(r, rw, &err, size, data);
        return;
    }
    FUZZ_CHECK(r == 0 && ro != NULL);
    /* read-write: the torn tail (after the last newline) is cut */
    FUZZ_CHECK(ctl_journal_open(dir, false, &rw, &err) == 0);
    size_t keep = size;
    while (keep > 0 && data[keep - 1] != '\n')
        keep--;
    struct stat st;
    FUZZ_CHECK(fstat(fd, &st) == 0 && (size_t)st.st_size == keep);

    char **a = NULL, **b = NULL;
    size_t na = ctl_journal_open_actions(ro, &a), nb = ctl_journal_open_actions(rw, &b);
    FUZZ_CHECK(na == nb && na <= lines_of(data, size));
    for (size_t i = 0; i < na; i++) {
        FUZZ_CHECK(strcmp(a[i], b[i]) == 0);
        FUZZ_CHECK(begun(data, size, a[i]));
        free(a[i]);
        free(b[i]);
    }
    free(a);
    free(b);
    append_one(rw, data, size, keep, nb);
    struct names m = {data, size, 0};
    ctl_journal_migrations_since(ro, -INFINITY, on_migration, &m);
    FUZZ_CHECK(m.n <= lines_of(data, size));
    ctl_journal_close(ro);
    ctl_journal_close(rw);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    words(data, size);
    journal(data, size);
    return 0;
}
