/* irq: interrupt counts from /proc/interrupts (Documentation/filesystems/
 * proc.rst; the format is kernel/irq/proc.c show_interrupts() plus each
 * architecture's arch_show_interrupts()).
 *
 * A header names the CPU columns ("CPU0 CPU2 ..."; only online CPUs, so
 * there are gaps when some are offline). Then one row per source: numbered
 * IRQ lines (" 24:  0  12  IR-PCI-MSI 327680-edge  xhci_hcd") and
 * architecture counters ("LOC: ... Local timer interrupts", "IPI0: ...").
 * A few rows (ERR, MIS, Err) carry one machine-wide total.
 *
 * Every count the kernel prints here is an unsigned int: per-CPU counts
 * wrap at 2^32, which irq_rates() handles. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/diag.h"
#include "sense/sample.h"
#include "sense/sampler.h"

struct irq_source {
    char *label;     /* "24", "LOC", "IPI0", "ERR"; owned */
    char *chip;      /* numbered rows: controller, hwirq and trigger ("IR-PCI-MSI
                        327680-edge"); NULL for named rows and when absent */
    char *name;      /* numbered rows: the handler name(s) ("ehci_hcd:usb1, mmc0"),
                        NULL when no handler is attached; named rows: the kernel's
                        description ("Local timer interrupts"), NULL when none */
    bool numeric;    /* a numbered IRQ line rather than an architecture counter */
    bool total_only; /* one machine-wide count (ERR, MIS): no per-CPU values */
    uint64_t *count; /* interrupts since boot per column of the sample (total_only:
                        one value); owned */
    uint64_t total;  /* sum over the columns */
};

struct irq_sample {
    unsigned ncpus;         /* count columns */
    int *cpu;               /* column -> CPU id, from the header, ascending; owned */
    unsigned nsources;      /* rows, in file order */
    struct irq_source *src; /* owned */
};

extern const struct sampler irq_sampler;

/* Parse the text of /proc/interrupts (len bytes; no NUL needed). Rows that
 * cannot be read (truncated, garbage counts, duplicate labels) are skipped,
 * each with a diagnostic whose `where` is "line N". Fails with -EINVAL (and
 * a diagnostic) only when the CPU header is missing or malformed. */
int irq_parse(const char *text, size_t len, struct irq_sample *ret, struct diags *d);
/* Free what irq_parse() filled in; the struct itself is the caller's. */
void irq_sample_clear(struct irq_sample *s);

/* The row with this label ("LOC", "24"), or NULL. */
const struct irq_source *irq_find(const struct irq_sample *s, const char *label);

/* Rates between two samples, interrupts per second. */
struct irq_rate {
    const struct irq_source *src; /* in the later sample; borrowed */
    double per_s;                 /* summed over CPUs online in both samples;
                                     NaN when a counter went backwards */
    double *cpu_per_s;            /* per column of the later sample; NaN for a CPU
                                     not online in the earlier one; NULL for
                                     total_only rows; owned */
};

struct irq_rates {
    unsigned nsources;
    struct irq_rate *src; /* sources in both samples, in the later one's order */
    unsigned ncpus;
    int *cpu;          /* CPUs online in either sample, ascending; owned */
    double *cpu_per_s; /* interrupts/s arriving on each CPU, over every per-CPU
                          row; NaN when the CPU was not online in both; owned */
    unsigned nchanged; /* sources that appeared, disappeared or were renamed */
};

/* Differences b - a over interval_s seconds. Sources present in only one
 * sample (a driver loaded or unloaded), CPUs online in only one, and
 * counters that went backwards are left out, each with a note in d. */
int irq_rates(const struct irq_sample *a, const struct irq_sample *b, double interval_s,
              struct irq_rates *ret, struct diags *d);
void irq_rates_free(struct irq_rates *r);

/* Counter difference y - x, allowing one wrap of the kernel's 32-bit
 * counters. -ERANGE when the counter went backwards. */
int irq_count_delta(uint64_t x, uint64_t y, uint64_t *ret);
