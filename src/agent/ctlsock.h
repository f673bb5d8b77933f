/* The agent's control socket on the file system (the protocol is in
 * agent.c). The path is bound only where nothing lives, or a socket that
 * refuses connections (left by an agent that was killed): a regular file,
 * a live agent's socket or anything else is left alone. At exit the path
 * is removed only if it is still the inode this agent bound (another agent
 * may have taken the path since). Messages go to stderr. */
#pragma once

#include <sys/types.h>

struct ctlsock {
    int fd; /* listening, non-blocking, close-on-exec; -1: none */
    dev_t dev;
    ino_t ino;
};

/* Bind and listen on PATH, mode 0600. No socket (ret->fd -1, said why on
 * stderr) is not an error: the agent serves without one. < 0: -errno. */
int ctlsock_open(const char *path, struct ctlsock *ret);
/* Close S and remove PATH if it is still S's socket. */
void ctlsock_close(const char *path, struct ctlsock *s);
