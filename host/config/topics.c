/* Which topics a connector reads, decided once: the pattern its consumer
 * subscribes with (kafka/consumer.c), and the match every check uses (a
 * dead-letter topic read back by its own connector, connector_config.c;
 * by a cycle of connectors, cross_check.c). The checks match with the
 * exact pattern handed to librdkafka, so that what they match is what the
 * consumer reads. */
#include "config/connector_config.h"

#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* librdkafka anchors a pattern subscription at the start ("^..."); the
 * config's pattern is a POSIX one matched anywhere, as in `grep -E`. The
 * wrapping group shifts the pattern's own groups by one: a back-reference
 * \2 of the config means (x) of "(x)(y)\2" here, which is why no check may
 * use the config's text directly. */
char *tm_config_subscription_pattern(const char *regex) {
    size_t n = strlen(regex) + 8;
    char *s = malloc(n);
    if (s)
        snprintf(s, n, regex[0] == '^' ? "%s" : "^.*(%s)", regex);
    return s;
}

int tm_config_reads_topic(const tm_connector_config *c, const char *topic,
                          char *why, size_t size) {
    for (size_t i = 0; i < c->kafka.ntopics; i++)
        if (strcmp(c->kafka.topics[i], topic) == 0) {
            snprintf(why, size, "also $.kafka.topics[%zu]", i);
            return 1;
        }
    if (!c->kafka.topic_regex)
        return 0;
    char *pattern = tm_config_subscription_pattern(c->kafka.topic_regex);
    if (!pattern)
        return -1;
    /* As librdkafka compiles a subscription pattern. */
    regex_t re;
    int rc = regcomp(&re, pattern, REG_EXTENDED | REG_NOSUB);
    free(pattern);
    if (rc != 0)
        return 0; /* refused by the loader, never subscribed */
    int hit = regexec(&re, topic, 0, NULL, 0) == 0;
    regfree(&re);
    if (hit)
        snprintf(why, size, "matched by $.kafka.topic_regex");
    return hit;
}
