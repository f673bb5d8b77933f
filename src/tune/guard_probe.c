/* The latency guard's workloads: parsing a workload spec, the pure
 * parsers of what the kernel says about it (cgroup cpu.stat, /proc/PID/stat,
 * the TCP tables, sockstat), and the probes that read it each tick through
 * the host layer. The state machine and the holder are in guard.c. */
#include "tune/guard.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/parse.h"
#include "base/util.h"
#include "sense/cgroup_cpu.h"

#define NSEC_PER_SEC 1000000000ull

/* ---- workloads ---- */

static bool bad_cgroup_path(const char *p)
{
    for (const char *s = p; *s;) {
        size_t n = strcspn(s, "/");
        if ((n == 2 && s[0] == '.' && s[1] == '.') || (n == 1 && s[0] == '.'))
            return true;
        s += n;
        s += strspn(s, "/");
    }
    return false;
}

static int parse_port(const char *s, unsigned *ret)
{
    char *end;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (errno || end == s || *end || *s == '-' || *s == '+' || v < 1 || v > 65535)
        return -EINVAL;
    *ret = (unsigned)v;
    return 0;
}

int guard_workload_parse(const char *spec, struct guard_workload *ret, char **ret_err)
{
    struct guard_workload w = {0};
    const char *colon = strchr(spec, ':');
    const char *arg = colon ? colon + 1 : "";
    size_t klen = colon ? (size_t)(colon - spec) : strlen(spec);

    if (klen == 6 && strncmp(spec, "cgroup", 6) == 0) {
        arg += strspn(arg, "/");
        if (strlen(arg) > 1024 || bad_cgroup_path(arg)) {
            *ret_err =
                xasprintf("workload '%s': a cgroup path without '.' or '..' components", spec);
            return -EINVAL;
        }
        w.kind = GUARD_WL_CGROUP;
        w.name = xstrdup(arg);
        size_t n = strlen(w.name);
        while (n && w.name[n - 1] == '/')
            w.name[--n] = '\0';
    } else if (klen == 7 && strncmp(spec, "process", 7) == 0) {
        if (!*arg || strlen(arg) > 15 || strchr(arg, '/') || strchr(arg, '\n')) {
            *ret_err = xasprintf("workload '%s': a process name is its comm, 1 to 15 bytes "
                                 "without '/'",
                                 spec);
            return -EINVAL;
        }
        w.kind = GUARD_WL_PROCESS;
        w.name = xstrdup(arg);
    } else if (klen == 4 && strncmp(spec, "port", 4) == 0) {
        if (parse_port(arg, &w.port) < 0) {
            *ret_err = xasprintf("workload '%s': want port:N, N in 1..65535", spec);
            return -EINVAL;
        }
        w.kind = GUARD_WL_PORT;
    } else {
        *ret_err = xasprintf("workload '%s': want cgroup:PATH, process:NAME or port:N", spec);
        return -EINVAL;
    }
    w.spec = xstrdup(spec);
    *ret = w;
    return 0;
}

void guard_workload_clear(struct guard_workload *w)
{
    free(w->name);
    free(w->spec);
    w->name = w->spec = NULL;
}

/* ---- parsers ---- */

int guard_parse_cpu_stat(const char *text, uint64_t *ret_usage_us)
{
    return cgroup_cpu_parse_stat(text, ret_usage_us); /* the agent reads it too */
}

/* The next space-separated token of [*p, end) as an unsigned number;
 * *ok cleared when it is not one. */
static uint64_t next_u64(const char **p, const char *end, bool *ok)
{
    const char *s = *p;
    while (s < end && *s == ' ')
        s++;
    uint64_t v = 0;
    const char *start = s;
    for (; s < end && *s >= '0' && *s <= '9'; s++) {
        if (v > (UINT64_MAX - 9) / 10)
            *ok = false;
        v = v * 10 + (uint64_t)(*s - '0');
    }
    if (s == start || (s < end && *s != ' ' && *s != '\n'))
        *ok = false;
    *p = s;
    return v;
}

static void skip_token(const char **p, const char *end)
{
    const char *s = *p;
    while (s < end && *s == ' ')
        s++;
    while (s < end && *s != ' ' && *s != '\n')
        s++;
    *p = s;
}

int guard_parse_pid_stat(const char *text, size_t len, char **ret_comm, uint64_t *ret_ticks,
                         uint64_t *ret_start)
{
    const char *end = text + len;
    const char *open = memchr(text, '(', len);
    const char *close = NULL;
    for (const char *s = end; s > text; s--)
        if (s[-1] == ')') {
            close = s - 1;
            break;
        }
    if (!open || !close || close < open || close - open - 1 > 64)
        return -EINVAL;
    /* after ")": state (field 3) ... utime (14), stime (15) ... starttime (22) */
    const char *p = close + 1;
    bool ok = true;
    for (int field = 3; field < 14; field++)
        skip_token(&p, end);
    uint64_t utime = next_u64(&p, end, &ok);
    uint64_t stime = next_u64(&p, end, &ok);
    for (int field = 16; field < 22; field++)
        skip_token(&p, end);
    uint64_t start = next_u64(&p, end, &ok);
    if (!ok || utime > UINT64_MAX - stime)
        return -EINVAL;
    char *comm = xmalloc((size_t)(close - open));
    memcpy(comm, open + 1, (size_t)(close - open - 1));
    comm[close - open - 1] = '\0';
    *ret_comm = comm;
    *ret_ticks = utime + stime;
    *ret_start = start;
    return 0;
}

/* A whole token of hex digits; -1 when it is not one (or too long). */
static long hex_token(const char *s, size_t n)
{
    if (n == 0 || n > 8)
        return -1;
    long v = 0;
    for (size_t i = 0; i < n; i++) {
        int d = hex_digit_value(s[i]);
        if (d < 0)
            return -1;
        v = v * 16 + d;
    }
    return v;
}

/* One line: "  12: 0100007F:1F90 00000000:0000 0A ..." */
static void tcp_line(const char *l, size_t len, unsigned port, unsigned *established,
                     bool *listening)
{
    const char *tok[4];
    size_t tlen[4];
    const char *s = l, *end = l + len;
    for (int i = 0; i < 4; i++) {
        while (s < end && *s == ' ')
            s++;
        tok[i] = s;
        while (s < end && *s != ' ')
            s++;
        tlen[i] = (size_t)(s - tok[i]);
        if (!tlen[i])
            return;
    }
    const char *colon = memchr(tok[1], ':', tlen[1]);
    if (!colon || tlen[0] < 2 || tok[0][tlen[0] - 1] != ':')
        return;
    size_t alen = (size_t)(colon - tok[1]); /* 8 hex digits for IPv4, 32 for IPv6 */
    if (alen != 8 && alen != 32)
        return;
    for (size_t i = 0; i < alen; i++)
        if (hex_digit_value(tok[1][i]) < 0)
            return;
    long lport = hex_token(colon + 1, (size_t)(tok[1] + tlen[1] - colon - 1));
    long st = hex_token(tok[3], tlen[3]);
    if (lport != (long)port)
        return;
    if (st == 0x01)
        (*established)++;
    else if (st == 0x0A)
        *listening = true;
}

void guard_parse_net_tcp(const char *text, unsigned port, unsigned *established, bool *listening)
{
    for (const char *l = text; *l;) {
        size_t n = strcspn(l, "\n");
        tcp_line(l, n, port, established, listening);
        l += n;
        if (*l)
            l++;
    }
}

/* ---- probes ---- */

void guard_probe_init(struct guard_probe *p, const struct guard_workload *w)
{
    *p = (struct guard_probe){.w = w, .clk_tck = sysconf(_SC_CLK_TCK), .nl_fd = -1};
    if (p->clk_tck <= 0)
        p->clk_tck = 100;
}

static void nl_close(struct guard_probe *p)
{
    if (p->nl_fd >= 0)
        close(p->nl_fd);
    p->nl_fd = -1;
}

void guard_probe_clear(struct guard_probe *p)
{
    free(p->pids);
    p->pids = NULL;
    p->npids = 0;
    p->scans = 0;
    p->have_prev = false;
    nl_close(p);
    free(p->nl_buf);
    p->nl_buf = NULL;
    p->nl_err = 0;
    p->nl_fails = 0;
}

/* Where a cgroup's CPU time is: sense/cgroup_cpu.h (v2, then v1 cpuacct). */
static int read_cgroup(struct host *h, const char *name, uint64_t *ret_ns, const char **ret_src)
{
    return cgroup_cpu_read(h, name, ret_ns, ret_src);
}

static int probe_cgroup(struct host *h, struct guard_probe *p, struct guard_reading *r)
{
    uint64_t ns;
    if (read_cgroup(h, p->w->name, &ns, &r->source) < 0) {
        p->have_prev = false;
        r->source = "cgroup";
        return 0;
    }
    r->present = true;
    if (p->have_prev && ns >= p->prev_cpu_ns) {
        r->have_cpu = true;
        r->cpu_ns = ns - p->prev_cpu_ns;
    }
    p->prev_cpu_ns = ns;
    p->have_prev = true;
    return 0;
}

static int pid_cmp(const void *a, const void *b)
{
    int x = ((const struct guard_probe_pid *)a)->pid, y = ((const struct guard_probe_pid *)b)->pid;
    return (x > y) - (x < y);
}

static const struct guard_probe_pid *find_pid(const struct guard_probe *p, int pid)
{
    struct guard_probe_pid key = {.pid = pid};
    return p->npids ? bsearch(&key, p->pids, p->npids, sizeof(key), pid_cmp) : NULL;
}

/* One process: its entry in NOW, and its ticks since the previous probe
 * added to *TICKS when it has the name. A process known not to have the
 * name is not read again until the next full scan. */
static void probe_pid(struct host *h, const struct guard_probe *p, const char *name, bool full,
                      struct guard_probe_pid *now, bool *ret_keep, uint64_t *ticks)
{
    int pid = atoi(name);
    const struct guard_probe_pid *old = find_pid(p, pid);
    *ret_keep = false;
    if (old && !old->match && !full) {
        *now = *old;
        *ret_keep = true;
        return;
    }
    _cleanup_free_ char *text = NULL, *comm = NULL;
    uint64_t t, start;
    if (host_read_strf(h, HOST_PROC, &text, "%s/stat", name) < 0 ||
        guard_parse_pid_stat(text, strlen(text), &comm, &t, &start) < 0)
        return; /* exited meanwhile */
    bool match = streq(comm, p->w->name);
    if (match && old && old->match && old->start == start && t >= old->ticks)
        *ticks += t - old->ticks;
    *now = (struct guard_probe_pid){.pid = pid, .start = start, .ticks = t, .match = match};
    *ret_keep = true;
}

/* Every process whose comm is the name: CPU ticks since the previous
 * probe, per process (one that exited takes its last ticks along; one
 * seen with the name for the first time adds nothing this time). Only
 * new processes and those with the name are read on every probe; all of
 * them every GUARD_PROCESS_RESCAN probes, which finds a process that took
 * the name by exec() (same pid, same start time) or a reused pid. */
static int probe_process(struct host *h, struct guard_probe *p, struct guard_reading *r)
{
    char **names;
    size_t n;
    int ret = host_list(h, HOST_PROC, ".", &names, &n);
    if (ret < 0)
        return ret;
    bool full = p->scans++ % GUARD_PROCESS_RESCAN == 0;
    struct guard_probe_pid *now = xcalloc(n + 1, sizeof(*now));
    size_t nnow = 0;
    unsigned matched = 0;
    uint64_t ticks = 0;
    for (size_t i = 0; i < n; i++) {
        bool keep;
        if (!str_all_digits(names[i]))
            continue;
        probe_pid(h, p, names[i], full, &now[nnow], &keep, &ticks);
        if (keep)
            matched += now[nnow++].match;
    }
    host_free_list(names, n);
    qsort(now, nnow, sizeof(*now), pid_cmp);
    r->source = "process stat";
    r->present = matched > 0;
    r->nprocs = matched;
    r->have_cpu = p->have_prev;
    r->cpu_ns = ticks * NSEC_PER_SEC / (uint64_t)p->clk_tck;
    free(p->pids);
    p->pids = now;
    p->npids = nnow;
    p->have_prev = true;
    return 0;
}

/* "TCP: inuse 5 orphan 0 ..." of sockstat, "TCP6: inuse 1" of sockstat6:
 * the sockets in the table (listening and connected). -1 when unknown. */
long guard_parse_sockstat_inuse(const char *text, const char *proto)
{
    size_t plen = strlen(proto);
    for (const char *l = text; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
        if (strncmp(l, proto, plen) != 0 || strncmp(l + plen, ": inuse ", 8) != 0)
            continue;
        const char *n = l + plen + 8;
        char *end;
        errno = 0;
        /* digits only: strtol would skip a newline and read the next line */
        long v = strtol(n, &end, 10);
        return errno || *n < '0' || *n > '9' ? -1 : v;
    }
    return -1;
}

/* A seq_file read returns at most one kernel buffer (a page or more) and
 * never stops short of it by more than one record (under 256 bytes here)
 * unless the table ended: so a shorter read is the end, and the read that
 * would return 0 (a second walk of the whole TCP hash table) is skipped. */
#define SEQ_SHORT_READ (4096 - 256)

static int read_tcp_table(struct host *h, const char *path, char **ret)
{
    if (!h->live) /* a plain file: the host layer's read, faults and all */
        return host_read(h, HOST_PROC, path, ret, NULL);
    _cleanup_close_ int fd = host_open_fd(h, HOST_PROC, path, O_RDONLY);
    if (fd < 0)
        return fd;
    size_t len = 0, cap = 0;
    _cleanup_free_ char *buf = NULL;
    for (;;) {
        if (cap - len < 65536 + 1) {
            cap = cap ? cap * 2 : 131072;
            if (cap > 64u << 20)
                return -EFBIG;
            buf = xrealloc(buf, cap);
        }
        ssize_t n = read(fd, buf + len, cap - len - 1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        len += (size_t)n;
        if (n < SEQ_SHORT_READ)
            break;
    }
    buf[len] = '\0';
    *ret = TAKE_PTR(buf);
    return 0;
}

/* Whether sockstat says the family's table holds no TCP socket at all
 * (then neither the text table nor a netlink dump need walk it). */
static bool family_empty(struct host *h, const char *sockstat, const char *proto)
{
    _cleanup_free_ char *stat = NULL;
    return host_read(h, HOST_PROC, sockstat, &stat, NULL) == 0 &&
           guard_parse_sockstat_inuse(stat, proto) == 0;
}

static const struct {
    int family;
    const char *table, *sockstat, *proto;
} tcp_families[] = {
    {AF_INET, "net/tcp", "net/sockstat", "TCP"},
    {AF_INET6, "net/tcp6", "net/sockstat6", "TCP6"},
};

/* The text tables, each only when sockstat says it holds a socket: every
 * read of one walks the kernel's whole TCP hash table and formats every
 * socket in it. -ENOENT when neither table exists. */
static int port_text(struct host *h, unsigned port, unsigned *est, bool *listening)
{
    int found = 0;
    for (size_t i = 0; i < ARRAY_SIZE(tcp_families); i++) {
        _cleanup_free_ char *text = NULL;
        if (family_empty(h, tcp_families[i].sockstat, tcp_families[i].proto)) {
            found++;
            continue;
        }
        if (read_tcp_table(h, tcp_families[i].table, &text) < 0)
            continue; /* no IPv6 */
        found++;
        guard_parse_net_tcp(text, port, est, listening);
    }
    return found ? 0 : -ENOENT;
}

/* ---- port: NETLINK_SOCK_DIAG (Documentation: man 7 sock_diag) ---- */

/* One dump request: TCP sockets of FAMILY in ESTABLISHED or LISTEN whose
 * local port is PORT, by a bytecode filter the kernel runs on each socket
 * (as `ss state established sport = :PORT` does), so only they are sent. */
struct nl_request {
    struct nlmsghdr nlh;
    struct inet_diag_req_v2 req;
    struct nlattr nla;
    struct inet_diag_bc_op ops[4];
};
_Static_assert(offsetof(struct nl_request, req) == NLMSG_HDRLEN, "request layout");
_Static_assert(offsetof(struct nl_request, nla) == NLMSG_LENGTH(sizeof(struct inet_diag_req_v2)),
               "request layout");

/* The filter: an op's "yes" and "no" are how many bytes to jump on a
 * match and a mismatch; a socket is sent when the program ends exactly at
 * its end, so a mismatch jumps 4 bytes past it. A port comparison takes
 * the port (host order) in the "no" of the op after it. Returns its
 * length in bytes. */
static size_t nl_bytecode(struct inet_diag_bc_op *ops, unsigned port, bool range)
{
    if (!range) {
        ops[0] = (struct inet_diag_bc_op){.code = INET_DIAG_BC_S_EQ, .yes = 8, .no = 8 + 4};
        ops[1] = (struct inet_diag_bc_op){.no = (uint16_t)port};
        return 8;
    }
    ops[0] = (struct inet_diag_bc_op){.code = INET_DIAG_BC_S_GE, .yes = 8, .no = 16 + 4};
    ops[1] = (struct inet_diag_bc_op){.no = (uint16_t)port};
    ops[2] = (struct inet_diag_bc_op){.code = INET_DIAG_BC_S_LE, .yes = 8, .no = 8 + 4};
    ops[3] = (struct inet_diag_bc_op){.no = (uint16_t)port};
    return 16;
}

static int nl_send(struct guard_probe *p, int family, unsigned port)
{
    struct nl_request m;
    memset(&m, 0, sizeof(m));
    size_t bc = nl_bytecode(m.ops, port, p->nl_range);
    m.nla.nla_type = INET_DIAG_REQ_BYTECODE;
    m.nla.nla_len = (uint16_t)(NLA_HDRLEN + bc);
    m.nlh.nlmsg_len = (uint32_t)(offsetof(struct nl_request, nla) + NLA_HDRLEN + bc);
    m.nlh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
    m.nlh.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
    m.nlh.nlmsg_seq = ++p->nl_seq;
    m.req.sdiag_family = (uint8_t)family;
    m.req.sdiag_protocol = IPPROTO_TCP;
    m.req.idiag_states = (1u << TCP_ESTABLISHED) | (1u << TCP_LISTEN);
    struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
    for (;;) {
        ssize_t n =
            sendto(p->nl_fd, &m, m.nlh.nlmsg_len, 0, (struct sockaddr *)&kernel, sizeof(kernel));
        if (n >= 0)
            return n == (ssize_t)m.nlh.nlmsg_len ? 0 : -EIO;
        if (errno != EINTR)
            return -errno;
    }
}

/* One datagram of the reply. 1 at the end of the dump, 0 for more, < 0 on
 * an error the kernel sent (*kernel_err set). Messages of another request
 * (a sequence number left from a query given up on) are skipped. */
static int nl_parse(struct guard_probe *p, const void *buf, size_t len, unsigned port,
                    unsigned *est, bool *listening, bool *kernel_err)
{
    int left = (int)len;
    for (const struct nlmsghdr *nlh = buf; NLMSG_OK(nlh, left); nlh = NLMSG_NEXT(nlh, left)) {
        if (nlh->nlmsg_seq != p->nl_seq)
            continue;
        if (nlh->nlmsg_type == NLMSG_DONE) {
            int err = 0; /* a dump that failed half way says so here */
            if (nlh->nlmsg_len >= NLMSG_LENGTH(sizeof(err)))
                memcpy(&err, NLMSG_DATA(nlh), sizeof(err));
            *kernel_err = err < 0;
            return err < 0 ? err : 1;
        }
        if (nlh->nlmsg_type == NLMSG_ERROR) {
            struct nlmsgerr e;
            if (nlh->nlmsg_len < NLMSG_LENGTH(sizeof(e)))
                return -EIO;
            memcpy(&e, NLMSG_DATA(nlh), sizeof(e));
            *kernel_err = e.error < 0;
            return e.error < 0 ? e.error : 1;
        }
        if (nlh->nlmsg_type != SOCK_DIAG_BY_FAMILY ||
            nlh->nlmsg_len < NLMSG_LENGTH(sizeof(struct inet_diag_msg)))
            continue;
        const struct inet_diag_msg *m = NLMSG_DATA(nlh);
        p->nl_msgs++;
        if (ntohs(m->id.idiag_sport) != port)
            continue; /* the filter already said no; cheap to be sure */
        if (m->idiag_state == TCP_ESTABLISHED)
            (*est)++;
        else if (m->idiag_state == TCP_LISTEN)
            *listening = true;
    }
    return 0;
}

/* The kernel builds the first part of the dump while sendto() runs and
 * each next part while recv() takes the one before, so a non-blocking
 * recv() finds one; the poll() only covers a kernel that defers it. */
static int nl_recv(struct guard_probe *p, size_t *ret_len)
{
    for (unsigned waits = 0;;) {
        struct sockaddr_nl from;
        socklen_t fromlen = sizeof(from);
        ssize_t n = recvfrom(p->nl_fd, p->nl_buf, GUARD_NL_BUF, MSG_DONTWAIT | MSG_TRUNC,
                             (struct sockaddr *)&from, &fromlen);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN && waits++ < 3) {
            struct pollfd pfd = {.fd = p->nl_fd, .events = POLLIN};
            if (poll(&pfd, 1, 100 /* ms */) < 0 && errno != EINTR)
                return -errno;
            continue;
        }
        if (n < 0)
            return errno == EAGAIN ? -ETIMEDOUT : -errno;
        if ((size_t)n > GUARD_NL_BUF)
            return -EMSGSIZE; /* MSG_TRUNC: the datagram's real length */
        if (fromlen < sizeof(from) || from.nl_pid != 0)
            continue; /* not from the kernel */
        *ret_len = (size_t)n;
        return 0;
    }
}

/* One family's dump, counted into *est and *listening. *kernel_err tells
 * an error the kernel answered (a filter or family it lacks) from one of
 * the socket itself. */
static int nl_query(struct guard_probe *p, int family, unsigned port, unsigned *est,
                    bool *listening, bool *kernel_err)
{
    *kernel_err = false;
    int r = nl_send(p, family, port);
    while (r == 0) {
        size_t len;
        r = nl_recv(p, &len);
        if (r == 0)
            r = nl_parse(p, p->nl_buf, len, port, est, listening, kernel_err);
    }
    return r < 0 ? r : 0;
}

/* Both families by netlink, each only when sockstat says it holds a
 * socket (a dump walks the whole hash table too, if much faster than the
 * text). The counts are set only when both dumps went through. */
static int port_netlink(struct host *h, struct guard_probe *p, unsigned *ret_est,
                        bool *ret_listening)
{
    unsigned est = 0;
    bool listening = false;
    p->nl_msgs = 0;
    for (size_t i = 0; i < ARRAY_SIZE(tcp_families); i++) {
        if (family_empty(h, tcp_families[i].sockstat, tcp_families[i].proto))
            continue;
        unsigned e = 0;
        bool l = false, kernel;
        int r = nl_query(p, tcp_families[i].family, p->w->port, &e, &l, &kernel);
        if (r == -EINVAL && kernel && !p->nl_range) {
            p->nl_range = true; /* an older kernel, without INET_DIAG_BC_S_EQ: a range of one */
            e = 0;
            l = false;
            r = nl_query(p, tcp_families[i].family, p->w->port, &e, &l, &kernel);
        }
        if ((r == -EAFNOSUPPORT || r == -ENOENT) && kernel && tcp_families[i].family == AF_INET6)
            continue; /* no IPv6 (or no diag module for it) */
        if (r < 0)
            return r;
        est += e;
        listening |= l;
    }
    *ret_est = est;
    *ret_listening = listening;
    return 0;
}

static int nl_open(struct host *h, struct guard_probe *p)
{
    int fd = host_netlink_open(h, NETLINK_SOCK_DIAG);
    if (fd < 0)
        return fd;
    p->nl_fd = fd;
    if (!p->nl_buf)
        p->nl_buf = xmalloc(GUARD_NL_BUF);
    return 0;
}

/* Netlink while it works. A failed query may leave a dump half read, so
 * the socket is closed and opened again at the next probe; after three
 * failures in a row (or when the socket is refused) the text tables are
 * read for good, and the reading's source says why. */
static int probe_port(struct host *h, struct guard_probe *p, struct guard_reading *r)
{
    if (p->nl_err == 0 && p->nl_fd < 0) {
        int err = nl_open(h, p);
        if (err < 0)
            p->nl_err = err;
    }
    if (p->nl_fd >= 0) {
        int err = port_netlink(h, p, &r->connections, &r->listening);
        if (err == 0) {
            p->nl_fails = 0;
            r->source = "sock_diag netlink";
            r->present = r->listening || r->connections > 0;
            p->have_prev = true;
            return 0;
        }
        nl_close(p);
        if (++p->nl_fails >= 3)
            p->nl_err = err;
        snprintf(p->source, sizeof(p->source), "net/tcp text (sock_diag query: %s)",
                 strerror(-err));
    } else if (p->nl_err == -ENOTSUP && !h->live) {
        snprintf(p->source, sizeof(p->source), "net/tcp text");
    } else {
        snprintf(p->source, sizeof(p->source), "net/tcp text (sock_diag: %s)",
                 strerror(-p->nl_err));
    }
    r->source = p->source;
    int err = port_text(h, p->w->port, &r->connections, &r->listening);
    r->present = r->listening || r->connections > 0;
    p->have_prev = true;
    return err;
}

int guard_probe_read(struct host *h, struct guard_probe *p, struct guard_reading *ret)
{
    struct guard_reading r = {0};
    int err;
    switch (p->w->kind) {
    case GUARD_WL_CGROUP:
        err = probe_cgroup(h, p, &r);
        break;
    case GUARD_WL_PROCESS:
        err = probe_process(h, p, &r);
        break;
    default:
        err = probe_port(h, p, &r);
        break;
    }
    if (err < 0)
        return err;
    *ret = r;
    return 0;
}
