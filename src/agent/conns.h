/* The agent's HTTP connections: accepted by the agent, served by
 * libmicrohttpd (MHD_USE_NO_LISTEN_SOCKET, MHD_add_connection), so that
 * the agent, not the kernel's accept queue, decides who waits.
 *
 * A client is a source address (an IPv6 one by its /64; every local
 * process on 127.0.0.1 is one client). Each round of the loop accepts up
 * to CONNS_BATCH connections, lets libmicrohttpd read them, then enforces:
 *   - a connection that has not sent a whole request head (request line
 *     and headers) within header_timeout_s of connecting, or of the end
 *     of its previous answer, is closed;
 *   - while more than max connections are open, the oldest one waiting
 *     for a request is closed, else the one busy (answering) for longest,
 *     taken from the clients above per_client connections while there are
 *     any. The limit is not a refusal: a new connection always gets in
 *     and is read at least once, so neither a remote client with many
 *     connections nor a local one (which shares its address with every
 *     local scraper) can starve the others, and one busy client alone is
 *     not cut back while there is room.
 * Closing is shutdown(2) on the socket (linger 0: a reset, no TIME_WAIT),
 * which libmicrohttpd then sees and cleans up. Nothing is logged per
 * connection: libmicrohttpd's own messages are limited to one line a
 * minute. No timer runs while there is no connection. */
#pragma once

#include <microhttpd.h>
#include <stdbool.h>
#include <stdint.h>

#define CONNS_BATCH 32 /* connections accepted per round of the loop */

struct conns_limits {
    unsigned max;              /* connections in all */
    unsigned per_client;       /* per client */
    unsigned header_timeout_s; /* to send a whole request head */
};

struct conns_stats {
    uint64_t open;      /* connections now */
    uint64_t accepted;  /* since start */
    uint64_t evicted;   /* closed for a limit */
    uint64_t timed_out; /* closed for the header deadline */
};

struct conns;

/* Bind and listen on HOST (a numeric IPv4 or IPv6 address) and PORT:
 * non-blocking, close-on-exec, SO_REUSEADDR, an IPv6 socket v6-only. */
int conns_listen(const char *host, uint16_t port, int *ret_fd);

/* Take LISTEN_FD and watch it in EPFD (epoll data: the fd itself). */
int conns_new(int listen_fd, int epfd, const struct conns_limits *lim, struct conns **ret);
/* Start libmicrohttpd on C's connections: FLAGS (MHD_USE_EPOLL and
 * friends), HANDLER and its CLS, EXTRA options (MHD_OPTION_END-ended).
 * C sets the connection limit, the callbacks and the logger. */
int conns_start(struct conns *c, unsigned flags, MHD_AccessHandlerCallback handler, void *cls,
                const struct MHD_OptionItem *extra, struct MHD_Daemon **ret);
/* Stops libmicrohttpd first (its callbacks need C), then frees C. */
void conns_free(struct conns *c);

int conns_listen_fd(const struct conns *c);
/* The listening socket is readable: accept a batch. */
void conns_accept(struct conns *c);
/* After MHD_run(): deadlines and limits; returns how many it closed
 * (run libmicrohttpd again to let them go). */
unsigned conns_enforce(struct conns *c, uint64_t now_ns);
/* Milliseconds to the next header deadline; -1 when none. */
int conns_timeout_ms(const struct conns *c, uint64_t now_ns);
/* Called on every sample: listen again after running out of file
 * descriptors. */
void conns_tick(struct conns *c);
/* From the access handler: CONN has sent a whole request head. */
void conns_request_head(struct MHD_Connection *conn);
void conns_get_stats(const struct conns *c, struct conns_stats *ret);
