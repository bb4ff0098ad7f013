/* The ThreadSanitizer build's defaults, compiled into every program of it
 * so that a test run by hand reports as CI does (TSAN_OPTIONS still adds
 * to them).
 *
 * halt_on_error: the first race ends the process (exit 66), so that a
 * test fails even when it never looks at the host's exit status.
 *
 * atexit_sleep_ms=100: the runtime's default sleeps 1000 ms in the main
 * thread before exiting, so that threads still running meet the exit's
 * destructors. Every process of the build paid that second, and the
 * scenarios that time a stop against operations.md's 10 s measured it as
 * the product's (e2e.health.stop_pg_blackholed: "exited after 10103 ms",
 * the last log line 1.0 s before the exit). 100 ms keeps a window for
 * such races (a connector left behind inside its sink runs on past the
 * exit) without charging the stop with the sanitizer's own wait.
 *
 * librdkafka is not built with the sanitizer: its own loads, stores and
 * atomics are invisible to it, so its hand-overs of its own memory from
 * one of its threads to another look like races wherever an intercepted
 * call touches that memory. The suppression leaves out librdkafka's own
 * calls, never a report merely for having a librdkafka frame: a race in our
 * callbacks (log, error, stats, rebalance, delivery report) has its
 * frames under ours, and in the log callback, which it calls on its own
 * threads, a thread it made; such a race is reported
 * (tsan.sees_callback_race). No lock-order report is left out at all.
 *
 * called_from_lib:librdkafka.so.1  the intercepted calls librdkafka makes
 *   itself (malloc, free, memcpy, its read-write locks) pass through
 *   unseen, so freeing or copying memory it handed over with its atomics
 *   is no race. Its C11 threads, locks and call_once are not among them:
 *   it calls them through c11_threads.c, in the program, so its threads
 *   stay known and its mutexes still order (its read-write locks do not).
 *   c11_threads.c leaves the init and destroy of its locks unchecked, for
 *   they too are handed over by what the sanitizer does not see.
 *
 * No race: or deadlock: entry: one matches function names in a report's
 * stacks, but a stack the sanitizer could not restore has none, and
 * librdkafka's own functions have no names here (its package carries no
 * symbols), so such an entry could not name librdkafka's code reliably.
 * The end-to-end scenarios under the sanitizer run clean without one.
 *
 * Not seen at all: librdkafka's own reads of our memory (a message value
 * it copies), so a race between them and our threads goes unreported. */
const char *__tsan_default_options(void);
const char *__tsan_default_suppressions(void);

const char *__tsan_default_options(void) {
    return "halt_on_error=1 second_deadlock_stack=1 atexit_sleep_ms=100";
}

const char *__tsan_default_suppressions(void) {
    return "called_from_lib:librdkafka.so.1\n";
}
