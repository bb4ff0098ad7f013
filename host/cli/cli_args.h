/* Option words shared by the CLI commands: one parser for an option that
 * takes a value, in both spellings ("--state-dir DIR", "--state-dir=DIR"),
 * so every command accepts and refuses them the same way. */
#ifndef TM_CLI_ARGS_H
#define TM_CLI_ARGS_H

/* The exit status of every command for a config it refuses (the loader's
 * errors, librdkafka's refusals, a plugin that cannot be loaded or refuses
 * the config): the same as a usage error, since the command line names
 * something that cannot be used. One value, so that scripts can tell "fix
 * the config" from "it ran and failed" whichever command they call. */
#define TM_EXIT_INVALID_CONFIG 2

/* Matches argv[*i] against NAME. Returns 1 with *out set to the value (and
 * *i moved past a separate value word); 0 when argv[*i] is not NAME; -1
 * when NAME has no (or an empty) value, after printing "tidemark CMD: NAME
 * needs a value" on stderr. A relative --plugin-dir value is resolved
 * against the working directory here (*out then points to a copy that
 * lives as long as the process). */
int tm_cli_opt(const char *cmd, const char *name, int argc, char **argv, int *i,
               const char **out);

#endif
