/* Fuzz target: sense/irq.h, irq_parse() of /proc/interrupts.
 *
 * The input is passed with its exact length and no NUL, as the parser
 * promises to need none (ASan catches a read past the end). Accepted: CPU
 * columns ascending, labels unique and findable, each row's total the sum
 * of its counts, and a sample differenced with itself gives zero rates.
 * Refused: only -EINVAL, with a diagnostic saying why. */
#include <ctype.h>
#include <errno.h>
#include <math.h>

#include "fuzz.h"
#include "sense/irq.h"

static void check_source(const struct irq_sample *s, const struct irq_source *src)
{
    FUZZ_CHECK(src->label && src->label[0]);
    for (const char *p = src->label; *p; p++)
        FUZZ_CHECK(!isspace((unsigned char)*p) && *p != ':');
    FUZZ_CHECK(irq_find(s, src->label) == src); /* unique */
    FUZZ_CHECK(!(src->numeric && src->total_only));
    unsigned n = src->total_only ? 1 : s->ncpus;
    FUZZ_CHECK(n == 0 || src->count != NULL);
    uint64_t sum = 0;
    for (unsigned c = 0; c < n; c++)
        sum += src->count[c];
    FUZZ_CHECK(sum == src->total);
}

static void check_self_rates(const struct irq_sample *s)
{
    struct irq_rates r = {0};
    struct diags d = {0};
    FUZZ_CHECK(irq_rates(s, s, 1.0, &r, &d) == 0);
    FUZZ_CHECK(r.nsources == s->nsources && r.nchanged == 0);
    FUZZ_CHECK(r.ncpus == s->ncpus);
    for (unsigned i = 0; i < r.nsources; i++) {
        FUZZ_CHECK(r.src[i].per_s == 0);
        if (r.src[i].cpu_per_s)
            for (unsigned c = 0; c < s->ncpus; c++)
                FUZZ_CHECK(r.src[i].cpu_per_s[c] == 0);
    }
    for (unsigned c = 0; c < r.ncpus; c++)
        FUZZ_CHECK(r.cpu_per_s[c] == 0);
    irq_rates_free(&r);
    diags_free(&d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct irq_sample s = {0};
    struct diags d = {0};
    int r = irq_parse((const char *)data, size, &s, &d);
    if (r < 0) {
        FUZZ_CHECK(r == -EINVAL && d.n > 0);
        diags_free(&d);
        return 0;
    }
    FUZZ_CHECK(r == 0);
    FUZZ_CHECK(s.ncpus == 0 || s.cpu != NULL);
    for (unsigned c = 0; c < s.ncpus; c++)
        FUZZ_CHECK(s.cpu[c] >= 0 && (c == 0 || s.cpu[c] > s.cpu[c - 1]));
    size_t lines = 1;
    for (size_t i = 0; i < size; i++)
        lines += data[i] == '\n';
    FUZZ_CHECK(s.nsources < lines);
    for (unsigned i = 0; i < s.nsources; i++)
        check_source(&s, &s.src[i]);
    check_self_rates(&s);
    irq_sample_clear(&s);
    diags_free(&d);
    return 0;
}
