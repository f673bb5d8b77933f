/* Fuzz target: the latency guard's parsers (tune/guard.h), all on every
 * input: guard_parse_cpu_stat() (cgroup v2 cpu.stat), guard_parse_pid_stat()
 * (/proc/PID/stat), guard_parse_net_tcp() (/proc/net/tcp and tcp6),
 * guard_parse_sockstat_inuse() (/proc/net/sockstat and sockstat6), and
 * guard_workload_parse() on each line, raw and behind each kind's prefix.
 *
 * cpu.stat, sockstat and pid stat are differential: a reference written
 * the obvious way (the first "usage_usec " or "PROTO: inuse " line and its
 * digits; the fields after the last ')' split at blanks) must agree, and a
 * refusal leaves the outputs untouched. The pid stat text is passed with
 * its exact length and no NUL, so ASan sees a read past the end.
 *
 * The TCP table: counts only ever add (a sentinel start survives, a set
 * listening flag stays set), the whole text counts what its lines count
 * one by one, and a line counts for one port at most (the ports tried are
 * those the text names, plus 22).
 *
 * Workloads: accepted specs are copied, ports are 1..65535, process names
 * 1..15 bytes without '/', cgroup paths relative, without a '.' or '..'
 * component ("a//b" is the kernel's to read as "a/b"); refusals name the
 * spec. Whatever the profile's own check (profile_parse_workload) accepts,
 * the guard accepts as the same thing. */
#include <errno.h>
#include <limits.h>
#include <stdbool.h>

#include "fuzz.h"
#include "tune/guard.h"
#include "tune/profile.h"

#define SENTINEL_COUNT 7u

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* Digits at S as a number; false when none or above LIMIT. *ret_end past them. */
static bool ref_digits(const char *s, const char *end, uint64_t limit, uint64_t *ret,
                       const char **ret_end)
{
    uint64_t v = 0;
    const char *p = s;
    bool fits = true;
    for (; p < end && is_digit(*p); p++) {
        if (v > (limit - (uint64_t)(*p - '0')) / 10)
            fits = false;
        else
            v = v * 10 + (uint64_t)(*p - '0');
    }
    *ret_end = p;
    *ret = v;
    return p > s && fits;
}

/* The first line of TEXT that starts with PREFIX, or NULL. */
static const char *ref_line(const char *text, const char *prefix)
{
    size_t n = strlen(prefix);
    for (const char *l = text; *l;) {
        if (strncmp(l, prefix, n) == 0)
            return l + n;
        l = strchr(l, '\n');
        if (!l)
            break;
        l++;
    }
    return NULL;
}

static void fuzz_cpu_stat(const char *text)
{
    uint64_t us = 42;
    int r = guard_parse_cpu_stat(text, &us);
    FUZZ_CHECK(r == 0 || r == -EINVAL);
    const char *v = ref_line(text, "usage_usec ");
    uint64_t want;
    const char *end;
    bool ok = v && ref_digits(v, v + strlen(v), UINT64_MAX, &want, &end) &&
              (*end == '\0' || *end == '\n');
    FUZZ_CHECK(ok == (r == 0));
    FUZZ_CHECK(r == 0 ? us == want : us == 42);
}

static void fuzz_sockstat(const char *text, const char *proto)
{
    long got = guard_parse_sockstat_inuse(text, proto);
    char prefix[32];
    snprintf(prefix, sizeof(prefix), "%s: inuse ", proto);
    const char *v = ref_line(text, prefix);
    uint64_t want;
    const char *end;
    if (v && ref_digits(v, v + strlen(v), (uint64_t)LONG_MAX, &want, &end))
        FUZZ_CHECK(got == (long)want);
    else
        FUZZ_CHECK(got == -1);
}

/* Fields 14, 15 and 22 of a pid stat: 11, 12 and 19 tokens after ')'. */
static bool ref_pid_stat(const char *text, size_t len, uint64_t *ret_ticks, uint64_t *ret_start,
                         const char **ret_open, size_t *ret_comm_len)
{
    const char *open = memchr(text, '(', len), *close = NULL;
    for (size_t i = len; i > 0 && !close; i--)
        if (text[i - 1] == ')')
            close = text + i - 1;
    if (!open || !close || close < open || close - open - 1 > 64)
        return false;
    const char *p = close + 1, *end = text + len;
    const char *line_end = memchr(p, '\n', (size_t)(end - p));
    if (line_end)
        end = line_end; /* the fields are on one line */
    uint64_t field[23] = {0};
    for (int f = 3; f <= 22; f++) {
        while (p < end && *p == ' ')
            p++;
        const char *tok = p;
        while (p < end && *p != ' ')
            p++;
        if (p == tok)
            return false;
        if (f == 14 || f == 15 || f == 22) {
            const char *dend;
            /* the parser takes at most 18446744073709551609 (its loop stops
             * before a multiplication could overflow) */
            if (!ref_digits(tok, p, UINT64_MAX / 10 * 10 - 1, &field[f], &dend) || dend != p)
                return false;
        }
    }
    if (field[14] > UINT64_MAX - field[15])
        return false;
    *ret_ticks = field[14] + field[15];
    *ret_start = field[22];
    *ret_open = open;
    *ret_comm_len = (size_t)(close - open - 1);
    return true;
}

static void fuzz_pid_stat(const uint8_t *data, size_t size)
{
    /* exact length, no NUL: a read past the end is ASan's to see */
    char *text = malloc(size ? size : 1);
    FUZZ_CHECK(text != NULL);
    if (size)
        memcpy(text, data, size);
    char *comm = (char *)0x1;
    uint64_t ticks = 1, start = 2;
    int r = guard_parse_pid_stat(text, size, &comm, &ticks, &start);
    FUZZ_CHECK(r == 0 || r == -EINVAL);
    uint64_t want_ticks = 0, want_start = 0;
    const char *open = NULL;
    size_t comm_len = 0;
    bool ok = ref_pid_stat(text, size, &want_ticks, &want_start, &open, &comm_len);
    FUZZ_CHECK(ok == (r == 0));
    if (r < 0) {
        FUZZ_CHECK(comm == (char *)0x1 && ticks == 1 && start == 2);
    } else {
        FUZZ_CHECK(ticks == want_ticks && start == want_start);
        FUZZ_CHECK(memcmp(comm, open + 1, comm_len) == 0 && comm[comm_len] == '\0');
        free(comm);
    }
    free(text);
}

/* Up to MAX distinct local ports named by lines "N: ADDR:PORT ...", and 22. */
static size_t tcp_ports(const char *text, unsigned *ports, size_t max)
{
    size_t n = 0;
    ports[n++] = 22;
    for (const char *l = text; *l && n < max;) {
        size_t len = strcspn(l, "\n");
        const char *colon = memchr(l, ':', len);
        const char *c2 = colon ? memchr(colon + 1, ':', len - (size_t)(colon + 1 - l)) : NULL;
        if (c2) {
            unsigned long v = strtoul(c2 + 1, NULL, 16);
            bool seen = v > 65535;
            for (size_t i = 0; i < n && !seen; i++)
                seen = ports[i] == v;
            if (!seen)
                ports[n++] = (unsigned)v;
        }
        l += len;
        if (*l)
            l++;
    }
    return n;
}

static void fuzz_net_tcp(const char *text)
{
    unsigned ports[9];
    size_t nports = tcp_ports(text, ports, 9);
    size_t nlines = 0;
    for (const char *c = text; *c; c++)
        nlines += *c == '\n';
    nlines += *text && text[strlen(text) - 1] != '\n';
    unsigned total = 0;
    for (size_t i = 0; i < nports; i++) {
        unsigned est = SENTINEL_COUNT;
        bool listening = false;
        guard_parse_net_tcp(text, ports[i], &est, &listening);
        FUZZ_CHECK(est >= SENTINEL_COUNT && est - SENTINEL_COUNT <= nlines);
        total += est - SENTINEL_COUNT;

        /* line by line: the same counts */
        unsigned est_lines = 0;
        bool listening_lines = false;
        for (const char *l = text; *l;) {
            size_t len = strcspn(l, "\n");
            char *line = fuzz_strndup((const uint8_t *)l, len);
            unsigned e = 0;
            bool lis = false;
            guard_parse_net_tcp(line, ports[i], &e, &lis);
            FUZZ_CHECK(e <= 1 && !(e && lis));
            est_lines += e;
            listening_lines |= lis;
            free(line);
            l += len;
            if (*l)
                l++;
        }
        FUZZ_CHECK(est - SENTINEL_COUNT == est_lines && listening == listening_lines);

        bool stays = true;
        unsigned zero = 0;
        guard_parse_net_tcp(text, ports[i], &zero, &stays);
        FUZZ_CHECK(stays && zero == est - SENTINEL_COUNT);
    }
    FUZZ_CHECK(total <= nlines); /* a line has one local port */
}

static void check_workload(const char *spec)
{
    struct guard_workload w = {.kind = GUARD_WL_PORT, .port = 99};
    char *err = NULL;
    int r = guard_workload_parse(spec, &w, &err);
    struct profile_workload pw;
    bool profile_ok = profile_parse_workload(spec, &pw) == 0;
    if (r < 0) {
        FUZZ_CHECK(r == -EINVAL && err && strncmp(err, "workload '", 10) == 0);
        FUZZ_CHECK(w.kind == GUARD_WL_PORT && w.port == 99 && !w.name && !w.spec);
        FUZZ_CHECK(!profile_ok);
        free(err);
        return;
    }
    FUZZ_CHECK(r == 0 && err == NULL && w.spec && strcmp(w.spec, spec) == 0);
    size_t n = w.name ? strlen(w.name) : 0;
    switch (w.kind) {
    case GUARD_WL_PORT:
        FUZZ_CHECK(w.port >= 1 && w.port <= 65535 && !w.name);
        FUZZ_CHECK(!profile_ok || (pw.kind == PROFILE_WORKLOAD_PORT && pw.port == w.port));
        break;
    case GUARD_WL_PROCESS:
        FUZZ_CHECK(w.name && n >= 1 && n <= 15 && !strchr(w.name, '/'));
        FUZZ_CHECK(!profile_ok ||
                   (pw.kind == PROFILE_WORKLOAD_PROCESS && strcmp(pw.arg, w.name) == 0));
        break;
    case GUARD_WL_CGROUP:
        FUZZ_CHECK(w.name && n <= 1024 && w.name[0] != '/' && (!n || w.name[n - 1] != '/'));
        for (const char *s = w.name; *s;) {
            size_t c = strcspn(s, "/");
            FUZZ_CHECK(!(c == 1 && s[0] == '.') && !(c == 2 && s[0] == '.' && s[1] == '.'));
            s += c;
            if (*s)
                s++;
        }
        if (profile_ok) {
            FUZZ_CHECK(pw.kind == PROFILE_WORKLOAD_CGROUP);
            const char *a = pw.arg + strspn(pw.arg, "/");
            size_t an = strlen(a);
            while (an && a[an - 1] == '/')
                an--;
            FUZZ_CHECK(an == n && strncmp(a, w.name, n) == 0);
        }
        break;
    default:
        FUZZ_CHECK(false);
    }
    guard_workload_clear(&w);
    FUZZ_CHECK(!w.name && !w.spec);
}

/* Every line (the first 16), as it is and behind each kind's prefix. */
static void fuzz_workloads(const char *text)
{
    static const char *const prefixes[] = {"", "cgroup:", "process:", "port:"};
    size_t lines = 0;
    for (const char *l = text; lines < 16; lines++) {
        size_t len = strcspn(l, "\n");
        for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++) {
            size_t pn = strlen(prefixes[i]);
            char *spec = malloc(pn + len + 1);
            FUZZ_CHECK(spec != NULL);
            memcpy(spec, prefixes[i], pn);
            memcpy(spec + pn, l, len);
            spec[pn + len] = '\0';
            check_workload(spec);
            free(spec);
        }
        if (!l[len])
            break;
        l += len + 1;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = fuzz_strndup(data, size);
    fuzz_cpu_stat(text);
    fuzz_sockstat(text, "TCP");
    fuzz_sockstat(text, "TCP6");
    fuzz_pid_stat(data, size);
    fuzz_net_tcp(text);
    fuzz_workloads(text);
    free(text);
    return 0;
}
