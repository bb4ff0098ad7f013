/* Names the calling thread (Linux: what `top -H`, `ps -L`, perf and
 * /proc/PID/task/TID/comm show), so that an operator or a profile can
 * tell the connector's thread from its sink's and from librdkafka's
 * (which name theirs "rdk:..."). Best effort: a name that cannot be set
 * changes nothing else. */
#ifndef TM_THREAD_NAME_H
#define TM_THREAD_NAME_H

/* role: at most 15 bytes are kept ("tm:sink", "tm:connector"). */
void tm_thread_name(const char *role);

#endif
