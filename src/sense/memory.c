/* NUMA node memory and EDAC DIMM population (sense/memory.h). */
#include "sense/memory.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/parse.h"
#include "base/util.h"

/* One "Node N Field:   VALUE kB" line, from p to e (no newline). */
static void meminfo_line(const char *p, const char *e, int node, struct memory_node *ret)
{
    char line[160];
    size_t n = (size_t)(e - p);
    if (n >= sizeof(line))
        return;
    memcpy(line, p, n);
    line[n] = '\0';
    int nd, pos = 0;
    char field[48], num[24], unit[8], extra[2];
    /* drivers/base/node.c: "Node %d MemTotal:       %8lu kB\n". The
     * number is checked as digits: sscanf's %llu would take "-5". */
    if (sscanf(line, "Node %d %47[^: ]:%n", &nd, field, &pos) < 2 || !pos || nd != node)
        return;
    uint64_t v;
    if (sscanf(line + pos, "%23s %7s %1s", num, unit, extra) != 2 || !str_all_digits(num) ||
        parse_u64(num, &v) < 0 || strcmp(unit, "kB") != 0)
        return;
    if (strcmp(field, "MemTotal") == 0)
        ret->total_kb = v;
    else if (strcmp(field, "MemFree") == 0)
        ret->free_kb = v;
    else if (strcmp(field, "MemUsed") == 0)
        ret->used_kb = v;
}

int memory_meminfo_parse(const char *text, size_t len, int node, struct memory_node *ret)
{
    struct memory_node tmp = {
        .total_kb = MEMORY_NONE, .free_kb = MEMORY_NONE, .used_kb = MEMORY_NONE};
    const char *p = text, *end = text + len;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *e = nl ? nl : end;
        meminfo_line(p, e, node, &tmp);
        p = nl ? nl + 1 : end;
    }
    if (tmp.total_kb == MEMORY_NONE)
        return -EBADMSG;
    ret->total_kb = tmp.total_kb;
    ret->free_kb = tmp.free_kb;
    ret->used_kb = tmp.used_kb;
    return 0;
}

void memory_attr_copy(char *buf, size_t n, const char *value)
{
    if (!n)
        return;
    size_t i = 0;
    for (; value && value[i] && value[i] != '\n' && i + 1 < n; i++)
        buf[i] = value[i];
    while (i > 0 && (buf[i - 1] == ' ' || buf[i - 1] == '\t'))
        i--;
    buf[i] = '\0';
}

/* "node12" -> 12; -1 for anything else. */
static long name_index(const char *name, const char *prefix)
{
    size_t pl = strlen(prefix);
    uint64_t v;
    if (strncmp(name, prefix, pl) != 0 || !str_all_digits(name + pl) ||
        parse_u64(name + pl, &v) < 0 || v > 1u << 20)
        return -1;
    return (long)v;
}

static void node_read(struct host *h, const char *dir, struct memory_node *nd)
{
    char path[80];
    snprintf(path, sizeof(path), "%s/cpulist", dir);
    _cleanup_free_ char *cl = NULL;
    if (host_read_str(h, HOST_SYS, path, &cl) >= 0)
        (void)cpuset_parse(cl, &nd->cpus);
    snprintf(path, sizeof(path), "%s/meminfo", dir);
    _cleanup_free_ char *text = NULL;
    size_t len = 0;
    int r = host_read(h, HOST_SYS, path, &text, &len);
    if (r < 0)
        snprintf(nd->why, sizeof(nd->why), "no sys/%s: %s", path, strerror(-r));
    else if (memory_meminfo_parse(text, len, nd->id, nd) < 0)
        snprintf(nd->why, sizeof(nd->why), "sys/%s has no \"Node %d MemTotal:\" line", path,
                 nd->id);
}

static int nodes_read(struct host *h, struct memory_info *m)
{
    const char *base = "devices/system/node";
    char **names = NULL;
    size_t n = 0;
    int r = host_list(h, HOST_SYS, base, &names, &n);
    if (r < 0) {
        snprintf(m->nodes_why, sizeof(m->nodes_why), "no sys/%s (kernel without CONFIG_NUMA)",
                 base);
        return 0;
    }
    m->nodes = calloc(n ? n : 1, sizeof(*m->nodes));
    if (!m->nodes) {
        host_free_list(names, n);
        return -ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        long id = name_index(names[i], "node");
        if (id < 0)
            continue;
        struct memory_node *nd = &m->nodes[m->nnodes++];
        *nd = (struct memory_node){
            .id = (int)id, .total_kb = MEMORY_NONE, .free_kb = MEMORY_NONE, .used_kb = MEMORY_NONE};
        char dir[64];
        snprintf(dir, sizeof(dir), "%s/%s", base, names[i]);
        node_read(h, dir, nd);
    }
    host_free_list(names, n);
    if (!m->nnodes)
        snprintf(m->nodes_why, sizeof(m->nodes_why), "sys/%s lists no nodeN", base);
    return 0;
}

static void attr_read(struct host *h, const char *dir, const char *name, char *buf, size_t n)
{
    char path[192];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    _cleanup_free_ char *v = NULL;
    buf[0] = '\0';
    if (host_read_str(h, HOST_SYS, path, &v) >= 0)
        memory_attr_copy(buf, n, v);
}

static uint64_t u64_attr(struct host *h, const char *dir, const char *name)
{
    char v[32];
    uint64_t x;
    attr_read(h, dir, name, v, sizeof(v));
    return parse_u64(v, &x) >= 0 ? x : MEMORY_NONE;
}

/* dimmN (since 3.7) or, without any, csrowN (the older layout; still
 * there with CONFIG_EDAC_LEGACY_SYSFS). */
static int ctl_dimms(struct host *h, const char *dir, char **names, size_t n, struct memory_ctl *c)
{
    bool have_dimm = false;
    for (size_t i = 0; i < n; i++)
        have_dimm |= name_index(names[i], "dimm") >= 0;
    const char *prefix = have_dimm ? "dimm" : "csrow";
    c->csrow_layout = !have_dimm;
    c->dimms = calloc(n ? n : 1, sizeof(*c->dimms));
    if (!c->dimms)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++) {
        long idx = name_index(names[i], prefix);
        if (idx < 0)
            continue;
        char d[160];
        snprintf(d, sizeof(d), "%s/%s", dir, names[i]);
        struct memory_dimm *m = &c->dimms[c->ndimms];
        *m = (struct memory_dimm){.index = (unsigned)idx};
        m->size_mb = u64_attr(h, d, have_dimm ? "size" : "size_mb");
        if (!have_dimm && m->size_mb == 0)
            continue; /* an empty chip-select row */
        attr_read(h, d, have_dimm ? "dimm_label" : "ch0_dimm_label", m->label, sizeof(m->label));
        attr_read(h, d, have_dimm ? "dimm_mem_type" : "mem_type", m->mem_type, sizeof(m->mem_type));
        if (have_dimm)
            attr_read(h, d, "dimm_location", m->location, sizeof(m->location));
        c->ndimms++;
    }
    return 0;
}

static int edac_read(struct host *h, struct memory_info *m)
{
    const char *base = "devices/system/edac/mc";
    char **names = NULL;
    size_t n = 0;
    if (host_list(h, HOST_SYS, base, &names, &n) < 0) {
        snprintf(m->edac_why, sizeof(m->edac_why),
                 "no sys/%s: no EDAC driver loaded (or none for this platform; VMs have none)",
                 base);
        return 0;
    }
    m->ctls = calloc(n ? n : 1, sizeof(*m->ctls));
    if (!m->ctls) {
        host_free_list(names, n);
        return -ENOMEM;
    }
    int r = 0;
    for (size_t i = 0; i < n && r >= 0; i++) {
        long id = name_index(names[i], "mc");
        if (id < 0)
            continue;
        struct memory_ctl *c = &m->ctls[m->nctls++];
        *c = (struct memory_ctl){.id = (unsigned)id};
        char dir[96];
        snprintf(dir, sizeof(dir), "%s/%s", base, names[i]);
        attr_read(h, dir, "mc_name", c->name, sizeof(c->name));
        c->size_mb = u64_attr(h, dir, "size_mb");
        char **sub = NULL;
        size_t ns = 0;
        if (host_list(h, HOST_SYS, dir, &sub, &ns) >= 0) {
            r = ctl_dimms(h, dir, sub, ns, c);
            host_free_list(sub, ns);
        }
    }
    host_free_list(names, n);
    if (r >= 0 && !m->nctls)
        snprintf(m->edac_why, sizeof(m->edac_why), "sys/%s lists no memory controller", base);
    return r;
}

int memory_read(struct host *h, struct memory_info *ret)
{
    struct memory_info m = {0};
    int r = nodes_read(h, &m);
    if (r >= 0)
        r = edac_read(h, &m);
    if (r < 0) {
        memory_info_free(&m);
        return r;
    }
    *ret = m;
    return 0;
}

void memory_info_free(struct memory_info *m)
{
    if (!m)
        return;
    for (size_t i = 0; i < m->nnodes; i++)
        cpuset_free(&m->nodes[i].cpus);
    free(m->nodes);
    for (size_t i = 0; i < m->nctls; i++)
        free(m->ctls[i].dimms);
    free(m->ctls);
    *m = (struct memory_info){0};
}
