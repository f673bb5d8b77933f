/* watt agent: the command line of the daemon (agent.c). */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/agent.h"
#include "base/util.h"
#include "cli/verbs.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: watt agent [--config FILE] [--listen ADDR:PORT] [--interval S] [--root DIR]\n"
            "\n"
            "Export power, C-state, frequency, utilisation, interrupt and device metrics to\n"
            "Prometheus: http://127.0.0.1:%u/metrics by default (text 0.0.4, or OpenMetrics\n"
            "when asked by Accept), /status (watt report --json), /healthz.\n"
            "\n"
            "  --config FILE      INI file, [agent] section (docs/agent.md); SIGHUP re-reads it\n"
            "  --listen ADDR:PORT where to listen (default 127.0.0.1:%u)\n"
            "  --interval S       seconds between samples (default 1)\n"
            "  --root DIR         read a recorded tree instead of this machine\n",
            AGENT_DEFAULT_PORT, AGENT_DEFAULT_PORT);
}

int verb_agent(int argc, char **argv)
{
    static const struct option opts[] = {
        {"config", required_argument, NULL, 'c'},   {"listen", required_argument, NULL, 'l'},
        {"interval", required_argument, NULL, 'i'}, {"root", required_argument, NULL, 'r'},
        {"help", no_argument, NULL, 'h'},           {0},
    };
    struct agent_config cfg, ovr;
    const char *config = NULL;
    unsigned mask = 0;
    int ch, r = 0;

    agent_config_default(&cfg);
    agent_config_default(&ovr);
    optind = 1;
    while (r == 0 && (ch = getopt_long(argc, argv, "c:l:i:r:h", opts, NULL)) != -1) {
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
        case 'h':
            usage(stdout);
            r = 1;
            break;
        default:
            usage(stderr);
            r = 2;
        }
    }
    if (r == 0 && optind < argc) {
        fprintf(stderr, "watt agent: unexpected argument '%s'\n", argv[optind]);
        r = 2;
    }
    if (r == 0 && config) {
        _cleanup_free_ char *err = NULL;
        if (agent_config_load(config, &cfg, &err) < 0) {
            fprintf(stderr, "watt agent: %s\n", err);
            r = 2;
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
        r = agent_run(&cfg, config, &ovr, mask) < 0 ? 1 : 0;
    }
    agent_config_free(&cfg);
    agent_config_free(&ovr);
    return r == 1 && !config && mask == 0 ? 0 : r;
}
