/* The checks across the connectors one process runs (run, and validate
 * with several configs), which no single config can fail: a dead letter
 * going round a cycle of connectors, and two connectors in one consumer
 * group (each would get only part of the partitions, or fence the other). */
#include "config/connector_config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Connector j reads connector i's dead letters: an edge i -> j. A dead
 * letter that fails again in j becomes j's dead letter, and so on: a path
 * back to i is an endless loop. */
static int edge(const tm_connector_config *const *cfgs, size_t i, size_t j) {
    char why[64];
    return cfgs[i]->dead_letters.topic &&
           tm_config_reads_topic(cfgs[j], cfgs[i]->dead_letters.topic, why,
                                 sizeof why) != 0;
}

/* Breadth-first from i, so that the cycle named is a shortest one.
 * Returns 1 with prev[] describing it (prev[i] is the last connector before
 * i), 0 when there is none. */
static int cycle_from(const tm_connector_config *const *cfgs, size_t n,
                      size_t i, size_t *prev, size_t *queue) {
    for (size_t k = 0; k < n; k++)
        prev[k] = n; /* unvisited */
    size_t head = 0, tail = 0;
    queue[tail++] = i;
    while (head < tail) {
        size_t u = queue[head++];
        for (size_t v = 0; v < n; v++) {
            if (!edge(cfgs, u, v))
                continue;
            if (v == i) {
                prev[i] = u;
                return 1;
            }
            if (prev[v] == n) {
                prev[v] = u;
                queue[tail++] = v;
            }
        }
    }
    return 0;
}

/* Appends "NAME" (FILE) -> to chain, as far as it fits. */
static void append(char *chain, size_t size, size_t *len,
                   const tm_connector_config *c) {
    int k = snprintf(chain + *len, size - *len, "\"%s\" (%s) -> ", c->name,
                     c->file ? c->file : "-");
    if (k > 0 && (size_t)k < size - *len)
        *len += (size_t)k;
    else
        chain[*len] = '\0';
}

/* The value of librdkafka property key in $.kafka.properties, NULL. */
static const char *property(const tm_connector_config *c, const char *key) {
    for (size_t i = 0; i < c->kafka.nproperties; i++)
        if (strcmp(c->kafka.properties[i].key, key) == 0)
            return c->kafka.properties[i].value;
    return NULL;
}

/* Connector i shares its group (or its static member id) with an earlier
 * one: reported on i, naming the first. Returns 1 when reported. */
static int group_clash(const tm_connector_config *const *cfgs, size_t i,
                       void (*report)(void *ctx, size_t i, const char *line),
                       void *ctx) {
    const tm_connector_config *c = cfgs[i];
    const char *inst = property(c, "group.instance.id");
    char line[2048];
    for (size_t k = 0; k < i; k++) {
        const tm_connector_config *o = cfgs[k];
        const char *oinst = property(o, "group.instance.id");
        if (strcmp(c->name, o->name) == 0)
            continue; /* one name twice: refused as such, by the caller */
        if (c->kafka.group_id && o->kafka.group_id &&
            strcmp(c->kafka.group_id, o->kafka.group_id) == 0)
            snprintf(line, sizeof line,
                     "$.kafka.group_id: expected a consumer group no other "
                     "connector of the process uses, found \"%s\" (also the "
                     "group of connector \"%s\" (%s): the two would split "
                     "the partitions between them)",
                     c->kafka.group_id, o->name, o->file ? o->file : "-");
        else if (inst && oinst && strcmp(inst, oinst) == 0)
            snprintf(line, sizeof line,
                     "$.kafka.properties[\"group.instance.id\"]: expected a "
                     "member id no other connector of the process uses, "
                     "found \"%s\" (also that of connector \"%s\" (%s): "
                     "the two would fence each other out of their groups)",
                     inst, o->name, o->file ? o->file : "-");
        else
            continue;
        report(ctx, i, line);
        return 1;
    }
    return 0;
}

size_t tm_config_cross_check(const tm_connector_config *const *cfgs, size_t n,
                             void (*report)(void *ctx, size_t i,
                                            const char *line),
                             void *ctx) {
    size_t bad = 0;
    size_t *prev = calloc(n ? 2 * n : 1, sizeof *prev);
    if (!prev) {
        report(ctx, 0, "$: out of memory");
        return 1;
    }
    size_t *queue = prev + n;
    for (size_t i = 0; i < n; i++) {
        const tm_connector_config *c = cfgs[i];
        bad += (size_t)group_clash(cfgs, i, report, ctx);
        /* One connector reading its own dead letters is the loader's
         * check; here only cycles through other connectors. */
        if (!c->dead_letters.topic || edge(cfgs, i, i) ||
            !cycle_from(cfgs, n, i, prev, queue))
            continue;
        /* The cycle forward from i: the path was recorded backwards. */
        size_t hops = 0;
        for (size_t v = prev[i]; v != i && hops < n; v = prev[v])
            queue[hops++] = v;
        char chain[1024];
        size_t len = 0;
        append(chain, sizeof chain, &len, c);
        while (hops > 0)
            append(chain, sizeof chain, &len, cfgs[queue[--hops]]);
        char line[2048];
        snprintf(line, sizeof line,
                 "$.dead_letters.topic: expected a topic that does not lead "
                 "back to this connector, found \"%s\" (dead letters would "
                 "go round %s\"%s\", for ever)",
                 c->dead_letters.topic, chain, c->name);
        report(ctx, i, line);
        bad++;
    }
    free(prev);
    return bad;
}
