/* The ThreadSanitizer build's defaults, compiled into every program of it
 * so that a test run by hand reports as CI does (TSAN_OPTIONS still adds
 * to them).
 *
 * halt_on_error: the first race ends the process (exit 66), so that a
 * test fails even when it never looks at the host's exit status.
 *
 * librdkafka is not built with the sanitizer: its atomics are invisible to
 * it, so its own hand-overs (a broker thread's lock destroyed after a
 * reference count reached zero) look like races. Every report with a frame
 * in librdkafka is left out; races between tidemark's own threads, and
 * between them and the libraries built for the sanitizer, are reported. */
const char *__tsan_default_options(void);
const char *__tsan_default_suppressions(void);

const char *__tsan_default_options(void) {
    return "halt_on_error=1 second_deadlock_stack=1";
}

const char *__tsan_default_suppressions(void) {
    return "race:librdkafka.so.1\n"
           "deadlock:librdkafka.so.1\n";
}
