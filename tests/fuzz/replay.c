/* Replay driver: runs a fuzz target without libFuzzer.
 *
 *   fuzz_NAME DIR|FILE...
 *
 * For every file (directories are read in name order) the target runs on
 * the file as it is, then on WATT_FUZZ_MUTATIONS (default 512) mutants of
 * it: 1-4 edits each of bit flips, truncations, deletions, duplicated
 * chunks and inserted digits, commas, dashes, newlines, NULs and long digit
 * runs. The generator is seeded from a fixed constant and the file's name,
 * so a run is the same every time and adding a seed file leaves the others'
 * mutants unchanged. On a crash the input is written to
 * ./crash-<target>-<file>-<mutant> and its name printed, so it can be
 * replayed alone (fuzz_NAME crash-...) or given to the libFuzzer binary. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fuzz.h"

#define REPLAY_MAX_INPUT  (1u << 20) /* bytes: corpus files stay well below (64 KiB) */
#define REPLAY_MAX_GROWTH 256u       /* bytes a mutant may add to its seed */
#define REPLAY_MUTANTS    512u

/* What is running now, for the crash handler. */
static const char *cur_prog = "fuzz";
static const char *cur_file;
static unsigned cur_mut; /* 0: the file itself; k: mutant k */
static const uint8_t *cur_data;
static size_t cur_size;

static uint64_t rng_state;

static uint64_t rng_next(void) /* splitmix64 */
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static size_t rng_below(size_t n) /* 0..n-1; 0 when n is 0 */
{
    return n ? (size_t)(rng_next() % n) : 0;
}

static uint64_t hash_name(const char *s) /* FNV-1a */
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h;
}

static void put_str(int fd, const char *s)
{
    ssize_t r = write(fd, s, strlen(s));
    (void)r;
}

static void put_uint(char *buf, unsigned v) /* async-signal-safe utoa */
{
    char tmp[16];
    int n = 0;
    do
        tmp[n++] = (char)('0' + v % 10);
    while ((v /= 10) && n < 15);
    while (n)
        *buf++ = tmp[--n];
    *buf = '\0';
}

/* Save the input that crashed and say where it is; async-signal-safe. */
static void on_crash(int sig)
{
    char path[512] = "crash-", num[16];
    const char *base = cur_file ? strrchr(cur_file, '/') : NULL;
    base = base ? base + 1 : (cur_file ? cur_file : "empty");
    strncat(path, cur_prog, 100);
    strcat(path, "-");
    strncat(path, base, 200);
    strcat(path, "-");
    put_uint(num, cur_mut);
    strcat(path, num);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd >= 0) {
        ssize_t r = cur_size ? write(fd, cur_data, cur_size) : 0;
        (void)r;
        close(fd);
    }
    put_str(2, "\nreplay: crashed on ");
    put_str(2, cur_file ? cur_file : "(empty input)");
    put_str(2, " mutant ");
    put_str(2, num);
    put_str(2, "; input saved to ");
    put_str(2, path);
    put_str(2, "\n");
    signal(sig, SIG_DFL);
    raise(sig);
}

/* SIGABRT is how FUZZ_CHECK and the sanitizers (abort_on_error=1) stop;
 * SIGSEGV and friends only when no sanitizer has claimed them, so ASan
 * still prints its own report first. */
static void install_crash_handlers(void)
{
    static const int sigs[] = {SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL};
    for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) {
        struct sigaction old;
        if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler != SIG_DFL && sigs[i] != SIGABRT)
            continue;
        struct sigaction sa = {.sa_handler = on_crash};
        sigemptyset(&sa.sa_mask);
        sigaction(sigs[i], &sa, NULL);
    }
}

static void run_one(const uint8_t *data, size_t size, unsigned mut)
{
    cur_mut = mut;
    cur_data = data;
    cur_size = size;
    LLVMFuzzerTestOneInput(data, size);
}

/* One edit of buf (length *n, capacity cap) in place. */
static void mutate_once(uint8_t *buf, size_t *n, size_t cap)
{
    static const char inserts[] = "0123456789,,--\n\n\0 \t:=#[]x";
    size_t pos = rng_below(*n + 1);
    switch (rng_below(8)) {
    case 0: /* flip a bit */
        if (*n)
            buf[rng_below(*n)] ^= (uint8_t)(1u << rng_below(8));
        break;
    case 1: /* truncate */
        *n = pos;
        break;
    case 2: { /* delete a range */
        size_t len = rng_below(*n - pos + 1);
        if (len > 16)
            len = 1 + len % 16;
        memmove(buf + pos, buf + pos + len, *n - pos - len);
        *n -= len;
        break;
    }
    case 3: /* overwrite a byte with an interesting one */
        if (*n)
            buf[rng_below(*n)] = (uint8_t)inserts[rng_below(sizeof(inserts) - 1)];
        break;
    case 4: /* random byte */
        if (*n)
            buf[rng_below(*n)] = (uint8_t)rng_next();
        break;
    case 5:
    case 6: { /* insert 1 char, or a digit run (overflows: 20+ nines) */
        size_t len = rng_below(2) ? 1 : 1 + rng_below(24);
        if (*n + len > cap)
            break;
        memmove(buf + pos + len, buf + pos, *n - pos);
        char c = inserts[rng_below(sizeof(inserts) - 1)];
        for (size_t i = 0; i < len; i++)
            buf[pos + i] = (uint8_t)(len > 1 ? '9' - (char)rng_below(2) * 9 : c);
        *n += len;
        break;
    }
    default: { /* duplicate a chunk: repeated lines, repeated fields */
        size_t from = rng_below(*n + 1), len = rng_below(*n - from + 1);
        if (len > 64)
            len = 1 + len % 64;
        if (*n + len > cap)
            break;
        memmove(buf + pos + len, buf + pos, *n - pos);
        memmove(buf + pos, buf + (from < pos ? from : from + len), len);
        *n += len;
        break;
    }
    }
}

static void run_file(const char *path, const uint8_t *seed, size_t size, unsigned nmut)
{
    size_t cap = size + REPLAY_MAX_GROWTH;
    uint8_t *buf = malloc(cap);
    if (!buf)
        abort();
    cur_file = path;
    rng_state = 0x77617474u ^ hash_name(strrchr(path, '/') ? strrchr(path, '/') + 1 : path);
    run_one(seed, size, 0);
    for (unsigned k = 1; k <= nmut; k++) {
        size_t n = size;
        memcpy(buf, seed, size);
        for (size_t e = 1 + rng_below(4); e > 0; e--)
            mutate_once(buf, &n, cap);
        /* A copy of exactly n bytes, so ASan sees reads past the end. */
        uint8_t *in = malloc(n ? n : 1);
        if (!in)
            abort();
        memcpy(in, buf, n);
        run_one(in, n, k);
        free(in);
    }
    free(buf);
}

static int read_file(const char *path, uint8_t **ret, size_t *ret_n)
{
    FILE *f = fopen(path, "rbe");
    if (!f)
        return -errno;
    uint8_t *buf = malloc(REPLAY_MAX_INPUT);
    if (!buf)
        abort();
    size_t n = fread(buf, 1, REPLAY_MAX_INPUT, f);
    bool too_big = n == REPLAY_MAX_INPUT;
    fclose(f);
    if (too_big) {
        free(buf);
        return -EFBIG;
    }
    *ret = buf;
    *ret_n = n;
    return 0;
}

static int replay_path(const char *path, unsigned nmut, unsigned *nfiles)
{
    struct stat st;
    if (stat(path, &st) < 0) {
        fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
        return -errno;
    }
    if (S_ISDIR(st.st_mode)) {
        struct dirent **ents;
        int n = scandir(path, &ents, NULL, alphasort);
        if (n < 0) {
            fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
            return -errno;
        }
        int r = 0;
        for (int i = 0; i < n; i++) {
            if (ents[i]->d_name[0] != '.' && r >= 0) {
                char *sub = malloc(strlen(path) + strlen(ents[i]->d_name) + 2);
                if (!sub)
                    abort();
                sprintf(sub, "%s/%s", path, ents[i]->d_name);
                r = replay_path(sub, nmut, nfiles);
                free(sub);
            }
            free(ents[i]);
        }
        free(ents);
        return r;
    }
    uint8_t *data = NULL;
    size_t size = 0;
    int r = read_file(path, &data, &size);
    if (r < 0) {
        fprintf(stderr, "replay: %s: %s\n", path, strerror(-r));
        return r;
    }
    run_file(path, data, size, nmut);
    free(data);
    (*nfiles)++;
    return 0;
}

int main(int argc, char **argv)
{
    const char *slash = strrchr(argv[0], '/');
    cur_prog = slash ? slash + 1 : argv[0];
    unsigned nmut = REPLAY_MUTANTS;
    const char *env = getenv("WATT_FUZZ_MUTATIONS");
    if (env)
        nmut = (unsigned)strtoul(env, NULL, 10);
    install_crash_handlers();

    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    run_one((const uint8_t *)"", 0, 0); /* the empty input, always */
    unsigned nfiles = 0;
    for (int i = 1; i < argc; i++)
        if (replay_path(argv[i], nmut, &nfiles) < 0)
            return 1;
    cur_file = "(exit: LeakSanitizer)"; /* a leak report aborts after main() */
    cur_size = 0;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
    printf("%s: %u files, %u inputs, %.0f ms\n", cur_prog, nfiles, 1 + nfiles * (1 + nmut), ms);
    if (argc > 1 && nfiles == 0) {
        fprintf(stderr, "replay: no corpus files found\n");
        return 1;
    }
    return 0;
}
