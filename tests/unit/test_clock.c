#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* cmocka.h needs stdarg, stddef, stdint and setjmp first */
#include <cmocka.h>

#include "base/strbuf.h"
#include "base/util.h"
#include "sense/clock.h"
#include "sense/sampler.h" /* sample_free() */
#include "tree.h"

#define CS "sys/devices/system/clocksource/clocksource0/"

/* One processor of a 2-vCPU Firecracker VM on AMD EPYC (kernel 6.18). */
#define VM_FLAGS                                                                                \
    "fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr " \
    "sse sse2 ht syscall nx mmxext fxsr_opt pdpe1gb rdtscp lm constant_tsc rep_good nopl "      \
    "xtopology nonstop_tsc cpuid extd_apicid tsc_known_freq pni pclmulqdq ssse3 fma cx16 "      \
    "pcid sse4_1 sse4_2 x2apic movbe popcnt tsc_deadline_timer aes xsave avx f16c rdrand "      \
    "hypervisor lahf_lm cmp_legacy cr8_legacy abm sse4a misalignsse 3dnowprefetch osvw "        \
    "topoext vmmcall fsgsbase tsc_adjust bmi1 avx2 smep bmi2 erms invpcid avx512f arat"

static void vm_processor(struct strbuf *b, int n, const char *flags)
{
    strbuf_appendf(b,
                   "processor\t: %d\n"
                   "vendor_id\t: AuthenticAMD\n"
                   "cpu family\t: 26\n"
                   "model\t\t: 2\n"
                   "model name\t: AMD EPYC\n"
                   "stepping\t: 1\n"
                   "microcode\t: 0x1000065\n"
                   "cpu MHz\t\t: 2596.120\n"
                   "cache size\t: 1024 KB\n"
                   "physical id\t: 0\n"
                   "siblings\t: 2\n"
                   "core id\t\t: %d\n"
                   "fpu\t\t: yes\n"
                   "flags\t\t: %s\n"
                   "bugs\t\t: sysret_ss_attrs null_seg spectre_v1 spectre_v2\n"
                   "bogomips\t: 5192.24\n"
                   "power management:\n"
                   "\n",
                   n, n, flags);
}

static void test_parse_vm(void **state)
{
    struct strbuf b = {0};
    vm_processor(&b, 0, VM_FLAGS);
    vm_processor(&b, 1, VM_FLAGS);
    struct cpuinfo ci;
    assert_int_equal(cpuinfo_parse(b.s, b.len, &ci), 0);
    assert_string_equal(ci.vendor, "AuthenticAMD");
    assert_string_equal(ci.model, "AMD EPYC");
    assert_int_equal(ci.nprocessors, 2);
    assert_true(ci.has_flags);
    unsigned want =
        TSCF_TSC | TSCF_CONSTANT | TSCF_NONSTOP | TSCF_KNOWN_FREQ | TSCF_HYPERVISOR | TSCF_ADJUST;
    assert_int_equal(ci.flags, want); /* no tsc_reliable; "tsc_deadline_timer" is not "tsc" */
    assert_int_equal(ci.ndisagree, 0);
    assert_int_equal(ci.first_disagree, -1);
    cpuinfo_clear(&ci);
    strbuf_free(&b);
}

static void test_parse_node_exporter(void **state)
{
    const char *dir = getenv("WATT_TESTDIR");
    char path[4096];
    snprintf(path, sizeof(path), "%s/fixtures/node_exporter/proc/cpuinfo", dir ? dir : "tests");
    FILE *f = fopen(path, "r");
    if (!f)
        skip();
    char *buf = calloc(1, 1 << 20);
    size_t n = fread(buf, 1, (1 << 20) - 1, f);
    fclose(f);
    struct cpuinfo ci;
    assert_int_equal(cpuinfo_parse(buf, n, &ci), 0);
    assert_string_equal(ci.vendor, "GenuineIntel");
    assert_string_equal(ci.model, "Intel(R) Core(TM) i7-8650U CPU @ 1.90GHz");
    assert_int_equal(ci.nprocessors, 8);
    assert_true(ci.flags & TSCF_CONSTANT);
    assert_true(ci.flags & TSCF_NONSTOP);
    assert_false(ci.flags & TSCF_HYPERVISOR);
    assert_int_equal(ci.ndisagree, 0);
    cpuinfo_clear(&ci);
    free(buf);
}

static void test_parse_disagree_arm_bad(void **state)
{
    /* processor 2 lacks nonstop_tsc */
    struct strbuf b = {0};
    vm_processor(&b, 0, VM_FLAGS);
    vm_processor(&b, 1, VM_FLAGS " extra_flag");
    vm_processor(&b, 2, "fpu tsc constant_tsc hypervisor tsc_known_freq tsc_adjust");
    vm_processor(&b, 3, "fpu tsc constant_tsc hypervisor tsc_known_freq tsc_adjust");
    struct cpuinfo ci;
    assert_int_equal(cpuinfo_parse(b.s, b.len, &ci), 0);
    assert_int_equal(ci.ndisagree, 2); /* processor 1 differs only elsewhere */
    assert_int_equal(ci.first_disagree, 2);
    cpuinfo_clear(&ci);
    strbuf_free(&b);

    /* arm64: no vendor_id, no model name, no flags */
    const char *arm = "processor\t: 0\nBogoMIPS\t: 243.75\nFeatures\t: fp asimd evtstrm\n"
                      "CPU implementer\t: 0x41\nCPU part\t: 0xd0c\n\n"
                      "processor\t: 1\nBogoMIPS\t: 243.75\n";
    assert_int_equal(cpuinfo_parse(arm, strlen(arm), &ci), 0);
    assert_int_equal(ci.nprocessors, 2);
    assert_false(ci.has_flags);
    assert_null(ci.vendor);
    assert_null(ci.model);
    cpuinfo_clear(&ci);

    /* garbage and empty: no processor at all */
    assert_int_equal(cpuinfo_parse("hello world\n", 12, &ci), -EINVAL);
    assert_int_equal(cpuinfo_parse("", 0, &ci), -EINVAL);
    /* truncated in the middle of the flags line: what is there counts */
    const char *cut = "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Xeon\n"
                      "flags\t\t: fpu tsc constant_tsc nonst";
    assert_int_equal(cpuinfo_parse(cut, strlen(cut), &ci), 0);
    assert_int_equal(ci.flags, TSCF_TSC | TSCF_CONSTANT);
    assert_string_equal(ci.model, "Xeon");
    cpuinfo_clear(&ci);
    /* not NUL-terminated: only len bytes are read */
    char *raw = malloc(14);
    memcpy(raw, "processor\t: 0\n", 14);
    assert_int_equal(cpuinfo_parse(raw, 14, &ci), 0);
    assert_int_equal(ci.nprocessors, 1);
    cpuinfo_clear(&ci);
    free(raw);
}

static void test_parse_big(void **state)
{
    /* 384 processors: one pass, the identical flags lines compared as bytes */
    struct strbuf b = {0};
    for (int i = 0; i < 384; i++)
        vm_processor(&b, i, VM_FLAGS);
    struct cpuinfo ci;
    uint64_t t0 = now_monotonic_ns();
    assert_int_equal(cpuinfo_parse(b.s, b.len, &ci), 0);
    uint64_t ns = now_monotonic_ns() - t0;
    print_message("# %zu bytes of cpuinfo parsed in %.3f ms\n", b.len, (double)ns / 1e6);
    assert_int_equal(ci.nprocessors, 384);
    assert_int_equal(ci.ndisagree, 0);
    assert_true(ns < 200 * 1000000ULL);
    cpuinfo_clear(&ci);
    strbuf_free(&b);
}

static char *make_root(const char *current, const char *available, const char *flags,
                       const char *faults)
{
    char *root = tree_new();
    tree_write(root, CS "current_clocksource", "%s\n", current);
    tree_write(root, CS "available_clocksource", "%s \n", available);
    struct strbuf b = {0};
    vm_processor(&b, 0, flags);
    vm_processor(&b, 1, flags);
    tree_write(root, "proc/cpuinfo", "%s", b.s);
    strbuf_free(&b);
    if (faults)
        tree_write(root, "watt-faults", "%s", faults);
    return root;
}

static struct sample *take(struct host *h)
{
    struct sample *s = calloc(1, sizeof(*s));
    void *st = NULL;
    char *why = NULL;
    assert_int_equal(clock_sampler.probe(h, &st, &why), 1);
    assert_int_equal(clock_sampler.collect(h, NULL, s), 0);
    return s;
}

static void test_verdicts(void **state)
{
    /* this VM: tsc with invariant flags */
    char *root = make_root("tsc", "tsc kvm-clock", VM_FLAGS, NULL);
    struct host *h;
    assert_int_equal(host_open(root, &h), 0);
    struct sample *s = take(h);
    assert_int_equal(s->diags.n, 0);
    assert_string_equal(s->clock->current, "tsc");
    assert_string_equal(s->clock->available, "tsc kvm-clock");
    assert_int_equal(clock_tsc_verdict(s->clock), CLOCK_TSC_TRUSTWORTHY);
    assert_string_equal(clock_verdict_name(CLOCK_TSC_TRUSTWORTHY), "trustworthy");
    assert_string_equal(clock_cpu_model(s->clock), "AMD EPYC");
    assert_true(clock_is_vm(s->clock));
    sample_free(s);
    host_close(h);
    tree_free(root);

    /* kvm-clock in a guest without the hypervisor flag: still a VM */
    root = make_root("kvm-clock", "kvm-clock tsc", "fpu tsc constant_tsc nonstop_tsc", NULL);
    assert_int_equal(host_open(root, &h), 0);
    s = take(h);
    assert_int_equal(clock_tsc_verdict(s->clock), CLOCK_TSC_NOT_CLOCKSOURCE);
    assert_true(clock_is_vm(s->clock));
    assert_non_null(strstr(clock_source_meaning("kvm-clock"), "fine in a VM"));
    sample_free(s);
    host_close(h);
    tree_free(root);

    /* bare metal on hpet with an old TSC */
    root = make_root("hpet", "hpet acpi_pm", "fpu tsc constant_tsc", NULL);
    assert_int_equal(host_open(root, &h), 0);
    s = take(h);
    assert_int_equal(clock_tsc_verdict(s->clock), CLOCK_TSC_NOT_INVARIANT);
    assert_false(clock_is_vm(s->clock));
    assert_non_null(strstr(clock_source_meaning("hpet"), "slow to read"));
    assert_false(clock_list_has(s->clock->available, "tsc"));
    sample_free(s);
    host_close(h);
    tree_free(root);
}

static void test_unreadable(void **state)
{
    char *root =
        make_root("tsc", "tsc hpet", VM_FLAGS, CS "current_clocksource EACCES\nproc/cpuinfo EIO\n");
    struct host *h;
    assert_int_equal(host_open(root, &h), 0);
    struct sample *s = take(h);
    assert_null(s->clock->current);
    assert_false(s->clock->have_cpuinfo);
    assert_null(clock_cpu_model(s->clock));
    assert_int_equal(clock_tsc_verdict(s->clock), CLOCK_TSC_UNKNOWN);
    assert_int_equal(s->diags.n, 2);
    assert_int_equal(s->diags.v[0].err, EACCES);
    assert_int_equal(s->diags.v[1].err, EIO);
    sample_free(s);
    host_close(h);
    tree_free(root);

    /* cpuinfo that is not one */
    root = make_root("tsc", "tsc", VM_FLAGS, "proc/cpuinfo =garbage\n");
    assert_int_equal(host_open(root, &h), 0);
    s = take(h);
    assert_false(s->clock->have_cpuinfo);
    assert_int_equal(s->diags.n, 1);
    assert_non_null(strstr(s->diags.v[0].what, "processor"));
    assert_int_equal(clock_tsc_verdict(s->clock), CLOCK_TSC_UNKNOWN);
    sample_free(s);
    host_close(h);
    tree_free(root);
}

static void test_list_has(void **state)
{
    assert_true(clock_list_has("tsc kvm-clock", "tsc"));
    assert_true(clock_list_has("kvm-clock tsc", "tsc"));
    assert_false(clock_list_has("tsc-early hpet", "tsc"));
    assert_false(clock_list_has("hpet", "hpe"));
    assert_false(clock_list_has(NULL, "tsc"));
    assert_non_null(clock_source_meaning(NULL));
    assert_non_null(clock_source_meaning("weird"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_vm),
        cmocka_unit_test(test_parse_node_exporter),
        cmocka_unit_test(test_parse_disagree_arm_bad),
        cmocka_unit_test(test_parse_big),
        cmocka_unit_test(test_verdicts),
        cmocka_unit_test(test_unreadable),
        cmocka_unit_test(test_list_has),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
