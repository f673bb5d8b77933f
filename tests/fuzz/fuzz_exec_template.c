/* Fuzz target: fleet/engine/exec_tmpl.h, fx_tmpl_split() and
 * fx_tmpl_argv() (the exec engine's command templates, fleet.ini's [exec]
 * keys).
 *
 * Refused: -EINVAL and a message that quotes the template ("... in '").
 * Accepted: at least one word, none in the first word a placeholder, only
 * the allowed placeholders; with values full of blanks, quotes and
 * "{vm}", the argv has exactly as many words as the template (a value is
 * never split); and a round trip: each word written back (every literal
 * byte escaped, each placeholder as ''{NAME}) splits to the same argv. The
 * input's first byte chooses the keys' placeholders (list or migrate). */
#include <errno.h>
#include <stdbool.h>

#include "fleet/engine/exec_tmpl.h"
#include "fuzz.h"

static const char *const values[FX_VAR_N] = {
    "h 1", "' \" $(touch x) `y` {vm}", "", "\\ \t\n;|*", "{src}", "${dst}", "'",
};

/* T written back by the quoting rule: every literal byte escaped with a
 * backslash, each placeholder as ''{NAME} (never glued to a '$'), an
 * empty word as ''. */
static char *write_back(const struct fx_tmpl *t)
{
    size_t cap = 16;
    for (size_t i = 0; i < t->n; i++)
        for (size_t k = 0; k < t->w[i].n; k++)
            cap += 4 + (t->w[i].v[k].text ? 2 * strlen(t->w[i].v[k].text) : 16);
    char *s = malloc(cap);
    FUZZ_CHECK(s != NULL);
    size_t o = 0;
    for (size_t i = 0; i < t->n; i++) {
        size_t start = o;
        for (size_t k = 0; k < t->w[i].n; k++) {
            const struct fx_part *p = &t->w[i].v[k];
            if (p->var >= 0) {
                o += (size_t)snprintf(s + o, cap - o, "''{%s}", fx_var_name(p->var));
                continue;
            }
            for (const char *c = p->text; *c; c++) {
                s[o++] = '\\';
                s[o++] = *c;
            }
        }
        if (o == start) {
            s[o++] = '\'';
            s[o++] = '\'';
        }
        s[o++] = ' ';
        FUZZ_CHECK(o < cap);
    }
    s[o] = '\0';
    return s;
}

static size_t argc_of(char **argv)
{
    size_t n = 0;
    while (argv[n])
        n++;
    return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    unsigned allowed = size && (data[0] & 1) ? FX_VARS_MIGRATE : FX_VARS_HOST;
    char *text = fuzz_strndup(data, size);
    struct fx_tmpl t;
    char why[300] = "";
    int r = fx_tmpl_split(text, allowed, &t, why, sizeof(why));
    if (r < 0) {
        FUZZ_CHECK(r == -EINVAL);
        FUZZ_CHECK(strstr(why, " in '") != NULL);
        free(text);
        return 0;
    }
    FUZZ_CHECK(r == 0 && t.n >= 1);
    for (size_t i = 0; i < t.n; i++) {
        FUZZ_CHECK(t.w[i].n >= 1);
        for (size_t k = 0; k < t.w[i].n; k++) {
            const struct fx_part *p = &t.w[i].v[k];
            FUZZ_CHECK(p->var < 0 ? p->text != NULL : (p->text == NULL && p->var < FX_VAR_N));
            FUZZ_CHECK(p->var < 0 || (allowed & FX_VARS(p->var)));
            FUZZ_CHECK(p->var < 0 || i > 0);
        }
    }
    char **argv = fx_tmpl_argv(&t, values);
    FUZZ_CHECK(argc_of(argv) == t.n);

    char *back = write_back(&t);
    struct fx_tmpl t2;
    FUZZ_CHECK(fx_tmpl_split(back, allowed, &t2, why, sizeof(why)) == 0);
    char **argv2 = fx_tmpl_argv(&t2, values);
    FUZZ_CHECK(argc_of(argv2) == t.n);
    for (size_t i = 0; i < t.n; i++)
        FUZZ_CHECK(strcmp(argv[i], argv2[i]) == 0);
    fx_argv_free(argv2);
    fx_tmpl_free(&t2);
    free(back);
    fx_argv_free(argv);
    fx_tmpl_free(&t);
    free(text);
    return 0;
}
