/* Fuzz target: host/fault.h, fault_load() of a fixture's `watt-faults`.
 *
 * fault_load() reads a file under a root fd, so the input is written to
 * watt-faults in a private temporary root (created once per process) and
 * loaded from there. Accepted faults are well formed (a known directory,
 * exactly one of an errno, a one-line value or a root-relative file with
 * no "..", from >= 1, op=write only with an errno)
 * and fault_match() or fault_match_write() finds each;
 * a refused file gives -EBADMSG and nothing to free. */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz.h"
#include "host/fault.h"

static int root_fd = -1;
static char root_path[4096];

static void remove_root(void)
{
    if (root_fd < 0)
        return;
    unlinkat(root_fd, "watt-faults", 0);
    close(root_fd);
    rmdir(root_path);
}

static int get_root(void)
{
    if (root_fd >= 0)
        return root_fd;
    const char *tmp = getenv("TMPDIR");
    snprintf(root_path, sizeof(root_path), "%s/watt-fuzz-fault-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    FUZZ_CHECK(mkdtemp(root_path) != NULL);
    root_fd = open(root_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    FUZZ_CHECK(root_fd >= 0);
    atexit(remove_root);
    return root_fd;
}

/* The file stays open; each input overwrites it in place. Not O_TRUNC: on
 * ext4, truncating to 0 and writing again flushes the file on close
 * (auto_da_alloc), which made this target 100 times slower. */
static void write_input(int dirfd, const uint8_t *data, size_t size)
{
    static int fd = -1;
    if (fd < 0)
        fd = openat(dirfd, "watt-faults", O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    FUZZ_CHECK(fd >= 0);
    FUZZ_CHECK(size == 0 || pwrite(fd, data, size, 0) == (ssize_t)size);
    FUZZ_CHECK(ftruncate(fd, (off_t)size) == 0);
}

static void check_fault(struct host_fault *v, size_t n, size_t i)
{
    const struct host_fault *f = &v[i];
    FUZZ_CHECK(f->dir == HOST_SYS || f->dir == HOST_PROC || f->dir == HOST_DEV);
    FUZZ_CHECK(f->path != NULL && !strpbrk(f->path, " \t\n"));
    /* Exactly one action: ERRNO, =VALUE or @FILE. */
    FUZZ_CHECK((f->err > 0) + (f->value != NULL) + (f->file != NULL) == 1);
    if (f->file) {
        FUZZ_CHECK(f->file[0] && f->file[0] != '/');
        FUZZ_CHECK(!strstr(f->file, "..") && !strpbrk(f->file, " \t\n"));
    }
    if (f->value) {
        size_t len = strlen(f->value);
        FUZZ_CHECK(len >= 1 && f->value[len - 1] == '\n');
        FUZZ_CHECK(memchr(f->value, '\n', len - 1) == NULL);
    }
    FUZZ_CHECK(f->from >= 1 && f->from <= 1000000);
    FUZZ_CHECK(!f->write || f->err > 0); /* a write fault is an errno */
    /* The first fault for this path and operation answers; it counts the
     * access. */
    size_t first = 0;
    while (first < i && !(v[first].dir == f->dir && v[first].write == f->write &&
                          strcmp(v[first].path, f->path) == 0))
        first++;
    unsigned seen = v[first].seen;
    struct host_fault *m =
        f->write ? fault_match_write(v, n, f->dir, f->path) : fault_match(v, n, f->dir, f->path);
    FUZZ_CHECK(v[first].seen == seen + 1);
    FUZZ_CHECK(m == (v[first].seen >= v[first].from ? &v[first] : NULL));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int dirfd = get_root();
    write_input(dirfd, data, size);
    struct host_fault *v = (struct host_fault *)0x1;
    size_t n = 77;
    int r = fault_load(dirfd, &v, &n);
    if (r < 0) {
        FUZZ_CHECK(r == -EBADMSG);
        FUZZ_CHECK(v == NULL && n == 0);
        return 0;
    }
    size_t lines = 1;
    for (size_t i = 0; i < size; i++)
        lines += data[i] == '\n';
    FUZZ_CHECK(n <= lines); /* getline: one fault per line at most */
    FUZZ_CHECK((n == 0) == (v == NULL));
    for (size_t i = 0; i < n; i++)
        FUZZ_CHECK(v[i].seen == 0);
    for (size_t i = 0; i < n; i++)
        check_fault(v, n, i);
    fault_free(v, n);
    return 0;
}
