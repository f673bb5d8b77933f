/* The header every `--json` document of watt starts with (docs/json.md):
 * {"schema": "watt-<verb>/N", "time": "2026-12-04T17:50:00Z", ...}.
 * "time" is RFC 3339 UTC to the second; $WATT_TIME_NOW (seconds since
 * 1970, as SOURCE_DATE_EPOCH) fixes it, so that goldens are deterministic. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "json.h"

#define DOC_TIME_ENV "WATT_TIME_NOW"

/* Checks $WATT_TIME_NOW: 0 when unset or a whole number of seconds from 0
 * to 253402300799 (9999-12-31T23:59:59Z); else -EINVAL and *RET_ERR, a
 * sentence naming the variable and its value (the caller frees it).
 * main() calls it once, so that the writers below never meet a bad value. */
int doc_time_check(char **ret_err);

/* The time a document states, in seconds since 1970: $WATT_TIME_NOW when
 * it is set and valid, else FALLBACK_S (the moment the document
 * describes; pass doc_time_now() for "now"). */
int64_t doc_time(int64_t fallback_s);
int64_t doc_time_now(void);

/* "YYYY-MM-DDTHH:MM:SSZ" into BUF (at least 21 bytes; 64 is safe);
 * -ERANGE when T is before 1970 or after 9999. */
int doc_time_format(int64_t t, char *buf, size_t size);

/* Opens the document's top-level object and writes "schema" and "time",
 * the first two members of every document. */
void json_doc_begin(struct json *j, const char *schema, int64_t time_s);
