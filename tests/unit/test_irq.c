#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* cmocka.h needs stdarg, stddef, stdint and setjmp first */
#include <cmocka.h>

#include "sense/irq.h"
#include "tree.h"

/* A 2-vCPU Firecracker VM, kernel 6.18 (abridged: every kind of row kept). */
static const char live_vm[] =
    "           CPU0       CPU1       \n"
    " 24:          1          0  IO-APIC   5-edge      ACPI:Ged\n"
    " 26:          0         13  IO-APIC   4-edge      ttyS0\n"
    " 28:          0          0 PCI-MSIX-0000:00:01.0   0-edge      virtio0-config\n"
    " 36:          0      44799 PCI-MSIX-0000:00:02.0   1-edge      virtio1-req.0\n"
    " 41:       1985          0 PCI-MSIX-0000:00:04.0   1-edge      virtio3-rx\n"
    "NMI:          0          0   Non-maskable interrupts\n"
    "LOC:      28490      28600   Local timer interrupts\n"
    "RES:       5720       4327   Rescheduling interrupts\n"
    "CAL:      30217      20551   Function call interrupts\n"
    "HYP:        104         21   Hypervisor callback interrupts\n"
    "ERR:          0\n"
    "MIS:          0\n"
    "PIN:          0          0   Posted-interrupt notification event\n"
    "PIW:          0          0   Posted-interrupt wakeup event\n";

static void parse_ok(const char *text, struct irq_sample *s, struct diags *d)
{
    *d = (struct diags){0};
    assert_int_equal(irq_parse(text, strlen(text), s, d), 0);
}

static void test_parse_live_vm(void **state)
{
    struct irq_sample s;
    struct diags d;
    parse_ok(live_vm, &s, &d);
    assert_int_equal(d.n, 0);
    assert_int_equal(s.ncpus, 2);
    assert_int_equal(s.cpu[1], 1);
    assert_int_equal(s.nsources, 14);
    const struct irq_source *v = irq_find(&s, "36");
    assert_non_null(v);
    assert_true(v->numeric);
    assert_string_equal(v->chip, "PCI-MSIX-0000:00:02.0 1-edge");
    assert_string_equal(v->name, "virtio1-req.0");
    assert_int_equal(v->count[1], 44799);
    assert_int_equal(v->total, 44799);
    assert_string_equal(irq_find(&s, "24")->name, "ACPI:Ged");
    const struct irq_source *loc = irq_find(&s, "LOC");
    assert_false(loc->numeric);
    assert_null(loc->chip);
    assert_string_equal(loc->name, "Local timer interrupts");
    assert_int_equal(loc->total, 28490 + 28600);
    const struct irq_source *err = irq_find(&s, "ERR");
    assert_true(err->total_only);
    assert_null(err->name);
    assert_false(irq_find(&s, "LOC")->total_only);
    assert_null(irq_find(&s, "nope"));
    irq_sample_clear(&s);
    diags_free(&d);
}

static char *slurp(const char *rel)
{
    const char *dir = getenv("WATT_TESTDIR");
    char path[4096];
    snprintf(path, sizeof(path), "%s/fixtures/node_exporter/%s", dir ? dir : "tests", rel);
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    char *buf = calloc(1, 1 << 20);
    size_t n = fread(buf, 1, (1 << 20) - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static void test_parse_node_exporter(void **state)
{
    char *text = slurp("proc/interrupts");
    if (!text)
        skip();
    struct irq_sample s;
    struct diags d;
    parse_ok(text, &s, &d);
    assert_int_equal(d.n, 0);
    assert_int_equal(s.ncpus, 4);
    assert_int_equal(s.nsources, 30);
    const struct irq_source *usb = irq_find(&s, "16");
    assert_string_equal(usb->chip, "IR-IO-APIC-fasteoi");
    assert_string_equal(usb->name, "ehci_hcd:usb1, mmc0");
    assert_string_equal(irq_find(&s, "0")->name, "timer");
    assert_string_equal(irq_find(&s, "0")->chip, "IR-IO-APIC-edge");
    assert_string_equal(irq_find(&s, "41")->name, "dmar1");
    assert_int_equal(irq_find(&s, "LOC")->total, 174326351ULL + 135776678 + 168393257 + 130980079);
    assert_int_equal(irq_find(&s, "46")->count[0], 43078464);
    assert_true(irq_find(&s, "MIS")->total_only);
    assert_string_equal(irq_find(&s, "MCP")->name, "Machine check polls");
    irq_sample_clear(&s);
    diags_free(&d);
    free(text);
}

static void test_parse_aarch64(void **state)
{
    char *text = slurp("proc/interrupts_aarch64");
    if (!text)
        skip();
    struct irq_sample s;
    struct diags d;
    parse_ok(text, &s, &d);
    assert_int_equal(d.n, 0); /* the trailing blank line is no row */
    assert_int_equal(s.ncpus, 8);
    const struct irq_source *t = irq_find(&s, "10");
    assert_string_equal(t->chip, "GICv3 27 Level");
    assert_string_equal(t->name, "arch_timer");
    assert_int_equal(t->count[7], 3225020442ULL);
    assert_string_equal(irq_find(&s, "57")->name, "ena-mgmnt@pci:0000:00:05.0");
    assert_string_equal(irq_find(&s, "50")->chip, "ARMH0061:00 3 Edge");
    /* "IPI0:2768808080": no blank after the colon */
    const struct irq_source *ipi = irq_find(&s, "IPI0");
    assert_int_equal(ipi->count[0], 2768808080ULL);
    assert_string_equal(ipi->name, "Rescheduling interrupts");
    assert_string_equal(irq_find(&s, "IPI3")->name, "CPU stop (for crash dump) interrupts");
    assert_true(irq_find(&s, "Err")->total_only);
    irq_sample_clear(&s);
    diags_free(&d);
    free(text);
}

static void test_parse_gaps_and_no_handler(void **state)
{
    /* CPU1 offline: columns are CPU0, CPU2, CPU3. IRQ 9 has no handler. */
    const char *text = "           CPU0       CPU2       CPU3\n"
                       "  9:          5          6          7   IO-APIC   9-fasteoi\n"
                       " 12:          1          2          3   IO-APIC  12-edge      i8042\n"
                       "LOC:         10         20         30   Local timer interrupts\n";
    struct irq_sample s;
    struct diags d;
    parse_ok(text, &s, &d);
    assert_int_equal(s.ncpus, 3);
    assert_int_equal(s.cpu[0], 0);
    assert_int_equal(s.cpu[1], 2);
    assert_int_equal(s.cpu[2], 3);
    assert_null(irq_find(&s, "9")->name);
    assert_string_equal(irq_find(&s, "9")->chip, "IO-APIC 9-fasteoi");
    assert_string_equal(irq_find(&s, "12")->name, "i8042");
    irq_sample_clear(&s);
    diags_free(&d);
}

static void test_parse_bad(void **state)
{
    struct irq_sample s;
    struct diags d = {0};
    /* missing header: columns cannot be mapped */
    const char *nohdr = " 24:          1          0  IO-APIC   5-edge      ACPI:Ged\n";
    assert_int_equal(irq_parse(nohdr, strlen(nohdr), &s, &d), -EINVAL);
    assert_int_equal(d.n, 1);
    assert_non_null(strstr(d.v[0].what, "CPU header"));
    diags_free(&d);
    assert_int_equal(irq_parse("", 0, &s, &d), -EINVAL);
    diags_free(&d);
    assert_int_equal(irq_parse("CPU0 CPU0\n", 10, &s, &d), -EINVAL); /* not ascending */
    diags_free(&d);
    assert_int_equal(irq_parse("CPU0 CPUx\n", 10, &s, &d), -EINVAL);
    diags_free(&d);

    /* bad rows are skipped one by one, the rest is kept */
    const char *text = "           CPU0       CPU1\n"
                       " 24:          1          0  IO-APIC   5-edge      ACPI:Ged\n"
                       " 25:         1x          0  IO-APIC   6-edge      ACPI:Ged\n"
                       "garbage without a colon\n"
                       " 26: 99999999999999999999999  0  IO-APIC 4-edge ttyS0\n"
                       " 24:          5          5  IO-APIC   5-edge      again\n"
                       "CAL:\n"
                       "LOC:      28490      28600   Local timer interrupts\n"
                       "RES:       5720";
    parse_ok(text, &s, &d);
    assert_int_equal(s.nsources, 2);
    assert_non_null(irq_find(&s, "24"));
    assert_non_null(irq_find(&s, "LOC"));
    assert_int_equal(irq_find(&s, "24")->total, 1);
    assert_int_equal(d.n, 6);
    assert_string_equal(d.v[0].where, "line 3");
    assert_non_null(strstr(d.v[0].what, "garbage count"));
    assert_non_null(strstr(d.v[1].what, "LABEL"));
    assert_non_null(strstr(d.v[3].what, "duplicate"));
    assert_non_null(strstr(d.v[4].what, "no counts"));
    assert_non_null(strstr(d.v[5].what, "truncated")); /* "RES: 5720", cut short */
    assert_string_equal(d.v[5].where, "line 9");
    irq_sample_clear(&s);
    diags_free(&d);

    /* a truncated numbered row with fewer counts than CPUs */
    const char *trunc = "CPU0 CPU1 CPU2\n 5: 1 2\n 6: 1 2 3 IO-APIC 6-edge x\n";
    parse_ok(trunc, &s, &d);
    assert_int_equal(s.nsources, 1);
    assert_non_null(strstr(d.v[0].what, "truncated"));
    irq_sample_clear(&s);
    diags_free(&d);
}

static void test_parse_not_terminated(void **state)
{
    const char buf[] = "CPU0\n 7: 12 IO-APIC 7-edge dev\n 8: 13 IO-APIC 8-edge dev";
    struct irq_sample s;
    struct diags d = {0};
    char *copy = malloc(31); /* up to the first row's '\n', no NUL */
    memcpy(copy, buf, 31);
    assert_int_equal(irq_parse(copy, 31, &s, &d), 0);
    assert_int_equal(s.nsources, 1);
    assert_string_equal(s.src[0].name, "dev");
    irq_sample_clear(&s);
    diags_free(&d);
    free(copy);
}

static void test_count_delta(void **state)
{
    uint64_t dv;
    assert_int_equal(irq_count_delta(10, 25, &dv), 0);
    assert_int_equal(dv, 15);
    /* a 32-bit wrap: 4294967290 -> 10 is 16 interrupts */
    assert_int_equal(irq_count_delta(4294967290ULL, 10, &dv), 0);
    assert_int_equal(dv, 16);
    /* a small drop is a reset, not a wrap */
    assert_int_equal(irq_count_delta(28490, 5, &dv), -ERANGE);
}

/* Two reads of one tree, the file rewritten in between. */
struct pair {
    char *root;
    struct host *h;
    struct sample a, b;
};

static void pair_take(struct pair *p, struct sample *s, int expect)
{
    *s = (struct sample){0};
    assert_int_equal(irq_sampler.collect(p->h, NULL, s), expect);
}

static void pair_free(struct pair *p)
{
    irq_sampler.free_sample(&p->a);
    irq_sampler.free_sample(&p->b);
    diags_free(&p->a.diags);
    diags_free(&p->b.diags);
    host_close(p->h);
    tree_free(p->root);
}

static void pair_open(struct pair *p, const char *first, const char *faults)
{
    p->root = tree_new();
    tree_write(p->root, "proc/interrupts", "%s", first);
    if (faults)
        tree_write(p->root, "watt-faults", "%s", faults);
    assert_int_equal(host_open(p->root, &p->h), 0);
    void *st = NULL;
    char *why = NULL;
    assert_int_equal(irq_sampler.probe(p->h, &st, &why), 1);
    pair_take(p, &p->a, 0);
}

static const struct irq_rate *rate_of(const struct irq_rates *r, const char *label)
{
    for (unsigned i = 0; i < r->nsources; i++)
        if (strcmp(r->src[i].src->label, label) == 0)
            return &r->src[i];
    return NULL;
}

static bool has_diag(const struct diags *d, const char *where, const char *what)
{
    for (size_t i = 0; i < d->n; i++)
        if (strstr(d->v[i].where, where) && strstr(d->v[i].what, what))
            return true;
    return false;
}

static void test_rates(void **state)
{
    struct pair p;
    pair_open(&p, live_vm, NULL);
    /* 2 s later: LOC +200 on cpu0 and +100 on cpu1; IRQ 36 wrapped on cpu1 */
    tree_write(p.root, "proc/interrupts",
               "           CPU0       CPU1\n"
               " 36:          0 4294967290 PCI-MSIX-0000:00:02.0   1-edge      virtio1-req.0\n"
               "LOC:      28690      28700   Local timer interrupts\n"
               "ERR:          4\n");
    pair_take(&p, &p.b, 0);
    /* first pair of reads: 36 has 44799 then 4294967290: a plain increase */
    struct irq_rates r;
    struct diags d = {0};
    assert_int_equal(irq_rates(p.a.irq, p.b.irq, 2.0, &r, &d), 0);
    const struct irq_rate *loc = rate_of(&r, "LOC");
    assert_true(fabs(loc->per_s - 150.0) < 1e-9);
    assert_true(fabs(loc->cpu_per_s[0] - 100.0) < 1e-9);
    assert_true(fabs(loc->cpu_per_s[1] - 50.0) < 1e-9);
    assert_true(fabs(rate_of(&r, "ERR")->per_s - 2.0) < 1e-9);
    assert_null(rate_of(&r, "ERR")->cpu_per_s);
    /* 11 rows of the first read are gone: each noted, none rated */
    assert_int_equal(r.nchanged, 11);
    assert_true(has_diag(&d, "IRQ 24 (ACPI:Ged)", "disappeared"));
    irq_rates_free(&r);
    diags_free(&d);

    /* and now the wrap: 4294967290 -> 20 on cpu1 is 26 interrupts */
    irq_sampler.free_sample(&p.a);
    diags_free(&p.a.diags);
    p.a = p.b;
    tree_write(p.root, "proc/interrupts",
               "           CPU0       CPU1\n"
               " 36:          0         20 PCI-MSIX-0000:00:02.0   1-edge      virtio1-req.0\n"
               "LOC:      28690      28700   Local timer interrupts\n"
               "ERR:          4\n");
    pair_take(&p, &p.b, 0);
    assert_int_equal(irq_rates(p.a.irq, p.b.irq, 1.0, &r, &d), 0);
    assert_true(fabs(rate_of(&r, "36")->per_s - 26.0) < 1e-9);
    assert_true(fabs(r.cpu_per_s[1] - 26.0) < 1e-9); /* LOC did not move */
    assert_true(fabs(r.cpu_per_s[0]) < 1e-9);
    assert_int_equal(d.n, 0);
    irq_rates_free(&r);
    diags_free(&d);
    pair_free(&p);
}

static void test_offline_backwards_changed(void **state)
{
    struct pair p;
    pair_open(&p,
              "           CPU0       CPU1       CPU2\n"
              " 44:        100        200        300   IR-PCI-MSI 1-edge      i915\n"
              " 45:          1          1          1   IR-PCI-MSI 2-edge      nvme0q1\n"
              " 46:          1          1          1   IR-PCI-MSI 3-edge      eth0\n"
              "LOC:      28490      28600      10000   Local timer interrupts\n",
              NULL);
    /* cpu1 went offline; i915 unloaded; a new IRQ 47; 46 changed hands;
     * LOC went backwards on cpu0 */
    tree_write(p.root, "proc/interrupts",
               "           CPU0       CPU2\n"
               " 45:         11         21   IR-PCI-MSI 2-edge      nvme0q1\n"
               " 46:          1          1   IR-PCI-MSI 3-edge      mlx5\n"
               " 47:          0          0   IR-PCI-MSI 4-edge      snd_hda\n"
               "LOC:          5      10100   Local timer interrupts\n");
    pair_take(&p, &p.b, 0);
    struct irq_rates r;
    struct diags d = {0};
    assert_int_equal(irq_rates(p.a.irq, p.b.irq, 1.0, &r, &d), 0);
    /* nvme: cpu0 +10, cpu2 +20; cpu1's share is not counted */
    const struct irq_rate *nv = rate_of(&r, "45");
    assert_true(fabs(nv->per_s - 30.0) < 1e-9);
    assert_int_equal(r.ncpus, 3);
    assert_int_equal(r.cpu[1], 1);
    assert_true(isnan(r.cpu_per_s[1]));
    assert_true(has_diag(&d, "cpu1 interrupts", "offline"));
    /* LOC: absent with a reason */
    assert_true(isnan(rate_of(&r, "LOC")->per_s));
    assert_true(has_diag(&d, "IRQ LOC", "backwards"));
    /* cpu0 sums what has a number: nvme 10; LOC's cpu0 is out */
    assert_true(fabs(r.cpu_per_s[0] - 10.0) < 1e-9);
    assert_true(fabs(r.cpu_per_s[2] - 120.0) < 1e-9);
    assert_null(rate_of(&r, "44"));
    assert_null(rate_of(&r, "46"));
    assert_null(rate_of(&r, "47"));
    assert_int_equal(r.nchanged, 3);
    assert_true(has_diag(&d, "IRQ 44 (i915)", "disappeared"));
    assert_true(has_diag(&d, "IRQ 47 (snd_hda)", "appeared"));
    assert_true(has_diag(&d, "IRQ 46 (mlx5)", "changed handler"));
    irq_rates_free(&r);
    diags_free(&d);
    assert_int_equal(irq_rates(p.a.irq, p.b.irq, 0, &r, &d), -EINVAL);
    pair_free(&p);
}

static void test_unreadable(void **state)
{
    struct pair p;
    pair_open(&p, live_vm, "proc/interrupts EACCES from=2\n");
    pair_take(&p, &p.b, -EACCES);
    assert_null(p.b.irq);
    assert_int_equal(p.b.diags.n, 1);
    assert_int_equal(p.b.diags.v[0].err, EACCES);
    assert_non_null(strstr(p.b.diags.v[0].where, "proc/interrupts"));
    pair_free(&p);

    /* garbage file: no header, the reason names the file and the line */
    pair_open(&p, live_vm, NULL);
    tree_write(p.root, "proc/interrupts", "hello\n");
    pair_take(&p, &p.b, -EINVAL);
    assert_null(p.b.irq);
    assert_non_null(strstr(p.b.diags.v[0].where, "proc/interrupts"));
    assert_non_null(strstr(p.b.diags.v[0].what, "line 1"));
    pair_free(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_live_vm),
        cmocka_unit_test(test_parse_node_exporter),
        cmocka_unit_test(test_parse_aarch64),
        cmocka_unit_test(test_parse_gaps_and_no_handler),
        cmocka_unit_test(test_parse_bad),
        cmocka_unit_test(test_parse_not_terminated),
        cmocka_unit_test(test_count_delta),
        cmocka_unit_test(test_rates),
        cmocka_unit_test(test_offline_backwards_changed),
        cmocka_unit_test(test_unreadable),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
