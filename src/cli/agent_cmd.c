/* watt agent: the command line of the daemon (agent.c). */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "agent/agent.h"
#include "base/text.h"
#include "base/util.h"
#include "cli/verbs.h"
#include "config.h"
#include "tune/profile.h"

/* sysexits.h's EX_CONFIG: the config file is missing (given with
 * --config), unreadable or broken. Restarting cannot help, so the unit
 * lists it in RestartPreventExitStatus= (dist/watt-agent.service.in). */
#define AGENT_EXIT_CONFIG 78

static void usage(FILE *f)
{
    fprintf(f,
            "usage: watt agent [--config FILE] [--listen ADDR:PORT] [--interval S] [--root DIR]\n"
            "                  [--profile NAME]\n"
            "\n"
            "Export power, C-state, frequency, utilisation, interrupt and device metrics to\n"
            "Prometheus: http://127.0.0.1:%u/metrics by default (text 0.0.4, or OpenMetrics\n"
            "when asked by Accept), /status (watt report --json), /healthz.\n"
            "\n"
            "  --config FILE      INI file, [agent] section (docs/agent.md); SIGHUP re-reads it\n"
            "                     (default %s when it exists, else built-in defaults)\n"
            "  --listen ADDR:PORT where to listen (default 127.0.0.1:%u)\n"
            "  --interval S       seconds between samples (default 1)\n"
            "  --root DIR         read a recorded tree instead of this machine\n"
            "  --control PATH     the watt ctl socket (default %s; '' for none)\n"
            "  --profile NAME     apply this watt tune profile while running and run its\n"
            "                     [latency] guard; restored on exit (docs/agent.md)\n"
            "\n"
            "Exit status: 0 stopped by a signal, 1 could not start, 2 bad usage,\n"
            "%d the config file is missing (--config), unreadable or broken.\n",
            AGENT_DEFAULT_PORT, WATT_AGENT_CONFIG, AGENT_DEFAULT_PORT, AGENT_DEFAULT_CONTROL,
            AGENT_EXIT_CONFIG);
}

/* Without --config: the default file when it is there (an unreadable one
 * is an error, as with --config), built-in defaults when it is not, so
 * that a fresh install's service starts (loopback only, nothing tuned).
 * The file is still the one a SIGHUP reads, once someone writes it. */
static bool default_config_missing(void)
{
    if (access(WATT_AGENT_CONFIG, F_OK) == 0 || errno != ENOENT)
        return false;
    fprintf(stderr, "watt agent: no %s: running on built-in defaults\n", WATT_AGENT_CONFIG);
    return true;
}

int verb_agent(int argc, char **argv)
{
    static const struct option opts[] = {
        {"config", required_argument, NULL, 'c'},   {"listen", required_argument, NULL, 'l'},
        {"interval", required_argument, NULL, 'i'}, {"root", required_argument, NULL, 'r'},
        {"control", required_argument, NULL, 'C'},  {"profile", required_argument, NULL, 'p'},
        {"help", no_argument, NULL, 'h'},           {0},
    };
    struct agent_config cfg, ovr;
    const char *config = NULL;
    unsigned mask = 0;
    int ch, r = 0;
    bool help = false;

    agent_config_default(&cfg);
    agent_config_default(&ovr);
    optind = 1;
    while (r == 0 && !help && (ch = getopt_long(argc, argv, "c:l:i:r:h", opts, NULL)) != -1) {
        switch (ch) {
        case 'c':
            config = optarg;
            break;
        case 'l':
            free(ovr.listen_host);
            ovr.listen_host = NULL;
            if (agent_parse_listen(optarg, &ovr.listen_host, &ovr.port) < 0) {
                fprintf(stderr, "watt agent: --listen '%s': want ADDR:PORT (port 1..65535)\n",
                        optarg);
                r = 2;
            }
            mask |= AGENT_OVR_LISTEN;
            break;
        case 'i': {
            char *end;
            errno = 0;
            double v = strtod(optarg, &end);
            if (errno || end == optarg || *end || !(v >= 0.1 && v <= 3600)) {
                fprintf(stderr, "watt agent: --interval '%s': want seconds, 0.1..3600\n", optarg);
                r = 2;
            }
            ovr.interval_s = v;
            mask |= AGENT_OVR_INTERVAL;
            break;
        }
        case 'r':
            free(ovr.root);
            ovr.root = xstrdup(optarg);
            mask |= AGENT_OVR_ROOT;
            break;
        case 'C':
            free(ovr.control);
            ovr.control = xstrdup(optarg);
            mask |= AGENT_OVR_CONTROL;
            break;
        case 'p':
            if (!profile_name_ok(optarg)) {
                fprintf(stderr, "watt agent: --profile '%s': not a profile name\n", optarg);
                r = 2;
            }
            free(ovr.profile);
            ovr.profile = xstrdup(optarg);
            mask |= AGENT_OVR_PROFILE;
            break;
        case 'h':
            usage(stdout);
            help = true;
            break;
        default:
            usage(stderr);
            r = 2;
        }
    }
    if (help) {
        agent_config_free(&cfg);
        agent_config_free(&ovr);
        return 0;
    }
    if (r == 0 && optind < argc) {
        fprintf(stderr, "watt agent: unexpected argument '%s'\n", argv[optind]);
        r = 2;
    }
    bool optional = !config, missing = false;
    if (!config)
        config = WATT_AGENT_CONFIG;
    if (r == 0 && optional)
        missing = default_config_missing();
    if (r == 0 && !missing) {
        _cleanup_free_ char *err = NULL;
        if (agent_config_load(config, &cfg, &err) < 0) {
            fprintf(stderr, "watt agent: %s\n", err);
            r = AGENT_EXIT_CONFIG;
        }
    }
    if (r == 0) {
        if (mask & AGENT_OVR_LISTEN) {
            free(cfg.listen_host);
            cfg.listen_host = xstrdup(ovr.listen_host);
            cfg.port = ovr.port;
        }
        if (mask & AGENT_OVR_INTERVAL)
            cfg.interval_s = ovr.interval_s;
        if (mask & AGENT_OVR_ROOT) {
            free(cfg.root);
            cfg.root = xstrdup(ovr.root);
        }
        if (mask & AGENT_OVR_CONTROL) {
            free(cfg.control);
            cfg.control = xstrdup(ovr.control);
        }
        if (mask & AGENT_OVR_PROFILE) {
            free(cfg.profile);
            cfg.profile = xstrdup(ovr.profile);
        }
        r = agent_run(&cfg, config, optional, &ovr, mask) < 0 ? 1 : 0;
    }
    agent_config_free(&cfg);
    agent_config_free(&ovr);
    return r;
}

int verb_ctl(int argc, char **argv)
{
    const char *path = AGENT_DEFAULT_CONTROL, *cmd = NULL;
    for (int i = 1; i < argc; i++) {
        if (streq(argv[i], "--socket") && i + 1 < argc)
            path = argv[++i];
        else if (streq(argv[i], "--help") || streq(argv[i], "-h")) {
            printf("usage: watt ctl [--socket PATH] status|reload|sample\n\n"
                   "Talk to a running watt agent (root only): its state as JSON, re-read its\n"
                   "config, or take a sample now. Default socket: %s\n",
                   AGENT_DEFAULT_CONTROL);
            return 0;
        } else if (!cmd && (streq(argv[i], "status") || streq(argv[i], "reload") ||
                            streq(argv[i], "sample")))
            cmd = argv[i];
        else {
            fprintf(stderr, "watt ctl: unexpected '%s' (status, reload, sample; --socket)\n",
                    argv[i]);
            return 2;
        }
    }
    if (!cmd) {
        fprintf(stderr, "watt ctl: which command? status, reload or sample\n");
        return 2;
    }
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof(sa.sun_path)) {
        fprintf(stderr, "watt ctl: socket path too long: %s\n", path);
        return 2;
    }
    memcpy(sa.sun_path, path, strlen(path));
    _cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        fprintf(stderr, "watt ctl: cannot reach the agent at %s: %s\n", path, strerror(errno));
        return 1;
    }
    char line[16];
    int n = snprintf(line, sizeof(line), "%s\n", cmd);
    /* MSG_NOSIGNAL: an agent that closed the connection (stopping, or
     * one that is not an agent) is an error to report, not a SIGPIPE */
    if (send(fd, line, (size_t)n, MSG_NOSIGNAL) != n) {
        fprintf(stderr, "watt ctl: the agent at %s closed the connection before taking '%s': %s\n",
                path, cmd, strerror(errno));
        return 1;
    }
    char buf[4096];
    size_t got = 0;
    ssize_t r;
    while (got < sizeof(buf) - 1 && (r = read(fd, buf + got, sizeof(buf) - 1 - got)) != 0) {
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            fprintf(stderr, "watt ctl: reading the answer from %s: %s\n", path, strerror(errno));
            return 1;
        }
        got += (size_t)r;
    }
    buf[got] = '\0';
    bool error = got == 0 || strncmp(buf, "error:", 6) == 0;
    /* the answer names a profile, a path: shown printable, whoever wrote it */
    text_fputs(got ? buf : "error: the agent closed the connection\n", error ? stderr : stdout);
    return error ? 1 : 0;
}
