/* What the operator tells a running controller, and what the controller
 * shows the operator, as small files in state_dir (docs/fleet-run.md):
 *
 *   maintenance  hosts kept out of plans, one a line: "h2 1764790000"
 *                (NAME, since: unix seconds); watt fleet host NAME
 *                maintenance on|off writes it, every tick reads it
 *   approvals    actions approved in manual mode, one a line:
 *                "3fa2c1d0 1764790001234 1764790012.5" (ID, the plan it
 *                was approved from, when: unix seconds) or "all PLAN
 *                WHEN" (every action pending in that plan); watt fleet
 *                approve appends, the next tick takes them all
 *   plan.json    manual mode: each tick's plan (control_manual.c)
 *
 * Writes: a temporary file, fsynced, renamed over the old one, and the
 * folder fsynced; writers hold opstate_lock(). Reads treat a file as
 * hostile input: refused unless it is a regular file (no symlink) owned
 * by root or by the reader's euid, not writable by group or others, and
 * at most OPSTATE_FILE_MAX bytes; a line that is not a record refuses the
 * whole file, naming the line. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fleet/model/fleet.h"

#define OPSTATE_FILE_MAX  65536
#define OPSTATE_ID_LEN    8    /* hex digits */
#define OPSTATE_MAX_LINES 4096 /* records in one file */

/* state_dir itself (mode 0700) when it is missing. */
int opstate_mkdir(const char *dir, struct fleet_error *err);
/* Whether a file or folder under state_dir may be trusted with what root
 * acts on: owned by root or by us, writable by no one else. 0, or -EPERM
 * with ERR naming PATH and what is wrong (as the tune journal says it). */
struct stat;
int opstate_trusted(const char *path, const struct stat *st, struct fleet_error *err);
/* An exclusive flock on the folder DIR for a read-modify-write; *RET_FD
 * to close() when done. */
int opstate_lock(const char *dir, int *ret_fd, struct fleet_error *err);
/* DIR/NAME into *RET (NUL-terminated, caller frees) under the rules
 * above; -ENOENT (ERR set too) when there is no such file. */
int opstate_read(const char *dir, const char *name, char **ret, size_t *ret_len,
                 struct fleet_error *err);
/* DIR/NAME := TEXT, durably (mode 0600). */
int opstate_write(const char *dir, const char *name, const char *text, size_t len,
                  struct fleet_error *err);
/* DIR/NAME removed (absent: 0), and the folder fsynced. */
int opstate_remove(const char *dir, const char *name, struct fleet_error *err);

struct opstate_maint {
    char host[FLEET_NAME_MAX];
    double since; /* unix seconds */
};

/* The maintenance file. ORIGIN names it in errors ("maintenance line 3:
 * ..."). Host names are checked for their characters only: a name fleet.ini
 * no longer has is the caller's to report. */
int opstate_maint_parse(const char *text, size_t len, const char *origin,
                        struct opstate_maint **ret, size_t *ret_n, struct fleet_error *err);
char *opstate_maint_format(const struct opstate_maint *v, size_t n);

struct opstate_approval {
    char id[OPSTATE_ID_LEN + 1]; /* an action's ID, or "all" */
    uint64_t plan;               /* plan.json's "plan" it was approved from */
    double time;                 /* unix seconds */
};

int opstate_approvals_parse(const char *text, size_t len, const char *origin,
                            struct opstate_approval **ret, size_t *ret_n, struct fleet_error *err);
char *opstate_approvals_format(const struct opstate_approval *v, size_t n);
/* An action ID: 8 lowercase hex digits. */
bool opstate_id_valid(const char *s);
/* The ID of an action: FNV-1a of its words ("migrate", vm, src, dst; or
 * "power_on", host), so the same action has the same ID every tick. */
void opstate_action_id(char ret[OPSTATE_ID_LEN + 1], const char *const *words, size_t n);

/* plan.json as control_manual.c writes it: its serial ({"plan":N,...}),
 * and whether action ID is there pending, with its "what" text (RET_WHAT
 * may be NULL). Read as the controller wrote it, not as any JSON. */
int opstate_plan_serial(const char *text, uint64_t *ret);
bool opstate_plan_pending(const char *text, const char *id, char *ret_what, size_t size);
