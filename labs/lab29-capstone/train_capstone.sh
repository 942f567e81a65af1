#!/usr/bin/env bash
# train_capstone.sh: trains lab 29's capstone, the small LLaMA-style model of labs/lab29-capstone/capstone.json on the
# poetry corpus (10-15 minutes on 2 cores, run once, outside make test), then grades it with `mixpar report --capstone`:
# parameters in range, training tokens within the budget, validation loss recomputed from the final checkpoint at or
# under the target. Hand in the run directory (events, checkpoint.safetensors, report/) with your capstone.json.
# Usage: labs/lab29-capstone/train_capstone.sh [CONFIG] [RUN_DIR]     (defaults: capstone.json, runs/lab29/capstone)
set -euo pipefail
cd "$(dirname "$0")/../.."
config=${1:-labs/lab29-capstone/capstone.json}
run=${2:-runs/lab29/capstone}
[ -x build/mixpar ] || { echo "train_capstone: build/mixpar is missing; run make first" >&2; exit 2; }
[ -f "$config" ] || { echo "train_capstone: no config $config" >&2; exit 2; }
rm -rf "$run"
mkdir -p "$(dirname "$run")"
start=$(date +%s)
# Both cores for the one rank (OpenMP threads). The trainer writes a checkpoint at the last step whenever the interval
# is > 0; an interval past the end writes only that one (the graded weights).
OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} build/mixpar train --config "$config" --set train.run_dir="$run" \
  --set train.checkpoint_interval=1000000
echo "training took $(( $(date +%s) - start )) s"
build/mixpar report "$run" --capstone
