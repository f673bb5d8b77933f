/* fleet.ini from its file: read once through one descriptor, refused
 * when it holds bmc_password and others may read it, and each host's
 * bmc_password_file read and checked the same way (as ssh does for keys). */
#pragma once

#include "fleet/control/site.h"
#include "fleet/model/fleet.h"

/* The most a bmc_password_file may hold, bytes. */
#define SITE_PASSWORD_FILE_MAX 4096

/* Read and parse PATH into *RET (site_parse()), then:
 * - a fleet.ini that holds bmc_password and is readable by group or
 *   others is refused (its mode as fstat() gives it for the descriptor
 *   read, so a file swapped after the check is never the one read);
 * - each bmc_password_file (relative: to fleet.ini's folder) must be a
 *   regular file not readable by group or others; its first line (no
 *   "\n", no "\r") is the host's bmc_password.
 * Errors name the file, the fleet.ini line and the mode to set. */
int site_load(const char *path, struct site *ret, struct fleet_error *err);

/* The mode bits that make a secret readable by others: group and world. */
#define SITE_SECRET_MODE_BAD 0044
