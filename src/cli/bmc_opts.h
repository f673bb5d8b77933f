/* --bmc HOST[:PORT], --bmc-user USER, --bmc-password-file FILE: the BMC
 * `watt report` and `watt top` read the wall power from over the LAN
 * (sense/dcmi.h), instead of in-band through /dev/ipmi0. The password is
 * never an argument: the first line of FILE, else $WATT_BMC_PASSWORD; the
 * user, else $WATT_BMC_USER, else "" (the anonymous user). */
#pragma once

enum {
    CLI_OPT_BMC = 0x300,
    CLI_OPT_BMC_USER,
    CLI_OPT_BMC_PASSWORD_FILE,
};

#define CLI_BMC_LONGOPTS                                                        \
    {"bmc", required_argument, NULL, CLI_OPT_BMC},                              \
        {"bmc-user", required_argument, NULL, CLI_OPT_BMC_USER},                \
    {                                                                           \
        "bmc-password-file", required_argument, NULL, CLI_OPT_BMC_PASSWORD_FILE \
    }

#define CLI_BMC_USAGE                                                                     \
    "      --bmc HOST[:PORT]  read the wall power from this BMC over the LAN (IPMI 2.0\n" \
    "                     DCMI) instead of in-band through /dev/ipmi0\n"                  \
    "      --bmc-user U   its user (default $WATT_BMC_USER, else anonymous)\n"            \
    "      --bmc-password-file F  its password: F's first line (default $WATT_BMC_PASSWORD)\n"

struct cli_bmc {
    const char *host, *user, *password_file;
};

/* Take option CH (one of CLI_OPT_BMC*) with ARG into B; 1 when it was
 * one of them, 0 when not. */
int cli_bmc_option(struct cli_bmc *b, int ch, const char *arg);
/* Configure the DCMI sampler from B before sense_open(): nothing when no
 * --bmc. Errors (an unreadable password file, --bmc-user without --bmc)
 * are printed naming VERB; returns -errno then. */
int cli_bmc_apply(const char *verb, const struct cli_bmc *b);
