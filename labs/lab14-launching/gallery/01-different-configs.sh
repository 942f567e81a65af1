#!/usr/bin/env bash
# 01-different-configs.sh: each rank builds a different model (rank r gets 2+r layers), as when one machine
# has an old copy of the config. The trainer compares every rank's resolved config, key by key, and
# stops all of them: "rank(s) 1 differ from rank 0", exit 2, before any gradient is averaged.
source "$(dirname "$0")/common.sh"
"$M" run -n 2 -- bash -c "exec '$M' train ${TRAIN[*]} --set train.run_dir='$scratch/run' \
  --set model.layers=\$((2 + OMPI_COMM_WORLD_RANK))"
