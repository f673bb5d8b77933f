/* unit_seccomp UNIT -- PROGRAM [ARG...]: run PROGRAM under the seccomp
 * filters that systemd would install for UNIT's [Service] section, for a
 * machine where systemd is not PID 1 (this project's CI).
 *
 * Emulated, with systemd 252's meaning (src/core/load-fragment.c
 * config_parse_syscall_filter, src/shared/seccomp-util.c):
 *   SystemCallFilter=        allow-list (the first line not "~": @default
 *                            is added, later "~" lines take away, later
 *                            plain lines add) or deny-list (first "~");
 *                            groups expanded from `systemd-analyze
 *                            syscall-filter`; names this architecture
 *                            lacks are skipped, as systemd does
 *   SystemCallErrorNumber=   the action for a call outside the filter
 *                            (unset: the process is killed, SIGSYS)
 *   SystemCallArchitectures=native  libseccomp's default: only this ABI
 *   RestrictAddressFamilies= socket() of another family: EAFNOSUPPORT
 *   MemoryDenyWriteExecute=  mmap(W|X), mprotect(X), pkey_mprotect(X),
 *                            shmat(SHM_EXEC): EPERM
 * Not emulated (not seccomp, or not what this test is about): the mount
 * namespace, capabilities, devices, LockPersonality, RestrictNamespaces,
 * RestrictRealtime. PROGRAM is the caller's: the test reads ExecStart.
 *
 * Prints one line per filter to stderr ("unit_seccomp: allow-list of N
 * calls, else EPERM") and exits 2 on a unit it cannot read, 127 when the
 * exec fails. */
#include <errno.h>
#include <seccomp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAX_NAMES 4096

struct set {
    char *name[MAX_NAMES];
    size_t n;
};

static void die(const char *what, const char *detail)
{
    fprintf(stderr, "unit_seccomp: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
    exit(2);
}

static bool set_has(const struct set *s, const char *name)
{
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->name[i], name) == 0)
            return true;
    return false;
}

static void set_add(struct set *s, const char *name)
{
    if (set_has(s, name))
        return;
    if (s->n == MAX_NAMES)
        die("too many system calls", name);
    s->name[s->n++] = strdup(name);
}

static void set_del(struct set *s, const char *name)
{
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->name[i], name) == 0) {
            free(s->name[i]);
            s->name[i] = s->name[--s->n];
            return;
        }
}

/* `systemd-analyze syscall-filter`: "@group" lines, then its members
 * indented (a "#" line is a comment), a blank line between groups. */
static char *groups_text;

static void load_groups(void)
{
    FILE *p = popen("systemd-analyze syscall-filter 2>/dev/null", "r");
    if (!p)
        die("cannot run systemd-analyze syscall-filter", strerror(errno));
    size_t cap = 1 << 16, len = 0, n;
    groups_text = malloc(cap);
    while (groups_text && (n = fread(groups_text + len, 1, cap - len - 1, p)) > 0) {
        len += n;
        if (cap - len < 4096)
            groups_text = realloc(groups_text, cap *= 2);
    }
    if (!groups_text || pclose(p) != 0 || len == 0)
        die("systemd-analyze syscall-filter failed", NULL);
    groups_text[len] = '\0';
}

/* Add (or with del, take away) NAME: a system call or a @group, nested
 * groups included. */
static void apply_name(struct set *s, const char *name, bool del, int depth)
{
    if (name[0] != '@') {
        (del ? set_del : set_add)(s, name);
        return;
    }
    if (depth > 8)
        die("group nesting too deep", name);
    size_t nl = strlen(name);
    bool found = false;
    for (const char *l = groups_text; l && *l;) {
        const char *e = strchr(l, '\n');
        size_t ll = e ? (size_t)(e - l) : strlen(l);
        if (!found && ll == nl && strncmp(l, name, nl) == 0) {
            found = true;
        } else if (found) {
            if (ll == 0 || l[0] != ' ')
                break; /* the next group */
            const char *w = l + strspn(l, " ");
            size_t wl = ll - (size_t)(w - l);
            if (wl && *w != '#') {
                char word[128];
                if (wl >= sizeof(word))
                    die("system call name too long", NULL);
                memcpy(word, w, wl);
                word[wl] = '\0';
                apply_name(s, word, del, depth + 1);
            }
        }
        l = e ? e + 1 : NULL;
    }
    if (!found)
        die("systemd-analyze knows no group", name);
}

struct unit {
    struct set calls;
    bool have_filter, allow_list;
    int error_number; /* 0: kill */
    bool restrict_af;
    bool af_allowed[AF_MAX];
    bool mdwe;
};

static int errno_from_name(const char *v)
{
    char *end;
    long n = strtol(v, &end, 10);
    if (*v && !*end && n > 0 && n < 4096)
        return (int)n;
    for (int i = 1; i < 4096; i++) {
        const char *nm = strerrorname_np(i);
        if (nm && strcmp(nm, v) == 0)
            return i;
    }
    die("SystemCallErrorNumber: not an errno name", v);
    return 0;
}

static const struct {
    const char *name;
    int af;
} families[] = {
    {"AF_UNIX", AF_UNIX},
    {"AF_LOCAL", AF_LOCAL},
    {"AF_INET", AF_INET},
    {"AF_INET6", AF_INET6},
    {"AF_NETLINK", AF_NETLINK},
    {"AF_PACKET", AF_PACKET},
    {"AF_BLUETOOTH", AF_BLUETOOTH},
    {"AF_VSOCK", AF_VSOCK},
    {"AF_ALG", AF_ALG},
    {"AF_XDP", AF_XDP},
};

static void parse_families(struct unit *u, char *v)
{
    u->restrict_af = true;
    bool deny = *v == '~';
    if (deny)
        v++;
    if (strcmp(v, "none") == 0) {
        memset(u->af_allowed, 0, sizeof(u->af_allowed));
        return;
    }
    if (deny)
        memset(u->af_allowed, 1, sizeof(u->af_allowed));
    for (char *save = NULL, *w = strtok_r(v, " \t", &save); w; w = strtok_r(NULL, " \t", &save)) {
        size_t i = 0;
        while (i < sizeof(families) / sizeof(families[0]) && strcmp(families[i].name, w) != 0)
            i++;
        if (i == sizeof(families) / sizeof(families[0]))
            die("RestrictAddressFamilies: a family this helper does not know", w);
        u->af_allowed[families[i].af] = !deny;
    }
}

static void parse_filter(struct unit *u, char *v)
{
    if (!*v) { /* an empty assignment resets */
        while (u->calls.n)
            set_del(&u->calls, u->calls.name[0]);
        u->have_filter = false;
        return;
    }
    bool invert = *v == '~';
    if (invert)
        v++;
    if (!u->have_filter) {
        u->have_filter = true;
        u->allow_list = !invert;
        if (u->allow_list)
            apply_name(&u->calls, "@default", false, 0);
    }
    /* the set holds the allowed calls of an allow-list, the denied of a
     * deny-list: a line of the list's own kind adds, the other takes away */
    bool del = invert == u->allow_list;
    for (char *save = NULL, *w = strtok_r(v, " \t", &save); w; w = strtok_r(NULL, " \t", &save))
        apply_name(&u->calls, w, del, 0);
}

static void parse_unit(const char *path, struct unit *u)
{
    FILE *f = fopen(path, "re");
    if (!f)
        die(path, strerror(errno));
    char line[4096];
    bool service = false;
    while (fgets(line, sizeof(line), f)) {
        line[strcspn(line, "\n")] = '\0';
        if (line[0] == '[') {
            service = strcmp(line, "[Service]") == 0;
            continue;
        }
        char *eq = strchr(line, '=');
        if (!service || line[0] == '#' || !eq)
            continue;
        *eq = '\0';
        char *v = eq + 1;
        if (strcmp(line, "SystemCallFilter") == 0)
            parse_filter(u, v);
        else if (strcmp(line, "SystemCallErrorNumber") == 0)
            u->error_number = errno_from_name(v);
        else if (strcmp(line, "RestrictAddressFamilies") == 0)
            parse_families(u, v);
        else if (strcmp(line, "MemoryDenyWriteExecute") == 0)
            u->mdwe = strcmp(v, "yes") == 0 || strcmp(v, "true") == 0 || strcmp(v, "1") == 0;
    }
    fclose(f);
}

static void check(int r, const char *what)
{
    if (r < 0)
        die(what, strerror(-r));
}

/* The SystemCallFilter= list. */
static void load_call_filter(const struct unit *u)
{
    uint32_t fail =
        u->error_number ? SCMP_ACT_ERRNO((uint32_t)u->error_number) : SCMP_ACT_KILL_PROCESS;
    scmp_filter_ctx ctx = seccomp_init(u->allow_list ? fail : SCMP_ACT_ALLOW);
    if (!ctx)
        die("seccomp_init failed", NULL);
    size_t used = 0, unknown = 0;
    for (size_t i = 0; i < u->calls.n; i++) {
        int nr = seccomp_syscall_resolve_name(u->calls.name[i]);
        if (nr == __NR_SCMP_ERROR) {
            unknown++; /* not on this architecture: systemd skips it too */
            continue;
        }
        check(seccomp_rule_add(ctx, u->allow_list ? SCMP_ACT_ALLOW : fail, nr, 0),
              u->calls.name[i]);
        used++;
    }
    check(seccomp_load(ctx), "seccomp_load (SystemCallFilter)");
    seccomp_release(ctx);
    fprintf(stderr, "unit_seccomp: %s of %zu calls (%zu unknown here), else %s\n",
            u->allow_list ? "allow-list" : "deny-list", used, unknown,
            u->allow_list ? (u->error_number ? strerrorname_np(u->error_number) : "SIGSYS")
                          : "allowed");
}

/* RestrictAddressFamilies= and MemoryDenyWriteExecute=: a second filter;
 * the kernel runs both and the stricter answer wins. */
static void load_arg_filter(const struct unit *u)
{
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
    if (!ctx)
        die("seccomp_init failed", NULL);
    unsigned denied = 0;
    if (u->restrict_af) {
        for (int af = 0; af < AF_MAX; af++)
            if (!u->af_allowed[af]) {
                check(seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EAFNOSUPPORT), SCMP_SYS(socket), 1,
                                       SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)af)),
                      "socket rule");
                denied++;
            }
        check(seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EAFNOSUPPORT), SCMP_SYS(socket), 1,
                               SCMP_A0(SCMP_CMP_GE, (scmp_datum_t)AF_MAX)),
              "socket rule");
    }
    if (u->mdwe) {
        const scmp_datum_t wx = PROT_WRITE | PROT_EXEC;
        check(seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(mmap), 1,
                               SCMP_A2(SCMP_CMP_MASKED_EQ, wx, wx)),
              "mmap rule");
        check(seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(mprotect), 1,
                               SCMP_A2(SCMP_CMP_MASKED_EQ, PROT_EXEC, PROT_EXEC)),
              "mprotect rule");
        check(seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(pkey_mprotect), 1,
                               SCMP_A2(SCMP_CMP_MASKED_EQ, PROT_EXEC, PROT_EXEC)),
              "pkey_mprotect rule");
        check(seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(shmat), 1,
                               SCMP_A2(SCMP_CMP_MASKED_EQ, SHM_EXEC, SHM_EXEC)),
              "shmat rule");
    }
    check(seccomp_load(ctx), "seccomp_load (families, W^X)");
    seccomp_release(ctx);
    fprintf(stderr, "unit_seccomp: %u address families refused (EAFNOSUPPORT)%s\n", denied,
            u->mdwe ? ", W|X mappings refused (EPERM)" : "");
}

int main(int argc, char **argv)
{
    if (argc < 4 || strcmp(argv[2], "--") != 0) {
        fprintf(stderr, "usage: unit_seccomp UNIT -- PROGRAM [ARG...]\n");
        return 2;
    }
    static struct unit u;
    load_groups();
    parse_unit(argv[1], &u);
    if (!u.have_filter && !u.restrict_af && !u.mdwe)
        die(argv[1], "no SystemCallFilter=, RestrictAddressFamilies= or MemoryDenyWriteExecute=");
    if (u.restrict_af || u.mdwe)
        load_arg_filter(&u);
    if (u.have_filter)
        load_call_filter(&u);
    execv(argv[3], argv + 3);
    fprintf(stderr, "unit_seccomp: cannot run %s: %s\n", argv[3], strerror(errno));
    return 127;
}
