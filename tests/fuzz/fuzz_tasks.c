/* Fuzz target: the /proc/PID parsers of sense/tasks.h, all on every input:
 * tasks_parse_stat() (/proc/PID/stat), tasks_parse_status() (the
 * switch counts and Tgid of /proc/PID/status) and tasks_parse_cgroup()
 * (/proc/PID/cgroup).
 *
 * Each is differential: a reference written the plain way over a copy of
 * the text (the line after the last ')' split at blanks with strtok and
 * read with strtoull; status and cgroup lines split at ':') must agree on
 * what is accepted and what comes out, and a refusal leaves the outputs
 * untouched. The parsers get the bytes with their exact length and no NUL,
 * so ASan sees a read past the end. */
#include <errno.h>
#include <stdbool.h>

#include "fuzz.h"
#include "sense/sample.h"
#include "sense/tasks.h"

/* All digits and within LIMIT, read with strtoull. */
static bool ref_number(const char *tok, uint64_t limit, uint64_t *ret)
{
    if (!*tok || strspn(tok, "0123456789") != strlen(tok))
        return false;
    errno = 0;
    unsigned long long v = strtoull(tok, NULL, 10);
    if (errno == ERANGE || v > limit)
        return false;
    *ret = v;
    return true;
}

static bool is_letter(char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
}

/* The fields after the last ')', on its line, split at spaces. */
static bool ref_stat(const char *text, size_t len, struct task_info *t)
{
    const char *open = memchr(text, '(', len), *close = NULL;
    for (size_t i = len; i > 0 && !close; i--)
        if (text[i - 1] == ')')
            close = text + i - 1;
    if (!open || !close || close < open || open - text < 2 || open[-1] != ' ')
        return false;
    uint64_t v[40] = {0};
    char *pid = fuzz_strndup((const uint8_t *)text, (size_t)(open - 1 - text));
    bool pid_ok = strlen(pid) == (size_t)(open - 1 - text) && ref_number(pid, INT32_MAX, &v[1]);
    free(pid);
    if (!pid_ok || !v[1])
        return false;
    /* a NUL is a byte like any other in a field: not a digit, a letter or a blank */
    size_t rlen = (size_t)(text + len - close - 1);
    char *rest = fuzz_strndup((const uint8_t *)close + 1, rlen);
    for (size_t i = 0; i < rlen; i++)
        if (!rest[i])
            rest[i] = '\x01';
    rest[strcspn(rest, "\n")] = '\0';
    char *tok[40] = {0};
    int nf = 2;
    for (char *s = strtok(rest, " "); s && nf < 39; s = strtok(NULL, " "))
        tok[++nf] = s;
    bool ok = nf >= 22 && strlen(tok[3]) == 1 && is_letter(tok[3][0]);
    static const int need[] = {9, 14, 15, 20, 22};
    for (size_t i = 0; ok && i < sizeof(need) / sizeof(need[0]); i++)
        ok = ref_number(tok[need[i]], UINT64_MAX, &v[need[i]]);
    ok = ok && v[14] <= UINT64_MAX - v[15] && (nf < 39 || ref_number(tok[39], INT32_MAX, &v[39]));
    if (ok) {
        t->pid = (int32_t)v[1];
        t->state = tok[3][0];
        t->kthread = v[9] & 0x00200000u;
        t->utime = v[14];
        t->stime = v[15];
        t->nthreads = v[20] > UINT32_MAX ? UINT32_MAX : (unsigned)v[20];
        t->start_ticks = v[22];
        t->last_cpu = nf >= 39 ? (int)v[39] : -1;
    }
    free(rest);
    return ok;
}

/* The comm as shown: a prefix of the raw one with control bytes as '?'. */
static void check_comm(const char *text, size_t len, const char *comm)
{
    const char *open = memchr(text, '(', len), *close = NULL;
    for (size_t i = len; i > 0 && !close; i--)
        if (text[i - 1] == ')')
            close = text + i - 1;
    size_t raw = (size_t)(close - open - 1), n = strnlen(comm, 32);
    FUZZ_CHECK(n < 32);
    FUZZ_CHECK(raw <= 31 ? n == raw : n >= 28);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)open[1 + i];
        FUZZ_CHECK(comm[i] == (c < 0x20 || c == 0x7f ? '?' : (char)c));
    }
}

static void fuzz_stat(const char *text, size_t len)
{
    struct task_info got = {.pid = 77, .comm = "keep"}, want = {0};
    int r = tasks_parse_stat(text, len, &got);
    bool ok = ref_stat(text, len, &want);
    FUZZ_CHECK(r == 0 || r == -EINVAL);
    FUZZ_CHECK(ok == (r == 0));
    if (r < 0) {
        FUZZ_CHECK(got.pid == 77 && strcmp(got.comm, "keep") == 0);
        return;
    }
    FUZZ_CHECK(got.pid == want.pid && got.state == want.state && got.kthread == want.kthread);
    FUZZ_CHECK(got.utime == want.utime && got.stime == want.stime);
    FUZZ_CHECK(got.nthreads == want.nthreads && got.start_ticks == want.start_ticks);
    FUZZ_CHECK(got.last_cpu == want.last_cpu);
    check_comm(text, len, got.comm);
}

/* The first line KEY ':' VALUE; false when absent. *bad when its value is
 * not a number. */
static bool ref_status_key(const char *text, size_t len, const char *key, uint64_t limit,
                           uint64_t *ret, bool *bad)
{
    size_t kl = strlen(key);
    for (size_t i = 0; i < len;) {
        const char *l = text + i, *nl = memchr(l, '\n', len - i);
        size_t ll = nl ? (size_t)(nl - l) : len - i;
        i += ll + 1;
        if (ll <= kl || memcmp(l, key, kl) != 0 || l[kl] != ':')
            continue;
        char *v = fuzz_strndup((const uint8_t *)l + kl + 1, ll - kl - 1);
        bool nul = strlen(v) != ll - kl - 1; /* a NUL inside: garbage there */
        char *s = v + strspn(v, " \t");
        size_t e = strlen(s);
        while (e > 0 && (s[e - 1] == ' ' || s[e - 1] == '\t'))
            s[--e] = '\0';
        *bad = nul || !ref_number(s, limit, ret) || *ret == VAL_NONE;
        free(v);
        return true;
    }
    return false;
}

static void fuzz_status(const char *text, size_t len)
{
    uint64_t vol = 5, invol = 6;
    int32_t tgid = 7;
    int r = tasks_parse_status(text, len, &vol, &invol, &tgid);
    FUZZ_CHECK(r == 0 || r == -EINVAL);
    uint64_t w[3] = {VAL_NONE, VAL_NONE, VAL_NONE};
    bool bad[3] = {false, false, false};
    bool has[3] = {
        ref_status_key(text, len, "voluntary_ctxt_switches", UINT64_MAX, &w[0], &bad[0]),
        ref_status_key(text, len, "nonvoluntary_ctxt_switches", UINT64_MAX, &w[1], &bad[1]),
        ref_status_key(text, len, "Tgid", INT32_MAX, &w[2], &bad[2]),
    };
    bool refused = bad[0] || bad[1] || bad[2] || (has[2] && w[2] == 0);
    FUZZ_CHECK(refused == (r < 0));
    if (r < 0) {
        FUZZ_CHECK(vol == 5 && invol == 6 && tgid == 7);
        return;
    }
    FUZZ_CHECK(vol == (has[0] ? w[0] : VAL_NONE));
    FUZZ_CHECK(invol == (has[1] ? w[1] : VAL_NONE));
    FUZZ_CHECK(tgid == (has[2] ? (int32_t)w[2] : -1));
}

static bool lists_cpu(const char *ctrl)
{
    char *c = strdup(ctrl), *save = NULL;
    bool found = false;
    for (char *s = strtok_r(c, ",", &save); s && !found; s = strtok_r(NULL, ",", &save))
        found = strcmp(s, "cpu") == 0 || strcmp(s, "cpuacct") == 0;
    free(c);
    return found;
}

/* "ID:CONTROLLERS:PATH": the first v2 line, else the first v1 line with
 * cpu or cpuacct; control bytes shown as '?'. */
static char *ref_cgroup(const char *text, size_t len)
{
    char *v1 = NULL;
    for (size_t i = 0; i < len;) {
        const char *l = text + i, *nl = memchr(l, '\n', len - i);
        size_t ll = nl ? (size_t)(nl - l) : len - i;
        i += ll + 1;
        const char *c1 = memchr(l, ':', ll),
                   *c2 = c1 ? memchr(c1 + 1, ':', ll - (size_t)(c1 + 1 - l)) : NULL;
        if (!c2)
            continue;
        size_t plen = ll - (size_t)(c2 + 1 - l);
        if (plen == 0 || plen >= 4096 || memchr(c2 + 1, '\0', plen))
            continue;
        char *path = fuzz_strndup((const uint8_t *)c2 + 1, plen);
        for (char *p = path; *p; p++)
            if ((unsigned char)*p < 0x20 || *p == 0x7f)
                *p = '?';
        size_t clen = (size_t)(c2 - c1 - 1);
        char *ctrl = fuzz_strndup((const uint8_t *)c1 + 1, clen);
        for (size_t k = 0; k < clen; k++)
            if (!ctrl[k])
                ctrl[k] = 'x'; /* never part of "cpu" */
        bool v2 = c1 == l + 1 && *l == '0' && c2 == c1 + 1;
        bool cpu = !v2 && lists_cpu(ctrl);
        free(ctrl);
        if (v2) {
            free(v1);
            return path;
        }
        if (cpu && !v1)
            v1 = path;
        else
            free(path);
    }
    return v1;
}

static void fuzz_cgroup(const char *text, size_t len)
{
    char *got = tasks_parse_cgroup(text, len), *want = ref_cgroup(text, len);
    FUZZ_CHECK(!got == !want);
    if (got) {
        FUZZ_CHECK(strcmp(got, want) == 0);
        FUZZ_CHECK(got[0] && strlen(got) < 4096);
    }
    free(got);
    free(want);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *text = (const char *)data;
    fuzz_stat(text, size);
    fuzz_status(text, size);
    fuzz_cgroup(text, size);
    return 0;
}
