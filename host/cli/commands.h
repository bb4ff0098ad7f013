/* The CLI commands, one function each, dispatched by main.c. Each takes the
 * command's own argc/argv (argv[0] is the command name) and returns the
 * process exit status: 0 done, 1 failed, 2 usage error. A config a
 * command refuses is TM_EXIT_INVALID_CONFIG (2, cli/cli_args.h) in every
 * command. */
#ifndef TM_CLI_COMMANDS_H
#define TM_CLI_COMMANDS_H

/* tidemark plugins [--json] [--plugin-dir DIR]... (cli/cmd_plugins.c) */
int tm_cmd_plugins(int argc, char **argv);

/* tidemark validate [--plugin-dir DIR]... CONFIG... (cli/cmd_validate.c).
 * Exit 0 all valid, 2 any invalid or a usage error. */
int tm_cmd_validate(int argc, char **argv);

/* tidemark run [--plugin-dir DIR]... [--state-dir DIR] CONFIG...
 * (cli/cmd_run.c). Exit 0 stopped by a signal, 1 a connector failed or
 * could not start, 2 usage error or invalid config. */
int tm_cmd_run(int argc, char **argv);

/* tidemark verify [--plugin-dir DIR]... [--json] CONFIG (cli/cmd_verify.c).
 * Exit 0 no duplicate and no gap, 1 some found, 2 could not verify. */
int tm_cmd_verify(int argc, char **argv);

/* tidemark status [--state-dir DIR] [CONNECTOR] [--json] [--watch [SECONDS]]
 * [--config FILE] (cli/cmd_status.c). Exit 0 healthy, 1 usage or I/O
 * error, 2 a connector FAILED, STOPPED or not running. */
int tm_cmd_status(int argc, char **argv);

/* tidemark offsets CONFIG [--reset-to SPEC] [--json] (cli/cmd_offsets.c).
 * Exit 0 done, 1 refused or failed, 2 usage error or invalid config. */
int tm_cmd_offsets(int argc, char **argv);

/* tidemark table SUBCOMMAND TABLE [OPTIONS] (cli/cmd_table.c): read and
 * maintain an iceberg-lite table, by exec'ing the tool tidemark-iceberg
 * installed beside the binary. Exit 0 done, 1 failed, 2 usage error. */
int tm_cmd_table(int argc, char **argv);

/* tidemark pause|resume|restart [--state-dir DIR] CONNECTOR
 * (cli/cmd_control.c); argv[0] names the request. Exit 0 done, 1 refused
 * or failed, 2 usage error, 3 the connector is not running. */
int tm_cmd_control(int argc, char **argv);

#endif
