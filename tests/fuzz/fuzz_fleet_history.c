/* Fuzz target: fleet/control/control.h, the fleet controller's CPU history
 * (ctl_history_load() of state_dir/history, written to a private temporary
 * directory created once per process). Each input is tried as it is, and
 * with the checksum of its last "end ... crc32=" line made right, so that
 * the lines before it are fuzzed past the checksum.
 *
 * Refused: a negative errno, "PATH line N: ..." with N a line of the input
 * (or the one after the last), and no sample loaded. Accepted: every VM
 * with samples has 1 to CTL_HISTORY of them, each share in [0, 1], times
 * not increasing, none older than window x interval_s (2 x 10 s) at the
 * load's clock nor ahead of it by more than interval_s; what
 * ctl_history_save() writes, a second controller loads back to the same
 * samples (to the precision written: 1 ms and 1e-6). */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/util.h"
#include "fleet/control/control.h"
#include "fuzz.h"

#define NOW      1700000000.0 /* the clock of every load */
#define MAX_AGE  20.0         /* window=2 x interval_s = 10 */
#define INTERVAL 10.0

static char dir[4096], path[4200];
static struct site site;

static void remove_dir(void)
{
    char tmp[4300];
    unlink(path);
    snprintf(tmp, sizeof(tmp), "%s/history.tmp", dir);
    unlink(tmp);
    rmdir(dir);
    site_free(&site);
}

static void setup(void)
{
    if (dir[0])
        return;
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof(dir), "%s/watt-fuzz-history-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    FUZZ_CHECK(mkdtemp(dir) != NULL);
    snprintf(path, sizeof(path), "%s/history", dir);
    char *ini = NULL;
    FUZZ_CHECK(asprintf(&ini,
                        "[controller]\ninterval_s = 10\npolicy = window=2\nstate_dir = %s\n"
                        "[type tiny]\ncores = 2\nmips_per_core = 1000\nram_mb = 2048\n"
                        "power_w = 50,60,70,80,90,100,110,120,130,140,150\nboot_s = 5\n"
                        "[host h1]\ntype = tiny\nuri = fake://1\nbmc = 127.0.0.1:1\n"
                        "bmc_user = a\nbmc_password = b\n",
                        dir) > 0);
    struct fleet_error err = {{0}};
    FUZZ_CHECK(site_parse(ini, strlen(ini), "fuzz.ini", &site, &err) == 0);
    free(ini);
    atexit(remove_dir);
}

static void write_input(const uint8_t *data, size_t size)
{
    unlink(path);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    FUZZ_CHECK(fd >= 0);
    FUZZ_CHECK(size == 0 || write(fd, data, size) == (ssize_t)size);
    close(fd);
}

/* A controller with no engine: what ctl_history_load() and _save() use. */
static struct controller *controller(void)
{
    struct controller *c = xcalloc(1, sizeof(*c));
    c->site = &site;
    c->lock_fd = -1;
    return c;
}

static uint32_t crc32_ref(const uint8_t *s, size_t len)
{
    uint32_t crc = 0xffffffffu;
    for (size_t i = 0; i < len; i++) {
        crc ^= s[i];
        for (int b = 0; b < 8; b++)
            crc = crc & 1 ? (crc >> 1) ^ 0xedb88320u : crc >> 1;
    }
    return ~crc;
}

static size_t lines_of(const uint8_t *data, size_t size)
{
    size_t n = 0;
    for (size_t i = 0; i < size; i++)
        n += data[i] == '\n';
    return n;
}

static size_t loaded(const struct controller *c)
{
    size_t n = 0;
    for (size_t i = 0; i < c->n_vm; i++)
        n += c->vm[i].hist_n > 0;
    return n;
}

/* A sample so close to a limit of age that the 1 ms of the file may put it
 * on the other side. */
static bool near_limit(const struct ctl_vm *v)
{
    for (unsigned k = 0; k < v->hist_n; k++) {
        double age = NOW - v->hist_t[k];
        if (fabs(age - MAX_AGE) < 2e-3 || fabs(age + INTERVAL) < 2e-3)
            return true;
    }
    return false;
}

static void check_samples(const struct controller *c)
{
    for (size_t i = 0; i < c->n_vm; i++) {
        const struct ctl_vm *v = &c->vm[i];
        FUZZ_CHECK(v->hist_n <= CTL_HISTORY);
        for (unsigned k = 0; k < v->hist_n; k++) {
            FUZZ_CHECK(v->hist[k] >= 0 && v->hist[k] <= 1);
            FUZZ_CHECK(NOW - v->hist_t[k] <= MAX_AGE && NOW - v->hist_t[k] >= -INTERVAL);
            FUZZ_CHECK(k == 0 || v->hist_t[k] <= v->hist_t[k - 1]);
        }
    }
}

/* Saved, and loaded again by another controller: the same samples. */
static void round_trip(const struct controller *c)
{
    struct fleet_error err = {{0}};
    FUZZ_CHECK(ctl_history_save(c, NOW, &err) == 0);
    struct controller *d = controller();
    FUZZ_CHECK(ctl_history_load(d, NOW, &err) == 0);
    FUZZ_CHECK(loaded(d) <= loaded(c));
    for (size_t i = 0; i < c->n_vm; i++) {
        const struct ctl_vm *v = &c->vm[i];
        if (!v->hist_n || near_limit(v))
            continue;
        int32_t j = ctl_vm_index(d, v->name, false);
        FUZZ_CHECK(j >= 0 && d->vm[j].hist_n == v->hist_n);
        for (unsigned k = 0; k < v->hist_n; k++) {
            FUZZ_CHECK(fabs(d->vm[j].hist[k] - v->hist[k]) <= 1e-6);
            FUZZ_CHECK(fabs(d->vm[j].hist_t[k] - v->hist_t[k]) <= 1e-3);
        }
    }
    controller_close(d);
}

static void history(const uint8_t *data, size_t size)
{
    write_input(data, size);
    struct controller *c = controller();
    struct fleet_error err = {{0}};
    int r = ctl_history_load(c, NOW, &err);
    if (r < 0) {
        FUZZ_CHECK(strncmp(err.msg, path, strlen(path)) == 0);
        const char *p = err.msg + strlen(path);
        FUZZ_CHECK(strncmp(p, " line ", 6) == 0);
        unsigned long line = strtoul(p + 6, NULL, 10);
        FUZZ_CHECK(line >= 1 && line <= lines_of(data, size) + 1);
        FUZZ_CHECK(loaded(c) == 0 && c->hist_loaded == 0);
    } else {
        FUZZ_CHECK(r == 0);
        check_samples(c);
        FUZZ_CHECK(loaded(c) <= lines_of(data, size));
        round_trip(c);
    }
    controller_close(c);
}

/* The input with the checksum of its last end line made right. */
static void with_checksum(const uint8_t *data, size_t size)
{
    const uint8_t *end = NULL;
    for (size_t i = 0; i + 4 <= size; i++)
        if ((i == 0 || data[i - 1] == '\n') && memcmp(data + i, "end ", 4) == 0)
            end = data + i;
    if (!end)
        return;
    const uint8_t *stop = memchr(end, '\n', size - (size_t)(end - data));
    const uint8_t *crc = memmem(end, (size_t)((stop ? stop : data + size) - end), "crc32=", 6);
    if (!crc || (size_t)(crc + 6 + 8 - data) > size)
        return;
    uint8_t *copy = malloc(size);
    FUZZ_CHECK(copy != NULL);
    memcpy(copy, data, size);
    char hex[9];
    snprintf(hex, sizeof(hex), "%08x", crc32_ref(data, (size_t)(end - data)));
    memcpy(copy + (crc + 6 - data), hex, 8);
    history(copy, size);
    free(copy);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    setup();
    history(data, size);
    with_checksum(data, size);
    return 0;
}
