/* cli.h: the three commands of mixpar-viz (mixpar viz, mixpar plot, mixpar trace) and what they share. */
#ifndef MIXPAR_VIZ_CLI_H
#define MIXPAR_VIZ_CLI_H

#include "model.h"
#include "source.h"

/* Each takes the arguments after its name and returns an exit code (2: bad input). */
int vz_cmd_viz(int argc, char **argv);
int vz_cmd_plot(int argc, char **argv);
int vz_cmd_trace(int argc, char **argv);

/* Opens RUN_DIR or stops with exit 2: a missing directory, a file, a directory without event files. */
void vz_open_run(vz_source *src, const char *cmd, const char *dir);
/* The same, but an existing directory with no event file yet is accepted (the live view waits for it). */
void vz_open_run_waiting(vz_source *src, const char *cmd, const char *dir);
/* Reads a finished (or paused) run whole into fn: polls until no file is replaced mid-read, then counts a
 * partial last line as truncated. */
void vz_read_run(vz_source *src, vz_event_fn fn, void *ctx, void (*reset)(void *ctx));
/* Warns on stderr about malformed, truncated and newer-version lines; stops with exit 2 when no event at
 * all could be read (every line malformed or of a newer schema). */
void vz_report_reading(const vz_source *src, const char *cmd);

#endif
