/* The CLI commands, one function each, dispatched by main.c. Each takes the
 * command's own argc/argv (argv[0] is the command name) and returns the
 * process exit status: 0 done, 1 failed, 2 usage error. */
#ifndef TM_CLI_COMMANDS_H
#define TM_CLI_COMMANDS_H

/* tidemark plugins [--json] [--plugin-dir DIR]... (cli/cmd_plugins.c) */
int tm_cmd_plugins(int argc, char **argv);

/* tidemark validate [--plugin-dir DIR]... CONFIG... (cli/cmd_validate.c) */
int tm_cmd_validate(int argc, char **argv);

#endif
