/* Fuzz target: tune/profile.h, profile_parse_text() of one profile file
 * (inih with our own line reader), and profile_value_check() against the
 * typed parsers the plan and the guard use.
 *
 * Accepted text: every value has a known (section, key), is "" (a
 * removal) or passes its key's check, has an origin "fuzz.conf:LINE" with
 * LINE inside the text, and appears once; [profile] keys never leak into
 * the values; includes are valid names. Written back as INI (where its
 * lines fit inih's buffer) it parses to the same values: a round trip.
 * Refused text: -EINVAL, a message "fuzz.conf:LINE: ...", *ret untouched.
 *
 * Values: the first byte picks a key, the rest (to the first NUL or
 * newline) is the value. A value the check accepts must also parse with
 * the typed parser of its kind, and one it refuses gives a message. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>

#include "base/cpuset.h"
#include "base/strbuf.h"
#include "fuzz.h"
#include "tune/profile.h"

#define ORIGIN "fuzz.conf"

static size_t count_lines(const char *s)
{
    size_t n = 1;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

static void check_value(const struct profile_value *v, size_t lines)
{
    const struct profile_key *k = profile_key_find(v->section, v->key);
    FUZZ_CHECK(k != NULL);
    FUZZ_CHECK(strcmp(v->section, "profile") != 0);
    if (*v->value) {
        char *err = NULL;
        FUZZ_CHECK(profile_value_check(k, v->value, &err) == 0 && err == NULL);
    }
    FUZZ_CHECK(strncmp(v->origin, ORIGIN ":", strlen(ORIGIN) + 1) == 0);
    long line = strtol(v->origin + strlen(ORIGIN) + 1, NULL, 10);
    FUZZ_CHECK(line >= 1 && (size_t)line <= lines);
}

/* Back to INI; false when a line would not fit inih's buffer. */
static bool write_back(const struct profile *p, char **inc, size_t ninc, struct strbuf *b)
{
    bool fits = true;
    strbuf_append(b, "[profile]\n");
    if (p->description)
        strbuf_appendf(b, "description =%s\n", p->description);
    if (ninc) {
        strbuf_append(b, "include = ");
        for (size_t i = 0; i < ninc; i++)
            strbuf_appendf(b, "%s%s", i ? ", " : "", inc[i]);
        strbuf_append(b, "\n");
    }
    for (size_t i = 0; i < p->n; i++) {
        const struct profile_value *v = &p->v[i];
        /* "key =;x": a blank before ';' would make it a comment */
        strbuf_appendf(b, "[%s]\n%s =%s\n", v->section, v->key, v->value);
        fits &= strlen(v->key) + 3 + strlen(v->value) < 190 && !strpbrk(v->value, "\n\r");
    }
    return fits &&
           (!p->description || (strlen(p->description) < 180 && !strpbrk(p->description, "\n\r")));
}

static void round_trip(const struct profile *p, char **inc, size_t ninc)
{
    struct strbuf b = {0};
    if (write_back(p, inc, ninc, &b)) {
        struct profile *q = NULL;
        char **inc2 = NULL;
        size_t ninc2 = 0;
        char *err = NULL;
        int r = profile_parse_text(strbuf_str(&b), ORIGIN, &q, &inc2, &ninc2, &err);
        if (r < 0)
            fprintf(stderr, "round trip refused: %s\n%s", err, strbuf_str(&b));
        FUZZ_CHECK(r == 0);
        FUZZ_CHECK(q->n == p->n && ninc2 == ninc);
        for (size_t i = 0; i < p->n; i++) {
            FUZZ_CHECK(strcmp(q->v[i].section, p->v[i].section) == 0);
            FUZZ_CHECK(strcmp(q->v[i].key, p->v[i].key) == 0);
            FUZZ_CHECK(strcmp(q->v[i].value, p->v[i].value) == 0);
        }
        for (size_t i = 0; i < ninc; i++)
            FUZZ_CHECK(strcmp(inc[i], inc2[i]) == 0);
        FUZZ_CHECK((p->description == NULL) == (q->description == NULL));
        FUZZ_CHECK(!p->description || strcmp(p->description, q->description) == 0);
        profile_free(q);
        profile_names_free(inc2, ninc2);
    }
    strbuf_free(&b);
}

static void fuzz_text(const char *text)
{
    struct profile *p = (struct profile *)0x1;
    char **inc = (char **)0x1;
    size_t ninc = 7;
    char *err = NULL;
    int r = profile_parse_text(text, ORIGIN, &p, &inc, &ninc, &err);
    if (r < 0) {
        FUZZ_CHECK(r == -EINVAL);
        FUZZ_CHECK(err && strncmp(err, ORIGIN ":", strlen(ORIGIN) + 1) == 0);
        char *end;
        long line = strtol(err + strlen(ORIGIN) + 1, &end, 10);
        FUZZ_CHECK(line >= 1 && (size_t)line <= count_lines(text) && strncmp(end, ": ", 2) == 0);
        FUZZ_CHECK(p == (struct profile *)0x1 && inc == (char **)0x1 && ninc == 7);
        free(err);
        return;
    }
    FUZZ_CHECK(r == 0 && err == NULL && p != NULL);
    size_t lines = count_lines(text);
    for (size_t i = 0; i < p->n; i++) {
        check_value(&p->v[i], lines);
        for (size_t j = 0; j < i; j++)
            FUZZ_CHECK(strcmp(p->v[i].section, p->v[j].section) != 0 ||
                       strcmp(p->v[i].key, p->v[j].key) != 0);
    }
    for (size_t i = 0; i < ninc; i++)
        FUZZ_CHECK(profile_name_ok(inc[i]));
    round_trip(p, inc, ninc);
    profile_free(p);
    profile_names_free(inc, ninc);
}

static void fuzz_value(const uint8_t *data, size_t size)
{
    if (size < 1)
        return;
    const struct profile_key *k = &profile_keys[data[0] % profile_nkeys];
    size_t n = 0;
    while (1 + n < size && data[1 + n] && data[1 + n] != '\n')
        n++;
    char *v = fuzz_strndup(data + 1, n);
    char *err = NULL;
    int r = profile_value_check(k, v, &err);
    if (r < 0) {
        FUZZ_CHECK(r == -EINVAL && err && *err);
        free(err);
        free(v);
        return;
    }
    FUZZ_CHECK(r == 0 && err == NULL);
    struct profile_freq f;
    struct profile_latency l;
    struct profile_workload w;
    struct cpuset set;
    switch (k->kind) {
    case PROFILE_KEY_FREQ:
        FUZZ_CHECK(profile_parse_freq(v, &f) == 0);
        FUZZ_CHECK(f.kind != PROFILE_FREQ_KHZ || (f.value >= 1 && f.value <= 1e8));
        FUZZ_CHECK(f.kind != PROFILE_FREQ_PCT || (f.value >= 1 && f.value <= 100));
        break;
    case PROFILE_KEY_LATENCY:
        FUZZ_CHECK(profile_parse_latency(v, &l) == 0);
        FUZZ_CHECK(l.kind != PROFILE_LATENCY_US || (l.us >= k->min && l.us <= k->max));
        break;
    case PROFILE_KEY_WORKLOAD:
        FUZZ_CHECK(profile_parse_workload(v, &w) == 0);
        FUZZ_CHECK(w.kind == PROFILE_WORKLOAD_PORT ? w.port >= 1 && w.port <= 65535
                                                   : w.arg && *w.arg);
        break;
    case PROFILE_KEY_CPUS:
        r = profile_parse_cpus(v, &set);
        FUZZ_CHECK(r == 0 || r == 1);
        if (r == 0) {
            FUZZ_CHECK(cpuset_count(&set) > 0);
            cpuset_free(&set);
        }
        break;
    case PROFILE_KEY_GPUS: {
        char **ids = NULL;
        size_t nids = 0;
        r = profile_parse_gpus(v, &ids, &nids);
        FUZZ_CHECK(r == 0 || r == 1);
        if (r == 0) {
            FUZZ_CHECK(nids > 0);
            profile_names_free(ids, nids);
        }
        break;
    }
    default:
        break;
    }
    free(v);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = fuzz_strndup(data, size);
    fuzz_text(text);
    free(text);
    fuzz_value(data, size);
    return 0;
}
