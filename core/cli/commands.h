/* commands.h: the mixpar subcommands; each takes the arguments after its name and returns an exit code. */
#ifndef MIXPAR_CLI_COMMANDS_H
#define MIXPAR_CLI_COMMANDS_H

int cmd_float(int argc, char **argv); /* number formats explorer (lab 03) */
int cmd_plan(int argc, char **argv);  /* memory planner (lab 01) */
int cmd_data(int argc, char **argv);  /* datasets: build, inspect, encode and decode token files */
int cmd_run(int argc, char **argv);   /* launcher: mpirun with what this machine needs */
int cmd_comm_bench(int argc, char **argv); /* collective timing per algorithm and size (lab 12) */

#endif
