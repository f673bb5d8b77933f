/* --bmc and its credentials (bmc_opts.h). */
#include "cli/bmc_opts.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/util.h"
#include "sense/dcmi.h"

int cli_bmc_option(struct cli_bmc *b, int ch, const char *arg)
{
    switch (ch) {
    case CLI_OPT_BMC:
        b->host = arg;
        return 1;
    case CLI_OPT_BMC_USER:
        b->user = arg;
        return 1;
    case CLI_OPT_BMC_PASSWORD_FILE:
        b->password_file = arg;
        return 1;
    default:
        return 0;
    }
}

/* FILE's first line, into BUF. A password file readable by others is
 * refused, as the agent and the fleet refuse theirs. */
static int read_password(const char *verb, const char *path, char *buf, size_t size)
{
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0) {
        int r = -errno;
        fprintf(stderr, "watt %s: cannot read --bmc-password-file %s: %s\n", verb, path,
                strerror(-r));
        return r;
    }
    if (!S_ISREG(st.st_mode) || (st.st_mode & 077)) {
        fprintf(stderr, "watt %s: --bmc-password-file %s: %s\n", verb, path,
                S_ISREG(st.st_mode) ? "open to group/others: chmod 600 it" : "not a regular file");
        return -EPERM;
    }
    ssize_t n = read(fd, buf, size - 1);
    if (n < 0) {
        int r = -errno;
        fprintf(stderr, "watt %s: cannot read %s: %s\n", verb, path, strerror(-r));
        return r;
    }
    buf[n] = '\0';
    buf[strcspn(buf, "\r\n")] = '\0';
    return 0;
}

int cli_bmc_apply(const char *verb, const struct cli_bmc *b)
{
    char password[128] = "";
    if (!b->host) {
        if (b->user || b->password_file) {
            fprintf(stderr, "watt %s: --bmc-user and --bmc-password-file go with --bmc\n", verb);
            return -EINVAL;
        }
        return 0;
    }
    if (!*b->host) {
        fprintf(stderr, "watt %s: --bmc wants HOST[:PORT]\n", verb);
        return -EINVAL;
    }
    if (b->password_file) {
        int r = read_password(verb, b->password_file, password, sizeof(password));
        if (r < 0)
            return r;
    } else if (getenv("WATT_BMC_PASSWORD"))
        snprintf(password, sizeof(password), "%s", getenv("WATT_BMC_PASSWORD"));
    const char *user = b->user ? b->user : getenv("WATT_BMC_USER");
    dcmi_sampler_configure(&(struct dcmi_lan){
        .host = b->host,
        .user = user ? user : "",
        .password = password,
    });
    explicit_bzero(password, sizeof(password));
    return 0;
}
