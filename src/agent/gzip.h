/* gzip for the agent's responses (RFC 1952 through zlib), and whether a
 * request's Accept-Encoding allows it. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* HEADER (Accept-Encoding, may be NULL) lists gzip, or *, with a q above 0
 * (RFC 9110 12.5.3; "identity" is always acceptable, so it needs none). */
bool agent_accepts_gzip(const char *header);

/* BUF (LEN bytes) as a gzip member in *RET (malloc'd, *RET_LEN bytes).
 * Returns 0 or -ENOMEM/-EIO from zlib. */
int agent_gzip(const char *buf, size_t len, char **ret, size_t *ret_len);
