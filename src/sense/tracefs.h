/* tracefs event formats (Documentation/trace/events.rst, section 1.3
 * "Event formats"; kernel/trace/trace_events.c f_show()).
 *
 * Each event directory has an `id` (the perf tracepoint config value) and a
 * `format` file:
 *
 *   name: sched_wakeup
 *   ID: 374
 *   format:
 *           field:unsigned short common_type;  offset:0;  size:2;  signed:0;
 *           field:unsigned char common_flags;  offset:2;  size:1;  signed:0;
 *           ...
 *           field:char comm[16];               offset:8;  size:16; signed:0;
 *           field:pid_t pid;                   offset:24; size:4;  signed:1;
 *           field:__data_loc char[] name;      offset:12; size:4;  signed:0;
 *
 *   print fmt: "..."
 *
 * A __data_loc field holds a u32: offset (low 16 bits) and length (high 16)
 * of the real data inside the same record. A perf PERF_SAMPLE_RAW record
 * carries exactly these bytes. Field offsets differ between kernels (the
 * common fields changed in 4.x; sched_wakeup lost `success` in 4.3), so
 * watt never hard-codes them. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/diag.h"

/* common_flags bits (include/linux/trace_events.h TRACE_FLAG_*). */
#define TRACEFS_FLAG_HARDIRQ 0x08
#define TRACEFS_FLAG_SOFTIRQ 0x10

struct tracefs_field {
    char name[64];
    unsigned offset, size;
    bool is_signed;
    bool dynamic;  /* __data_loc */
    bool is_array; /* "char comm[16]" */
};

struct tracefs_format {
    char name[64]; /* "sched_wakeup" */
    unsigned id;   /* the `ID:` line; 0 when absent */
    unsigned nfields;
    struct tracefs_field *fields; /* owned */
};

/* Parse the text of an event's `format` file. Lines that are not fields
 * are ignored; a malformed field line is named in d ("line N") and
 * skipped. -EBADMSG when no field at all could be read. */
int tracefs_parse_format(const char *text, size_t len, struct tracefs_format *ret, struct diags *d);
void tracefs_format_clear(struct tracefs_format *f);
const struct tracefs_field *tracefs_find_field(const struct tracefs_format *f, const char *name);

/* Read an integer field (size 1, 2, 4 or 8; sign-extended when signed) from
 * a raw record of len bytes. -ERANGE when the field lies outside it. */
int tracefs_field_u64(const struct tracefs_field *fl, const void *raw, size_t len, uint64_t *ret);
/* A string field: a fixed char array (up to its first NUL) or a __data_loc
 * one. *ret points into raw; *ret_len excludes any NUL. -ERANGE when it
 * lies outside the record. */
int tracefs_field_str(const struct tracefs_field *fl, const void *raw, size_t len, const char **ret,
                      size_t *ret_len);
