/* main.c: the mixpar command-line tool: dispatch to subcommands. */
#include "cli/commands.h"

#include <stdio.h>
#include <string.h>

static const struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} commands[] = {
    {"float", cmd_float, "number formats: bits, rounding error and ulp of values in fp32/tf32/fp16/bf16/fp8"},
    {"plan", cmd_plan, "memory plan of training a transformer: params, grads, optimizer, activations per rank"},
    {"data", cmd_data, "datasets: build token files (synthetic tasks, Tang/Song poetry, fortunes), inspect, encode"},
    {"train", cmd_train, "train a GPT-2 or LLaMA-style model from a DeepSpeed-style config (configs/)"},
    {"sample", cmd_sample, "generate text from a checkpoint written by mixpar train"},
    {"checkpoint", cmd_checkpoint, "inspect a checkpoint; convert GPT-2 weights to and from llm.c's format"},
    {"viz", cmd_viz, "watch a run in the terminal: loss, underflow, comm and memory panels (live or --replay)"},
    {"plot", cmd_plot, "gnuplot figures of a run (PNG, SVG or --term) with their data files"},
    {"trace", cmd_trace, "export a run as a Chrome trace for Perfetto (ui.perfetto.dev) or chrome://tracing"},
    {"amp", cmd_amp, "mixed precision: autocast policy per recipe, loss-scaler traces, fp16 underflow of a run"},
    {"precision", cmd_precision, "running-sum error per format, range probe, fp16 flushes of runs, a static loss scale"},
    {"run", cmd_run, "start a program on N ranks (mpirun underneath): mixpar run -n 4 -- PROGRAM ARGS"},
    {"config", cmd_config, "translate DeepSpeed, Megatron-LM, FSDP or Horovod settings to a mixpar config; compare them"},
    {"doctor", cmd_doctor, "name a run's problems (divergence, leak, desync, dead rank, OOM) with evidence and fix"},
    {"report", cmd_report, "markdown report of a run: loss, tokens/s, MFU, memory against the plan, figures (lab 29)"},
    {"comm-bench", cmd_comm_bench, "time collectives per algorithm and size: algbw, busbw, alpha-beta fit"},
    {"simulate", cmd_simulate, "scaling to 1,024 GPUs: alpha-beta model of DP, ZeRO and 3D steps; calibrate on comm-bench"},
    {"profile", cmd_profile, "a profiled run (train.profile=true): top kernels on the roofline, exposed comm, MFU"},
};
enum { NCOMMANDS = sizeof commands / sizeof commands[0] };

static void usage(FILE *out) {
    fprintf(out, "usage: mixpar COMMAND [ARGS]   (mixpar COMMAND --help for each)\n\ncommands:\n");
    for (int i = 0; i < NCOMMANDS; i++) fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].summary);
}

int main(int argc, char **argv) {
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    for (int i = 0; i < NCOMMANDS; i++)
        if (strcmp(argv[1], commands[i].name) == 0) return commands[i].run(argc - 2, argv + 2);
    fprintf(stderr, "mixpar: unknown command '%s'\n\n", argv[1]);
    usage(stderr);
    return 2;
}
