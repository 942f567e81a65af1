/* cli.c: what the mixpar-viz commands share: opening a run directory, reading it whole, reporting bad lines. */
#include "cli.h"

#include "base/error.h"

#include <stdio.h>

static void open_run(vz_source *src, const char *cmd, const char *dir, bool waiting) {
    char why[4300];
    if ((waiting ? vz_source_open_waiting : vz_source_open)(src, dir, why, sizeof why) != 0)
        MP_FAIL_HINT("a run directory holding events.rank0.jsonl (written by mixpar train)",
                     "runs are written to runs/<run_name>/ (train.run_dir); for example: mixpar train --config "
                     "configs/tiny-poetry.json, then mixpar viz runs/tiny-poetry; samples: viz/samples/",
                     "mixpar %s: %s", cmd, why);
}

void vz_open_run(vz_source *src, const char *cmd, const char *dir) { open_run(src, cmd, dir, false); }
void vz_open_run_waiting(vz_source *src, const char *cmd, const char *dir) { open_run(src, cmd, dir, true); }

void vz_read_run(vz_source *src, vz_event_fn fn, void *ctx, void (*reset)(void *ctx)) {
    for (int attempt = 0; attempt < 5; attempt++) {
        if (vz_source_poll(src, fn, ctx) != VZ_SOURCE_RESET) break;
        if (reset) reset(ctx); /* a file was replaced while we read it: read again */
    }
    vz_source_finish(src);
}

void vz_report_reading(const vz_source *src, const char *cmd) {
    char note[256];
    vz_source_version_note(src, note, sizeof note);
    if (src->events == 0 && (src->newer || src->malformed || src->lines == 0))
        MP_FAIL_HINT("event lines of schema version 1 (core/base/EVENTS.md)",
                     src->newer ? "this mixpar is older than the run's writer: rebuild it (make)" :
                                  "the files may be damaged; a run that just started has no events yet",
                     "mixpar %s: no readable events in %s (%lld lines: %lld malformed, %lld of a newer schema%s%s)", cmd,
                     src->dir, src->lines, src->malformed, src->newer, note[0] ? "; " : "", note);
    if (note[0]) fprintf(stderr, "mixpar %s: warning: %s\n", cmd, note);
    if (src->malformed)
        fprintf(stderr, "mixpar %s: warning: %lld malformed line%s skipped\n", cmd, src->malformed, src->malformed == 1 ? "" : "s");
    if (src->truncated)
        fprintf(stderr, "mixpar %s: warning: %lld truncated last line%s skipped (a run that stopped mid-write, or is still writing)\n",
                cmd, src->truncated, src->truncated == 1 ? "" : "s");
}
