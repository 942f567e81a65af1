#!/usr/bin/env bash
# 29-capstone.figures.sh: the figures of chapter 29's deck, from the report of a real run (make lab29's scaled-down
# ZeRO-3 + bf16 + checkpointing run on 2 MPI ranks), drawn by `mixpar plot` through `mixpar report`:
#   29-throughput.png  tokens/s of rank 0 over steps, MFU on the right axis
#   29-memory.png      measured peak bytes per tag beside the planner's
# Usage: slides/29-capstone.figures.sh OUTDIR   (needs build/mixpar: `make`). Uses the run of `make lab29` when it is
# there; otherwise runs the experiment first (under a minute).
source "$(dirname "$0")/figures_lib.sh"

run=runs/lab29/zero3-mini
if [ ! -s "$run/report/throughput.png" ] || [ ! -s "$run/report/memory.png" ]; then
    labs/lab29-capstone/experiment.sh > /dev/null
fi
cp "$run/report/throughput.png" "$outdir/29-throughput.png"
cp "$run/report/memory.png" "$outdir/29-memory.png"
echo "wrote $outdir/29-throughput.png $outdir/29-memory.png"
