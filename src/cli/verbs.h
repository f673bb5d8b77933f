/* The verb table of `watt` (systemd-style): each verb in its own file. */
#pragma once

#include <stdbool.h>

struct verb {
    const char *name;
    int (*fn)(int argc, char **argv); /* argv[0] is the verb */
    const char *help;                 /* one line for `watt --help` */
};

int verb_report(int argc, char **argv);
int verb_snapshot(int argc, char **argv);
int verb_fleet(int argc, char **argv);
int verb_fleet_run(int argc, char **argv); /* cli/fleet_run.c: run, plan, check, host */
int verb_agent(int argc, char **argv);
int verb_ctl(int argc, char **argv);
int verb_tune(int argc, char **argv);    /* cli/tune.c */
int verb_restore(int argc, char **argv); /* cli/tune.c */
int verb_model(int argc, char **argv);   /* cli/model_cmd.c */
int verb_top(int argc, char **argv);     /* cli/top_cmd.c */

/* Shared option handling: opens the root for --root DIR / $WATT_ROOT and
 * prints a clear error naming it on failure. */
struct host;
int cli_open_host(const char *root, struct host **ret);

/* The power model for --model NAME|FILE (NULL: the default for a VM or
 * bare metal) with --pue X (NaN: the model's); errors are printed, naming
 * the verb. */
struct power_model;
int cli_load_model(const char *verb, const char *name, bool vm, double pue, struct power_model *m);
/* The agent's fitted model under the root (cli/fitted.c): -ENOENT when
 * there is none yet; every error with *ret_err one sentence naming the
 * file (and line). */
int cli_load_fitted(struct host *h, struct power_model *ret, char **ret_err);
