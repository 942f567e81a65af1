#!/usr/bin/env bash
# 08-zero-ranks.sh: `mixpar run -n 0` (a variable that was empty, e.g. -n $NGPUS): a usage error, exit 2.
source "$(dirname "$0")/common.sh"
"$M" run -n 0 -- "$M" train "${TRAIN[@]}" --set train.run_dir="$scratch/run"
