/* The fleet controller's metrics file (watt fleet run --metrics), checked
 * and served in both exposition formats.
 *
 * The file is Prometheus text format 0.0.4 as the controller writes it.
 * It is read whole and judged whole: every family named watt_fleet_* (so
 * none can collide with the agent's own), each family's lines together
 * and its HELP and TYPE once and before its samples, counters named
 * *_total with values that are not negative, gauge and untyped names not
 * ending in _total, valid names, label sets and values, no series twice,
 * UTF-8. A file
 * that passes is served as it is in the text format and converted for
 * OpenMetrics (counter families named without _total, untyped as
 * unknown, HELP's quotes escaped, millisecond timestamps as seconds); one
 * that fails is not served at all, and the error names the line. */
#pragma once

#include <stddef.h>

/* Check BUF (LEN bytes). On success *ret_text is the document for the text
 * format and *ret_om for OpenMetrics (without "# EOF"), both owned by the
 * caller and ending in a newline unless empty. On failure returns -EINVAL
 * and *ret_err says "line N: what" (owned). */
int fleet_doc_convert(const char *buf, size_t len, char **ret_text, char **ret_om, char **ret_err);
