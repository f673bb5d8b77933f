/* `watt snapshot -o FILE.tar`: record exactly the files watt reads (not
 * all of /sys), with the symlinks met on the way, so a user can attach
 * their machine to a bug report and a test can replay it with --root. */
#include <archive.h>
#include <archive_entry.h>
#include <dlfcn.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/parse.h"
#include "base/strbuf.h"
#include "base/util.h"
#include "cli/verbs.h"
#include "config.h"
#include "sense/memory.h"
#include "sense/sampler.h"

/* libarchive is loaded only by this verb: linked in, it and its own
 * dependencies (libxml2, ICU, libstdc++) cost every `watt report` ~2 ms
 * of start-up, half of its budget. */
#define ARCHIVE_FUNCS(X)                       \
    X(archive_write_new)                       \
    X(archive_write_set_format_pax_restricted) \
    X(archive_write_open_fd)                   \
    X(archive_write_open_filename)             \
    X(archive_error_string)                    \
    X(archive_write_free)                      \
    X(archive_entry_new)                       \
    X(archive_entry_set_pathname)              \
    X(archive_entry_set_mtime)                 \
    X(archive_entry_set_uid)                   \
    X(archive_entry_set_gid)                   \
    X(archive_entry_set_filetype)              \
    X(archive_entry_set_perm)                  \
    X(archive_entry_set_symlink)               \
    X(archive_entry_set_size)                  \
    X(archive_write_header)                    \
    X(archive_write_data)                      \
    X(archive_entry_free)                      \
    X(archive_write_close)

static struct {
#define DECLARE(name) __typeof__(name) *name;
    ARCHIVE_FUNCS(DECLARE)
#undef DECLARE
} la;

static int load_libarchive(void)
{
    void *dl = dlopen("libarchive.so.13", RTLD_NOW | RTLD_LOCAL);
    if (!dl) {
        fprintf(stderr,
                "watt snapshot: cannot load libarchive: %s (apt-get install libarchive13)\n",
                dlerror());
        return -ENOENT;
    }
#define LOAD(name)                                                      \
    if (!(la.name = (__typeof__(la.name))dlsym(dl, #name))) {           \
        fprintf(stderr, "watt snapshot: libarchive lacks %s\n", #name); \
        return -ENOENT;                                                 \
    }
    ARCHIVE_FUNCS(LOAD)
#undef LOAD
    return 0;
}

enum rec_kind { REC_DIR, REC_LINK, REC_FILE };

struct rec {
    enum rec_kind kind;
    char *path;
    char *data; /* file content or link target */
    size_t len;
};

struct recording {
    struct rec *v;
    size_t n, cap;
};

static void add(struct recording *r, enum rec_kind kind, const char *path, const void *data,
                size_t len)
{
    if (!*path)
        return;
    r->v = grow_array(r->v, sizeof(*r->v), r->n, &r->cap);
    struct rec *e = &r->v[r->n++];
    e->kind = kind;
    e->path = xstrdup(path);
    e->data = xmalloc(len + 1);
    memcpy(e->data, data, len);
    e->data[len] = '\0';
    e->len = len;
}

static void on_file(void *ud, const char *real, const void *data, size_t len)
{
    add(ud, REC_FILE, real, data, len);
}

static void on_link(void *ud, const char *path, const char *target)
{
    add(ud, REC_LINK, path, target, strlen(target));
}

static void on_dir(void *ud, const char *real)
{
    add(ud, REC_DIR, real, "", 0);
}

/* Sort by path, then keep the first record of each path: the first read
 * is the state the snapshot stands for. */
static int rec_cmp(const void *a, const void *b)
{
    const struct rec *x = a, *y = b;
    int c = strcmp(x->path, y->path);
    if (c)
        return c;
    return (x > y) - (x < y);
}

static void rec_free(struct recording *r)
{
    for (size_t i = 0; i < r->n; i++) {
        free(r->v[i].path);
        free(r->v[i].data);
    }
    free(r->v);
}

static int write_entry(struct archive *a, const struct rec *e, time_t now)
{
    struct archive_entry *ae = la.archive_entry_new();
    la.archive_entry_set_pathname(ae, e->path);
    la.archive_entry_set_mtime(ae, now, 0);
    la.archive_entry_set_uid(ae, 0);
    la.archive_entry_set_gid(ae, 0);
    switch (e->kind) {
    case REC_DIR:
        la.archive_entry_set_filetype(ae, AE_IFDIR);
        la.archive_entry_set_perm(ae, 0755);
        break;
    case REC_LINK:
        la.archive_entry_set_filetype(ae, AE_IFLNK);
        la.archive_entry_set_perm(ae, 0777);
        la.archive_entry_set_symlink(ae, e->data);
        break;
    case REC_FILE:
        la.archive_entry_set_filetype(ae, AE_IFREG);
        la.archive_entry_set_perm(ae, 0444);
        la.archive_entry_set_size(ae, (la_int64_t)e->len);
        break;
    }
    int r = la.archive_write_header(a, ae);
    if (r == ARCHIVE_OK && e->kind == REC_FILE && e->len)
        r = la.archive_write_data(a, e->data, e->len) == (la_ssize_t)e->len ? ARCHIVE_OK
                                                                            : ARCHIVE_FATAL;
    la.archive_entry_free(ae);
    return r == ARCHIVE_OK ? 0 : -EIO;
}

static char *describe(const struct sense *s, const struct sample *smp, const char *root)
{
    struct strbuf b = {0};
    strbuf_appendf(&b, "watt snapshot\nwatt_version: %s\nroot: %s\nhostname: %s\nkernel: %s\n",
                   WATT_VERSION, root, smp->hostname ? smp->hostname : "-",
                   smp->kernel ? smp->kernel : "-");
    strbuf_appendf(&b, "taken_unix_s: %" PRIu64 "\n", smp->real_ns / 1000000000u);
    strbuf_append(&b, "# Replay with: watt report --root DIR (after tar -xf into DIR)\n");
    strbuf_append(&b, "# Files that could not be read are absent; their reasons:\n");
    for (size_t i = 0; i < smp->diags.n; i++)
        strbuf_appendf(&b, "problem: %s: %s\n", smp->diags.v[i].where, smp->diags.v[i].what);
    for (int i = 0; i < _SAMPLER_MAX; i++)
        if (!s->usable[i])
            strbuf_appendf(&b, "unavailable: %s: %s\n", sampler_table[i]->name, s->why[i]);
    return strbuf_steal(&b);
}

static int write_tar(const char *out, struct recording *rec, const char *meta)
{
    qsort(rec->v, rec->n, sizeof(*rec->v), rec_cmp);
    struct archive *a = la.archive_write_new();
    la.archive_write_set_format_pax_restricted(a);
    int r = streq(out, "-") ? la.archive_write_open_fd(a, STDOUT_FILENO)
                            : la.archive_write_open_filename(a, out);
    if (r != ARCHIVE_OK) {
        fprintf(stderr, "watt snapshot: cannot write %s: %s\n", out, la.archive_error_string(a));
        la.archive_write_free(a);
        return -EIO;
    }
    time_t now = time(NULL);
    struct rec m = {
        .kind = REC_FILE, .path = "watt-snapshot.txt", .data = (char *)meta, .len = strlen(meta)};
    int err = write_entry(a, &m, now);
    for (size_t i = 0; i < rec->n && err == 0; i++) {
        if (i > 0 && streq(rec->v[i].path, rec->v[i - 1].path))
            continue;
        err = write_entry(a, &rec->v[i], now);
    }
    if (la.archive_write_close(a) != ARCHIVE_OK)
        err = -EIO;
    if (err)
        fprintf(stderr, "watt snapshot: writing %s failed: %s\n", out, la.archive_error_string(a));
    la.archive_write_free(a);
    return err;
}

static void usage(FILE *f)
{
    fputs("usage: watt snapshot -o FILE.tar [--root DIR]\n"
          "\n"
          "Record exactly the files `watt report` reads (not all of /sys), with the\n"
          "symlinks on their paths, into a tar. Unpack it and pass the folder to --root\n"
          "to replay: watt report --root DIR. FILE '-' writes to standard output.\n"
          "\n"
          "  -o, --output FILE  the tar to write (required)\n"
          "  -r, --root DIR     record from a recorded tree instead of / (also $WATT_ROOT)\n",
          f);
}

int verb_snapshot(int argc, char **argv)
{
    static const struct option opts[] = {
        {"output", required_argument, NULL, 'o'},
        {"root", required_argument, NULL, 'r'},
        {"help", no_argument, NULL, 'h'},
        {0},
    };
    const char *out = NULL, *root = NULL;
    int ch;
    optind = 1;
    while ((ch = getopt_long(argc, argv, "o:r:h", opts, NULL)) != -1) {
        if (ch == 'o')
            out = optarg;
        else if (ch == 'r')
            root = optarg;
        else if (ch == 'h') {
            usage(stdout);
            return 0;
        } else {
            usage(stderr);
            return 2;
        }
    }
    if (!out || optind < argc) {
        fprintf(stderr, "watt snapshot: %s\n",
                out ? "unexpected argument" : "-o FILE.tar is required");
        return 2;
    }
    if (load_libarchive() < 0)
        return 1;
    struct host *h;
    if (cli_open_host(root, &h) < 0)
        return 1;
    struct recording rec = {0};
    struct host_recorder hr = {.file = on_file, .link = on_link, .dir = on_dir, .ud = &rec};
    struct sense *s;
    host_set_recorder(h, &hr);
    sense_open(h, &s); /* probes read files too: record them */
    struct sample *smp;
    sense_sample(s, &smp);
    /* what watt report reads besides the samplers: node memory and DIMMs */
    struct memory_info mem;
    if (memory_read(h, &mem) == 0)
        memory_info_free(&mem);
    host_set_recorder(h, NULL);
    _cleanup_free_ char *meta = describe(s, smp, h->root);
    int r = write_tar(out, &rec, meta);
    if (r == 0 && !streq(out, "-"))
        fprintf(stderr, "watt snapshot: %zu entries written to %s\n", rec.n, out);
    rec_free(&rec);
    sample_free(smp);
    sense_close(s);
    host_close(h);
    return r < 0 ? 1 : 0;
}
