/* The runtime-PM safety policy: which devices that never suspend could be
 * allowed to autosuspend without hurting anyone, what that saves and what
 * it costs in resume latency.
 *
 * Pure functions over a devices sample (and optionally an earlier one):
 * `watt report` uses them for advice and `watt tune` to decide what it may
 * switch. A device is a SAFE candidate only if it is none of: human input
 * (keystrokes would be lost), virtio (in a VM that is the root disk and
 * the console), on the chain of the root filesystem, on the chain of the
 * default route's NIC, armed for wakeup, or a bridge (everything behind it
 * would go down with it).
 *
 * The *_policy variants also apply a device policy (sense/devpolicy.h):
 * the built-in deny list always, and the user's devices.conf rules when
 * POL is not NULL. The rules in order, the first that matches decides:
 *   1. runtime PM unsupported, in error, unreadable, already suspending,
 *      or a bridge: not a candidate;
 *   2. hard rules, no list overrides them: root filesystem chain, default
 *      route NIC chain (or any storage / network device when those are
 *      unknown), HID and what has input devices below it, virtio, BMC video;
 *   3. the built-in deny list (USB audio and printers, GPU drivers, mei_me);
 *   4. the user's deny rules ("denied by FILE:LINE (RULE)");
 *   5. wakeup enabled, unless a user allow rule matches (allow lifts this
 *      rule only);
 *   6. control auto and not blocked by a negative autosuspend delay: held
 *      by its driver, not a candidate; else SAFE.
 * The plain functions are the same with POL NULL (built-in rules only). */
#pragma once

#include <stdbool.h>
#include <stddef.h>

struct device_info;
struct devices_sample;
struct devpolicy;
struct devpolicy_rule;

enum dev_verdict {
    DEV_VERDICT_SAFE,          /* never suspends; autosuspend looks safe */
    DEV_VERDICT_UNSAFE,        /* never suspends; suspending it could hurt (reason) */
    DEV_VERDICT_NOT_CANDIDATE, /* bridge, unsupported, kept on by its driver, unknown */
    DEV_VERDICT_SUSPENDS,      /* runtime PM already works for it */
};

struct device_candidate {
    const struct device_info *dev; /* borrowed from the sample */
    enum dev_verdict verdict;
    bool never_suspends;
    const char *tag; /* a short word for tables: "safe", "virtio", "root fs"; static */
    char *reason;    /* in words ("virtio device: may be the root disk ..."); owned */
    /* Suspended share of the time in %: over the interval with an earlier
     * sample, else since the device's runtime PM accounting began. NaN
     * when the times are unreadable. */
    double suspended_pct;
    bool over_interval; /* suspended_pct covers the interval between samples */
    /* What allowing autosuspend would change. Typical figures per device
     * class, not measured here (basis names them); NaN unless SAFE. */
    double saving_w, saving_lo_w, saving_hi_w;
    double resume_ms;   /* latency of one resume (PCI D3hot 10 ms, USB ~30 ms) */
    const char *basis;  /* "typical for a PCIe NIC at idle"; static */
    const char *action; /* what `watt tune` would write; static; NULL unless SAFE */
    /* The user rule that decided: the deny rule of an UNSAFE device, the
     * allow rule that lifted wakeup for a SAFE one; NULL otherwise.
     * Borrowed from the policy. */
    const struct devpolicy_rule *rule;
};

/* The verdict for one device of s. never_suspends as computed by
 * devices_never_suspends(). ret_reason owned. */
enum dev_verdict devsafety_judge(const struct devices_sample *s, const struct device_info *d,
                                 int never_suspends, const char **ret_tag, char **ret_reason);
/* The same under a user policy (NULL: built-in rules only). */
enum dev_verdict devsafety_judge_policy(const struct devices_sample *s, const struct device_info *d,
                                        int never_suspends, const struct devpolicy *pol,
                                        const char **ret_tag, char **ret_reason);

/* Whether D would be a SAFE candidate if its control were "on" and it had
 * never suspended: what a `runtime_pm = auto` profile claims. A device an
 * earlier `watt tune` switched to auto (and that now suspends) is still
 * the profile's, and must not be reverted when the profile is applied
 * again. False for devices without runtime PM or in error. */
bool devsafety_safe_when_on(const struct devices_sample *s, const struct device_info *d,
                            const struct devpolicy *pol);

/* 1 when the device never suspends: control is "on", or it is active and
 * its suspended time did not grow over the interval (with prev NULL, or
 * the device absent from prev, or its counters reset: suspended time 0
 * since boot). 0 when it suspends; -ENODATA when its status or times are
 * unreadable. */
int devices_never_suspends(const struct device_info *d, const struct device_info *prev);

/* Every device of s with its verdict (same order as s->dev). */
size_t devices_assess(const struct devices_sample *s, const struct devices_sample *prev,
                      struct device_candidate **ret);
/* The devices that never suspend (SAFE, UNSAFE, and those NOT_CANDIDATE
 * for a stated reason such as a bridge); filter on verdict == SAFE for
 * what to switch. Returns the count; *ret owned (free with
 * device_candidates_free), NULL when none. */
size_t devices_candidates(const struct devices_sample *s, const struct devices_sample *prev,
                          struct device_candidate **ret);
/* The same under a user policy (NULL: built-in rules only), for `watt
 * report --config-dir` and `watt tune`. */
size_t devices_assess_policy(const struct devices_sample *s, const struct devices_sample *prev,
                             const struct devpolicy *pol, struct device_candidate **ret);
size_t devices_candidates_policy(const struct devices_sample *s, const struct devices_sample *prev,
                                 const struct devpolicy *pol, struct device_candidate **ret);
void device_candidates_free(struct device_candidate *v, size_t n);
