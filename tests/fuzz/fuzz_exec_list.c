/* Fuzz target: fleet/engine/exec_cmd.h, fx_exec_list_parse() (what the exec
 * engine's `list` command prints: "NAME STATE CPU_NS MEM_KIB VCPUS" a
 * line).
 *
 * Refused: -EINVAL, a message "WHO output line N: ..." with N a line of
 * the input, *ret untouched. Accepted: at most one VM a line, each name
 * a non-empty piece of the input, blanks inside it but none around it, no
 * leading '#' or '-', within the name rule (fx_vm_name_check(): no
 * control character, no '/', UTF-8), no name twice, running only if
 * active; and a round trip: the list written back (one canonical line a
 * VM) parses to the same list. */
#include <errno.h>
#include <stdbool.h>

#include "fleet/engine/exec.h"
#include "fleet/engine/exec_cmd.h"
#include "fuzz.h"

#define WHO "host h1: list command"

static bool same_domain(const struct fx_domain *a, const struct fx_domain *b)
{
    return strcmp(a->name, b->name) == 0 && a->active == b->active && a->running == b->running &&
           a->persistent == b->persistent && a->cpu_ns == b->cpu_ns && a->vcpus == b->vcpus &&
           a->mem_kib == b->mem_kib;
}

static void round_trip(const struct fx_list *l)
{
    size_t cap = 1, len = 0;
    for (size_t i = 0; i < l->n; i++)
        cap += strlen(l->v[i].name) + 80;
    char *text = malloc(cap);
    FUZZ_CHECK(text != NULL);
    text[0] = '\0';
    for (size_t i = 0; i < l->n; i++) {
        const struct fx_domain *d = &l->v[i];
        const char *state = d->running ? "running" : d->active ? "paused" : "shutoff";
        len += (size_t)snprintf(text + len, cap - len, "%s %s %llu %llu %u\n", d->name, state,
                                (unsigned long long)d->cpu_ns, (unsigned long long)d->mem_kib,
                                d->vcpus);
        FUZZ_CHECK(len < cap);
    }
    struct fx_list again;
    struct fleet_error err = {{0}};
    FUZZ_CHECK(fx_exec_list_parse(text, WHO, &again, &err) == 0);
    FUZZ_CHECK(again.n == l->n);
    for (size_t i = 0; i < l->n; i++)
        FUZZ_CHECK(same_domain(&l->v[i], &again.v[i]));
    fx_list_free(&again);
    free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = fuzz_strndup(data, size);
    char *orig = fuzz_strndup(data, size);
    size_t lines = 1;
    for (const char *p = orig; *p; p++)
        lines += *p == '\n';
    struct fx_list l, untouched;
    memset(&l, 0xa5, sizeof(l));
    memcpy(&untouched, &l, sizeof(l));
    struct fleet_error err = {{0}};
    int r = fx_exec_list_parse(text, WHO, &l, &err);
    if (r < 0) {
        FUZZ_CHECK(r == -EINVAL);
        FUZZ_CHECK(memcmp(&l, &untouched, sizeof(l)) == 0);
        const char *pre = WHO " output line ";
        FUZZ_CHECK(strncmp(err.msg, pre, strlen(pre)) == 0);
        char *end;
        unsigned long line = strtoul(err.msg + strlen(pre), &end, 10);
        FUZZ_CHECK(line >= 1 && line <= lines && strncmp(end, ": ", 2) == 0 && end[2]);
    } else {
        FUZZ_CHECK(r == 0 && l.n <= lines);
        for (size_t i = 0; i < l.n; i++) {
            const struct fx_domain *d = &l.v[i];
            FUZZ_CHECK(d->name && d->name[0] && d->name[0] != '#' && d->name[0] != '-');
            FUZZ_CHECK(!strpbrk(d->name, "\t\r\n/") && strstr(orig, d->name));
            FUZZ_CHECK(d->name[0] != ' ' && d->name[strlen(d->name) - 1] != ' ');
            char why[400];
            FUZZ_CHECK(fx_vm_name_check(d->name, why, sizeof(why)) == 0);
            FUZZ_CHECK(!d->running || d->active);
            FUZZ_CHECK(d->persistent);
            for (size_t k = 0; k < i; k++)
                FUZZ_CHECK(strcmp(l.v[k].name, d->name) != 0);
        }
        round_trip(&l);
        fx_list_free(&l);
    }
    free(orig);
    free(text);
    return 0;
}
