/* A streaming JSON writer: the caller opens and closes containers, the
 * writer places commas, escapes strings and writes NaN as null. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "strbuf.h"

#define JSON_MAX_DEPTH 32

struct json {
    struct strbuf out;
    int depth;
    bool need_comma[JSON_MAX_DEPTH];
    bool after_key;
    bool pretty;
};

void json_init(struct json *j, bool pretty);
void json_free(struct json *j);

void json_object_begin(struct json *j);
void json_object_end(struct json *j);
void json_array_begin(struct json *j);
void json_array_end(struct json *j);
void json_key(struct json *j, const char *key);

void json_string(struct json *j, const char *s); /* NULL writes null */
void json_u64(struct json *j, uint64_t v);
void json_i64(struct json *j, int64_t v);
void json_double(struct json *j, double v); /* NaN or infinity writes null */
void json_bool(struct json *j, bool v);
void json_null(struct json *j);

/* key + value in one call */
void json_kv_string(struct json *j, const char *key, const char *s);
void json_kv_u64(struct json *j, const char *key, uint64_t v);
void json_kv_i64(struct json *j, const char *key, int64_t v);
void json_kv_double(struct json *j, const char *key, double v);
void json_kv_bool(struct json *j, const char *key, bool v);
void json_kv_null(struct json *j, const char *key);

/* Shortest decimal text that reads back as exactly v ("%.15g" or "%.17g"). */
void format_double(char *buf, size_t size, double v);
