/* Fuzz target: tracefs_parse_format() and the field readers
 * (sense/tracefs.h), and wake_decode() with the accounting behind it
 * (sense/wakeups.h). All run on every input:
 *
 * - the input as the text of a `format` file: accepted, every field is
 *   sane (a name, in range, a __data_loc is 4 bytes) and found again by
 *   name; refused, only -EBADMSG and ret untouched. Then the input is
 *   read as a record of that very format: every field read stays inside
 *   the input, or fails with -ERANGE/-EINVAL.
 * - the input as raw records of the six real formats (kernel 6.18), at
 *   every 4-byte offset, the event id taken from the record's common_type
 *   as the tracer does: 0, -ENOENT, -ERANGE or -EBADMSG; a decoded name
 *   lies inside the input. The decoded events are fed to a small
 *   accounting table, whose window must add up.
 *
 * The input has no terminating NUL (ASan sees any read past the end). */
#include <errno.h>
#include <stdbool.h>

#include "../unit/wake_formats.h"
#include "base/util.h"
#include "fuzz.h"
#include "sense/tracefs.h"
#include "sense/wake_internal.h"
#include "sense/wakeups.h"

static bool inside(const void *p, size_t n, const uint8_t *data, size_t size)
{
    const uint8_t *q = p;
    return q >= data && q <= data + size && n <= (size_t)(data + size - q);
}

static void check_fields(const struct tracefs_format *f, const uint8_t *data, size_t size)
{
    FUZZ_CHECK(f->nfields > 0 && f->fields);
    FUZZ_CHECK(memchr(f->name, '\0', sizeof(f->name)));
    for (unsigned i = 0; i < f->nfields; i++) {
        const struct tracefs_field *fl = &f->fields[i];
        size_t nl = strnlen(fl->name, sizeof(fl->name));
        FUZZ_CHECK(nl > 0 && nl < sizeof(fl->name));
        FUZZ_CHECK(fl->size > 0 && fl->offset + fl->size <= 65536);
        FUZZ_CHECK(!fl->dynamic || fl->size == 4);
        const struct tracefs_field *found = tracefs_find_field(f, fl->name);
        FUZZ_CHECK(found && found <= fl && strcmp(found->name, fl->name) == 0);

        uint64_t v = 0;
        int r = tracefs_field_u64(fl, data, size, &v);
        FUZZ_CHECK(r == 0 || r == -ERANGE || r == -EINVAL);
        FUZZ_CHECK(r != 0 || fl->offset + fl->size <= size);
        FUZZ_CHECK(r != -EINVAL ||
                   !(fl->size == 1 || fl->size == 2 || fl->size == 4 || fl->size == 8));
        const char *s = (const char *)0x1;
        size_t n = 7;
        r = tracefs_field_str(fl, data, size, &s, &n);
        FUZZ_CHECK(r == 0 || r == -ERANGE || r == -EINVAL);
        if (r == 0)
            FUZZ_CHECK(inside(s, n, data, size) && !memchr(s, '\0', n));
        else
            FUZZ_CHECK(s == (const char *)0x1 && n == 7);
    }
}

static void fuzz_format(const uint8_t *data, size_t size)
{
    struct tracefs_format f = {.id = 4242};
    int r = tracefs_parse_format((const char *)data, size, &f, NULL);
    if (r < 0) {
        FUZZ_CHECK(r == -EBADMSG && f.id == 4242 && !f.fields);
        return;
    }
    FUZZ_CHECK(r == 0);
    check_fields(&f, data, size);
    tracefs_format_clear(&f);
    FUZZ_CHECK(f.nfields == 0 && !f.fields);
}

static struct wake_formats real;

static bool known_id(unsigned id)
{
    for (size_t i = 0; i < ARRAY_SIZE(real_formats); i++)
        if (real.fmt[real_formats[i].slot].id == id)
            return true;
    return false;
}

static void check_event(const struct wake_event *ev, unsigned id, int cpu, const uint8_t *rec,
                        size_t len)
{
    FUZZ_CHECK(ev->cpu == cpu);
    unsigned slot = ev->type == WEV_IDLE_EXIT ? WEV_IDLE_ENTER : (unsigned)ev->type;
    FUZZ_CHECK(slot < ARRAY_SIZE(real.fmt) && real.fmt[slot].id == id);
    if (slot == WEV_IDLE_ENTER)
        FUZZ_CHECK((ev->type == WEV_IDLE_EXIT) == (ev->state == UINT32_MAX));
    if (ev->name_len)
        FUZZ_CHECK(ev->name && inside(ev->name, ev->name_len, rec, len));
    if (ev->type != WEV_WAKEUP && ev->type != WEV_IRQ)
        FUZZ_CHECK(ev->name_len == 0);
}

static void check_window(const struct wake_window *w, size_t max)
{
    uint64_t ev = 0, idle = 0, cpu_idle = 0;
    FUZZ_CHECK(w->n <= max + 2);
    for (size_t i = 0; i < w->n; i++) {
        ev += w->e[i].events;
        idle += w->e[i].idle_wakeups;
        FUZZ_CHECK(memchr(w->e[i].name, '\0', sizeof(w->e[i].name)));
    }
    for (unsigned i = 0; i < w->ncpus; i++)
        cpu_idle += w->cpu_idle_wakeups[i];
    FUZZ_CHECK(ev == w->total_events);
    FUZZ_CHECK(idle == w->total_idle_wakeups && cpu_idle == idle);
}

static void fuzz_records(const uint8_t *data, size_t size)
{
    enum { MAX_ENTRIES = 8 };
    struct wake_acct *a = wake_acct_new(MAX_ENTRIES);
    uint64_t timers[] = {0xffffffff8142d130ULL, 0xffffffff81756fc0ULL};
    wake_acct_set_task_timers(a, timers, 2);
    uint64_t fed = 0;
    for (size_t off = 0; off <= size && off < 256; off += 4) {
        const uint8_t *rec = data + off;
        size_t len = size - off;
        unsigned id = len >= 2 ? (unsigned)(rec[0] | rec[1] << 8) : 0;
        int cpu = (int)(off / 4 % 3) - (off == 8); /* -1 once: out of range */
        struct wake_event ev = {.pid = 31337};
        int r = wake_decode(&real, id, rec, len, cpu, &ev);
        FUZZ_CHECK(r == 0 || r == -ENOENT || r == -ERANGE || r == -EBADMSG);
        FUZZ_CHECK((r == -ENOENT) == !known_id(id));
        if (r < 0) {
            FUZZ_CHECK(ev.pid == 31337);
            continue;
        }
        check_event(&ev, id, cpu, rec, len);
        wake_acct_feed(a, &ev);
        fed += ev.type != WEV_IDLE_ENTER && ev.type != WEV_IDLE_EXIT;
    }
    struct wake_window w;
    wake_acct_take(a, 2000000000, &w);
    check_window(&w, MAX_ENTRIES);
    FUZZ_CHECK(w.total_events == fed);
    wake_window_clear(&w);
    wake_acct_free(a);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static bool loaded;
    if (!loaded) {
        FUZZ_CHECK(real_formats_load(&real) == 0);
        loaded = true;
    }
    fuzz_format(data, size);
    fuzz_records(data, size);
    return 0;
}
