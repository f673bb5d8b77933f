/* The exec engine's command templates ([exec] in fleet.ini): split into
 * words once, when fleet.ini is read, and turned into an argv for each
 * call. No shell ever reads a template or a value: the command is run
 * with posix_spawnp() of that argv.
 *
 * The quoting rule, a plain shell-words split without any expansion:
 *  - blanks (space, tab) separate words;
 *  - '...' groups everything up to the next ', as it is;
 *  - "..." groups up to the next unescaped "; inside, \" \\ \$ and \`
 *    stand for the second character, any other backslash is kept;
 *  - outside quotes, a backslash makes the next character plain (\{ is
 *    a brace, \  a blank inside a word); one at the very end is an error;
 *  - nothing else is special: no $VAR, no globs, no ~, no ; | & > <, no
 *    comments. A pipe or a redirection needs a program that does it:
 *    sh -c 'virsh list --all | my-filter' sh, with the values passed as
 *    the script's "$1" ... (sh -c '...' sh {host}), never pasted into it.
 *
 * A placeholder is "{" NAME "}", NAME being one of {host} {uri} {bmc}
 * {vm} {src} {dst} {dst_uri} (which each key may use: fx_exec_allowed()),
 * outside any quotes. It is replaced by its value as it is, never split
 * and never read by a shell: a placeholder that is a word by itself is
 * exactly one argv word, even when the value is empty or holds blanks,
 * quotes, $(...) or newlines. Glued to other text in one word
 * (--name={vm}, vm-{host}.list) it stays inside that one word. Refused
 * when the template is read, with the key and the template named:
 *  - a placeholder inside quotes ("{vm}", 'x{vm}y'): it would not be a
 *    word of its own in a script that a shell reads later, which is how
 *    a VM name runs as a command (write {vm} outside the quotes);
 *  - a placeholder that the key may not use, or an unknown {NAME}
 *    (write \{NAME} for the literal text);
 *  - a placeholder in the first word: the program to run is written out;
 *  - an unterminated quote, no word at all.
 * "${NAME}" is not a placeholder (a sh -c script's own variable), nor is
 * a brace that does not enclose a NAME ("{}", "{ print $1 }"). */
#pragma once

#include <stddef.h>

enum fx_var {
    FX_VAR_HOST,    /* the host's name ([host NAME]); in migrate, the source's */
    FX_VAR_URI,     /* its libvirt URI, "" when none; in migrate, the source's */
    FX_VAR_BMC,     /* its BMC address, "" when none */
    FX_VAR_VM,      /* migrate: the domain's name */
    FX_VAR_SRC,     /* migrate: the source host's name */
    FX_VAR_DST,     /* migrate: the destination host's name */
    FX_VAR_DST_URI, /* migrate: the destination's libvirt URI, "" when none */
    FX_VAR_N,
};

#define FX_VARS(v) (1u << (v))
/* What list and the power commands may use; what migrate may use. */
#define FX_VARS_HOST (FX_VARS(FX_VAR_HOST) | FX_VARS(FX_VAR_URI) | FX_VARS(FX_VAR_BMC))
#define FX_VARS_MIGRATE                                                                      \
    (FX_VARS(FX_VAR_HOST) | FX_VARS(FX_VAR_URI) | FX_VARS(FX_VAR_VM) | FX_VARS(FX_VAR_SRC) | \
     FX_VARS(FX_VAR_DST) | FX_VARS(FX_VAR_DST_URI))

/* One piece of a word: literal text (VAR < 0), or a placeholder. */
struct fx_part {
    char *text; /* VAR < 0: the literal bytes (owned, may be ""); else NULL */
    int var;    /* enum fx_var, or -1 */
};

struct fx_word {
    struct fx_part *v;
    size_t n;
};

struct fx_tmpl {
    struct fx_word *w; /* at least one; w[0] has no placeholder */
    size_t n;
};

/* "host", "dst_uri", ... */
const char *fx_var_name(enum fx_var v);

/* The placeholders fleet.ini's [exec] KEY ("list", "migrate", "power_on",
 * "power_off", "power_status", "power_reading") may use (FX_VARS_*), or 0
 * for another key. */
unsigned fx_exec_allowed(const char *key);

/* Split TEXT by the rule above, the placeholders of ALLOWED (FX_VARS_*)
 * recognised. 0 and *RET (fx_tmpl_free() it), or -EINVAL and WHY, which
 * quotes the template: "placeholder {vm} inside quotes in 'sh -c \"virsh
 * migrate {vm}\"': ..."; the caller says which key and where. */
int fx_tmpl_split(const char *text, unsigned allowed, struct fx_tmpl *ret, char *why, size_t size);
void fx_tmpl_free(struct fx_tmpl *t);

/* T's words with VALUES[v] (NULL: "") for each placeholder: a
 * NULL-terminated argv of T->n words, each owned (fx_argv_free()). */
char **fx_tmpl_argv(const struct fx_tmpl *t, const char *const values[FX_VAR_N]);
void fx_argv_free(char **argv);
