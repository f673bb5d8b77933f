/* Opening a path that can never leave a directory: openat2(2) with
 * RESOLVE_BENEATH (or RESOLVE_IN_ROOT) and RESOLVE_NO_MAGICLINKS, and,
 * where the kernel lacks openat2 (Linux < 5.6) or a seccomp filter
 * refuses it, the same resolution done by hand, one component at a time
 * with O_NOFOLLOW. Internal to the host layer. */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

enum beneath_mode {
    BENEATH_STRICT,  /* RESOLVE_BENEATH: ".." above DFD or an absolute link is -EXDEV */
    BENEATH_IN_ROOT, /* RESOLVE_IN_ROOT: DFD is "/": ".." stops there, "/x" starts there */
};

/* Whether openat2() works here (probed once per process: ENOSYS on
 * kernels before 5.6, EPERM under some seccomp filters), unless
 * $WATT_HOST_NO_OPENAT2=1 asks for the walk (the tests do). */
bool beneath_have_openat2(void);

/* Open PATH under DFD with FLAGS (O_CLOEXEC is added) and MODE (with
 * O_CREAT). Symlinks are followed only where they stay below DFD; magic
 * links (/proc/PID/root, /proc/PID/fd/N) are never followed. Returns the
 * fd or -errno: -EXDEV for an escape, -ELOOP for a magic link (openat2)
 * or too many links, or when FLAGS hold O_NOFOLLOW and the last component
 * is a link. */
int beneath_open(int dfd, const char *path, int flags, mode_t mode, enum beneath_mode how);

/* The hand-made walk alone (the fallback; tests call it directly). */
int beneath_walk(int dfd, const char *path, int flags, mode_t mode, enum beneath_mode how);
