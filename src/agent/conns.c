/* The agent's HTTP connections: see conns.h. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agent/conns.h"
#include "base/util.h"

#define CLIENT_BUCKETS 256
#define LOG_EVERY_NS   (60ull * 1000000000ull) /* libmicrohttpd: one line a minute */

enum conn_state { CONN_WAITING, CONN_BUSY, CONN_CLOSING };

struct client {
    struct client *next; /* in its hash bucket */
    unsigned char key[16];
    unsigned n; /* connections open (not closing) */
};

struct conn {
    struct conn *prev, *next; /* in waiting or busy, oldest first; neither when closing */
    struct conns *owner;
    struct client *client; /* NULL when closing */
    int fd;
    enum conn_state state;
    uint64_t since_ns; /* waiting: since connecting or the last answer; busy: since the head */
};

struct conn_list {
    struct conn *head, *tail;
};

struct conns {
    int lfd, epfd;
    bool paused;  /* the listening socket is out of the epoll set */
    unsigned mhd; /* connections libmicrohttpd holds, closing ones too */
    struct conns_limits lim;
    struct conn_list waiting, busy;
    struct client *buckets[CLIENT_BUCKETS];
    struct MHD_Daemon *daemon;
    struct conns_stats st;
    uint64_t log_last_ns;
    unsigned log_quiet; /* messages not shown since log_last_ns */
};

static void list_append(struct conn_list *l, struct conn *x)
{
    x->next = NULL;
    x->prev = l->tail;
    if (l->tail)
        l->tail->next = x;
    else
        l->head = x;
    l->tail = x;
}

static void list_remove(struct conn_list *l, struct conn *x)
{
    if (x->prev)
        x->prev->next = x->next;
    else
        l->head = x->next;
    if (x->next)
        x->next->prev = x->prev;
    else
        l->tail = x->prev;
    x->prev = x->next = NULL;
}

static struct conn_list *list_of(struct conns *c, struct conn *x)
{
    return x->state == CONN_WAITING ? &c->waiting : &c->busy;
}

/* IPv4 as IPv4-mapped IPv6; IPv6 by its /64, where one host usually has
 * all of its addresses. */
static void client_key(const struct sockaddr *sa, unsigned char key[16])
{
    static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    memset(key, 0, 16);
    if (sa && sa->sa_family == AF_INET) {
        memcpy(key, mapped, sizeof(mapped));
        memcpy(key + 12, &((const struct sockaddr_in *)sa)->sin_addr, 4);
    } else if (sa && sa->sa_family == AF_INET6) {
        const unsigned char *a = ((const struct sockaddr_in6 *)sa)->sin6_addr.s6_addr;
        memcpy(key, a, memcmp(a, mapped, sizeof(mapped)) == 0 ? 16 : 8);
    }
}

static unsigned client_hash(const unsigned char key[16])
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (int i = 0; i < 16; i++)
        h = (h ^ key[i]) * 16777619u;
    return h % CLIENT_BUCKETS;
}

static struct client *client_ref(struct conns *c, const struct sockaddr *sa)
{
    unsigned char key[16];
    client_key(sa, key);
    struct client **b = &c->buckets[client_hash(key)];
    for (struct client *x = *b; x; x = x->next)
        if (memcmp(x->key, key, 16) == 0) {
            x->n++;
            return x;
        }
    struct client *x = xcalloc(1, sizeof(*x));
    memcpy(x->key, key, 16);
    x->n = 1;
    x->next = *b;
    *b = x;
    return x;
}

static void client_unref(struct conns *c, struct client *cl)
{
    if (--cl->n > 0)
        return;
    for (struct client **p = &c->buckets[client_hash(cl->key)]; *p; p = &(*p)->next)
        if (*p == cl) {
            *p = cl->next;
            break;
        }
    free(cl);
}

/* Close X: shutdown(2) now, libmicrohttpd sees it on its next run and
 * frees the connection (on_connection()). Linger 0: its close() resets
 * the connection, so that a flood of them leaves no TIME_WAIT socket
 * behind (tens of thousands a minute, otherwise). */
static void conn_close(struct conns *c, struct conn *x, bool timed_out)
{
    struct linger lg = {.l_onoff = 1, .l_linger = 0};
    (void)setsockopt(x->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
    (void)shutdown(x->fd, SHUT_RDWR);
    list_remove(list_of(c, x), x);
    x->state = CONN_CLOSING;
    client_unref(c, x->client);
    x->client = NULL;
    c->st.open--;
    if (timed_out)
        c->st.timed_out++;
    else
        c->st.evicted++;
}

/* Whom to close when the pool is over its limit: the oldest connection
 * waiting for a request, else the one busy for longest; taken from the
 * clients above their share (per_client) while there are any. */
static struct conn *victim(struct conns *c)
{
    for (int over = 1; over >= 0; over--) {
        for (struct conn *x = c->waiting.head; x; x = x->next)
            if (!over || x->client->n > c->lim.per_client)
                return x;
        for (struct conn *x = c->busy.head; x; x = x->next)
            if (!over || x->client->n > c->lim.per_client)
                return x;
    }
    return NULL;
}

static void listen_on(struct conns *c, bool on)
{
    if (c->paused == !on)
        return;
    struct epoll_event ev = {.events = on ? EPOLLIN : 0, .data.fd = c->lfd};
    if (epoll_ctl(c->epfd, EPOLL_CTL_MOD, c->lfd, &ev) == 0)
        c->paused = !on;
}

static void on_connection(void *cls, struct MHD_Connection *mc, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe)
{
    struct conns *c = cls;
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *fd =
            MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CONNECTION_FD);
        const union MHD_ConnectionInfo *addr =
            MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        struct conn *x = xcalloc(1, sizeof(*x));
        x->owner = c;
        x->fd = fd ? fd->connect_fd : -1;
        x->client = client_ref(c, addr ? addr->client_addr : NULL);
        x->state = CONN_WAITING;
        x->since_ns = now_monotonic_ns();
        list_append(&c->waiting, x);
        *socket_context = x;
        c->mhd++;
        c->st.open++;
        c->st.accepted++;
        return;
    }
    struct conn *x = *socket_context;
    if (!x)
        return;
    if (x->state != CONN_CLOSING) {
        list_remove(list_of(c, x), x);
        client_unref(c, x->client);
        c->st.open--;
    }
    free(x);
    *socket_context = NULL;
    c->mhd--;
    if (c->mhd < c->lim.max + CONNS_BATCH)
        listen_on(c, true);
}

static struct conn *conn_of(struct MHD_Connection *mc)
{
    const union MHD_ConnectionInfo *i =
        MHD_get_connection_info(mc, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return i ? i->socket_context : NULL;
}

void conns_request_head(struct MHD_Connection *mc)
{
    struct conn *x = conn_of(mc);
    if (!x || x->state != CONN_WAITING)
        return;
    list_remove(&x->owner->waiting, x);
    x->state = CONN_BUSY;
    x->since_ns = now_monotonic_ns();
    list_append(&x->owner->busy, x);
}

/* A request is over (answered or not): the connection waits for the next. */
static void on_completed(void *cls, struct MHD_Connection *mc, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    (void)cls;
    (void)con_cls;
    (void)toe;
    struct conn *x = conn_of(mc);
    if (!x || x->state != CONN_BUSY)
        return;
    list_remove(&x->owner->busy, x);
    x->state = CONN_WAITING;
    x->since_ns = now_monotonic_ns();
    list_append(&x->owner->waiting, x);
}

/* libmicrohttpd says something per connection it drops ("closed by
 * remote side with incomplete request"): a flood must not become a flood
 * of log lines. The first message is shown, then one a minute with the
 * count of those not shown. */
static void on_log(void *cls, const char *fmt, va_list ap)
{
    struct conns *c = cls;
    uint64_t now = now_monotonic_ns();
    if (c->log_last_ns && now - c->log_last_ns < LOG_EVERY_NS) {
        c->log_quiet++;
        return;
    }
    char msg[256];
    vsnprintf(msg, sizeof(msg), fmt, ap);
    msg[strcspn(msg, "\r\n")] = '\0';
    if (c->log_quiet)
        fprintf(stderr, "watt agent: libmicrohttpd: %s (%u more messages in %.0f s not shown)\n",
                msg, c->log_quiet, (double)(now - c->log_last_ns) / 1e9);
    else
        fprintf(stderr, "watt agent: libmicrohttpd: %s\n", msg);
    c->log_last_ns = now;
    c->log_quiet = 0;
}

int conns_listen(const char *host, uint16_t port, int *ret_fd)
{
    struct sockaddr_storage ss = {0};
    struct sockaddr_in *in4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
    socklen_t len;
    if (inet_pton(AF_INET, host, &in4->sin_addr) == 1) {
        in4->sin_family = AF_INET;
        in4->sin_port = htons(port);
        len = sizeof(*in4);
    } else if (inet_pton(AF_INET6, host, &in6->sin6_addr) == 1) {
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons(port);
        len = sizeof(*in6);
    } else {
        return -EINVAL;
    }
    _cleanup_close_ int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    int one = 1;
    (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (ss.ss_family == AF_INET6)
        (void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
    /* the kernel caps the queue at net.core.somaxconn (4096 by default):
     * connections wait there, complete, while the agent works through them */
    if (bind(fd, (struct sockaddr *)&ss, len) < 0 || listen(fd, 4096) < 0)
        return -errno;
    *ret_fd = TAKE_FD(fd);
    return 0;
}

int conns_new(int listen_fd, int epfd, const struct conns_limits *lim, struct conns **ret)
{
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = listen_fd};
    if (epoll_ctl(epfd, EPOLL_CTL_ADD, listen_fd, &ev) < 0)
        return -errno;
    struct conns *c = xcalloc(1, sizeof(*c));
    c->lfd = listen_fd;
    c->epfd = epfd;
    c->lim = *lim;
    if (c->lim.per_client == 0 || c->lim.per_client > c->lim.max)
        c->lim.per_client = c->lim.max;
    *ret = c;
    return 0;
}

int conns_start(struct conns *c, unsigned flags, MHD_AccessHandlerCallback handler, void *cls,
                const struct MHD_OptionItem *extra, struct MHD_Daemon **ret)
{
    /* the logger first, or MHD says so through its own logger */
    c->daemon = MHD_start_daemon(
        flags | MHD_USE_NO_LISTEN_SOCKET | MHD_USE_ERROR_LOG, 0, NULL, NULL, handler, cls,
        MHD_OPTION_EXTERNAL_LOGGER, on_log, c, MHD_OPTION_CONNECTION_LIMIT,
        c->lim.max + CONNS_BATCH, MHD_OPTION_NOTIFY_CONNECTION, on_connection, c,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, c, MHD_OPTION_ARRAY, extra, MHD_OPTION_END);
    if (!c->daemon)
        return -EINVAL;
    *ret = c->daemon;
    return 0;
}

void conns_free(struct conns *c)
{
    if (!c)
        return;
    if (c->daemon)
        MHD_stop_daemon(c->daemon); /* closes every connection: on_connection() */
    for (unsigned i = 0; i < CLIENT_BUCKETS; i++)
        while (c->buckets[i]) {
            struct client *x = c->buckets[i];
            c->buckets[i] = x->next;
            free(x);
        }
    if (c->lfd >= 0)
        close(c->lfd);
    free(c);
}

int conns_listen_fd(const struct conns *c)
{
    return c->lfd;
}

void conns_accept(struct conns *c)
{
    for (unsigned i = 0; i < CONNS_BATCH; i++) {
        if (c->mhd >= c->lim.max + CONNS_BATCH) {
            listen_on(c, false); /* until libmicrohttpd lets some go */
            return;
        }
        struct sockaddr_storage ss;
        socklen_t len = sizeof(ss);
        int fd = accept4(c->lfd, (struct sockaddr *)&ss, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                /* the connection stays queued: make room, or wait for
                 * a connection to end (or the next sample) */
                struct conn *x = victim(c);
                if (x)
                    conn_close(c, x, false);
                else
                    listen_on(c, false);
            }
            return;
        }
        /* on failure libmicrohttpd has closed the socket */
        (void)MHD_add_connection(c->daemon, fd, (struct sockaddr *)&ss, len);
    }
}

unsigned conns_enforce(struct conns *c, uint64_t now_ns)
{
    unsigned closed = 0;
    uint64_t limit_ns = (uint64_t)c->lim.header_timeout_s * 1000000000ull;
    while (c->waiting.head && now_ns - c->waiting.head->since_ns >= limit_ns) {
        conn_close(c, c->waiting.head, true);
        closed++;
    }
    while (c->st.open > c->lim.max) {
        conn_close(c, victim(c), false);
        closed++;
    }
    return closed;
}

int conns_timeout_ms(const struct conns *c, uint64_t now_ns)
{
    if (!c->waiting.head)
        return -1;
    uint64_t deadline =
        c->waiting.head->since_ns + (uint64_t)c->lim.header_timeout_s * 1000000000ull;
    if (deadline <= now_ns)
        return 0;
    uint64_t ms = (deadline - now_ns + 999999) / 1000000;
    return ms > 60000 ? 60000 : (int)ms;
}

void conns_tick(struct conns *c)
{
    if (c->paused && c->mhd < c->lim.max + CONNS_BATCH)
        listen_on(c, true);
}

void conns_get_stats(const struct conns *c, struct conns_stats *ret)
{
    *ret = c->st;
}
