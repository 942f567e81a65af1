/* cmd_viz.c: `mixpar viz`, `mixpar plot` and `mixpar trace` run build/mixpar-viz, the visualizer (viz/), which
 * reads event files only and links ncurses, so the training tool itself never does. */
#include "cli/commands.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Replaces this process with <directory of this executable>/mixpar-viz SUBCOMMAND ARGS...; returns only
 * when that fails (exit code 2, with the path it looked for and how to build it). */
static int exec_viz(const char *subcommand, int argc, char **argv) {
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) {
        fprintf(stderr, "mixpar %s: cannot find this program's own path (/proc/self/exe: %s)\n", subcommand, strerror(errno));
        return 2;
    }
    self[n] = '\0';
    char *slash = strrchr(self, '/');
    char viz[PATH_MAX + 16];
    snprintf(viz, sizeof viz, "%.*s/mixpar-viz", slash ? (int)(slash - self) : 1, slash ? self : ".");
    char **args = calloc((size_t)argc + 3, sizeof *args);
    if (!args) return 2;
    args[0] = viz;
    args[1] = (char *)subcommand;
    for (int i = 0; i < argc; i++) args[i + 2] = argv[i];
    execv(viz, args);
    fprintf(stderr,
            "mixpar %s: the visualizer is missing: %s (%s)\n"
            "  hint: build it with `make` (it needs libncurses-dev and gnuplot: `make deps`)\n",
            subcommand, viz, strerror(errno));
    free(args);
    return 2;
}

int cmd_viz(int argc, char **argv) { return exec_viz("viz", argc, argv); }
int cmd_plot(int argc, char **argv) { return exec_viz("plot", argc, argv); }
int cmd_trace(int argc, char **argv) { return exec_viz("trace", argc, argv); }
