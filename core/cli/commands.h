/* commands.h: the mixpar subcommands; each takes the arguments after its name and returns an exit code. */
#ifndef MIXPAR_CLI_COMMANDS_H
#define MIXPAR_CLI_COMMANDS_H

#include <stdbool.h>

int cmd_float(int argc, char **argv); /* number formats explorer (lab 03) */
int cmd_plan(int argc, char **argv);  /* memory planner (lab 01) */
bool plan_args_name_config(int argc, char **argv); /* `mixpar plan --config FILE`: ... */
int cmd_plan_config(int argc, char **argv);        /* ... the plan a run of that config records */
int cmd_data(int argc, char **argv);  /* datasets: build, inspect, encode and decode token files */
int cmd_train(int argc, char **argv);  /* train a model from a config */
int cmd_sample(int argc, char **argv); /* generate text from a checkpoint */
int cmd_checkpoint(int argc, char **argv); /* inspect checkpoints; llm.c import and export */
/* The visualizer's commands: each runs build/mixpar-viz (viz/) with its arguments. */
int cmd_viz(int argc, char **argv);   /* terminal visualizer of a run's events, live or replayed */
int cmd_plot(int argc, char **argv);  /* gnuplot figures of a run */
int cmd_trace(int argc, char **argv); /* Chrome trace export of a run */
int cmd_amp(int argc, char **argv);   /* autocast policy, loss-scaler traces, underflow (labs 05, 09) */
int cmd_precision(int argc, char **argv); /* running sums, range probe, flush counts, static scale (labs 04, 06) */
int cmd_run(int argc, char **argv);   /* launcher: mpirun with what this machine needs */
int cmd_comm_bench(int argc, char **argv); /* collective timing per algorithm and size (lab 12) */
int cmd_simulate(int argc, char **argv);   /* scaling simulator: step time and efficiency on a cluster (lab 26) */
int cmd_profile(int argc, char **argv); /* a profiled run: top kernels on the roofline, exposed comm (lab 23) */
int cmd_config(int argc, char **argv);     /* translate other frameworks' settings; the frameworks table (lab 27) */
int cmd_doctor(int argc, char **argv); /* a run's problems, their evidence and fixes (lab 24) */
int cmd_report(int argc, char **argv); /* a run's markdown report and figures; the capstone's check (lab 29) */

#endif
