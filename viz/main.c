/* main.c: mixpar-viz, the visualizer binary: `mixpar viz|plot|trace ...` exec it with the same arguments.
 * It reads event files only and never links the trainer (DESIGN.md, "Events: one stream, many readers"). */
#include "cli.h"

#include <stdio.h>
#include <string.h>

static const struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} COMMANDS[] = {
    {"viz", vz_cmd_viz, "the terminal visualizer: loss, underflow, comm and memory panels, live or replayed"},
    {"plot", vz_cmd_plot, "gnuplot figures (PNG, SVG or the terminal) and their data files"},
    {"trace", vz_cmd_trace, "a Chrome trace (JSON) for Perfetto or chrome://tracing"},
};

int main(int argc, char **argv) {
    if (argc >= 2)
        for (size_t i = 0; i < sizeof COMMANDS / sizeof COMMANDS[0]; i++)
            if (strcmp(argv[1], COMMANDS[i].name) == 0) return COMMANDS[i].run(argc - 2, argv + 2);
    FILE *out = argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) ? stdout : stderr;
    fprintf(out, "usage: mixpar-viz COMMAND [ARGS]   (usually run as mixpar COMMAND)\n\ncommands:\n");
    for (size_t i = 0; i < sizeof COMMANDS / sizeof COMMANDS[0]; i++)
        fprintf(out, "  %-6s %s\n", COMMANDS[i].name, COMMANDS[i].summary);
    return out == stdout ? 0 : 2;
}
